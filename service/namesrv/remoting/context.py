"""What every remoting handler works with: the worker's context, the connection's state, and
helpers to read a request's ``extFields`` and write a reply the Java way.

A handler decodes its header leniently (missing or malformed fields become None, never a
protocol error), calls one use-case, and answers with Java's exact response code, remark and
``extFields`` presence (``{}`` when Java attaches a response header class, absent when it does
not). Errors raised by use-cases become code-1 replies in :func:`namesrv.remoting.handlers.dispatch`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from namesrv.config import Settings
from namesrv.domain.codes import ResponseCode
from namesrv.domain.errors import BadRequest
from namesrv.protocol.fastjson import Dialect, dumps
from namesrv.protocol.headers import get_str
from namesrv.protocol.remoting import RemotingCommand, SuccessFrame, response_to
from namesrv.registry.registration import Registration
from namesrv.registry.service import RegistryService
from namesrv.security.policy import Authorizer
from namesrv.worker import WorkerState


@dataclass
class ConnectionState:
    """What a connection remembers: the registrations made over it, for fenced close removal."""

    peer: str
    holder: str = ""  # '<workerId>#<n>': what the registry calls this connection (unregisterBroker)
    registrations: dict[tuple[str, str], Registration] = field(default_factory=dict)
    open: bool = True

    def replayed(self, registration: Registration) -> None:
        """A heal replayed a registration made over this connection: its epoch is the live one."""
        if self.open:
            self.registrations[(registration.cluster, registration.addr)] = registration

    def is_open(self) -> bool:
        return self.open


@dataclass
class HandlerContext:
    service: RegistryService
    worker: WorkerState
    authorizer: Authorizer | None = None  # None: built from the worker's settings (ACL off by default)
    _success: SuccessFrame | None = None

    def __post_init__(self) -> None:
        if self.authorizer is None:
            self.authorizer = Authorizer.from_settings(self.worker.base)

    @property
    def access(self) -> Authorizer:
        assert self.authorizer is not None
        return self.authorizer

    @property
    def settings(self) -> Settings:
        return self.worker.settings

    def success_frame(self) -> SuccessFrame:
        version = self.worker.settings.emulatedVersion
        if self._success is None or self._success.version != version:
            self._success = SuccessFrame(version)
        return self._success


Handler = Callable[[HandlerContext, ConnectionState, RemotingCommand], Awaitable[RemotingCommand]]


def reply(
    ctx: HandlerContext,
    request: RemotingCommand,
    code: int = ResponseCode.SUCCESS,
    *,
    remark: str | None = None,
    ext: dict[str, str] | None = None,
    body: bytes | None = None,
) -> RemotingCommand:
    return response_to(
        request, int(code), remark=remark, ext_fields=ext, body=body, version=ctx.settings.emulatedVersion
    )


def ext_of(cmd: RemotingCommand) -> dict[str, str]:
    return cmd.ext_fields or {}


def fastjson_body(obj: Any, dialect: Dialect = Dialect.DEFAULT) -> bytes:
    return dumps(obj, dialect).encode()


def required(ext: dict[str, str], name: str) -> str:
    value = get_str(ext, name)
    if value is None:
        raise BadRequest(f"{name} is required")
    return value
