"""Settings: one frozen object built once, before the event loop starts.

Precedence, lowest first: the defaults below (mirrored, with comments, in
``config/default.toml``) < the file given with ``--config``/``-c`` (TOML, or a Java
``namesrv.properties`` for migration) < environment ``NAMESRV_<UPPER_SNAKE_NAME>``
(plain ``REDIS_URL`` is accepted too). Names are RocketMQ's where the option is
RocketMQ's (``orderMessageEnable``), camelCase where it is ours (``httpPort``).

A bad value stops start-up with a :class:`ConfigError` that names the key; unknown
keys only warn, so a Java properties file full of Netty tuning still loads.
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
import os
import re
import textwrap
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from namesrv.javaprops import PropertiesError, parse_properties
from namesrv.security.redact import redact_value

log = logging.getLogger(__name__)


class ConfigError(ValueError):
    """A configuration value is invalid; the message names the key."""


def _opt(
    default: Any,
    doc: str,
    *,
    lo: float | None = None,
    hi: float | None = None,
    choices: tuple[str, ...] = (),
    dynamic: bool = False,
) -> Any:
    return field(
        default=default, metadata={"doc": doc, "lo": lo, "hi": hi, "choices": choices, "dynamic": dynamic}
    )


@dataclass(frozen=True)
class Settings:
    # --- NamesrvConfig options that apply to a Redis-backed fleet (same names as Java) ---
    orderMessageEnable: bool = _opt(
        False, "Add orderTopicConf from KV namespace ORDER_TOPIC_CONFIG to route replies.", dynamic=True
    )
    returnOrderTopicConfigToBroker: bool = _opt(
        True,
        "REGISTER_BROKER replies carry the ORDER_TOPIC_CONFIG KV table when that namespace exists.",
        dynamic=True,
    )
    clientRequestThreadPoolQueueCapacity: int = _opt(
        50000, "Route lookups (code 105) a worker holds in flight before answering SYSTEM_BUSY.", lo=1
    )
    defaultThreadPoolQueueCapacity: int = _opt(
        10000, "Other requests a worker holds in flight before answering SYSTEM_BUSY.", lo=1
    )
    scanNotActiveBrokerInterval: int = _opt(
        5000, "Sweep interval in ms: how often every worker runs the idempotent expiry sweep.", lo=100
    )
    supportActingMaster: bool = _opt(
        False,
        "Present the lowest slave as id 0 in routes when a master is gone (acting master).",
        dynamic=True,
    )
    enableAllTopicList: bool = _opt(True, "Allow GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206).", dynamic=True)
    enableTopicList: bool = _opt(True, "Allow codes 224, 311, 312 and 313 (topic lists).", dynamic=True)
    needWaitForService: bool = _opt(
        False, "Refuse route lookups for waitSecondsForService after a worker starts.", dynamic=True
    )
    waitSecondsForService: int = _opt(
        45, "Seconds a worker refuses route lookups when needWaitForService is on.", lo=0, dynamic=True
    )
    deleteTopicWithBrokerRegistration: bool = _opt(
        False, "A full registration removes the broker's queues of topics it no longer lists.", dynamic=True
    )
    configBlackList: str = _opt(
        "configBlackList;configStorePath;kvConfigPath",
        "Keys UPDATE_NAMESRV_CONFIG refuses, ';'-separated (rocketmqHome is always refused).",
    )
    serverChannelMaxIdleTimeSeconds: int = _opt(
        120, "Close a remoting connection idle this long (s); brokers registered over it are removed.", lo=1
    )

    # --- ours ---
    redisUrl: str = _opt(
        "",
        "Redis URL: redis://, rediss://, unix://, redis+sentinel://host:port[,host:port]/<master>, "
        "redis+cluster://host:port[,host:port]. Empty: start an embedded redis-server "
        "(one process on one machine only).",
    )
    redisMaxConnections: int = _opt(
        64,
        "Redis connections per worker; requests beyond them wait for one instead of failing.",
        lo=8,
        hi=10000,
    )
    redisTimeoutMillis: int = _opt(
        1000,
        "Longest a request waits on one Redis call (ms); a stalled Redis fails requests within it, "
        "and an unreachable one at once.",
        lo=50,
        hi=60000,
    )
    redisWriteReplicas: int = _opt(
        0,
        "Answer a write only once this many replicas hold it (Redis WAIT); 0 answers once the master "
        "has it. Under Sentinel, -1 (every replica the Sentinels consider up, at least 1) or the "
        "number of replicas: a failover then loses no write a client was told succeeded (fewer is "
        "not enough). A fixed number fails writes while a replica is missing; -1 only until the "
        "Sentinels mark it down. Not with Redis Cluster.",
        lo=-1,
        hi=16,
    )
    redisWriteReplicaTimeoutMillis: int = _opt(
        500,
        "Longest a write waits for redisWriteReplicas replicas (ms); past it the request fails "
        "(SYSTEM_ERROR, HTTP 503) and the write may not survive a failover.",
        lo=10,
        hi=60000,
    )
    namespace: str = _opt(
        "namesrv", "Key namespace; every key is '{<namespace>}:...' so the registry is one Cluster slot."
    )
    listenHost: str = _opt("0.0.0.0", "Address the HTTP and remoting listeners bind to.")
    httpPort: int = _opt(
        8080, "HTTP port: JSON API, /livez, /readyz, /metrics, /rocketmq/nsaddr.", lo=0, hi=65535
    )
    remotingPort: int = _opt(9876, "RocketMQ remoting (TCP) port.", lo=0, hi=65535)
    defaultBrokerTimeoutMillis: int = _opt(
        120000, "Broker expiry in ms when REGISTER_BROKER carries no heartbeatTimeoutMillis.", lo=1000
    )
    eventsMaxLen: int = _opt(
        1000000, "Change-log length: the '{ns}:events' stream is trimmed to about this many entries.", lo=1000
    )
    watchMaxWatchers: int = _opt(
        1000,
        "Watchers (SSE streams and route long-polls) one worker serves at once; more get 503.",
        lo=1,
        hi=100000,
    )
    consoleReportUrl: str = _opt(
        "",
        "Where operators publish the route-history report (docs/PIPELINE.md), linked from the "
        "console at /ui: an http(s) URL or a path on this host starting with '/'; empty: the "
        "console says how to produce one.",
    )
    shutdownTimeoutSeconds: float = _opt(
        20.0, "On SIGTERM: seconds to finish in-flight requests before closing connections.", lo=0
    )
    registerChunkTopics: int = _opt(
        500,
        "Topics written per Lua call when a registration changes many topics (bounds Redis blocking).",
        lo=10,
        hi=100000,
    )
    registerWriteConcurrency: int = _opt(
        4,
        "Registrations per worker writing their topics to Redis at once (new or changed brokers, "
        "heal replays); the others wait their turn in the worker, so mass (re-)registration "
        "never queues more than a few topic chunks per worker in Redis, and change-log polls and "
        "lookups keep being answered in milliseconds meanwhile.",
        lo=1,
        hi=64,
    )
    frameMaxLength: int = _opt(
        16777216,
        "Largest remoting frame accepted (bytes); larger ones close the connection.",
        lo=1024,
        hi=1 << 30,
    )
    httpMaxBodyBytes: int = _opt(
        16777216, "Largest HTTP request body accepted (bytes); larger ones get 413.", lo=1024, hi=1 << 30
    )
    # --- resource limits (README "Resource limits") ---
    kvValueMaxBytes: int = _opt(
        65536,
        "Largest KV config value (UTF-8 bytes) PUT_KV_CONFIG accepts; larger is refused.",
        lo=1,
        hi=1 << 30,
        dynamic=True,
    )
    kvNamespaceMaxBytes: int = _opt(
        1048576,
        "Most bytes (keys plus values, UTF-8) one KV namespace may hold; a PUT_KV_CONFIG that would "
        "grow it past this is refused. 1 MiB holds about 15,000 order-topic configs "
        "(ORDER_TOPIC_CONFIG).",
        lo=1024,
        hi=1 << 30,
        dynamic=True,
    )
    kvMaxBytes: int = _opt(
        16777216,
        "Most bytes all KV namespaces together may hold; a PUT_KV_CONFIG past it is refused.",
        lo=1024,
        hi=1 << 34,
        dynamic=True,
    )
    eventsMaxBytes: int = _opt(
        268435456,
        "Change-log memory budget (bytes): the stream is trimmed when Redis reports it larger.",
        lo=1 << 20,
    )
    frameDeadlineSeconds: float = _opt(
        10.0, "Seconds a remoting connection has to finish a frame once its first bytes arrived.", lo=0.1
    )
    partialFramesMaxBytes: int = _opt(
        67108864,
        "Bytes a worker holds in unfinished remoting frames across all connections; the "
        "connection that would exceed it is closed.",
        lo=1024,
    )
    maxConnections: int = _opt(
        10000, "Remoting connections per worker; more are closed at once (logged, rate-limited).", lo=1
    )
    maxConnectionsPerPeer: int = _opt(
        1000,
        "Remoting connections per worker from one peer address (IPv4-mapped IPv6 counts as IPv4); "
        "more are closed at once, so one host cannot take every slot of maxConnections.",
        lo=1,
    )
    firstFrameDeadlineSeconds: float = _opt(
        10.0,
        "Seconds a new remoting connection has (TLS handshake included) to send its first whole "
        "frame; a connection that sends nothing, or no valid frame, is closed after it.",
        lo=0.1,
        hi=3600,
    )
    registerBodyMaxInflatedBytes: int = _opt(
        33554432,
        "Most bytes a compressed REGISTER_BROKER body may inflate to; past it the registration is "
        "refused (a zip bomb). 100,000 real topics inflate to 7-20 MB.",
        lo=65536,
        hi=1 << 30,
    )
    decodeBudgetBytes: int = _opt(
        134217728,
        "Memory a worker lets request bodies being decoded hold at once (estimated: the text plus "
        "a measured allowance per object or topic); more waits up to decodeWaitMillis, then gets "
        "SYSTEM_BUSY (HTTP 503). One body needing more than all of it is refused.",
        lo=1 << 20,
        hi=1 << 40,
    )
    decodeWaitMillis: int = _opt(
        2000,
        "Longest a request waits for decodeBudgetBytes to have room before SYSTEM_BUSY (ms).",
        lo=0,
        hi=60000,
    )
    registerBodyCacheBytes: int = _opt(
        67108864,
        "Memory a worker spends remembering brokers' last big JSON REGISTER_BROKER bodies, so the "
        "next one decodes only what changed (a 10,000-topic body takes about 8 MB).",
        lo=0,
        hi=1 << 40,
    )
    # --- TLS (README "TLS") ---
    tlsMode: str = _opt(
        "disabled",
        "TLS on the remoting and HTTP ports: disabled, permissive (one port speaks TLS and plain) "
        "or enforcing (TLS only).",
        choices=("disabled", "permissive", "enforcing"),
    )
    tlsCertFile: str = _opt("", "PEM certificate chain of this server (reloaded when the file changes).")
    tlsKeyFile: str = _opt("", "PEM private key of tlsCertFile.")
    tlsClientCaFile: str = _opt("", "PEM CA bundle that client certificates must chain to (mTLS).")
    tlsClientAuth: str = _opt(
        "none",
        "Client certificates: none, optional (checked when sent) or require.",
        choices=("none", "optional", "require"),
    )
    routeCacheEnabled: bool = _opt(
        True, "Serve route lookups from a per-worker cache kept current by the change log."
    )
    routeCacheStalenessMillis: int = _opt(
        100,
        "Longest time (ms) a worker may keep serving a route after a change committed while Redis "
        "is reachable; past it (change feed lagging) a lookup waits for the feed to read again.",
        lo=10,
        hi=60000,
    )
    freshnessProbeEnabled: bool = _opt(
        True,
        "Run a small helper process per worker that checks the change log every quarter of the "
        "staleness bound without the worker's GIL, so a worker too busy to run its own poll "
        "still knows nothing changed and lookups do not wait for a catch-up (issue 26).",
    )
    routeCacheOutageSeconds: float = _opt(
        60.0,
        "While Redis is unreachable or stalled (nothing can change the table), cached routes are "
        "served for this long after the last read of the change log; then lookups fail.",
        lo=0,
        hi=3600,
    )
    healWindowSeconds: float = _opt(
        15.0,
        "After Redis lost registrations (restarted empty, flushed, failed over to a replica that "
        "missed writes), the fleet replays what its workers saw; for this long (longer while "
        "replays go on: until 5 s after the last, at most 4x this), routes cached before the loss "
        "are served, and a lookup Redis cannot answer yet gets 'name server not ready' (clients "
        "retry) instead of TOPIC_NOT_EXIST; then, for as long again, each is served once more while "
        "it is read again (when routeCacheRefreshSeconds is not 0). 0 turns it off.",
        lo=0,
        hi=600,
    )
    healKeepMaxBytes: int = _opt(
        67108864,
        "Memory a worker gives to the last registration of each broker connected to it, kept "
        "compressed for a heal (a 10,000-topic body keeps in about 150 KB); past it the oldest go.",
        lo=0,
        hi=1 << 34,
    )
    routeCacheRefreshSeconds: float = _opt(
        60.0,
        "A cached route served within this many seconds is read again as soon as a change drops it, "
        "so it stays in memory (and answers through a Redis outage); 0 turns re-reading off.",
        lo=0,
        hi=3600,
    )
    routeCacheMaxEntries: int = _opt(
        100000, "Routes a worker caches (least recently used go first).", lo=1, hi=10_000_000
    )
    routeNegativeCacheMillis: int = _opt(
        1000,
        "How long (ms) 'topic does not exist' is remembered; dropped at once when the topic appears.",
        lo=0,
        hi=60000,
    )
    emulatedVersion: int = _opt(479, "RocketMQ version ordinal put in replies (479 = 5.3.3).", lo=0, hi=32767)
    allowRemoteConfigUpdate: bool = _opt(
        False, "Accept UPDATE_NAMESRV_CONFIG (318) and PUT /v1/config; off answers NO_PERMISSION."
    )
    advertisedAddresses: str = _opt(
        "",
        "Remoting addresses served at /rocketmq/nsaddr, ';'-separated (e.g. the Kubernetes "
        "Service). Empty: <this host>:<remotingPort>.",
    )
    dataDir: str = _opt(".data", "Directory for the embedded Redis' append-only file.")
    adminAllowFrom: str = _opt(
        "127.0.0.0/8,::1/128,10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,100.64.0.0/10,fc00::/7",
        "With aclEnable=false: the only addresses (comma-separated CIDR blocks) admin requests "
        "(codes 100, 102, 205, 216, 217, 318, 327 and their HTTP writes) are accepted from.",
    )
    aclEnable: bool = _opt(
        False, "Check RocketMQ ACL signatures (AccessKey/Signature) against aclFile on every request."
    )
    aclFile: str = _opt(
        "", "RocketMQ plain_acl.yml (accounts, globalWhiteRemoteAddresses); reloaded on change and SIGHUP."
    )
    aclMode: str = _opt(
        "enforcing",
        "enforcing refuses what the ACL does not allow; permissive serves it but logs and counts it.",
        choices=("enforcing", "permissive"),
    )
    logLevel: str = _opt("INFO", "Log level.", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    logFormat: str = _opt("console", "Log format.", choices=("console", "json"))

    @property
    def embedded_redis(self) -> bool:
        """True when no Redis URL is configured and the worker runs its own redis-server."""
        return not self.redisUrl

    def as_properties(self) -> dict[str, str]:
        """Every option as Java-style text (``true``/``false`` for booleans), secrets masked: what
        GET_NAMESRV_CONFIG, GET /v1/config and ``namesrv -p`` show."""
        fields = dataclasses.fields(self)
        return {f.name: redact_value(f.name, _render(getattr(self, f.name))) for f in fields}


# Keys of a Java namesrv.properties file that map onto one of ours.
JAVA_ALIASES: dict[str, str] = {
    "listenPort": "remotingPort",
    "bindAddress": "listenHost",
    "shutdownWaitTimeSeconds": "shutdownTimeoutSeconds",
}

# Java keys that have no meaning for a fleet of asyncio workers on Redis: accepted, logged, ignored.
JAVA_NOT_APPLICABLE: frozenset[str] = frozenset(
    {
        "rocketmqHome",
        "kvConfigPath",
        "configStorePath",
        "productEnvName",
        "clientRequestThreadPoolNums",
        "defaultThreadPoolNums",
        "unRegisterBrokerQueueCapacity",
        "serverWorkerThreads",
        "serverCallbackExecutorThreads",
        "serverSelectorThreads",
        "serverOnewaySemaphoreValue",
        "serverAsyncSemaphoreValue",
        "serverSocketSndBufSize",
        "serverSocketRcvBufSize",
        "writeBufferHighWaterMark",
        "writeBufferLowWaterMark",
        "serverSocketBacklog",
        "serverNettyWorkerGroupEnable",
        "serverPooledByteBufAllocatorEnable",
        "enableShutdownGracefully",
        "useEpollNativeSelector",
    }
)

# Java keys we cannot honour; turning them on is refused rather than silently ignored.
JAVA_UNSUPPORTED_WHEN_TRUE: dict[str, str] = {
    "clusterTest": "clusterTest mode (every request answered as a route lookup) is not supported",
    "enableControllerInNamesrv": "a stateless fleet cannot host the Raft controller; run the "
    "RocketMQ controller as its own StatefulSet",
    "notifyMinBrokerIdChanged": "NOTIFY_MIN_BROKER_ID_CHANGE (905) is not sent by namesrv-fleet",
}

FIELDS: dict[str, dataclasses.Field[Any]] = {f.name: f for f in dataclasses.fields(Settings)}
DYNAMIC_KEYS: frozenset[str] = frozenset(n for n, f in FIELDS.items() if f.metadata["dynamic"])
_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def env_name(key: str) -> str:
    """``httpPort`` -> ``NAMESRV_HTTP_PORT``."""
    return "NAMESRV_" + _CAMEL_BOUNDARY.sub("_", key).upper()


def _render(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _parse(kind: type, raw: object) -> Any:
    """``raw`` (text from a file or the environment, or a TOML value) as an option of ``kind``;
    ValueError/TypeError says why not."""
    if kind is bool:
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and raw.strip().lower() in ("true", "false", "1", "0", "yes", "no"):
            return raw.strip().lower() in ("true", "1", "yes")
        raise ValueError("expected true or false")
    if kind is int or kind is float:
        if isinstance(raw, bool) or (kind is int and isinstance(raw, float)):
            raise ValueError("expected an integer" if kind is int else "expected a number")
        return kind(raw.strip()) if isinstance(raw, str) else kind(str(raw))
    if not isinstance(raw, str):
        raise ValueError("expected a string")
    return raw.strip()


def _coerce(key: str, raw: object, source: str) -> Any:
    f = FIELDS[key]
    meta = f.metadata
    try:
        value = _parse(type(f.default), raw)  # every option has a plain default, never a factory
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{key}: invalid value {raw!r} from {source}: {exc}") from None
    if meta["lo"] is not None and value < meta["lo"]:
        raise ConfigError(f"{key}: {value!r} from {source} is below the minimum {meta['lo']}")
    if meta["hi"] is not None and value > meta["hi"]:
        raise ConfigError(f"{key}: {value!r} from {source} is above the maximum {meta['hi']}")
    if meta["choices"] and value not in meta["choices"]:
        raise ConfigError(f"{key}: {value!r} from {source} is not one of {', '.join(meta['choices'])}")
    return value


# A message about the configuration, e.g. an ignored key: (logging level, text).
Notice = tuple[int, str]

# NAMESRV_* variables that are not ours but may well be set where a worker runs: RocketMQ
# clients read NAMESRV_ADDR, the route-history pipeline reads NAMESRV_SPARK_LOG_LEVEL.
FOREIGN_ENV: frozenset[str] = frozenset({"NAMESRV_ADDR", "NAMESRV_SPARK_LOG_LEVEL"})


def _apply_file_values(
    values: dict[str, Any], raw: Mapping[str, object], source: str, java: bool, notices: list[Notice]
) -> None:
    for key, item in raw.items():
        target = JAVA_ALIASES.get(key, key) if java else key
        if target in FIELDS:
            values[target] = _coerce(target, item, source)
        elif key in JAVA_UNSUPPORTED_WHEN_TRUE:
            if _coerce_flag(key, item, source):
                raise ConfigError(f"{key}: {JAVA_UNSUPPORTED_WHEN_TRUE[key]} (from {source})")
        elif key in JAVA_NOT_APPLICABLE:
            text = f"{key} is a Java NameServer option with no effect here; ignored"
            notices.append((logging.INFO, f"config {source}: {text}"))
        else:
            text = f"unknown key {key!r} ignored{_suggest(key, FIELDS)}"
            notices.append((logging.WARNING, f"config {source}: {text}"))


def _suggest(name: str, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def _unknown_env_notices(env: Mapping[str, str]) -> list[Notice]:
    """A mistyped NAMESRV_* variable would otherwise be silently ignored."""
    ours = {env_name(key) for key in FIELDS}
    return [
        (logging.WARNING, f"environment {name} is not an option; ignored{_suggest(name, ours)}")
        for name in sorted(env)
        if name.startswith("NAMESRV_") and name not in ours and name not in FOREIGN_ENV
    ]


def _coerce_flag(key: str, item: object, source: str) -> bool:
    if isinstance(item, bool):
        return item
    text = str(item).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise ConfigError(f"{key}: invalid value {item!r} from {source}: expected true or false")


def read_config_file(path: Path) -> tuple[dict[str, object], bool]:
    """Return the raw key/values of a TOML or Java properties file and whether it is Java's."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        text = path.read_text(encoding="latin-1")
    if path.suffix == ".properties":
        try:
            return dict(parse_properties(text)), True
        except PropertiesError as exc:
            raise ConfigError(f"{path}: {exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    nested = [k for k, v in data.items() if isinstance(v, dict)]
    if nested:
        raise ConfigError(f"{path}: tables are not used; put {', '.join(nested)} keys at the top level")
    return data, False


DEFAULT_TOML_HEADER = """\
# namesrv-fleet configuration: every option with its default.
#
# Precedence, lowest first: these defaults < the file given with `namesrv -c FILE` (TOML like this
# one, or a Java namesrv.properties) < environment NAMESRV_<UPPER_SNAKE_NAME> (e.g. NAMESRV_HTTP_PORT;
# plain REDIS_URL works too). Keys are flat (no tables). `namesrv -p` prints the effective values.
# Options marked [dynamic] can also be changed fleet-wide at run time with UPDATE_NAMESRV_CONFIG
# when allowRemoteConfigUpdate is true.

# ---- RocketMQ NamesrvConfig / NettyServerConfig options (same names as the Java NameServer) ----
"""


def render_default_toml() -> str:
    """The text of ``config/default.toml``: every option, its default and its documentation."""

    def literal(value: object) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, str):
            return '"' + value + '"'
        return repr(value)

    out = DEFAULT_TOML_HEADER.splitlines()
    for f in dataclasses.fields(Settings):
        if f.name == "redisUrl":
            out += ["", "# ---- namesrv-fleet options ----"]
        meta = f.metadata
        doc = meta["doc"] + (" [dynamic]" if meta["dynamic"] else "")
        bounds = []
        if meta["lo"] is not None:
            bounds.append(f"min {meta['lo']}")
        if meta["hi"] is not None:
            bounds.append(f"max {meta['hi']}")
        if meta["choices"]:
            bounds.append("one of " + ", ".join(meta["choices"]))
        if bounds:
            doc += " (" + "; ".join(bounds) + ")"
        out.append("")
        out += ["# " + line for line in textwrap.wrap(doc, 100)]
        out.append(f"{f.name} = {literal(f.default)}")
    return "\n".join(out) + "\n"


def load_settings(
    config_path: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None
) -> Settings:
    """Build :class:`Settings` from defaults, an optional file and the environment, logging
    what was ignored at once (see :func:`read_settings` to log it later)."""
    settings, notices = read_settings(config_path, environ)
    for level, text in notices:
        log.log(level, "%s", text)
    return settings


def read_settings(
    config_path: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None
) -> tuple[Settings, list[Notice]]:
    """:func:`load_settings` that returns its notices (ignored keys, unknown variables) instead
    of logging them: the command line reads settings before logging is configured, and would
    otherwise drop the INFO ones."""
    env = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    notices: list[Notice] = []
    if config_path:
        path = Path(config_path)
        raw, java = read_config_file(path)
        _apply_file_values(values, raw, str(path), java, notices)
    if env.get("REDIS_URL"):
        values["redisUrl"] = _coerce("redisUrl", env["REDIS_URL"], "environment REDIS_URL")
    for key in FIELDS:
        name = env_name(key)
        if name in env:
            values[key] = _coerce(key, env[name], f"environment {name}")
    settings = Settings(**values)
    _check_write_replicas(settings)
    _check_report_url(settings.consoleReportUrl)
    return settings, notices + _unknown_env_notices(env)


def _check_write_replicas(settings: Settings) -> None:
    """Refuse a redisWriteReplicas that no write could ever meet, instead of failing every write."""
    if not settings.redisWriteReplicas:
        return
    if settings.embedded_redis:
        raise ConfigError("redisWriteReplicas: the embedded Redis (no redisUrl) has no replicas; set it to 0")
    scheme = urlsplit(settings.redisUrl).scheme
    if scheme.endswith("+cluster"):
        raise ConfigError("redisWriteReplicas: not supported with Redis Cluster (redis+cluster://); set 0")
    if settings.redisWriteReplicas < 0 and not scheme.endswith("+sentinel"):
        raise ConfigError(
            "redisWriteReplicas: -1 counts the replicas Sentinel reports: needs redis+sentinel://"
        )


MAX_REPORT_URL = 2048


def _check_report_url(url: str) -> None:
    """The console renders it as a link: only a web address (never ``javascript:`` and the like)."""
    if not url:
        return
    if len(url) > MAX_REPORT_URL:
        raise ConfigError(f"consoleReportUrl: longer than {MAX_REPORT_URL} characters")
    parts = urlsplit(url)
    web = parts.scheme in ("http", "https") and bool(parts.netloc)
    local = not parts.scheme and not parts.netloc and url.startswith("/") and not url.startswith("//")
    if not (web or local) or any(c.isspace() or ord(c) < 32 for c in url):
        raise ConfigError(
            f"consoleReportUrl: {url[:80]!r} is neither an http(s) URL nor a path starting with '/'"
        )


def with_overrides(settings: Settings, overrides: Mapping[str, str], source: str) -> Settings:
    """Apply runtime overrides (fleet-wide UPDATE_NAMESRV_CONFIG) to the dynamic keys only."""
    changes = {k: _coerce(k, v, source) for k, v in overrides.items() if k in DYNAMIC_KEYS}
    return dataclasses.replace(settings, **changes) if changes else settings
