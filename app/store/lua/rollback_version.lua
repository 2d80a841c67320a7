-- Publish a kept version's state as a new version (version + 1; the applied
-- stream id and the counters stay, so events queued since still apply, once),
-- copied inside Redis, with the config the version was kept under, only while
-- the model's config is still the one read (a promotion or another rollback
-- meanwhile set another algorithm, whose config would stay over this state),
-- and add its rollback marker to the decision log in the same step.  The
-- state replaced is kept first ('before rollback', so the rollback can be
-- undone), then the new version ('rollback'), within the limit.
-- KEYS: 1 snapshot, 2 model (config), 3 kept states (hash), 4 decision log,
--       5 kept versions (zset)
-- ARGV: 1 version to restore, 2 updated_at, 3 config as read, 4 config to set
--       ('' = keep the config), 5 the marker's detail (JSON object; "version"
--       is added), 6 versions kept
-- Returns the new version, else a ScriptResult (app/store/results.py):
-- NOT_KEPT when the version is not kept, MOVED when the config changed since
-- it was read, GONE when the model is gone.
--! include lib_log_marker
--! include lib_keep_version
local cur = redis.call('HGET', KEYS[1], 'version')
if not cur then
  return -3  -- ScriptResult.GONE
end
local state = redis.call('HGET', KEYS[3], 's:' .. ARGV[1])
if not state then
  return -9  -- ScriptResult.NOT_KEPT
end
if redis.call('HGET', KEYS[2], 'config') ~= ARGV[3] then
  return -1  -- ScriptResult.MOVED
end
keep_version(KEYS[1], KEYS[2], KEYS[5], KEYS[3], 0, ARGV[6], '', 'before rollback')
if ARGV[4] ~= '' then
  redis.call('HSET', KEYS[2], 'config', ARGV[4])
end
local v = tonumber(cur) + 1
redis.call('HSET', KEYS[1], 'state', state, 'version', v, 'updated_at', ARGV[2])
keep_version(KEYS[1], KEYS[2], KEYS[5], KEYS[3], 0, ARGV[6], '', 'rollback')
log_marker(KEYS[2], KEYS[4], 'rollback', with_version(ARGV[5], v))
return v
