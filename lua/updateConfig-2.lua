--[[
  updateConfig: UPDATE_NAMESRV_CONFIG (318) applied fleet-wide. Stores the overrides every
  worker applies on top of its own settings; workers learn of it from the change log.

  KEYS[1]  {ns}:config          HASH option name -> value text
  KEYS[2]  {ns}:events          STREAM change log

  ARGV[1]  change-log length
  ARGV[2]  JSON object of the changed options (already validated by the worker)
  then pairs of option name, value text

  Returns: {changed}: the number of options written.
  Complexity: O(options).
]]
--- @include "common"

local maxLen, changes = ARGV[1], ARGV[2]
local n = 0
for i = 3, #ARGV, 2 do
  rcall('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
  n = n + 1
end
emit(KEYS[2], maxLen, 'config', nowMs(), {'changes', changes})
return {n}
