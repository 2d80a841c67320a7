-- Drop one dead letter, or all of them, and count them as dropped.
-- KEYS: 1 dead letters, 2 stats
-- ARGV: 1 dead-letter entry id ('' = every dead letter)
-- Returns the number of dead letters dropped (0: no such entry).
local n
if ARGV[1] == '' then
  n = redis.call('XLEN', KEYS[1])
  redis.call('DEL', KEYS[1])
else
  n = redis.call('XDEL', KEYS[1], ARGV[1])
end
if n > 0 then
  redis.call('HSET', KEYS[2], 'events_dead_lettered', redis.call('XLEN', KEYS[1]))
  redis.call('HINCRBY', KEYS[2], 'dead_letters_dropped', n)
end
return n
