-- Put a dead letter back on the model's event stream as a new entry (the
-- trainer applies it, or moves it back with the new reason) and remove it
-- from the dead letters, in one step.  It keeps the stream fields it has
-- (k, e, c, f; n and L of a packed entry moved whole, as malformed).
-- KEYS: 1 dead letters, 2 events, 3 stats, 4 the model's asleep flag (lib_wake)
-- ARGV: 1 dead-letter entry id
-- Returns the new stream id, '' when there is no such dead letter, or '-'
-- when the model's event stream is gone (model deleted).
--! include lib_wake
local found = redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1])
if #found == 0 then
  return ''
end
if redis.call('EXISTS', KEYS[2]) == 0 then
  return '-'
end
local items = found[1][2]
local fields = {}
for i = 1, #items, 2 do
  local name = items[i]
  if name == 'k' or name == 'e' or name == 'c' or name == 'f' or name == 'n' or name == 'L' then
    local n = #fields
    fields[n + 1], fields[n + 2] = name, items[i + 1]
  end
end
if #fields == 0 then
  -- nothing of the event was kept: an entry the trainer can only refuse again
  fields = {'k', ''}
end
local id = redis.call('XADD', KEYS[2], '*', unpack(fields))
redis.call('XDEL', KEYS[1], ARGV[1])
redis.call('HSET', KEYS[3], 'events_dead_lettered', redis.call('XLEN', KEYS[1]))
wake_trainer(KEYS[4])
return id
