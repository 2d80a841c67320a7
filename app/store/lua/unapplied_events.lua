-- Events of a model's stream not applied yet: those of the entries newer than
-- the snapshot's last_id (a packed entry, a feedback batch, counts its n
-- events; an entry of one event, 1).  The trainer trims the stream up to its
-- newest applied entry, so only its backlog is read: the first ARGV[1]
-- entries exactly; the entries past them (a trainer far behind) are counted
-- at the mean size of those read, as reading every packed entry of a long
-- backlog would copy all its contexts.
-- KEYS: 1 events, 2 snapshot
-- ARGV: 1 most entries read
-- Returns the number of events.
--! include lib_entry_events
local last = redis.call('HGET', KEYS[2], 'last_id')
if not last or last == '' then
  last = '0-0'
end
local entries = redis.call('XRANGE', KEYS[1], '(' .. last, '+', 'COUNT', ARGV[1])
local total = 0
for _, entry in ipairs(entries) do
  total = total + entry_events(entry[2])
end
if #entries > 0 and #entries == tonumber(ARGV[1]) then
  -- the rest: the stream's length less those read and the newest applied entry, which
  -- the trim keeps (so at most one entry is not newer than last_id)
  local applied = #redis.call('XRANGE', KEYS[1], '-', last, 'COUNT', 1)
  local rest = redis.call('XLEN', KEYS[1]) - #entries - applied
  total = total + math.floor(rest * total / #entries + 0.5)
end
return total
