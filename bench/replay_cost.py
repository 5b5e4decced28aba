"""What a new 10,000-topic broker's registration, or a heal's replay of one, costs the worker
outside Redis: the body's decode, the topic writes, each chunk's keys and arguments, and the RESP
packing redis-py hands to the socket. No Redis, no network: one process, the registry's own
functions on a body like the RIP-29 simulator's.

    python -m bench.replay_cost                 # best of --rounds, per piece and in all
    valgrind --tool=callgrind python -m bench.replay_cost --rounds 0 --passes 3

The second form counts instructions, which do not depend on what else the machine is doing:
run it with ``--passes 1`` and ``--passes 3``, and half the difference is one replay.

Not part of ``make bench``; a few seconds.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from typing import Any

import hiredis

from namesrv.domain.model import DataVersion, TopicConfig
from namesrv.protocol.register_body import decode_register_body
from namesrv.registry.kept_topics import WrittenTopics, pack_written, unpack_written
from namesrv.registry.registration import QueueWrites
from namesrv.sim.bodies import register_body_json
from namesrv.sim.broker import topic_configs
from namesrv.store.keyspace import Keyspace
from namesrv.store.registration_args import RegisterTopicsArgs, TopicWrites
from namesrv.store.script_call import CallContext

BODY_VERSION = 400  # a 4.9.x/5.x broker's request version: the JSON body
CTX = CallContext(Keyspace("replay-cost"), "10000", "w1")
SHA = "0" * 40


def body_of(topics: int) -> bytes:
    names = [f"rip29-topic-{i:05d}" for i in range(topics)]
    return register_body_json(topic_configs(names), DataVersion())


def decode(body: bytes) -> list[TopicConfig]:
    wrapper, _ = decode_register_body(body, version=BODY_VERSION, compressed=False, now_ms=0)
    return sorted(wrapper.topicConfigTable.values(), key=lambda tc: tc.topicName)


def chunks(configs: Sequence[TopicConfig], size: int) -> list[RegisterTopicsArgs]:
    writes = QueueWrites("broker-a")
    parts = [configs[i : i + size] for i in range(0, len(configs), size)]
    return [
        RegisterTopicsArgs("C", "10.0.0.1:10911", "broker-a", "token", False, no, writes.writes(part))
        for no, part in enumerate(parts)
    ]


def kept_chunks(kept: bytes, size: int) -> list[RegisterTopicsArgs]:
    """A heal's replay with the writes its registration kept: unpacked, not decoded."""
    writes = unpack_written(kept).writes
    return [
        RegisterTopicsArgs("C", "10.0.0.1:10911", "broker-a", "token", False, no, writes.slice(i, i + size))
        for no, i in enumerate(range(0, len(writes), size))
    ]


def all_writes(calls: Sequence[RegisterTopicsArgs]) -> TopicWrites:
    """Every write the calls send, in order: what a registration keeps for a replay."""
    writes = TopicWrites([], [], [])
    for call in calls:
        writes.extend(call.columns)
    return writes


def arguments(calls: Sequence[RegisterTopicsArgs]) -> list[tuple[list[str], list[Any]]]:
    return [(call.keys(CTX.keyspace), call.argv(CTX)) for call in calls]


def pack(built: Sequence[tuple[list[str], list[Any]]]) -> None:
    for keys, argv in built:
        hiredis.pack_command(("EVALSHA", SHA, len(keys), *keys, *argv))


def replay(body: bytes, size: int) -> None:
    pack(arguments(chunks(decode(body), size)))


def kept_replay(kept: bytes, size: int) -> None:
    pack(arguments(kept_chunks(kept, size)))


def best_ms(work: Callable[[], object], rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - started)
    return best * 1000


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--topics", type=int, default=10_000)
    p.add_argument("--chunk", type=int, default=500, help="topics per script call (registerChunkTopics)")
    p.add_argument("--rounds", type=int, default=20, help="timed rounds per piece (best is printed)")
    p.add_argument("--passes", type=int, default=0, help="untimed whole replays (for callgrind)")
    args = p.parse_args(argv)
    body = body_of(args.topics)
    replay(body, args.chunk)  # warm: imports, interned names, rendered queues
    for _ in range(args.passes):
        replay(body, args.chunk)
    if args.rounds <= 0:
        return
    configs = decode(body)
    calls = chunks(configs, args.chunk)
    built = arguments(calls)
    kept = pack_written(WrittenTopics("broker-a", all_writes(calls), {}))
    assert kept is not None
    pieces = {
        "decode (JSON body -> sorted topic configs)": lambda: decode(body),
        "topic writes": lambda: chunks(configs, args.chunk),
        "keys and arguments": lambda: arguments(calls),
        "RESP packing": lambda: pack(built),
        "all of it": lambda: replay(body, args.chunk),
        "kept writes unpacked (instead of the first two)": lambda: kept_chunks(kept, args.chunk),
        "all of it, from the kept writes": lambda: kept_replay(kept, args.chunk),
    }
    print(
        f"{args.topics:,} topics, {len(body) / 1e6:.2f} MB body, {len(calls)} chunks of {args.chunk}; "
        f"the writes kept in {len(kept) / 1e3:.1f} KB"
    )
    for name, work in pieces.items():
        print(f"  {name:<48} {best_ms(work, args.rounds):7.2f} ms")


if __name__ == "__main__":
    main()
