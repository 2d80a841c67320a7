-- Replace a model's config JSON, only while the model exists (a concurrent
-- delete must not leave a config without a model behind) and only while it
-- is still the config the caller read (a promotion or rollback written
-- meanwhile must not be undone).
-- KEYS: 1 meta
-- ARGV: 1 config JSON, 2 the config JSON as read
-- Returns 1 when replaced, 0 when the model is gone, -1 when the config changed.
local cur = redis.call('HGET', KEYS[1], 'config')
if not cur then
  return 0
end
if cur ~= ARGV[2] then
  return -1
end
redis.call('HSET', KEYS[1], 'config', ARGV[1])
return 1
