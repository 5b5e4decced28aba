"""Exceptions the use-cases raise, each carrying the RocketMQ response code it maps to.

Tree::

    NamesrvError (code 1 SYSTEM_ERROR)
    ├── BadRequest (code 29 INVALID_PARAMETER in HTTP; code 1 over remoting, as Java does)
    │   └── TooLarge (a configured size limit: 413 in HTTP, counted per limit)
    ├── NotFound (code 17 TOPIC_NOT_EXIST or 22 QUERY_NOT_FOUND)
    ├── PermissionDenied (code 16 NO_PERMISSION)
    ├── Disabled (code 1, remark "disable": a topic-list code is switched off)
    ├── NotReady (code 1, remark "name server not ready")
    ├── Busy (code 2 SYSTEM_BUSY: shed load, as Java's rejected thread pool does)
    └── StoreUnavailable (code 1: Redis could not be reached after retries)
        └── WriteNotReplicated (code 1: fewer replicas than redisWriteReplicas confirmed a write)

Transports translate these at their edge; nothing below them knows about HTTP status codes or
frames.
"""

from __future__ import annotations

from namesrv.domain.codes import ResponseCode


class NamesrvError(Exception):
    code: int = ResponseCode.SYSTEM_ERROR

    def __init__(self, remark: str, code: int | None = None) -> None:
        super().__init__(remark)
        self.remark = remark
        if code is not None:
            self.code = code


class BadRequest(NamesrvError):
    code = ResponseCode.INVALID_PARAMETER


class TooLarge(BadRequest):
    """A value over one of the configured size limits; ``limit`` names the option."""

    def __init__(self, remark: str, limit: str) -> None:
        super().__init__(remark)
        self.limit = limit


class NotFound(NamesrvError):
    code = ResponseCode.QUERY_NOT_FOUND


class PermissionDenied(NamesrvError):
    code = ResponseCode.NO_PERMISSION


class Disabled(NamesrvError):
    def __init__(self) -> None:
        super().__init__("disable", ResponseCode.SYSTEM_ERROR)


class NotReady(NamesrvError):
    def __init__(self) -> None:
        super().__init__("name server not ready", ResponseCode.SYSTEM_ERROR)


class StoreUnavailable(NamesrvError):
    pass


class WriteNotReplicated(StoreUnavailable):
    """The master applied the write, but not enough replicas confirmed it in time: the client is
    told it failed, since a failover could still lose it (it may also survive)."""


class Busy(NamesrvError):
    code = ResponseCode.SYSTEM_BUSY
