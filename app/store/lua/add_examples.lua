-- Append examples that had no prior decision (noisy_label: features and a
-- label posted together) to the model's event stream, with the count, in
-- one step.
-- KEYS: 1 events, 2 stats, 3 the model's asleep flag (lib_wake)
-- ARGV: per example: event id, context blob, feedback blob
-- Returns the stream ids.
--! include lib_wake
local ids = {}
for i = 1, #ARGV, 3 do
  ids[#ids + 1] = redis.call('XADD', KEYS[1], '*', 'k', 'feedback', 'e', ARGV[i],
                             'c', ARGV[i + 1], 'f', ARGV[i + 2])
end
redis.call('HINCRBY', KEYS[2], 'feedback_accepted', #ids)
wake_trainer(KEYS[3])
return ids
