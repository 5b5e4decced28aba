"""The Lua script library: discover ``lua/*.lua``, check each header, preload, call.

File names follow ``<camelCaseName>-<N>.lua`` where N is the number of fixed KEYS; a header
line ``@keys-variadic`` allows more keys after those N (per-topic keys a caller names). The
scripts ship inside the wheel as ``namesrv/lua``; a source checkout reads the top-level ``lua/``.

Calls go through redis-py's ``AsyncScript`` (EVALSHA, reloading on NOSCRIPT, so a Redis restart,
failover or ``SCRIPT FLUSH`` costs one extra round trip). :meth:`ScriptRegistry.preload` sends
``SCRIPT LOAD`` for all of them at start-up, inside the readiness gate.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from importlib import resources
from importlib.abc import Traversable
from pathlib import Path
from typing import Any, TypeVar

from redis.asyncio import Redis
from redis.commands.core import AsyncScript
from redis.exceptions import NoScriptError

from namesrv.store.script_call import CallContext, ScriptCall

R = TypeVar("R")

_NAME = re.compile(r"^([a-z][A-Za-z0-9]*)-(\d+)\.lua$")
_HEADER = re.compile(r"\A--\[\[(.*?)\]\]", re.S)
_KEY_LINE = re.compile(r"^\s*KEYS\[(\d+)\]", re.M)
_INCLUDE = re.compile(r'^--- @include "([A-Za-z][A-Za-z0-9]*)"[ \t]*$', re.M)


NOSCRIPT_ATTEMPTS = 3  # calls of a bound script (each loads it again once) before NOSCRIPT is an error


class ScriptError(Exception):
    """A script file is missing, misnamed, or its header disagrees with its name."""


@dataclass(frozen=True)
class LuaScript:
    name: str
    num_keys: int
    variadic: bool
    source: str  # with includes expanded: the text Redis runs and hashes
    header: str

    @property
    def sha(self) -> str:
        return hashlib.sha1(self.source.encode()).hexdigest()


def lua_root() -> Traversable:
    """The ``lua`` folder: inside the installed package, else the source checkout's."""
    packaged = resources.files("namesrv").joinpath("lua")
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[3] / "lua"


def flatten(filename: str, source: str, includes: Traversable | None) -> str:
    """Replace each ``--- @include "name"`` line by ``includes/name.lua`` (once per script)."""
    seen: set[str] = set()

    def expand(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in seen:
            return f"-- (already included: {name})"
        seen.add(name)
        if includes is None or not includes.joinpath(f"{name}.lua").is_file():
            raise ScriptError(f"{filename}: include {name!r} not found")
        body = includes.joinpath(f"{name}.lua").read_text(encoding="utf-8")
        if _INCLUDE.search(body):
            raise ScriptError(f"{filename}: include {name!r} includes another file; keep includes flat")
        return body.rstrip("\n")

    return _INCLUDE.sub(expand, source)


def parse_script(filename: str, source: str, includes: Traversable | None = None) -> LuaScript:
    match = _NAME.match(filename)
    if not match:
        raise ScriptError(f"{filename}: name must be <camelCaseName>-<numKeys>.lua")
    header_match = _HEADER.match(source)
    if not header_match:
        raise ScriptError(f"{filename}: must open with a --[[ ... ]] header")
    header = header_match.group(1)
    num_keys = int(match.group(2))
    listed = [int(i) for i in _KEY_LINE.findall(header)]
    if listed != list(range(1, num_keys + 1)):
        raise ScriptError(f"{filename}: header lists KEYS {listed}, the name says {num_keys}")
    for section in ("ARGV", "Returns"):
        if section not in header:
            raise ScriptError(f"{filename}: header has no {section} section")
    flat = flatten(filename, source, includes)
    return LuaScript(match.group(1), num_keys, "@keys-variadic" in header, flat, header)


def discover(root: Traversable | None = None) -> dict[str, LuaScript]:
    base = root or lua_root()
    includes = base.joinpath("includes")
    scripts: dict[str, LuaScript] = {}
    for entry in sorted(base.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".lua") and entry.is_file():
            script = parse_script(
                entry.name, entry.read_text(encoding="utf-8"), includes if includes.is_dir() else None
            )
            scripts[script.name] = script
    if not scripts:
        raise ScriptError(f"no Lua scripts found in {base}")
    return scripts


# Redis 7 refuses a script that declares flags without `no-writes` on a read-only replica. The
# reads that feed route caches (`@master-only` in their header) declare themselves so after a
# failover a connection still open to the demoted master fails (READONLY; redis-py's Sentinel
# connection then finds the new master) instead of answering from a replica that may be behind.
# `allow-oom`: they never write, so a full Redis must still answer them.
MASTER_ONLY = "#!lua flags=allow-oom\n"


class ScriptRegistry:
    """Binds every :class:`LuaScript` to a Redis client."""

    def __init__(
        self,
        redis: Redis,
        scripts: dict[str, LuaScript] | None = None,
        observe: Callable[[str, float], None] | None = None,
    ) -> None:
        self.redis = redis
        self.scripts = scripts if scripts is not None else discover()
        self._observe = observe
        self._bound: dict[str, AsyncScript] = {
            name: redis.register_script(s.source) for name, s in self.scripts.items()
        }

    def declare_master_only(self) -> None:
        """On Redis 7 or newer: prefix the ``@master-only`` scripts with :data:`MASTER_ONLY`."""
        for name, script in list(self.scripts.items()):
            if "@master-only" in script.header and not script.source.startswith("#!"):
                declared = dataclasses.replace(script, source=MASTER_ONLY + script.source)
                self.scripts[name] = declared
                self._bound[name] = self.redis.register_script(declared.source)

    @property
    def bundle_hash(self) -> str:
        """One hash over all script SHAs: equal on every worker running the same scripts."""
        joined = ",".join(f"{n}:{s.sha}" for n, s in sorted(self.scripts.items()))
        return hashlib.sha1(joined.encode()).hexdigest()[:12]

    async def preload(self) -> None:
        for script in self.scripts.values():
            await self.redis.script_load(script.source)

    def check(self, name: str, keys: Sequence[str]) -> None:
        script = self.scripts[name]
        if len(keys) < script.num_keys or (len(keys) > script.num_keys and not script.variadic):
            raise ScriptError(f"{name} takes {script.num_keys} keys, got {len(keys)}")

    @contextlib.contextmanager
    def observed(self, name: str) -> Iterator[None]:
        """Times one call of ``name`` for ``observe`` (the script latency histogram)."""
        started = time.perf_counter()
        try:
            yield
        finally:
            if self._observe:
                self._observe(name, time.perf_counter() - started)

    async def run(self, call: ScriptCall[R], ctx: CallContext) -> R:
        """One call of ``call.SCRIPT`` with the call's KEYS and ARGV, its reply decoded."""
        return call.decode(await self.call(call.SCRIPT, call.keys(ctx.keyspace), call.argv(ctx)))

    async def run_replicated(
        self, call: ScriptCall[R], ctx: CallContext, replicas: int, timeout_ms: int
    ) -> tuple[R, int]:
        """:meth:`run`, then ``WAIT``: the decoded reply and how many replicas hold it."""
        reply, held = await self.call_replicated(
            call.SCRIPT, call.keys(ctx.keyspace), call.argv(ctx), replicas, timeout_ms
        )
        return call.decode(reply), held

    async def call(self, name: str, keys: Sequence[str], args: Sequence[Any]) -> Any:
        self.check(name, keys)
        with self.observed(name):
            # The bound script loads itself again after NOSCRIPT, once; a second SCRIPT FLUSH (or
            # a restart) between that load and its retry raised NOSCRIPT to the caller, and the
            # change feed took an answering Redis for an unreachable one. Redis did answer, so
            # try again, a bounded number of times.
            for _ in range(NOSCRIPT_ATTEMPTS - 1):
                try:
                    return await self._bound[name](keys=list(keys), args=list(args))
                except NoScriptError:
                    continue
            return await self._bound[name](keys=list(keys), args=list(args))

    async def call_replicated(
        self, name: str, keys: Sequence[str], args: Sequence[Any], replicas: int, timeout_ms: int
    ) -> tuple[Any, int]:
        """:meth:`call`, then ``WAIT replicas timeout_ms``: the script's reply and how many
        replicas hold every write up to it."""
        self.check(name, keys)
        script = self.scripts[name]
        with self.observed(name):
            reply, acked = await self._evalsha_then_wait(script, keys, args, replicas, timeout_ms)
            # Redis restarted or failed over: load the script and send again, a bounded number of
            # times, for the same reason as call (a second flush between the load and the retry).
            for _ in range(NOSCRIPT_ATTEMPTS - 1):
                if not isinstance(reply, NoScriptError):
                    break
                await self.redis.script_load(script.source)
                reply, acked = await self._evalsha_then_wait(script, keys, args, replicas, timeout_ms)
        for result in (reply, acked):
            if isinstance(result, BaseException):
                raise result
        return reply, int(acked)

    async def _evalsha_then_wait(
        self, script: LuaScript, keys: Sequence[str], args: Sequence[Any], replicas: int, timeout_ms: int
    ) -> list[Any]:
        # WAIT counts the writes of its own connection, so both go in one pipeline; plain
        # EVALSHA there, since a pipelined AsyncScript would send a SCRIPT EXISTS first.
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.evalsha(script.sha, len(keys), *keys, *args)
            pipe.execute_command("WAIT", replicas, timeout_ms)
            results: list[Any] = await pipe.execute(raise_on_error=False)
        return results
