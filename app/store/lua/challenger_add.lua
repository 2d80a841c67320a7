-- Add a challenger to a model: its definition and initial state, unless the
-- name is taken or the model has its maximum number of challengers.
-- KEYS: 1 meta, 2 challengers, 3 challenger states
-- ARGV: 1 name, 2 definition JSON, 3 state blob, 4 most challengers per model
-- Returns 1 when added, 0 when the name is taken, -1 when the model has the
-- maximum, -3 when the model is gone.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -3
end
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then
  return 0
end
if redis.call('HLEN', KEYS[2]) >= tonumber(ARGV[4]) then
  return -1
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[3], ARGV[1], ARGV[3])
return 1
