-- Read what the feedback parts of a batch depend on, in one step: each
-- event's logged context and partial feedback, and the model's label budget.
-- (A pipeline of one GET and one HMGET per event costs the client far more
-- than this one flat reply.)
-- KEYS: 1 budget, then per event i: context (2i), partial (2i + 1)
-- Returns {budget rounds, budget state, then per event: context, wanted,
-- received, feedback blob}, each nil when absent.
local out = redis.call('HMGET', KEYS[1], 'rounds', 'state')
for i = 2, #KEYS, 2 do
  local n = #out
  out[n + 1] = redis.call('GET', KEYS[i])
  local part = redis.call('HMGET', KEYS[i + 1], 'want', 'n', 'f')
  out[n + 2], out[n + 3], out[n + 4] = part[1], part[2], part[3]
end
return out
