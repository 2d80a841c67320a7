-- Shared by the scripts that change a model's version explicitly (included
-- with "--! include lib_log_marker"): add a marker to the model's decision
-- log in the step that made the change, so that no trainer batch of the new
-- version is logged before it.  Only while the model exists: after a delete
-- a marker would start a log that no delete removes and that a model
-- re-created under the id would read.  Markers are not batches: the log
-- index and the stats' event count leave them out, and the publish's trim
-- drops them with the batches around them.
-- meta_key: the model hash; log_key: its decision log; name: the marker's
-- type; detail: its detail, a JSON object.
-- Returns the entry id, or false when the model is gone.
local function log_marker(meta_key, log_key, name, detail)
  if redis.call('EXISTS', meta_key) == 0 then
    return false
  end
  return redis.call('XADD', log_key, '*', 'k', 'marker', 'm', name, 'd', detail)  -- k: MARKER_KIND
end

-- detail (a JSON object, '' for none) with "version": v as its first member;
-- spliced as text so the caller's numbers stay exactly as it encoded them.
local function with_version(detail, v)
  local rest = string.match(detail, '^%s*{%s*(.-)%s*}%s*$') or ''
  if rest == '' then
    return '{"version":' .. v .. '}'
  end
  return '{"version":' .. v .. ',' .. rest .. '}'
end
