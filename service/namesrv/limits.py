"""Bounds on what a client can make a worker (or Redis) hold: the pieces shared by transports.

The limits themselves are options (``kvValueMaxBytes``, ``frameDeadlineSeconds``,
``partialFramesMaxBytes``, ``maxConnections``, ``eventsMaxBytes``); each refusal is counted in
``namesrv_limit_refusals_total{limit}`` with the option's name as the label.
"""

from __future__ import annotations

import logging
import resource
import time

log = logging.getLogger(__name__)

# A remark echoes what the client sent (a topic, a key): cut it so that a 10 MB name costs a
# reply of a few hundred bytes, not a second copy of the 10 MB.
MAX_REMARK_CHARS = 512


def bounded_remark(text: str | None) -> str | None:
    if text is None or len(text) <= MAX_REMARK_CHARS:
        return text
    return f"{text[:MAX_REMARK_CHARS]}... ({len(text) - MAX_REMARK_CHARS} more characters cut)"


def utf8_length(text: str) -> int:
    """Bytes of ``text`` in UTF-8, without building the encoded copy for ASCII text."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


class RateLimitedLog:
    """One warning per ``interval`` seconds at most, saying how many were folded into it: a flood
    of refused connections must not become a flood of log lines."""

    def __init__(self, logger: logging.Logger, interval: float = 10.0) -> None:
        self.logger = logger
        self.interval = interval
        self._last = -interval
        self._suppressed = 0

    def warning(self, message: str, *args: object) -> bool:
        now = time.monotonic()
        if now - self._last < self.interval:
            self._suppressed += 1
            return False
        folded, self._suppressed, self._last = self._suppressed, 0, now
        if folded:
            message += " (%d more since the last such line)"
            args = (*args, folded)
        self.logger.warning(message, *args)
        return True


def raise_fd_limit(wanted: int) -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit; return the soft limit now in force.

    ``maxConnections`` must refuse connections before the process runs out of descriptors (after
    which neither port, nor /livez, can accept anything), so a limit below it plus headroom for
    Redis connections, files and the HTTP port is worth a warning."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as exc:
            log.warning("cannot raise the open-file limit from %d to %d: %s", soft, target, exc)
    if soft < wanted:
        log.warning(
            "open-file limit %d is below maxConnections + headroom (%d): maxConnections is lowered "
            "to fit; raise the hard limit (ulimit -Hn) to serve more",
            soft,
            wanted,
        )
    return soft
