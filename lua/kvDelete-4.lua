--[[
  kvDelete: DELETE_KV_CONFIG (102), KVConfigManager.deleteKVConfig. The namespace stays even
  when its last key goes, so GET_KVLIST_BY_NAMESPACE then answers an empty table, as in Java.

  KEYS[1]  {ns}:kvns            SET KV namespaces
  KEYS[2]  {ns}:kv:<namespace>  HASH key -> value
  KEYS[3]  {ns}:events          STREAM change log
  KEYS[4]  {ns}:kvbytes         HASH namespace -> bytes of its keys and values; '' -> all of KV

  ARGV[1]  namespace
  ARGV[2]  key
  ARGV[3]  change-log length

  Returns: {deleted}: 1 when the key existed.
  Complexity: O(1) (O(namespace) once for a namespace written before the accounting existed).
]]
--- @include "common"
--- @include "kvBytes"

local K = {kvns = KEYS[1], kv = KEYS[2], events = KEYS[3], bytes = KEYS[4]}
local namespace, key, maxLen = ARGV[1], ARGV[2], ARGV[3]
local old = rcall('HGET', K.kv, key)
if not old then return {0} end
namespaceBytes(K.bytes, K.kv, namespace)
rcall('HDEL', K.kv, key)
rcall('HINCRBY', K.bytes, namespace, -entryBytes(key, old))
rcall('HINCRBY', K.bytes, '', -entryBytes(key, old))
emit(K.events, maxLen, 'kvDelete', nowMs(), {'namespace', namespace, 'key', key})
return {1}
