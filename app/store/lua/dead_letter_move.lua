-- Move stream entries the trainer could not apply to the model's dead-letter
-- stream, acknowledge them and count them in the model's stats, in one step.
-- Rows of one packed entry (a feedback batch) are moved one event per dead
-- letter; the good rows of an entry with a bad one are split off: put back
-- on the stream as a new packed entry (learned in a later read) in the same
-- step, and the original entry deleted.
-- KEYS: 1 events, 2 dead letters, 3 stats, 4 model config (meta), 5 the
--       model's asleep flag (lib_wake; only with splits)
-- ARGV: 1 group, 2 most dead letters kept, 3 number of rows n, then per
--       row: stream id, delivery count, reason, number of stored fields m,
--       then m (name, value) pairs (the fields the row has of k, e, c, f);
--       then (optional) the number of splits s, then per split: the stream
--       id of the entry split, number of fields m, then m (name, value) pairs
--       (the new entry's fields)
-- Returns the number of rows moved.  An entry is moved (or split) only if
-- this step acknowledges it (it was still pending), so a trainer that lost
-- its lease and the new owner never move one entry twice; nothing is written
-- once the model is deleted.  Beyond the cap the oldest dead letters are
-- dropped and counted as dropped.
--! include lib_wake
if redis.call('EXISTS', KEYS[4]) == 0 then
  return 0
end
local acked = {}
local function ack(sid)
  if acked[sid] == nil then
    acked[sid] = redis.call('XACK', KEYS[1], ARGV[1], sid) == 1
  end
  return acked[sid]
end
-- the m (name, value) pairs from ARGV[at + 1] on, and the index after them
local function pairs_at(at, m)
  local fields = {}
  for j = 1, 2 * m do
    fields[j] = ARGV[at + j]
  end
  return fields, at + 2 * m + 1
end
local moved = 0
local at = 4
for _ = 1, tonumber(ARGV[3]) do
  local sid, deliveries, reason = ARGV[at], ARGV[at + 1], ARGV[at + 2]
  local fields
  fields, at = pairs_at(at + 3, tonumber(ARGV[at + 3]))
  if ack(sid) then
    local n = #fields
    fields[n + 1], fields[n + 2] = 'stream_id', sid
    fields[n + 3], fields[n + 4] = 'deliveries', deliveries
    fields[n + 5], fields[n + 6] = 'reason', reason
    redis.call('XADD', KEYS[2], '*', unpack(fields))
    moved = moved + 1
  end
end
local split = false
local splits = tonumber(ARGV[at] or '0')
at = at + 1
for _ = 1, splits do
  local sid = ARGV[at]
  local fields
  fields, at = pairs_at(at + 1, tonumber(ARGV[at + 1]))
  if ack(sid) then
    redis.call('XADD', KEYS[1], '*', unpack(fields))
    redis.call('XDEL', KEYS[1], sid)
    split = true
  end
end
if split then
  wake_trainer(KEYS[5])
end
if moved > 0 then
  if redis.call('XLEN', KEYS[2]) > tonumber(ARGV[2]) then
    local trimmed = redis.call('XTRIM', KEYS[2], 'MAXLEN', ARGV[2])
    redis.call('HINCRBY', KEYS[3], 'dead_letters_dropped', trimmed)
  end
  -- the count held is the stream's length (also right for dead letters older than the count)
  redis.call('HSET', KEYS[3], 'events_dead_lettered', redis.call('XLEN', KEYS[2]))
end
return moved
