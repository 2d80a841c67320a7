-- Take or renew the trainer leases of many models in one step, each as
-- lease_take.lua does (a single Redis only: the keys carry different hash tags).
-- KEYS: per model i: lease (2i - 1), the model's config hash (2i)
-- ARGV: 1 owner, 2 time to live (ms)
-- Returns per model 1 when ARGV[1] holds its lease now, else 0 (another owner holds
-- it, or the model is gone).
local out = {}
for i = 1, #KEYS, 2 do
  local held = 0
  if redis.call('EXISTS', KEYS[i + 1]) == 1 then
    local cur = redis.call('GET', KEYS[i])
    if cur == ARGV[1] then
      redis.call('PEXPIRE', KEYS[i], ARGV[2])
      held = 1
    elseif not cur then
      redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
      held = 1
    end
  end
  out[#out + 1] = held
end
return out
