"""The NameServer's data, as immutable values with RocketMQ's field names.

``from_obj`` accepts what a Java broker or an HTTP client sends, with types checked so that a
bad payload is a :class:`BadRequest`, never a half-written registration. The model knows no
wire format: :mod:`namesrv.protocol.render` turns it into what RocketMQ's fastjson writes. The
only texts made here are the ones the store keeps (see ``to_json``).

The values a worker keeps for long (the topic configs of brokers' last bodies, the routes of the
route cache: hundreds of thousands of objects) are msgspec Structs that Python's cyclic GC does
not track (``gc=False``; none of them can be part of a reference cycle). A full collection walks
every tracked object while the event loop waits: walking these made it a pause of 50 ms and more
that grew with the registry. ``frozen=True`` keeps them immutable values, as dataclasses were.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any

import msgspec
import xxhash

from namesrv.domain.codes import PERM_WRITE
from namesrv.domain.errors import BadRequest

JAVA_INT_MIN, JAVA_INT_MAX = -(2**31), 2**31 - 1
JAVA_LONG_MIN, JAVA_LONG_MAX = -(2**63), 2**63 - 1
MAX_NAME_LENGTH = 255  # TopicValidator's limit for %RETRY%/%DLQ% topics; also caps other names
# PermName's bits: PRIORITY 8, READ 4, WRITE 2, INHERIT 1. Anything else is not a permission.
PERM_MAX = 15
# Queue counts: a broker's queues of a topic are numbered 0..n-1 in its consume-queue directory
# names; no real topic comes near this, and a count of millions is a mistake or an attack.
QUEUE_NUMS_MAX = 65535


def _field(
    obj: Mapping[str, Any],
    name: str,
    kind: type,
    default: Any,
    where: str,
    lo: int = JAVA_LONG_MIN,
    hi: int = JAVA_LONG_MAX,
) -> Any:
    value = obj.get(name, default)
    if value is None:
        return default
    if kind is int:
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise BadRequest(f"{where}.{name} must be an integer, got {type(value).__name__}")
        if not lo <= value <= hi:
            raise BadRequest(f"{where}.{name} = {value} is out of range [{lo}, {hi}]")
        return value
    if kind is bool:
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        if not isinstance(value, bool):
            raise BadRequest(f"{where}.{name} must be a boolean, got {type(value).__name__}")
        return value
    if kind is str:
        if not isinstance(value, str):
            raise BadRequest(f"{where}.{name} must be a string, got {type(value).__name__}")
        return value
    raise AssertionError(kind)


def check_name(value: str, what: str) -> str:
    """Reject names that would corrupt keys or logs; RocketMQ itself checks charsets client-side."""
    if not value:
        raise BadRequest(f"{what} must not be empty")
    if len(value) > MAX_NAME_LENGTH:
        raise BadRequest(f"{what} is {len(value)} characters long; the maximum is {MAX_NAME_LENGTH}")
    if not value.isprintable():
        raise BadRequest(f"{what} contains control characters")
    return value


# TopicValidator (RocketMQ common): what a new topic may be called. Brokers register topics Java
# did not validate this way (%RETRY%/%DLQ% of long group names), so registrations and lookups keep
# the wider MAX_NAME_LENGTH; only a topic created through 217 / PUT /v1/topics is held to this.
NEW_TOPIC_MAX_LENGTH = 127
_NEW_TOPIC_CHARS = frozenset("%|_-0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def check_new_topic(value: str) -> str:
    """TopicValidator.validateTopic's rules, with its remarks (the name itself is never echoed)."""
    if not value or value.isspace():
        raise BadRequest("The specified topic is blank.")
    if not _NEW_TOPIC_CHARS.issuperset(value):
        raise BadRequest("The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$")
    if len(value) > NEW_TOPIC_MAX_LENGTH:
        raise BadRequest(
            f"The specified topic is longer than topic max length ({len(value)} > {NEW_TOPIC_MAX_LENGTH})."
        )
    return value


def check_addr(value: str, what: str) -> str:
    check_name(value, what)
    if "/" in value or " " in value:
        raise BadRequest(f"{what} {value!r} is not an ip:port address")
    return value


class DataVersion(msgspec.Struct, frozen=True, gc=False):
    """A broker's topic-config version; equality is over all three fields, as in Java."""

    counter: int = 0
    stateVersion: int = 0
    timestamp: int = 0

    def to_json(self) -> str:
        """The text the store keeps and compares (fastjson's, byte for byte: three ints)."""
        return f'{{"counter":{self.counter},"stateVersion":{self.stateVersion},"timestamp":{self.timestamp}}}'

    @classmethod
    def from_obj(cls, obj: Any, where: str = "dataVersion") -> DataVersion:
        if obj is None:
            return cls()
        if not isinstance(obj, Mapping):
            raise BadRequest(f"{where} must be an object")
        return cls(
            counter=_field(obj, "counter", int, 0, where),
            stateVersion=_field(obj, "stateVersion", int, 0, where),
            timestamp=_field(obj, "timestamp", int, 0, where),
        )


# The bounds a REGISTER_BROKER body's topic configs are held to, as msgspec constraints: its typed
# decoder then checks them in C while it parses (a Python check per topic was half of a 10,000-topic
# body's decoding). They apply only to decoding; building a TopicConfig in code checks nothing.
_BodyTopicName = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_NAME_LENGTH)]
_BodyQueueCount = Annotated[int, msgspec.Meta(ge=0, le=JAVA_INT_MAX)]
_BodyJavaInt = Annotated[int, msgspec.Meta(ge=JAVA_INT_MIN, le=JAVA_INT_MAX)]


class TopicConfig(msgspec.Struct, frozen=True, gc=False):
    topicName: _BodyTopicName
    readQueueNums: _BodyQueueCount = 16
    writeQueueNums: _BodyQueueCount = 16
    perm: _BodyJavaInt = 6
    topicFilterType: str = "SINGLE_TAG"
    topicSysFlag: _BodyJavaInt = 0
    order: bool = False
    attributes: Mapping[str, str] = msgspec.field(default_factory=dict)

    @classmethod
    def from_obj(cls, obj: Any, key: str) -> TopicConfig:
        where = f"topicConfigTable[{key!r}]"
        if not isinstance(obj, Mapping):
            raise BadRequest(f"{where} must be an object")
        name = _field(obj, "topicName", str, key, where)
        attrs = obj.get("attributes") or {}
        if not isinstance(attrs, Mapping):
            raise BadRequest(f"{where}.attributes must be an object")
        return cls(
            topicName=check_name(name, f"{where}.topicName"),
            readQueueNums=_field(obj, "readQueueNums", int, 16, where, 0, QUEUE_NUMS_MAX),
            writeQueueNums=_field(obj, "writeQueueNums", int, 16, where, 0, QUEUE_NUMS_MAX),
            perm=_field(obj, "perm", int, 6, where, 0, PERM_MAX),
            topicFilterType=_field(obj, "topicFilterType", str, "SINGLE_TAG", where),
            topicSysFlag=_field(obj, "topicSysFlag", int, 0, where, JAVA_INT_MIN, JAVA_INT_MAX),
            order=_field(obj, "order", bool, False, where),
            attributes={str(k): str(v) for k, v in attrs.items()},
        )

    def queue_data_json(self, quoted_broker_name: str) -> str:
        """``queue_data(name).to_json()`` without the intermediate object (registrations render
        thousands); ``quoted_broker_name`` is ``quote(broker_name)``, computed once per body."""
        return (
            f'{{"brokerName":{quoted_broker_name},"perm":{self.perm},"readQueueNums":'
            f'{self.readQueueNums},"topicSysFlag":{self.topicSysFlag},"writeQueueNums":'
            f"{self.writeQueueNums}}}"
        )

    def queue_data(self, broker_name: str, *, wipe_write: bool = False) -> QueueData:
        perm = self.perm & ~PERM_WRITE if wipe_write else self.perm
        return QueueData(broker_name, perm, self.readQueueNums, self.topicSysFlag, self.writeQueueNums)


class QueueData(msgspec.Struct, frozen=True, gc=False):
    brokerName: str
    perm: int
    readQueueNums: int
    topicSysFlag: int
    writeQueueNums: int

    @classmethod
    def from_obj(cls, obj: Any, where: str = "queueData") -> QueueData:
        if not isinstance(obj, Mapping):
            raise BadRequest(f"{where} must be an object")
        name = _field(obj, "brokerName", str, None, where)
        if name is None:
            raise BadRequest(f"{where}.brokerName is required")
        return cls(
            brokerName=check_name(name, f"{where}.brokerName"),
            perm=_field(obj, "perm", int, 6, where, 0, PERM_MAX),
            readQueueNums=_field(obj, "readQueueNums", int, 16, where, 0, QUEUE_NUMS_MAX),
            topicSysFlag=_field(obj, "topicSysFlag", int, 0, where, JAVA_INT_MIN, JAVA_INT_MAX),
            writeQueueNums=_field(obj, "writeQueueNums", int, 16, where, 0, QUEUE_NUMS_MAX),
        )


class BrokerData(msgspec.Struct, frozen=True, gc=False):
    cluster: str
    brokerName: str
    brokerAddrs: Mapping[int, str]
    zoneName: str | None = None
    enableActingMaster: bool = False

    @classmethod
    def from_store(cls, obj: Mapping[str, Any]) -> BrokerData:
        """From the JSON the Lua scripts keep in ``{ns}:brokers`` (string ids)."""
        return cls(
            cluster=obj["cluster"],
            brokerName=obj["brokerName"],
            brokerAddrs={int(k): v for k, v in (obj.get("brokerAddrs") or {}).items()},
            zoneName=obj.get("zoneName") or None,
            enableActingMaster=bool(obj.get("enableActingMaster")),
        )


@dataclass(frozen=True)
class TopicConfigWrapper:
    """``TopicConfigSerializeWrapper`` (plus the static-topic mapping of 5.x brokers)."""

    topicConfigTable: Mapping[str, TopicConfig]
    dataVersion: DataVersion
    topicQueueMappingInfoMap: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class RawBody:
    """A REGISTER_BROKER body as it came off the wire, with what says how to decode it: the
    request's ``version`` and header ``compressed`` flag. The registry decodes it only if it
    needs the content."""

    data: bytes | None
    version: int
    compressed: bool

    @functools.cached_property
    def hash(self) -> str:
        """Identifies the body (what the registry remembers of a complete registration).

        XXH3-128, computed on the event loop for every registration: 0.06 ms for a 10,000-topic
        body (1.7 MB) where SHA-1 took 1.1 ms, half of an unchanged re-registration's own work.
        It is compared only with hashes of bodies the same broker address sent before, so a
        crafted collision could only make a broker's own registration keep what that broker
        sent earlier. The ``x3`` prefix keeps it from ever equalling a SHA-1 recorded by an
        earlier release: after an upgrade each broker's next body is decoded and written once."""
        digest = xxhash.xxh3_128(f"{self.version}/{self.compressed}/".encode())
        if self.data:
            digest.update(self.data)
        return "x3" + digest.hexdigest()


@dataclass(frozen=True)
class RegisterBrokerRequest:
    clusterName: str
    brokerAddr: str
    brokerName: str
    brokerId: int
    haServerAddr: str
    wrapper: TopicConfigWrapper | None  # None: see `body`
    filterServerList: tuple[str, ...] | None = None
    zoneName: str | None = None
    heartbeatTimeoutMillis: int | None = None
    enableActingMaster: bool | None = None  # None: a 4.x broker that does not send the field
    body: RawBody | None = None  # the raw body, decoded only if the registry needs its content
    holder: str = ""  # the remoting connection it came over ('<workerId>#<n>'); '' for HTTP
    # a heal's replay: the Redis time (ms) of the registration it replays (registry/heal.py)
    replay_of: int | None = None
    replay_continues: bool = False  # a heal's later batch of a split registration


@dataclass(frozen=True)
class RegisterBrokerResult:
    haServerAddr: str | None = None
    masterAddr: str | None = None
    order_topic_config: Mapping[str, str] | None = None  # the KVTable body, when returned
    accepted: bool = True  # False: R6 stale stateVersion, answered 0 with no effect


class TopicRouteData(msgspec.Struct, frozen=True, gc=False):
    queueDatas: tuple[QueueData, ...]
    brokerDatas: tuple[BrokerData, ...]
    filterServerTable: Mapping[str, tuple[str, ...]] = msgspec.field(default_factory=dict)
    orderTopicConf: str | None = None
    topicQueueMappingByBroker: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class ClusterInfo:
    brokerAddrTable: Mapping[str, BrokerData]
    clusterAddrTable: Mapping[str, tuple[str, ...]]
