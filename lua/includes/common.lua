-- Shared helpers, inlined by the loader where a script says --- @include "common".
local rcall = redis.call

-- Milliseconds from the Redis server clock: one clock for the whole fleet.
local function nowMs()
  local t = rcall('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Append one change-log entry; fields is a flat list of name, value pairs.
local function emit(eventsKey, maxLen, kind, ts, fields)
  local args = {eventsKey, 'MAXLEN', '~', maxLen, '*', 'kind', kind, 'ts', ts}
  for i = 1, #fields do args[#args + 1] = fields[i] end
  rcall('XADD', unpack(args))
end

local function decodeOrNil(text)
  if not text then return nil end
  return cjson.decode(text)
end

-- Lowest broker id of a BrokerData's brokerAddrs (ids are string keys), or nil when empty.
local function minBrokerId(addrs)
  local lowest = nil
  for id, _ in pairs(addrs) do
    local n = tonumber(id)
    if lowest == nil or n < lowest then lowest = n end
  end
  return lowest
end

-- RouteInfoManager.isNoMasterExists: no addresses, or every id above 0.
local function noMaster(bd)
  if not bd then return true end
  local lowest = minBrokerId(bd.brokerAddrs)
  return lowest == nil or lowest > 0
end

-- These two edit QueueData JSON text in place: workers write perm between brokerName and
-- readQueueNums (pinned by tests/registry/test_queue_data_contract.py), so ',"perm":<n>,' occurs
-- once and a quoted brokerName cannot contain it.
local function clearWriteBit(queueDataJson)
  return (string.gsub(queueDataJson, ',"perm":(%-?%d+),', function(p)
    local n = tonumber(p)
    if n % 4 >= 2 then n = n - 2 end
    return ',"perm":' .. n .. ','
  end, 1))
end

local function setPerm(queueDataJson, perm)
  return (string.gsub(queueDataJson, ',"perm":%-?%d+,', ',"perm":' .. perm .. ',', 1))
end

local function jsonList(items)
  if #items == 0 then return '[]' end
  return cjson.encode(items)
end

local function encodeBroker(bd)
  if bd.zoneName == cjson.null then bd.zoneName = nil end
  if type(bd.addrClusters) == 'table' then
    -- keep only addresses the broker still has (cjson cannot tell an empty map from a list)
    local held, kept = {}, {}
    for _, a in pairs(bd.brokerAddrs) do held[a] = true end
    for a, c in pairs(bd.addrClusters) do
      if held[a] then kept[a] = c end
    end
    bd.addrClusters = next(kept) and kept or nil
  end
  return cjson.encode(bd)
end

-- The topicSysFlag the unit topic lists (311-313) use for a topic: RocketMQ reads the topic's first
-- QueueData; ours is the queue of the lowest broker name (routes list queues sorted by name).
-- Recomputed after every change to the topic's queues, so it always belongs to a queue the topic
-- still has; a topic with no queue, or a zero flag, has no entry.
local function syncTopicFlag(flagsKey, topicKey, topic)
  local flat = rcall('HGETALL', topicKey)
  local first, queue = nil, nil
  for i = 1, #flat, 2 do
    if first == nil or flat[i] < first then
      first, queue = flat[i], flat[i + 1]
    end
  end
  -- QueueData JSON is written by workers in a fixed layout; no need to decode all of it.
  local flag = queue and tonumber(string.match(queue, '"topicSysFlag":(%-?%d+)')) or 0
  if flag ~= 0 then
    rcall('HSET', flagsKey, topic, flag)
  else
    rcall('HDEL', flagsKey, topic)
  end
end

-- The liveness member '<cluster>/<addr>' of each address of a BrokerData, by broker id.
local function addrMembers(bd)
  local own = type(bd.addrClusters) == 'table' and bd.addrClusters or {}
  local members = {}
  for id, a in pairs(bd.brokerAddrs) do members[id] = (own[a] or bd.cluster) .. '/' .. a end
  return members
end

-- member -> deadline score (text) of the given members that have one, in few calls: one
-- ZSCORE per address made a 100-group route read 300 calls (bench-scale, RIP-29 shape).
local function deadlinesOf(deadlinesKey, members)
  local found = {}
  for i = 1, #members, 500 do
    local last = math.min(i + 499, #members)
    local scores = rcall('ZMSCORE', deadlinesKey, unpack(members, i, last))
    for j = i, last do
      local s = scores[j - i + 1]
      if s then found[members[j]] = s end
    end
  end
  return found
end

-- Hide addresses past their deadline, as the next sweep would remove them (reads never serve
-- an expired broker); `members` is addrMembers(bd), `deadline` what deadlinesOf found for them.
-- Returns whether an address was hidden, and the earliest deadline among the addresses kept (nil
-- when none has one): a cached copy of what was read is valid until then. With `seen` (a table),
-- each kept address's member -> deadline (its score's text, whole milliseconds) is added to it.
local function hideExpiredOf(bd, members, deadline, now, seen)
  local dropped, soonest = false, nil
  for id, member in pairs(members) do
    local s = deadline[member]
    if s then
      local d = tonumber(s)
      if d < now then
        bd.brokerAddrs[id] = nil
        dropped = true
      else
        if soonest == nil or d < soonest then soonest = d end
        if seen then seen[member] = s end
      end
    end
  end
  return dropped, soonest
end

-- hideExpiredOf for one BrokerData, reading its deadlines.
local function hideExpired(deadlinesKey, bd, now, seen)
  local members, list = addrMembers(bd), {}
  for _, m in pairs(members) do list[#list + 1] = m end
  return hideExpiredOf(bd, members, deadlinesOf(deadlinesKey, list), now, seen)
end

-- SADD/SREM many members in a few calls: one redis.call per member costs more than the write.
-- Removes brokerName's queue from n topics whose names are args[argAt..argAt+n-1] and whose
-- keys are keys[keyAt..keyAt+n-1] (U2/R10a; only variadic scripts pass their KEYS and ARGV).
-- Returns the topics it had a queue in, and those of them left with no queue at all.
local function dropQueues(brokerName, flagsKey, keys, keyAt, args, argAt, n)
  local removed, gone = {}, {}
  for i = 0, n - 1 do
    local topic, key = args[argAt + i], keys[keyAt + i]
    if rcall('HDEL', key, brokerName) == 1 then
      removed[#removed + 1] = topic
      if rcall('EXISTS', key) == 0 then
        gone[#gone + 1] = topic
      end
      syncTopicFlag(flagsKey, key, topic)
    end
  end
  return removed, gone
end

local function addAll(cmd, key, members)
  for i = 1, #members, 500 do
    rcall(cmd, key, unpack(members, i, math.min(i + 499, #members)))
  end
end

-- A JSON string literal; plain names (the usual case) skip cjson.
local function jsonString(s)
  if string.find(s, '[%c"\\/\128-\255]') then return cjson.encode(s) end
  return '"' .. s .. '"'
end
