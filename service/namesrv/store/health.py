"""Whether this worker can reach Redis: one answer shared by readiness, the store and the metrics.

The change feed polls Redis several times a second, so it is the worker's Redis heartbeat: it marks
Redis down when a poll fails or times out and up when one succeeds. Everything else reads this
state instead of probing on its own, so the worker changes its mind once per state change (one
log line, one readiness flip), not once per request.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

log = logging.getLogger(__name__)


@dataclass
class RedisHealth:
    reachable: bool = False
    reason: str = "not connected yet"
    since: float = field(default_factory=time.monotonic)  # when the current state began
    outages: int = 0  # completed down -> up transitions
    # The latest moment (monotonic) a call was sent that then got its reply: a Redis that answered
    # a call sent after the feed's outstanding poll is slow to this worker, not stalled. When the
    # reply arrived proves nothing: a call sent before the poll can be answered after it was sent,
    # and Redis then stop right behind it.
    answered_sent_at: float = 0.0
    # Set while Redis is reachable (up) or not (down), for whoever waits for a change of state.
    up: asyncio.Event = field(default_factory=asyncio.Event)
    down: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        (self.up if self.reachable else self.down).set()

    def note_answer(self, sent_at: float) -> None:
        if sent_at > self.answered_sent_at:
            self.answered_sent_at = sent_at

    def mark_down(self, reason: str) -> bool:
        """Redis did not answer; True when this is news (it was reachable until now)."""
        if not self.reachable:
            self.reason = reason
            return False
        self.reachable, self.reason, self.since = False, reason, time.monotonic()
        self.up.clear()
        self.down.set()
        return True

    def mark_up(self) -> float | None:
        """Redis answered; the length of the outage that just ended (None if it was not down)."""
        if self.reachable:
            return None
        now = time.monotonic()
        lasted = now - self.since
        first = self.reason == "not connected yet"
        self.reachable, self.reason, self.since = True, "", now
        self.down.clear()
        self.up.set()
        if first:
            return None
        self.outages += 1
        return lasted

    def down_for(self) -> float:
        return 0.0 if self.reachable else time.monotonic() - self.since
