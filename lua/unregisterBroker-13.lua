--[[
  unregisterBroker: UNREGISTER_BROKER (104) and the removal of brokers whose remoting connection
  closed or idled out. RouteInfoManager.unRegisterBroker for one (cluster, addr): rules U1-U3.
  Fenced: with an epoch given, it is a compare-and-delete on the registration epoch, so a stale
  removal (a close seen by one worker after the broker re-registered through another) changes
  nothing (apache/rocketmq#11043). Topic cleanup (U4/U5) follows in cleanBrokerTopics calls.
  A close names its connection (ARGV[9]): the broker is removed only when no other open
  connection to the fleet holds it (a registration over a connection makes it a holder; a
  holder counts while its worker is seen in {ns}:workers within ARGV[10] ms). The last close
  then removes the broker if the live registration came over any connection of the fleet, even
  one that closed earlier; otherwise the epoch fence decides as above.

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
  KEYS[12] {ns}:holders:<cluster>/<addr> HASH holder -> 'o:<epoch>' (open) or 'c:<epoch>' (closed)
  KEYS[13] {ns}:workers         HASH workerId -> when it was last seen (ms, Redis clock)

  ARGV[1]  clusterName
  ARGV[2]  brokerAddr
  ARGV[3]  brokerName
  ARGV[4]  brokerId (diagnostics only: like Java, every id holding the address is removed)
  ARGV[5]  epoch to fence on, or '' for an unconditional unregister
  ARGV[6]  reason: 'unregister' (code 104 or HTTP) or 'close' (connection closed or idle)
  ARGV[7]  change-log length
  ARGV[8]  id of the worker handling the request (diagnostics)
  ARGV[9]  holder: '<workerId>#<connection>' of the connection that closed, or '' (not a close)
  ARGV[10] ms since its last beat within which a worker counts as running (its holders hold)

  Returns: {status, removed, cleanupPending}
    status 1 done; -2 fenced (the live registration has another epoch: registered again over
    another connection or HTTP); -6 gone (an epoch was given and no registration is live:
    expired or removed already); -7 held (another open connection holds the broker). With -2,
    -6 and -7 nothing changed but the closing holder's mark.
    removed 1 when the broker name lost its last address; cleanupPending 1 when the caller
    must run cleanBrokerTopics for the name.
  Complexity: O(ids of the broker name + broker names of the cluster).
]]
--- @include "common"
--- @include "unregisterCore"

local K = {clusters = KEYS[1], brokers = KEYS[2], live = KEYS[3], deadlines = KEYS[4],
  dataversions = KEYS[5], filters = KEYS[6], pending = KEYS[7], pendingclean = KEYS[8],
  routever = KEYS[9], events = KEYS[10], alive = KEYS[11], holders = KEYS[12], workers = KEYS[13]}
local cluster, addr, brokerName, brokerId = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local fence, reason, maxLen, via = ARGV[5], ARGV[6], ARGV[7], ARGV[8]
local holder, window = ARGV[9], tonumber(ARGV[10])
local member = cluster .. '/' .. addr
local now = nowMs()

local info = decodeOrNil(rcall('HGET', K.live, member))
local epoch = info and tostring(info.epoch) or ''

if holder ~= '' then
  local mine = rcall('HGET', K.holders, holder)
  if mine then rcall('HSET', K.holders, holder, 'c:' .. string.sub(mine, 3)) end
  local entries = rcall('HGETALL', K.holders)
  local viaConnection = false
  for i = 1, #entries, 2 do
    local other, mark = entries[i], entries[i + 1]
    if string.sub(mark, 3) == epoch then viaConnection = true end
    if other ~= holder and string.sub(mark, 1, 2) == 'o:' then
      local worker = string.match(other, '^(.*)#[^#]*$')
      local seen = worker and tonumber(rcall('HGET', K.workers, worker) or '0') or 0
      if seen >= now - window then return {-7, 0, 0} end
    end
  end
  -- The last open connection closed: the live registration came over one of them (maybe one that
  -- closed while another still held the broker), so it goes whatever epoch this one knew.
  if viaConnection then fence = '' end
end
if fence ~= '' and epoch ~= fence then
  emit(K.events, maxLen, 'fenced', now, {'reason', reason, 'cluster', cluster,
    'brokerName', brokerName, 'brokerAddr', addr, 'brokerId', brokerId, 'epoch', fence,
    'currentEpoch', epoch, 'via', via})
  if info then return {-2, 0, 0} end
  return {-6, 0, 0}
end
local bdJson, removed, pending, touched = unregisterCore(K, member, cluster, addr, brokerName)
rcall('DEL', K.alive)
rcall('DEL', K.holders)
-- Removing a broker that is not registered changes nothing and logs nothing: repeated or made-up
-- unregisters cannot push real history out of the change log.
if touched then
  emit(K.events, maxLen, reason, now, {'cluster', cluster, 'brokerName', brokerName,
    'brokerAddr', addr, 'brokerId', brokerId, 'epoch', epoch, 'brokerData', bdJson,
    'removed', removed and '1' or '0', 'via', via})
end
return {1, removed and 1 or 0, pending and 1 or 0}
