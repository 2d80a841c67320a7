-- Replace a model's config JSON, only while the model exists (a concurrent
-- delete must not leave a config without a model behind).
-- KEYS: 1 meta
-- ARGV: 1 config JSON
-- Returns 1 when replaced, 0 when the model is gone.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
redis.call('HSET', KEYS[1], 'config', ARGV[1])
return 1
