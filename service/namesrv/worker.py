"""The state one worker process keeps: identity, effective settings, readiness. No route data."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from namesrv.config import ConfigError, Settings, with_overrides

log = logging.getLogger(__name__)


def new_worker_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


@dataclass
class WorkerState:
    base: Settings
    worker_id: str = field(default_factory=new_worker_id)
    started_at: float = field(default_factory=time.monotonic)
    settings: Settings = field(init=False)
    redis_url: str = ""
    scripts_loaded: bool = False
    linked: asyncio.Event = field(default_factory=asyncio.Event)  # set once the Redis link came up
    draining: bool = False
    fatal: str | None = None  # why the worker must stop (Redis refused it for good)
    on_fatal: Callable[[], None] = lambda: None  # set by the runner: stop the process

    def __post_init__(self) -> None:
        self.settings = self.base

    def apply_overrides(self, overrides: Mapping[str, str]) -> None:
        """Fleet-wide UPDATE_NAMESRV_CONFIG values, on top of this worker's own settings."""
        try:
            updated = with_overrides(self.base, overrides, "fleet config in Redis")
        except ConfigError as exc:
            log.error("ignoring fleet config override: %s", exc)
            return
        if updated != self.settings:
            log.info("effective settings changed by fleet config: %s", dict(overrides))
        self.settings = updated

    def fail(self, reason: str) -> None:
        """An error waiting cannot fix: stop the worker; the runner reports ``reason`` in one line
        and exits non-zero."""
        if self.fatal is None:
            self.fatal = reason
            self.on_fatal()

    def current(self) -> Settings:
        return self.settings

    def ready(self, redis_reachable: bool) -> bool:
        return self.scripts_loaded and redis_reachable and not self.draining and self.fatal is None

    def uptime(self) -> float:
        return time.monotonic() - self.started_at

    def waiting_for_service(self) -> bool:
        """needWaitForService: refuse route lookups for waitSecondsForService after start."""
        s = self.settings
        return s.needWaitForService and self.uptime() < s.waitSecondsForService
