-- Publish a new snapshot: state, version + 1, last applied stream id and the
-- counters of the applied batch, and log the applied events, in one atomic step.
-- KEYS: 1 snapshot, 2 lease, 3 event stream, 4 decision log
-- ARGV: 1 expected version ('' = no check), 2 state blob, 3 last applied id
--       ('' = keep), 4 events applied, 5 observed click sum delta, 6 click count
--       delta, 7 updated_at, 8 lease owner ('' = no lease check), 9 log max
--       entries (0 = no log), 10 oldest log id kept by age ('0' = no age limit),
--       11.. the applied event-stream ids, ascending (none: nothing to log)
-- Each applied entry is copied from the event stream to the log with its
-- fields (k, e, c, f) plus 's' (its event-stream id) and 'v' (the new
-- version); the log's own entry id is the apply time.  Logging in the step
-- that publishes means an event is logged exactly when it changes the model.
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
local maxlen = tonumber(ARGV[9])
if maxlen > 0 and #ARGV > 10 then
  local wanted = {}
  for i = 11, #ARGV do
    wanted[ARGV[i]] = true
  end
  -- one range read: the applied ids are the batch, interleaved only with skipped or
  -- dead-lettered entries
  local entries = redis.call('XRANGE', KEYS[3], ARGV[11], ARGV[#ARGV])
  for _, entry in ipairs(entries) do
    if wanted[entry[1]] then
      local fields = entry[2]
      fields[#fields + 1] = 's'
      fields[#fields + 1] = entry[1]
      fields[#fields + 1] = 'v'
      fields[#fields + 1] = v
      redis.call('XADD', KEYS[4], 'MAXLEN', '~', maxlen, '*', unpack(fields))
    end
  end
  if ARGV[10] ~= '0' then
    redis.call('XTRIM', KEYS[4], 'MINID', '~', ARGV[10])
  end
end
return v
