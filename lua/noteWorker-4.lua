--[[
  noteWorker: a worker says it runs (every second), or that it stops. Connection holders of a
  broker (unregisterBroker) count only while their worker is seen here, so a worker killed with
  kill -9 stops holding brokers within the window its peers allow. The beat also stamps the
  fleet's last contact with Redis: after a silence no broker is aged out by it (silence.lua).

  KEYS[1]  {ns}:workers         HASH workerId -> when it was last seen (ms, Redis clock)
  KEYS[2]  {ns}:meta            HASH lastBeat: the fleet's last contact with Redis (ms)
  KEYS[3]  {ns}:deadlines       ZSET member scored by deadline ms
  KEYS[4]  {ns}:events          STREAM change log

  ARGV[1]  id of the worker
  ARGV[2]  '1' while it runs, '0' when it stops (its entry goes at once)
  ARGV[3]  ms after which any worker's entry is forgotten (bounds the hash)
  ARGV[4]  ms within which a worker counts as running, for the reply
  ARGV[5]  change-log length

  Returns: {running}: how many workers were seen within ARGV[4] ms.
  Complexity: O(workers); after a silence, O(brokers) once.
]]
--- @include "common"
--- @include "silence"

local workers, id, running, forget, window = KEYS[1], ARGV[1], ARGV[2] == '1', tonumber(ARGV[3]),
  tonumber(ARGV[4])
local now = nowMs()
forgiveSilence(KEYS[3], KEYS[2], KEYS[4], ARGV[5], now)
if running then
  rcall('HSET', workers, id, now)
else
  rcall('HDEL', workers, id)
end
local entries = rcall('HGETALL', workers)
local seen = 0
for i = 1, #entries, 2 do
  local at = tonumber(entries[i + 1]) or 0
  if at < now - forget then
    rcall('HDEL', workers, entries[i])
  elseif at >= now - window then
    seen = seen + 1
  end
end
return {seen}
