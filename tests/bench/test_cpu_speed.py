"""The yardstick both benches print: a timed loop, and the words that report it."""

from __future__ import annotations

import pytest

from bench.cpu_speed import describe, loop_seconds


def test_the_loop_is_timed_in_seconds_rounded_to_a_millisecond() -> None:
    seconds = loop_seconds(iterations=200_000, rounds=2)
    assert seconds > 0
    assert seconds == round(seconds, 3)


@pytest.mark.parametrize(("iterations", "rounds"), [(0, 1), (1, 0), (-5, 3)])
def test_a_loop_of_nothing_is_refused(iterations: int, rounds: int) -> None:
    with pytest.raises(ValueError, match="must be positive"):
        loop_seconds(iterations=iterations, rounds=rounds)


def test_the_words_name_the_loop_and_both_timings() -> None:
    assert describe(0.0624, 0.0711) == "3M-iteration Python loop 0.062 s at start, 0.071 s at end"
    assert describe(0.1, None) == "3M-iteration Python loop 0.100 s at start"
    assert describe(None, None) == "Python loop speed not measured"
