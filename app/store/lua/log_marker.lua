-- Add a marker to a model's decision log, only while the model exists (see
-- lib_log_marker.lua).
-- KEYS: 1 meta, 2 decision log
-- ARGV: 1 marker name, 2 detail JSON
-- Returns the entry id, or false when the model is gone.
--! include lib_log_marker
return log_marker(KEYS[1], KEYS[2], ARGV[1], ARGV[2])
