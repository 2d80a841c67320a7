-- Publish a new snapshot: state, version + 1, last applied stream id and the
-- counters of the applied batch, and log the applied events, in one atomic step.
-- KEYS: 1 snapshot, 2 lease, 3 decision log, 4 log index, 5 stats
-- ARGV: 1 expected version ('' = no check), 2 state blob, 3 last applied id
--       ('' = keep), 4 events applied, 5 observed click sum delta, 6 click count
--       delta, 7 updated_at, 8 lease owner ('' = no lease check), 9 log max
--       events (0 = no log), 10 oldest apply time kept in ms (0 = no age limit),
--       11 events to log (0 = none), 12 their value lengths, 13.. their columns
--       (stream ids, kinds, event ids, contexts, feedbacks; see decisionlog.py)
-- The batch becomes one log entry (k = events, v = the new version); the
-- index list holds "entry id batch size" per entry and the stats hash the
-- events logged.  Then the oldest batches (and the markers before them) go
-- while the rest hold at least the max events, or while they are too old: at
-- most 100 batches per publish, so that a large backlog (a lowered max, an
-- idle week's batches all too old) goes over the next publishes instead of
-- blocking Redis in one call.  With the log off (max events 0) the batches
-- logged before still go by age.  An explicit publish (a confusion matrix
-- write: events to log 0 and a max above 0) leaves the log as it is; reset and
-- import publish with publish_explicit.lua, which adds their marker.
-- The trainer's failure record (app/store/failures.py) is left as it is: its
-- step may still fail after the publish (an after-publish hook), and the
-- record counts consecutive failed steps; the trainer clears it as it marks
-- the batch handled (DeliveryStore.ack_and_trim), once the step went through.
-- Returns the new version, else a ScriptResult (app/store/results.py): MOVED
-- when the version moved (someone else published), LEASE_LOST when the lease
-- belongs to another owner, GONE when the model is gone.
local cur = redis.call('HGET', KEYS[1], 'version')
if not cur then
  return -3  -- ScriptResult.GONE
end
if ARGV[1] ~= '' and cur ~= ARGV[1] then
  return -1  -- ScriptResult.MOVED
end
if ARGV[8] ~= '' and redis.call('GET', KEYS[2]) ~= ARGV[8] then
  return -2  -- ScriptResult.LEASE_LOST
end
local v = tonumber(cur) + 1
redis.call('HSET', KEYS[1], 'state', ARGV[2], 'version', v, 'updated_at', ARGV[7])
if ARGV[3] ~= '' then
  redis.call('HSET', KEYS[1], 'last_id', ARGV[3])
end
redis.call('HINCRBY', KEYS[1], 'events_applied', ARGV[4])
redis.call('HINCRBYFLOAT', KEYS[1], 'click_sum', ARGV[5])
redis.call('HINCRBY', KEYS[1], 'click_n', ARGV[6])
local max_events, n = tonumber(ARGV[9]), tonumber(ARGV[11])
if n > 0 or max_events == 0 then  -- (an explicit publish logs nothing and trims nothing)
  local newest, total = nil, nil
  if max_events > 0 then
    local id = redis.call('XADD', KEYS[3], '*', 'k', 'events', 'v', v, 'n', n, 'L', ARGV[12],
                          's', ARGV[13], 't', ARGV[14], 'e', ARGV[15], 'c', ARGV[16],
                          'f', ARGV[17])
    newest = id .. ' ' .. n
    redis.call('RPUSH', KEYS[4], newest)
    total = redis.call('HINCRBY', KEYS[5], 'log_events', n)
  else  -- the log is off: what it holds still goes by age
    total = tonumber(redis.call('HGET', KEYS[5], 'log_events') or '0')
  end
  local min_ms = tonumber(ARGV[10])
  local dropped, last = 0, nil
  while dropped < 100 do
    local first = redis.call('LINDEX', KEYS[4], 0)
    if first == newest then  -- it stays, holding what the log counts (heals a lost index)
      redis.call('HSET', KEYS[5], 'log_events', n)
      break
    end
    if not first then
      break
    end
    local ms, seq, first_n = string.match(first, '^(%d+)-(%d+) (%d+)$')
    local first_ms = tonumber(ms)
    first_n = tonumber(first_n)
    if (max_events == 0 or total - first_n < max_events) and first_ms >= min_ms then
      break
    end
    redis.call('LPOP', KEYS[4])
    total = redis.call('HINCRBY', KEYS[5], 'log_events', -first_n)
    dropped, last = dropped + 1, ms .. '-' .. (tonumber(seq) + 1)
  end
  if dropped > 0 then  -- the entries before the first batch kept (markers too) go
    local keep = redis.call('LINDEX', KEYS[4], 0)
    redis.call('XTRIM', KEYS[3], 'MINID', keep and string.match(keep, '^(%S+)') or last)
  end
end
return v
