from __future__ import annotations

import asyncio
import dataclasses
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings
from redis.asyncio import Redis

from namesrv.app import create_app
from namesrv.config import Settings
from namesrv.keys import HEALTH, SERVICE, STORE, WORKER
from namesrv.registry.service import RegistryService
from namesrv.store.keyspace import Keyspace
from namesrv.store.registry_store import RegistryStore
from namesrv.store.scripts import ScriptRegistry
from tests.polling import LOAD_FACTOR, scaled
from tests.redis_server import redis_for_tests

# Property tests check behaviour, not speed: on a busy machine an example may take long, which
# must not fail the test (benchmarks measure time).
hypothesis_settings.register_profile(
    "namesrv", deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
hypothesis_settings.load_profile("namesrv")

TESTS = Path(__file__).resolve().parent
# The tiers, one per folder of tests/ (registered in pyproject.toml). `make test-fast` selects
# FAST_TIERS: nothing there starts a server beyond Redis, a JVM, an image or a browser.
TIERS = ("unit", "registry", "integration", "faults", "pipeline", "helm", "image", "interop", "bench")
# Fixtures shared by many tests that cost seconds to start (a JVM, subprocess fleets, a Redis
# topology): with ``--dist loadgroup`` every test using one runs on the same xdist worker, so
# it starts once per run, not once per worker.
SHARED_SCOPES = ("module", "package", "session")
PER_WORKER_FIXTURES = {"redis_url"}  # one per xdist worker on purpose: that is the isolation


def tier_of(path: Path) -> str | None:
    try:
        folder = path.resolve().relative_to(TESTS).parts[0]
    except (ValueError, IndexError):
        return None
    return folder if folder in TIERS else None


def shared_scopes(item: pytest.Item) -> dict[str, str]:
    """Our (not the plugins') module-, package- and session-scoped fixtures a test uses: name -> scope."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return {}
    found: dict[str, str] = {}
    for name in info.names_closure:
        if name in PER_WORKER_FIXTURES:
            continue
        for fixturedef in info.name2fixturedefs.get(name, ()):
            ours = getattr(fixturedef.func, "__module__", "").startswith("tests.")
            if ours and fixturedef.scope in SHARED_SCOPES:
                found[name] = fixturedef.scope
    return found


def shared_fixture_group(item: pytest.Item) -> str | None:
    """The xdist group of a test that uses a costly shared fixture: the fixture's name for a
    session one (the Spark session), else the test's module. Every test marked ``spark`` joins
    the Spark session's group, fixture or not: a pipeline job started by a test gets (or creates)
    the process's session, and one JVM per xdist worker (four on two cores) starved them all."""
    if item.get_closest_marker("spark") is not None:
        return "spark"
    scopes = shared_scopes(item)
    sessions = sorted(name for name, scope in scopes.items() if scope == "session")
    if sessions:
        return sessions[0]
    return item.nodeid.split("::", 1)[0] if scopes else None


def scaled_timeout(config: pytest.Config, item: pytest.Item) -> float | None:
    """The test's hang guard (pytest-timeout: its marker, else the ini value) times the load
    factor. A guard firing on a busy machine is worse than a late failure: it interrupts the test
    wherever it is, e.g. inside a Py4J call, whose unread answer the next call then reads (the
    Spark tier's 'does not exist in the JVM' and KeyError: 'c' cascades)."""
    marker = item.get_closest_marker("timeout")
    if marker is not None and marker.args:
        base = float(marker.args[0])
    else:
        try:
            base = float(config.getini("timeout") or 0)
        except (TypeError, ValueError):  # no pytest-timeout, or no number
            return None
    return base * LOAD_FACTOR if base > 0 and LOAD_FACTOR > 1 else None


def pytest_itemcollected(item: pytest.Item) -> None:
    """Tier, xdist group and scaled hang guard, set as each test is collected. (With pytest 9,
    xdist 3.8's --dist loadgroup does not group: it renames ``item._nodeid``, which pytest 9 no
    longer reads; the Makefile therefore runs the Spark tier in a pytest of its own and the rest
    with --dist loadfile, which keeps a module's tests, and its module fixtures, on one worker.)"""
    timeout = scaled_timeout(item.config, item)
    if timeout is not None:
        item.add_marker(pytest.mark.timeout(timeout), append=False)
    tier = tier_of(item.path)
    if tier is not None:
        item.add_marker(getattr(pytest.mark, tier))
    group = shared_fixture_group(item)
    if group is not None and not any(item.iter_markers("xdist_group")):
        item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    with redis_for_tests() as url:
        yield url


@pytest.fixture
def namespace() -> str:
    """Every test gets its own key namespace, so tests never see each other's data."""
    return f"t-{uuid.uuid4().hex[:10]}"


# Most tests check answers, not Redis deadlines: on a loaded machine one Redis call (or the wait
# for a pooled connection) can outlast the production default of 1 s and turn a right answer into
# "Redis unavailable". Tests about Redis trouble set the deadline they examine (REDIS_DEADLINE_MS).
PATIENT_REDIS_MS = int(scaled(10_000))
REDIS_DEADLINE_MS = 1000  # the shipped default, for tests that stall or stop Redis on purpose


@pytest.fixture
def settings(redis_url: str, namespace: str) -> Settings:
    return Settings(
        redisUrl=redis_url,
        namespace=namespace,
        httpPort=0,
        remotingPort=0,
        scanNotActiveBrokerInterval=200,
        listenHost="127.0.0.1",
        redisTimeoutMillis=PATIENT_REDIS_MS,
    )


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[Redis]:
    client = Redis.from_url(redis_url, decode_responses=True)
    yield client
    await client.aclose()


@pytest.fixture
async def store(redis: Redis, namespace: str) -> RegistryStore:
    scripts = ScriptRegistry(redis)
    await scripts.preload()
    return RegistryStore(redis, Keyspace(namespace), scripts, events_max_len=10000, worker_id="test")


@pytest.fixture
def service(store: RegistryStore, settings: Settings) -> RegistryService:
    return RegistryService(store, lambda: settings)


@pytest.fixture
async def pair(settings: Settings) -> AsyncIterator[tuple[TestClient[Any, Any], TestClient[Any, Any]]]:
    """Two workers on one Redis and one namespace: what one writes, the other must serve."""
    a = await start_client(settings)
    b = await start_client(dataclasses.replace(settings))
    yield a, b
    await close_client(a)
    await close_client(b)


async def start_client(settings: Settings, *, wait_ready: bool = True, **kwargs: Any) -> TestClient[Any, Any]:
    """A worker on test ports; by default once its Redis link is up (a worker starts serving
    before Redis answers, and fails fast what needs Redis until then)."""
    client: TestClient[Any, Any] = TestClient(TestServer(create_app(settings, **kwargs)))
    await client.start_server()
    if wait_ready:
        await wait_until_ready(client.app)
    return client


async def wait_until_ready(app: Any, timeout: float = 15.0) -> None:
    worker, health = app[WORKER], app[HEALTH]
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not worker.ready(health.reachable):
        if loop.time() > deadline:
            raise TimeoutError(f"worker not ready after {timeout} s: {health.reason} {worker.fatal}")
        await asyncio.sleep(0.01)


@pytest.fixture
async def client(settings: Settings) -> AsyncIterator[TestClient[Any, Any]]:
    c = await start_client(settings)
    yield c
    await close_client(c)


async def close_client(c: Any) -> None:
    """Close a test app; if shutdown stalls, fail with every pending task's stack (not a bare timeout)."""
    try:
        await asyncio.wait_for(asyncio.shield(c.close()), 20)
    except TimeoutError:
        for task in asyncio.all_tasks():
            print("pending task:", task, file=sys.stderr)
            task.print_stack(limit=15, file=sys.stderr)
        raise


@pytest.fixture
def app_service(client: TestClient[Any, Any]) -> RegistryService:
    return client.app[SERVICE]  # type: ignore[index]


@pytest.fixture
def app_store(client: TestClient[Any, Any]) -> RegistryStore:
    return client.app[STORE]  # type: ignore[index]


def pytest_asyncio_loop_factories(config: pytest.Config, item: pytest.Item) -> dict[str, Any]:
    """Run async tests on uvloop, the loop production workers use (its transports differ)."""
    import uvloop

    return {"uvloop": uvloop.new_event_loop}
