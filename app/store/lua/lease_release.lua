-- Give a model's trainer lease back, only if ARGV[1] still holds it.
-- KEYS: 1 lease
-- ARGV: 1 owner
-- Returns 1 when released, 0 otherwise.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
