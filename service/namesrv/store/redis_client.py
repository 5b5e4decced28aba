"""Connecting to Redis, with backoff, and retrying calls that failed on a transient error."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast
from urllib.parse import SplitResult, parse_qs, unquote, urlsplit

import hiredis
from redis.asyncio import ConnectionPool, Redis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.connection import Connection, SSLConnection, UnixDomainSocketConnection
from redis.asyncio.sentinel import MasterNotFoundError, Sentinel, SentinelManagedConnection
from redis.exceptions import (
    AuthenticationError,
    BusyLoadingError,
    ConnectionError,
    ReadOnlyError,
    ResponseError,
    TimeoutError,
)
from tenacity import (
    AsyncRetrying,
    retry_if_exception,
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
# ReadOnlyError: a write reached a master that failover just demoted; the retry finds the new one.
TRANSIENT = (ConnectionError, TimeoutError, BusyLoadingError, ReadOnlyError)


class _HiredisPacking:
    """Pack commands with hiredis' C packer: redis-py's asyncio connections pack in Python, which
    dominated a 10k-topic registration (40k arguments). A multi-word command name (``SCRIPT
    LOAD``), and arguments hiredis does not pack (None, a bool: redis-py refuses them with a
    clear error), go through redis-py's own packer."""

    def pack_command(self, *args: Any) -> list[bytes]:
        first = args[0] if args else None
        if isinstance(first, str) and " " not in first:
            try:
                return [hiredis.pack_command(args)]
            except TypeError:
                pass
        packed: list[bytes] = super().pack_command(*args)  # type: ignore[misc]
        return packed


class _ClosedTransportFails:
    """A write onto a connection that Redis reset a moment ago (a restart, a failover) is a
    connection error. On uvloop the write raises RuntimeError ("unable to perform operation on
    <TCPTransport closed=True>; the handler is closed"), which redis-py passes on as it is: the
    change feed's poll thread took that for a fault of its own and died (CI, issue 27's heal test),
    and anything else treating it as a bug rather than Redis being away would be as wrong."""

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        try:
            await super().send_packed_command(command, check_health)  # type: ignore[misc]
        except RuntimeError as exc:
            raise ConnectionError(f"Error while writing to Redis: the connection closed ({exc})") from exc


class FastConnection(_ClosedTransportFails, _HiredisPacking, Connection):
    pass


class FastSSLConnection(_ClosedTransportFails, _HiredisPacking, SSLConnection):
    pass


class FastUnixConnection(_ClosedTransportFails, _HiredisPacking, UnixDomainSocketConnection):
    pass


class FastSentinelConnection(_ClosedTransportFails, _HiredisPacking, SentinelManagedConnection):
    pass


CONNECTION_CLASSES: dict[str, type[Connection] | type[UnixDomainSocketConnection]] = {
    "redis": FastConnection,
    "rediss": FastSSLConnection,
    "unix": FastUnixConnection,
}

CLIENT_OPTIONS: dict[str, Any] = {
    "decode_responses": True,
    "socket_timeout": 10.0,
    "socket_connect_timeout": 5.0,
}


def make_client(url: str, max_connections: int = 64) -> Redis:
    """A client for ``redis://``/``rediss://``/``unix://`` URLs, Redis Sentinel
    (``redis+sentinel://[user:password@]host:port[,host:port...]/<master-name>[/<db>]``, optional
    ``?sentinel_password=...``) or Redis Cluster (``redis+cluster://[user:password@]host:port[,...]``).
    The registry is one hash slot, so a Cluster serves it from one shard (with its replicas)."""
    parts = urlsplit(url)
    options = {**CLIENT_OPTIONS, "max_connections": max_connections}
    if parts.scheme in ("redis+sentinel", "rediss+sentinel"):
        return _sentinel_client(parts, options, tls=parts.scheme.startswith("rediss"))
    if parts.scheme in ("redis+cluster", "rediss+cluster"):
        return _cluster_client(parts, options, tls=parts.scheme.startswith("rediss"))
    pool = ConnectionPool.from_url(url, health_check_interval=30, **options)
    pool.connection_class = CONNECTION_CLASSES.get(parts.scheme, pool.connection_class)
    return Redis.from_pool(pool)


def _hosts(netloc: str) -> tuple[str | None, str | None, list[tuple[str, int]]]:
    creds, _, hosts = netloc.rpartition("@")
    username, _, password = creds.partition(":")
    nodes = []
    for item in hosts.split(","):
        host, _, port = item.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"redisUrl: {item!r} is not host:port")
        nodes.append((host.strip("[]"), int(port)))
    return unquote(username) or None, unquote(password) or None, nodes


def _sentinel_client(parts: SplitResult, options: dict[str, Any], *, tls: bool) -> Redis:
    username, password, nodes = _hosts(parts.netloc)
    path = [p for p in parts.path.split("/") if p]
    if not path:
        raise ValueError(
            "redisUrl: a Sentinel URL needs the master name: redis+sentinel://host:port/<master>"
        )
    sentinel_password = parse_qs(parts.query).get("sentinel_password", [None])[0]
    sentinel = PromotionAwareSentinel(  # type: ignore[no-untyped-call]
        nodes,
        sentinel_kwargs={"password": sentinel_password, "socket_timeout": 5.0},
        ssl=tls,
        **options,
    )
    db = int(path[1]) if len(path) > 1 else 0
    master = sentinel.master_for(
        path[0],
        redis_class=Redis,
        db=db,
        username=username,
        password=password,
        connection_class=FastSentinelConnection,
    )
    _SENTINELS[id(master)] = sentinel
    return cast(Redis, master)


class PromotionAwareSentinel(Sentinel):
    """Finds the master with ``SENTINEL GET-MASTER-ADDR-BY-NAME``, which names a promoted replica
    as soon as it has taken the promotion. redis-py asks ``SENTINEL MASTERS``, which keeps naming
    the old master until every other replica follows the new one: with two replicas that took
    5 s, in which the old master, still a master, took every write and then threw them away
    (README, "When Redis is in trouble")."""

    async def discover_master(self, service_name: str) -> tuple[str, int]:
        errors: list[str] = []
        for no, sentinel in enumerate(self.sentinels):
            try:
                reply = await sentinel.execute_command(  # type: ignore[no-untyped-call]
                    "SENTINEL", "GET-MASTER-ADDR-BY-NAME", service_name
                )
            except (ConnectionError, TimeoutError) as exc:
                errors.append(f"{sentinel}: {exc!r}")
                continue
            if reply:
                self.sentinels[0], self.sentinels[no] = sentinel, self.sentinels[0]
                host, port = (v.decode() if isinstance(v, bytes) else str(v) for v in reply[:2])
                return host, int(port)
        detail = f": {', '.join(errors)}" if errors else ""
        raise MasterNotFoundError(f"No master found for {service_name!r}{detail}")


def _cluster_client(parts: SplitResult, options: dict[str, Any], *, tls: bool) -> Redis:
    username, password, nodes = _hosts(parts.netloc)
    client = RedisCluster(
        startup_nodes=[ClusterNode(h, p) for h, p in nodes],
        username=username,
        password=password,
        ssl=tls,
        **options,
    )
    # Not a Redis subclass, but it answers every command the registry uses (one hash slot).
    return cast(Redis, client)


def is_cluster(client: object) -> bool:
    return isinstance(client, RedisCluster)


# Closing a Sentinel-managed client does not close its connections to the Sentinels themselves.
_SENTINELS: dict[int, Sentinel] = {}


async def follow_sentinel_master(
    client: Redis, interval: float, on_replicas: Callable[[int], None] | None = None
) -> None:
    """For a Sentinel client, until cancelled: ask the Sentinels for the master every ``interval``
    s and, when it moved, move every connection to the new one. Sentinel promotes a replica
    before it demotes the old master; in between, connections still open to the old master read a
    table that no one writes to any more (and write to one that will be thrown away). redis-py
    alone notices only when the old master refuses a write.

    The move is judged against the master this loop saw last, not the pool's: redis-py updates
    that itself whenever it opens a connection (dropping only idle ones), and connections that were
    busy at that moment would go back to the pool still open to the old master, for good.

    ``on_replicas`` is told, at start and after every round, how many replicas of the master the
    Sentinels do not consider down (redisWriteReplicas = -1)."""
    sentinel = _SENTINELS.get(id(client))
    if sentinel is None:
        return
    pool: Any = client.connection_pool
    seen = pool.master_address
    failing = False
    while True:
        try:
            if on_replicas is not None:
                on_replicas(len(await sentinel.discover_slaves(pool.service_name)))
            master = await pool.get_master_address()
            if seen is not None and master != seen:
                log.warning("Redis Sentinel: master moved from %s to %s; reconnecting", seen, master)
                # Busy ones close when they come back to the pool, then the idle ones (any that
                # came back before they were marked among them).
                await pool.update_active_connections_for_reconnect()
                await pool.disconnect(inuse_connections=False)
            seen = master
            failing = False
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the Sentinels unreachable: the change feed reports Redis itself
            if not failing:
                log.warning("Redis Sentinel: cannot ask for the master (%s: %s)", type(exc).__name__, exc)
            failing = True
        await asyncio.sleep(interval)


async def close_client(client: Redis) -> None:
    await client.aclose()
    sentinel = _SENTINELS.pop(id(client), None)
    if sentinel is not None:
        for node in sentinel.sentinels:
            await node.aclose()


class FatalRedisError(Exception):
    """Redis answered, but this worker can never use it (wrong credentials, too old): retrying
    would not help, so the worker stops with this message."""


def is_fatal(exc: BaseException) -> bool:
    if isinstance(exc, AuthenticationError | FatalRedisError):
        return True
    text = str(exc)
    return isinstance(exc, ResponseError) and text.startswith(("NOAUTH", "WRONGPASS", "NOPERM"))


async def check_server(client: Redis) -> tuple[int, ...]:
    """PING, then refuse a Redis older than 6.2 (:class:`FatalRedisError`); returns its version."""
    await client.ping()
    info = await client.info("server")
    if "redis_version" not in info:  # a Cluster answers per node
        info = next(iter(info.values()))
    version = tuple(int(p) for p in str(info["redis_version"]).split(".")[:2])
    if version < MIN_REDIS:
        raise FatalRedisError(f"Redis {info['redis_version']} is too old; namesrv-fleet needs >= 6.2")
    return version


def describe(url: str) -> str:
    """The URL without credentials, for logs."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return f"{parts.scheme}://{host}{parts.path}"


async def connect(url: str, *, max_connections: int = 64, max_wait: float = 60.0) -> Redis:
    """Return a client once Redis answers PING, retrying with jittered backoff for ``max_wait`` s
    (for tools; a worker starts without waiting and brings its Redis link up in the background)."""
    client = make_client(url, max_connections)
    try:
        async for attempt in AsyncRetrying(
            retry=retry_if_exception(lambda e: isinstance(e, TRANSIENT) and not is_fatal(e)),
            stop=stop_after_delay(max_wait),
            wait=wait_exponential_jitter(multiplier=0.1, max=5.0),
            reraise=True,
        ):
            with attempt:
                await check_server(client)
    except Exception:
        await client.aclose()
        raise
    return client


async def with_retry(call: Callable[[], Awaitable[T]], attempts: int = 3) -> T:
    """Run ``call``; retry briefly on connection errors; then raise :class:`StoreUnavailable`.

    Every script is safe to repeat: a registration repeated gets a new epoch with the same data,
    removals are fenced or idempotent, and a duplicated change-log entry is tolerated downstream.
    The first attempt runs without tenacity: it is on every request's path.
    """
    raise_if_cancelling()
    try:
        result = await call()
    except TRANSIENT:
        if attempts <= 1:
            raise_if_cancelling()
            raise
    else:
        raise_if_cancelling()  # redis-py may have swallowed our cancellation
        return result
    try:
        async for attempt in AsyncRetrying(
            retry=retry_if_exception_type(TRANSIENT),
            stop=stop_after_attempt(attempts - 1),
            wait=wait_exponential_jitter(multiplier=0.05, max=0.5),
            reraise=True,
        ):
            with attempt:
                raise_if_cancelling()
                result = await call()
                raise_if_cancelling()
                return result
    except TRANSIENT as exc:
        raise_if_cancelling()
        raise StoreUnavailable(f"Redis unavailable: {exc}") from exc
    raise AssertionError("unreachable")  # pragma: no cover
