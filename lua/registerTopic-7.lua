--[[
  registerTopic: REGISTER_TOPIC_IN_NAMESRV (217), RouteInfoManager.registerTopic. Stores each
  QueueData as sent. For an existing topic the queues are written in order until one names an
  unknown broker (earlier writes stay, as in Java); a new topic is created only if every broker
  name is known. No liveness or cluster checks.
  @keys-variadic: after the 7 fixed keys, one {ns}:btopics:<brokerName> key per queue in ARGV.

  KEYS[1]  {ns}:brokers         HASH brokerName -> BrokerData JSON
  KEYS[2]  {ns}:topics          SET of every topic
  KEYS[3]  {ns}:topicflags      HASH topic -> topicSysFlag (only non-zero flags)
  KEYS[4]  {ns}:bdigest         HASH brokerName -> digest of its registered topic names
  KEYS[5]  {ns}:routever        STRING route version
  KEYS[6]  {ns}:events          STREAM change log
  KEYS[7]  {ns}:topic:<topic>   HASH brokerName -> QueueData JSON

  ARGV[1]  topic
  ARGV[2]  change-log length
  ARGV[3]  number of queues N, then N triples: brokerName, QueueData JSON, topicSysFlag (unused:
           the topic's flag is recomputed from its stored queues)

  Returns: {written}: queues stored (0 when the topic was new and a broker name unknown).
  Complexity: O(N).
]]
--- @include "common"

local K = {brokers = KEYS[1], topics = KEYS[2], topicflags = KEYS[3], bdigest = KEYS[4],
  routever = KEYS[5], events = KEYS[6], topic = KEYS[7]}
local topic, maxLen, n = ARGV[1], ARGV[2], tonumber(ARGV[3])
local exists = rcall('EXISTS', K.topic) == 1
if not exists then
  for i = 1, n do
    if rcall('HEXISTS', K.brokers, ARGV[1 + 3 * i]) == 0 then return {0} end
  end
end
local written = {}
for i = 1, n do
  local b, qd = ARGV[1 + 3 * i], ARGV[2 + 3 * i]
  if rcall('HEXISTS', K.brokers, b) == 0 then break end
  rcall('HSET', K.topic, b, qd)
  rcall('SADD', KEYS[7 + i], topic)
  written[#written + 1] = '[' .. jsonString(topic) .. ',' .. qd .. ']'
end
if #written > 0 then
  syncTopicFlag(K.topicflags, K.topic, topic)
  rcall('SADD', K.topics, topic)
  rcall('INCR', K.routever)
  emit(K.events, maxLen, 'topicRegister', nowMs(), {'topic', topic,
    'upserted', '[' .. table.concat(written, ',') .. ']'})
end
return {#written}
