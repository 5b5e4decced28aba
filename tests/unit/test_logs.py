"""Requests aiohttp's parser refuses are one rate-limited warning, not an ERROR traceback each."""

from __future__ import annotations

import logging

from aiohttp.http_exceptions import LineTooLong

from namesrv.logs import UnreadableRequests


def record(exc: BaseException | None) -> logging.LogRecord:
    info = (type(exc), exc, None) if exc is not None else None
    return logging.LogRecord("aiohttp.server", logging.ERROR, "x", 1, "Error handling request", (), info)


def test_unreadable_requests_fold_into_one_warning_per_interval() -> None:
    folding = UnreadableRequests(interval=3600)
    first = record(LineTooLong("a" * 10, "1048576"))
    assert folding.filter(first) is True
    assert (first.levelname, first.exc_info) == ("WARNING", None)
    assert first.getMessage().startswith("refused an HTTP request the parser could not read: ")
    assert [folding.filter(record(LineTooLong("b", "1"))) for _ in range(100)] == [False] * 100
    folding.interval = 0
    last = record(LineTooLong("c", "1"))
    assert folding.filter(last) is True and last.getMessage().endswith("(100 more since the last such line)")


def test_other_errors_pass_as_they_are() -> None:
    other = record(RuntimeError("boom"))
    assert UnreadableRequests().filter(other) is True
    assert (other.levelname, other.exc_info is not None) == ("ERROR", True)
