"""Fixtures of the integration tests that several modules share."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.redis_process import RedisProcess


@pytest.fixture
async def redis_process() -> AsyncIterator[RedisProcess]:
    """A redis-server of the test's own, stopped and removed after it."""
    server = RedisProcess()
    await server.start()
    yield server
    await server.stop()
    server.dir.cleanup()
