-- Hand entries back to the pending list as if this delivery had not happened
-- (their delivery counts set back), for the lease owner only: the trainer
-- read them, but the model changed under the batch (a reset, rollback,
-- import or promotion refused its publish), which is no failure of theirs.
-- They stay pending with the owner and come first in its next read.  An
-- entry acknowledged meanwhile is not pending and stays so.
-- KEYS: 1 lease, 2 events
-- ARGV: 1 owner (consumer name), 2 group, then pairs (stream id, delivery
--       count to set)
-- Returns 0 when ARGV[1] does not hold the lease (nothing is changed), else 1.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
local by_count = {}
for i = 3, #ARGV, 2 do
  local count = ARGV[i + 1]
  by_count[count] = by_count[count] or {}
  table.insert(by_count[count], ARGV[i])
end
for count, ids in pairs(by_count) do
  for first = 1, #ids, 500 do  -- unpack() of many ids overflows Lua's C stack
    local args = {}
    for i = first, math.min(first + 499, #ids) do
      args[#args + 1] = ids[i]
    end
    -- RETRYCOUNT sets the count; JUSTID does not add this claim to it
    args[#args + 1], args[#args + 2], args[#args + 3] = 'RETRYCOUNT', count, 'JUSTID'
    redis.call('XCLAIM', KEYS[2], ARGV[2], ARGV[1], 0, unpack(args))
  end
end
return 1
