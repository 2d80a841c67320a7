-- Join feedbacks with their decision contexts, each exactly once, and append
-- each joined event to the model's stream (one call for a whole batch).
-- KEYS: 1 pending, 2 events, 3 stats, then one context key per event
-- ARGV: 1 tombstone value, then per event i (in the order of KEYS 4..):
--       event id, feedback blob
-- Returns {status_1, stream_id_1, status_2, ...}: status 'ok' (stream id of
-- the joined event) | 'unknown' (never issued, expired, other model) |
-- 'duplicate' (feedback already accepted); stream id '' unless 'ok'.
-- Events are joined in order, so a repeated event id within one call is a
-- duplicate from its second occurrence on.
local t = tonumber(redis.call('TIME')[1])
local out = {}
local accepted = 0
for i = 1, #KEYS - 3 do
  local key, eid = KEYS[i + 3], ARGV[2 * i]
  local ctx = redis.call('GET', key)
  local status, id = 'unknown', ''
  if ctx == ARGV[1] then
    status = 'duplicate'
  elseif ctx then
    local deadline = redis.call('ZSCORE', KEYS[1], eid)
    -- past the deadline: the sweeper owns it now ('unknown')
    if deadline and tonumber(deadline) >= t then
      redis.call('ZREM', KEYS[1], eid)
      redis.call('SET', key, ARGV[1], 'KEEPTTL')
      id = redis.call('XADD', KEYS[2], '*', 'k', 'feedback', 'e', eid, 'c', ctx,
                      'f', ARGV[2 * i + 1])
      status = 'ok'
      accepted = accepted + 1
    end
  end
  out[2 * i - 1] = status
  out[2 * i] = id
end
if accepted > 0 then
  redis.call('HINCRBY', KEYS[3], 'feedback_accepted', accepted)
end
return out
