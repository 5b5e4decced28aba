"""Real processes for the fault suite: redis-server (plain, AOF, Sentinel set), fleet workers,
simulated brokers that re-register every period, a lookup load driver and a source of truth.

Everything is its own OS process on loopback except the brokers, the load driver and the truth
sampler, which share the test's event loop (they only wait on sockets).

Truth: a third worker with ``routeCacheEnabled=false`` reads every route from Redis. It is asked
for every watched topic every ``TRUTH_EVERY`` s; a lookup answer is *stale* when it matches no truth
sample taken between ``staleness bound`` before it was sent and shortly after it was answered.
While the truth worker cannot reach Redis either, the last known truth holds: nothing can change
the table while Redis is unreachable.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import redis.asyncio as aioredis

from namesrv.domain.codes import RequestCode
from namesrv.procs import die_with_parent
from namesrv.sim.broker import SimBroker, topic_configs
from namesrv.sim.client import RemotingClient, RemotingClientError
from namesrv.store.embedded import find_redis_server as _binary
from support.ports import free_port
from support.procs import Proc, spawn

TRUTH_EVERY = 0.05  # s between truth samples
STALENESS_BOUND = 0.1  # s: the cache's promise (routeCacheStalenessMillis default)
LOOKUP_TIMEOUT = 3.0  # s a lookup may take before the driver gives up (code TIMEOUT), as RocketMQ clients
HUNG = 1.0  # s: a lookup still unanswered after this long counts as failed when figures are taken
TIMEOUT = -1  # pseudo codes in samples
DISCONNECTED = -2
ABSENT = "absent"  # digest of a TOPIC_NOT_EXIST answer
HOT_TOPICS = tuple(f"FaultTopic-{i}" for i in range(4))  # looked up all the time: cached
COLD_TOPICS = tuple(f"ColdTopic-{i:03d}" for i in range(60))  # registered, never looked up but by probes


def now() -> float:
    return time.monotonic()


# ---- Redis -------------------------------------------------------------------------------------


def _popen(argv: list[str]) -> subprocess.Popen[bytes]:
    """A redis-server (or Sentinel); starting one takes a millisecond, so no thread is needed."""
    return subprocess.Popen(
        argv,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=die_with_parent(),  # no stray server when a run is killed
    )


@dataclass
class RedisNode:
    """One redis-server on a fixed port, restartable on the same port and data directory."""

    dir: Path
    port: int = field(default_factory=free_port)
    aof: bool = False
    extra: tuple[str, ...] = ()
    popen: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def argv(self) -> list[str]:
        persistence = (
            ["--appendonly", "yes", "--appendfsync", "everysec"] if self.aof else ["--appendonly", "no"]
        )
        return [
            _binary(),
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            *persistence,
            "--dir",
            str(self.dir),
            "--logfile",
            str(self.dir / f"redis-{self.port}.log"),
            *self.extra,
        ]

    async def start(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.popen = _popen(self.argv())
        await self.wait_up()

    async def wait_up(self, timeout: float = 20.0) -> None:
        client = aioredis.Redis(port=self.port, socket_timeout=1, password=self._password())
        try:
            deadline = now() + timeout
            while now() < deadline:
                try:
                    await client.ping()
                    # with AOF, PING answers LOADING errors (raised) until the file is read
                    return
                except aioredis.RedisError:
                    if self.popen is not None and self.popen.poll() is not None:
                        raise RuntimeError(f"redis-server on {self.port} exited at start") from None
                    await asyncio.sleep(0.02)
            raise RuntimeError(f"redis-server on {self.port} did not answer")
        finally:
            await client.aclose()

    def _password(self) -> str | None:
        if "--requirepass" in self.extra:
            return self.extra[self.extra.index("--requirepass") + 1]
        return None

    def client(self) -> aioredis.Redis:
        return aioredis.Redis(port=self.port, socket_timeout=2, password=self._password())

    async def shutdown_nosave(self) -> None:
        # Over a bare socket: redis-py would retry the command on the connection it closes.
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        password = self._password()
        if password:
            writer.write(f"AUTH {password}\r\n".encode())
        writer.write(b"SHUTDOWN NOSAVE\r\n")
        await writer.drain()
        with contextlib.suppress(ConnectionError):
            await asyncio.wait_for(reader.read(), 10)  # EOF once the server is gone
        writer.close()
        await self._reap()

    async def kill9(self) -> None:
        assert self.popen is not None
        self.popen.kill()
        await self._reap()

    def wipe(self) -> None:
        """Remove the data files (AOF, RDB) of a stopped server: it comes back empty."""
        for path in self.dir.rglob("*"):
            if path.is_file() and (path.suffix in (".aof", ".rdb", ".manifest") or "appendonly" in path.name):
                path.unlink()

    def signal(self, sig: int) -> None:
        assert self.popen is not None
        self.popen.send_signal(sig)

    async def _reap(self) -> None:
        if self.popen is not None:
            await asyncio.to_thread(self.popen.wait, 10)

    def stop(self) -> None:
        if self.popen is not None and self.popen.poll() is None:
            self.popen.send_signal(signal.SIGCONT)  # a stopped server cannot act on SIGTERM
            self.popen.terminate()
            try:
                self.popen.wait(10)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()


@dataclass
class SentinelSet:
    """A master, a replica and one Sentinel (quorum 1), like tests/redis_topologies.py."""

    master: RedisNode
    replica: RedisNode
    sentinel_port: int
    sentinel: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis+sentinel://127.0.0.1:{self.sentinel_port}/mymaster/0"

    async def master_port(self) -> int:
        client = aioredis.Redis(port=self.sentinel_port, socket_timeout=2, decode_responses=True)
        try:
            _, port = await client.execute_command(  # type: ignore[no-untyped-call]
                "SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster"
            )
            return int(port)
        finally:
            await client.aclose()

    async def failover(self) -> None:
        client = aioredis.Redis(port=self.sentinel_port, socket_timeout=2)
        try:
            await client.execute_command(  # type: ignore[no-untyped-call]
                "SENTINEL", "FAILOVER", "mymaster"
            )
        finally:
            await client.aclose()

    def stop(self) -> None:
        if self.sentinel is not None and self.sentinel.poll() is None:
            self.sentinel.terminate()
            self.sentinel.wait(10)
        self.master.stop()
        self.replica.stop()


@contextlib.asynccontextmanager
async def sentinel_set(
    root: Path, *, aof: bool = True, down_after_ms: int = 1000
) -> AsyncIterator[SentinelSet]:

    master = RedisNode(root / "master", aof=aof)
    replica = RedisNode(root / "replica", aof=aof)
    await master.start()
    replica.extra = ("--replicaof", "127.0.0.1", str(master.port))
    await replica.start()
    s = SentinelSet(master, replica, free_port())
    conf = root / "sentinel.conf"
    conf.write_text(
        f"port {s.sentinel_port}\nbind 127.0.0.1\ndir {root}\n"
        f"sentinel monitor mymaster 127.0.0.1 {master.port} 1\n"
        f"sentinel down-after-milliseconds mymaster {down_after_ms}\n"
        "sentinel failover-timeout mymaster 5000\n"
    )
    s.sentinel = _popen([_binary(), str(conf), "--sentinel"])
    try:
        r = aioredis.Redis(port=replica.port, decode_responses=True)
        sc = aioredis.Redis(port=s.sentinel_port, decode_responses=True)
        deadline = now() + 20
        while now() < deadline:
            with contextlib.suppress(aioredis.RedisError):
                up = (await r.info("replication"))["master_link_status"] == "up"
                replicas = await sc.execute_command("SENTINEL", "REPLICAS", "mymaster")  # type: ignore[no-untyped-call]
                if up and replicas:
                    break
            await asyncio.sleep(0.1)
        else:
            raise RuntimeError("sentinel set did not come up")
        await r.aclose()
        await sc.aclose()
        yield s
    finally:
        s.stop()


# ---- workers -----------------------------------------------------------------------------------


@dataclass
class Worker:
    """One ``python -m namesrv`` process on fixed ports (a restart keeps them)."""

    name: str
    redis_url: str
    namespace: str
    log_dir: Path
    env: dict[str, str]
    http_port: int = field(default_factory=free_port)
    remoting_port: int = field(default_factory=free_port)
    proc: Proc | None = None
    starts: int = 0

    @property
    def remoting(self) -> str:
        return f"127.0.0.1:{self.remoting_port}"

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def spawn(self) -> None:
        if self.proc is not None:
            self.proc._log.close()  # the previous (killed) process' log
        self.starts += 1
        env = {
            **worker_environ(),
            "NAMESRV_REDIS_URL": self.redis_url,
            "NAMESRV_NAMESPACE": self.namespace,
            "NAMESRV_HTTP_PORT": str(self.http_port),
            "NAMESRV_REMOTING_PORT": str(self.remoting_port),
            "NAMESRV_LISTEN_HOST": "127.0.0.1",
            "NAMESRV_LOG_LEVEL": "WARNING",
            "NAMESRV_SCAN_NOT_ACTIVE_BROKER_INTERVAL": "500",
            "NAMESRV_REDIS_TIMEOUT_MILLIS": "1000",
            "NAMESRV_ROUTE_CACHE_OUTAGE_SECONDS": "60",
            "NAMESRV_SHUTDOWN_TIMEOUT_SECONDS": "0.5",  # the suite's teardown, not a drain test
            **self.env,
        }
        self.proc = spawn(f"{self.name}-{self.starts}", [sys.executable, "-m", "namesrv"], self.log_dir, env)

    async def wait_serving(self, timeout: float = 30.0) -> None:
        """Until the remoting port accepts and /readyz says 200."""
        assert self.proc is not None
        deadline = now() + timeout
        async with aiohttp.ClientSession() as session:
            while now() < deadline:
                if not self.proc.alive():
                    raise RuntimeError(f"{self.name} exited at start:\n{self.proc.log_tail()}")
                with contextlib.suppress(aiohttp.ClientError, OSError):
                    async with session.get(self.http + "/readyz") as resp:
                        if resp.status == 200:
                            return
                await asyncio.sleep(0.05)
        raise RuntimeError(f"{self.name} did not become ready:\n{self.proc.log_tail()}")

    async def kill9(self) -> None:
        assert self.proc is not None
        self.proc.popen.kill()
        await asyncio.to_thread(self.proc.popen.wait)

    async def stop(self) -> None:
        if self.proc is not None:
            if self.proc.alive():
                self.proc.popen.send_signal(signal.SIGCONT)
            await self.proc.stop(5)

    async def metrics(self) -> str:
        async with (
            aiohttp.ClientSession() as session,
            session.get(self.http + "/metrics", timeout=aiohttp.ClientTimeout(total=5)) as resp,
        ):
            return await resp.text()


def metric_sum(text: str, name: str) -> float | None:
    """The sum of every series of one metric (None: the worker does not export it)."""
    values = [
        float(line.split()[-1]) for line in text.splitlines() if line.startswith((name + "{", name + " "))
    ]
    return sum(values) if values else None


async def scrape(worker: Worker) -> str:
    """The worker's /metrics, or '' when it does not answer within 2 s."""
    try:
        return await asyncio.wait_for(worker.metrics(), 2)
    except (aiohttp.ClientError, OSError, TimeoutError):
        return ""


def metric_value(text: str, name: str, labels: str = "") -> float | None:
    """One sample of a Prometheus text exposition, e.g. ``metric_value(t, "namesrv_redis_up")``."""
    wanted = f"{name}{{{labels}}}" if labels else name
    for line in text.splitlines():
        if line.startswith(wanted + " "):
            return float(line.split()[-1])
    return None


# ---- brokers -----------------------------------------------------------------------------------


@dataclass
class Registration:
    at: float
    broker: str
    code: int  # DISCONNECTED when no worker took the request
    remark: str
    latency: float
    queues: int = 0  # broker-b's queue count in this registration (it flips every time)


class Brokers:
    """Three brokers re-registering every ``period`` s, each through its preferred worker and on
    failure through the next one, as a broker with several namesrv addresses would.

    broker-a serves every hot and cold topic; broker-b serves the hot topics and changes its queue
    count at every registration (a new dataVersion each time), so routes change all the time and
    a cache that misses a change shows up as stale answers; broker-c serves the hot topics.
    """

    NAMES = ("broker-a", "broker-b", "broker-c")

    def __init__(self, addrs: Sequence[str], period: float) -> None:
        self.addrs = list(addrs)
        self.period = period
        self.records: list[Registration] = []
        self.sims: list[SimBroker] = []
        self._clients: dict[tuple[str, str], RemotingClient] = {}
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self.quiet_until = 0.0

    def hold_off(self, seconds: float) -> None:
        """Skip registrations for ``seconds``: brokers whose 30 s period has not come round yet."""
        self.quiet_until = now() + seconds

    def _sim(self, i: int, name: str) -> SimBroker:
        topics = list(HOT_TOPICS) + (list(COLD_TOPICS) if name == "broker-a" else [])
        return SimBroker(
            client=None,  # type: ignore[arg-type]  # set per call by _via
            cluster="FaultCluster",
            name=name,
            addr=f"127.0.0.{i + 1}:10911",
            topics=topic_configs(topics, queues=4),
        )

    async def _client(self, name: str, addr: str) -> RemotingClient:
        client = self._clients.get((name, addr))
        if client is None or client.closed.is_set():
            client = await asyncio.wait_for(RemotingClient.connect(addr), 2)
            self._clients[(name, addr)] = client
        return client

    async def register(self, index: int) -> Registration:
        sim = self.sims[index]
        queues = 0
        if sim.name == "broker-b":
            sim.bump()
            queues = 4 + sim.counter % 2 * 4
            sim.topics = topic_configs(list(HOT_TOPICS), queues=queues)
        started = now()
        code, remark = DISCONNECTED, "no worker reachable"
        for k in range(len(self.addrs)):
            addr = self.addrs[(index + k) % len(self.addrs)]
            try:
                sim.client = await self._client(sim.name, addr)
                reply = await sim.register(check=False)
            except (OSError, RemotingClientError, TimeoutError) as exc:
                remark = f"{addr}: {type(exc).__name__}"
                continue
            code, remark = reply.code, reply.remark or ""
            break
        record = Registration(started, sim.name, code, remark, now() - started, queues)
        self.records.append(record)
        return record

    async def registered(self, name: str, timeout: float) -> Registration:
        """The next successful registration of broker ``name``, as soon as its reply is in."""
        seen = len(self.records)
        deadline = now() + timeout
        while now() < deadline:
            fresh = [r for r in self.records[seen:] if r.broker == name and r.code == 0]
            if fresh:
                return fresh[0]
            await asyncio.sleep(0.001)
        raise TimeoutError(f"{name} did not register within {timeout:g} s")

    async def start(self) -> None:
        self.sims = [self._sim(i, n) for i, n in enumerate(self.NAMES)]
        for i in range(len(self.sims)):
            first = await self.register(i)
            if first.code != 0:
                raise RuntimeError(f"{first.broker} could not register: {first.code} {first.remark}")
        self._tasks = [asyncio.ensure_future(self._loop(i)) for i in range(len(self.sims))]

    async def _loop(self, index: int) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), self.period)
            if not self._stop.is_set() and now() >= self.quiet_until:
                await self.register(index)

    async def stop(self) -> None:
        self._stop.set()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for client in self._clients.values():
            client.abort()  # a crash, not an unregister: the table stays for the next scenario
        self._clients.clear()


# ---- lookups -----------------------------------------------------------------------------------


@dataclass
class Sample:
    worker: str
    topic: str
    sent: float
    latency: float
    code: int
    digest: str | None
    remark: str = ""

    @property
    def replied(self) -> float:
        return self.sent + self.latency


def digest(code: int, body: bytes | None) -> str | None:
    """A route answer in a canonical form (brokers and queues sorted), or ABSENT, or None."""
    if code == 17:
        return ABSENT
    if code != 0 or body is None:
        return None
    route = orjson.loads(body)
    for key in ("brokerDatas", "queueDatas"):
        route[key] = sorted(route.get(key) or [], key=lambda d: orjson.dumps(d, option=orjson.OPT_SORT_KEYS))
    return orjson.dumps(route, option=orjson.OPT_SORT_KEYS).decode()


async def lookup(
    client: RemotingClient, topic: str, timeout: float = LOOKUP_TIMEOUT
) -> tuple[int, str | None, str]:
    try:
        reply = await client.invoke(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}, timeout=timeout)
    except TimeoutError:
        return TIMEOUT, None, "no reply"
    except (RemotingClientError, OSError) as exc:
        return DISCONNECTED, None, str(exc)
    return reply.code, digest(reply.code, reply.body), reply.remark or ""


class LookupDriver:
    """Route lookups sent continuously through every worker: ``per_worker`` loops each, every loop
    one request at a time with ``pause`` s between, over its own connection."""

    def __init__(self, workers: Sequence[Worker], *, per_worker: int = 3, pause: float = 0.005) -> None:
        self.workers = list(workers)
        self.per_worker = per_worker
        self.pause = pause
        self.samples: list[Sample] = []
        self.pending: dict[tuple[str, int], tuple[str, float]] = {}  # (worker, loop) -> (topic, sent)
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    def all_samples(self) -> list[Sample]:
        """The answered lookups, plus those still waiting now (as TIMEOUT, latency so far)."""
        t = now()
        waiting = [
            Sample(worker, topic, sent, t - sent, TIMEOUT, None, "still waiting")
            for (worker, _), (topic, sent) in self.pending.items()
            if t - sent > HUNG  # not one that is merely in flight
        ]
        return self.samples + waiting

    def start(self) -> None:
        for w in self.workers:
            for i in range(self.per_worker):
                self._tasks.append(asyncio.ensure_future(self._loop(w, i)))

    async def _loop(self, worker: Worker, offset: int) -> None:
        client: RemotingClient | None = None
        n = offset
        while not self._stop.is_set():
            if client is None or client.closed.is_set():
                try:
                    client = await asyncio.wait_for(RemotingClient.connect(worker.remoting), 1)
                except (OSError, TimeoutError):
                    client = None
                    await asyncio.sleep(0.02)  # worker down: retry, as a client with one address would
                    continue
            topic = HOT_TOPICS[n % len(HOT_TOPICS)]
            n += 1
            sent = now()
            self.pending[(worker.name, offset)] = (topic, sent)
            code, d, remark = await lookup(client, topic)
            del self.pending[(worker.name, offset)]
            self.samples.append(Sample(worker.name, topic, sent, now() - sent, code, d, remark))
            await asyncio.sleep(self.pause)
        if client is not None:
            client.abort()

    async def stop(self) -> None:
        self._stop.set()
        await asyncio.gather(*self._tasks, return_exceptions=True)


async def probe_cold(workers: Sequence[Worker], topics: Sequence[str]) -> list[Sample]:
    """One lookup of each never-looked-up topic through each worker, all at once: answers that
    cannot come from a cache."""
    out: list[Sample] = []

    async def one(worker: Worker, topic: str) -> None:
        sent = now()
        try:
            client = await asyncio.wait_for(RemotingClient.connect(worker.remoting), 2)
        except (OSError, TimeoutError) as exc:
            out.append(Sample(worker.name, topic, sent, now() - sent, DISCONNECTED, None, str(exc)))
            return
        code, d, remark = await lookup(client, topic)
        out.append(Sample(worker.name, topic, sent, now() - sent, code, d, remark))
        client.abort()

    await asyncio.gather(*(one(w, t) for w in workers for t in topics))
    return out


@dataclass
class TruthSample:
    start: float  # the answers were read at some moment between start and end
    end: float
    routes: dict[str, str | None]  # topic -> digest (None: truth unknown, Redis unreachable)

    @property
    def at(self) -> float:
        return self.end


class Truth:
    """A cache-off worker asked for every hot topic every TRUTH_EVERY s."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.samples: list[TruthSample] = []
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._loop())

    async def _loop(self) -> None:
        client: RemotingClient | None = None
        while not self._stop.is_set():
            if client is None or client.closed.is_set():
                try:
                    client = await asyncio.wait_for(RemotingClient.connect(self.worker.remoting), 1)
                except (OSError, TimeoutError):
                    client = None
                    await asyncio.sleep(TRUTH_EVERY)
                    continue
            started = now()
            answers = await asyncio.gather(*(lookup(client, t, timeout=0.5) for t in HOT_TOPICS))
            routes = {t: a[1] for t, a in zip(HOT_TOPICS, answers, strict=True)}
            self.samples.append(TruthSample(started, now(), routes))
            await asyncio.sleep(TRUTH_EVERY)
        if client is not None:
            client.abort()

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)

    async def wait_past(self, t: float, timeout: float = 3.0) -> None:
        """Until a sample started after ``t`` is in: an answer given just before ``t`` can only be
        judged once the truth has been read after it (else the last read before it is all there
        is, and a worker that answered a change right away looks stale)."""
        for _ in range(int(timeout / (TRUTH_EVERY / 2))):
            if any(s.start > t for s in self.samples[-4:]):
                return
            await asyncio.sleep(TRUTH_EVERY / 2)

    def known(self, topic: str, start: float, end: float) -> list[str]:
        """Every truth of ``topic`` read by a sample overlapping [start, end], plus the last one
        read wholly before ``start`` and the first wholly after ``end`` (the truth holds between
        samples, and across an outage), in the order read. A sample's answers were read at an
        unknown moment within it, so overlapping is enough."""
        seen: list[str] = []
        after: str | None = None
        for s in self.samples:
            d = s.routes.get(topic)
            if d is None:
                continue
            if s.end < start:
                seen = [d]  # the last one before the window
            elif s.start <= end:
                seen.append(d)
            else:
                after = d
                break
        if after is not None:
            seen.append(after)
        return seen

    async def brokers_of(self, topic: str) -> set[str] | None:
        """The brokers Redis lists for a topic now (None: unknown)."""
        try:
            client = await asyncio.wait_for(RemotingClient.connect(self.worker.remoting), 2)
        except (OSError, TimeoutError):
            return None
        try:
            reply = await client.invoke(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}, timeout=2)
        except (TimeoutError, RemotingClientError):
            return None
        finally:
            client.abort()
        if reply.code == 17:
            return set()
        if reply.code != 0 or reply.body is None:
            return None
        return {b["brokerName"] for b in orjson.loads(reply.body)["brokerDatas"]}


def is_stale(sample: Sample, truth: Truth) -> bool:
    """An answer (route or 'no such topic') that Redis did not hold at any time within the
    staleness bound before it was sent and until it was answered.

    Redis may hold states between two truth samples that neither read: brokers that come back
    together (after a restart empty, say) register within a few milliseconds of one another, and
    a route then has each broker's part either as before or as after. An answer made of such parts
    of two consecutive samples is one Redis held, not a stale one."""
    if sample.digest is None:
        return False
    window = truth.known(sample.topic, sample.sent - STALENESS_BOUND, sample.replied + TRUTH_EVERY)
    if not window or sample.digest in window:
        return False
    return not any(between(sample.digest, a, b) for a, b in itertools.pairwise(window))


def between(answer: str, before: str, after: str) -> bool:
    """Whether ``answer`` takes each broker name's part of the route (its BrokerData and
    QueueData) from ``before`` or from ``after``, and the rest of the route from one of them."""
    parts = [_broker_parts(d) for d in (answer, before, after)]
    (rest, mine), (rest_a, theirs_a), (rest_b, theirs_b) = parts
    if rest not in (rest_a, rest_b) and mine:
        return False
    names = set(mine) | set(theirs_a) | set(theirs_b)
    return all(mine.get(n) in (theirs_a.get(n), theirs_b.get(n)) for n in names)


def _broker_parts(d: str) -> tuple[str | None, dict[str, tuple[str | None, str | None]]]:
    """A digest as (the route without its brokers' parts, brokerName -> (BrokerData, QueueData))."""
    if d == ABSENT:
        return None, {}
    route = orjson.loads(d)
    brokers = {b["brokerName"]: _canonical(b) for b in route.pop("brokerDatas")}
    queues = {q["brokerName"]: _canonical(q) for q in route.pop("queueDatas")}
    parts = {name: (brokers.get(name), queues.get(name)) for name in set(brokers) | set(queues)}
    return _canonical(route), parts


def _canonical(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


# ---- one fleet -----------------------------------------------------------------------------------


@dataclass
class Fleet:
    workers: list[Worker]  # cache on, the ones under test
    truth_worker: Worker
    brokers: Brokers
    driver: LookupDriver
    truth: Truth
    log_dir: Path


@contextlib.asynccontextmanager
async def fleet(
    redis_url: str,
    log_dir: Path,
    *,
    truth_url: str | None = None,
    period: float = 1.0,
    env: dict[str, str] | None = None,
) -> AsyncIterator[Fleet]:
    """Two cached workers (on ``redis_url``), one cache-off truth worker (on ``truth_url``, by
    default the same), the brokers registered, and lookups and truth running."""
    namespace = f"faults-{os.getpid()}-{int(time.time() * 1000) % 100000}"
    extra = dict(env or {})
    workers = [Worker(f"w{i}", redis_url, namespace, log_dir, extra) for i in range(2)]
    truth_worker = Worker(
        "truth", truth_url or redis_url, namespace, log_dir, {**extra, "NAMESRV_ROUTE_CACHE_ENABLED": "false"}
    )
    everyone = [*workers, truth_worker]
    for w in everyone:
        w.spawn()
    brokers = Brokers([w.remoting for w in workers], period)
    driver = LookupDriver(workers)
    truth = Truth(truth_worker)
    try:
        await asyncio.gather(*(w.wait_serving() for w in everyone))
        await brokers.start()
        truth.start()
        driver.start()
        yield Fleet(workers, truth_worker, brokers, driver, truth, log_dir)
    finally:
        await driver.stop()
        await truth.stop()
        await brokers.stop()
        await asyncio.gather(*(w.stop() for w in everyone))


@contextlib.contextmanager
def scratch(prefix: str = "namesrv-faults-") -> Iterator[Path]:
    keep = os.environ.get("FAULTS_KEEP_LOGS")
    if keep:
        path = Path(tempfile.mkdtemp(prefix=prefix))
        print(f"fault suite logs in {path}", file=sys.stderr)
        yield path
        return
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        yield Path(tmp)


def worker_environ() -> dict[str, str]:
    """This process's environment for a worker it starts, without the test runner's own
    NAMESRV_TEST_* variables (a worker reports NAMESRV_* names it does not know)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("NAMESRV_TEST_")}


def redis_host_port(url: str) -> tuple[str, int]:
    host, _, port = url.split("//", 1)[1].split("/", 1)[0].rpartition(":")
    return host, int(port)
