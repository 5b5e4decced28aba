"""The probe of how fast each core ran through a window: what tells a worker that fell behind
with no wait for a CPU (its core ran slower) from one that did more work per request."""

from __future__ import annotations

import asyncio
import os

from bench.core_speed import SLOW_RATIO, CoreSpeedProbe, by_step, describe


def test_steps_take_each_cores_median_and_count_the_slow_ones() -> None:
    # core 0 fast throughout; core 1 at twice the time in steps 1 and 2; step 3 has no sample
    samples = [
        (10.01, 0, 500.0),
        (10.02, 1, 510.0),
        (10.06, 0, 520.0),
        (10.07, 1, 490.0),
        (10.11, 0, 505.0),
        (10.12, 1, 1000.0),
        (10.16, 1, 990.0),
        (10.21, 0, 495.0),
        (10.22, 1, 1010.0),
    ]
    got = by_step(samples, start=10.0, step=0.1, steps=4)
    assert got == {
        "cpus": [0, 1],
        "fast_us": 490.0,  # the 10th percentile of every timing
        "median_us": 510.0,
        "us_by_step": [[510.0, 500.0], [505.0, 995.0], [495.0, 1010.0], [None, None]],
        "slow_steps": {"0": 0, "1": 2},
        "steps": 4,
    }
    assert describe(got) == (
        f"the cores ran at the slow speed (the probe's work ≥ {SLOW_RATIO}x the fastest, 490 µs; "
        "median 510) in 0 / 2 of 4 steps"
    )


def test_a_window_on_slow_cores_throughout_is_judged_by_the_runs_fastest() -> None:
    """Its own fast time would be the slow one: every step would look fast."""
    samples = [(10.01 + i / 20, i % 2, 950.0 + i) for i in range(8)]
    alone = by_step(samples, start=10.0, step=0.1, steps=4)
    assert alone is not None and alone["slow_steps"] == {"0": 0, "1": 0}
    judged = by_step(samples, start=10.0, step=0.1, steps=4, reference=480.0)
    assert judged is not None
    assert (judged["fast_us"], judged["median_us"]) == (480.0, 954.0)
    assert judged["slow_steps"] == {"0": 4, "1": 4}


def test_samples_outside_the_window_are_left_out() -> None:
    got = by_step([(9.9, 0, 100.0), (10.05, 0, 100.0), (10.5, 0, 900.0)], start=10.0, step=0.1, steps=2)
    assert got is not None
    assert got["us_by_step"] == [[100.0], [None]]
    assert got["slow_steps"] == {"0": 0}


def test_no_samples_no_figures() -> None:
    assert by_step([], start=0.0, step=0.1, steps=5) is None
    assert describe(None) == ""


def test_the_probe_times_every_core_of_a_real_window() -> None:
    async def window() -> dict[str, object] | None:
        probe = CoreSpeedProbe(step=0.1, interval=0.02)
        await probe.start()
        await asyncio.sleep(1.0)
        return await probe.stop()

    got = asyncio.run(window())
    assert got is not None
    cpus = sorted(os.sched_getaffinity(0))
    assert got["cpus"] == cpus
    rows = got["us_by_step"]
    assert isinstance(rows, list) and len(rows) == got["steps"] and len(rows) >= 9
    # the child takes a moment to start; after that every step has each core's timing
    timed = [r for r in rows if None not in r]
    assert len(timed) >= len(rows) // 2
    assert all(len(r) == len(cpus) and all(us > 0 for us in r) for r in timed)
    fast = got["fast_us"]
    assert isinstance(fast, float) and fast > 0


def test_a_probe_launched_in_the_warm_up_times_a_short_window_from_its_first_step() -> None:
    async def window() -> dict[str, object] | None:
        probe = CoreSpeedProbe(step=0.1, interval=0.02)
        await probe.launch()
        proc = probe._proc
        assert proc is not None and proc.stdout is not None
        # the child is up once it has timed something: a warm-up timing, not the window's
        await asyncio.wait_for(proc.stdout.readline(), 30)
        await probe.start()
        await asyncio.sleep(0.3)
        return await probe.stop()

    got = asyncio.run(window())
    assert got is not None
    rows = got["us_by_step"]
    assert isinstance(rows, list) and len(rows) == got["steps"] == 3
    assert rows[0] is not None and None not in rows[0]
