-- Save what the trainer's challengers learned from one batch, each only if
-- it is still the challenger the trainer read (same definition) and nobody
-- saved it since (same stats as read): a challenger removed, replaced or
-- promoted meanwhile is left alone.
-- KEYS: 1 challengers, 2 challenger states, 3 challenger stats
-- ARGV: 1 the champion's stats as read ('' = none), 2 its new stats, then
--       groups of 5: name, definition JSON, stats as read ('' = none),
--       new stats JSON, state blob ('' = keep)
-- Returns one flag per entry: the champion's first, then each challenger's
-- (1 saved, 0 left alone).
local out = {}
local function same(key, field, expected)
  local cur = redis.call('HGET', key, field)
  return (cur or '') == expected
end
if redis.call('HLEN', KEYS[1]) > 0 and same(KEYS[3], '_champion', ARGV[1]) then
  redis.call('HSET', KEYS[3], '_champion', ARGV[2])
  out[1] = 1
else
  out[1] = 0
end
for i = 3, #ARGV, 5 do
  local name = ARGV[i]
  if redis.call('HGET', KEYS[1], name) == ARGV[i + 1] and same(KEYS[3], name, ARGV[i + 2]) then
    redis.call('HSET', KEYS[3], name, ARGV[i + 3])
    if ARGV[i + 4] ~= '' then
      redis.call('HSET', KEYS[2], name, ARGV[i + 4])
    end
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
return out
