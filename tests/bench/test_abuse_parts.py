"""The pieces of ``make abuse`` that decide its figures: what the attacks send is what the issue
describes, a plan reaches the attacker process intact, and "answered" and "p99" count every
legitimate request sent, an unanswered one as the slowest."""

from __future__ import annotations

import math
import struct
import zlib

import pytest

from bench.abuse import hostile
from bench.abuse.attacks import ATTACKS
from bench.abuse.config import parse_config
from bench.abuse.legit import Request, percentile, summarize
from bench.abuse.plan import BrokerRef, Plan, Sizes
from bench.abuse.report import judge
from bench.abuse.scenarios import BASELINE, NAMES, SCENARIOS
from namesrv.protocol.register_body import crc32_matches
from namesrv.protocol.remoting import decode_frame


def test_the_zlib_bomb_is_64_kb_that_inflates_to_63_mib() -> None:
    body = hostile.zlib_bomb()
    assert 60_000 < len(body) < 70_000
    inflated = zlib.decompress(body)
    assert len(inflated) == 4 + (63 << 20)
    assert struct.unpack(">i", inflated[:4]) == (63 << 20,)
    assert inflated[4:] == b"0" * (63 << 20)
    frame = decode_frame(hostile.zlib_bomb_request(3, body))
    assert frame.code == 103 and frame.body == body and frame.ext_fields is not None
    assert frame.ext_fields["compressed"] == "true"
    # the CRC is right: a wrong one would be refused before the body is looked at
    assert crc32_matches(int(frame.ext_fields["bodyCrc32"]), body)


def test_oversized_requests_carry_the_whole_name() -> None:
    requests = dict(hostile.oversized_requests(1000))
    lookup = decode_frame(requests["lookup"])
    assert lookup.code == 105 and lookup.ext_fields == {"topic": "T" * 1000}
    by_broker = decode_frame(requests["register: broker name"])
    assert by_broker.ext_fields is not None and by_broker.ext_fields["brokerName"] == "T" * 1000
    by_topic = decode_frame(requests["register: topic name"])
    assert by_topic.body is not None and by_topic.body.count(b"T" * 1000) == 2  # table key and topicName


def test_malformed_frames_are_what_the_scenario_says() -> None:
    frames = hostile.malformed_frames()
    what = next(s.what for s in SCENARIOS if s.name == "malformed-frames")
    assert what.startswith(f"{len(frames)} kinds")
    assert len({name for name, _ in frames}) == len(frames)
    assert all(data for _, data in frames)


def test_every_scenario_but_the_baseline_is_an_attack() -> None:
    assert set(NAMES) - {BASELINE} == set(ATTACKS)
    assert [s.name for s in SCENARIOS if s.fleet == "acl"] == ["acl-unregister"]


def test_a_plan_reaches_the_attacker_intact() -> None:
    plan = Plan(
        scenario="acl-unregister",
        seconds=2.5,
        remoting=(("127.0.0.1", 9876), ("127.0.0.1", 9877)),
        http=("http://127.0.0.1:8080",),
        sizes=Sizes.short(),
        account=("ak", "sk"),
        brokers=(BrokerRef("C", "b", "10.0.0.1:10911"),),
    )
    assert Plan.from_json(plan.to_json()) == plan


def test_flags_override_sizes_and_traffic_and_refuse_unknown_names() -> None:
    cfg = parse_config(["--short", "--size", "idle_conns=300", "--traffic", "interval=0.02"])
    assert (cfg.seconds, cfg.sizes.idle_conns, cfg.sizes.partial_conns) == (1.5, 300, 20)
    assert cfg.traffic.interval == 0.02
    assert parse_config(["--scenarios", "kv-flood,baseline"]).scenarios == ("kv-flood", "baseline")
    for bad in (["--size", "nope=1"], ["--scenarios", "nope"], ["--size", "idle_conns"]):
        with pytest.raises(SystemExit):
            parse_config(bad)


def _requests(outcomes: list[tuple[str, float]]) -> list[Request]:
    return [
        Request("remoting", 0, float(i), latency, outcome) for i, (outcome, latency) in enumerate(outcomes)
    ]


def test_unanswered_lookups_count_against_answered_and_rank_slowest() -> None:
    answered = [("ok", 0.001 * (i + 1)) for i in range(98)]
    summary = summarize(_requests([*answered, ("timeout", 3.0), ("closed", 0.0001)]))
    assert (summary["sent"], summary["answered"], summary["answered_pct"]) == (100, 98, 98.0)
    # 2% unanswered: the 99th percentile is one of them, not a time
    assert math.isinf(summary["p99_ms"])
    assert summary["p50_ms"] == pytest.approx(50.0)
    assert summary["failures"] == {"timeout": 1, "closed": 1}

    summary = summarize(_requests([*answered, ("ok", 0.2), ("timeout", 3.0)]))
    assert summary["answered_pct"] == 99.0
    assert summary["p99_ms"] == pytest.approx(200.0)  # the 99th of 100 is the slowest answered


def test_nearest_rank_percentile() -> None:
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.99) == 4.0
    assert math.isnan(percentile([], 0.5))


def _row(answered_pct: float, after_kib: int, health: str = "serving") -> dict[str, object]:
    legit = {"answered_pct": answered_pct}
    return {
        "legit": {"remoting": legit, "http": {"answered_pct": 100.0}, "register": {"answered_pct": 100.0}},
        "rss_kib": {"worker-0": {"baseline": 60 * 1024, "peak": 300 * 1024, "after": after_kib}},
        "health": [health],
        "attacker": {"errors": 0},
    }


def test_a_row_passes_at_99_percent_and_150_mib_and_no_further() -> None:
    assert judge(_row(99.0, 210 * 1024)) == []
    assert judge(_row(98.99, 210 * 1024)) == ["lookups answered 98.99%"]
    assert judge(_row(100.0, 210 * 1024 + 1)) == ["worker-0 RSS after +150.0 MiB"]
    assert judge(_row(math.nan, 60 * 1024)) == ["lookups answered -"]  # nothing sent is no pass
    assert judge(_row(100.0, 60 * 1024, "exited with status -9")) == ["worker-0 exited with status -9"]
