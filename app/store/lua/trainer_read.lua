-- Deliver a batch of a model's event stream to the lease owner only.
-- Checking the lease and delivering in one step means a trainer that lost
-- its lease (paused, then expired) can never take entries that the new
-- owner would then skip as "not newer than last applied".
-- KEYS: 1 lease, 2 events
-- ARGV: 1 owner (consumer name), 2 group, 3 count
-- Returns {0} when ARGV[1] does not hold the lease;
-- {1, ids, field lists, delivery counts} for the oldest pending entries of
-- any consumer, taken over (XCLAIM, which counts a delivery); a field list
-- is false for an entry deleted from the stream meanwhile;
-- {2, ids, field lists} for new entries (XREADGROUP '>'), read only when
-- nothing is pending.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return {0}
end
local pending = redis.call('XPENDING', KEYS[2], ARGV[2], '-', '+', ARGV[3])
if #pending > 0 then
  local ids, fields, counts = {}, {}, {}
  for i, p in ipairs(pending) do
    ids[i] = p[1]
    counts[i] = p[4] + 1
  end
  redis.call('XCLAIM', KEYS[2], ARGV[2], ARGV[1], 0, unpack(ids))
  for i, id in ipairs(ids) do
    local found = redis.call('XRANGE', KEYS[2], id, id)
    fields[i] = (#found > 0) and found[1][2] or false
  end
  return {1, ids, fields, counts}
end
local new = redis.call('XREADGROUP', 'GROUP', ARGV[2], ARGV[1], 'COUNT', ARGV[3],
                       'STREAMS', KEYS[2], '>')
local ids, fields = {}, {}
if new then
  for i, entry in ipairs(new[1][2]) do
    ids[i] = entry[1]
    fields[i] = entry[2]
  end
end
return {2, ids, fields}
