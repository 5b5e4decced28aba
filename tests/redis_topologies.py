"""Redis Sentinel and Redis Cluster set-ups for the tests, from the installed redis-server."""

from __future__ import annotations

import contextlib
import random
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import redis

from namesrv.config import Settings
from namesrv.procs import die_with_parent
from namesrv.store.embedded import find_redis_server
from support.ports import free_port
from tests.polling import wait_until


def _start(args: list[str], cwd: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [find_redis_server(), *args],
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=die_with_parent(),  # no stray server when a test run is killed
    )


def _wait(check: Callable[[], object], what: str, timeout: float = 20.0) -> None:
    """Wait for a server to come up: a Redis error (still loading, not linked yet) means not yet."""

    def up() -> object:
        try:
            return check()
        except redis.RedisError:
            return False

    wait_until(up, timeout, what=f"{what} up")


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


@contextlib.contextmanager
def sentinel_setup(replicas: int = 1) -> Iterator[tuple[str, int, int, int]]:
    """A master, ``replicas`` replicas and one Sentinel: yields (url, master port, first replica's
    port, sentinel port)."""
    with tempfile.TemporaryDirectory(prefix="namesrv-sentinel-") as tmp:
        root = Path(tmp)
        master, sentinel = free_port(), free_port()
        ports = [free_port() for _ in range(replicas)]
        replica = ports[0]
        common = ["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        procs = [_start(["--port", str(master), *common], root)]
        for port in ports:
            follow = ["--replicaof", "127.0.0.1", str(master)]
            procs.append(_start(["--port", str(port), *follow, *common], root))
        conf = root / "sentinel.conf"
        conf.write_text(
            f"port {sentinel}\nbind 127.0.0.1\ndir {root}\n"
            f"sentinel monitor mymaster 127.0.0.1 {master} 1\n"
            "sentinel down-after-milliseconds mymaster 2000\nsentinel failover-timeout mymaster 5000\n"
        )
        procs.append(_start([str(conf), "--sentinel"], root))
        try:
            for port in ports:
                _wait(lambda port=port: _linked(port), "replica")
            s = redis.Redis(port=sentinel)
            _wait(lambda: len(s.execute_command("SENTINEL", "REPLICAS", "mymaster")) == replicas, "sentinel")
            s.close()
            yield f"redis+sentinel://127.0.0.1:{sentinel}/mymaster/0", master, replica, sentinel
        finally:
            _stop(procs)


def _linked(port: int) -> bool:
    r = redis.Redis(port=port)
    try:
        return bool(r.info("replication")["master_link_status"] == "up")
    finally:
        r.close()


def _cluster_port() -> int:
    """A free port whose cluster-bus port (port + 10000) is free and valid too."""
    for _ in range(200):
        port = random.randint(20000, 55000)
        with contextlib.ExitStack() as stack:
            try:
                for candidate in (port, port + 10000):
                    sock = stack.enter_context(socket.socket())
                    sock.bind(("127.0.0.1", candidate))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port pair for a cluster node")


@contextlib.contextmanager
def cluster_setup(nodes: int = 3) -> Iterator[str]:
    """A Redis Cluster of ``nodes`` masters: yields its redis+cluster:// URL."""
    with tempfile.TemporaryDirectory(prefix="namesrv-cluster-") as tmp:
        root = Path(tmp)
        ports = [_cluster_port() for _ in range(nodes)]
        procs = []
        for port in ports:
            (root / str(port)).mkdir()
            procs.append(
                _start(
                    [
                        "--port",
                        str(port),
                        "--bind",
                        "127.0.0.1",
                        "--cluster-enabled",
                        "yes",
                        "--cluster-config-file",
                        "nodes.conf",
                        "--save",
                        "",
                        "--appendonly",
                        "no",
                    ],
                    root / str(port),
                )
            )
        try:
            for port in ports:
                r = redis.Redis(port=port)
                _wait(r.ping, f"cluster node {port}")
                r.close()
            cli = shutil.which("redis-cli")
            if cli is None:
                raise RuntimeError("redis-cli is needed to create a cluster")
            subprocess.run(
                [
                    cli,
                    "--cluster",
                    "create",
                    *(f"127.0.0.1:{p}" for p in ports),
                    "--cluster-replicas",
                    "0",
                    "--cluster-yes",
                ],
                check=True,
                capture_output=True,
            )
            r = redis.Redis(port=ports[0])
            _wait(lambda: r.cluster("info")["cluster_state"] == "ok", "cluster")
            r.close()
            yield "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in ports)
        finally:
            _stop(procs)


def topology_settings(url: str) -> Settings:
    return Settings(
        redisUrl=url,
        namespace=f"t-{uuid.uuid4().hex[:8]}",
        httpPort=0,
        remotingPort=0,
        listenHost="127.0.0.1",
        scanNotActiveBrokerInterval=200,
        registerChunkTopics=40,
        allowRemoteConfigUpdate=True,
    )
