"""The yardstick both benches print: two probes of the machine, and the words that report them."""

from __future__ import annotations

import pytest

from bench.cpu_speed import describe, for_run, loop_seconds, round_trip_us


def test_the_loop_is_timed_in_seconds_rounded_to_a_millisecond() -> None:
    seconds = loop_seconds(iterations=200_000, rounds=3)
    assert seconds > 0
    assert seconds == round(seconds, 3)


def test_a_round_trip_to_a_child_process_is_timed_in_microseconds() -> None:
    micros = round_trip_us(trips=200)
    assert micros > 0
    assert micros == round(micros, 1)


@pytest.mark.parametrize(("iterations", "rounds"), [(0, 1), (1, 0), (-5, 3)])
def test_a_loop_of_nothing_is_refused(iterations: int, rounds: int) -> None:
    with pytest.raises(ValueError, match="must be positive"):
        loop_seconds(iterations=iterations, rounds=rounds)


def test_no_round_trips_are_refused() -> None:
    with pytest.raises(ValueError, match="must be positive"):
        round_trip_us(trips=0)


def test_a_bench_gets_both_probes_from_a_child_process() -> None:
    speed = for_run(smoke=True)
    assert set(speed) == {"loop_s", "round_trip_us"}
    assert speed["loop_s"] > 0 and speed["round_trip_us"] > 0


def test_the_words_name_both_probes_at_start_and_end() -> None:
    start = {"loop_s": 0.0624, "round_trip_us": 14.07}
    end = {"loop_s": 0.0711, "round_trip_us": 15.0}
    head = "speed (3M-iteration Python loop, socket round trip): "
    assert describe(start, end) == head + "0.062 s, 14.1 µs at start; 0.071 s, 15.0 µs at end"
    assert describe(start, None) == head + "0.062 s, 14.1 µs at start"
    failed = {"error": "OSError: no fork"}
    assert describe(failed, end) == head + "not measured at start; 0.071 s, 15.0 µs at end"
    assert describe(None, None) == "speed not measured"
