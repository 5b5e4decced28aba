--[[
  deleteTopic: DELETE_TOPIC_IN_NAMESRV (216), RouteInfoManager.deleteTopic(topic) and
  deleteTopic(topic, cluster). Without a cluster every queue of the topic goes; with one, only
  the queues of broker names in that cluster (a missing cluster is a no-op). The static-topic
  mapping is kept, as in Java. A removed queue clears its broker's topic digest, so the broker's
  next registration writes the topic back (Java's isTopicConfigChanged), as RocketMQ does.
  @keys-variadic: after the 7 fixed keys, one {ns}:btopics:<brokerName> key per name in ARGV;
  the worker names the broker names it read from the topic, and the script asks again with
  status -3 if the topic holds others by then.

  KEYS[1]  {ns}:topics          SET of every topic
  KEYS[2]  {ns}:topicflags      HASH topic -> topicSysFlag (only non-zero flags)
  KEYS[3]  {ns}:clusters        HASH cluster -> JSON array of broker names
  KEYS[4]  {ns}:bdigest         HASH brokerName -> digest of its registered topic names
  KEYS[5]  {ns}:routever        STRING route version
  KEYS[6]  {ns}:events          STREAM change log
  KEYS[7]  {ns}:topic:<topic>   HASH brokerName -> QueueData JSON

  ARGV[1]  topic
  ARGV[2]  clusterName, or '' for every cluster
  ARGV[3]  change-log length
  ARGV[4]  number of broker names N, then N broker names (one per variadic key)

  Returns: {status, value...}
    status 1, then the number of queues removed; or -3, then the broker names the topic holds
    queues of that were not passed (call again with them): nothing was changed.
  Complexity: O(broker names of the topic).
]]
--- @include "common"

local K = {topics = KEYS[1], topicflags = KEYS[2], clusters = KEYS[3], bdigest = KEYS[4],
  routever = KEYS[5], events = KEYS[6], topic = KEYS[7]}
local topic, cluster, maxLen, n = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local given = {}
for i = 1, n do given[ARGV[4 + i]] = KEYS[7 + i] end

local targets = rcall('HKEYS', K.topic)
if cluster ~= '' then
  local list = rcall('HGET', K.clusters, cluster)
  if not list then return {1, 0} end
  local inCluster = {}
  for _, b in ipairs(cjson.decode(list)) do inCluster[b] = true end
  local kept = {}
  for _, b in ipairs(targets) do
    if inCluster[b] then kept[#kept + 1] = b end
  end
  targets = kept
end
local missing = {-3}
for _, b in ipairs(targets) do
  if not given[b] then missing[#missing + 1] = b end
end
if #missing > 1 then return missing end
for _, b in ipairs(targets) do
  rcall('HDEL', K.topic, b)
  rcall('SREM', given[b], topic)
  rcall('HDEL', K.bdigest, b)
end
if rcall('EXISTS', K.topic) == 0 then
  rcall('SREM', K.topics, topic)
end
if #targets > 0 then syncTopicFlag(K.topicflags, K.topic, topic) end
if #targets > 0 then
  rcall('INCR', K.routever)
  emit(K.events, maxLen, 'topicDelete', nowMs(), {'topic', topic, 'cluster', cluster,
    'brokerNames', jsonList(targets)})
end
return {1, #targets}
