--[[
  registerBroker: REGISTER_BROKER (103), the broker-level half of RouteInfoManager.registerBroker
  (rules R1-R9 and R11-R13). It decides whether the topic table must be written (R10) and, if so,
  records a pending registration that registerBrokerTopics applies in bounded chunks; the new
  dataVersion is committed only by the final chunk, so an interrupted registration is redone
  by the next one instead of being mistaken for "unchanged".

  KEYS[1]  {ns}:clusters        HASH cluster -> JSON array of broker names
  KEYS[2]  {ns}:brokers         HASH brokerName -> BrokerData JSON
  KEYS[3]  {ns}:live            HASH member -> live info JSON
  KEYS[4]  {ns}:deadlines       ZSET member scored by deadline ms
  KEYS[5]  {ns}:dataversions    HASH member -> DataVersion JSON
  KEYS[6]  {ns}:filters         HASH member -> JSON array of filter servers
  KEYS[7]  {ns}:pending         HASH member -> pending registration JSON
  KEYS[8]  {ns}:epoch           STRING registration epoch counter
  KEYS[9]  {ns}:routever        STRING route version
  KEYS[10] {ns}:events          STREAM change log
  KEYS[11] {ns}:bdigest         HASH brokerName -> digest of its registered topic names
  KEYS[12] {ns}:kvns            SET KV namespaces
  KEYS[13] {ns}:kv:ORDER_TOPIC_CONFIG  HASH topic -> order config
  KEYS[14] {ns}:alive:<cluster>/<addr> STRING epoch, PX = remaining life
  KEYS[15] {ns}:btopics:<brokerName>  SET topics the broker name has queues in
  KEYS[16] {ns}:holders:<cluster>/<addr> HASH holder -> 'o:<epoch>' (open) or 'c:<epoch>' (closed)
  KEYS[17] {ns}:workers         HASH workerId -> when it was last seen (ms, Redis clock)

  ARGV[1]  clusterName
  ARGV[2]  brokerAddr
  ARGV[3]  brokerName
  ARGV[4]  brokerId (integer)
  ARGV[5]  haServerAddr
  ARGV[6]  zoneName ('' = none)
  ARGV[7]  heartbeat timeout ms (the header's, else the configured default)
  ARGV[8]  enableActingMaster: '' when the header lacks it (4.x broker), 'true' or 'false'
  ARGV[9]  dataVersion JSON, canonical {"counter":N,"stateVersion":N,"timestamp":N}; or '' to reuse
           the last complete registration of the same body (ARGV[19]): the worker has not decoded it.
           ARGV[10]-[13] are then ignored, and the call answers status 3 unless the full path would
           leave topics untouched
  ARGV[10] dataVersion.stateVersion (integer)
  ARGV[11] filterServerList: '' when not sent, else a JSON array
  ARGV[12] number of topics in the body's topicConfigTable
  ARGV[13] digest of the sorted topic names of the body
  ARGV[14] registration token: fences this registration's chunks
  ARGV[15] id of the worker handling the request (diagnostics)
  ARGV[16] change-log length
  ARGV[17] '1' to return the ORDER_TOPIC_CONFIG table (returnOrderTopicConfigToBroker)
  ARGV[18] '1' when deleteTopicWithBrokerRegistration is on and the body has no static-topic
           mappings (R10a): leftover topics of the broker then force a topic pass
  ARGV[19] hash of the raw body (with request version and compressed flag), or ''
  ARGV[20] holder: '<workerId>#<connection>' when the registration came over a remoting
           connection (it then holds the broker: unregisterBroker; its worker is seen running
           now, see noteWorker), '' otherwise (HTTP)
  ARGV[21] a replay (registry/heal.py): the Redis time (ms) of the registration it replays, '' for
           a broker's own. Unless the live registration is this same copy's (its copyOf, so a
           retried call goes on), a replay changes nothing (status 4) when the live registration
           is as new or newer: the broker's own since, or another worker's newer copy
  ARGV[22] '1' for a replay's later batch (of a split registration): skipped (status 4) unless
           the live registration is this copy's, so a broker that registered or left meanwhile
           wins; '' otherwise
  ARGV[23] the broker's version (the request's MQVersion ordinal, 0 to 65535), '' when unknown
           (HTTP): kept in its live info for the operations console

  Returns: {status, epoch, mode, masterAddr, haServerAddr, hasOrderConfig, orderConfigFlat,
            routeChanged, registeredAt}
    status 1 registered; 0 refused (R7: first registration of an id carrying exactly one topic);
    2 ignored (R6: an older stateVersion than the live registration of the same id);
    3 body needed (ARGV[9] was '' and the body is not the last complete one): nothing was changed.
    4 skipped: a replay (ARGV[21]) older than the live registration (a later batch, ARGV[22]:
      the live registration is not this copy's): nothing changed.
    mode 0 topics untouched; 1 upsert every topic; 2 add only topics missing for the broker.
    masterAddr/haServerAddr are '' unless the broker is a slave and its master is live (R13).
    orderConfigFlat is HGETALL of the ORDER_TOPIC_CONFIG namespace when hasOrderConfig is 1.
    routeChanged is 1 when this call changed what a route lookup can return (the BrokerData, a
    new session, an earlier deadline, the address's filter servers), as in the change-log entry;
    else 0. registeredAt is the Redis time (ms) of a registration (status 1), else 0.
  Error codes: none; invalid input is rejected by the worker before the call.
  Complexity: O(ids of the broker name + brokers of the cluster); never touches topics.
]]
--- @include "common"

local K = {clusters = KEYS[1], brokers = KEYS[2], live = KEYS[3], deadlines = KEYS[4],
  dataversions = KEYS[5], filters = KEYS[6], pending = KEYS[7], epoch = KEYS[8],
  routever = KEYS[9], events = KEYS[10], bdigest = KEYS[11], kvns = KEYS[12], orderKv = KEYS[13],
  alive = KEYS[14], btopics = KEYS[15], holders = KEYS[16],
  workers = KEYS[17]}
local cluster, addr, brokerName = ARGV[1], ARGV[2], ARGV[3]
local brokerId = tonumber(ARGV[4])
local idKey = tostring(brokerId)
local haAddr, zoneName = ARGV[5], ARGV[6]
local timeout = tonumber(ARGV[7])
local actingArg = ARGV[8]
local dataVersion, stateVersion = ARGV[9], tonumber(ARGV[10])
local filterList = ARGV[11]
local topicCount = tonumber(ARGV[12])
local digest, token, via = ARGV[13], ARGV[14], ARGV[15]
local maxLen = ARGV[16]
local wantOrderConfig = ARGV[17] == '1'
local pruneLeftovers = ARGV[18] == '1'
local bodyHash = ARGV[19] or ''
local holder = ARGV[20] or ''
local replayOf = tonumber(ARGV[21] or '')
local replayContinues = ARGV[22] == '1'
local brokerVersion = tonumber(ARGV[23] or '')
local member = cluster .. '/' .. addr
local now = nowMs()
local prevLive = rcall('HGET', K.live, member)

if replayOf then
  -- a live registration is as old as what it replays (copyOf), else as its own time
  local info = decodeOrNil(prevLive)
  local ours = info ~= nil and tonumber(info.copyOf or '') == replayOf
  if not ours and (replayContinues
      or (info and tonumber(info.copyOf or info.registeredAt or 0) >= replayOf)) then
    return {4, 0, 0, '', '', 0, {}, 0, 0}
  end
end

-- The last complete registration of this body: reuse it without the worker decoding the body,
-- when the full path below would leave topics untouched anyway. Checked before any write.
if dataVersion == '' then
  local info = decodeOrNil(prevLive)
  local known = info and info.body
  local bdRaw = rcall('HGET', K.brokers, brokerName)
  local current = bdRaw and cjson.decode(bdRaw)
  if not known or known.hash ~= bodyHash or not current or current.brokerAddrs[idKey] ~= addr
      or rcall('HGET', K.dataversions, member) ~= known.dataVersion then
    return {3, 0, 0, '', '', 0, {}, 0, 0}
  end
  local writesTopics = brokerId == 0
    or (actingArg ~= '' and brokerId == minBrokerId(current.brokerAddrs))
  if writesTopics and (rcall('HGET', K.bdigest, brokerName) ~= known.digest
      or (pruneLeftovers and rcall('SCARD', K.btopics) ~= tonumber(known.topicCount))) then
    return {3, 0, 0, '', '', 0, {}, 0, 0}
  end
  dataVersion, stateVersion = known.dataVersion, tonumber(known.stateVersion)
  filterList, topicCount, digest = known.filters, tonumber(known.topicCount), known.digest
end
local bodyRecord = {hash = bodyHash, dataVersion = dataVersion, stateVersion = tostring(stateVersion),
  topicCount = topicCount, digest = digest, filters = filterList}

local function addToCluster()
  local list = rcall('HGET', K.clusters, cluster)
  local names = list and cjson.decode(list) or {}
  for _, n in ipairs(names) do
    if n == brokerName then return false end
  end
  names[#names + 1] = brokerName
  rcall('HSET', K.clusters, cluster, cjson.encode(names))
  return true
end

local function orderConfig()
  if wantOrderConfig and rcall('SISMEMBER', K.kvns, 'ORDER_TOPIC_CONFIG') == 1 then
    return 1, rcall('HGETALL', K.orderKv)
  end
  return 0, {}
end

local function dropLive()
  local wasLive = rcall('HDEL', K.live, member) == 1
  rcall('ZREM', K.deadlines, member)
  rcall('HDEL', K.dataversions, member)
  rcall('HDEL', K.pending, member)
  rcall('DEL', K.alive)
  return wasLive
end

-- R2/R3: the BrokerData of this name; cluster is fixed at creation.
local raw = rcall('HGET', K.brokers, brokerName)
local registerFirst = raw == false
local bd
if registerFirst then
  bd = {cluster = cluster, brokerName = brokerName, brokerAddrs = {}, enableActingMaster = false}
else
  bd = cjson.decode(raw)
end
local isOldVersion = actingArg == ''
local acting = (not isOldVersion) and actingArg == 'true'
local bdChanged = registerFirst
if bd.enableActingMaster ~= acting then bdChanged = true end
bd.enableActingMaster = acting
local zone = zoneName ~= '' and zoneName or nil
local oldZone = bd.zoneName ~= cjson.null and bd.zoneName or nil
if oldZone ~= zone then bdChanged = true end
bd.zoneName = zone

-- R5: one address holds one id; a promoted slave drops its old id.
for id, a in pairs(bd.brokerAddrs) do
  if a == addr and id ~= idKey then
    bd.brokerAddrs[id] = nil
    bdChanged = true
  end
end

local function saveBroker()
  if bdChanged then
    rcall('HSET', K.brokers, brokerName, encodeBroker(bd))
    rcall('INCR', K.routever)
  end
end

-- R6: another address holds this id with a newer stateVersion: ignore this registration.
local oldAddr = bd.brokerAddrs[idKey]
if oldAddr and oldAddr ~= addr then
  local otherDv = decodeOrNil(rcall('HGET', K.dataversions, cluster .. '/' .. oldAddr))
  if otherDv and rcall('HEXISTS', K.live, cluster .. '/' .. oldAddr) == 1
      and tonumber(otherDv.stateVersion or 0) > stateVersion then
    local joined = addToCluster()
    saveBroker()
    local wasLive = dropLive()
    -- Logged only when it changed something: a repeated ignored registration adds no entry (the
    -- worker counts it in namesrv_registrations_total{result="ignored"}).
    if joined or bdChanged or wasLive then
      emit(K.events, maxLen, 'register', now, {'result', 'ignored', 'cluster', cluster,
        'brokerName', brokerName, 'brokerAddr', addr, 'brokerId', idKey, 'dataVersion', dataVersion,
        'routeChanged', bdChanged and '1' or '0', 'brokerData', encodeBroker(bd), 'via', via})
    end
    local hasOrder, order = orderConfig()
    return {2, 0, 0, '', '', hasOrder, order, 0, 0}
  end
end

-- R7: a first registration of this id carrying exactly one topic is refused.
if oldAddr == nil and topicCount == 1 then
  -- Java still records the name in its cluster and saves the BrokerData; only that change is
  -- logged. A refusal that changed nothing adds no entry, so refused requests cannot push real
  -- history out of the log (the worker counts them in namesrv_registrations_total).
  if not registerFirst then
    local joined = addToCluster()
    saveBroker()
    if joined or bdChanged then
      emit(K.events, maxLen, 'register', now, {'result', 'refused', 'cluster', cluster,
        'brokerName', brokerName, 'brokerAddr', addr, 'brokerId', idKey,
        'routeChanged', bdChanged and '1' or '0', 'brokerData', encodeBroker(bd), 'via', via})
    end
  end
  return {0, 0, 0, '', '', 0, {}, 0, 0}
end

-- R1, R8
addToCluster()
if oldAddr ~= addr then bdChanged = true end
bd.brokerAddrs[idKey] = addr
-- R2 keeps the first cluster of a broker name; remember an address's own cluster when it
-- differs, so reads find its liveness entry ('<cluster>/<addr>').
if cluster ~= bd.cluster then
  if type(bd.addrClusters) ~= 'table' then bd.addrClusters = {} end
  if bd.addrClusters[addr] ~= cluster then bdChanged = true end
  bd.addrClusters[addr] = cluster
end
if oldAddr == nil or oldAddr == '' then registerFirst = true end
saveBroker()

-- R9/R10: only the master, or the lowest slave of a new-version broker, writes topics.
local isMaster = brokerId == 0
local isPrimeSlave = (not isOldVersion) and (not isMaster) and brokerId == minBrokerId(bd.brokerAddrs)
local prevDv = rcall('HGET', K.dataversions, member)
local changed = prevDv ~= dataVersion
local mode = 0
if isMaster or isPrimeSlave then
  if registerFirst or changed then
    mode = 1
  elseif rcall('HGET', K.bdigest, brokerName) ~= digest
      or (pruneLeftovers and rcall('SCARD', K.btopics) ~= topicCount) then
    mode = 2
  end
end

-- R11: liveness, with a new epoch that fences every later removal.
local prevDeadline = tonumber(rcall('ZSCORE', K.deadlines, member) or '0')
local newSession = (not prevLive) or prevDeadline < now
local epoch = rcall('INCR', K.epoch)
local deadline = now + timeout
-- `body` (what this registration's body amounts to) is kept once the registration is complete.
rcall('HSET', K.live, member, cjson.encode({brokerName = brokerName, brokerId = brokerId,
  epoch = epoch, heartbeatTimeoutMillis = timeout, haServerAddr = haAddr, via = via,
  registeredAt = now, copyOf = replayOf, version = brokerVersion,
  body = (mode == 0 and bodyHash ~= '') and bodyRecord or nil}))
rcall('ZADD', K.deadlines, deadline, member)
rcall('SET', K.alive, epoch, 'PX', timeout)
-- The connections this session is registered over: a close removes the broker only once none of
-- them is open (unregisterBroker). A new session starts with none.
if newSession then rcall('DEL', K.holders) end
if holder ~= '' then
  rcall('HSET', K.holders, holder, 'o:' .. epoch)
  rcall('HSET', K.workers, string.match(holder, '^(.*)#[^#]*$') or holder, now)
end
rcall('PEXPIRE', K.holders, timeout)
if mode == 0 then
  rcall('HSET', K.dataversions, member, dataVersion)
  rcall('HDEL', K.pending, member)
else
  rcall('HSET', K.pending, member, cjson.encode({token = token, mode = mode,
    wipe = isPrimeSlave and acting, mapWrite = registerFirst or changed,
    dataVersion = dataVersion, digest = digest, epoch = epoch,
    blank = rcall('EXISTS', K.btopics) == 0, body = bodyHash ~= '' and bodyRecord or nil,
    replay = replayOf ~= nil or nil}))
end

-- R12. Routes show the filter servers of their brokers' addresses: a change must reach caches.
local filtersChanged = false
if filterList ~= '' then
  local previousFilters = rcall('HGET', K.filters, member)
  if filterList == '[]' then
    filtersChanged = rcall('HDEL', K.filters, member) == 1
  elseif previousFilters ~= filterList then
    rcall('HSET', K.filters, member, filterList)
    filtersChanged = true
  end
  if filtersChanged then rcall('INCR', K.routever) end
end

-- R13: a slave learns its live master's address and HA address.
local masterAddr, masterHa = '', ''
if not isMaster then
  local m = bd.brokerAddrs['0']
  if m then
    local info = decodeOrNil(rcall('HGET', K.live, cluster .. '/' .. m))
    local mDeadline = tonumber(rcall('ZSCORE', K.deadlines, cluster .. '/' .. m) or '0')
    if info and mDeadline >= now then
      masterAddr = m
      masterHa = info.haServerAddr or ''
    end
  end
end

-- a shorter timeout moves the deadline earlier: cached routes must not outlive it
local routeChanged = bdChanged or newSession or prevDeadline > deadline or filtersChanged
emit(K.events, maxLen, 'register', now, {'result', 'ok', 'cluster', cluster,
  'brokerName', brokerName, 'brokerAddr', addr, 'brokerId', idKey, 'epoch', epoch,
  'deadline', deadline, 'timeoutMillis', timeout, 'dataVersion', dataVersion,
  'newSession', newSession and '1' or '0', 'mode', mode, 'brokerData', encodeBroker(bd),
  'routeChanged', routeChanged and '1' or '0',
  'haServerAddr', haAddr, 'via', via, 'replay', replayOf ~= nil and '1' or '0'})
local hasOrder, order = orderConfig()
return {1, epoch, mode, masterAddr, masterHa, hasOrder, order, routeChanged and 1 or 0, now}
