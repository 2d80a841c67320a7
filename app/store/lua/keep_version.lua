-- Keep the model's current snapshot as a version (see lib_keep_version.lua).
-- KEYS: 1 snapshot, 2 model (config), 3 kept versions (zset), 4 kept states (hash)
-- ARGV: 1 interval seconds (0 = no interval), 2 versions kept, 3 expected
--       version ('' = any), 4 reason
-- Returns the version kept, or 0 when none was.
--! include lib_keep_version
return keep_version(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1], ARGV[2], ARGV[3], ARGV[4])
