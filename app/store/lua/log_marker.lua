-- Add a marker to a model's decision log, only while the model exists: after a
-- delete (racing the promote, rollback or reset it marks) it would start a log
-- that no delete removes and that a model re-created under the id would read.
-- KEYS: 1 meta, 2 decision log
-- ARGV: 1 marker entry kind, 2 marker name, 3 detail JSON
-- Returns the entry id, or false when the model is gone.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return false
end
return redis.call('XADD', KEYS[2], '*', 'k', ARGV[1], 'm', ARGV[2], 'd', ARGV[3])
