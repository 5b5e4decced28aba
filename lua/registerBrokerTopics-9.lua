--[[
  registerBrokerTopics: one bounded chunk of REGISTER_BROKER's topic writes (rule R10, with
  createAndUpdateQueueData of R10b, the removals of R10a and the static-topic mappings of R10c).
  Runs only while the registration that registerBroker recorded as pending still owns the
  broker (same token); a newer registration or an unregister fences older chunks out. Chunks
  only add or update queues before the final one removes any, so no intermediate state loses a
  route that existed before. The final chunk commits the dataVersion and topic digest.
  @keys-variadic: after the 9 fixed keys come one {ns}:topic:<topic> key per upsert, then one per
  removal, then one {ns}:mapping:<topic> key per mapping, in ARGV order.

  KEYS[1]  {ns}:pending         HASH member -> pending registration JSON
  KEYS[2]  {ns}:topics          SET of every topic
  KEYS[3]  {ns}:topicflags      HASH topic -> topicSysFlag (only non-zero flags)
  KEYS[4]  {ns}:btopics:<brokerName>  SET topics the broker name has queues in
  KEYS[5]  {ns}:dataversions    HASH member -> DataVersion JSON
  KEYS[6]  {ns}:bdigest         HASH brokerName -> digest of its registered topic names
  KEYS[7]  {ns}:routever        STRING route version
  KEYS[8]  {ns}:events          STREAM change log
  KEYS[9]  {ns}:live            HASH member -> live info JSON (the final chunk records the body)

  ARGV[1]  member '<cluster>/<brokerAddr>'
  ARGV[2]  brokerName
  ARGV[3]  registration token the worker passed to registerBroker
  ARGV[4]  '1' for the final chunk, else '0'
  ARGV[5]  number of upserts U
  ARGV[6]  number of removals R (only in a final chunk, for deleteTopicWithBrokerRegistration)
  ARGV[7]  number of static-topic mappings M (only in a final chunk)
  ARGV[8]  change-log length
  ARGV[9]  chunk number (diagnostics)
  then U triples: topic, QueueData JSON (canonical, as the broker sent it), its topicSysFlag
  then R topic names
  then M pairs: topic, TopicQueueMappingInfo JSON (stored under its "bname")

  Returns: {status, upserted, removed}
    status 1 applied; -1 fenced (no pending registration with this token: nothing written).
  Complexity: O(U + R + M).
]]
--- @include "common"

local K = {pending = KEYS[1], topics = KEYS[2], topicflags = KEYS[3], btopics = KEYS[4],
  dataversions = KEYS[5], bdigest = KEYS[6], routever = KEYS[7], events = KEYS[8], live = KEYS[9]}
local member, brokerName, token = ARGV[1], ARGV[2], ARGV[3]
local final = ARGV[4] == '1'
local nUp, nRm, nMap = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local maxLen, chunk = ARGV[8], ARGV[9]

local pending = decodeOrNil(rcall('HGET', K.pending, member))
if not pending or pending.token ~= token then
  return {-1, 0, 0}
end
local now = nowMs()
local upserted, removed, fresh = {}, {}, {}
local a = 10
for i = 1, nUp do
  local topic, qd, flag = ARGV[a], ARGV[a + 1], ARGV[a + 2]
  a = a + 3
  local key = KEYS[9 + i]
  if pending.wipe then qd = clearWriteBit(qd) end
  local previous = rcall('HGET', key, brokerName)
  if previous ~= qd and (pending.mode == 1 or not previous) then
    rcall('HSET', key, brokerName, qd)
    upserted[#upserted + 1] = '[' .. jsonString(topic) .. ',' .. qd .. ']'
    if not previous then
      fresh[#fresh + 1] = topic
      if rcall('HLEN', key) == 1 then
        -- a new topic: its only queue sets the flag (a removed topic left none behind)
        if flag ~= '0' then rcall('HSET', K.topicflags, topic, flag) end
      else
        syncTopicFlag(K.topicflags, key, topic)
      end
    elseif string.match(previous, '"topicSysFlag":(%-?%d+)') ~= flag then
      syncTopicFlag(K.topicflags, key, topic)
    end
  end
end
-- Only queues new to the broker change the topic indexes.
addAll('SADD', K.topics, fresh)
addAll('SADD', K.btopics, fresh)
local gone
removed, gone = dropQueues(brokerName, K.topicflags, KEYS, 10 + nUp, ARGV, a, nRm)
a = a + nRm
addAll('SREM', K.topics, gone)
addAll('SREM', K.btopics, removed)
if final then
  if pending.mapWrite then
    for m = 1, nMap do
      -- R10c: T6[topic][info.bname] = info (the registering broker's name if bname is absent).
      local ok, info = pcall(cjson.decode, ARGV[a + 1])
      local bname = brokerName
      if ok and type(info) == 'table' and type(info.bname) == 'string' and info.bname ~= '' then
        bname = info.bname
      end
      rcall('HSET', KEYS[9 + nUp + nRm + m], bname, ARGV[a + 1])
      a = a + 2
    end
  end
  rcall('HSET', K.dataversions, member, pending.dataVersion)
  rcall('HSET', K.bdigest, brokerName, pending.digest)
  local info = decodeOrNil(rcall('HGET', K.live, member))
  if info and pending.body and tostring(info.epoch) == tostring(pending.epoch) then
    info.body = pending.body
    rcall('HSET', K.live, member, cjson.encode(info))
  end
  rcall('HDEL', K.pending, member)
end
if #upserted > 0 or #removed > 0 then
  rcall('INCR', K.routever)
end
if #upserted > 0 or #removed > 0 or final then
  local cluster = string.match(member, '^(.*)/[^/]*$')
  emit(K.events, maxLen, 'registerQueues', now, {'cluster', cluster, 'brokerName', brokerName,
    'brokerAddr', string.sub(member, #cluster + 2), 'epoch', pending.epoch,
    'upserted', '[' .. table.concat(upserted, ',') .. ']', 'removed', jsonList(removed),
    'final', final and '1' or '0', 'chunk', chunk, 'dataVersion', pending.dataVersion})
end
return {1, #upserted, #removed}
