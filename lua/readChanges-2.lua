--[[
  @master-only: on Redis 7 it declares flags, so a demoted master refuses it (store/scripts.py).
  readChanges: one poll of the change feed, with the checks that tell a worker whether what it
  learned from Redis so far still holds. Not a RocketMQ code: it is how route caches stay correct
  (README, "Route cache").

  Redis can lose or replace its data under a worker: a restart without persistence, FLUSHALL, an
  AOF restart that lost its last second, a failover to a replica that was behind. Either the
  registry's identity changed (the `instance` field of the meta hash is gone or different) or the
  last change-log entry the worker read is gone. Both are checked in the same atomic call that
  reads the next entries, so a worker never applies entries of one data set on top of another.

  KEYS[1]  {ns}:events          STREAM change log
  KEYS[2]  {ns}:meta            HASH  `instance` = identity of this registry's data set

  ARGV[1]  the instance id the worker knows ('' before its first poll)
  ARGV[2]  a fresh random id, stored as the instance when the registry has none (a new or lost
           data set); the first worker to poll names it, every other worker then sees it differ
  ARGV[3]  id of the last entry the worker applied; '' = none yet: start after the newest entry
  ARGV[4]  most entries to return
  ARGV[5]  most bytes of entry field names and values to return (0: no bound); the entry that
           crosses it is the last one returned. A registration's change-log entries name up to a
           chunk of topics each: 500 of them made one poll of a 300-broker registry a 150 ms
           command (bench-scale, RIP-29 shape)

  Returns: {instance, status, lastId, entries, more, nowMs}
    status 0: entries follow ARGV[3]; lastId is ARGV[3], or the newest id when ARGV[3] was ''
              ('0-0' for an empty stream)
    status 1: reset: the instance differs from ARGV[1] (a new data set); entries is empty and
              lastId is the newest id: everything learned before is void
    status 2: gap: the entry ARGV[3] is gone (trimmed, or lost with the data); entries is empty
              and lastId is the newest id: what was learned since may have been lost
    entries: the stream entries after ARGV[3], as XRANGE returns them (at most ARGV[4])
    more: 1 when ARGV[5] cut the read short (more entries may follow), else 0
    nowMs: the Redis clock (ms) when the read ran. An entry's id starts with the Redis time it was
           added at, so after a read that did not reach the end the worker knows how far behind
           the log it is: everything added before its last entry's time has been read (the
           change feed's knowledge moves on during a flood of entries, a heal's replays, instead
           of only once it reaches the end)
  Error codes: none.
  Complexity: O(log N + ARGV[4]) for a stream of N entries, read in pages sized by the entries
  read so far: FIRST_PAGE, then at most twice the last page, at most PAGE, and no more than the
  byte bound still has room for at the size of the largest entry met (and one more: the entry
  that crosses it). A page reads whole entries before the bound is checked: pages of a fixed 32
  read up to 3 MB to return 256 KiB of 100 KB entries (a registration's chunks), 21-26 ms
  commands at bench-scale's RIP-29 and many-topics shapes, and pages sized by the average entry
  (small and big ones mixed) up to 6 MB, 42 ms.
]]

--- @include "common"

local events, meta = KEYS[1], KEYS[2]
local known, candidate, last, count = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local max_bytes = tonumber(ARGV[5])
local FIRST_PAGE, PAGE = 2, 16

local function newest()
  local top = redis.call('XREVRANGE', events, '+', '-', 'COUNT', 1)
  if #top == 0 then return '0-0' end
  return top[1][1]
end

local instance = redis.call('HGET', meta, 'instance')
if not instance then
  redis.call('HSET', meta, 'instance', candidate)
  instance = candidate
end
if known ~= '' and known ~= instance then
  return {instance, 1, newest(), {}, 0, nowMs()}
end
if last == '' then
  return {instance, 0, newest(), {}, 0, nowMs()}
end
if last ~= '0-0' and #redis.call('XRANGE', events, last, last, 'COUNT', 1) == 0 then
  return {instance, 2, newest(), {}, 0, nowMs()}
end
if max_bytes == 0 then
  return {instance, 0, last, redis.call('XRANGE', events, '(' .. last, '+', 'COUNT', count), 0, nowMs()}
end
local entries, bytes, after, page_size, largest = {}, 0, last, FIRST_PAGE, 1
while #entries < count do
  local page = redis.call('XRANGE', events, '(' .. after, '+', 'COUNT', math.min(page_size, count - #entries))
  if #page == 0 then break end
  for _, entry in ipairs(page) do
    entries[#entries + 1] = entry
    local entry_bytes = 0
    for _, field in ipairs(entry[2]) do entry_bytes = entry_bytes + #field end
    bytes = bytes + entry_bytes
    if entry_bytes > largest then largest = entry_bytes end
    if bytes >= max_bytes then return {instance, 0, last, entries, 1, nowMs()} end
  end
  after = page[#page][1]
  page_size = math.min(PAGE, 2 * page_size, math.floor((max_bytes - bytes) / largest) + 1)
end
return {instance, 0, last, entries, 0, nowMs()}
