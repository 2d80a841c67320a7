-- Join feedbacks with their decision contexts, each exactly once, and append
-- each joined event to the model's stream (one call for a whole batch).
-- KEYS: 1 pending, 2 events, 3 stats, 4 the model's asleep flag (lib_wake), then one
--       context key per event, then a apprentice flag keys (a = 0 or n, in the order of
--       the contexts), then one partial-feedback key per event (take_partial.lua)
-- ARGV: 1 tombstone value, 2 a, then per event i (in the order of KEYS 4..):
--       event id, feedback blob; then a rewards (the observed reward of each event)
-- Returns {status_1, stream_id_1, status_2, ...}: status 'ok' (stream id of
-- the joined event) | 'unknown' (never issued, expired, other model) |
-- 'duplicate' (feedback already accepted, or being added up: an event whose rewards a
-- model summing them (take_partial.lua) opened keeps them, and ends with their sum at its
-- deadline, when the model has since gone back to taking the earliest) | 'not_activated' (a deferred decision
-- not activated yet: nothing is taken); stream id '' unless 'ok'.
-- A joined event with an apprentice flag adds its reward to the model's apprentice
-- counters (all events, and the events where the model agreed with the baseline).
-- Events are joined in order, so a repeated event id within one call is a
-- duplicate from its second occurrence on.
--! include lib_wake
local t = tonumber(redis.call('TIME')[1])
local a = tonumber(ARGV[2])
local n = (#KEYS - 4 - a) / 2
local out = {}
local accepted = 0
for i = 1, n do
  local key, eid = KEYS[i + 4], ARGV[2 * i + 1]
  local ctx = redis.call('GET', key)
  local status, id = 'unknown', ''
  if ctx == ARGV[1] or (ctx and redis.call('EXISTS', KEYS[n + a + i + 4]) == 1) then
    status = 'duplicate'
  elseif ctx then
    local deadline = redis.call('ZSCORE', KEYS[1], eid)
    if not deadline then
      status = 'not_activated'
    -- past the deadline: the sweeper owns it now ('unknown')
    elseif tonumber(deadline) >= t then
      redis.call('ZREM', KEYS[1], eid)
      redis.call('SET', key, ARGV[1], 'KEEPTTL')
      id = redis.call('XADD', KEYS[2], '*', 'k', 'feedback', 'e', eid, 'c', ctx,
                      'f', ARGV[2 * i + 2])
      status = 'ok'
      accepted = accepted + 1
      if a > 0 then
        local agreed = redis.call('GET', KEYS[n + i + 4])
        if agreed then
          local reward = ARGV[2 * n + i + 2]
          redis.call('DEL', KEYS[n + i + 4])
          redis.call('HINCRBY', KEYS[3], 'apprentice_events', 1)
          redis.call('HINCRBYFLOAT', KEYS[3], 'apprentice_reward_sum', reward)
          if agreed == '1' then
            redis.call('HINCRBY', KEYS[3], 'apprentice_agreed_events', 1)
            redis.call('HINCRBYFLOAT', KEYS[3], 'apprentice_agreed_reward_sum', reward)
          end
        end
      end
    end
  end
  out[2 * i - 1] = status
  out[2 * i] = id
end
if accepted > 0 then
  redis.call('HINCRBY', KEYS[3], 'feedback_accepted', accepted)
  wake_trainer(KEYS[4])
end
return out
