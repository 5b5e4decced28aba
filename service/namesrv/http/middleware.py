"""Every HTTP error is JSON ``{"code": <RocketMQ response code>, "remark": "..."}``."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

from aiohttp import web

from namesrv.domain.codes import ResponseCode
from namesrv.domain.errors import (
    BadRequest,
    Busy,
    Disabled,
    NamesrvError,
    NotFound,
    NotReady,
    PermissionDenied,
    StoreUnavailable,
    TooLarge,
)
from namesrv.limits import bounded_remark

log = logging.getLogger(__name__)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
OPERATION = "operation"

# The longest URL (path and query) served; longer ones get 414 with a JSON error. No route needs
# more: names are at most 255 characters.
MAX_URL_BYTES = 65536
# What the HTTP parser accepts as a request line, so URLs up to here reach the JSON refusal; only
# beyond it does aiohttp's own plain-text 400 answer (before any handler can run).
PARSER_MAX_LINE_BYTES = 1 << 20


def error_response(status: int, code: int, remark: str) -> web.Response:
    return web.json_response({"code": code, "remark": bounded_remark(remark)}, status=status)


def http_status(exc: NamesrvError) -> int:
    if isinstance(exc, TooLarge):
        return 413
    if isinstance(exc, BadRequest):
        return 400
    if isinstance(exc, NotFound):
        return 404
    if isinstance(exc, PermissionDenied | Disabled):
        return 403
    if isinstance(exc, NotReady | StoreUnavailable | Busy):
        return 503
    return 500


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    from namesrv.keys import METRICS  # keys imports the app's types

    started = time.perf_counter()
    outcome = "ok"
    try:
        if len(request.raw_path) > MAX_URL_BYTES:
            outcome = "rejected"
            remark = f"request URL is {len(request.raw_path)} bytes long; the maximum is {MAX_URL_BYTES}"
            return error_response(414, ResponseCode.INVALID_PARAMETER, remark)
        return await handler(request)
    except NamesrvError as exc:
        outcome = "error" if http_status(exc) >= 500 else "rejected"
        return error_response(http_status(exc), int(exc.code), exc.remark)
    except web.HTTPRequestEntityTooLarge:
        outcome = "rejected"
        return error_response(
            413,
            ResponseCode.INVALID_PARAMETER,
            f"request body is larger than {request.app._client_max_size} bytes",
        )
    except (web.HTTPNotFound, web.HTTPMethodNotAllowed) as exc:
        # The HTTP form of Java's REQUEST_CODE_NOT_SUPPORTED: no operation has this path/method.
        outcome = "rejected"
        remark = f"{request.method} {request.path[:256]}: {exc.reason.lower()}"
        return error_response(exc.status, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, remark)
    except web.HTTPException as exc:
        if exc.status >= 400:
            outcome = "rejected"
            return error_response(exc.status, ResponseCode.INVALID_PARAMETER, exc.reason)
        raise
    except Exception as exc:
        outcome = "error"
        log.exception("unhandled error in %s %s", request.method, request.path)
        return error_response(500, ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")
    finally:
        op = request.match_info.route.name or "unknown"
        counter, latency = request.app[METRICS].request_series("http", op, outcome)
        counter.inc()
        latency.observe(time.perf_counter() - started)
