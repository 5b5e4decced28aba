"""Access control on a live worker: RocketMQ ACL signatures (enforcing and permissive),
adminAllowFrom without ACL, the HTTP writes, and reloading the ACL file.

The tests connect from 127.0.0.1; to make that a "non-listed address" the allow-lists here
leave loopback out (globalWhiteRemoteAddresses empty, adminAllowFrom 10.0.0.0/8)."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer

from namesrv.app import create_app
from namesrv.config import ConfigError, Settings
from namesrv.domain.codes import RequestCode, ResponseCode
from namesrv.keys import AUTHORIZER, REMOTING
from namesrv.protocol.remoting import RemotingCommand
from namesrv.security.http_auth import authorization_header
from namesrv.security.signature import signed_fields
from namesrv.sim.broker import SimBroker, topic_configs
from namesrv.sim.cli import main as sim_main
from namesrv.sim.client import RemotingClient
from tests.conftest import close_client, start_client
from tests.registry_state import snapshot

ADMIN = ("mqadmin", "admin-secret-1")
PLAIN = ("RocketMQ", "12345678")
FENCED = ("from-elsewhere", "fenced-secret")  # may only connect from 10.9.9.9
ACL_FILE = f"""
globalWhiteRemoteAddresses: {{white}}
accounts:
  - accessKey: {ADMIN[0]}
    secretKey: {ADMIN[1]}
    admin: true
  - accessKey: {PLAIN[0]}
    secretKey: {PLAIN[1]}
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
  - accessKey: {FENCED[0]}
    secretKey: {FENCED[1]}
    whiteRemoteAddress: 10.9.9.9
    admin: true
"""
WIPE = RequestCode.WIPE_WRITE_PERM_OF_BROKER


def broker_a(client: RemotingClient) -> SimBroker:
    return SimBroker(
        client, "DefaultCluster", "broker-a", "127.0.0.1:10911", topics=topic_configs(["TopicTest", "TBW102"])
    )


def acl_settings(settings: Settings, path: Path, *, white: str = "[]", mode: str = "enforcing") -> Settings:
    path.write_text(ACL_FILE.replace("{white}", white))
    return dataclasses.replace(
        settings, aclEnable=True, aclFile=str(path), aclMode=mode, adminAllowFrom="10.0.0.0/8"
    )


@dataclasses.dataclass
class Node:
    app: Any
    addr: str


async def start(settings: Settings) -> Node:
    app = await start_client(settings)
    return Node(app, f"127.0.0.1:{app.app[REMOTING].port}")


@pytest.fixture
async def enforcing(settings: Settings, tmp_path: Path) -> AsyncIterator[Node]:
    node = await start(acl_settings(settings, tmp_path / "plain_acl.yml"))
    yield node
    await close_client(node.app)


async def invoke(
    addr: str,
    code: int,
    ext: dict[str, str] | None = None,
    body: bytes | None = None,
    account: tuple[str, str] | None = None,
) -> RemotingCommand:
    if account is not None:
        ext = signed_fields(account[0], account[1], ext, body)
    async with await RemotingClient.connect(addr) as c:
        return await c.invoke(code, ext, body)


async def register_signed(addr: str, account: tuple[str, str]) -> RemotingClient:
    """A signed REGISTER_BROKER of broker-a; the connection stays open (closing it removes the broker)."""
    c = await RemotingClient.connect(addr)
    b = SimBroker(
        c, "DefaultCluster", "broker-a", "127.0.0.1:10911", topics=topic_configs(["TopicTest", "TBW102"])
    )
    body = b.body()
    reply = await c.invoke(RequestCode.REGISTER_BROKER, signed_fields(*account, b.header(body), body), body)
    assert (reply.code, reply.remark) == (0, None)
    return c


@pytest.fixture
async def registered(enforcing: Node) -> AsyncIterator[Node]:
    """The enforcing node with broker-a registered by a signed (non-admin) broker."""
    c = await register_signed(enforcing.addr, PLAIN)
    yield enforcing
    await c.aclose()


async def route_perms(addr: str, account: tuple[str, str] = ADMIN) -> list[int]:
    reply = await invoke(addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"}, account=account)
    assert reply.code == 0, reply.remark
    return [q["perm"] for q in orjson.loads(reply.body or b"")["queueDatas"]]


async def decisions(node: Node) -> dict[str, float]:
    """namesrv_acl_decisions_total samples by their label text."""
    text = await (await node.app.get("/metrics")).text()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("namesrv_acl_decisions_total{"):
            labels, value = line[len("namesrv_acl_decisions_total") :].rsplit(" ", 1)
            out[labels] = float(value)
    return out


# ---- enforcing ----
async def test_unsigned_wipe_from_an_unlisted_address_is_refused_and_changes_nothing(
    registered: Node, redis_url: str, namespace: str
) -> None:
    enforcing = registered
    before = await snapshot(redis_url, namespace)
    reply = await invoke(enforcing.addr, WIPE, {"brokerName": "broker-a"})
    assert reply.code == 16
    assert reply.remark == (
        "not signed: request code 205 has no AccessKey and an admin request must be signed by an "
        "admin account"
    )
    assert await snapshot(redis_url, namespace) == before
    assert await route_perms(enforcing.addr) == [6]


async def test_the_same_wipe_signed_by_an_admin_account_succeeds(registered: Node) -> None:
    enforcing = registered
    reply = await invoke(enforcing.addr, WIPE, {"brokerName": "broker-a"}, account=ADMIN)
    assert (reply.code, reply.ext_fields) == (0, {"wipeTopicCount": "2"})
    assert await route_perms(enforcing.addr) == [4]
    counts = await decisions(enforcing)
    assert counts == {'{mode="enforcing",reason="signed",result="allowed"}': 3.0}


async def test_a_non_admin_account_can_look_routes_up_but_not_wipe(
    registered: Node, redis_url: str, namespace: str
) -> None:
    enforcing = registered
    assert await route_perms(enforcing.addr, PLAIN) == [6]  # twice: the second from the route cache
    assert await route_perms(enforcing.addr, PLAIN) == [6]
    # each request counted once, whichever path answered it (register + two lookups)
    assert await decisions(enforcing) == {'{mode="enforcing",reason="signed",result="allowed"}': 3.0}
    before = await snapshot(redis_url, namespace)
    reply = await invoke(enforcing.addr, WIPE, {"brokerName": "broker-a"}, account=PLAIN)
    assert reply.code == 16
    assert (
        reply.remark
        == "not admin: request code 205 needs an admin account; AccessKey 'RocketMQ' is not admin"
    )
    assert await snapshot(redis_url, namespace) == before


@pytest.mark.parametrize(
    ("ext", "remark"),
    [
        (
            {"brokerName": "broker-a", "AccessKey": ADMIN[0], "Signature": "AAAAAAAAAAAAAAAAAAAAAAAAAAA="},
            "bad signature: the request is not signed by AccessKey 'mqadmin'",
        ),
        (
            # signed for broker-b, sent for broker-a: the signature covers every field
            {**signed_fields(*ADMIN, {"brokerName": "broker-b"}), "brokerName": "broker-a"},
            "bad signature: the request is not signed by AccessKey 'mqadmin'",
        ),
        (signed_fields("nobody", "x", {"brokerName": "broker-a"}), "unknown AccessKey 'nobody'"),
        (
            signed_fields(*FENCED, {"brokerName": "broker-a"}),
            "address not allowed: 127.0.0.1 is not in the whiteRemoteAddress of AccessKey 'from-elsewhere'",
        ),
    ],
    ids=["forged", "tampered", "unknown-key", "account-address"],
)
async def test_bad_credentials_are_refused_with_the_reason(
    registered: Node, redis_url: str, namespace: str, ext: dict[str, str], remark: str
) -> None:
    enforcing = registered
    before = await snapshot(redis_url, namespace)
    reply = await invoke(enforcing.addr, WIPE, ext)
    assert (reply.code, reply.remark) == (16, remark)
    assert await snapshot(redis_url, namespace) == before


async def test_unsigned_route_lookups_are_refused_on_the_fast_path_too(registered: Node) -> None:
    enforcing = registered
    await route_perms(enforcing.addr)  # now cached
    for _ in range(2):
        reply = await invoke(enforcing.addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"})
        assert (reply.code, reply.body) == (16, None)
        assert reply.remark == (
            "not signed: request code 105 has no AccessKey and 127.0.0.1 is not in globalWhiteRemoteAddresses"
        )
    counts = await decisions(enforcing)
    assert counts['{mode="enforcing",reason="unsigned",result="refused"}'] == 2.0


async def test_an_unsigned_4x_broker_registers_from_a_listed_address(
    settings: Settings, tmp_path: Path, redis_url: str, namespace: str
) -> None:
    node = await start(acl_settings(settings, tmp_path / "plain_acl.yml", white="['127.0.0.*']"))
    try:
        async with await RemotingClient.connect(node.addr) as c:
            b = broker_a(c)
            assert (await b.register()).code == 0  # no AccessKey, no Signature: a 4.x broker
            assert (await c.invoke(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"})).code == 0
            # the broker subnet is trusted for broker traffic, never for admin requests
            before = await snapshot(redis_url, namespace)
            reply = await c.invoke(WIPE, {"brokerName": "broker-a"})
            assert reply.code == 16
            assert await snapshot(redis_url, namespace) == before
    finally:
        await close_client(node.app)


# ---- permissive ----
async def test_permissive_mode_serves_and_counts_what_enforcing_would_refuse(
    settings: Settings, tmp_path: Path
) -> None:
    node = await start(acl_settings(settings, tmp_path / "plain_acl.yml", mode="permissive"))
    c = await register_signed(node.addr, PLAIN)
    try:
        reply = await invoke(node.addr, WIPE, {"brokerName": "broker-a"})
        assert (reply.code, reply.ext_fields) == (0, {"wipeTopicCount": "2"})
        reply = await invoke(node.addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"})
        assert reply.code == 0
        counts = await decisions(node)
        assert counts['{mode="permissive",reason="unsigned",result="would_refuse"}'] == 2.0
        assert counts['{mode="permissive",reason="signed",result="allowed"}'] == 1.0
        assert not [k for k in counts if 'result="refused"' in k]
        stale = authorization_header(*ADMIN, "PUT", "/v1/kv/NS/k", body=b'{"value":"v"}', now_ms=1)
        resp = await node.app.put("/v1/kv/NS/k", data=b'{"value":"v"}', headers={"Authorization": stale})
        assert resp.status == 200
        counts = await decisions(node)
        assert counts['{mode="permissive",reason="bad_signature",result="would_refuse"}'] == 1.0
    finally:
        await c.aclose()
        await close_client(node.app)


# ---- without ACL: adminAllowFrom ----
async def test_without_acl_admin_codes_come_only_from_admin_allow_from(
    settings: Settings, redis_url: str, namespace: str
) -> None:
    node = await start(dataclasses.replace(settings, adminAllowFrom="10.0.0.0/8,192.168.0.0/16"))
    try:
        async with await RemotingClient.connect(node.addr) as c:
            b = broker_a(c)
            assert (await b.register()).code == 0  # broker traffic stays open
            before = await snapshot(redis_url, namespace)
            for code, ext in [
                (WIPE, {"brokerName": "broker-a"}),
                (RequestCode.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"}),
                (RequestCode.PUT_KV_CONFIG, {"namespace": "NS", "key": "k", "value": "v"}),
                (RequestCode.DELETE_KV_CONFIG, {"namespace": "NS", "key": "k"}),
                (RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "TopicTest"}),
                (RequestCode.REGISTER_TOPIC_IN_NAMESRV, {"topic": "TopicTest"}),
                (RequestCode.UPDATE_NAMESRV_CONFIG, {}),
            ]:
                reply = await c.invoke(code, ext)
                assert reply.code == 16, code
                assert reply.remark == (
                    f"address not allowed: request code {code} is an admin request, accepted only from "
                    "adminAllowFrom (or from an admin account when aclEnable is true); 127.0.0.1 is not in it"
                )
            assert await snapshot(redis_url, namespace) == before
            assert (await c.invoke(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"})).code == 0
        counts = await decisions(node)
        assert counts == {'{mode="off",reason="address_not_allowed",result="refused"}': 7.0}
    finally:
        await close_client(node.app)


async def test_by_default_loopback_may_send_admin_codes(node_default: Node) -> None:
    reply = await invoke(
        node_default.addr, RequestCode.PUT_KV_CONFIG, {"namespace": "NS", "key": "k", "value": "v"}
    )
    assert reply.code == 0
    assert await decisions(node_default) == {'{mode="off",reason="admin_allow_from",result="allowed"}': 1.0}


@pytest.fixture
async def node_default(settings: Settings) -> AsyncIterator[Node]:
    node = await start(settings)
    yield node
    await close_client(node.app)


# ---- HTTP ----
async def test_http_writes_without_acl_follow_admin_allow_from(settings: Settings) -> None:
    node = await start(dataclasses.replace(settings, adminAllowFrom="10.0.0.0/8"))
    try:
        resp = await node.app.put("/v1/kv/NS/k", json={"value": "v"})
        assert resp.status == 403
        body = await resp.json()
        assert body["code"] == 16
        assert body["remark"].startswith("address not allowed: request code 100 is an admin request")
        assert (await node.app.get("/v1/kv/NS/k")).status == 404  # reads stay open, nothing was written
    finally:
        await close_client(node.app)


async def test_http_writes_with_acl_need_an_admin_account(enforcing: Node) -> None:
    app = enforcing.app
    body = orjson.dumps({"value": "v"})
    path = "/v1/kv/NS/k"

    async def put(auth: str | None) -> tuple[int, dict[str, Any]]:
        headers = {"Content-Type": "application/json", **({"Authorization": auth} if auth else {})}
        resp = await app.put(path, data=body, headers=headers)
        return resp.status, await resp.json()

    status, answer = await put(None)
    assert (status, answer["code"]) == (403, 16)
    assert answer["remark"].startswith("not signed: request code 100 has no AccessKey")
    status, answer = await put(authorization_header(*PLAIN, "PUT", path, body=body))
    assert (status, answer["remark"]) == (
        403,
        "not admin: request code 100 needs an admin account; AccessKey 'RocketMQ' is not admin",
    )
    status, answer = await put(authorization_header(*ADMIN, "PUT", path, body=b'{"value":"other"}'))
    assert (status, answer["remark"]) == (
        403,
        "bad signature: the request is not signed by AccessKey 'mqadmin'",
    )
    status, answer = await put(authorization_header(*ADMIN, "PUT", path, body=body, now_ms=1))
    assert (status, answer["remark"]) == (
        403,
        "bad signature: the request is not signed by AccessKey 'mqadmin' "
        "(Timestamp must be the current time in ms (within 300 s))",
    )
    status, answer = await put("Basic bXFhZG1pbjpzZWNyZXQ=")
    assert (status, answer["remark"]) == (
        403,
        "not signed: request code 100 has no AccessKey and an admin request must be signed by an "
        "admin account (Authorization: only the RocketMQ-HMAC scheme is accepted)",
    )
    assert (await app.get(path)).status == 404
    status, answer = await put(authorization_header(*ADMIN, "PUT", path, body=body))
    assert (status, answer) == (200, {"code": 0})
    assert await (await app.get(path)).json() == {"value": "v"}


# ---- reloading ----
async def test_the_acl_file_is_reloaded_on_change_and_on_sighup(settings: Settings, tmp_path: Path) -> None:
    path = tmp_path / "plain_acl.yml"
    node = await start(acl_settings(settings, path))
    try:
        authorizer = node.app.app[AUTHORIZER]
        newcomer = ("newcomer", "newcomer-secret")
        ext = {"topic": "Missing"}
        assert (await invoke(node.addr, 105, ext, account=newcomer)).remark == "unknown AccessKey 'newcomer'"
        path.write_text(path.read_text() + f"  - accessKey: {newcomer[0]}\n    secretKey: {newcomer[1]}\n")
        os.utime(path, ns=(1, 1))  # a stamp certainly different from the first load's
        assert authorizer.reload_if_changed() is True
        assert (await invoke(node.addr, 105, ext, account=newcomer)).code == 17  # allowed: no such topic
        # a broken file leaves the previous ACL in force
        path.write_text("accounts: [")
        os.utime(path, ns=(2, 2))
        assert authorizer.reload_if_changed() is False
        assert (await invoke(node.addr, 105, ext, account=newcomer)).code == 17
        # SIGHUP reads the file again, whatever its stamp
        path.write_text(ACL_FILE.replace("{white}", "[]"))
        os.utime(path, ns=(2, 2))
        assert signal.getsignal(signal.SIGHUP) not in (signal.SIG_DFL, None)  # never kill the test run
        os.kill(os.getpid(), signal.SIGHUP)
        for _ in range(100):
            if "newcomer" not in authorizer.acl.accounts:
                break
            await asyncio.sleep(0.02)
        assert (await invoke(node.addr, 105, ext, account=newcomer)).remark == "unknown AccessKey 'newcomer'"
        text = await (await node.app.get("/metrics")).text()
        assert 'namesrv_acl_reloads_total{result="ok"} 3.0' in text
        assert 'namesrv_acl_reloads_total{result="error"} 1.0' in text
    finally:
        await close_client(node.app)


async def test_acl_enabled_without_a_file_stops_start_up(settings: Settings) -> None:
    client: TestClient[Any, Any] = TestClient(
        TestServer(create_app(dataclasses.replace(settings, aclEnable=True)))
    )
    try:
        with pytest.raises(ConfigError, match="^aclEnable is true but aclFile is not set$"):
            await client.start_server()
    finally:
        await client.close()


async def test_a_changed_acl_file_is_picked_up_by_the_poll(settings: Settings, tmp_path: Path) -> None:
    path = tmp_path / "plain_acl.yml"
    node = await start(acl_settings(settings, path))
    try:
        ext = {"topic": "Missing"}
        assert (await invoke(node.addr, 105, ext, account=("late", "late-secret"))).code == 16
        path.write_text(path.read_text() + "  - accessKey: late\n    secretKey: late-secret\n")
        os.utime(path, ns=(3, 3))
        for _ in range(200):  # the poll runs every 2 s
            if "late" in node.app.app[AUTHORIZER].acl.accounts:
                break
            await asyncio.sleep(0.05)
        assert (await invoke(node.addr, 105, ext, account=("late", "late-secret"))).code == 17
    finally:
        await close_client(node.app)


async def test_a_bad_admin_allow_from_stops_start_up(settings: Settings) -> None:
    app = create_app(dataclasses.replace(settings, adminAllowFrom="10.0.0.0/8,not-a-network"))
    client: TestClient[Any, Any] = TestClient(TestServer(app))
    try:
        with pytest.raises(
            ConfigError,
            match="^adminAllowFrom: '10.0.0.0/8,not-a-network': 'not-a-network' is not a CIDR block$",
        ):
            await client.start_server()
    finally:
        await client.close()


async def test_namesrv_sim_signs_every_request_with_an_account(
    enforcing: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NAMESRV_SIM_SECRET_KEY", PLAIN[1])
    args = ["--namesrv", enforcing.addr, "--brokers", "1", "--topics", "3", "--heartbeat", "0.2"]
    args += ["--period", "0.3", "--duration", "0.7", "--access-key", PLAIN[0]]
    assert await asyncio.get_running_loop().run_in_executor(None, sim_main, args) == 0
    counts = await decisions(enforcing)
    assert [k for k in counts if 'result="allowed"' not in k] == []  # registrations, beats, unregister
    assert counts['{mode="enforcing",reason="signed",result="allowed"}'] >= 4.0


async def test_a_reconnected_sim_broker_still_signs_as_its_account(enforcing: Node) -> None:
    """namesrv-sim reconnects after a dropped connection: the new connection must keep signing,
    or an enforcing worker refuses every request from then on and the broker retries forever."""
    first = await RemotingClient.connect(enforcing.addr, version=399, language="CPP", credentials=PLAIN)
    first.abort()
    again = await first.reopen(enforcing.addr)
    try:
        assert (again.version, again.language, again.credentials) == (399, "CPP", PLAIN)
        reply = await again.invoke(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "NoSuchTopic"})
        assert reply.code == ResponseCode.TOPIC_NOT_EXIST  # signed and admitted, then not found
    finally:
        again.abort()


# ---- UNREGISTER_BROKER: only the broker itself, or an admin (#25 row 5) ----
ELSEWHERE = "10.1.1.1:10911"  # a broker that does not run on the tests' own address
UNREGISTER = RequestCode.UNREGISTER_BROKER
NOT_OWNER = (
    f"not the broker's: request code 104 for {ELSEWHERE} is accepted only from the broker (the "
    "connection that registered it, its own address, globalWhiteRemoteAddresses) or an admin account"
)


def unregister_fields() -> dict[str, str]:
    return {
        "clusterName": "DefaultCluster",
        "brokerAddr": ELSEWHERE,
        "brokerName": "broker-x",
        "brokerId": "0",
    }


async def register_elsewhere(addr: str) -> RemotingClient:
    c = await RemotingClient.connect(addr)
    b = SimBroker(c, "DefaultCluster", "broker-x", ELSEWHERE, topics=topic_configs(["TopicX", "TBW102"]))
    body = b.body()
    reply = await c.invoke(RequestCode.REGISTER_BROKER, signed_fields(*PLAIN, b.header(body), body), body)
    assert reply.code == 0, reply.remark
    return c


async def route_code(addr: str, topic: str = "TopicX") -> int:
    return (await invoke(addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}, account=PLAIN)).code


async def test_an_app_account_cannot_unregister_someone_elses_broker(
    enforcing: Node, redis_url: str, namespace: str
) -> None:
    owner = await register_elsewhere(enforcing.addr)
    try:
        before = await snapshot(redis_url, namespace)
        reply = await invoke(enforcing.addr, UNREGISTER, unregister_fields(), account=PLAIN)
        assert (reply.code, reply.remark) == (16, NOT_OWNER)
        assert await snapshot(redis_url, namespace) == before
        assert await route_code(enforcing.addr) == 0
        assert (await decisions(enforcing)).get('{mode="enforcing",reason="not_owner",result="refused"}') == 1
        # the admin account may
        reply = await invoke(enforcing.addr, UNREGISTER, unregister_fields(), account=ADMIN)
        assert reply.code == 0
        assert await route_code(enforcing.addr) == 17
    finally:
        await owner.aclose()


async def test_the_connection_that_registered_a_broker_may_unregister_it(enforcing: Node) -> None:
    owner = await register_elsewhere(enforcing.addr)
    try:
        reply = await owner.invoke(UNREGISTER, signed_fields(*PLAIN, unregister_fields()))
        assert (reply.code, reply.remark) == (0, None)
        assert await route_code(enforcing.addr) == 17
    finally:
        await owner.aclose()


async def test_an_app_account_cannot_unregister_over_http_either(enforcing: Node) -> None:
    owner = await register_elsewhere(enforcing.addr)
    try:
        path = "/v1/brokers/unregister"
        body = orjson.dumps(
            {
                "clusterName": "DefaultCluster",
                "brokerAddr": ELSEWHERE,
                "brokerName": "broker-x",
                "brokerId": 0,
            }
        )
        headers = {"Content-Type": "application/json"}
        resp = await enforcing.app.post(
            path,
            data=body,
            headers={**headers, "Authorization": authorization_header(*PLAIN, "POST", path, body=body)},
        )
        assert (resp.status, await resp.json()) == (403, {"code": 16, "remark": NOT_OWNER})
        assert await route_code(enforcing.addr) == 0
    finally:
        await owner.aclose()


async def test_without_acl_anyone_may_unregister_a_broker_as_in_java(node_default: Node) -> None:
    owner = await RemotingClient.connect(node_default.addr)
    try:
        await SimBroker(
            owner, "DefaultCluster", "broker-x", ELSEWHERE, topics=topic_configs(["TopicX", "T2"])
        ).register()
        reply = await invoke(node_default.addr, UNREGISTER, unregister_fields())
        assert reply.code == 0
        assert (
            await invoke(node_default.addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicX"})
        ).code == 17
    finally:
        await owner.aclose()


async def test_the_console_works_with_acl_on_without_an_account_and_shows_no_secret(enforcing: Node) -> None:
    """#30: the console is read-only: with ACL enforcing it needs no account, and what it reads
    holds no access key, secret or signature (a signed registration's included)."""
    conn = await register_signed(enforcing.addr, PLAIN)
    try:
        client = enforcing.app
        page = await client.get("/ui")
        assert page.status == 200 and "namesrv console" in await page.text()
        overview = await client.get("/v1/console/overview")
        assert overview.status == 200
        text = await overview.text()
        assert "broker-a" in text
        topics = await client.get("/v1/console/topics", params={"filter": "Topic"})
        assert topics.status == 200
        assert [t["topic"] for t in (await topics.json())["topics"]] == ["TopicTest"]
        for secret in (*ADMIN, *PLAIN, FENCED[1], "Signature", "AccessKey"):
            assert secret not in text
    finally:
        await conn.aclose()
