-- Feedback for a decision that may wait for more of it (more noisy labels of
-- a regression event, more noisy copies of a noisy_input instance): either
-- keep the decision open with the feedback received so far, or join it
-- exactly once (as take_feedback.lua) -- and, in the same step, charge the
-- model's label budget.  The caller read the partial feedback and the budget
-- first; both are compared-and-set here, so concurrent requests never lose
-- labels or overspend the budget (the loser gets 'conflict' and retries).
-- KEYS: 1 context, 2 pending, 3 events, 4 stats, 5 partial, 6 budget
-- ARGV: 1 event id, 2 tombstone, 3 expected partial count ('' = none may
--       exist yet), 4 'open' or 'final', 5 feedback blob (all received so
--       far), 6 wanted count, 7 received count, 8 on expiry ('enqueue' or
--       'drop'), 9 expected budget rounds ('' = leave the budget alone),
--       10 budget state blob, 11 budget rounds after
-- Returns {'ok', stream id} | {'open'} | {'unknown'} | {'duplicate'} | {'conflict'}.
local ctx = redis.call('GET', KEYS[1])
if not ctx then
  return {'unknown'}
end
if ctx == ARGV[2] then
  return {'duplicate'}
end
local deadline = redis.call('ZSCORE', KEYS[2], ARGV[1])
local t = redis.call('TIME')
if (not deadline) or tonumber(deadline) < tonumber(t[1]) then
  return {'unknown'}
end
local have = redis.call('HGET', KEYS[5], 'n')
if ARGV[3] == '' then
  if have then
    return {'conflict'}
  end
elseif have ~= ARGV[3] then
  return {'conflict'}
end
if ARGV[9] ~= '' then
  local rounds = redis.call('HGET', KEYS[6], 'rounds') or '0'
  if rounds ~= ARGV[9] then
    return {'conflict'}
  end
  redis.call('HSET', KEYS[6], 'rounds', ARGV[11], 'state', ARGV[10])
end
if ARGV[4] == 'open' then
  redis.call('HSET', KEYS[5], 'want', ARGV[6], 'n', ARGV[7], 'f', ARGV[5], 'expiry', ARGV[8])
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl > 0 then
    redis.call('PEXPIRE', KEYS[5], ttl)
  end
  return {'open'}
end
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('SET', KEYS[1], ARGV[2], 'KEEPTTL')
redis.call('DEL', KEYS[5])
local id = redis.call('XADD', KEYS[3], '*', 'k', 'feedback', 'e', ARGV[1], 'c', ctx, 'f', ARGV[5])
redis.call('HINCRBY', KEYS[4], 'feedback_accepted', 1)
return {'ok', id}
