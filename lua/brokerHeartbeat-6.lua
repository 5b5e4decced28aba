--[[
  brokerHeartbeat: BROKER_HEARTBEAT (904) and the liveness half of QUERY_DATA_VERSION (322)
  (RouteInfoManager.updateBrokerInfoUpdateTimestamp / queryBrokerTopicConfig). A live
  (cluster, addr) gets a new deadline of now + its timeout; an unknown one is left alone, as in
  Java. Returns the stored dataVersion so 322 can compare it in the same round trip.

  KEYS[1]  {ns}:live            HASH member -> live info JSON
  KEYS[2]  {ns}:deadlines       ZSET member scored by deadline ms
  KEYS[3]  {ns}:dataversions    HASH member -> DataVersion JSON
  KEYS[4]  {ns}:events          STREAM change log
  KEYS[5]  {ns}:alive:<cluster>/<addr> STRING epoch, PX = remaining life
  KEYS[6]  {ns}:holders:<cluster>/<addr> HASH connections holding the broker (same life)

  ARGV[1]  member '<cluster>/<brokerAddr>'
  ARGV[2]  change-log length
  ARGV[3]  request code that carried the heartbeat ('904' or '322')
  ARGV[4]  id of the worker handling the request (diagnostics)

  Returns: {live, dataVersion}: live 1 when the broker was known and refreshed, else 0;
  dataVersion is the stored JSON, or '' when none is stored.
  Complexity: O(1).
]]
--- @include "common"

local K = {live = KEYS[1], deadlines = KEYS[2], dataversions = KEYS[3], events = KEYS[4],
  alive = KEYS[5], holders = KEYS[6]}
local member, maxLen, source, via = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local info = decodeOrNil(rcall('HGET', K.live, member))
local dv = rcall('HGET', K.dataversions, member) or ''
if not info then
  return {0, dv}
end
local now = nowMs()
-- A heartbeat after the deadline, before a sweep removed the broker, makes it visible again.
local revived = tonumber(rcall('ZSCORE', K.deadlines, member) or '0') < now
local timeout = tonumber(info.heartbeatTimeoutMillis)
local deadline = now + timeout
rcall('ZADD', K.deadlines, deadline, member)
rcall('SET', K.alive, info.epoch, 'PX', timeout)
rcall('PEXPIRE', K.holders, timeout)
local cluster, addr = string.match(member, '^(.*)/([^/]*)$')
emit(K.events, maxLen, 'heartbeat', now, {'cluster', cluster, 'brokerName', info.brokerName,
  'brokerAddr', addr, 'brokerId', tostring(info.brokerId), 'epoch', tostring(info.epoch),
  'deadline', deadline, 'timeoutMillis', tostring(timeout), 'source', source,
  'revived', revived and '1' or '0', 'via', via})
return {1, dv}
