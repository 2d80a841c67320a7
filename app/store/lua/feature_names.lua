-- Record the names of hashed features: each field (a named feature's hashed key, prefixed by
-- its kind) maps to the bucket it hashed into; a field already known is left as it is.
-- KEYS: 1 the model's feature-name hash
-- ARGV: 1 most fields the hash may hold, then field, bucket pairs
-- Returns the number of fields added (the ones past the cap are not).
local cap = tonumber(ARGV[1])
local held = redis.call('HLEN', KEYS[1])
local added = 0
for i = 2, #ARGV, 2 do
  if held >= cap then break end
  local n = redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[i + 1])
  held = held + n
  added = added + n
end
return added
