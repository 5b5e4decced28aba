"""``python -m bench.uncached_drain``: the drain of a stall is read off the right slices, and the
tool runs end to end against a real worker and Redis."""

from __future__ import annotations

import pytest

from bench import uncached_drain


def test_a_drain_is_the_first_slice_answered_in_time() -> None:
    timings = [(2.06, 0.030), (2.07, 0.012), (2.12, 0.020), (2.16, 0.004), (2.21, 0.003), (1.0, 0.5)]
    assert uncached_drain.drained_after(timings, 2.05) == 0.1
    assert uncached_drain.drained_after(timings[:3], 2.05) is None


def test_the_tool_prints_a_row_per_run(capsys: pytest.CaptureFixture[str]) -> None:
    uncached_drain.main(["--rate", "100", "--rounds", "1", "--stall", "0.02"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "uncached lookups of a 100-group route at 100/s, stalls of 20 ms:"
    assert lines[1].startswith("  this checkout: quiet p99 ")
    assert " s, p99 of the run " in lines[1]
    assert len(lines) == 2
