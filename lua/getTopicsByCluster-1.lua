--[[
  @master-only: on Redis 7 it declares flags, so a demoted master refuses it (store/scripts.py).
  getTopicsByCluster: GET_TOPICS_BY_CLUSTER (224), RouteInfoManager.getTopicsByCluster: every
  topic in which a broker name of the cluster has a queue, in one snapshot. An unknown cluster
  gives an empty list, as in Java.
  @keys-variadic: after the fixed key, one {ns}:btopics:<brokerName> key per name in ARGV; the
  script answers -3 with the cluster's names when they differ from those passed.

  KEYS[1]  {ns}:clusters        HASH cluster -> JSON array of broker names

  ARGV[1]  clusterName
  ARGV[2]  number of broker names N, then N broker names (one per variadic key)

  Returns: {status, value...}
    status 1, then the cluster's topics; or -3, then the cluster's broker names when the caller
    passed others (call again with those).
  Complexity: O(topics of the cluster).
]]
local cluster, n = ARGV[1], tonumber(ARGV[2])
local list = redis.call('HGET', KEYS[1], cluster)
local names = list and cjson.decode(list) or {}
local given = {}
for i = 1, n do given[ARGV[2 + i]] = KEYS[1 + i] end
local mismatch = #names ~= n
for _, b in ipairs(names) do
  if not given[b] then mismatch = true end
end
if mismatch then
  local out = {-3}
  for _, b in ipairs(names) do out[#out + 1] = b end
  return out
end
local out = {1}
if n > 0 then
  local keys = {}
  for i = 1, n do keys[i] = KEYS[1 + i] end
  for _, t in ipairs(redis.call('SUNION', unpack(keys))) do out[#out + 1] = t end
end
return out
