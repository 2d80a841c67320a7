-- Shared by the scripts that add entries to a model's event stream (included
-- with "--! include lib_wake"): a model whose trainer stopped reading it (its
-- asleep flag, set by trainer_read.lua after empty reads) is woken: the flag
-- is removed and a message published on the channel named like the flag,
-- which the trainers listen to.  A model read often costs one DEL of a
-- missing key per step.
local function wake_trainer(asleep_key)
  if redis.call('DEL', asleep_key) == 1 then
    redis.call('PUBLISH', asleep_key, '1')
  end
end
