-- Replace a model's config JSON, only while the model exists (a concurrent
-- delete must not leave a config without a model behind) and only while it
-- is still the config the caller read (a promotion or rollback written
-- meanwhile must not be undone).
-- KEYS: 1 meta
-- ARGV: 1 config JSON, 2 the config JSON as read
-- Returns 1 when replaced, else a ScriptResult (app/store/results.py): GONE
-- when the model is gone, MOVED when the config changed.
local cur = redis.call('HGET', KEYS[1], 'config')
if not cur then
  return -3  -- ScriptResult.GONE
end
if cur ~= ARGV[2] then
  return -1  -- ScriptResult.MOVED
end
redis.call('HSET', KEYS[1], 'config', ARGV[1])
return 1
