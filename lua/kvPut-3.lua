--[[
  kvPut: PUT_KV_CONFIG (100), KVConfigManager.putKVConfig. Creates the namespace if needed. A
  null value (Java accepts it) makes the namespace exist while the key stays invisible.

  KEYS[1]  {ns}:kvns            SET KV namespaces
  KEYS[2]  {ns}:kv:<namespace>  HASH key -> value
  KEYS[3]  {ns}:events          STREAM change log

  ARGV[1]  namespace
  ARGV[2]  key
  ARGV[3]  value
  ARGV[4]  '1' when a value was given, '0' for null
  ARGV[5]  change-log length

  Returns: {1}
  Complexity: O(1).
]]
--- @include "common"

local namespace, key, value, hasValue, maxLen = ARGV[1], ARGV[2], ARGV[3], ARGV[4] == '1', ARGV[5]
rcall('SADD', KEYS[1], namespace)
if hasValue then
  rcall('HSET', KEYS[2], key, value)
else
  rcall('HDEL', KEYS[2], key)
end
emit(KEYS[3], maxLen, 'kvPut', nowMs(), {'namespace', namespace, 'key', key,
  'value', hasValue and value or ''})
return {1}
