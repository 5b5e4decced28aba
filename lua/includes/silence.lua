-- The fleet's silence. Every worker says every second that it runs (noteWorker), which stamps
-- {ns}:meta lastBeat with the Redis clock. A gap over SILENCE_MS means no worker reached Redis
-- meanwhile (Redis stopped, stalled or cut off from the fleet, or no worker ran): no broker could
-- register or heartbeat either, so the gap must not count against any broker. Needs common.lua.
local SILENCE_MS = 5000

-- The time by which reads judge deadlines: the last beat while the fleet is silent (what the
-- fleet knew last), else now. Reads write nothing; the next beat or sweep moves the deadlines.
local function judgedAt(metaKey, now)
  local last = tonumber(rcall('HGET', metaKey, 'lastBeat') or '')
  if last and now - last > SILENCE_MS then return last end
  return now
end

-- After a silence, move every deadline that had not passed at the last beat by the length of the
-- silence, and log it; then stamp the beat. Returns how many deadlines moved.
local function forgiveSilence(deadlinesKey, metaKey, eventsKey, maxLen, now)
  local last = tonumber(rcall('HGET', metaKey, 'lastBeat') or '')
  rcall('HSET', metaKey, 'lastBeat', now)
  if not last or now - last <= SILENCE_MS then return 0 end
  local gap = now - last
  local due = rcall('ZRANGEBYSCORE', deadlinesKey, last, '+inf', 'WITHSCORES')
  for i = 1, #due, 2 do
    rcall('ZADD', deadlinesKey, tonumber(due[i + 1]) + gap, due[i])
  end
  emit(eventsKey, maxLen, 'silence', now, {'from', last, 'to', now, 'moved', #due / 2})
  return #due / 2
end
