"""The load generators can run at a lower CPU priority than the servers they load
(``--loadgen-nice``): on a machine shared with its own load, the kernel's fair share otherwise
holds a busy worker off its core while the generators run, a wait that clients on other machines
never cause (by default they run at the servers' priority: bench/README.md says why)."""

from __future__ import annotations

import os
import time

import pytest

from bench.config import parse_config
from bench.loadgen import LoadPool
from bench.scale.config import parse_config as parse_scale_config


def _priority_once_set(pid: int, base: int) -> int:
    """The process's priority once it moved from ``base`` (a spawned child sets it as it starts),
    or ``base`` after 30 s."""
    deadline = time.monotonic() + 30
    while (value := os.getpriority(os.PRIO_PROCESS, pid)) == base and time.monotonic() < deadline:
        time.sleep(0.05)
    return value


def test_the_load_processes_run_at_the_nice_value_given() -> None:
    base = os.getpriority(os.PRIO_PROCESS, 0)
    pool = LoadPool(2, 7)
    pool.start()
    try:
        assert [_priority_once_set(pid, base) for pid in pool.pids] == [min(19, base + 7)] * 2
    finally:
        pool.close()


def test_nice_zero_leaves_them_at_the_servers_priority() -> None:
    pool = LoadPool(1, 0)
    pool.start()
    try:
        assert os.getpriority(os.PRIO_PROCESS, pool.pids[0]) == os.getpriority(os.PRIO_PROCESS, 0)
    finally:
        pool.close()


def test_both_benches_default_to_the_servers_priority_and_refuse_a_value_out_of_range() -> None:
    assert parse_config([]).loadgen_nice == 0
    assert parse_config(["--loadgen-nice", "10"]).loadgen_nice == 10
    assert parse_scale_config([]).loadgen_nice == 0
    assert parse_scale_config(["--loadgen-nice", "5"]).loadgen_nice == 5
    with pytest.raises(SystemExit):
        parse_config(["--loadgen-nice", "20"])
    with pytest.raises(SystemExit):
        parse_scale_config(["--loadgen-nice", "-1"])
