--[[
  @master-only: on Redis 7 it declares flags, so a demoted master refuses it (store/scripts.py).
  getRouteInfo: the table walk of GET_ROUTEINFO_BY_TOPIC (105), RouteInfoManager
  .pickupTopicRouteData rules P1-P6, read in one snapshot. Brokers past their deadline are
  hidden as the sweep would remove them: an address is dropped, a broker name left with no
  address is dropped with its queues, and a broker name that lost its master this way while
  enableActingMaster is on has its queues' write bit cleared (U5). Queues of broker names
  without BrokerData are not returned (they only exist while a removal is being cleaned up).
  The worker adds acting-master presentation (P7), orderTopicConf and zone filtering.

  KEYS[1]  {ns}:topic:<topic>   HASH brokerName -> QueueData JSON
  KEYS[2]  {ns}:brokers         HASH brokerName -> BrokerData JSON
  KEYS[3]  {ns}:deadlines       ZSET member scored by deadline ms
  KEYS[4]  {ns}:filters         HASH member -> JSON array of filter servers
  KEYS[5]  {ns}:mapping:<topic> HASH brokerName -> TopicQueueMappingInfo JSON
  KEYS[6]  {ns}:kv:ORDER_TOPIC_CONFIG  HASH topic -> order config
  KEYS[7]  {ns}:meta            HASH lastBeat: the fleet's last contact with Redis (ms); instance:
           the data set's identity (readChanges-2)
  KEYS[8]  {ns}:events          STREAM change log (only its newest id is read, only with no route)

  ARGV[1]  topic
  ARGV[2]  '1' to read the topic's orderTopicConf (orderMessageEnable)
  ARGV[3]  '1' when the reader caches the route: it needs each address's deadline
           (deadlinesFlat) and validUntil from the brokers returned. '0' (a worker without a
           route cache): while no address of any broker is past its deadline, nothing is hidden,
           so the BrokerData texts are returned as stored, undecoded, no address's deadline is
           read, and validUntil is the earliest deadline of every broker (never later than the
           route's own). Decoding 100 BrokerData and scoring their 300 addresses was four
           fifths of a 100-group route's Redis time.

  Returns: {found, queueDatas, brokerDatas, filterFlat, mappingFlat, orderTopicConf, now, validUntil,
            hiddenNames, deadlinesFlat, instance, newestId}
    found 0 means TOPIC_NOT_EXIST (no queues, or no live broker); queueDatas and brokerDatas
    are lists of JSON texts; filterFlat is addr, JSON array pairs; mappingFlat is HGETALL of the
    mapping; orderTopicConf is '' when absent or not asked for; now is the Redis clock (ms) and
    validUntil the earliest deadline of the brokers returned ('' when none has one): past it,
    this answer may show an expired broker, so a cache must not serve it any longer.
    hiddenNames lists the broker names holding queues of the topic that the answer leaves out
    (no BrokerData, or every address past its deadline): if one of them comes back, this answer
    is out of date although it does not mention it. deadlinesFlat is member, deadline pairs
    of every address returned: a cache extends them as heartbeats come in. instance (only when
    found is 0, else '') is the data set's identity ('' when none is named yet), and newestId
    (only when found is 0, else '') the change log's newest entry id ('0-0' when it is empty): a
    worker whose change feed has not yet noticed that Redis lost its data must not take this "no
    such topic" as an answer, whether Redis restarted empty or was flushed (another identity),
    or a replica that missed writes was promoted (the same identity, but a change log that ends
    before the entry the worker applied last).
    While the fleet is silent (silence.lua), deadlines are judged at its last beat.
  Complexity: O(broker names of the topic x their ids); with ARGV[3] '0' and no address past its
  deadline, O(broker names of the topic) and one read of the earliest deadline.
]]
--- @include "common"
--- @include "silence"

local topic, wantOrder, forCache = ARGV[1], ARGV[2] == '1', ARGV[3] == '1'
local queues = rcall('HGETALL', KEYS[1])
local now = nowMs()
local function absent(hidden)
  local top = rcall('XREVRANGE', KEYS[8], '+', '-', 'COUNT', 1)
  return {0, {}, {}, {}, {}, '', now, '', hidden, {}, rcall('HGET', KEYS[7], 'instance') or '',
    #top > 0 and top[1][1] or '0-0'}
end
if #queues == 0 then return absent({}) end
local judged = judgedAt(KEYS[7], now)
local qds, bds, shown, hidden, seen = {}, {}, {}, {}, {}
local validUntil = nil
-- Every broker name's BrokerData, then every address's deadline, each in few calls: one call per
-- name and per address made a 100-group route (300 addresses) 400 calls.
local names = {}
for i = 1, #queues, 2 do names[#names + 1] = queues[i] end
local raws = {}
for i = 1, #names, 500 do
  local last = math.min(i + 499, #names)
  local got = rcall('HMGET', KEYS[2], unpack(names, i, last))
  for j = i, last do raws[j] = got[j - i + 1] end
end
-- The earliest deadline of every address says both whether any is past (then the full path
-- below hides it) and, when none is, until when this answer holds.
local earliest = nil
if not forCache then
  local first = rcall('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')
  earliest = tonumber(first[2])
end
local nothingExpired = not forCache and (earliest == nil or earliest >= judged)
if nothingExpired then
  for i = 1, #names do
    if raws[i] then
      qds[#qds + 1] = queues[2 * i]
      bds[#bds + 1] = raws[i]
    else
      hidden[#hidden + 1] = names[i]
    end
  end
  validUntil = earliest
else
  local decoded, membersOf, all = {}, {}, {}
  for i = 1, #names do
    if raws[i] then
      local bd = cjson.decode(raws[i])
      local members = addrMembers(bd)
      decoded[i], membersOf[i] = bd, members
      for _, m in pairs(members) do all[#all + 1] = m end
    end
  end
  local deadline = deadlinesOf(KEYS[3], all)
  for i = 1, #names do
    local qd, bd, raw = queues[2 * i], decoded[i], raws[i]
    if bd then
      local hadAddrs = next(bd.brokerAddrs) ~= nil
      local dropped, soonest = hideExpiredOf(bd, membersOf[i], deadline, judged, seen)
      if not (hadAddrs and next(bd.brokerAddrs) == nil) then
        if dropped then
          if bd.enableActingMaster and noMaster(bd) then qd = clearWriteBit(qd) end
          raw = encodeBroker(bd)
        end
        qds[#qds + 1] = qd
        bds[#bds + 1] = raw
        if soonest and (validUntil == nil or soonest < validUntil) then validUntil = soonest end
        shown[#shown + 1] = bd
      else
        hidden[#hidden + 1] = names[i]
      end
    else
      hidden[#hidden + 1] = names[i]
    end
  end
end
if #bds == 0 then return absent(hidden) end
local filters = {}
if rcall('HLEN', KEYS[4]) > 0 then
  if nothingExpired then
    for i, raw in ipairs(bds) do shown[i] = cjson.decode(raw) end
  end
  for _, bd in ipairs(shown) do
    for _, a in pairs(bd.brokerAddrs) do
      local f = rcall('HGET', KEYS[4], bd.cluster .. '/' .. a)
      if f then
        filters[#filters + 1] = a
        filters[#filters + 1] = f
      end
    end
  end
end
local order = ''
if wantOrder then order = rcall('HGET', KEYS[6], topic) or '' end
local deadlines = {}
for member, deadline in pairs(seen) do
  deadlines[#deadlines + 1] = member
  deadlines[#deadlines + 1] = deadline
end
return {1, qds, bds, filters, rcall('HGETALL', KEYS[5]), order, now,
  validUntil and string.format('%d', validUntil) or '', hidden, deadlines, '', ''}
