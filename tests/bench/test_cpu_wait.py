"""The bench's reading of how long the processes under test waited for a CPU (the kernel's
schedstat): what tells a tail the workers made from one the 2-core machine's scheduler made."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from bench.lookups import _line
from bench.procs import CpuWaitMeter, cpu_wait_seconds
from bench.targets import _worker_side

SPIN = "while True: pass"


@pytest.fixture
def two_spinners_on_one_cpu() -> Iterator[list[int]]:
    """Two processes that never sleep, both allowed on one CPU only: each is runnable all the
    time and can run only while the other does not, so each waits for the CPU about half of
    the time, whatever else the machine is doing."""
    cpu = min(os.sched_getaffinity(0))
    procs = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(2)]
    try:
        for p in procs:
            os.sched_setaffinity(p.pid, {cpu})
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            p.kill()
            p.wait()


def _gone_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_process_that_shares_one_cpu_with_a_spinner_waits_for_it(
    two_spinners_on_one_cpu: list[int],
) -> None:
    pid = two_spinners_on_one_cpu[0]
    before = cpu_wait_seconds(pid)
    assert before is not None

    async def window(pids: list[int]) -> dict[str, object] | None:
        meter = CpuWaitMeter(pids, step=0.1)
        meter.start()
        await asyncio.sleep(1.0)
        return meter.stop()

    waited = asyncio.run(window([pid]))
    assert waited is not None
    # about 500 ms of the second; a busier machine only makes it more
    assert waited["ms"] > 200  # type: ignore[operator]
    steps = waited["by_step_ms"]
    assert isinstance(steps, list) and len(steps) >= 5
    assert waited["max_step_ms"] == max(steps)
    assert sum(steps) <= waited["ms"]  # type: ignore[operator]
    # the spinner is one thread: its main thread's waits are all of the process's
    mains = waited["main_by_step_ms"]
    assert isinstance(mains, list) and len(mains) == len(steps)
    assert all(m <= s + 0.1 for m, s in zip(mains, steps, strict=True))
    assert sum(mains) > 0.8 * sum(steps)
    # each step's own length is kept beside it (a step the bench's loop ran late is longer)
    lengths = waited["step_ms"]
    assert isinstance(lengths, list) and len(lengths) == len(steps)
    assert min(lengths) >= 99.0  # a step is never shorter than its sleep
    # and how long the main thread ran: half of the CPU, so about half of each step, never more
    # than the step itself (a loop near its step's length had no idle moment)
    ran = waited["main_ran_by_step_ms"]
    assert isinstance(ran, list) and len(ran) == len(steps)
    assert sum(ran) > 200
    assert all(r <= n + 1.0 for r, n in zip(ran, lengths, strict=True))
    after = cpu_wait_seconds(pid)
    assert after is not None and after > before

    # both: their waits add up in all, while a step counts the one that waited most in it
    both = asyncio.run(window(two_spinners_on_one_cpu))
    assert both is not None
    assert both["ms"] > 400  # type: ignore[operator]
    steps = both["by_step_ms"]
    assert isinstance(steps, list) and sum(steps) < both["ms"]  # type: ignore[operator]


def test_the_threads_of_a_process_are_summed() -> None:
    # this very process: its main thread and whatever pytest started are all read
    assert cpu_wait_seconds(os.getpid()) is not None


SPIN_ON_A_THREAD = (
    "import threading, time\n"
    "threading.Thread(target=lambda: [None for _ in iter(int, 1)], daemon=True).start()\n"
    "time.sleep(60)\n"
)


def test_a_main_thread_that_sleeps_does_not_wait_for_its_spinning_thread() -> None:
    """The main thread's own wait is told apart from the process's: a process whose other thread
    spins beside a spinner on one CPU waits, its sleeping main thread does not."""
    cpu = min(os.sched_getaffinity(0))

    def one_cpu() -> None:  # before the interpreter starts: every thread it makes inherits it
        os.sched_setaffinity(0, {cpu})

    procs = [
        subprocess.Popen([sys.executable, "-c", SPIN_ON_A_THREAD], preexec_fn=one_cpu),
        subprocess.Popen([sys.executable, "-c", SPIN], preexec_fn=one_cpu),
    ]
    try:
        pid = procs[0].pid

        async def window() -> dict[str, object] | None:
            await asyncio.sleep(0.3)  # the thread started
            meter = CpuWaitMeter([pid], step=0.1)
            meter.start()
            await asyncio.sleep(1.0)
            return meter.stop()

        waited = asyncio.run(window())
    finally:
        for p in procs:
            p.kill()
            p.wait()
    assert waited is not None
    assert waited["ms"] > 200  # type: ignore[operator]
    mains = waited["main_by_step_ms"]
    assert isinstance(mains, list) and mains and max(mains) < 5.0
    # the spinning thread ran about half of each step (it shares its CPU with the spinner); the
    # steps say so, as a loop thread kept off the GIL by such a thread would not show it waiting
    others = waited["others_ran_by_step_ms"]
    assert isinstance(others, list) and len(others) == len(mains)
    assert sum(others) > 200
    # while the main thread only waits for it: it ran next to nothing
    ran = waited["main_ran_by_step_ms"]
    assert isinstance(ran, list) and len(ran) == len(mains) and sum(ran) < 50


def test_a_process_that_is_gone_is_not_measured() -> None:
    pid = _gone_pid()
    assert cpu_wait_seconds(pid) is None

    async def window() -> dict[str, object] | None:
        meter = CpuWaitMeter([os.getpid(), pid])
        meter.start()
        await asyncio.sleep(0.05)
        return meter.stop()

    assert asyncio.run(window()) is None


def _row(waited: dict[str, object] | None) -> dict[str, object]:
    return {
        "rps": 1000.0,
        "p50_ms": 0.5,
        "p99_ms": 9.0,
        "errors": 0,
        "cores": {"load": 0.5, "server": 0.8, "redis": 0.01, "other": 0.0},
        "worker_side": {
            "requests": 5000.0,
            "requests.slow": 12.0,
            "gc": 1.0,
            "loop": 480.0,
            "loop.slow": 2.0,
        },
        "server_cpu_wait": waited,
    }


def test_a_missed_target_says_how_long_the_workers_waited_for_a_cpu() -> None:
    note = _worker_side(_row({"ms": 812.4, "max_step_ms": 33.2, "by_step_ms": [33.2]}))
    assert note == (
        "workers' own clocks: 12 of 5,000 requests, 0 of 1 GC pauses and 2 of 480 loop ticks over 5 ms; "
        "the workers waited 812 ms for a CPU, one of them at most 33 ms of one 100 ms step"
    )
    assert _worker_side(_row(None)) == (
        "workers' own clocks: 12 of 5,000 requests, 0 of 1 GC pauses and 2 of 480 loop ticks over 5 ms"
    )


def test_a_missed_target_counts_the_steps_a_loop_ran_through() -> None:
    """A loop that fell behind with no wait ran on its CPU the whole step: the note says in how
    many steps, against each step's measured length (a step the bench ran late is longer)."""
    waited = {
        "ms": 20.0,
        "max_step_ms": 7.0,
        "by_step_ms": [7.0, 3.0, 2.0, 1.0],
        "main_ran_by_step_ms": [80.0, 99.0, 118.0, 112.0],
        "step_ms": [100.0, 101.0, 120.0, 130.0],
    }
    assert _worker_side(_row(waited)).endswith(
        "one of them at most 7 ms of one 100 ms step; "
        "a worker's event loop ran the whole step in 2 of 4 steps"
    )


def test_the_progress_line_prints_the_wait() -> None:
    line = _line(_row({"ms": 1234.0, "max_step_ms": 41.0, "by_step_ms": [41.0]}))
    assert line.endswith("waited for a CPU 1,234 ms (one at most 41 ms of 100 ms)")
    assert "waited for a CPU" not in _line(_row(None))
