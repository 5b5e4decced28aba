"""The pipeline reads the change log with the kinds the scripts append (:class:`EventKind`): no
kind it would reject as ``unknown_kind`` is one the Lua scripts emit, and none it knows is
invented. Needs no Spark: :mod:`namesrv.pipeline.kinds` is the parser's table."""

from __future__ import annotations

from namesrv.pipeline.kinds import (
    KNOWN_KINDS,
    MEMBER_KINDS,
    NUMERIC_REQUIRED,
    OTHER_KINDS,
    QUEUE_KINDS,
    REGISTER_OK,
    REMOVAL_KINDS,
    REQUIRED,
)
from namesrv.store.changelog import REMOVAL_REASONS, EventKind


def test_parse_knows_exactly_the_event_kinds() -> None:
    assert sorted(KNOWN_KINDS) == sorted(EventKind)
    assert len(KNOWN_KINDS) == len(set(KNOWN_KINDS))  # each kind in one family only
    assert set(MEMBER_KINDS) | set(QUEUE_KINDS) | set(OTHER_KINDS) == set(EventKind)


def test_every_kind_has_its_required_fields_and_nothing_else_does() -> None:
    assert set(REQUIRED) == set(EventKind) | {REGISTER_OK}
    assert set(NUMERIC_REQUIRED) <= set(REQUIRED)


def test_removals_are_the_unregister_reasons_and_the_sweep() -> None:
    assert set(REMOVAL_KINDS) == {*REMOVAL_REASONS, EventKind.EXPIRE}
