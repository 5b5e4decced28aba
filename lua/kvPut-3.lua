--[[
  kvPut: PUT_KV_CONFIG (100), KVConfigManager.putKVConfig. Creates the namespace if needed. A
  null value (Java accepts it) makes the namespace exist while the key stays invisible.

  KEYS[1]  {ns}:kvns            SET KV namespaces
  KEYS[2]  {ns}:kv:<namespace>  HASH key -> value
  KEYS[3]  {ns}:events          STREAM change log

  ARGV[1]  namespace
  ARGV[2]  key
  ARGV[3]  value (the worker refuses values over kvValueMaxBytes before calling)
  ARGV[4]  '1' when a value was given, '0' for null
  ARGV[5]  change-log length

  Returns: {done}: always 1.
  The change-log entry carries the value's length and SHA-1, never the value: the log must not
  hold a second, untrimmed copy of whatever a client puts.

  Complexity: O(1) (O(value length) for the SHA-1).
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
  'valueBytes', hasValue and tostring(#value) or '', 'valueSha1', hasValue and redis.sha1hex(value) or ''})
return {1}
