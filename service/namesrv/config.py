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
import logging
import os
import re
import textwrap
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from namesrv.javaprops import PropertiesError, parse_properties

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
    shutdownTimeoutSeconds: float = _opt(
        20.0, "On SIGTERM: seconds to finish in-flight requests before closing connections.", lo=0
    )
    registerChunkTopics: int = _opt(
        1000,
        "Topics written per Lua call when a registration changes many topics (bounds Redis blocking).",
        lo=10,
        hi=100000,
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
    routeCacheEnabled: bool = _opt(
        True, "Serve route lookups from a per-worker cache kept current by the change log."
    )
    routeCacheStalenessMillis: int = _opt(
        100,
        "Longest time (ms) a worker may keep serving a route after a change committed; past it "
        "(change feed lagging) lookups wait up to 1 s for the feed to catch up, then read Redis.",
        lo=10,
        hi=60000,
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
    logLevel: str = _opt("INFO", "Log level.", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    logFormat: str = _opt("console", "Log format.", choices=("console", "json"))

    @property
    def embedded_redis(self) -> bool:
        """True when no Redis URL is configured and the worker runs its own redis-server."""
        return not self.redisUrl

    def as_properties(self) -> dict[str, str]:
        """Every option as Java-style text (``true``/``false`` for booleans)."""
        return {f.name: _render(getattr(self, f.name)) for f in dataclasses.fields(self)}


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


def _coerce(key: str, raw: object, source: str) -> Any:
    f = FIELDS[key]
    kind: type = type(f.default)  # every option has a plain default, never a factory
    meta = f.metadata
    try:
        value: Any
        if kind is bool:
            if isinstance(raw, bool):
                value = raw
            elif isinstance(raw, str) and raw.strip().lower() in ("true", "false", "1", "0", "yes", "no"):
                value = raw.strip().lower() in ("true", "1", "yes")
            else:
                raise ValueError("expected true or false")
        elif kind is int:
            if isinstance(raw, bool | float):
                raise ValueError("expected an integer")
            value = int(raw.strip()) if isinstance(raw, str) else int(str(raw))
        elif kind is float:
            if isinstance(raw, bool):
                raise ValueError("expected a number")
            value = float(raw.strip()) if isinstance(raw, str) else float(str(raw))
        else:
            if not isinstance(raw, str):
                raise ValueError("expected a string")
            value = raw.strip()
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{key}: invalid value {raw!r} from {source}: {exc}") from None
    if meta["lo"] is not None and value < meta["lo"]:
        raise ConfigError(f"{key}: {value!r} from {source} is below the minimum {meta['lo']}")
    if meta["hi"] is not None and value > meta["hi"]:
        raise ConfigError(f"{key}: {value!r} from {source} is above the maximum {meta['hi']}")
    if meta["choices"] and value not in meta["choices"]:
        raise ConfigError(f"{key}: {value!r} from {source} is not one of {', '.join(meta['choices'])}")
    return value


def _apply_file_values(values: dict[str, Any], raw: Mapping[str, object], source: str, java: bool) -> None:
    for key, item in raw.items():
        target = JAVA_ALIASES.get(key, key) if java else key
        if target in FIELDS:
            values[target] = _coerce(target, item, source)
        elif key in JAVA_UNSUPPORTED_WHEN_TRUE:
            if _coerce_flag(key, item, source):
                raise ConfigError(f"{key}: {JAVA_UNSUPPORTED_WHEN_TRUE[key]} (from {source})")
        elif key in JAVA_NOT_APPLICABLE:
            log.info("config %s: %s is a Java NameServer option with no effect here; ignored", source, key)
        else:
            log.warning("config %s: unknown key %r ignored", source, key)


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
    """Build :class:`Settings` from defaults, an optional file and the environment."""
    env = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    if config_path:
        path = Path(config_path)
        raw, java = read_config_file(path)
        _apply_file_values(values, raw, str(path), java)
    if env.get("REDIS_URL"):
        values["redisUrl"] = _coerce("redisUrl", env["REDIS_URL"], "environment REDIS_URL")
    for key in FIELDS:
        name = env_name(key)
        if name in env:
            values[key] = _coerce(key, env[name], f"environment {name}")
    return Settings(**values)


def with_overrides(settings: Settings, overrides: Mapping[str, str], source: str) -> Settings:
    """Apply runtime overrides (fleet-wide UPDATE_NAMESRV_CONFIG) to the dynamic keys only."""
    changes = {k: _coerce(k, v, source) for k, v in overrides.items() if k in DYNAMIC_KEYS}
    return dataclasses.replace(settings, **changes) if changes else settings
