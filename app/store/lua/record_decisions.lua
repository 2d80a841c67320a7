-- Log decision contexts awaiting feedback, each with its deadline, and count predictions.
-- KEYS: 1 stats, 2 pending, 3 deferred, 4 event index, 5 .. n+4 one context key per logged
--       decision,
--       then a apprentice flag keys (a = 0 or n, in the order of the contexts), then the
--       model's id table, then, for a guarded call only: the API key record, model config,
--       snapshot, noise
-- ARGV: 1 wait_seconds, 2 grace_seconds, 3 predictions to count, 4 n (decisions logged),
--       5 '1' to defer (log without a deadline) else '0', 6 apprentice decisions to count,
--       7 of which the model agreed with the baseline, 8 a, 9 most decisions the model
--       may hold awaiting feedback (pending and deferred; 0: no limit),
--       then per decision i (in the order of KEYS 5..): event id, context blob; then a
--       flags ('1' agreed, '0' not); then, for a guarded call only: key hash, tenant,
--       SHA-1 of the config JSON, snapshot version, rho0, rho1, noise source, estimator,
--       withdrawn
--       ("" for a missing noise record or field); then the id table's capacity, m and m
--       pairs (id hash in decimal, id): candidate ids shown, added unless known (HSETNX:
--       a known id writes nothing) while the table holds fewer than its capacity
-- A deferred decision's context is kept with the same TTL but its id goes to deferred
-- (scored by that expiry; expired ids are trimmed here), not to pending: no deadline, so
-- the sweeper never ends it and feedback is refused until activate_decision.lua moves it
-- to pending; never activated, it expires unlearned.
-- Each logged event id goes to the event index, scored by an upper bound of its keys' expiry
-- (a model delete finds them there); a few index entries whose keys expired are trimmed.
-- A guarded call writes only while the API key and the model are exactly what the caller
-- decided with (the API's one-round-trip predict; a single Redis, not a Cluster: the key
-- record has its own hash tag).  Deadlines use the Redis clock, so every API replica agrees.
-- Returns {deadline (integer seconds), 1 if it is now the model's earliest deadline (the
-- caller then schedules the model on the sweeper's due set) else 0}, false when a guard
-- failed, or {-1, decisions held} when logging n more would pass the limit of ARGV 9
-- (nothing written in either case).
local n = tonumber(ARGV[4])
local a = tonumber(ARGV[8])
local guarded = #KEYS > n + a + 5
if guarded then
  local g = 2 * n + a + 9
  local k = n + a + 5
  local key = redis.call('HMGET', KEYS[k + 1], 'hash', 'tenant')
  if key[1] ~= ARGV[g + 1] or key[2] ~= ARGV[g + 2] then return false end
  local config = redis.call('HGET', KEYS[k + 2], 'config')
  if not config or redis.sha1hex(config) ~= ARGV[g + 3] then return false end
  if tonumber(redis.call('HGET', KEYS[k + 3], 'version')) ~= tonumber(ARGV[g + 4]) then
    return false
  end
  local noise = redis.call('HMGET', KEYS[k + 4], 'rho0', 'rho1', 'source', 'estimator',
                          'withdrawn')
  for i = 1, 5 do
    if (noise[i] or '') ~= ARGV[g + 4 + i] then return false end
  end
end
local most = tonumber(ARGV[9])
if most > 0 and n > 0 then
  local held = redis.call('ZCARD', KEYS[2]) + redis.call('ZCARD', KEYS[3])
  if held + n > most then return {-1, held} end
end
local t = redis.call('TIME')
local deadline = tonumber(t[1]) + tonumber(ARGV[1])
local ttl = tonumber(ARGV[1]) + tonumber(ARGV[2])
local defer = ARGV[5] == '1'
local earliest = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
local first = n > 0 and not defer and (#earliest == 0 or tonumber(earliest[2]) > deadline)
local expiry = tonumber(t[1]) + ttl + 1
for i = 1, n do
  redis.call('SET', KEYS[i + 4], ARGV[2 * i + 9], 'EX', ttl)
  redis.call('ZADD', KEYS[4], expiry, ARGV[2 * i + 8])
  if defer then
    redis.call('ZADD', KEYS[3], tonumber(t[1]) + ttl, ARGV[2 * i + 8])
  else
    redis.call('ZADD', KEYS[2], deadline, ARGV[2 * i + 8])
  end
end
if defer and n > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', '(' .. t[1])
end
for i = 1, a do
  redis.call('SET', KEYS[n + i + 4], ARGV[2 * n + i + 9], 'EX', ttl)
end
-- trim twice as many expired index entries as were added (in chunks: unpack's limit)
local left = n > 0 and 2 * n + 8 or 0
while left > 0 do
  local gone = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', '(' .. t[1], 'LIMIT', 0,
                          math.min(left, 1000))
  if #gone == 0 then break end
  redis.call('ZREM', KEYS[4], unpack(gone))
  left = left - #gone
end
local at = 2 * n + a + 10 + (guarded and 9 or 0)
local m = tonumber(ARGV[at + 1] or '0')
if m > 0 then
  local room = tonumber(ARGV[at]) - redis.call('HLEN', KEYS[n + a + 5])
  for i = 1, m do
    if room <= 0 then break end
    room = room - redis.call('HSETNX', KEYS[n + a + 5], ARGV[at + 2 * i], ARGV[at + 2 * i + 1])
  end
end
redis.call('HINCRBY', KEYS[1], 'predictions', tonumber(ARGV[3]))
if tonumber(ARGV[6]) > 0 then
  redis.call('HINCRBY', KEYS[1], 'apprentice_decisions', tonumber(ARGV[6]))
  redis.call('HINCRBY', KEYS[1], 'apprentice_agreed', tonumber(ARGV[7]))
end
return {deadline, first and 1 or 0}
