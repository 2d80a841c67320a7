-- Join one feedback with its decision context exactly once and append the
-- joined event to the model's stream.
-- KEYS: 1 context, 2 pending, 3 events, 4 stats
-- ARGV: 1 event id, 2 feedback blob, 3 tombstone value
-- Returns {'ok', stream id} | {'unknown'} (never issued, expired, other
-- model) | {'duplicate'} (feedback already accepted).
local ctx = redis.call('GET', KEYS[1])
if not ctx then
  return {'unknown'}
end
if ctx == ARGV[3] then
  return {'duplicate'}
end
local deadline = redis.call('ZSCORE', KEYS[2], ARGV[1])
local t = redis.call('TIME')
if (not deadline) or tonumber(deadline) < tonumber(t[1]) then
  -- expired: the sweeper owns it now
  return {'unknown'}
end
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('SET', KEYS[1], ARGV[3], 'KEEPTTL')
local id = redis.call('XADD', KEYS[3], '*', 'k', 'feedback', 'e', ARGV[1], 'c', ctx, 'f', ARGV[2])
redis.call('HINCRBY', KEYS[4], 'feedback_accepted', 1)
return {'ok', id}
