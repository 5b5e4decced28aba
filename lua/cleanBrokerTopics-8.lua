--[[
  cleanBrokerTopics: the topic half of an unregistration or expiry (U4/U5,
  cleanTopicByUnRegisterRequests), for one broker name and a bounded set of its topics. It acts
  on the state it finds, so it is idempotent and safe to repeat: when the broker name is gone
  from {ns}:brokers its queues are removed (and topics left with no queue are deleted); when it
  still exists with enableActingMaster and no master, the write bit of its queues is cleared;
  otherwise (it re-registered meanwhile) nothing changes. Reads hide queues of broker names that
  have no BrokerData, so readers never see a half-cleaned broker.
  @keys-variadic: after the 8 fixed keys, one {ns}:topic:<topic> key per topic in ARGV.

  KEYS[1]  {ns}:brokers         HASH brokerName -> BrokerData JSON
  KEYS[2]  {ns}:topics          SET of every topic
  KEYS[3]  {ns}:topicflags      HASH topic -> topicSysFlag (only non-zero flags)
  KEYS[4]  {ns}:btopics:<brokerName>  SET topics the broker name has queues in
  KEYS[5]  {ns}:bdigest         HASH brokerName -> digest of its registered topic names
  KEYS[6]  {ns}:pendingclean    SET broker names whose topic cleanup is not finished
  KEYS[7]  {ns}:routever        STRING route version
  KEYS[8]  {ns}:events          STREAM change log

  ARGV[1]  brokerName
  ARGV[2]  '1' for the last chunk: the name leaves {ns}:pendingclean
  ARGV[3]  change-log length
  ARGV[4]  number of topics N, then N topic names

  Returns: {removed, permCleared}: queues removed and queues whose write bit was cleared.
  Complexity: O(N).
]]
--- @include "common"

local K = {brokers = KEYS[1], topics = KEYS[2], topicflags = KEYS[3], btopics = KEYS[4],
  bdigest = KEYS[5], pendingclean = KEYS[6], routever = KEYS[7], events = KEYS[8]}
local brokerName, final, maxLen, n = ARGV[1], ARGV[2] == '1', ARGV[3], tonumber(ARGV[4])
local now = nowMs()
local bd = decodeOrNil(rcall('HGET', K.brokers, brokerName))
local removed, cleared = {}, {}
if not bd then
  local gone
  removed, gone = dropQueues(brokerName, K.topicflags, KEYS, 9, ARGV, 5, n)
  addAll('SREM', K.topics, gone)
  local listed = {}
  for i = 1, n do listed[i] = ARGV[4 + i] end
  addAll('SREM', K.btopics, listed)
  rcall('HDEL', K.bdigest, brokerName)
elseif bd.enableActingMaster and noMaster(bd) then
  for i = 1, n do
    local topic, key = ARGV[4 + i], KEYS[8 + i]
    local qd = rcall('HGET', key, brokerName)
    if qd then
      local wiped = clearWriteBit(qd)
      if wiped ~= qd then
        rcall('HSET', key, brokerName, wiped)
        cleared[#cleared + 1] = '[' .. jsonString(topic) .. ',' .. wiped .. ']'
      end
    end
  end
end
if final then
  rcall('SREM', K.pendingclean, brokerName)
  if not bd and rcall('SCARD', K.btopics) == 0 then rcall('DEL', K.btopics) end
end
if #removed > 0 or #cleared > 0 then
  rcall('INCR', K.routever)
  emit(K.events, maxLen, 'cleanQueues', now, {'brokerName', brokerName,
    'removed', jsonList(removed), 'upserted', '[' .. table.concat(cleared, ',') .. ']'})
end
return {#removed, #cleared}
