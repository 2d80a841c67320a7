-- Keep the model's current snapshot as a version (a copy of its state and
-- config), unless it is kept already, the newest kept version is younger than
-- the interval or the snapshot is not at the expected version; then drop the
-- oldest kept versions beyond the limit.
-- KEYS: 1 snapshot, 2 model (config), 3 kept versions (zset), 4 kept states (hash)
-- ARGV: 1 interval seconds (0 = no interval), 2 versions kept, 3 expected
--       version ('' = any), 4 reason
-- Returns the version kept, or 0 when none was.
local limit = tonumber(ARGV[2])
if limit < 1 then
  return 0
end
local snap = redis.call('HMGET', KEYS[1], 'version', 'state', 'updated_at', 'events_applied')
local v = snap[1]
local config = redis.call('HGET', KEYS[2], 'config')
if not v or not snap[2] or not config or (ARGV[3] ~= '' and v ~= ARGV[3]) then
  return 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local newest = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
if newest[1] then
  if tonumber(newest[2]) >= tonumber(v) then
    return 0
  end
  if now - cjson.decode(newest[1]).kept_at < tonumber(ARGV[1]) then
    return 0
  end
end
local meta = cjson.encode({version = tonumber(v), created_at = snap[3] or false,
                           events_applied = tonumber(snap[4] or '0'), kept_at = now,
                           reason = ARGV[4]})
redis.call('ZADD', KEYS[3], v, meta)
redis.call('HSET', KEYS[4], 's:' .. v, snap[2], 'c:' .. v, config)
local extra = redis.call('ZCARD', KEYS[3]) - limit
if extra > 0 then
  local dropped = redis.call('ZPOPMIN', KEYS[3], extra)
  for i = 2, #dropped, 2 do
    redis.call('HDEL', KEYS[4], 's:' .. dropped[i], 'c:' .. dropped[i])
  end
end
return tonumber(v)
