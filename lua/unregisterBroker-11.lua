--[[
  unregisterBroker: UNREGISTER_BROKER (104) and the removal of brokers whose remoting connection
  closed or idled out. RouteInfoManager.unRegisterBroker for one (cluster, addr): rules U1-U3.
  Fenced: with an epoch given, it is a compare-and-delete on the registration epoch, so a stale
  removal (a close seen by one worker after the broker re-registered through another) changes
  nothing (apache/rocketmq#11043). Topic cleanup (U4/U5) follows in cleanBrokerTopics calls.

  KEYS[1]  {ns}:clusters        HASH cluster -> JSON array of broker names
  KEYS[2]  {ns}:brokers         HASH brokerName -> BrokerData JSON
  KEYS[3]  {ns}:live            HASH member -> live info JSON
  KEYS[4]  {ns}:deadlines       ZSET member scored by deadline ms
  KEYS[5]  {ns}:dataversions    HASH member -> DataVersion JSON
  KEYS[6]  {ns}:filters         HASH member -> JSON array of filter servers
  KEYS[7]  {ns}:pending         HASH member -> pending registration JSON
  KEYS[8]  {ns}:pendingclean    SET broker names whose topic cleanup is not finished
  KEYS[9]  {ns}:routever        STRING route version
  KEYS[10] {ns}:events          STREAM change log
  KEYS[11] {ns}:alive:<cluster>/<addr> STRING epoch, PX = remaining life

  ARGV[1]  clusterName
  ARGV[2]  brokerAddr
  ARGV[3]  brokerName
  ARGV[4]  brokerId (diagnostics only: like Java, every id holding the address is removed)
  ARGV[5]  epoch to fence on, or '' for an unconditional unregister
  ARGV[6]  reason: 'unregister' (code 104 or HTTP) or 'close' (connection closed or idle)
  ARGV[7]  change-log length
  ARGV[8]  id of the worker handling the request (diagnostics)

  Returns: {status, removed, cleanupPending}
    status 1 done; -2 fenced (the live registration has another epoch, or none): nothing changed.
    removed 1 when the broker name lost its last address; cleanupPending 1 when the caller
    must run cleanBrokerTopics for the name.
  Complexity: O(ids of the broker name + broker names of the cluster).
]]
--- @include "common"
--- @include "unregisterCore"

local K = {clusters = KEYS[1], brokers = KEYS[2], live = KEYS[3], deadlines = KEYS[4],
  dataversions = KEYS[5], filters = KEYS[6], pending = KEYS[7], pendingclean = KEYS[8],
  routever = KEYS[9], events = KEYS[10], alive = KEYS[11]}
local cluster, addr, brokerName, brokerId = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local fence, reason, maxLen, via = ARGV[5], ARGV[6], ARGV[7], ARGV[8]
local member = cluster .. '/' .. addr
local now = nowMs()

local info = decodeOrNil(rcall('HGET', K.live, member))
local epoch = info and tostring(info.epoch) or ''
if fence ~= '' and epoch ~= fence then
  emit(K.events, maxLen, 'fenced', now, {'reason', reason, 'cluster', cluster,
    'brokerName', brokerName, 'brokerAddr', addr, 'brokerId', brokerId, 'epoch', fence,
    'currentEpoch', epoch, 'via', via})
  return {-2, 0, 0}
end
local bdJson, removed, pending, touched = unregisterCore(K, member, cluster, addr, brokerName)
rcall('DEL', K.alive)
-- Removing a broker that is not registered changes nothing and logs nothing: repeated or made-up
-- unregisters cannot push real history out of the change log.
if touched then
  emit(K.events, maxLen, reason, now, {'cluster', cluster, 'brokerName', brokerName,
    'brokerAddr', addr, 'brokerId', brokerId, 'epoch', epoch, 'brokerData', bdJson,
    'removed', removed and '1' or '0', 'via', via})
end
return {1, removed and 1 or 0, pending and 1 or 0}
