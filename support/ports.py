"""Free TCP ports for servers started by the tests and the bench, safe under parallel runs.

A port found by binding port 0 lies in the kernel's ephemeral range: between finding it and the
server binding it, any outgoing connection (to Redis, say) may take it as its local port, and a
second xdist worker may be handed the same one. So ports come from below the ephemeral range, from
a block of their own per xdist worker (``PYTEST_XDIST_WORKER=gwN``), starting at a random place
in the block (two test runs side by side rarely meet), each one checked free by binding it.
"""

from __future__ import annotations

import itertools
import os
import random
import re
import socket
import threading
from collections.abc import Iterator

LOWEST = 15000
BLOCK = 1500  # ports per xdist worker: 10 workers below 32768, the usual ephemeral floor


def _ephemeral_floor() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _worker_index() -> int:
    match = re.fullmatch(r"gw(\d+)", os.environ.get("PYTEST_XDIST_WORKER", ""))
    return int(match.group(1)) if match else 0


def _block() -> range:
    floor = _ephemeral_floor()
    blocks = max(1, (floor - LOWEST) // BLOCK)
    start = LOWEST + (_worker_index() % blocks) * BLOCK
    return range(start, min(start + BLOCK, floor))


_BLOCK = _block()
_lock = threading.Lock()
_offset = random.randrange(len(_BLOCK))  # where this process starts in its block
_next: Iterator[int] = itertools.cycle([*_BLOCK[_offset:], *_BLOCK[:_offset]])


def _bindable(port: int, host: str) -> bool:
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on now, outside the ephemeral range, not handed out before by this process
    (until the block wraps around)."""
    with _lock:
        for _ in range(len(_BLOCK)):
            port = next(_next)
            if _bindable(port, host):
                return port
    raise RuntimeError(f"no free port in {_BLOCK.start}-{_BLOCK.stop - 1}")
