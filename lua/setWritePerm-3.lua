--[[
  setWritePerm: WIPE_WRITE_PERM_OF_BROKER (205) and ADD_WRITE_PERM_OF_BROKER (327),
  RouteInfoManager.wipeWritePermOfBrokerByLock / addWritePermOfBrokerByLock, on the broker name's
  queue in each topic:
    wipe: clears the write bit (6 -> 4, 7 -> 5, 4 -> 4);
    add:  sets perm to READ|WRITE = 6, dropping the inherit/priority bits, as Java does.
  Counts every topic in which the broker has a queue, changed or not, as Java does. The worker
  names the topics from {ns}:btopics:<brokerName> and sends them in bounded chunks, summing the
  counts; a topic no longer holding the broker's queue is skipped.
  @keys-variadic: after the 3 fixed keys, one {ns}:topic:<topic> key per topic in ARGV.

  KEYS[1]  {ns}:routever        STRING route version
  KEYS[2]  {ns}:events          STREAM change log
  KEYS[3]  {ns}:bdigest         HASH brokerName -> digest of its registered topic names: cleared
           when a queue changes, so the broker's next registration cannot skip topics

  ARGV[1]  brokerName
  ARGV[2]  change-log length
  ARGV[3]  "wipe" or "add"
  ARGV[4]  number of topics N, then N topic names

  Returns: {count}: topics in which the broker name has a queue; {-5} for another ARGV[3]
  (nothing changed).
  Change log: one wipePerm or addPerm event.
  Complexity: O(N).
]]
--- @include "common"

local K = {routever = KEYS[1], events = KEYS[2], bdigest = KEYS[3]}
local brokerName, maxLen, mode, n = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local apply, kind
if mode == 'wipe' then
  apply, kind = clearWriteBit, 'wipePerm'
elseif mode == 'add' then
  apply, kind = function(qd) return setPerm(qd, 6) end, 'addPerm'
else
  return {-5}
end
local now = nowMs()
local count, changed = 0, {}
for i = 1, n do
  local topic, key = ARGV[4 + i], KEYS[3 + i]
  local qd = rcall('HGET', key, brokerName)
  if qd then
    count = count + 1
    local updated = apply(qd)
    if updated ~= qd then
      rcall('HSET', key, brokerName, updated)
      changed[#changed + 1] = '[' .. jsonString(topic) .. ',' .. updated .. ']'
    end
  end
end
if #changed > 0 then
  rcall('INCR', K.routever)
  rcall('HDEL', K.bdigest, brokerName)
end
emit(K.events, maxLen, kind, now, {'brokerName', brokerName, 'count', count,
  'upserted', '[' .. table.concat(changed, ',') .. ']'})
return {count}
