"""``python -m bench.route_read``: both reads it times answer the same route, so its timings compare
like with like, and it prints a row per route width."""

from __future__ import annotations

import pytest

from bench import route_read
from namesrv.domain.routes import parse_broker_data
from tests.redis_server import local_redis


async def test_both_reads_answer_the_same_route() -> None:
    with local_redis() as url:
        redis, store = await route_read.registry(url, [4])
        try:
            cached = await store.route("G4", with_order=False, for_cache=True)
            once = await store.route("G4", with_order=False, for_cache=False)
        finally:
            await redis.aclose()
    names = sorted(f"broker-{g:03d}" for g in range(4))
    assert sorted(parse_broker_data(b).brokerName for b in once.broker_datas) == names
    assert (once.queue_datas, once.broker_datas) == (cached.queue_datas, cached.broker_datas)
    assert len(cached.deadlines) == 12 and once.deadlines == {}


def test_the_tool_prints_a_row_per_width(capsys: pytest.CaptureFixture[str]) -> None:
    route_read.main(["--widths", "1", "4", "--reads", "2", "--rounds", "1"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "route read, Redis time per read (median of 1 rounds of 2) | worker's reply:"
    assert lines[1].startswith("    1 groups: for a cache ")
    assert lines[2].startswith("    4 groups: for a cache ")
    assert " for one answer " in lines[2] and " whole " in lines[2]
    row = "  worker CPU per read of G4 for one answer, 1 / 16 at once: shared connections "
    assert lines[3].startswith(row)
    assert " µs, pooled client " in lines[3]
    assert len(lines) == 4
