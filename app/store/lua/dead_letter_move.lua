-- Move stream entries the trainer could not apply to the model's dead-letter
-- stream, acknowledge them and count them in the model's stats, in one step.
-- KEYS: 1 events, 2 dead letters, 3 stats, 4 model config (meta)
-- ARGV: 1 group, 2 most dead letters kept, 3 number of entries n, then per
--       entry: stream id, delivery count, reason, number of stored fields m,
--       then m (name, value) pairs (the fields the entry has of k, e, c, f)
-- Returns the number of entries moved.  An entry is moved only if this step
-- acknowledges it (it was still pending), so a trainer that lost its lease
-- and the new owner never move one entry twice; nothing is written once the
-- model is deleted.  Beyond the cap the oldest dead letters are dropped and
-- counted as dropped.
if redis.call('EXISTS', KEYS[4]) == 0 then
  return 0
end
local moved = 0
local at = 4
for _ = 1, tonumber(ARGV[3]) do
  local sid, deliveries, reason = ARGV[at], ARGV[at + 1], ARGV[at + 2]
  local m = tonumber(ARGV[at + 3])
  local fields = {}
  for j = 1, 2 * m do
    fields[j] = ARGV[at + 3 + j]
  end
  at = at + 4 + 2 * m
  if redis.call('XACK', KEYS[1], ARGV[1], sid) == 1 then
    local n = #fields
    fields[n + 1], fields[n + 2] = 'stream_id', sid
    fields[n + 3], fields[n + 4] = 'deliveries', deliveries
    fields[n + 5], fields[n + 6] = 'reason', reason
    redis.call('XADD', KEYS[2], '*', unpack(fields))
    moved = moved + 1
  end
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
