"""The chart's admin policy against a real worker process: with its default ``adminAllowFrom``
(loopback only) a peer on the pod network registers, heartbeats and reads as before but cannot
wipe write permission, delete topics or change KV config; ``namesrv admin`` run next to the worker
(as `kubectl exec` runs it) can, and so can mqadmin's requests arriving from loopback (as
`kubectl port-forward` delivers them)."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import tomllib
from pathlib import Path

import aiohttp
import orjson
import pytest

from namesrv.procs import die_with_parent
from namesrv.sim.broker import SimBroker, topic_configs
from namesrv.sim.client import RemotingClient
from tests.helm.chart import render
from tests.integration.test_lifecycle import Worker
from tests.integration.test_tls import Pki, pki  # noqa: F401 (pki: a fixture)

WIPE_WRITE_PERM, ROUTE, CLUSTER, GET_KV, PUT_KV, CONFIG = 205, 105, 106, 101, 100, 319
NO_PERMISSION = 16


def pod_address() -> str:
    """A non-loopback address of this machine: what a worker sees from another pod."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("198.51.100.1", 9))  # no packet is sent: this only picks the outgoing address
        address: str = probe.getsockname()[0]
    except OSError:
        address = ""
    finally:
        probe.close()
    if not address or address.startswith("127."):
        pytest.skip("this machine has no non-loopback IPv4 address")
    return address


async def namesrv_admin(
    worker: Worker, *args: str, env: dict[str, str] | None = None
) -> tuple[int, str, str]:
    env = {**os.environ, **(env or {}), "NAMESRV_HTTP_PORT": str(worker.http)}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "namesrv",
        "admin",
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        preexec_fn=die_with_parent(),
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def perms(route_body: bytes | None) -> list[int]:
    assert route_body is not None
    return sorted(q["perm"] for q in orjson.loads(route_body)["queueDatas"])


async def test_chart_default_admin_policy_with_namesrv_admin(
    redis_url: str, namespace: str, tmp_path: Path
) -> None:
    pod = pod_address()
    chart_allow = tomllib.loads(render().config_toml)["adminAllowFrom"]
    env = {
        "NAMESRV_REDIS_URL": redis_url,
        "NAMESRV_NAMESPACE": namespace,
        "NAMESRV_ADMIN_ALLOW_FROM": chart_allow,
    }
    worker = Worker(env, tmp_path)
    worker.env["NAMESRV_LISTEN_HOST"] = "0.0.0.0"  # reachable from the pod address too
    await worker.start()
    try:
        # ---- a broker and a client on the pod network ----
        client = await RemotingClient.connect(f"{pod}:{worker.remoting}")
        broker = SimBroker(
            client, "DefaultCluster", "broker-a", "127.0.0.1:10911", topics=topic_configs(["T1", "T2"])
        )
        assert (await broker.register()).code == 0
        broker.heartbeat()
        assert (await broker.query_data_version()).code == 0
        route = await client.invoke(ROUTE, {"topic": "T1"})
        assert (route.code, perms(route.body)) == (0, [6])
        assert (await client.invoke(CLUSTER)).code == 0
        assert (await client.invoke(GET_KV, {"namespace": "NS", "key": "k"})).code == 22  # not found
        assert (await client.invoke(CONFIG)).code == 0
        # ---- but no admin request ----
        wipe = await client.invoke(WIPE_WRITE_PERM, {"brokerName": "broker-a"})
        kv = await client.invoke(PUT_KV, {"namespace": "NS", "key": "k", "value": "v"})
        assert (wipe.code, kv.code) == (NO_PERMISSION, NO_PERMISSION)
        assert wipe.remark is not None and f"{pod} is not in it" in wipe.remark
        async with (
            aiohttp.ClientSession() as session,
            session.post(f"http://{pod}:{worker.http}/v1/brokers/broker-a/wipe-write-perm") as resp,
        ):
            assert resp.status == 403
        code, _, err = await namesrv_admin(
            worker, "--url", f"http://{pod}:{worker.http}", "kv-put", "NS", "k", "v"
        )
        assert code == 1 and "namesrv admin: refused (HTTP 403): address not allowed" in err
        # ---- namesrv admin next to the worker: loopback ----
        code, out, err = await namesrv_admin(worker, "wipe-write-perm", "broker-a")
        assert (code, orjson.loads(out), err) == (0, {"code": 0, "wipeTopicCount": 2}, "")
        assert perms((await client.invoke(ROUTE, {"topic": "T1"})).body) == [4]
        code, out, _ = await namesrv_admin(worker, "add-write-perm", "broker-a")
        assert (code, orjson.loads(out)) == (0, {"code": 0, "addTopicCount": 2})
        assert perms((await client.invoke(ROUTE, {"topic": "T1"})).body) == [6]
        code, out, _ = await namesrv_admin(worker, "kv-put", "ORDER_TOPIC_CONFIG", "T1", "broker-a:8")
        assert (code, orjson.loads(out)) == (0, {"code": 0})
        kv_read = await client.invoke(GET_KV, {"namespace": "ORDER_TOPIC_CONFIG", "key": "T1"})
        assert kv_read.ext_fields == {"value": "broker-a:8"}
        code, out, _ = await namesrv_admin(worker, "kv-delete", "ORDER_TOPIC_CONFIG", "T1")
        assert (code, orjson.loads(out)) == (0, {"code": 0, "deleted": True})
        code, out, _ = await namesrv_admin(worker, "delete-topic", "T2", "--cluster", "DefaultCluster")
        assert (code, orjson.loads(out)) == (0, {"code": 0, "removedQueues": 1})
        assert (await client.invoke(ROUTE, {"topic": "T2"})).code == 17
        code, _, err = await namesrv_admin(worker, "update-config", "enableTopicList=false")
        assert code == 1 and "remote config update is disabled" in err
        # ---- mqadmin through a port-forward: its requests arrive from loopback ----
        async with await RemotingClient.connect(f"127.0.0.1:{worker.remoting}") as forwarded:
            assert (await forwarded.invoke(WIPE_WRITE_PERM, {"brokerName": "broker-a"})).code == 0
        assert (await broker.unregister()).code == 0
        await client.aclose()
    finally:
        code, output = await worker.stop()
    assert code == 0, output


async def test_namesrv_admin_says_when_no_worker_answers(tmp_path: Path) -> None:
    from support.ports import free_port

    worker = Worker({}, tmp_path)  # never started: nothing listens on its ports
    worker.http = free_port()
    code, out, err = await namesrv_admin(worker, "wipe-write-perm", "broker-a")
    assert (code, out) == (3, "")
    assert f"namesrv admin: no worker answers at http://127.0.0.1:{worker.http}:" in err


async def test_namesrv_admin_speaks_tls_when_the_worker_enforces_it(
    redis_url: str,
    namespace: str,
    tmp_path: Path,
    pki: Pki,  # noqa: F811
) -> None:
    tls = {
        "NAMESRV_TLS_MODE": "enforcing",
        "NAMESRV_TLS_CERT_FILE": str(pki.cert),
        "NAMESRV_TLS_KEY_FILE": str(pki.key),
    }
    worker = Worker({"NAMESRV_REDIS_URL": redis_url, "NAMESRV_NAMESPACE": namespace, **tls}, tmp_path)
    await worker.start(wait_ready=False)
    try:
        code, out, err = 3, "", ""
        for _ in range(100):  # until the worker's HTTPS port answers
            code, out, err = await namesrv_admin(worker, "kv-put", "NS", "k", "v", env=tls)
            if code != 3:
                break
            await asyncio.sleep(0.1)
        assert (code, out, err) == (0, '{"code":0}\n', "")
    finally:
        code, output = await worker.stop()
    assert code == 0, output
