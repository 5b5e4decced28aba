"""One calling convention for every Lua script: a call object packs its KEYS and ARGV and decodes
the reply, all next to each other.

A script's contract is written once, in its header (``lua/<name>-<N>.lua``), and once in Python,
in its call object: ``SCRIPT`` names the file, ``keys`` and ``argv`` pack what the header's
``KEYS[i]`` and ``ARGV[i]`` lines document, in that order, ``REPLY`` names the elements of the
table its ``Returns:`` line shows, and ``decode`` turns that table into a typed result. Every
``argv`` takes the same :class:`CallContext` (the change-log length, the worker's id), so no call
site chooses an argument order. ``tests/unit/test_script_contract.py`` reads the headers and holds
every call object to them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, TypeVar

from namesrv.store.keyspace import Keyspace

R_co = TypeVar("R_co", covariant=True)

# A REPLY name ending so (``name...``) is the last: the table goes on with as many as there are.
MORE = "..."


@dataclass(frozen=True)
class CallContext:
    """What every call may pass besides its own fields: the same for all calls of a worker."""

    keyspace: Keyspace
    max_len: str  # the change log's length cap (eventsMaxLen), as the scripts' XADD MAXLEN takes it
    worker_id: str  # who made the change (the change log's ``worker`` field, diagnostics)


class ScriptCall(Protocol[R_co]):
    SCRIPT: ClassVar[str]
    REPLY: ClassVar[tuple[str, ...]]

    def keys(self, k: Keyspace) -> list[str]: ...

    def argv(self, ctx: CallContext) -> list[Any]: ...

    def decode(self, reply: Any) -> R_co: ...


class ReplyShapeError(Exception):
    """A script answered a table of another shape than its header documents (a worker running
    against scripts of another version, or a bug): never read past it."""


def reply_of(call: ScriptCall[Any], reply: Any) -> Sequence[Any]:
    """``reply`` checked against ``call.REPLY``: at least as many elements as named (a trailing
    ``name...`` takes any number, none included), exactly as many otherwise."""
    fixed = call.REPLY[:-1] if call.REPLY and call.REPLY[-1].endswith(MORE) else call.REPLY
    if not isinstance(reply, list | tuple):
        raise ReplyShapeError(f"{call.SCRIPT} answered {type(reply).__name__}, not a table")
    if len(reply) < len(fixed) or (len(fixed) == len(call.REPLY) and len(reply) != len(fixed)):
        raise ReplyShapeError(
            f"{call.SCRIPT} answered {len(reply)} elements; its header documents {{{', '.join(call.REPLY)}}}"
        )
    return reply


def flag(on: bool) -> str:
    """A boolean as the scripts read it (``ARGV[i] == '1'``)."""
    return "1" if on else "0"


def pairs(flat: Sequence[Any]) -> dict[str, str]:
    """A flat ``k1, v1, k2, v2...`` table (HGETALL's layout) as a dict."""
    return {str(flat[i]): str(flat[i + 1]) for i in range(0, len(flat), 2)}
