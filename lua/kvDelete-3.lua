--[[
  kvDelete: DELETE_KV_CONFIG (102), KVConfigManager.deleteKVConfig. The namespace stays even
  when its last key goes, so GET_KVLIST_BY_NAMESPACE then answers an empty table, as in Java.

  KEYS[1]  {ns}:kvns            SET KV namespaces
  KEYS[2]  {ns}:kv:<namespace>  HASH key -> value
  KEYS[3]  {ns}:events          STREAM change log

  ARGV[1]  namespace
  ARGV[2]  key
  ARGV[3]  change-log length

  Returns: {deleted}: 1 when the key existed.
  Complexity: O(1).
]]
--- @include "common"

local namespace, key, maxLen = ARGV[1], ARGV[2], ARGV[3]
local deleted = rcall('HDEL', KEYS[2], key)
if deleted == 1 then
  emit(KEYS[3], maxLen, 'kvDelete', nowMs(), {'namespace', namespace, 'key', key})
end
return {deleted}
