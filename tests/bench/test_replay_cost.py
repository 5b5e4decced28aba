"""``python -m bench.replay_cost`` runs the registry's own functions: its chunks are what a
registration sends (the RIP-29 simulator's topic shape, 8 queues, perm 6), its output names them."""

from __future__ import annotations

import orjson
import pytest

from bench import replay_cost
from namesrv.registry.kept_topics import WrittenTopics, pack_written


def test_chunks_hold_every_topic_in_order() -> None:
    configs = replay_cost.decode(replay_cost.body_of(1200))
    calls = replay_cost.chunks(configs, 500)
    assert [len(c.writes) for c in calls] == [500, 500, 200]
    assert [c.chunk_no for c in calls] == [0, 1, 2]
    assert calls[2].writes[-1].topic == "rip29-topic-01199"
    (keys, argv), *_ = replay_cost.arguments(calls)
    assert keys[10] == "{replay-cost}:topic:rip29-topic-00000"
    queue = orjson.loads(argv[-1])
    assert (queue["brokerName"], queue["readQueueNums"], queue["perm"]) == ("broker-a", 8, 6)


def test_prints_each_piece(capsys: pytest.CaptureFixture[str]) -> None:
    replay_cost.main(["--topics", "1000", "--rounds", "1"])
    lines = capsys.readouterr().out.splitlines()
    assert (
        lines[0].startswith("1,000 topics, ") and " MB body, 2 chunks of 500; the writes kept in " in lines[0]
    )
    assert [line.split("  ")[1] for line in lines[1:]] == [
        "decode (JSON body -> sorted topic configs)",
        "topic writes",
        "keys and arguments",
        "RESP packing",
        "all of it",
        "kept writes unpacked (instead of the first two)",
        "all of it, from the kept writes",
    ]


def test_a_replay_from_the_kept_writes_sends_the_same_arguments() -> None:
    calls = replay_cost.chunks(replay_cost.decode(replay_cost.body_of(1200)), 500)
    kept = pack_written(WrittenTopics("broker-a", replay_cost.all_writes(calls), {}))
    assert kept is not None
    assert replay_cost.arguments(replay_cost.kept_chunks(kept, 500)) == replay_cost.arguments(calls)
