-- RouteInfoManager.unRegisterBroker for one (cluster, addr): rules U1-U3 of the spec.
-- Needs common.lua. Topic cleanup (U4/U5) is left to cleanBrokerTopics: the broker name is
-- added to the pendingclean set when its queues must be removed or their write bit cleared.
-- Returns brokerData JSON after the change ('' when removed), whether the name was removed,
-- whether a cleanup is pending, and whether anything changed at all (a removal of a broker that
-- is not there changes nothing, and its caller logs nothing).
local function unregisterCore(k, member, cluster, addr, brokerName)
  -- U1: liveness, filter servers, an unfinished registration.
  local touched = rcall('HDEL', k.live, member) + rcall('ZREM', k.deadlines, member)
    + rcall('HDEL', k.dataversions, member) + rcall('HDEL', k.filters, member)
    + rcall('HDEL', k.pending, member) > 0
  local removed = false
  local pending = false
  local bdJson = ''
  local raw = rcall('HGET', k.brokers, brokerName)
  -- U2: drop every id whose address is addr.
  if raw then
    local bd = cjson.decode(raw)
    local changed = false
    for id, a in pairs(bd.brokerAddrs) do
      if a == addr then
        bd.brokerAddrs[id] = nil
        changed = true
      end
    end
    if next(bd.brokerAddrs) == nil then
      rcall('HDEL', k.brokers, brokerName)
      removed = true
    else
      bdJson = encodeBroker(bd)
      if changed then rcall('HSET', k.brokers, brokerName, bdJson) end
      -- U3/U5: a reduced broker (address found or not) with acting master and no master loses
      -- the write bit of its queues.
      if bd.enableActingMaster and noMaster(bd) then pending = true end
    end
    if changed or removed then
      rcall('INCR', k.routever)
      touched = true
    end
  end
  -- U3: the cluster named in the request loses the name.
  if removed then
    local list = rcall('HGET', k.clusters, cluster)
    if list then
      local names = cjson.decode(list)
      local kept = {}
      for _, n in ipairs(names) do
        if n ~= brokerName then kept[#kept + 1] = n end
      end
      if #kept == 0 then
        rcall('HDEL', k.clusters, cluster)
      else
        rcall('HSET', k.clusters, cluster, cjson.encode(kept))
      end
    end
    pending = true
  end
  if pending and rcall('SADD', k.pendingclean, brokerName) == 1 then touched = true end
  return bdJson, removed, pending, touched
end
