-- Add a challenger to a model: its definition and initial state, unless the
-- name is taken or the model has its maximum number of challengers.
-- KEYS: 1 meta, 2 challengers, 3 challenger states
-- ARGV: 1 name, 2 definition JSON, 3 state blob, 4 most challengers per model
-- Returns 1 when added, else a ScriptResult (app/store/results.py):
-- NAME_TAKEN when the name is taken, FULL when the model has the maximum,
-- GONE when the model is gone.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -3  -- ScriptResult.GONE
end
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then
  return -4  -- ScriptResult.NAME_TAKEN
end
if redis.call('HLEN', KEYS[2]) >= tonumber(ARGV[4]) then
  return -8  -- ScriptResult.FULL
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[3], ARGV[1], ARGV[3])
return 1
