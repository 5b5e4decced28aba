"""The overload row's send schedule: counts and intended times across rate steps."""

from __future__ import annotations

import pytest

from bench.schedule import StepSchedule


def test_one_step_is_a_fixed_rate() -> None:
    s = StepSchedule(10.0, [(2.0, 100.0)])
    assert s.due(9.99) == 0
    assert s.due(10.0) == 1
    assert s.due(10.995) == 100
    assert s.intended(0) == 10.0
    assert s.intended(50) == pytest.approx(10.5)
    assert s.due(12.5) == 251  # past the last step its rate goes on


def test_steps_change_the_rate_without_drift() -> None:
    s = StepSchedule(0.0, [(1.0, 10.0), (1.0, 20.0), (2.0, 5.0)])
    assert s.firsts == [0, 10, 30]
    assert s.due(0.999) == 10
    assert s.due(1.0) == 11
    assert s.due(1.999) == 30
    assert s.due(2.0) == 31
    assert s.due(3.999) == 40
    assert [s.intended(k) for k in (0, 9, 10, 29, 30, 39)] == pytest.approx([0.0, 0.9, 1.0, 1.95, 2.0, 3.8])


def test_bad_steps_are_refused() -> None:
    with pytest.raises(ValueError, match="positive"):
        StepSchedule(0.0, [(1.0, 0.0)])
    with pytest.raises(ValueError, match="positive"):
        StepSchedule(0.0, [])
