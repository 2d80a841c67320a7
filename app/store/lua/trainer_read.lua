-- Deliver a batch of a model's event stream to the lease owner only.
-- Checking the lease and delivering in one step means a trainer that lost
-- its lease (paused, then expired) can never take entries that the new
-- owner would then skip as "not newer than last applied".
-- KEYS: 1 lease, 2 events, 3 the model's asleep flag (optional)
-- ARGV: 1 owner (consumer name), 2 group, 3 count, 4 '1': when nothing is read, set the
--       asleep flag (the trainer stops reading the model until a step that adds an
--       entry removes it, see lib_wake.lua; optional)
-- Returns {0} when ARGV[1] does not hold the lease; else one flat array
-- {source, then eight items per entry: id, delivery count, and its fields k
-- (kind), e (event id), c (context), f (feedback), n (events) and L (their
-- lengths)}, ids ascending.  An entry of one event has no n nor L; an entry
-- of a feedback batch (take_feedback.lua) holds n events packed in e, c and f
-- (app/store/delivery.py splits them).  A field the entry lacks is nil (an
-- entry deleted from the stream meanwhile lacks all six).  source 1: the
-- oldest pending entries of any consumer, taken over (XCLAIM, which counts a
-- delivery); source 2: new entries (XREADGROUP '>', delivery count 1), read
-- only when nothing is pending.  ARGV[3] counts events, not entries (see
-- below).  Claimed in chunks: unpack() of more than about 8,000 ids overflows Lua's C stack ("too
-- many results to unpack"), and a read grows to 8 x the batch size.
-- Flat, because Redis 6.2 writes each nested table of a script's reply as a
-- reply block of its own: a batch of 1,000 nested entries reached the client
-- in about 700 small reads and cost it 8x the CPU of the flat array
-- (bench/bench_lua_reply.py).  A fixed stride lets the client take each
-- field of the whole batch with one list slice.
--! include lib_entry_events
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return {0}
end
local out = {}
local function add(id, count, items)
  local fields = {}
  for i = 1, #items, 2 do
    fields[items[i]] = items[i + 1]
  end
  local n = #out
  out[n + 1] = id
  out[n + 2] = count
  out[n + 3] = fields.k or false
  out[n + 4] = fields.e or false
  out[n + 5] = fields.c or false
  out[n + 6] = fields.f or false
  out[n + 7] = fields.n or false
  out[n + 8] = fields.L or false
end
-- ARGV[3] counts events: a packed entry of n events counts n (taken whole, so a read
-- may pass the count by less than one entry).
local want = tonumber(ARGV[3])
local pending = redis.call('XPENDING', KEYS[2], ARGV[2], '-', '+', ARGV[3])
if #pending > 0 then
  out[1] = 1
  local taken, got = {}, 0
  for _, p in ipairs(pending) do
    local found = redis.call('XRANGE', KEYS[2], p[1], p[1])
    local items = (#found > 0) and found[1][2] or {}
    taken[#taken + 1] = {p[1], p[4] + 1, items}
    got = got + entry_events(items)
    if got >= want then
      break
    end
  end
  for first = 1, #taken, 500 do
    local ids = {}
    for i = first, math.min(first + 499, #taken) do
      ids[#ids + 1] = taken[i][1]
    end
    redis.call('XCLAIM', KEYS[2], ARGV[2], ARGV[1], 0, unpack(ids))
  end
  for _, t in ipairs(taken) do
    add(t[1], t[2], t[3])
  end
  return out
end
out[1] = 2
-- new entries, a few reads: the first of one entry, then as many entries as the events
-- still wanted at the mean size of those read so far
local got, entries, ask = 0, 0, 1
while got < want do
  local new = redis.call('XREADGROUP', 'GROUP', ARGV[2], ARGV[1], 'COUNT', ask,
                         'STREAMS', KEYS[2], '>')
  if not new then
    break
  end
  for _, entry in ipairs(new[1][2]) do
    add(entry[1], 1, entry[2])
    got = got + entry_events(entry[2])
    entries = entries + 1
  end
  if #new[1][2] < ask then
    break
  end
  ask = math.ceil((want - got) * entries / got)
end
if entries == 0 and ARGV[4] == '1' then
  redis.call('SET', KEYS[3], '1')
end
return out
