"""The worker image, built by docker/build-image.sh and run for real against a loopback Redis.

Every container runs with ``--network host`` (loopback only: no bridge traffic), a read-only root
filesystem and a tmpfs at /tmp, as the chart runs it. Skipped, with the reason, where no Docker
engine answers; `make image-test` runs this module alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import time
import tomllib
import urllib.error
import urllib.request
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

from namesrv.protocol.lenient_json import loads
from namesrv.sim.broker import SimBroker, topic_configs
from namesrv.sim.client import RemotingClient
from namesrv.store.keyspace import Keyspace
from support.ports import free_port
from tests.helm.chart import ROOT
from tests.redis_server import local_redis

pytestmark = [pytest.mark.image, pytest.mark.slow, pytest.mark.timeout(900)]

IMAGE_USER = "10001:10001"
SIZE_TARGET_BYTES = 200_000_000
SHUTDOWN_SECONDS = 3  # the worker's drain budget here; the grace period adds 5 s as the chart does
GRACE_SECONDS = SHUTDOWN_SECONDS + 5
BROKER_ADDR = "127.0.0.1:10911"


def docker(*args: str, timeout: float = 60, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(f"docker {' '.join(args)}: exit {result.returncode}\n{result.stderr}")
    return result


def engine_problem() -> str | None:
    """Why no Docker engine can be used here, or None when one answers."""
    if shutil.which("docker") is None:
        return "no docker CLI on PATH"
    try:
        info = docker("info", "--format", "{{.ServerVersion}}", timeout=20, check=False)
    except subprocess.TimeoutExpired:
        return "the Docker engine did not answer `docker info` within 20 s"
    if info.returncode != 0 or not info.stdout.strip():
        lines = (info.stderr.strip() or "no output").splitlines()
        return f"no Docker engine answers (docker info: {lines[-1]})"
    return None


DEFAULT_BASE = "python:3.11-slim-bookworm"  # docker/build-image.sh's choices, in its order
LOCAL_BASE = "namesrv-base:bookworm-py3.11"


def _have_image(tag: str) -> bool:
    return docker("image", "inspect", tag, timeout=30, check=False).returncode == 0


def _pulled(tag: str) -> bool:
    try:
        return docker("pull", "--quiet", tag, timeout=60, check=False).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def _install_debootstrap() -> None:
    """As root on Debian/Ubuntu without debootstrap: install it (docker/make-base.sh needs it)."""
    if shutil.which("debootstrap") or os.geteuid() != 0 or not shutil.which("apt-get"):
        return
    with contextlib.suppress(subprocess.TimeoutExpired, OSError):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-qq"], capture_output=True, timeout=300, env=env, check=False)
        subprocess.run(
            ["apt-get", "install", "-y", "-qq", "debootstrap"],
            capture_output=True,
            timeout=300,
            env=env,
            check=False,
        )


def base_image() -> tuple[str | None, str]:
    """The base image the build will use (BASE_IMAGE, the default one present or pulled, else one
    made here from Debian packages), or None and why none can be had."""
    if os.environ.get("BASE_IMAGE"):
        return os.environ["BASE_IMAGE"], ""
    if _have_image(DEFAULT_BASE) or _pulled(DEFAULT_BASE):
        return DEFAULT_BASE, ""
    _install_debootstrap()
    made = subprocess.run(
        [str(ROOT / "docker" / "make-base.sh"), LOCAL_BASE],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
    )
    if made.returncode == 0:
        return LOCAL_BASE, ""
    said = (made.stderr.strip() or made.stdout.strip() or f"exit {made.returncode}").splitlines()[-1]
    return None, f"cannot pull {DEFAULT_BASE} and cannot make a local base ({said})"


@pytest.fixture(scope="module")
def image() -> str:
    problem = engine_problem()
    if problem:
        pytest.skip(f"image tests skipped: {problem}; start dockerd to run them (docs/kubernetes.md)")
    base, why = base_image()
    if base is None:
        pytest.skip(f"image tests skipped: {why}; set BASE_IMAGE=<a python 3.11 image> to run them")
    build = subprocess.run(
        [str(ROOT / "docker" / "build-image.sh")],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
        env={**os.environ, "BASE_IMAGE": base},
    )
    assert build.returncode == 0, f"image build failed:\n{build.stderr[-4000:]}"
    tag = build.stdout.strip().splitlines()[-1]
    assert tag.startswith("namesrv-fleet:"), build.stdout
    return tag


@dataclass
class Container:
    name: str
    http: int
    remoting: int

    @property
    def remoting_addr(self) -> str:
        return f"127.0.0.1:{self.remoting}"

    def get(self, path: str) -> tuple[int, dict[str, Any]]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.http}{path}", timeout=5) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    def inspect(self) -> dict[str, Any]:
        found: list[dict[str, Any]] = json.loads(docker("inspect", self.name).stdout)
        return found[0]

    def logs(self) -> str:
        out = docker("logs", self.name, check=False)
        return out.stdout + out.stderr

    def wait_ready(self) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if not self.inspect()["State"]["Running"]:
                raise AssertionError(f"container exited:\n{self.logs()}")
            try:
                if self.get("/readyz")[0] == 200:
                    return
            except (OSError, ValueError):
                pass
            time.sleep(0.2)
        raise AssertionError(f"container did not become ready:\n{self.logs()}")

    def exec(self, *command: str) -> subprocess.CompletedProcess[str]:
        return docker("exec", self.name, *command, check=False)


@pytest.fixture(scope="module")
def loopback_redis() -> Iterator[str]:
    """A redis-server of our own on a loopback port: the containers share the host's network."""
    with local_redis() as url:
        yield url


@pytest.fixture
def run(image: str, loopback_redis: str, namespace: str) -> Iterator[Any]:
    """Start containers of the image on the test's Redis and namespace; removed afterwards."""
    started: list[Container] = []

    def start() -> Container:
        c = Container(f"namesrv-test-{uuid.uuid4().hex[:10]}", free_port(), free_port())
        env = {
            "NAMESRV_REDIS_URL": loopback_redis,
            "NAMESRV_NAMESPACE": namespace,
            "NAMESRV_LISTEN_HOST": "127.0.0.1",
            "NAMESRV_HTTP_PORT": str(c.http),
            "NAMESRV_REMOTING_PORT": str(c.remoting),
            "NAMESRV_SHUTDOWN_TIMEOUT_SECONDS": str(SHUTDOWN_SECONDS),
        }
        docker(
            "run", "--detach", "--name", c.name, "--network", "host",
            "--read-only", "--tmpfs", "/tmp:rw,size=16m",
            "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
            # the image's own HEALTHCHECK command, probed sooner than its 10 s interval
            "--health-interval", "1s", "--health-start-period", "0s",
            *[arg for key, value in env.items() for arg in ("--env", f"{key}={value}")],
            image,
        )  # fmt: skip
        started.append(c)
        c.wait_ready()
        return c

    yield start
    for c in started:
        docker("rm", "--force", c.name, check=False)


@pytest.fixture
async def brokers() -> AsyncIterator[Callable[..., Awaitable[None]]]:
    """Register brokers over remoting; each keeps its connection open for the test (a broker's
    connection closing removes it, as in Java), closed afterwards."""
    connections: list[RemotingClient] = []

    async def register(c: Container, name: str = "broker-a", addr: str = BROKER_ADDR) -> None:
        conn = await RemotingClient.connect(c.remoting_addr)
        connections.append(conn)
        # two topics: a first registration carrying exactly one is refused (R7)
        broker = SimBroker(
            conn, "DefaultCluster", name, BROKER_ADDR, topics=topic_configs(["TopicTest", "TBW102"])
        )
        reply = await broker.register()
        assert reply.code == 0, reply.remark

    yield register
    for conn in connections:
        conn.abort()


async def route(c: Container, topic: str = "TopicTest") -> dict[str, Any]:
    async with await RemotingClient.connect(c.remoting_addr) as conn:
        reply = await conn.invoke(105, {"topic": topic})  # GET_ROUTEINFO_BY_TOPIC
    assert reply.code == 0, reply.remark
    body: dict[str, Any] = loads(reply.body or b"")
    return body


def test_image_labels_user_health_check_and_size(image: str) -> None:
    [found] = json.loads(docker("image", "inspect", image).stdout)
    config = found["Config"]
    with (ROOT / "pyproject.toml").open("rb") as fh:
        version = tomllib.load(fh)["project"]["version"]
    labels = config["Labels"]
    assert labels["org.opencontainers.image.version"] == version
    assert labels["org.opencontainers.image.title"] == "namesrv-fleet"
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=ROOT
    ).stdout.strip()
    assert labels["org.opencontainers.image.revision"] == head
    assert image.split(":")[1].startswith(f"{version}-{head[:12]}")
    assert config["User"] == IMAGE_USER
    assert config["Entrypoint"] == ["namesrv"]
    assert "/livez" in " ".join(config["Healthcheck"]["Test"])
    assert found["Size"] < SIZE_TARGET_BYTES, f"image is {found['Size'] / 1e6:.0f} MB"


async def test_serves_remoting_from_outside_as_non_root_on_a_read_only_root(run: Any, brokers: Any) -> None:
    c: Container = run()
    status, ready = c.get("/readyz")
    assert status == 200 and ready["status"] == "ready" and ready["embeddedRedis"] is False

    await brokers(c)
    body = await route(c)
    assert [(b["brokerName"], b["brokerAddrs"]) for b in body["brokerDatas"]] == [
        ("broker-a", {"0": BROKER_ADDR})
    ]
    assert [(q["brokerName"], q["readQueueNums"], q["writeQueueNums"]) for q in body["queueDatas"]] == [
        ("broker-a", 8, 8)
    ]

    check_non_root_read_only_and_healthy(c)


def check_non_root_read_only_and_healthy(c: Container) -> None:
    state = c.inspect()
    assert state["Config"]["User"] == IMAGE_USER and state["HostConfig"]["ReadonlyRootfs"] is True
    # The worker process itself, seen from the host: real, effective, saved and fs uid all 10001.
    status_lines = Path(f"/proc/{state['State']['Pid']}/status").read_text().splitlines()
    uid_line = next(line for line in status_lines if line.startswith("Uid:"))
    assert uid_line.split()[1:] == ["10001"] * 4
    assert c.exec("id", "-u").stdout.strip() == "10001"
    for path in ("/opt/namesrv/probe", "/var/lib/namesrv/probe", "/etc/probe"):
        denied = c.exec("python", "-c", f"open({path!r}, 'w')")
        assert denied.returncode != 0 and "Read-only file system" in denied.stderr, path
    assert c.exec("python", "-c", "open('/tmp/probe', 'w').write('ok')").returncode == 0  # the declared tmpfs

    deadline = time.monotonic() + 30
    while c.inspect()["State"]["Health"]["Status"] != "healthy":
        assert time.monotonic() < deadline, c.inspect()["State"]["Health"]
        time.sleep(0.5)


async def test_a_second_container_on_the_same_redis_serves_the_same_routes(run: Any, brokers: Any) -> None:
    first, second = run(), run()
    await brokers(first)
    assert await route(second) == await route(first)
    await brokers(second, "broker-b", "127.0.0.1:10921")
    # The first worker learns of the second's write from the change feed (bounded staleness).
    for _ in range(300):
        if len((await route(first))["brokerDatas"]) == 2:
            break
        await asyncio.sleep(0.1)
    names = sorted(b["brokerName"] for b in (await route(first))["brokerDatas"])
    assert names == ["broker-a", "broker-b"]


async def test_sigterm_drains_and_exits_0_within_the_grace_period(
    run: Any, brokers: Any, loopback_redis: str, namespace: str
) -> None:
    c: Container = run()
    await brokers(c)
    # docker stop sends the image's STOPSIGNAL (SIGTERM) and SIGKILLs after the grace period:
    # exit code 0 (not 137) means the worker drained and stopped by itself in time.
    docker("stop", "--time", str(GRACE_SECONDS), c.name, timeout=GRACE_SECONDS + 30)
    state = c.inspect()["State"]
    logs = c.logs()
    assert (state["ExitCode"], state["OOMKilled"]) == (0, False), logs
    assert "shutdown requested: draining (readiness is now false)" in logs
    assert "worker stopped" in logs
    # A worker's own shutdown never removes its brokers: the next worker still serves them.
    redis = Redis.from_url(loopback_redis)
    try:
        assert await redis.hexists(Keyspace(namespace).live, f"DefaultCluster/{BROKER_ADDR}")
    finally:
        await redis.aclose()
    assert [b["brokerName"] for b in (await route(run()))["brokerDatas"]] == ["broker-a"]
