"""What a remoting client can make a worker hold: connections, and bytes of unfinished frames.

- ``maxConnections``: lowered here to fit the open-file limit, so connections are refused (by
  :mod:`namesrv.remoting.slots`, with a rate-limited warning) well before the process runs out of
  file descriptors (so the HTTP port, and ``/livez``, keep accepting).
- ``frameDeadlineSeconds``: once the first bytes of a frame arrived, the rest must follow within
  this time, or the connection is closed (a client trickling a 16 MiB frame holds memory).
- ``partialFramesMaxBytes``: bytes held in unfinished frames across all connections of the
  worker; the connection whose bytes would pass it is closed. One frame can be as large as
  ``frameMaxLength``, so the budget must be larger than that (it is checked at start).

The codec stays sans-I/O: it only reports how many bytes it holds (``FrameDecoder.buffered``).
"""

from __future__ import annotations

import logging
import resource
import time
from dataclasses import dataclass

from namesrv.config import ConfigError, Settings
from namesrv.limits import RateLimitedLog
from namesrv.metrics import Metrics

log = logging.getLogger(__name__)


@dataclass(slots=True)
class PartialFrame:
    """One connection's unfinished frame: bytes held and when its first bytes arrived."""

    held: int = 0
    since: float = 0.0


# Descriptors a worker needs besides remoting connections: Redis connections, the HTTP port and
# its clients (probes, scrapes), files, the embedded Redis' pipes.
FD_HEADROOM = 256


def effective_max_connections(settings: Settings) -> int:
    """``maxConnections``, lowered to fit the open-file limit: connections must be refused (and
    logged) before accept itself starts failing, which nothing would report and which would take
    the HTTP port down with it."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return settings.maxConnections
    fits = max(1, soft - settings.redisMaxConnections - FD_HEADROOM)
    if fits < settings.maxConnections:
        log.warning(
            "maxConnections %d does not fit the open-file limit %d: refusing remoting connections "
            "beyond %d instead (raise the limit with ulimit -n / the container runtime)",
            settings.maxConnections,
            soft,
            fits,
        )
        return fits
    return settings.maxConnections


class FrameGuard:
    def __init__(self, settings: Settings, metrics: Metrics) -> None:
        if settings.partialFramesMaxBytes < settings.frameMaxLength:
            raise ConfigError(
                f"partialFramesMaxBytes ({settings.partialFramesMaxBytes}) must be at least "
                f"frameMaxLength ({settings.frameMaxLength}): one frame could never arrive"
            )
        self.deadline = settings.frameDeadlineSeconds
        self.budget = settings.partialFramesMaxBytes
        self.metrics = metrics
        self.partial_bytes = 0
        self._budget_log = RateLimitedLog(log)

    def hold(self, frame: PartialFrame, buffered: int, completed: bool = False) -> bool:
        """Record that a connection now holds ``buffered`` bytes of an unfinished frame
        (``completed``: frames were finished since the last call, so the one now held is new);
        False when that passes the worker's budget (the caller closes the connection)."""
        if buffered and (completed or not frame.held):
            frame.since = time.monotonic()
        if buffered == frame.held:
            return True
        self.partial_bytes += buffered - frame.held
        frame.held = buffered
        self.metrics.partial_frame_bytes.set(self.partial_bytes)
        if self.partial_bytes > self.budget and buffered:
            self.metrics.limit_refusals.labels("partialFramesMaxBytes").inc()
            self._budget_log.warning(
                "closing a remoting connection holding %d bytes of an unfinished frame: the "
                "worker holds %d (partialFramesMaxBytes %d)",
                buffered,
                self.partial_bytes,
                self.budget,
            )
            return False
        return True

    def release(self, frame: PartialFrame) -> None:
        self.hold(frame, 0)

    def overdue(self, frame: PartialFrame, now: float) -> bool:
        """Has this connection held an unfinished frame for longer than the deadline?"""
        if frame.held and now - frame.since > self.deadline:
            self.metrics.limit_refusals.labels("frameDeadlineSeconds").inc()
            return True
        return False
