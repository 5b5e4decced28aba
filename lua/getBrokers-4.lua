--[[
  @master-only: on Redis 7 it declares flags, so a demoted master refuses it (store/scripts.py).
  getBrokers: brokerAddrTable and clusterAddrTable in one snapshot, for GET_BROKER_CLUSTER_INFO
  (106), GET_BROKER_MEMBER_GROUP (901) and GET_SYSTEM_TOPIC_LIST_FROM_NS (304). Brokers past
  their deadline are hidden as the sweep would remove them: the address is dropped, and a broker
  name left with none is dropped from both tables. While the fleet is silent (silence.lua),
  deadlines are judged at its last beat.

  KEYS[1]  {ns}:brokers         HASH brokerName -> BrokerData JSON
  KEYS[2]  {ns}:clusters        HASH cluster -> JSON array of broker names
  KEYS[3]  {ns}:deadlines       ZSET member scored by deadline ms
  KEYS[4]  {ns}:meta            HASH lastBeat: the fleet's last contact with Redis (ms)

  ARGV[1]  '1' to return every broker and cluster, '0' for only the broker names that follow
  then broker names (when ARGV[1] is '0')

  Returns: {brokersFlat, clustersFlat}: brokerName, BrokerData JSON pairs and cluster, JSON
  array pairs (clusters only when ARGV[1] is '1').
  Complexity: O(brokers x ids) for all, O(names x ids) otherwise.
]]
--- @include "common"
--- @include "silence"

local all = ARGV[1] == '1'
local now = judgedAt(KEYS[4], nowMs())
local entries
if all then
  entries = rcall('HGETALL', KEYS[1])
else
  entries = {}
  for i = 2, #ARGV do
    local raw = rcall('HGET', KEYS[1], ARGV[i])
    if raw then
      entries[#entries + 1] = ARGV[i]
      entries[#entries + 1] = raw
    end
  end
end
local out, gone = {}, {}
for i = 1, #entries, 2 do
  local name, raw = entries[i], entries[i + 1]
  local bd = cjson.decode(raw)
  local hadAddrs = next(bd.brokerAddrs) ~= nil
  if hideExpired(KEYS[3], bd, now) then
    if hadAddrs and next(bd.brokerAddrs) == nil then
      gone[name] = true
    else
      raw = encodeBroker(bd)
    end
  end
  if not gone[name] then
    out[#out + 1] = name
    out[#out + 1] = raw
  end
end
local clusters = {}
if all then
  local flat = rcall('HGETALL', KEYS[2])
  for i = 1, #flat, 2 do
    local kept = {}
    for _, n in ipairs(cjson.decode(flat[i + 1])) do
      if not gone[n] then kept[#kept + 1] = n end
    end
    if #kept > 0 then
      clusters[#clusters + 1] = flat[i]
      clusters[#clusters + 1] = cjson.encode(kept)
    end
  end
end
return {out, clusters}
