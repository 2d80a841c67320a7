-- Mark a queued job of the jobs role running, only while it is queued: a job
-- that is running, done or failed (taken by another worker, or by one that died
-- before removing it from its queue) or expired is not started again.
-- A job leaves its model's staged set when it starts (or is found not queued), so
-- the set holds the model's queued jobs: what a cap on them counts.
-- KEYS: 1 job hash, 2 the model's staged set
-- ARGV: 1 worker id, 2 started_at (ISO 8601), 3 deadline (Unix seconds), 4 job id
-- Returns 1 when started, 0 otherwise.
redis.call('ZREM', KEYS[2], ARGV[4])
if redis.call('HGET', KEYS[1], 'status') ~= 'queued' then
  return 0
end
redis.call('HSET', KEYS[1], 'status', 'running', 'worker', ARGV[1], 'started_at', ARGV[2],
           'deadline', ARGV[3])
return 1
