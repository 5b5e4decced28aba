"""Connecting to Redis, with backoff, and retrying calls that failed on a transient error."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from redis.asyncio import Redis
from redis.exceptions import BusyLoadingError, ConnectionError, TimeoutError
from tenacity import (
    AsyncRetrying,
    before_sleep_log,
    retry_if_exception_type,
    stop_after_attempt,
    stop_after_delay,
    wait_exponential_jitter,
)

from namesrv.aio import raise_if_cancelling
from namesrv.domain.errors import StoreUnavailable

log = logging.getLogger(__name__)
T = TypeVar("T")
MIN_REDIS = (6, 2)
TRANSIENT = (ConnectionError, TimeoutError, BusyLoadingError)


def make_client(url: str) -> Redis:
    return Redis.from_url(
        url, decode_responses=True, socket_timeout=10.0, socket_connect_timeout=5.0, health_check_interval=30
    )


async def connect(url: str, *, max_wait: float = 60.0) -> Redis:
    """Return a client once Redis answers PING, retrying with jittered backoff for ``max_wait`` s."""
    client = make_client(url)
    try:
        async for attempt in AsyncRetrying(
            retry=retry_if_exception_type(TRANSIENT),
            stop=stop_after_delay(max_wait),
            wait=wait_exponential_jitter(multiplier=0.1, max=5.0),
            reraise=True,
            before_sleep=before_sleep_log(log, logging.WARNING),
        ):
            with attempt:
                await client.ping()
        info = await client.info("server")
    except Exception:
        await client.aclose()
        raise
    version = tuple(int(p) for p in str(info["redis_version"]).split(".")[:2])
    if version < MIN_REDIS:
        await client.aclose()
        raise RuntimeError(f"Redis {info['redis_version']} is too old; namesrv-fleet needs >= 6.2")
    return client


async def with_retry(call: Callable[[], Awaitable[T]], attempts: int = 3) -> T:
    """Run ``call``; retry briefly on connection errors; then raise :class:`StoreUnavailable`.

    Every script is safe to repeat: a registration repeated gets a new epoch with the same data,
    removals are fenced or idempotent, and a duplicated change-log entry is tolerated downstream.
    """
    try:
        async for attempt in AsyncRetrying(
            retry=retry_if_exception_type(TRANSIENT),
            stop=stop_after_attempt(attempts),
            wait=wait_exponential_jitter(multiplier=0.05, max=0.5),
            reraise=True,
        ):
            with attempt:
                raise_if_cancelling()
                result = await call()
                raise_if_cancelling()  # redis-py may have swallowed our cancellation
                return result
    except TRANSIENT as exc:
        raise_if_cancelling()
        raise StoreUnavailable(f"Redis unavailable: {exc}") from exc
    raise AssertionError("unreachable")  # pragma: no cover
