"""A helper process per worker that confirms, without the worker's GIL, that the change log has
nothing new (issue 26).

The change feed polls on a thread of its own, but a thread still needs the worker's GIL for each
step of a poll. A worker that answers lookups flat out (uvloop's C code releasing and retaking the
GIL around every socket call) keeps handing the GIL back to itself before the waiting poll
thread is even scheduled: CPython forces a switch only when the holder did not let go for a whole
switch interval. On a saturated 2-core machine that starved the poll thread for up to 60-150 ms
(``bench/gil_handoff.py`` reproduces it; a separate process saw at most 14 ms beside the same
load), the worker's knowledge crossed the 100 ms bound, and lookups waited for a catch-up that
only this worker's own busyness made necessary.

The worker writes its own knowledge (the issue time of its last applied poll) to memory it shares
with the probe; while that stays younger than 1.5 poll intervals the probe only looks at it, every
half interval (a fraction of a per cent of a core). Once the worker's knowledge falls behind, the
probe runs ``readChanges`` every poll interval from its own process and writes one record to the
shared memory: when the poll was issued (``time.monotonic``, one clock for every
process on the machine), the registry's instance and the newest change-log entry id at that
moment. The worker reads the record only when its own knowledge is getting old: if it has applied
exactly that entry of that instance, every change committed before the probe's poll has been
applied, so its knowledge is as fresh as the probe's poll (:meth:`ChangeFeed.known_at`). If
anything changed, the ids differ and the worker's own feed must apply it first, as before.

The record carries a CRC: the worker reads it without a lock, and a torn read fails the check
(the worker then trusts its own feed only). The probe gets the Redis URL on stdin, never on its
command line, and prints nothing but failures, without their URL.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import mmap
import os
import struct
import subprocess
import sys
import time
import uuid
import zlib
from collections.abc import Sequence
from typing import NamedTuple

import orjson
import uvloop
from redis.exceptions import RedisError

from namesrv.aio import within
from namesrv.procs import die_with_parent
from namesrv.store.keyspace import Keyspace
from namesrv.store.redis_client import check_server, close_client, make_client
from namesrv.store.script_args import ReadChangesArgs
from namesrv.store.script_call import CallContext
from namesrv.store.scripts import ScriptRegistry, discover

log = logging.getLogger(__name__)

FIELD_BYTES = 64  # an instance id (32 hex chars) or a stream entry id ("<ms>-<seq>") fits
_PAYLOAD = struct.Struct(f"<dQ{FIELD_BYTES}s{FIELD_BYTES}s")
_CRC = struct.Struct("<I")
RECORD_SIZE = _PAYLOAD.size + _CRC.size
_KNOWN = struct.Struct("<d")  # after the record: the worker's own knowledge (monotonic s; 0: none)
SHARED_SIZE = RECORD_SIZE + _KNOWN.size
BEHIND_INTERVALS = 1.5  # the probe polls once the worker's own knowledge is this many intervals old
RETRY_S = 0.05  # between failed polls: the worker's own feed judges outages, not the probe
RESTART_AFTER_S = 5.0  # a probe that died is started again at most this often


class ProbeReading(NamedTuple):
    issued: float  # time.monotonic() when the poll was sent
    instance: str  # the registry's data set then
    newest: str  # the newest change-log entry id then ('0-0': none)
    polls: int = 0  # polls the probe has made so far (for tests and curious operators)


def encode(reading: ProbeReading) -> bytes | None:
    """The shared record for ``reading``; None when a field does not fit (nothing is written)."""
    instance, newest = reading.instance.encode(), reading.newest.encode()
    if len(instance) > FIELD_BYTES or len(newest) > FIELD_BYTES or not instance or not newest:
        return None
    payload = _PAYLOAD.pack(reading.issued, reading.polls, instance, newest)
    return payload + _CRC.pack(zlib.crc32(payload))


def decode(record: bytes) -> ProbeReading | None:
    """The reading in ``record``; None for an empty, torn or foreign record."""
    if len(record) != RECORD_SIZE:
        return None
    payload = record[: _PAYLOAD.size]
    (crc,) = _CRC.unpack_from(record, _PAYLOAD.size)
    if crc != zlib.crc32(payload):
        return None
    issued, polls, instance, newest = _PAYLOAD.unpack(payload)
    if not issued:
        return None
    return ProbeReading(issued, instance.rstrip(b"\0").decode(), newest.rstrip(b"\0").decode(), polls)


class FreshnessProbe:
    """The worker's side: starts the probe process, reads its record, stops it."""

    def __init__(self, redis_url: str, namespace: str, *, interval: float, timeout_s: float) -> None:
        self.redis_url = redis_url
        self.namespace = namespace
        self.interval = interval
        self.timeout_s = timeout_s
        self._fd = -1
        self._map: mmap.mmap | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._started_at = 0.0
        self.restarts = 0

    def start(self) -> None:
        self._fd = os.memfd_create("namesrv-freshness", 0)
        os.ftruncate(self._fd, SHARED_SIZE)
        self._map = mmap.mmap(self._fd, SHARED_SIZE)
        self._spawn()

    def _spawn(self) -> None:
        self._started_at = time.monotonic()
        argv = [
            sys.executable,
            "-m",
            __name__,
            "--fd",
            str(self._fd),
            "--namespace",
            self.namespace,
            "--interval",
            repr(self.interval),
            "--timeout",
            repr(self.timeout_s),
        ]
        proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, pass_fds=(self._fd,), preexec_fn=die_with_parent()
        )
        assert proc.stdin is not None
        with proc.stdin:
            proc.stdin.write(orjson.dumps({"url": self.redis_url}))
        self._proc = proc

    def reading(self) -> ProbeReading | None:
        shared = self._map
        if shared is None or shared.closed:
            return None
        return decode(shared[:RECORD_SIZE])

    def note_known(self, at: float) -> None:
        """The worker's own feed has applied everything committed before ``at``: the probe may
        rest. (Written without a lock: a torn value costs at most one poll more or less.)"""
        shared = self._map
        if shared is not None and not shared.closed:
            _KNOWN.pack_into(shared, RECORD_SIZE, at)

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def keep_running(self) -> None:
        """Start the probe again if it died (not more often than every ``RESTART_AFTER_S``)."""
        if self._proc is None or self.alive() or time.monotonic() - self._started_at < RESTART_AFTER_S:
            return
        log.warning("freshness probe exited with %s; starting it again", self._proc.returncode)
        self.restarts += 1
        self._spawn()

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(timeout=2.0)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._map is not None:
            self._map.close()
            self._map = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


# ---- the probe process ----
async def probe_forever(
    url: str, keyspace: Keyspace, out: mmap.mmap, *, interval: float, timeout_s: float
) -> None:
    parent = os.getppid()
    client = make_client(url, max_connections=1)
    scripts = ScriptRegistry(client, {"readChanges": discover()["readChanges"]})
    ctx = CallContext(keyspace, "", "")
    failing = False
    checked = False
    polls = 0
    try:
        while os.getppid() == parent:
            if not checked:  # the worker's own scripts are declared the same way (app.bring_up)
                try:
                    if await within(timeout_s, check_server(client)) >= (7, 0):
                        scripts.declare_master_only()
                    checked = True
                except (RedisError, OSError, TimeoutError):
                    pass
            (worker_known,) = _KNOWN.unpack_from(out, RECORD_SIZE)
            if time.monotonic() - worker_known < BEHIND_INTERVALS * interval:
                await asyncio.sleep(interval / 2)  # the worker's own feed keeps up
                continue
            issued = time.monotonic()
            # known instance '' and last id '': readChanges only reports the instance and the newest id
            poll = ReadChangesArgs("", uuid.uuid4().hex, "", 0)
            try:
                reply = await within(timeout_s, scripts.run(poll, ctx))
            except (RedisError, OSError, TimeoutError) as exc:
                if not failing:
                    log.warning("freshness probe: Redis did not answer (%s)", type(exc).__name__)
                failing = True
                await asyncio.sleep(RETRY_S)
                continue
            failing = False
            polls += 1
            record = encode(ProbeReading(issued, reply.instance, reply.last_id, polls))
            if record is not None:
                out[:RECORD_SIZE] = record
            await asyncio.sleep(max(0.0, interval - (time.monotonic() - issued)))
    finally:
        await close_client(client)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=f"python -m {__name__}", description=__doc__.splitlines()[0])
    p.add_argument("--fd", type=int, required=True, help="the shared record (a memfd)")
    p.add_argument("--namespace", required=True)
    p.add_argument("--interval", type=float, required=True, help="s between polls")
    p.add_argument("--timeout", type=float, required=True, help="s a poll may take")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    given = orjson.loads(sys.stdin.buffer.read())
    out = mmap.mmap(args.fd, SHARED_SIZE)
    try:
        uvloop.run(
            probe_forever(
                str(given["url"]),
                Keyspace(args.namespace),
                out,
                interval=args.interval,
                timeout_s=args.timeout,
            )
        )
    except KeyboardInterrupt:
        pass
    finally:
        out.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
