"""Logging configuration as a pure function of the settings."""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

import orjson
from aiohttp.http_exceptions import HttpProcessingError

from namesrv.security.redact import RedactingFormatter


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(entry).decode()


class UnreadableRequests(logging.Filter):
    """aiohttp logs every request its HTTP parser refuses (a 10 MB request line, garbage) as an
    ERROR with a traceback, although it answered 400 and nothing failed: a client sending such
    requests in a loop made each worker log hundreds of lines a second. Here they become one
    WARNING line per ``interval`` seconds, saying how many were folded into it."""

    def __init__(self, interval: float = 10.0) -> None:
        super().__init__()
        self.interval = interval
        self._last = -interval
        self._folded = 0

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if not isinstance(exc, HttpProcessingError):
            return True
        now = time.monotonic()
        if now - self._last < self.interval:
            self._folded += 1
            return False
        folded, self._folded, self._last = self._folded, 0, now
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        record.msg = "refused an HTTP request the parser could not read: %s%s"
        more = f" ({folded} more since the last such line)" if folded else ""
        record.args = (str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__, more)
        record.exc_info = record.exc_text = None
        return True


def configure(level: str, fmt: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        formatter: logging.Formatter = JsonFormatter()
    else:
        formatter = logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s")
    handler.setFormatter(RedactingFormatter(formatter))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    server = logging.getLogger("aiohttp.server")
    if not any(isinstance(f, UnreadableRequests) for f in server.filters):
        server.addFilter(UnreadableRequests())
