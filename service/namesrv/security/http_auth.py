"""ACL for the HTTP API: writes follow the remoting rules of the request code they stand for.

Reads (GET) are not checked. A write is checked as its remoting code: without ACL the admin ones
(KV put/delete, topic register/delete, write-perm wipe/add, config update) only from
``adminAllowFrom``; with ACL on it must come from ``globalWhiteRemoteAddresses`` (broker writes
only) or carry the credentials of an account — admin writes of an admin account::

    Authorization: RocketMQ-HMAC AccessKey=<ak>, Timestamp=<unix ms>, Signature=<sig>

``sig`` is RocketMQ's signature (Base64 HmacSHA1 with the secretKey) over the values of
``AccessKey``, ``Method``, ``Path`` (as sent, percent-encoded), ``Query`` (the raw query string,
"" when none) and ``Timestamp`` — in that (key) order, concatenated — followed by the request body
bytes. The timestamp must be within ``HTTP_CLOCK_SKEW_MS`` of the server's clock, so a captured
request cannot be replayed later.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from aiohttp import web

from namesrv.domain.codes import RequestCode
from namesrv.domain.errors import PermissionDenied
from namesrv.keys import ACL_FIELDS, AUTHORIZER
from namesrv.security.signature import ACCESS_KEY, SIGNATURE, sign

SCHEME = "RocketMQ-HMAC"
HTTP_CLOCK_SKEW_MS = 300_000
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

# HTTP route name -> the remoting request code whose rules it follows.
WRITE_CODES: dict[str, int] = {
    "registerBroker": RequestCode.REGISTER_BROKER,
    "unregisterBroker": RequestCode.UNREGISTER_BROKER,
    "brokerHeartbeat": RequestCode.BROKER_HEARTBEAT,
    "queryDataVersion": RequestCode.QUERY_DATA_VERSION,
    "wipeWritePerm": RequestCode.WIPE_WRITE_PERM_OF_BROKER,
    "addWritePerm": RequestCode.ADD_WRITE_PERM_OF_BROKER,
    "deleteTopic": RequestCode.DELETE_TOPIC_IN_NAMESRV,
    "registerTopic": RequestCode.REGISTER_TOPIC_IN_NAMESRV,
    "kvPut": RequestCode.PUT_KV_CONFIG,
    "kvDelete": RequestCode.DELETE_KV_CONFIG,
    "updateConfig": RequestCode.UPDATE_NAMESRV_CONFIG,
}


def _canonical(access_key: str, method: str, path: str, query: str, timestamp: str) -> dict[str, str]:
    return {ACCESS_KEY: access_key, "Method": method, "Path": path, "Query": query, "Timestamp": timestamp}


def authorization_header(
    access_key: str,
    secret_key: str,
    method: str,
    path: str,
    query: str = "",
    body: bytes = b"",
    now_ms: int | None = None,
) -> str:
    """The ``Authorization`` value a client sends (used by the tests; a recipe for clients)."""
    ts = str(int(time.time() * 1000) if now_ms is None else now_ms)
    sig = sign(secret_key, _canonical(access_key, method.upper(), path, query, ts), body)
    return f"{SCHEME} AccessKey={access_key}, Timestamp={ts}, Signature={sig}"


def _fields(request: web.Request) -> tuple[dict[str, str], str]:
    """The signed fields of the request's Authorization header ({} when it has none), and what is
    wrong with the header ("" when nothing). A flawed header counts as a failed check rather than
    an error, so permissive mode still serves the request and counts it."""
    header = request.headers.get("Authorization", "")
    if not header:
        return {}, ""
    scheme, _, params = header.partition(" ")
    if scheme != SCHEME:
        return {}, f"Authorization: only the {SCHEME} scheme is accepted"
    given: dict[str, str] = {}
    for part in params.split(","):
        name, eq, value = part.strip().partition("=")
        if eq:
            given[name] = value
    missing = [n for n in (ACCESS_KEY, "Timestamp", SIGNATURE) if not given.get(n)]
    if missing:
        return {}, f"Authorization: {', '.join(missing)} missing"
    ts = given["Timestamp"]
    url = request.rel_url  # what the client sent and signed: still percent-encoded
    fields = _canonical(given[ACCESS_KEY], request.method, url.raw_path, url.raw_query_string, ts)
    if not ts.isdigit() or abs(int(ts) - int(time.time() * 1000)) > HTTP_CLOCK_SKEW_MS:
        # no Signature: the check fails as a bad signature, whatever was sent
        return fields, f"Timestamp must be the current time in ms (within {HTTP_CLOCK_SKEW_MS // 1000} s)"
    fields[SIGNATURE] = given[SIGNATURE]
    return fields, ""


def http_peer(remote: str | None) -> str:
    """aiohttp's ``request.remote`` (an address without port) as the remoting ``host:port`` form."""
    if not remote:
        return "?"
    return f"[{remote}]:0" if ":" in remote else f"{remote}:0"


@web.middleware
async def acl_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    code = WRITE_CODES.get(request.match_info.route.name or "")
    if code is not None:
        authorizer = request.app[AUTHORIZER]
        peer = http_peer(request.remote)
        note = ""
        if authorizer.acl_enabled:
            fields, note = _fields(request)
            refusal = authorizer.check(code, fields, await request.read(), peer)
            request[ACL_FIELDS] = fields
        else:
            refusal = authorizer.check(code, None, None, peer)
        if refusal is not None:
            raise PermissionDenied(f"{refusal} ({note})" if note else refusal)
    return await handler(request)
