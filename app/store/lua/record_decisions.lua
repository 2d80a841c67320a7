-- Log decision contexts awaiting feedback, each with its deadline, and count predictions.
-- KEYS: 1 stats, 2 pending, 3 .. n+2 one context key per logged decision, then, for a
--       guarded call only: n+3 API key record, n+4 model config, n+5 snapshot, n+6 noise
-- ARGV: 1 wait_seconds, 2 grace_seconds, 3 predictions to count, 4 n (decisions logged),
--       then per decision i (in the order of KEYS 3..): event id, context blob; then, for a
--       guarded call only: key hash, tenant, SHA-1 of the config JSON, snapshot version,
--       rho0, rho1, noise source, estimator ("" for a missing noise record or field)
-- A guarded call writes only while the API key and the model are exactly what the caller
-- decided with (the API's one-round-trip predict; a single Redis, not a Cluster: the key
-- record has its own hash tag).  Deadlines use the Redis clock, so every API replica agrees.
-- Returns the deadline (integer seconds), or false when a guard failed (nothing written).
local n = tonumber(ARGV[4])
if #KEYS > n + 2 then
  local g = 2 * n + 4
  local key = redis.call('HMGET', KEYS[n + 3], 'hash', 'tenant')
  if key[1] ~= ARGV[g + 1] or key[2] ~= ARGV[g + 2] then return false end
  local config = redis.call('HGET', KEYS[n + 4], 'config')
  if not config or redis.sha1hex(config) ~= ARGV[g + 3] then return false end
  if tonumber(redis.call('HGET', KEYS[n + 5], 'version')) ~= tonumber(ARGV[g + 4]) then
    return false
  end
  local noise = redis.call('HMGET', KEYS[n + 6], 'rho0', 'rho1', 'source', 'estimator')
  for i = 1, 4 do
    if (noise[i] or '') ~= ARGV[g + 4 + i] then return false end
  end
end
local t = redis.call('TIME')
local deadline = tonumber(t[1]) + tonumber(ARGV[1])
local ttl = tonumber(ARGV[1]) + tonumber(ARGV[2])
for i = 1, n do
  redis.call('SET', KEYS[i + 2], ARGV[2 * i + 4], 'EX', ttl)
  redis.call('ZADD', KEYS[2], deadline, ARGV[2 * i + 3])
end
redis.call('HINCRBY', KEYS[1], 'predictions', tonumber(ARGV[3]))
return deadline
