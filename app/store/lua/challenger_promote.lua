-- Promote a challenger in one step: its config becomes the model's config
-- and its state the model's snapshot (version + 1); the old champion's
-- config and state become the challenger ARGV[5] (or are dropped); every
-- estimator sum starts afresh (they compared with the old champion); its
-- promote marker goes to the decision log and, within the limit, the
-- replaced state ('before promote') and the new one ('promote') are kept as
-- versions, in the same step.
-- KEYS: 1 meta, 2 snapshot, 3 challengers, 4 challenger states,
--       5 challenger stats, 6 decision log, 7 kept versions (zset), 8 kept
--       states (hash)
-- ARGV: 1 name, 2 its definition JSON as read, 3 the model config JSON as
--       read, 4 the new model config JSON, 5 name the old champion keeps
--       as a challenger ('' = drop it), 6 its definition JSON, 7 updated_at,
--       8 '1' to require the challenger to have learned the model's last
--       published batch (its stats' last_id is the snapshot's), 9 the
--       marker's detail (JSON object; "version" is added), 10 versions kept
-- Returns the new version, else a ScriptResult (app/store/results.py): MOVED
-- when the model config changed since it was read, CHALLENGER_CHANGED when
-- the challenger is gone or changed, GONE when the model is gone, NAME_TAKEN
-- when ARGV[5] names another existing challenger, BEHIND when ARGV[8] is '1'
-- and the challenger has not saved the last published batch yet (the
-- trainer publishes the champion's batch first, then saves the challengers':
-- its state then lacks that batch, which the stream will not deliver again),
-- FAILED when the challenger failed (its stats' status is 'failed').
--! include lib_log_marker
--! include lib_keep_version
local cur = redis.call('HGET', KEYS[2], 'version')
local config = redis.call('HGET', KEYS[1], 'config')
if not cur or not config then
  return -3  -- ScriptResult.GONE
end
if config ~= ARGV[3] then
  return -1  -- ScriptResult.MOVED
end
if redis.call('HGET', KEYS[3], ARGV[1]) ~= ARGV[2] then
  return -7  -- ScriptResult.CHALLENGER_CHANGED
end
if ARGV[5] ~= '' and ARGV[5] ~= ARGV[1] and redis.call('HEXISTS', KEYS[3], ARGV[5]) == 1 then
  return -4  -- ScriptResult.NAME_TAKEN
end
local stats = redis.call('HGET', KEYS[5], ARGV[1])
stats = stats and cjson.decode(stats)
if stats and stats.status == 'failed' then
  return -6  -- ScriptResult.FAILED
end
if ARGV[8] == '1' and stats then
  local last = stats.last_id
  if type(last) == 'string' and last ~= redis.call('HGET', KEYS[2], 'last_id') then
    return -5  -- ScriptResult.BEHIND
  end
end
keep_version(KEYS[2], KEYS[1], KEYS[7], KEYS[8], 0, ARGV[10], '', 'before promote')
local state = redis.call('HGET', KEYS[4], ARGV[1])
local old_state = redis.call('HGET', KEYS[2], 'state')
local v = tonumber(cur) + 1
redis.call('HSET', KEYS[2], 'state', state, 'version', v, 'updated_at', ARGV[7])
redis.call('HSET', KEYS[1], 'config', ARGV[4])
redis.call('HDEL', KEYS[3], ARGV[1])
redis.call('HDEL', KEYS[4], ARGV[1])
if ARGV[5] ~= '' then
  redis.call('HSET', KEYS[3], ARGV[5], ARGV[6])
  redis.call('HSET', KEYS[4], ARGV[5], old_state)
end
redis.call('DEL', KEYS[5])
keep_version(KEYS[2], KEYS[1], KEYS[7], KEYS[8], 0, ARGV[10], '', 'promote')
log_marker(KEYS[1], KEYS[6], 'promote', with_version(ARGV[9], v))
return v
