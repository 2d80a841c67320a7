-- Mark a detection of the model's drift detector in its decision log (the
-- trainer, after the batch in which it fell was published and logged).
-- KEYS: 1 model (config), 2 decision log
-- ARGV: 1 marker name, 2 its detail (JSON object)
-- Returns the entry id, or false when the model is gone.
--! include lib_log_marker
return log_marker(KEYS[1], KEYS[2], ARGV[1], ARGV[2])
