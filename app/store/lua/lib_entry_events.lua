-- Shared by the scripts that count a model's stream in events, not entries (included
-- with "--! include lib_entry_events"): an entry of a feedback batch (take_feedback.lua)
-- holds its n events; an entry of one event has no n.  A malformed n counts 1, as the
-- trainer dead-letters such an entry as one row.
local function entry_events(items)
  for i = 1, #items, 2 do
    if items[i] == 'n' then
      return math.max(tonumber(items[i + 1]) or 1, 1)
    end
  end
  return 1
end
