"""RocketMQ request and response codes, versions and constants the NameServer uses.

Values come from ``RequestCode``, ``ResponseCode``/``RemotingSysResponseCode``,
``MQVersion``, ``PermName``, ``TopicSysFlag`` and ``MixAll`` in apache/rocketmq.
"""

from __future__ import annotations

from enum import IntEnum


class RequestCode(IntEnum):
    PUT_KV_CONFIG = 100
    GET_KV_CONFIG = 101
    DELETE_KV_CONFIG = 102
    REGISTER_BROKER = 103
    UNREGISTER_BROKER = 104
    GET_ROUTEINFO_BY_TOPIC = 105
    GET_BROKER_CLUSTER_INFO = 106
    WIPE_WRITE_PERM_OF_BROKER = 205
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206
    DELETE_TOPIC_IN_NAMESRV = 216
    REGISTER_TOPIC_IN_NAMESRV = 217
    GET_KVLIST_BY_NAMESPACE = 219
    GET_TOPICS_BY_CLUSTER = 224
    GET_SYSTEM_TOPIC_LIST_FROM_NS = 304
    GET_UNIT_TOPIC_LIST = 311
    GET_HAS_UNIT_SUB_TOPIC_LIST = 312
    GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST = 313
    UPDATE_NAMESRV_CONFIG = 318
    GET_NAMESRV_CONFIG = 319
    QUERY_DATA_VERSION = 322
    ADD_WRITE_PERM_OF_BROKER = 327
    GET_BROKER_MEMBER_GROUP = 901
    BROKER_HEARTBEAT = 904


class ResponseCode(IntEnum):
    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3
    NO_PERMISSION = 16
    TOPIC_NOT_EXIST = 17
    QUERY_NOT_FOUND = 22
    INVALID_PARAMETER = 29
    GO_AWAY = 1500


class Version(IntEnum):
    """``MQVersion.Version`` ordinals that change NameServer behaviour."""

    V3_0_11 = 37  # REGISTER_BROKER body becomes RegisterBrokerBody
    V4_9_3 = 399
    V4_9_4 = 401  # routes in standard JSON
    V4_9_8 = 409
    V5_0_0 = 413  # compressed register body carries the static-topic mapping section
    V5_3_1 = 475  # GO_AWAY on shutdown
    V5_3_3 = 479  # CURRENT_VERSION of the Java NameServer we emulate
    HIGHER_VERSION = 612


def _version_names() -> tuple[str, ...]:
    """Every ``MQVersion.Version`` name by ordinal, from the enum's layout: sixteen 3.0.0
    pre-releases, then a ``_SNAPSHOT`` and a release per version (3.0.1-3.0.15, 3.1.0-3.2.9,
    3.3.1-3.9.9 with no x.y.0, 4.0.0-5.9.9), then ``HIGHER_VERSION``."""
    names = ["V3_0_0_SNAPSHOT", "V3_0_0_ALPHA1"] + [f"V3_0_0_BETA{n}" for n in range(1, 6)]
    for n in range(6, 10):
        names += [f"V3_0_0_BETA{n}_SNAPSHOT", f"V3_0_0_BETA{n}"]
    names.append("V3_0_0_FINAL")
    releases = [(3, 0, p) for p in range(1, 16)] + [(3, m, p) for m in (1, 2) for p in range(10)]
    releases += [(3, m, p) for m in range(3, 10) for p in range(1, 10)]
    releases += [(major, m, p) for major in (4, 5) for m in range(10) for p in range(10)]
    for major, minor, patch in releases:
        names += [f"V{major}_{minor}_{patch}_SNAPSHOT", f"V{major}_{minor}_{patch}"]
    return (*names, "HIGHER_VERSION")


VERSION_NAMES = _version_names()


def version_name(ordinal: int) -> str:
    """``MQVersion.getVersionDesc``: the name of a request's ``version``; an ordinal past the
    enum reads ``HIGHER_VERSION`` as in Java, a negative one (no Java client sends it) its number."""
    if ordinal < 0:
        return str(ordinal)
    return VERSION_NAMES[min(ordinal, len(VERSION_NAMES) - 1)]


LANGUAGES: tuple[str, ...] = (
    "JAVA",
    "CPP",
    "DOTNET",
    "PYTHON",
    "DELPHI",
    "ERLANG",
    "RUBY",
    "OTHER",
    "HTTP",
    "GO",
    "PHP",
    "OMS",
    "RUST",
    "NODE_JS",
)

PERM_PRIORITY = 8
PERM_READ = 4
PERM_WRITE = 2
PERM_INHERIT = 1

FLAG_UNIT = 1
FLAG_UNIT_SUB = 2

MASTER_ID = 0
ZONE_NAME = "__ZONE_NAME"
ZONE_MODE = "__ZONE_MODE"
ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"
SYNC_BROKER_MEMBER_GROUP_PREFIX = "rmq_sys_SYNC_BROKER_MEMBER_"
AUTO_CREATE_TOPIC_KEY_TOPIC = "TBW102"
DEFAULT_FAQ_URL = "https://rocketmq.apache.org/docs/bestPractice/06FAQ"

# UPDATE_NAMESRV_CONFIG always refuses these, on top of configBlackList.
HARD_CONFIG_BLACKLIST: frozenset[str] = frozenset(
    {"configBlackList", "configStorePath", "kvConfigPath", "rocketmqHome"}
)


# Java's remark when a request is shed (RejectedExecutionException of a processor's pool).
OVERLOAD_REMARK = "[OVERLOAD]system busy, start flow control for a while"


def java_str(value: str | int | bool | None) -> str:
    """``String.valueOf`` as Java string concatenation renders a value in a remark: ``null``,
    ``true``/``false``. Remarks built from optional request fields go through this, so a missing
    field reads ``null`` as in Java, never Python's ``None``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def topic_not_exist_remark(topic: str | None) -> str:
    """The exact remark of TOPIC_NOT_EXIST (``FAQUrl.suggestTodo(APPLY_TOPIC_URL)``)."""
    return (
        f"No topic route info in name server for the topic: {java_str(topic)}\n"
        f"See {DEFAULT_FAQ_URL} for further details."
    )


def perm_to_string(perm: int) -> str:
    """``PermName.perm2String``: e.g. 6 -> ``RW-``."""
    return (
        ("R" if perm & PERM_READ else "-")
        + ("W" if perm & PERM_WRITE else "-")
        + ("X" if perm & PERM_INHERIT else "-")
    )
