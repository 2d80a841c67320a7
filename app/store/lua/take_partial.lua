-- Feedback for decisions that may wait for more of it (more noisy labels of
-- a regression event, more noisy copies of a noisy_input instance), a whole
-- batch in one call: per event, either keep the decision open with the
-- feedback received so far, or join it exactly once (as take_feedback.lua)
-- -- and, in the same step, charge the model's label budget.  The caller
-- read the partial feedback and the budget first; both are compared-and-set
-- here, so concurrent requests never lose labels or overspend the budget
-- (the loser gets 'conflict' and retries that event).
-- KEYS: 1 pending, 2 events, 3 stats, 4 budget, 5 the model's asleep flag (lib_wake),
--       then per event i: context (2i + 4), partial (2i + 5)
-- ARGV: 1 tombstone, then per event i, eleven values from ARGV[11i - 9]:
--       event id, expected partial count ('' = none may exist yet), 'open'
--       or 'final', feedback blob (all received so far), wanted count,
--       received count, on expiry ('enqueue' or 'drop'), expected budget
--       rounds ('' = leave the budget alone), budget state blob, budget
--       rounds after, observed reward of the feedback so far ('' = none: kept
--       for the apprentice counters of expire_decision.lua)
-- Returns {status_1, stream_id_1, status_2, ...}: status 'ok' (stream id of
-- the joined event) | 'open' | 'unknown' | 'duplicate' | 'not_activated' (a
-- deferred decision) | 'conflict'; stream
-- id '' unless 'ok'.  Events are taken in order: a budget charge expects the
-- rounds the charges before it in the batch left.
--! include lib_wake
local t = tonumber(redis.call('TIME')[1])

local function take(ctx_key, part_key, a)
  local eid = ARGV[a]
  local ctx = redis.call('GET', ctx_key)
  if not ctx then
    return 'unknown'
  end
  if ctx == ARGV[1] then
    return 'duplicate'
  end
  local deadline = redis.call('ZSCORE', KEYS[1], eid)
  if not deadline then
    return 'not_activated'  -- deferred: nothing is taken before activate_decision.lua
  end
  -- past the deadline: the sweeper owns it now
  if tonumber(deadline) < t then
    return 'unknown'
  end
  local have = redis.call('HGET', part_key, 'n')
  if ARGV[a + 1] == '' then
    if have then
      return 'conflict'
    end
  elseif have ~= ARGV[a + 1] then
    return 'conflict'
  end
  if ARGV[a + 7] ~= '' then
    local rounds = redis.call('HGET', KEYS[4], 'rounds') or '0'
    if rounds ~= ARGV[a + 7] then
      return 'conflict'
    end
    redis.call('HSET', KEYS[4], 'rounds', ARGV[a + 9], 'state', ARGV[a + 8])
  end
  if ARGV[a + 2] == 'open' then
    redis.call('HSET', part_key, 'want', ARGV[a + 4], 'n', ARGV[a + 5], 'f', ARGV[a + 3],
               'expiry', ARGV[a + 6])
    if ARGV[a + 10] ~= '' then
      redis.call('HSET', part_key, 'r', ARGV[a + 10])
    end
    local ttl = redis.call('PTTL', ctx_key)
    if ttl > 0 then
      redis.call('PEXPIRE', part_key, ttl)
    end
    return 'open'
  end
  redis.call('ZREM', KEYS[1], eid)
  redis.call('SET', ctx_key, ARGV[1], 'KEEPTTL')
  redis.call('DEL', part_key)
  return 'ok', redis.call('XADD', KEYS[2], '*', 'k', 'feedback', 'e', eid, 'c', ctx,
                          'f', ARGV[a + 3])
end

local out = {}
local accepted = 0
for i = 1, (#KEYS - 5) / 2 do
  local status, id = take(KEYS[2 * i + 4], KEYS[2 * i + 5], 11 * i - 9)
  if status == 'ok' then
    accepted = accepted + 1
  end
  out[2 * i - 1] = status
  out[2 * i] = id or ''
end
if accepted > 0 then
  redis.call('HINCRBY', KEYS[3], 'feedback_accepted', accepted)
  wake_trainer(KEYS[5])
end
return out
