-- End one decision whose wait time ran out (the sweeper's step), exactly
-- once and never together with its feedback (both remove the pending entry).
-- KEYS: 1 context, 2 pending, 3 events, 4 snapshot, 5 partial feedback
--       (optional; see take_partial.lua), 6 apprentice flag and 7 stats
--       (optional), 8 event index (optional: the ended event's keys are gone), 9 the
--       model's asleep flag (optional, lib_wake)
-- ARGV: 1 event id, 2 mode ('no_click' or 'drop'), 3 default feedback blob
-- A decision still waiting for more labels or copies, or adding up its
-- rewards, ends with the feedback received so far when its partial record
-- says 'enqueue' (whatever the mode), and with nothing when it says 'drop';
-- an apprentice decision ended so counts the reward its record keeps ('r').
-- An apprentice decision ended with the no-click default counts as an
-- apprentice event of reward 0, as its feedback would (take_feedback.lua):
-- else its baseline's mean reward counted only the events with feedback.
-- Returns {'expired', stream id or ''} | {'not_due'} | {'gone'}.
--! include lib_wake
local deadline = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not deadline then
  return {'gone'}
end
local t = redis.call('TIME')
if tonumber(deadline) >= tonumber(t[1]) then
  return {'not_due'}
end
redis.call('ZREM', KEYS[2], ARGV[1])
local ctx = redis.call('GET', KEYS[1])
redis.call('DEL', KEYS[1])
local id = ''
local partial = false
if #KEYS >= 5 then
  partial = redis.call('HMGET', KEYS[5], 'f', 'expiry', 'r')
  redis.call('DEL', KEYS[5])
  if not partial[1] then
    partial = false
  end
end
if ctx and partial then
  if partial[2] == 'enqueue' then
    id = redis.call('XADD', KEYS[3], '*', 'k', 'feedback', 'e', ARGV[1], 'c', ctx, 'f', partial[1])
    local agreed = partial[3] and #KEYS >= 7 and redis.call('GET', KEYS[6])
    if agreed then
      redis.call('HINCRBY', KEYS[7], 'apprentice_events', 1)
      redis.call('HINCRBYFLOAT', KEYS[7], 'apprentice_reward_sum', partial[3])
      if agreed == '1' then
        redis.call('HINCRBY', KEYS[7], 'apprentice_agreed_events', 1)
        redis.call('HINCRBYFLOAT', KEYS[7], 'apprentice_agreed_reward_sum', partial[3])
      end
    end
  end
elseif ctx and ARGV[2] == 'no_click' then
  id = redis.call('XADD', KEYS[3], '*', 'k', 'timeout', 'e', ARGV[1], 'c', ctx, 'f', ARGV[3])
  local agreed = #KEYS >= 7 and redis.call('GET', KEYS[6])
  if agreed then
    redis.call('HINCRBY', KEYS[7], 'apprentice_events', 1)  -- reward 0: the sums stay
    if agreed == '1' then
      redis.call('HINCRBY', KEYS[7], 'apprentice_agreed_events', 1)
    end
  end
end
if #KEYS >= 7 then
  redis.call('DEL', KEYS[6])
end
if #KEYS >= 8 then
  redis.call('ZREM', KEYS[8], ARGV[1])
end
if #KEYS >= 9 and id ~= '' then
  wake_trainer(KEYS[9])
end
redis.call('HINCRBY', KEYS[4], 'events_expired', 1)
return {'expired', id}
