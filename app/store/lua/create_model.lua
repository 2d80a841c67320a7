-- Create a model atomically: config, first snapshot, noise record, event
-- stream with its trainer consumer group.
-- KEYS: 1 meta, 2 snapshot, 3 events, 4 noise, 5 stats
-- ARGV: 1 config JSON, 2 created_at, 3 state blob, 4 consumer group,
--       5 rho0, 6 rho1, 7 rates given ('1': the request named them, '0')
-- Returns 1 when created, 0 when the model already exists.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4], KEYS[5])
redis.call('HSET', KEYS[1], 'config', ARGV[1], 'created_at', ARGV[2])
redis.call('HSET', KEYS[2], 'state', ARGV[3], 'version', 1, 'last_id', '0-0',
           'events_applied', 0, 'events_expired', 0, 'click_sum', 0, 'click_n', 0,
           'updated_at', ARGV[2])
redis.call('HSET', KEYS[5], 'predictions', 0, 'feedback_accepted', 0)
redis.call('HSET', KEYS[4], 'rho0', ARGV[5], 'rho1', ARGV[6], 'source', 'initial',
           'n_samples', 0, 'history', '[]', 'rates_given', ARGV[7])
redis.call('XGROUP', 'CREATE', KEYS[3], ARGV[4], '0', 'MKSTREAM')
return 1
