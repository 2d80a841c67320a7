-- Record one failed trainer step of a model in its stats hash, only while the
-- model exists (a step failing because its model was deleted writes nothing).
-- KEYS: 1 model (config), 2 stats
-- ARGV: 1 error text, 2 now (kept as the start of the failures if none is)
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
redis.call('HSET', KEYS[2], 'trainer_error', ARGV[1])
redis.call('HSETNX', KEYS[2], 'trainer_error_since', ARGV[2])
return redis.call('HINCRBY', KEYS[2], 'trainer_failed_steps', 1)
