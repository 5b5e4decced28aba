--[[
  expireBrokers: the sweep (RouteInfoManager.scanNotActiveBroker). Removes every broker whose
  deadline (last registration or heartbeat + its timeout) has passed by the Redis clock,
  applying U1-U3 to each. Idempotent: any worker may run it at any time and concurrent sweeps
  are harmless, because a broker's deadline is re-checked inside this one atomic call; a broker
  that heartbeated in the meantime is no longer past its deadline and stays. Reads already hide
  expired brokers, so the sweep only makes the tables match what readers see.

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
  KEYS[11] {ns}:meta            HASH lastBeat: the fleet's last contact with Redis (ms)

  ARGV[1]  most brokers to expire in this call (bounds the call; the caller loops)
  ARGV[2]  change-log length
  ARGV[3]  id of the sweeping worker (diagnostics)

  Returns: {expired, more, name...}: how many brokers were removed, 1 if more are past their
  deadline, then the broker names whose topic cleanup the caller must run (cleanBrokerTopics).
  The per-broker {ns}:alive:* keys expire by their own TTL at the same deadline.
  Complexity: O(expired brokers x their ids); after a silence, O(brokers) once.
]]
--- @include "common"
--- @include "unregisterCore"
--- @include "silence"

local K = {clusters = KEYS[1], brokers = KEYS[2], live = KEYS[3], deadlines = KEYS[4],
  dataversions = KEYS[5], filters = KEYS[6], pending = KEYS[7], pendingclean = KEYS[8],
  routever = KEYS[9], events = KEYS[10], meta = KEYS[11]}
local limit, maxLen, via = tonumber(ARGV[1]), ARGV[2], ARGV[3]
local now = nowMs()
-- a silence of the whole fleet does not count against brokers: moved first, then judged
forgiveSilence(K.deadlines, K.meta, K.events, maxLen, now)

local due = rcall('ZRANGEBYSCORE', K.deadlines, '-inf', '(' .. now, 'WITHSCORES', 'LIMIT', 0, limit + 1)
local more = 0
local count = 0
local names, seen = {}, {}
for i = 1, #due, 2 do
  if count >= limit then
    more = 1
    break
  end
  local member, deadline = due[i], due[i + 1]
  local cluster, addr = string.match(member, '^(.*)/([^/]*)$')
  local info = decodeOrNil(rcall('HGET', K.live, member))
  local bdJson, removed = '', false
  if info then
    local pending
    bdJson, removed, pending = unregisterCore(K, member, cluster, addr, info.brokerName)
    if pending and not seen[info.brokerName] then
      seen[info.brokerName] = true
      names[#names + 1] = info.brokerName
    end
  else
    rcall('ZREM', K.deadlines, member)
  end
  count = count + 1
  emit(K.events, maxLen, 'expire', now, {'cluster', cluster, 'brokerName',
    info and info.brokerName or '', 'brokerAddr', addr,
    'brokerId', info and tostring(info.brokerId) or '', 'epoch', info and tostring(info.epoch) or '',
    'deadline', deadline, 'timeoutMillis', info and tostring(info.heartbeatTimeoutMillis) or '',
    'brokerData', bdJson, 'removed', removed and '1' or '0', 'via', via})
end
local out = {count, more}
for _, n in ipairs(names) do out[#out + 1] = n end
return out
