-- KV size accounting, shared by kvPut and kvDelete. {ns}:kvbytes holds each namespace's bytes
-- (keys plus values, UTF-8) under its name and the whole KV's under '' (never a namespace: names
-- are not empty). A namespace written before the accounting existed is counted on first use.
local function entryBytes(key, value)
  if not value then return 0 end
  return #key + #value
end

local function namespaceBytes(bytesKey, kvKey, namespace)
  local counted = rcall('HGET', bytesKey, namespace)
  if counted then return tonumber(counted) end
  local total = 0
  local flat = rcall('HGETALL', kvKey)
  for i = 1, #flat, 2 do total = total + #flat[i] + #flat[i + 1] end
  rcall('HSET', bytesKey, namespace, total)
  rcall('HINCRBY', bytesKey, '', total)
  return total
end
