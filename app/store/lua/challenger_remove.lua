-- Remove a challenger: definition, state and estimator sums.
-- KEYS: 1 challengers, 2 challenger states, 3 challenger stats
-- ARGV: 1 name
-- Returns 1 when removed, 0 when there was no such challenger.
if redis.call('HDEL', KEYS[1], ARGV[1]) == 0 then
  return 0
end
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
return 1
