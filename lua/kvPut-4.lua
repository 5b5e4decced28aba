--[[
  kvPut: PUT_KV_CONFIG (100), KVConfigManager.putKVConfig. Creates the namespace if needed. A
  null value (Java accepts it) makes the namespace exist while the key stays invisible. Refused,
  changing nothing, when the namespace or the whole KV would grow past its limit (Java has none:
  one client could fill the NameServer's memory, and every read of the namespace grows with it).

  KEYS[1]  {ns}:kvns            SET KV namespaces
  KEYS[2]  {ns}:kv:<namespace>  HASH key -> value
  KEYS[3]  {ns}:events          STREAM change log
  KEYS[4]  {ns}:kvbytes         HASH namespace -> bytes of its keys and values; '' -> all of KV

  ARGV[1]  namespace
  ARGV[2]  key
  ARGV[3]  value (the worker refuses values over kvValueMaxBytes before calling)
  ARGV[4]  '1' when a value was given, '0' for null
  ARGV[5]  change-log length
  ARGV[6]  most bytes one namespace may hold (kvNamespaceMaxBytes)
  ARGV[7]  most bytes the whole KV may hold (kvMaxBytes)

  Returns: {status, namespaceBytes, totalBytes}
    status 1 stored; -8 refused: the namespace would pass ARGV[6]; -9 refused: the KV would pass
    ARGV[7]. The byte counts are those after the call (unchanged when refused). A put that does
    not grow the entry is never refused.
  The change-log entry carries the value's length and SHA-1, never the value: the log must not
  hold a second, untrimmed copy of whatever a client puts.

  Complexity: O(1) (O(value length) for the SHA-1; O(namespace) once for a namespace written
  before the accounting existed).
]]
--- @include "common"
--- @include "kvBytes"

local K = {kvns = KEYS[1], kv = KEYS[2], events = KEYS[3], bytes = KEYS[4]}
local namespace, key, value, hasValue, maxLen = ARGV[1], ARGV[2], ARGV[3], ARGV[4] == '1', ARGV[5]
local nsMax, totalMax = tonumber(ARGV[6]), tonumber(ARGV[7])
local nsBytes = namespaceBytes(K.bytes, K.kv, namespace)
local total = tonumber(rcall('HGET', K.bytes, '') or '0')
local grows = entryBytes(key, hasValue and value or nil) - entryBytes(key, rcall('HGET', K.kv, key))
if grows > 0 then
  if nsBytes + grows > nsMax then return {-8, nsBytes, total} end
  if total + grows > totalMax then return {-9, nsBytes, total} end
end
rcall('SADD', K.kvns, namespace)
if hasValue then
  rcall('HSET', K.kv, key, value)
else
  rcall('HDEL', K.kv, key)
end
if grows ~= 0 then
  nsBytes = rcall('HINCRBY', K.bytes, namespace, grows)
  total = rcall('HINCRBY', K.bytes, '', grows)
end
emit(K.events, maxLen, 'kvPut', nowMs(), {'namespace', namespace, 'key', key,
  'valueBytes', hasValue and tostring(#value) or '', 'valueSha1', hasValue and redis.sha1hex(value) or ''})
return {1, nsBytes, total}
