-- Publish a new snapshot: state, version + 1, last applied stream id and the
-- counters of the applied batch, in one atomic step.
-- KEYS: 1 snapshot, 2 lease
-- ARGV: 1 expected version ('' = no check), 2 state blob, 3 last applied id
--       ('' = keep), 4 events applied, 5 observed click sum delta, 6 click count
--       delta, 7 updated_at, 8 lease owner ('' = no lease check)
-- Returns the new version, -1 when the version moved (someone else
-- published), -2 when the lease belongs to another owner, -3 when the
-- model is gone.
local cur = redis.call('HGET', KEYS[1], 'version')
if not cur then
  return -3
end
if ARGV[1] ~= '' and cur ~= ARGV[1] then
  return -1
end
if ARGV[8] ~= '' and redis.call('GET', KEYS[2]) ~= ARGV[8] then
  return -2
end
local v = tonumber(cur) + 1
redis.call('HSET', KEYS[1], 'state', ARGV[2], 'version', v, 'updated_at', ARGV[7])
if ARGV[3] ~= '' then
  redis.call('HSET', KEYS[1], 'last_id', ARGV[3])
end
redis.call('HINCRBY', KEYS[1], 'events_applied', ARGV[4])
redis.call('HINCRBYFLOAT', KEYS[1], 'click_sum', ARGV[5])
redis.call('HINCRBY', KEYS[1], 'click_n', ARGV[6])
return v
