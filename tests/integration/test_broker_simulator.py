"""``namesrv-sim`` behaves like a broker when things go wrong: it reconnects after a dropped
connection or a failed registration, and its exit status says whether every broker registered."""

from __future__ import annotations

import asyncio
import dataclasses

import orjson
import pytest
from redis.asyncio import Redis

from namesrv.config import Settings
from namesrv.keys import REMOTING, WORKER
from namesrv.sim.cli import build_parser, simulate
from namesrv.sim.cli import main as sim_main
from namesrv.store.keyspace import Keyspace
from support.ports import free_port
from tests.conftest import close_client, start_client
from tests.polling import eventually

MEMBER = "SimCluster/127.0.0.1:10911"


async def via(redis: Redis, namespace: str) -> str | None:
    raw = await redis.hget(Keyspace(namespace).live, MEMBER)
    return None if raw is None else str(orjson.loads(raw)["via"])


async def test_reconnects_to_a_restarted_worker_and_registers_again(
    settings: Settings, redis: Redis, namespace: str
) -> None:
    port = free_port()
    fixed = dataclasses.replace(settings, remotingPort=port)
    first = await start_client(fixed)
    args = build_parser().parse_args(
        [
            "--namesrv",
            f"127.0.0.1:{port}",
            "--brokers",
            "1",
            "--topics",
            "3",
            "--period",
            "0.2",
            "--duration",
            "4",
        ]
    )
    run = asyncio.create_task(simulate(args))
    try:
        first_id = first.app[WORKER].worker_id

        async def registered_with_first() -> bool:
            return await via(redis, namespace) == first_id

        await eventually(registered_with_first)
        await close_client(first)  # drops the simulator's connection
        second = await start_client(fixed)
        try:
            second_id = second.app[WORKER].worker_id

            async def registered_with_second() -> bool:
                return await via(redis, namespace) == second_id

            await eventually(registered_with_second)
            outcome = await run
        finally:
            await close_client(second)
    finally:
        run.cancel()
    assert (outcome.never_registered, outcome.errors) == ([], [])
    assert outcome.retries >= 1
    assert await redis.hget(Keyspace(namespace).live, MEMBER) is None  # it unregistered at the end


async def test_exits_1_when_a_broker_never_registers(
    settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every registration is refused (a cluster name over 255 characters): the simulator keeps
    retrying until the end, then says which broker never registered and exits 1."""
    worker = await start_client(settings)
    try:
        args = ["--namesrv", f"127.0.0.1:{worker.app[REMOTING].port}", "--brokers", "1", "--topics", "2"]
        args += ["--cluster", "c" * 300, "--period", "0.2", "--duration", "0.8"]
        code = await asyncio.get_running_loop().run_in_executor(None, sim_main, args)
    finally:
        await close_client(worker)
    assert code == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("namesrv-sim: sim-broker-0 127.0.0.1:10911: REGISTER_BROKER answered 1: ")
    assert err[0].endswith("; retrying in 0.5 s")
    assert err[-1] == "namesrv-sim: 1 broker(s) never registered: sim-broker-0/127.0.0.1:10911"


def test_exits_1_when_the_nameserver_is_unreachable(capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port()
    assert sim_main(["--namesrv", f"127.0.0.1:{port}", "--duration", "0.1"]) == 1
    assert capsys.readouterr().err.startswith(f"namesrv-sim: cannot reach 127.0.0.1:{port}: ")


def test_one_topic_is_refused_up_front(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        sim_main(["--topics", "1"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.endswith(
        "error: --topics 1 is refused by the NameServer (a first registration needs 0 or 2+ topics)\n"
    )
