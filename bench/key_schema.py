"""What the route key schema costs Redis, against the one alternative that makes a new broker cheap.

Issue 13 asks a new 10,000-topic broker to register as fast as the Java NameServer. With one hash
per topic (``{ns}:topic:<topic>``: brokerName -> QueueData, so a route is one ``HGETALL``), a new
broker is one ``HSET`` per topic, and a ``redis.call`` costs Redis about twice a command read from
the socket. The alternative, one hash per broker name (topic -> QueueData), writes a broker's
topics with one ``HSET`` per chunk, but then a route read must visit every broker name. This
measures both sides of that trade in Redis' own time (INFO commandstats), on a private server:

    python -m bench.key_schema            # 10,000 topics; reads with 2, 16, 64 and 256 broker names

Only the shape of the data matters here: the scripts are the bare commands, not the product's.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Sequence

import redis

from support.redis_launcher import local_redis

QUEUE = '{"brokerName":"%s","perm":6,"readQueueNums":8,"topicSysFlag":0,"writeQueueNums":8}'
CHUNK = 1000  # topics per script call, as registerChunkTopics
WRITE_PER_TOPIC = "for i = 1, #KEYS do redis.call('HSET', KEYS[i], ARGV[1], ARGV[i + 1]) end"
WRITE_PER_BROKER = "redis.call('HSET', KEYS[1], unpack(ARGV))"
READ_PER_TOPIC = "return redis.call('HGETALL', KEYS[1])"
READ_PER_BROKER = """
local out = {}
for _, name in ipairs(redis.call('HKEYS', KEYS[1])) do
  local queue = redis.call('HGET', KEYS[2] .. name, ARGV[1])
  if queue then out[#out + 1] = name; out[#out + 1] = queue end
end
return out
"""


def _evalsha_usec(r: redis.Redis, sha: str, keys: Sequence[str], args: Sequence[str]) -> float:
    r.config_resetstat()
    r.evalsha(sha, len(keys), *keys, *args)
    return float(r.info("commandstats")["cmdstat_evalsha"]["usec"])


def new_broker_ms(r: redis.Redis, topics: Sequence[str], per_broker: bool, rounds: int) -> float:
    """Median Redis time to write one new broker name's queues for every topic."""
    sha = r.script_load(WRITE_PER_BROKER if per_broker else WRITE_PER_TOPIC)
    queue = QUEUE % "broker-a"
    totals = []
    for _ in range(rounds):
        r.flushall()
        usec = 0.0
        for at in range(0, len(topics), CHUNK):
            part = topics[at : at + CHUNK]
            if per_broker:
                pairs = [x for topic in part for x in (topic, queue)]
                usec += _evalsha_usec(r, sha, ["{ns}:q:broker-a"], pairs)
            else:
                keys = [f"{{ns}}:topic:{topic}" for topic in part]
                usec += _evalsha_usec(r, sha, keys, ["broker-a"] + [queue] * len(part))
        totals.append(usec / 1000)
    return statistics.median(totals)


def read_us(r: redis.Redis, broker_names: int, reads: int) -> tuple[float, float]:
    """Redis time per route read of a topic held by two of ``broker_names`` names: (now, per
    broker name)."""
    r.flushall()
    names = [f"broker-{i:03d}" for i in range(broker_names)]
    pipe = r.pipeline(transaction=False)
    for i, name in enumerate(names):
        pipe.hset("{ns}:brokers", name, "{}")
        pipe.hset(f"{{ns}}:q:{name}", "topic-a" if i < 2 else "topic-b", QUEUE % name)
        if i < 2:
            pipe.hset("{ns}:topic:topic-a", name, QUEUE % name)
    pipe.execute()
    now, alt = r.script_load(READ_PER_TOPIC), r.script_load(READ_PER_BROKER)
    r.config_resetstat()
    for _ in range(reads):
        r.evalsha(now, 1, "{ns}:topic:topic-a")
    now_us = r.info("commandstats")["cmdstat_evalsha"]["usec"] / reads
    r.config_resetstat()
    for _ in range(reads):
        r.evalsha(alt, 2, "{ns}:brokers", "{ns}:q:", "topic-a")
    alt_us = r.info("commandstats")["cmdstat_evalsha"]["usec"] / reads
    return now_us, alt_us


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.key_schema", description=__doc__.split("\n")[0])
    parser.add_argument("--topics", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5, help="new-broker writes; the median is printed")
    parser.add_argument("--reads", type=int, default=2000, help="route reads per broker-name count")
    parser.add_argument("--broker-names", type=int, nargs="+", default=[2, 16, 64, 256])
    opts = parser.parse_args(argv)
    with local_redis() as url:
        r = redis.Redis.from_url(url)
        topics = [f"topic-{i:05d}" for i in range(opts.topics)]
        per_topic = new_broker_ms(r, topics, False, opts.rounds)
        per_broker = new_broker_ms(r, topics, True, opts.rounds)
        print(f"new broker, {opts.topics:,} topics, Redis time (median of {opts.rounds}):")
        print(f"  hash per topic (now)     {per_topic:7.1f} ms")
        print(f"  hash per broker name     {per_broker:7.1f} ms ({per_topic / per_broker:.1f}x less)")
        print("route read of a topic on 2 broker names, Redis time per read:")
        for count in opts.broker_names:
            now_us, alt_us = read_us(r, count, opts.reads)
            print(
                f"  {count:4d} broker names: now {now_us:6.1f} µs, "
                f"hash per broker name {alt_us:7.1f} µs ({alt_us / now_us:.1f}x)"
            )


if __name__ == "__main__":
    main()
