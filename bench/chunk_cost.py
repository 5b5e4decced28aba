"""What a new 10,000-topic master's topic chunks cost Redis, and which part of the script costs what.

A heal at the RIP-29 shape is mostly Redis running ``registerBrokerTopics`` for 100 such masters
(the workers' share fell below Redis' own once replays stopped decoding bodies). This registers
``--brokers`` new masters of ``--topics`` topics each on a private Redis, in chunks of ``--chunk``,
and takes Redis' own time for their chunk calls from ``INFO commandstats`` (the header call is not
counted), for the shipped script and for two ablations of it that show where the time goes:
without the two topic-index ``SADD``s, and without the per-topic ``HSET`` of the queue. The
ablations leave Redis in a state no real registration does; they only weigh the parts. Variants
alternate round by round, so a machine's noise falls on each alike:

    python -m bench.chunk_cost                 # 12 masters x 10,000 topics, 3 rounds

Not part of ``make bench``; about 15 seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import uuid
from collections.abc import Sequence
from dataclasses import replace

from redis.asyncio import Redis

from namesrv.registry.registration import QueueWrites
from namesrv.sim.broker import topic_configs
from namesrv.store.keyspace import Keyspace
from namesrv.store.registration_args import BodyFacts, RegisterBrokerArgs, RegisterTopicsArgs, TopicWrites
from namesrv.store.registry_store import RegistryStore
from namesrv.store.scripts import LuaScript, ScriptRegistry, discover
from support.redis_launcher import local_redis

NAMESPACE = "chunk-cost"
SCRIPT = "registerBrokerTopics"
# each ablation: the script text it removes, and what stands in its place
ABLATIONS: dict[str, tuple[str, str]] = {
    "without the topic-index SADDs": (
        "addAll('SADD', K.topics, fresh)\naddAll('SADD', K.btopics, fresh)\n",
        "",
    ),
    "without the queue HSETs": (
        "new = rcall(pending.mode == 1 and 'HSET' or 'HSETNX', key, brokerName, qd) == 1",
        "new = true",
    ),
}


def variant(name: str) -> dict[str, LuaScript]:
    """Every script, with ``registerBrokerTopics`` as shipped or ablated."""
    scripts = discover()
    if name == "shipped":
        return scripts
    removed, stand_in = ABLATIONS[name]
    source = scripts[SCRIPT].source
    if removed not in source:
        raise ValueError(f"{SCRIPT} no longer holds what {name!r} removes: update bench/chunk_cost.py")
    scripts[SCRIPT] = replace(scripts[SCRIPT], source=source.replace(removed, stand_in))
    return scripts


async def master_ms(url: str, name: str, brokers: int, topics: int, chunk: int) -> float:
    """Redis ms per master for the chunk calls of ``brokers`` new masters, on an emptied Redis."""
    redis = Redis.from_url(url, decode_responses=True)
    try:
        await redis.flushall()
        scripts = ScriptRegistry(redis, variant(name))
        await scripts.preload()
        store = RegistryStore(redis, Keyspace(NAMESPACE), scripts, events_max_len=10_000, worker_id="bench")
        names = [f"rip29-topic-{i:05d}" for i in range(topics)]
        configs = sorted(topic_configs(names).values(), key=lambda c: c.topicName)
        facts = BodyFacts('{"counter":1,"timestamp":1700000000000}', 0, None, topics, "digest", False)
        usec = 0.0
        for b in range(brokers):
            broker_name = f"broker-{b:03d}"
            args = RegisterBrokerArgs(
                "C",
                f"10.0.{b}.1:10911",
                broker_name,
                0,
                "",
                None,
                120_000,
                None,
                uuid.uuid4().hex,
                False,
                "",
                facts,
            )
            await store.register_header(args)
            writes = QueueWrites(broker_name)
            before = (await redis.info("commandstats"))["cmdstat_evalsha"]["usec"]
            for no, i in enumerate(range(0, topics, chunk)):
                part = writes.writes(configs[i : i + chunk])
                call = RegisterTopicsArgs("C", args.addr, broker_name, args.token, False, no, part)
                await store.register_topics(call)
            final = RegisterTopicsArgs(
                "C", args.addr, broker_name, args.token, True, -1, TopicWrites([], [], [])
            )
            await store.register_topics(final)
            usec += (await redis.info("commandstats"))["cmdstat_evalsha"]["usec"] - before
        return usec / brokers / 1000
    finally:
        await redis.aclose()


async def measure(url: str, brokers: int, topics: int, chunk: int, rounds: int) -> None:
    names = ["shipped", *ABLATIONS]
    taken: dict[str, list[float]] = {name: [] for name in names}
    for _ in range(rounds):
        for name in names:
            taken[name].append(await master_ms(url, name, brokers, topics, chunk))
    print(
        f"{topics:,}-topic new masters in chunks of {chunk}: Redis ms per master (median of {rounds} rounds)"
    )
    for name in names:
        runs = sorted(taken[name])
        each = ", ".join(f"{ms:.2f}" for ms in taken[name])
        print(f"  {name:<32} {runs[len(runs) // 2]:7.2f} ms  (rounds: {each})")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.chunk_cost", description=__doc__.split("\n")[0])
    parser.add_argument("--brokers", type=int, default=12, help="new masters per round")
    parser.add_argument("--topics", type=int, default=10_000, help="topics per master")
    parser.add_argument("--chunk", type=int, default=500, help="topics per script call (registerChunkTopics)")
    parser.add_argument("--rounds", type=int, default=3)
    opts = parser.parse_args(argv)
    if min(opts.brokers, opts.topics, opts.chunk, opts.rounds) < 1:
        parser.error("--brokers, --topics, --chunk and --rounds must be at least 1")
    with local_redis() as url:
        asyncio.run(measure(url, opts.brokers, opts.topics, opts.chunk, opts.rounds))


if __name__ == "__main__":
    main()
