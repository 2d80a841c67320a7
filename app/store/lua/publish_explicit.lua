-- Publish the state of an explicit change (reset, import) as the model's new
-- version (version + 1; the applied stream id and the counters stay, so the
-- events queued meanwhile apply on top of it), only while the snapshot is at
-- the version the change read; keep it (within the limit) and add its marker
-- to the decision log in the same step.  The log is otherwise left as it is:
-- nothing is logged or trimmed.
-- KEYS: 1 snapshot, 2 model (config), 3 decision log, 4 kept versions (zset),
--       5 kept states (hash)
-- ARGV: 1 expected version, 2 state blob, 3 updated_at, 4 marker name ('' =
--       none), 5 its detail (JSON object; "version" is added), 6 versions
--       kept, 7 the reason it is kept
-- Returns the new version, else a ScriptResult (app/store/results.py): MOVED
-- when the version moved (the trainer published meanwhile), GONE when the
-- model is gone.
--! include lib_log_marker
--! include lib_keep_version
local cur = redis.call('HGET', KEYS[1], 'version')
if not cur then
  return -3  -- ScriptResult.GONE
end
if cur ~= ARGV[1] then
  return -1  -- ScriptResult.MOVED
end
local v = tonumber(cur) + 1
redis.call('HSET', KEYS[1], 'state', ARGV[2], 'version', v, 'updated_at', ARGV[3])
keep_version(KEYS[1], KEYS[2], KEYS[4], KEYS[5], 0, ARGV[6], '', ARGV[7])
if ARGV[4] ~= '' then
  log_marker(KEYS[2], KEYS[3], ARGV[4], with_version(ARGV[5], v))
end
return v
