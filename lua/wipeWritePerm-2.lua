--[[
  wipeWritePerm: WIPE_WRITE_PERM_OF_BROKER (205), RouteInfoManager.wipeWritePermOfBrokerByLock: clears
  the write bit of the broker name's queue in each topic (6 -> 4, 7 -> 5, 4 -> 4).
  Counts every topic in which the broker has a queue, changed or not, as Java does. The worker
  names the topics from {ns}:btopics:<brokerName> and sends them in bounded chunks, summing the
  counts; a topic no longer holding the broker's queue is skipped.
  @keys-variadic: after the 2 fixed keys, one {ns}:topic:<topic> key per topic in ARGV.

  KEYS[1]  {ns}:routever        STRING route version
  KEYS[2]  {ns}:events          STREAM change log

  ARGV[1]  brokerName
  ARGV[2]  change-log length
  ARGV[3]  number of topics N, then N topic names

  Returns: {count}: topics in which the broker name has a queue.
  Complexity: O(N).
]]
--- @include "common"

local K = {routever = KEYS[1], events = KEYS[2]}
local brokerName, maxLen, n = ARGV[1], ARGV[2], tonumber(ARGV[3])
local now = nowMs()
local count, changed = 0, {}
for i = 1, n do
  local topic, key = ARGV[3 + i], KEYS[2 + i]
  local qd = rcall('HGET', key, brokerName)
  if qd then
    count = count + 1
    local updated = clearWriteBit(qd)
    if updated ~= qd then
      rcall('HSET', key, brokerName, updated)
      changed[#changed + 1] = '[' .. jsonString(topic) .. ',' .. updated .. ']'
    end
  end
end
if #changed > 0 then rcall('INCR', K.routever) end
emit(K.events, maxLen, 'wipePerm', now, {'brokerName', brokerName, 'count', count,
  'upserted', '[' .. table.concat(changed, ',') .. ']'})
return {count}
