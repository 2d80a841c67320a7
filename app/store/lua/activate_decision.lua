-- Activate a deferred decision: give it a deadline from now, so that it awaits
-- feedback (and a default at its deadline) as any other decision.
-- KEYS: 1 context, 2 pending, 3 apprentice flag, 4 deferred, 5 event index
-- ARGV: 1 event id, 2 wait_seconds, 3 grace_seconds, 4 tombstone value
-- The context (and its apprentice flag, if any) then lives wait_seconds +
-- grace_seconds from now, as a decision logged now would (its event index entry says so).
-- Returns {'ok', deadline, 1 if it is now the model's earliest deadline else 0} |
-- {'unknown'} (never issued, expired, other model) |
-- {'active'} (not deferred, or activated already).
local ctx = redis.call('GET', KEYS[1])
if not ctx then
  return {'unknown'}
end
if ctx == ARGV[4] or redis.call('ZSCORE', KEYS[2], ARGV[1]) then
  return {'active'}
end
local now = tonumber(redis.call('TIME')[1])
local deadline = now + tonumber(ARGV[2])
local ttl = tonumber(ARGV[2]) + tonumber(ARGV[3])
redis.call('ZADD', KEYS[5], now + ttl + 1, ARGV[1])
local earliest = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
local first = #earliest == 0 or tonumber(earliest[2]) > deadline
redis.call('ZADD', KEYS[2], deadline, ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[1])
redis.call('EXPIRE', KEYS[1], ttl)
redis.call('EXPIRE', KEYS[3], ttl)
return {'ok', deadline, first and 1 or 0}
