"""``python -m bench.gil_handoff`` runs and prints one row per setting (the numbers are the
benchmark's business, not the test's)."""

from __future__ import annotations

import pytest

from bench.gil_handoff import main


def test_prints_a_row_per_switch_interval(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--seconds", "0.3", "--runs", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("switch interval")
    assert [line.split()[0] for line in lines[1:]] == ["5", "0.5"]
