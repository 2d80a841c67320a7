-- Shared by keep_version.lua and the scripts that change a model's version
-- explicitly (included with "--! include lib_keep_version"): keep the model's
-- current snapshot as a version (a copy of its state and config), unless it
-- is kept already, the newest kept version is younger than the interval or
-- the snapshot is not at the expected version; then drop the oldest kept
-- versions beyond the limit.
-- Keys: snap_key the snapshot, meta_key the model (config), versions_key the
-- kept versions (zset), states_key the kept states (hash).  interval: seconds
-- (0 = no interval); limit: versions kept; expected: version ('' = any);
-- reason: why it is kept.
-- Returns the version kept, or 0 when none was.
local function keep_version(snap_key, meta_key, versions_key, states_key, interval, limit,
                            expected, reason)
  limit = tonumber(limit)
  if limit < 1 then
    return 0
  end
  local snap = redis.call('HMGET', snap_key, 'version', 'state', 'updated_at', 'events_applied')
  local v = snap[1]
  local config = redis.call('HGET', meta_key, 'config')
  if not v or not snap[2] or not config or (expected ~= '' and v ~= expected) then
    return 0
  end
  local t = redis.call('TIME')
  local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
  local newest = redis.call('ZRANGE', versions_key, -1, -1, 'WITHSCORES')
  if newest[1] then
    if tonumber(newest[2]) >= tonumber(v) then
      return 0
    end
    -- (interval 0: no check; kept_at went through cjson's 14 digits and may be a
    -- few microseconds past a TIME read in the same script)
    interval = tonumber(interval)
    if interval > 0 and now - cjson.decode(newest[1]).kept_at < interval then
      return 0
    end
  end
  local meta = cjson.encode({version = tonumber(v), created_at = snap[3] or false,
                             events_applied = tonumber(snap[4] or '0'), kept_at = now,
                             reason = reason})
  redis.call('ZADD', versions_key, v, meta)
  redis.call('HSET', states_key, 's:' .. v, snap[2], 'c:' .. v, config)
  local extra = redis.call('ZCARD', versions_key) - limit
  if extra > 0 then
    local dropped = redis.call('ZPOPMIN', versions_key, extra)
    for i = 2, #dropped, 2 do
      redis.call('HDEL', states_key, 's:' .. dropped[i], 'c:' .. dropped[i])
    end
  end
  return tonumber(v)
end
