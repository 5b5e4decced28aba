"""``namesrv admin ...``: the admin writes, sent to the worker on this machine over loopback.

The chart accepts admin requests (KV put/delete, write-perm wipe/add, topic delete, config update)
only from loopback by default (``adminAllowFrom``), so an arbitrary pod cannot change the route
table; operators run these commands inside a worker's pod::

    kubectl exec deploy/<release>-namesrv -- namesrv admin wipe-write-perm broker-a

Each command is one request to the worker's own HTTP API on 127.0.0.1 (the port and TLS mode
from its configuration: ``-c FILE``, by default the chart's ``/etc/namesrv/namesrv.toml`` when it
exists, and the ``NAMESRV_*`` environment). The change is in Redis, so it applies to the whole
fleet. With ACL on, ``--access-key`` and ``--secret-key-file`` sign the request as an admin
account. The reply's JSON goes to stdout; a refusal's remark to stderr, with exit status 1.
"""

from __future__ import annotations

import argparse
import ssl
import sys
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlencode, urlsplit

import orjson

from namesrv.config import ConfigError, Settings, read_settings
from namesrv.security.http_auth import authorization_header

CHART_CONFIG = Path("/etc/namesrv/namesrv.toml")
TIMEOUT_S = 30.0
EXIT_REFUSED, EXIT_USAGE, EXIT_UNREACHABLE = 1, 2, 3


@dataclass(frozen=True)
class Call:
    method: str
    path: str  # percent-encoded, as sent and signed
    query: str = ""
    body: bytes = b""


def _segment(text: str) -> str:
    return quote(text, safe="")


def build_call(args: argparse.Namespace) -> Call:
    command = args.command
    if command in ("wipe-write-perm", "add-write-perm"):
        return Call("POST", f"/v1/brokers/{_segment(args.broker_name)}/{command}")
    if command == "delete-topic":
        query = urlencode({"cluster": args.cluster}) if args.cluster else ""
        return Call("DELETE", f"/v1/topics/{_segment(args.topic)}", query)
    if command == "kv-put":
        body = orjson.dumps({"value": args.value})
        return Call("PUT", f"/v1/kv/{_segment(args.namespace)}/{_segment(args.key)}", body=body)
    if command == "kv-delete":
        return Call("DELETE", f"/v1/kv/{_segment(args.namespace)}/{_segment(args.key)}")
    if command == "update-config":
        changes = {}
        for item in args.assignments:
            key, eq, value = item.partition("=")
            if not eq or not key:
                raise ValueError(f"expected KEY=VALUE, got {item!r}")
            changes[key] = value
        return Call("PUT", "/v1/config", body=orjson.dumps(changes))
    raise AssertionError(command)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="namesrv admin",
        description="Admin writes through the worker on this machine (its HTTP API on loopback); "
        "they apply to the whole fleet.",
    )
    parser.add_argument(
        "-c",
        "--config",
        metavar="FILE",
        help=f"the worker's config file, for its httpPort and tlsMode (default: {CHART_CONFIG} if it "
        "exists, else the defaults and NAMESRV_* variables)",
    )
    parser.add_argument("--url", help="the worker's HTTP base URL (default: http://127.0.0.1:<httpPort>)")
    parser.add_argument("--access-key", metavar="AK", help="with ACL on: an admin account's AccessKey")
    parser.add_argument(
        "--secret-key-file", metavar="FILE", help="with ACL on: a file holding that account's secretKey"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, what in (
        ("wipe-write-perm", "take write permission away from a broker's queues (WIPE_WRITE_PERM, 205)"),
        ("add-write-perm", "give write permission back to a broker's queues (ADD_WRITE_PERM, 327)"),
    ):
        sub.add_parser(name, help=what, description=what).add_argument("broker_name", metavar="BROKER_NAME")
    topic = sub.add_parser("delete-topic", help="remove a topic's routes (DELETE_TOPIC_IN_NAMESRV, 216)")
    topic.add_argument("topic", metavar="TOPIC")
    topic.add_argument("--cluster", help="only the queues of this cluster's brokers")
    put = sub.add_parser("kv-put", help="set a KV config entry (PUT_KV_CONFIG, 100)")
    put.add_argument("namespace", metavar="NAMESPACE")
    put.add_argument("key", metavar="KEY")
    put.add_argument("value", metavar="VALUE")
    delete = sub.add_parser("kv-delete", help="delete a KV config entry (DELETE_KV_CONFIG, 102)")
    delete.add_argument("namespace", metavar="NAMESPACE")
    delete.add_argument("key", metavar="KEY")
    update = sub.add_parser(
        "update-config",
        help="change [dynamic] options fleet-wide (UPDATE_NAMESRV_CONFIG, 318; needs "
        "allowRemoteConfigUpdate)",
    )
    update.add_argument("assignments", nargs="+", metavar="KEY=VALUE")
    return parser


def _settings(config: str | None) -> Settings:
    path = config or (str(CHART_CONFIG) if CHART_CONFIG.is_file() else None)
    settings, _ = read_settings(path)
    return settings


def base_url(settings: Settings) -> str:
    scheme = "https" if settings.tlsMode == "enforcing" else "http"
    return f"{scheme}://127.0.0.1:{settings.httpPort}"


def _tls_context(url: str) -> ssl.SSLContext | None:
    """To the worker in this pod over loopback: the traffic never leaves the machine, and the
    certificate names the Service, not 127.0.0.1, so it is not checked."""
    if urlsplit(url).scheme != "https":
        return None
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def send(url: str, call: Call, credentials: tuple[str, str] | None) -> tuple[int, bytes]:
    headers = {"content-type": "application/json"}
    if credentials is not None:
        headers["Authorization"] = authorization_header(
            credentials[0], credentials[1], call.method, call.path, call.query, call.body
        )
    target = url.rstrip("/") + call.path + (f"?{call.query}" if call.query else "")
    request = urllib.request.Request(target, data=call.body or None, method=call.method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S, context=_tls_context(url)) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        settings = _settings(args.config)
        call = build_call(args)
    except (ConfigError, ValueError) as exc:
        print(f"namesrv admin: {exc}", file=sys.stderr)
        return EXIT_USAGE
    credentials: tuple[str, str] | None = None
    if args.access_key or args.secret_key_file:
        if not (args.access_key and args.secret_key_file):
            print("namesrv admin: --access-key and --secret-key-file go together", file=sys.stderr)
            return EXIT_USAGE
        try:
            secret = Path(args.secret_key_file).read_text(encoding="utf-8").strip()
        except OSError as exc:
            print(f"namesrv admin: cannot read {args.secret_key_file}: {exc.strerror}", file=sys.stderr)
            return EXIT_USAGE
        credentials = (args.access_key, secret)
    url = args.url or base_url(settings)
    try:
        status, body = send(url, call, credentials)
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        print(f"namesrv admin: no worker answers at {url}: {reason}", file=sys.stderr)
        return EXIT_UNREACHABLE
    if 200 <= status < 300:
        sys.stdout.write(body.decode("utf-8", "replace") + "\n")
        return 0
    try:
        remark = orjson.loads(body).get("remark", "")
    except (orjson.JSONDecodeError, AttributeError):
        remark = body.decode("utf-8", "replace")[:512]
    print(f"namesrv admin: refused (HTTP {status}): {remark}", file=sys.stderr)
    return EXIT_REFUSED


if __name__ == "__main__":
    sys.exit(main())
