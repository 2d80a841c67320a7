-- Log decision contexts awaiting feedback, each with its deadline.
-- KEYS: 1 stats, 2 pending, 3.. one context key per decision
-- ARGV: 1 wait_seconds, 2 grace_seconds, then per decision i (in the order
--       of KEYS 3..): event id, context blob
-- Deadlines use the Redis clock, so every API replica agrees on them.
-- Returns the deadline (integer seconds).
local t = redis.call('TIME')
local deadline = tonumber(t[1]) + tonumber(ARGV[1])
local ttl = tonumber(ARGV[1]) + tonumber(ARGV[2])
local n = #KEYS - 2
for i = 1, n do
  redis.call('SET', KEYS[i + 2], ARGV[2 * i + 2], 'EX', ttl)
  redis.call('ZADD', KEYS[2], deadline, ARGV[2 * i + 1])
end
redis.call('HINCRBY', KEYS[1], 'predictions', n)
return deadline
