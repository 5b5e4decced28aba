"""Commands packed by hiredis' C packer are byte for byte what redis-py's own packer sends."""

from __future__ import annotations

from typing import Any

import pytest
from redis.asyncio.connection import Connection
from redis.exceptions import DataError

from namesrv.store.redis_client import FastConnection


def packed(conn: Connection, *args: Any) -> bytes:
    return b"".join(bytes(part) for part in conn.pack_command(*args))


@pytest.mark.parametrize(
    "args",
    [
        ("EVALSHA", "a" * 40, 2, "{ns}:topic:T", "{ns}:topics", "brokér", b"\x00raw", 7, -1),
        ("SET", "k", memoryview(b"a view")),
        ("SCRIPT LOAD", "return 1"),  # a multi-word name: split into its words
        ("HSET", "k", "f", "x" * 200_000),  # past redis-py's buffer cutoff
    ],
)
def test_same_bytes_as_redis_py(args: tuple[Any, ...]) -> None:
    assert packed(FastConnection(), *args) == packed(Connection(), *args)


@pytest.mark.parametrize("bad", [None, True])
def test_what_redis_refuses_is_refused_with_its_error(bad: Any) -> None:
    with pytest.raises(DataError):
        FastConnection().pack_command("SET", "k", bad)
