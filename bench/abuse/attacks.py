"""The attacks, as coroutines run by the attacker process (:mod:`bench.abuse.attacker`).

Every attack connects from the plan's source address (127.0.0.2), spreads its connections over
every worker, runs until cancelled, and counts what it got back in a :class:`Tally`: reply codes,
connections the worker closed, requests left unanswered. The counts say what the code on the path
did (refused, closed, answered), whatever it does: no attack asserts anything.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
import struct
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TypeVar

import aiohttp
import orjson
import yarl

from bench.abuse import hostile
from bench.abuse.plan import Plan
from namesrv.domain.codes import RequestCode
from namesrv.protocol.remoting import decode_frame
from namesrv.security.signature import signed_fields

REPLY_TIMEOUT = 10.0  # s an attack waits for the worker's answer to one request
MALFORMED_WAIT = 1.0  # s a malformed frame's connection waits for a reply or a close
HTTP_TIMEOUT = aiohttp.ClientTimeout(total=10)
KV_NAMESPACE = "FLOOD"

Tally = Counter[str]
Item = TypeVar("Item")


@dataclass
class Attack:
    """What every attack needs: the plan, the counts, and connections from the attacker's address."""

    plan: Plan
    tally: Tally = field(default_factory=Counter)
    notes: dict[str, int] = field(default_factory=dict)  # facts about the attack itself
    sessions: list[aiohttp.ClientSession] = field(default_factory=list)
    held: int = 0  # connections open now (the idle-connection attack)
    until: float = math.inf  # monotonic time the attack ends

    @property
    def running(self) -> bool:
        # Every loop checks this as well as being cancelled at the end: on Python 3.11 a
        # wait_for() whose inner call finishes as the task is cancelled swallows the cancellation.
        return time.monotonic() < self.until

    def remoting(self, i: int) -> tuple[str, int]:
        return self.plan.remoting[i % len(self.plan.remoting)]

    def http(self, i: int) -> str:
        return self.plan.http[i % len(self.plan.http)]

    async def open(self, target: tuple[str, int]) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        try:
            return await asyncio.open_connection(*target, local_addr=(self.plan.source, 0), limit=1 << 24)
        except OSError:
            self.tally["connect failed"] += 1
            return None

    async def exchange(
        self, conn: tuple[asyncio.StreamReader, asyncio.StreamWriter], data: bytes, what: str = ""
    ) -> bool:
        """Send one request and count its answer: ``<what>code N``, ``closed by worker`` or ``no
        reply in time``. True while the connection can be used again."""
        reader, writer = conn
        prefix = f"{what}: " if what else ""
        self.tally[f"{prefix}sent"] += 1
        try:
            writer.write(data)
            await writer.drain()
            reply = await asyncio.wait_for(read_frame(reader), REPLY_TIMEOUT)
        except (ConnectionError, asyncio.IncompleteReadError):
            self.tally[f"{prefix}closed by worker"] += 1
            return False
        except TimeoutError:
            self.tally[f"{prefix}no reply in {REPLY_TIMEOUT:g} s"] += 1
            return False
        except asyncio.CancelledError:
            self.tally[f"{prefix}no reply when the attack ended"] += 1
            raise
        self.tally[f"{prefix}code {reply}"] += 1
        return True

    async def request_loop(self, target: tuple[str, int], frames: Iterable[tuple[str, bytes]]) -> None:
        """Send ``frames`` one after another on one connection, reconnecting when it closes."""
        conn = None
        try:
            for what, data in frames:
                if not self.running:
                    break
                while conn is None:
                    conn = await self.open(target)
                    if conn is None:
                        await asyncio.sleep(self.plan.sizes.reconnect_delay)
                if not await self.exchange(conn, data, what):
                    close(conn[1])
                    conn = None
                    await asyncio.sleep(self.plan.sizes.reconnect_delay)
        finally:
            if conn is not None:
                close(conn[1])

    def session(self) -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(local_addr=(self.plan.source, 0), limit=0)
        session = aiohttp.ClientSession(connector=connector, timeout=HTTP_TIMEOUT)
        self.sessions.append(session)
        return session

    async def http_loop(
        self, session: aiohttp.ClientSession, requests: Iterable[tuple[str, str, yarl.URL, bytes | None]]
    ) -> None:
        """Send HTTP ``requests`` (what, method, URL, body) one after another; count statuses."""
        for what, method, url, body in requests:
            if not self.running:
                break
            self.tally[f"{what}: sent"] += 1
            try:
                async with session.request(
                    method, url, data=body, headers={"Content-Type": "application/json"}
                ) as resp:
                    await resp.read()
                    self.tally[f"{what}: HTTP {resp.status}"] += 1
            except (aiohttp.ClientError, OSError) as exc:
                self.tally[f"{what}: {type(exc).__name__}"] += 1
                await asyncio.sleep(0.05)
            except TimeoutError:
                self.tally[f"{what}: no reply in {HTTP_TIMEOUT.total:g} s"] += 1
            except asyncio.CancelledError:
                self.tally[f"{what}: no reply when the attack ended"] += 1
                raise


async def read_frame(reader: asyncio.StreamReader) -> int:
    """The response code of the next frame the worker sends."""
    length = await reader.readexactly(4)
    rest = await reader.readexactly(struct.unpack(">i", length)[0])
    return decode_frame(length + rest).code


def close(writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(Exception):
        writer.transport.abort()


def forever(items: list[Item]) -> Iterable[Item]:
    return itertools.cycle(items)


# ---- issue #25 row 1 -----------------------------------------------------------------------


async def zlib_bomb(a: Attack) -> list[Awaitable[None]]:
    """REGISTER_BROKER with compressed=true and a 64 KB body that inflates to 63 MiB, from
    ``bomb_conns`` connections, each sending it again as soon as it is answered."""
    body = hostile.zlib_bomb(a.plan.sizes.bomb_inflated)
    a.notes["compressed body bytes"] = len(body)
    return [
        a.request_loop(a.remoting(i), forever([("bomb", hostile.zlib_bomb_request(i, body))]))
        for i in range(a.plan.sizes.bomb_conns)
    ]


# ---- issue #25 row 3 -----------------------------------------------------------------------


async def kv_flood(a: Attack) -> list[Awaitable[None]]:
    """PUT_KV_CONFIG of 60 KiB values under new keys of one namespace, through every worker, as
    fast as they answer; meanwhile loops read the whole namespace (219 and GET /v1/kv/FLOOD)."""
    value = "v" * a.plan.sizes.kv_value_bytes
    session = a.session()

    def puts(worker: int) -> Iterable[tuple[str, bytes]]:
        for n in itertools.count():
            key = f"w{worker}-k{n}"
            yield (
                "put",
                hostile.request(
                    RequestCode.PUT_KV_CONFIG, {"namespace": KV_NAMESPACE, "key": key, "value": value}
                ),
            )

    lists = forever(
        [("list 219", hostile.request(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": KV_NAMESPACE}))]
    )
    loops: list[Awaitable[None]] = [
        a.request_loop(a.remoting(w), puts(w)) for w in range(len(a.plan.remoting))
    ]
    for i in range(a.plan.sizes.kv_list_loops):
        if i % 2 == 0:
            loops.append(a.request_loop(a.remoting(i // 2), lists))
        else:
            url = yarl.URL(f"{a.http(i // 2)}/v1/kv/{KV_NAMESPACE}")
            loops.append(a.http_loop(session, forever([("GET /v1/kv/FLOOD", "GET", url, None)])))
    return loops


# ---- issue #25 row 4 -----------------------------------------------------------------------


class _Held(asyncio.Protocol):
    def __init__(self) -> None:
        self.lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.lost.done():
            self.lost.set_result(None)


async def idle_connections(a: Attack) -> list[Awaitable[None]]:
    """``idle_conns`` connections that send nothing, spread over the workers; each one the
    worker closes is opened again after ``reconnect_delay``."""
    loop = asyncio.get_running_loop()

    async def hold(i: int) -> None:
        host, port = a.remoting(i)
        while a.running:
            try:
                _, protocol = await loop.create_connection(_Held, host, port, local_addr=(a.plan.source, 0))
            except OSError:
                a.tally["connect failed"] += 1
                await asyncio.sleep(a.plan.sizes.reconnect_delay)
                continue
            opened = time.monotonic()
            a.tally["opened"] += 1
            a.held += 1
            try:
                await protocol.lost
            finally:
                a.held -= 1
            # at once: refused by a connection cap; later: the first-frame deadline (or idle)
            a.tally["closed at once" if time.monotonic() - opened < 0.5 else "closed later"] += 1
            await asyncio.sleep(a.plan.sizes.reconnect_delay)

    return [hold(i) for i in range(a.plan.sizes.idle_conns)]


# ---- issue #25 row 5 -----------------------------------------------------------------------


async def acl_unregister(a: Attack) -> list[Awaitable[None]]:
    """An app (non-admin) account, correctly signed, sends UNREGISTER_BROKER for the legitimate
    brokers, over and over."""
    if a.plan.account is None or not a.plan.brokers:
        raise ValueError("the ACL attack needs an account and the legitimate brokers in its plan")
    access, secret = a.plan.account
    frames = [
        (
            "unregister",
            hostile.request(
                RequestCode.UNREGISTER_BROKER,
                signed_fields(
                    access,
                    secret,
                    {"clusterName": b.cluster, "brokerAddr": b.addr, "brokerName": b.name, "brokerId": "0"},
                ),
            ),
        )
        for b in a.plan.brokers
    ]
    return [a.request_loop(a.remoting(i), forever(frames)) for i in range(a.plan.sizes.acl_loops)]


# ---- issue #25 row 6 -----------------------------------------------------------------------


def _register_http_body(**topic: object) -> bytes:
    table_key = str(topic.pop("key", "AttackTopic"))
    config = {"topicName": "AttackTopic", "readQueueNums": 8, "writeQueueNums": 8, "perm": 6} | topic
    return orjson.dumps(
        {
            "clusterName": hostile.ATTACK_CLUSTER,
            "brokerName": "http-attacker",
            "brokerAddr": "10.66.3.1:10911",
            "brokerId": 0,
            "haServerAddr": "10.66.3.1:10912",
            "topicConfigSerializeWrapper": {
                "dataVersion": {"counter": 1, "stateVersion": 0, "timestamp": 1700000000000},
                "topicConfigTable": {table_key: config},
            },
            "filterServerList": [],
        }
    )


async def http_bad_input(a: Attack) -> list[Awaitable[None]]:
    """POST /v1/brokers/register with ``"readQueueNums": "8"`` and with a topic listed under a key
    that is not its topicName, and PUT /v1/kv/..%2F../key, in loops."""
    session = a.session()

    def requests(base: str) -> list[tuple[str, str, yarl.URL, bytes | None]]:
        register = yarl.URL(f"{base}/v1/brokers/register")
        return [
            ('readQueueNums "8"', "POST", register, _register_http_body(readQueueNums="8")),
            ("key is not topicName", "POST", register, _register_http_body(key="A1", topicName="B1")),
            (
                "namespace ../..",
                "PUT",
                yarl.URL(f"{base}/v1/kv/..%2F../key", encoded=True),
                b'{"value": "v"}',
            ),
        ]

    return [a.http_loop(session, forever(requests(a.http(i)))) for i in range(a.plan.sizes.http_bad_loops)]


# ---- last round ----------------------------------------------------------------------------


async def partial_frames(a: Attack) -> list[Awaitable[None]]:
    """``partial_conns`` connections, each sending ``partial_bytes`` of a frame that declares
    ``partial_declared``, then nothing; a closed one starts over after ``reconnect_delay``."""
    sizes = a.plan.sizes
    head = hostile.partial_frame_head(sizes.partial_declared)
    chunk = b"x" * hostile.MIB

    async def one(i: int) -> None:
        while a.running:
            conn = await a.open(a.remoting(i))
            if conn is not None:
                reader, writer = conn
                try:
                    writer.write(head)
                    for start in range(0, sizes.partial_bytes, len(chunk)):
                        writer.write(chunk[: min(len(chunk), sizes.partial_bytes - start)])
                        await writer.drain()
                    a.tally["frames started"] += 1
                    await reader.read()  # the worker closes it: the budget, or the frame deadline
                    a.tally["closed by worker while held"] += 1
                except ConnectionError:
                    a.tally["closed by worker while sending"] += 1
                finally:
                    close(writer)
            await asyncio.sleep(sizes.reconnect_delay)

    return [one(i) for i in range(sizes.partial_conns)]


class _Drop(asyncio.Protocol):
    pass


async def connection_flood(a: Attack) -> list[Awaitable[None]]:
    """``flood_tasks`` loops connecting as fast as they can and resetting the connection at once,
    every other one after writing a route lookup it does not wait for."""
    loop = asyncio.get_running_loop()
    lookup = hostile.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "AttackTopic"})

    async def churn(i: int) -> None:
        host, port = a.remoting(i)
        for n in itertools.count():
            if not a.running:
                break
            try:
                transport, _ = await loop.create_connection(_Drop, host, port, local_addr=(a.plan.source, 0))
            except OSError:
                a.tally["connect failed"] += 1
                await asyncio.sleep(0.05)
                continue
            a.tally["connections"] += 1
            if n % 2:
                transport.write(lookup)
                transport.close()
            else:
                transport.abort()
            await asyncio.sleep(0)

    return [churn(i) for i in range(a.plan.sizes.flood_tasks)]


async def oversized_names(a: Attack) -> list[Awaitable[None]]:
    """10 MB names: route lookups and registrations over remoting (topic name, broker name), and
    over HTTP a route lookup and a registration with such a topic."""
    size = a.plan.sizes.name_bytes
    frames = hostile.oversized_requests(size)
    huge = "T" * size
    session = a.session()
    loops: list[Awaitable[None]] = [
        a.request_loop(a.remoting(i), forever(frames)) for i in range(a.plan.sizes.name_loops)
    ]
    for i in range(len(a.plan.http)):
        base = a.http(i)
        requests = [
            ("HTTP lookup", "GET", yarl.URL(f"{base}/v1/routes/{huge}", encoded=True), None),
            (
                "HTTP register: topic name",
                "POST",
                yarl.URL(f"{base}/v1/brokers/register"),
                _register_http_body(key=huge, topicName=huge),
            ),
        ]
        loops.append(a.http_loop(session, forever(requests)))
    return loops


async def malformed_frames(a: Attack) -> list[Awaitable[None]]:
    """Garbage bytes, lying lengths, headers that are not JSON, nesting bombs, bodies that do not
    decode: each on a new connection, which waits up to 1 s for a reply or a close."""
    frames = hostile.malformed_frames()

    async def one(i: int) -> None:
        for what, data in itertools.islice(itertools.cycle(frames), i % len(frames), None):
            if not a.running:
                break
            conn = await a.open(a.remoting(i))
            if conn is None:
                await asyncio.sleep(a.plan.sizes.reconnect_delay)
                continue
            reader, writer = conn
            a.tally["frames sent"] += 1
            try:
                writer.write(data)
                await writer.drain()
                code = await asyncio.wait_for(read_frame(reader), MALFORMED_WAIT)
                a.tally[f"answered code {code}"] += 1
            except (ConnectionError, asyncio.IncompleteReadError):
                a.tally["closed by worker"] += 1
            except TimeoutError:
                a.tally[f"no answer in {MALFORMED_WAIT:g} s: {what}"] += 1
            finally:
                close(writer)

    return [one(i) for i in range(a.plan.sizes.malformed_loops)]


AttackFactory = Callable[[Attack], Awaitable[list[Awaitable[None]]]]

ATTACKS: dict[str, AttackFactory] = {
    "zlib-bomb": zlib_bomb,
    "kv-flood": kv_flood,
    "idle-connections": idle_connections,
    "acl-unregister": acl_unregister,
    "http-bad-input": http_bad_input,
    "partial-frames": partial_frames,
    "connection-flood": connection_flood,
    "oversized-names": oversized_names,
    "malformed-frames": malformed_frames,
}
