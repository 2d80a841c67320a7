-- Take or renew a model's trainer lease.
-- KEYS: 1 lease
-- ARGV: 1 owner, 2 time to live (ms)
-- Returns 1 when ARGV[1] holds the lease now (taken or renewed), 0 when
-- another owner holds it.
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
