"""TLS on the remoting and HTTP ports: permissive (one port, both), enforcing, client certificates,
and certificates reloaded for new connections. Certificates are made at run time with trustme."""

from __future__ import annotations

import asyncio
import dataclasses
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import trustme
from aiohttp import web

from namesrv.app import create_app
from namesrv.config import ConfigError, Settings
from namesrv.keys import REMOTING
from namesrv.sim.client import RemotingClient, RemotingClientError
from namesrv.tls import TLS, TlsSite
from tests.conftest import close_client, start_client

CLUSTER_INFO = 106


@dataclasses.dataclass
class Pki:
    ca: trustme.CA
    cert: Path
    key: Path
    client_ca: Path
    tmp: Path

    def client_context(self, *, with_cert: bool = False, ca: trustme.CA | None = None) -> ssl.SSLContext:
        ctx = ssl.create_default_context()
        self.ca.configure_trust(ctx)
        if with_cert:
            (ca or self.ca).issue_cert("client@example").configure_cert(ctx)
        return ctx

    def rotate(self) -> bytes:
        """Write a new server certificate over the old files; return its DER form."""
        fresh = self.ca.issue_cert("127.0.0.1", "localhost", common_name="rotated")
        fresh.private_key_pem.write_to_path(str(self.key))
        fresh.cert_chain_pems[0].write_to_path(str(self.cert))
        return ssl.PEM_cert_to_DER_cert(fresh.cert_chain_pems[0].bytes().decode())


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    cert, key, client_ca = tmp_path / "tls.crt", tmp_path / "tls.key", tmp_path / "ca.crt"
    server.cert_chain_pems[0].write_to_path(str(cert))
    server.private_key_pem.write_to_path(str(key))
    ca.cert_pem.write_to_path(str(client_ca))
    return Pki(ca, cert, key, client_ca, tmp_path)


def tls_settings(settings: Settings, pki: Pki, mode: str, client_auth: str = "none") -> Settings:
    return dataclasses.replace(
        settings,
        tlsMode=mode,
        tlsCertFile=str(pki.cert),
        tlsKeyFile=str(pki.key),
        tlsClientCaFile=str(pki.client_ca) if client_auth != "none" else "",
        tlsClientAuth=client_auth,
    )


async def connect(port: int, ctx: ssl.SSLContext | None) -> RemotingClient:
    loop = asyncio.get_running_loop()
    _, client = await loop.create_connection(
        RemotingClient, "127.0.0.1", port, ssl=ctx, server_hostname="127.0.0.1" if ctx else None
    )
    return client


async def cluster_code(port: int, ctx: ssl.SSLContext | None) -> int:
    client = await connect(port, ctx)
    try:
        return (await client.invoke(CLUSTER_INFO, timeout=5)).code
    finally:
        await client.aclose()


@pytest.fixture
async def http_site() -> AsyncIterator[Any]:
    """Start the HTTP listener of a TLS-enabled app the way the runner does (TlsSite)."""
    runners: list[web.AppRunner] = []

    async def start(app: web.Application) -> int:
        runner = web.AppRunner(app)
        await runner.setup()
        runners.append(runner)
        site = TlsSite(runner, "127.0.0.1", 0, tls=app.get(TLS), max_pending=100)
        await site.start()
        return site.port

    yield start
    for runner in runners:
        await runner.cleanup()


async def test_permissive_serves_plain_and_tls_on_one_port(
    settings: Settings, pki: Pki, http_site: Any
) -> None:
    node = await start_client(tls_settings(settings, pki, "permissive"))
    try:
        port = node.app[REMOTING].port
        assert await cluster_code(port, None) == 0
        assert await cluster_code(port, pki.client_context()) == 0
    finally:
        await close_client(node)
    app = create_app(tls_settings(settings, pki, "permissive"))
    http = await http_site(app)
    async with aiohttp.ClientSession() as session:
        async with session.get(f"http://127.0.0.1:{http}/livez") as plain:
            assert plain.status == 200
        async with session.get(f"https://127.0.0.1:{http}/livez", ssl=pki.client_context()) as secure:
            assert secure.status == 200


async def test_enforcing_refuses_plain_clients(settings: Settings, pki: Pki, http_site: Any) -> None:
    node = await start_client(tls_settings(settings, pki, "enforcing"))
    try:
        port = node.app[REMOTING].port
        assert await cluster_code(port, pki.client_context()) == 0
        with pytest.raises(RemotingClientError):
            await cluster_code(port, None)
        assert await cluster_code(port, pki.client_context()) == 0  # still serving
    finally:
        await close_client(node)
    http = await http_site(create_app(tls_settings(settings, pki, "enforcing")))
    async with aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.ClientError):
            async with session.get(f"http://127.0.0.1:{http}/livez") as resp:
                await resp.read()
        async with session.get(f"https://127.0.0.1:{http}/livez", ssl=pki.client_context()) as secure:
            assert secure.status == 200


async def test_required_client_certificate(settings: Settings, pki: Pki) -> None:
    node = await start_client(tls_settings(settings, pki, "enforcing", client_auth="require"))
    try:
        port = node.app[REMOTING].port
        assert await cluster_code(port, pki.client_context(with_cert=True)) == 0
        with pytest.raises((RemotingClientError, ssl.SSLError, ConnectionError)):
            await cluster_code(port, pki.client_context())
        with pytest.raises((RemotingClientError, ssl.SSLError, ConnectionError)):
            await cluster_code(port, pki.client_context(with_cert=True, ca=trustme.CA()))  # unknown CA
    finally:
        await close_client(node)


async def test_optional_client_certificate(settings: Settings, pki: Pki) -> None:
    node = await start_client(tls_settings(settings, pki, "permissive", client_auth="optional"))
    try:
        port = node.app[REMOTING].port
        assert await cluster_code(port, pki.client_context()) == 0
        assert await cluster_code(port, pki.client_context(with_cert=True)) == 0
        with pytest.raises((RemotingClientError, ssl.SSLError, ConnectionError)):
            await cluster_code(port, pki.client_context(with_cert=True, ca=trustme.CA()))
    finally:
        await close_client(node)


async def test_new_connections_get_a_rotated_certificate(settings: Settings, pki: Pki) -> None:
    node = await start_client(tls_settings(settings, pki, "enforcing"))
    try:
        port = node.app[REMOTING].port
        tls = node.app[TLS]
        old = await connect(port, pki.client_context())
        old_der = old._transport.get_extra_info("ssl_object").getpeercert(binary_form=True)  # type: ignore[union-attr]
        new_der = pki.rotate()
        assert new_der != old_der
        for _ in range(100):  # the watcher checks every 2 s
            if tls.reloads:
                break
            await asyncio.sleep(0.1)
        assert tls.reloads == 1
        fresh = await connect(port, pki.client_context())
        seen = fresh._transport.get_extra_info("ssl_object").getpeercert(binary_form=True)  # type: ignore[union-attr]
        assert seen == new_der
        assert (await old.invoke(CLUSTER_INFO)).code == 0  # established connections keep working
        assert (await fresh.invoke(CLUSTER_INFO)).code == 0
        await old.aclose()
        await fresh.aclose()
    finally:
        await close_client(node)


async def test_a_half_written_certificate_keeps_the_old_one(settings: Settings, pki: Pki) -> None:
    node = await start_client(tls_settings(settings, pki, "enforcing"))
    try:
        tls = node.app[TLS]
        pki.cert.write_text("-----BEGIN CERTIFICATE-----\ntruncated")
        assert tls.reload_if_changed() is False
        assert await cluster_code(node.app[REMOTING].port, pki.client_context()) == 0
    finally:
        await close_client(node)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"tlsMode": "enforcing"}, "tlsMode=enforcing needs tlsCertFile and tlsKeyFile"),
        (
            {"tlsMode": "permissive", "tlsCertFile": "c", "tlsKeyFile": "k", "tlsClientAuth": "require"},
            "tlsClientAuth=require needs tlsClientCaFile",
        ),
        (
            {"tlsMode": "enforcing", "tlsCertFile": "/nonexistent.crt", "tlsKeyFile": "/nonexistent.key"},
            "cannot load the TLS certificate or key",
        ),
    ],
    ids=["no files", "no ca", "missing files"],
)
def test_bad_tls_configuration_stops_start_up(
    settings: Settings, changes: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        create_app(dataclasses.replace(settings, **changes))


async def test_a_worker_process_in_permissive_mode(redis_url: str, namespace: str, pki: Pki) -> None:
    """The whole start-up path (runner, TlsSite, remoting listener) with TLS from the environment."""
    from tests.integration.test_lifecycle import Worker

    env = {
        "NAMESRV_REDIS_URL": redis_url,
        "NAMESRV_NAMESPACE": namespace,
        "NAMESRV_TLS_MODE": "permissive",
        "NAMESRV_TLS_CERT_FILE": str(pki.cert),
        "NAMESRV_TLS_KEY_FILE": str(pki.key),
    }
    worker = Worker(env, pki.tmp)
    await worker.start()  # waits for plain-HTTP /readyz: permissive serves plain too
    try:
        assert await cluster_code(worker.remoting, None) == 0
        assert await cluster_code(worker.remoting, pki.client_context()) == 0
        async with aiohttp.ClientSession() as session:
            url = f"https://127.0.0.1:{worker.http}/readyz"
            async with session.get(url, ssl=pki.client_context()) as secure:
                assert secure.status == 200
    finally:
        code, output = await worker.stop()
    assert code == 0, output


async def test_a_worker_with_a_missing_certificate_does_not_start(redis_url: str, tmp_path: Path) -> None:
    from tests.integration.test_lifecycle import Worker

    env = {
        "NAMESRV_REDIS_URL": redis_url,
        "NAMESRV_TLS_MODE": "enforcing",
        "NAMESRV_TLS_CERT_FILE": str(tmp_path / "missing.crt"),
        "NAMESRV_TLS_KEY_FILE": str(tmp_path / "missing.key"),
    }
    worker = Worker(env, tmp_path)
    await worker.start(wait_ready=False)
    assert worker.proc is not None
    code = await asyncio.wait_for(worker.proc.wait(), 30)
    output = await worker.output()
    assert code == 1, output
    assert "namesrv: cannot start: cannot load the TLS certificate or key" in output
