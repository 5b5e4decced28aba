--[[
  registerBrokerTopics: one bounded chunk of REGISTER_BROKER's topic writes (rule R10, with
  createAndUpdateQueueData of R10b, the removals of R10a and the static-topic mappings of R10c).
  Runs only while the registration that registerBroker recorded as pending still owns the
  broker (same token); a newer registration or an unregister fences older chunks out. Chunks
  only add or update queues before the final one removes any, so no intermediate state loses a
  route that existed before. The final chunk commits the dataVersion and topic digest.
  A delta chunk (ARGV[10] not '') carries only the topics whose config changed since an earlier
  body of the same broker: it applies only while {ns}:bsync says Redis still holds exactly what
  that body wrote (else status -4, nothing written: the worker sends every topic instead).
  @keys-variadic: after the 10 fixed keys come one {ns}:topic:<topic> key per upsert, then one per
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
  KEYS[10] {ns}:bsync           HASH brokerName -> '<member>|<w or ->|<body hash>': every queue of
           the broker name is what that body wrote (w: with the write bit cleared)

  ARGV[1]  member '<cluster>/<brokerAddr>'
  ARGV[2]  brokerName
  ARGV[3]  registration token the worker passed to registerBroker
  ARGV[4]  '1' for the final chunk, else '0'
  ARGV[5]  number of upserts U
  ARGV[6]  number of removals R (only in a final chunk, for deleteTopicWithBrokerRegistration)
  ARGV[7]  number of static-topic mappings M (only in a final chunk)
  ARGV[8]  change-log length
  ARGV[9]  chunk number (diagnostics)
  ARGV[10] '' for a chunk of a full write; else the body hash of the earlier body a delta is
           against (a delta is one final chunk)
  ARGV[11] length P of the topic keys' prefix '{ns}:topic:': an upsert's topic is its key
           after P characters
  ARGV[12] JSON object: upsert topic -> its topicSysFlag, for the flags that are not 0 (usually
           '{}'): searching each QueueData for it was a fifth of a new broker's Lua time
  ARGV[13] '1' when no upsert's topic name needs escaping in JSON (the usual case), else '0'
  ARGV[14] '' or the change log's `upserted` JSON for the case that every upsert is written as
           sent (no write-bit wipe): '[["<topic>",<i>],...]' in upsert order, i the 0-based index
           of the topic's QueueData in ARGV[15]. A new broker's chunks are that case; building
           the same text from pieces per topic was a third of their Lua time
  ARGV[15] with ARGV[14]: the change log's `queueDatas` JSON, '[<QueueData JSON>,...]', each
           distinct QueueData of the upserts once ('' with an empty ARGV[14])
  then U QueueData JSON, one per upsert key (canonical, in the workers' fixed field order): one
           argument per topic, since packing the arguments of 10,000 topics is a large share of
           a registration's cost in the worker
  then R topic names
  then M pairs: topic, TopicQueueMappingInfo JSON (stored under its "bname")

  Change log: one registerQueues entry when a queue or a mapping changed, or on the final chunk;
  `upserted` pairs each queue written with the index of its QueueData in `queueDatas` (a broker's
  topics mostly share one QueueData: a fifth of the log's bytes); `mapped` lists the topics whose
  static-topic mapping changed (routes carry the mapping).

  Returns: {status, upserted, removed}
    status 1 applied; -1 fenced (no pending registration with this token: nothing written);
    -4 delta refused: Redis no longer holds what the earlier body wrote (nothing written).
  Complexity: O(U + R + M).
]]
--- @include "common"

local K = {pending = KEYS[1], topics = KEYS[2], topicflags = KEYS[3], btopics = KEYS[4],
  dataversions = KEYS[5], bdigest = KEYS[6], routever = KEYS[7], events = KEYS[8], live = KEYS[9],
  bsync = KEYS[10]}
local FIXED, FIXED_ARGS = 10, 15
local member, brokerName, token = ARGV[1], ARGV[2], ARGV[3]
local final = ARGV[4] == '1'
local nUp, nRm, nMap = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local maxLen, chunk, deltaBase = ARGV[8], ARGV[9], ARGV[10]
local prefixLen = tonumber(ARGV[11])
local sysFlags, plainNames = cjson.decode(ARGV[12]), ARGV[13] == '1'

local pending = decodeOrNil(rcall('HGET', K.pending, member))
if not pending or pending.token ~= token then
  return {-1, 0, 0}
end
local syncPrefix = member .. '|' .. (pending.wipe and 'w' or '-') .. '|'
if deltaBase ~= '' then
  if pending.mode ~= 1 or rcall('HGET', K.bsync, brokerName) ~= syncPrefix .. deltaBase
      or rcall('HEXISTS', K.bdigest, brokerName) == 0 then
    return {-4, 0, 0}
  end
else
  -- a partial write: until the final chunk, no body describes the broker's queues
  rcall('HDEL', K.bsync, brokerName)
end
local now = nowMs()
-- The change log's `upserted` and `queueDatas` JSON: the worker's texts when every upsert is
-- written as sent (a queue written with its write bit wiped differs from them); else, or when
-- one is left alone, as pieces joined once: a string per topic would cost Lua an allocation and
-- a hash each.
local prebuilt = (not pending.wipe) and ARGV[14] or ''
local prebuiltQds = ARGV[15]
local upserted, nUpserted, fresh, unwritten = {'['}, 0, {}, {}
local qds, qdIndex = {}, {}
-- The topics' current flags, read once per chunk: the flags hash holds only non-zero flags,
-- and is usually empty.
local flags = {}
if nUp > 0 and rcall('HLEN', K.topicflags) > 0 then
  local names = {}
  for i = 1, nUp do names[i] = string.sub(KEYS[FIXED + i], prefixLen + 1) end
  local current = rcall('HMGET', K.topicflags, unpack(names))
  for i = 1, nUp do flags[names[i]] = current[i] end
end
local function addUpserted(topic, qd)
  local i = qdIndex[qd]
  if not i then
    qds[#qds + 1] = qd
    i = #qds - 1
    qdIndex[qd] = i
  end
  local n = #upserted
  upserted[n + 1] = nUpserted == 0 and '[' or ',['
  upserted[n + 2] = plainNames and ('"' .. topic .. '"') or jsonString(topic)
  upserted[n + 3] = ','
  upserted[n + 4] = i
  upserted[n + 5] = ']'
end
-- A broker name that held no topic when registerBroker ran (a new broker) has no queue to
-- compare with: one write per topic, its reply saying whether the queue is new.
local blank = pending.blank and deltaBase == ''
local a = FIXED_ARGS + 1
for i = 1, nUp do
  local key, qd = KEYS[FIXED + i], ARGV[a]
  a = a + 1
  local topic = string.sub(key, prefixLen + 1)
  local flag = sysFlags[topic] or 0
  if pending.wipe then qd = clearWriteBit(qd) end
  local written, new = false, false
  if blank then
    -- mode 2 adds only missing queues: HSETNX keeps one another member of the name wrote since
    new = rcall(pending.mode == 1 and 'HSET' or 'HSETNX', key, brokerName, qd) == 1
    written = new or pending.mode == 1
  else
    local previous = rcall('HGET', key, brokerName)
    if previous ~= qd and (pending.mode == 1 or not previous) then
      rcall('HSET', key, brokerName, qd)
      written, new = true, not previous
    end
  end
  if written then
    if prebuilt == '' then addUpserted(topic, qd) end
    nUpserted = nUpserted + 1
    if new then fresh[#fresh + 1] = topic end
    -- The topic's flag is its lowest broker name's queue's: it can change only when this
    -- queue's flag differs from the topic's.
    if flag ~= tonumber(flags[topic] or 0) then
      syncTopicFlag(K.topicflags, key, topic)
    end
  elseif prebuilt ~= '' then
    unwritten[i] = true
  end
end
if prebuilt ~= '' and nUpserted < nUp then
  -- some were left alone: the worker's text lists too many
  nUpserted = 0
  for i = 1, nUp do
    if not unwritten[i] then
      addUpserted(string.sub(KEYS[FIXED + i], prefixLen + 1), ARGV[FIXED_ARGS + i])
      nUpserted = nUpserted + 1
    end
  end
  prebuilt = ''
end
-- Only queues new to the broker change the topic indexes.
addAll('SADD', K.topics, fresh)
addAll('SADD', K.btopics, fresh)
local removed, gone = dropQueues(brokerName, K.topicflags, KEYS, FIXED + 1 + nUp, ARGV, a, nRm)
a = a + nRm
addAll('SREM', K.topics, gone)
addAll('SREM', K.btopics, removed)
local mapped = {}
if final then
  if pending.mapWrite then
    for m = 1, nMap do
      -- R10c: T6[topic][info.bname] = info (the registering broker's name if bname is absent).
      local ok, info = pcall(cjson.decode, ARGV[a + 1])
      local bname = brokerName
      if ok and type(info) == 'table' and type(info.bname) == 'string' and info.bname ~= '' then
        bname = info.bname
      end
      if rcall('HGET', KEYS[FIXED + nUp + nRm + m], bname) ~= ARGV[a + 1] then
        rcall('HSET', KEYS[FIXED + nUp + nRm + m], bname, ARGV[a + 1])
        mapped[#mapped + 1] = ARGV[a]
      end
      a = a + 2
    end
  end
  rcall('HSET', K.dataversions, member, pending.dataVersion)
  rcall('HSET', K.bdigest, brokerName, pending.digest)
  -- only a write of every topic (or a delta on one) leaves the queues exactly as a body says
  if pending.mode == 1 and pending.body then
    rcall('HSET', K.bsync, brokerName, syncPrefix .. pending.body.hash)
  else
    rcall('HDEL', K.bsync, brokerName)
  end
  local info = decodeOrNil(rcall('HGET', K.live, member))
  if info and pending.body and tostring(info.epoch) == tostring(pending.epoch) then
    info.body = pending.body
    rcall('HSET', K.live, member, cjson.encode(info))
  end
  rcall('HDEL', K.pending, member)
end
if nUpserted > 0 or #removed > 0 or #mapped > 0 then
  rcall('INCR', K.routever)
end
if nUpserted > 0 or #removed > 0 or final then
  local cluster = string.match(member, '^(.*)/[^/]*$')
  emit(K.events, maxLen, 'registerQueues', now, {'cluster', cluster, 'brokerName', brokerName,
    'brokerAddr', string.sub(member, #cluster + 2), 'epoch', pending.epoch,
    'upserted', prebuilt ~= '' and prebuilt or (table.concat(upserted) .. ']'),
    'queueDatas', prebuilt ~= '' and prebuiltQds or ('[' .. table.concat(qds, ',') .. ']'),
    'removed', jsonList(removed),
    'final', final and '1' or '0', 'chunk', chunk, 'dataVersion', pending.dataVersion,
    'mapped', jsonList(mapped), 'replay', pending.replay and '1' or '0'})
end
return {1, nUpserted, #removed}
