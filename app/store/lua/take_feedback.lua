-- Join feedbacks with their decision contexts, each exactly once, and append
-- the joined events to the model's stream as one entry (one call for a whole
-- batch; a wide model's batch as several, see ARGV).  The entry is packed as
-- the decision log's batches are (app/store/decisionlog.py): k 'feedback' (the kind of each event), n events,
-- L their lengths (big-endian uint32: the n event ids', then the n contexts',
-- then the n feedbacks'), and e, c, f each column's values back to back.  One
-- entry per batch, not per event: the stream's XADD, the trainer's read and its
-- acknowledgement then cost Redis about the same for 1 event or 1,000.
-- KEYS: 1 pending, 2 events, 3 stats, 4 the model's asleep flag (lib_wake), then one
--       context key per event, then a apprentice flag keys (a = 0 or n, in the order of
--       the contexts), then one partial-feedback key per event (take_partial.lua)
-- ARGV: 1 tombstone value, 2 a, then per event i (in the order of KEYS 4..):
--       event id, feedback blob; then a rewards (the observed reward of each event);
--       then (optional) the most events per entry (0 or none: one entry for the batch;
--       a wide model's are fewer, so that the trainer, which never cuts an entry, holds
--       no more of them dense at once than its bound)
-- Returns {status_1, stream_id_1, status_2, ...}: status 'ok' (stream id of
-- the entry holding the joined event, shared by the batch's joined events) | 'unknown' (never issued, expired, other model) |
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
local most = tonumber(ARGV[2 * n + a + 3] or '0')
-- What the joins read, in a few calls for the whole batch (chunks of at most CHUNK: Lua's
-- unpack limit), not five per event: each redis.call costs Redis more than the command.
local CHUNK = 1000
local ctx_of, deadline_of, opened = {}, {}, 0
for s = 1, n, CHUNK do
  local e = math.min(s + CHUNK - 1, n)
  local ids = {}
  for i = s, e do
    ids[#ids + 1] = ARGV[2 * i + 1]
  end
  local got = redis.call('MGET', unpack(KEYS, s + 4, e + 4))
  local due = redis.call('ZMSCORE', KEYS[1], unpack(ids))
  for i = s, e do
    ctx_of[i], deadline_of[i] = got[i - s + 1], due[i - s + 1]
  end
  opened = opened + redis.call('EXISTS', unpack(KEYS, n + a + s + 4, n + a + e + 4))
end
local out = {}
local accepted = 0
-- the event ids joined by this call: a repeated id is a duplicate from its second occurrence
local taken, done = {}, {}
-- the entry being packed: its events' positions and columns
local rows, eids, ctxs, fbs, elen, clen, flen = {}, {}, {}, {}, {}, {}, {}
local function flush()
  local id = redis.call('XADD', KEYS[2], '*', 'k', 'feedback', 'n', #rows,
                        'L', table.concat(elen) .. table.concat(clen) .. table.concat(flen),
                        'e', table.concat(eids), 'c', table.concat(ctxs),
                        'f', table.concat(fbs))
  for _, i in ipairs(rows) do
    out[2 * i] = id
  end
  rows, eids, ctxs, fbs, elen, clen, flen = {}, {}, {}, {}, {}, {}, {}
end
for i = 1, n do
  local key, eid = KEYS[i + 4], ARGV[2 * i + 1]
  local ctx = ctx_of[i]
  local status, id = 'unknown', ''
  if taken[eid] or ctx == ARGV[1]
     or (ctx and opened > 0 and redis.call('EXISTS', KEYS[n + a + i + 4]) == 1) then
    status = 'duplicate'
  elseif ctx then
    local deadline = deadline_of[i]
    if not deadline then
      status = 'not_activated'
    -- past the deadline: the sweeper owns it now ('unknown')
    elseif tonumber(deadline) >= t then
      taken[eid] = true
      done[#done + 1] = eid
      redis.call('SET', key, ARGV[1], 'KEEPTTL')
      local fb = ARGV[2 * i + 2]
      status = 'ok'
      accepted = accepted + 1
      local k = #rows + 1
      rows[k], eids[k], ctxs[k], fbs[k] = i, eid, ctx, fb
      elen[k] = struct.pack('>I4', #eid)
      clen[k] = struct.pack('>I4', #ctx)
      flen[k] = struct.pack('>I4', #fb)
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
  if most > 0 and #rows >= most then
    flush()
  end
end
for s = 1, #done, CHUNK do
  redis.call('ZREM', KEYS[1], unpack(done, s, math.min(s + CHUNK - 1, #done)))
end
if #rows > 0 then
  flush()
end
if accepted > 0 then
  redis.call('HINCRBY', KEYS[3], 'feedback_accepted', accepted)
  wake_trainer(KEYS[4])
end
return out
