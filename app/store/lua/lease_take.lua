-- Take or renew a model's trainer lease, only while the model exists.
-- KEYS: 1 lease, 2 the model's config hash
-- ARGV: 1 owner, 2 time to live (ms)
-- Returns 1 when ARGV[1] holds the lease now (taken or renewed), 0 when
-- another owner holds it or the model is gone (a trainer that found the
-- model just before its deletion must not leave a lease key behind).
if redis.call('EXISTS', KEYS[2]) == 0 then
  return 0
end
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if cur then
  return 0
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
