"""Request handlers of the remoting protocol: one small function per RocketMQ request code.

Each handler decodes its header the lenient Java way (missing or malformed fields become None,
never a protocol error), calls one use-case, and answers with Java's exact response code,
remark and ``extFields`` presence (``{}`` when Java attaches a response header class, absent when
it does not). Errors raised by use-cases become code-1 replies in :func:`dispatch`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from namesrv.config import Settings
from namesrv.domain.codes import (
    ZONE_MODE,
    ZONE_NAME,
    RequestCode,
    ResponseCode,
    Version,
    java_str,
    topic_not_exist_remark,
)
from namesrv.domain.errors import BadRequest, NamesrvError, NotReady, PermissionDenied
from namesrv.domain.model import DataVersion, QueueData, RawBody, RegisterBrokerRequest
from namesrv.javaprops import PropertiesError, format_properties, parse_properties
from namesrv.protocol import lenient_json
from namesrv.protocol.fastjson import Dialect, IntKeyDict, dumps
from namesrv.protocol.headers import get_bool, get_int, get_long, get_str
from namesrv.protocol.register_body import crc32_matches
from namesrv.protocol.remoting import RemotingCommand, SuccessFrame, encode, response_to
from namesrv.protocol.render import cluster_info_obj, data_version_json
from namesrv.registry.config_update import apply_update
from namesrv.registry.route_cache import STALE, CachedRoute, Stale
from namesrv.registry.service import Registration, RegistryService
from namesrv.security.policy import Authorizer
from namesrv.worker import WorkerState

log = logging.getLogger(__name__)


@dataclass
class ConnectionState:
    """What a connection remembers: the registrations made over it, for fenced close removal."""

    peer: str
    registrations: dict[tuple[str, str], Registration] = field(default_factory=dict)


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


def _ext(cmd: RemotingCommand) -> dict[str, str]:
    return cmd.ext_fields or {}


def _json(obj: Any, dialect: Dialect = Dialect.DEFAULT) -> bytes:
    return dumps(obj, dialect).encode()


def _topic_list(topics: list[str], broker_addr: str | None = None) -> bytes:
    return _json({"brokerAddr": broker_addr, "topicList": topics})


# ---- KV config: 100, 101, 102, 219 ----
async def put_kv_config(ctx: HandlerContext, conn: ConnectionState, cmd: RemotingCommand) -> RemotingCommand:
    ext = _ext(cmd)
    namespace, key = get_str(ext, "namespace"), get_str(ext, "key")
    if namespace is None or key is None:
        return reply(ctx, cmd, ResponseCode.SYSTEM_ERROR, remark="namespace or key is null")
    await ctx.service.kv_put(namespace, key, get_str(ext, "value"))
    return reply(ctx, cmd)


async def get_kv_config(ctx: HandlerContext, conn: ConnectionState, cmd: RemotingCommand) -> RemotingCommand:
    ext = _ext(cmd)
    namespace, key = get_str(ext, "namespace"), get_str(ext, "key")
    value = None
    if namespace is not None and key is not None:
        value = await ctx.service.kv_get(namespace, key)
    if value is None:
        return reply(
            ctx,
            cmd,
            ResponseCode.QUERY_NOT_FOUND,
            ext={},
            remark=f"No config item, Namespace: {java_str(namespace)} Key: {java_str(key)}",
        )
    return reply(ctx, cmd, ext={"value": value})


async def delete_kv_config(
    ctx: HandlerContext, conn: ConnectionState, cmd: RemotingCommand
) -> RemotingCommand:
    ext = _ext(cmd)
    namespace, key = get_str(ext, "namespace"), get_str(ext, "key")
    if namespace is not None and key is not None:
        await ctx.service.kv_delete(namespace, key)
    return reply(ctx, cmd)


async def get_kv_list(ctx: HandlerContext, conn: ConnectionState, cmd: RemotingCommand) -> RemotingCommand:
    namespace = get_str(_ext(cmd), "namespace")
    table = await ctx.service.kv_list(namespace) if namespace is not None else None
    if table is None:
        remark = f"No config item, Namespace: {java_str(namespace)}"
        return reply(ctx, cmd, ResponseCode.QUERY_NOT_FOUND, remark=remark)
    return reply(ctx, cmd, body=_json({"table": table}))


# ---- brokers: 103, 104, 322, 904 ----
def _required(ext: dict[str, str], name: str) -> str:
    value = get_str(ext, name)
    if value is None:
        raise BadRequest(f"{name} is required")
    return value


async def register_broker(
    ctx: HandlerContext, conn: ConnectionState, cmd: RemotingCommand
) -> RemotingCommand:
    ext = _ext(cmd)
    if not crc32_matches(get_int(ext, "bodyCrc32", 0), cmd.body):
        return reply(ctx, cmd, ResponseCode.SYSTEM_ERROR, remark="crc32 not match", ext={})
    broker_id = get_long(ext, "brokerId")
    if broker_id is None:
        raise BadRequest("brokerId is required")
    request = RegisterBrokerRequest(
        clusterName=_required(ext, "clusterName"),
        brokerAddr=_required(ext, "brokerAddr"),
        brokerName=_required(ext, "brokerName"),
        brokerId=broker_id,
        haServerAddr=get_str(ext, "haServerAddr") or "",
        wrapper=None,
        body=RawBody(cmd.body, cmd.version, get_bool(ext, "compressed", False)),
        zoneName=get_str(ext, ZONE_NAME),
        heartbeatTimeoutMillis=get_long(ext, "heartbeatTimeoutMillis"),
        enableActingMaster=get_bool(ext, "enableActingMaster"),
    )
    result, registration = await ctx.service.register_broker(request)
    if result is None:
        return reply(ctx, cmd, ResponseCode.SYSTEM_ERROR, remark="register broker failed", ext={})
    if registration is not None:
        conn.registrations[(registration.cluster, registration.addr)] = registration
    header: dict[str, str] = {}
    if result.haServerAddr:
        header["haServerAddr"] = result.haServerAddr
    if result.masterAddr:
        header["masterAddr"] = result.masterAddr
    body = _json({"table": result.order_topic_config}) if result.order_topic_config is not None else None
    return reply(ctx, cmd, ext=header, body=body)


async def unregister_broker(
    ctx: HandlerContext, conn: ConnectionState, cmd: RemotingCommand
) -> RemotingCommand:
    ext = _ext(cmd)
    cluster, addr, name = (
        _required(ext, "clusterName"),
        _required(ext, "brokerAddr"),
        _required(ext, "brokerName"),
    )
    broker_id = get_long(ext, "brokerId")
    known = conn.registrations.pop((cluster, addr), None)
    # Fence on the epoch this connection registered, so a broker that meanwhile registered
    # through another worker is left alone; an unregister from elsewhere (mqadmin) is unconditional.
    await ctx.service.unregister_broker(
        cluster,
        addr,
        name,
        broker_id if broker_id is not None else "",
        fence_epoch=known.epoch if known else None,
    )
    return reply(ctx, cmd)


async def query_data_version(
    ctx: HandlerContext, conn: ConnectionState, cmd: RemotingCommand
) -> RemotingCommand:
    ext = _ext(cmd)
    cluster, addr = _required(ext, "clusterName"), _required(ext, "brokerAddr")
    version = None
    if cmd.body:
        try:
            version = DataVersion.from_obj(lenient_json.loads(cmd.body))
        except ValueError as exc:
            raise BadRequest(f"DataVersion body: {exc}") from None
    changed, stored = await ctx.service.query_data_version(cluster, addr, version)
    body = data_version_json(stored).encode() if stored else None
    return reply(ctx, cmd, ext={"changed": "true" if changed else "false"}, body=body)


async def broker_heartbeat(
    ctx: HandlerContext, conn: ConnectionState, cmd: RemotingCommand
) -> RemotingCommand:
    ext = _ext(cmd)
    await ctx.service.heartbeat(_required(ext, "clusterName"), _required(ext, "brokerAddr"))
    return reply(ctx, cmd)


# ---- routes and clusters: 105, 106, 901 ----
async def get_route(ctx: HandlerContext, conn: ConnectionState, cmd: RemotingCommand) -> RemotingCommand:
    if ctx.worker.waiting_for_service():
        raise NotReady()
    topic = get_str(_ext(cmd), "topic")
    route = await ctx.service.route_entry(topic) if topic is not None else None
    return _route_reply(ctx, cmd, topic, route)


def route_from_cache(
    ctx: HandlerContext, cmd: RemotingCommand, *, caught_up: bool = False
) -> tuple[int, bytes] | Stale | None:
    """GET_ROUTEINFO_BY_TOPIC answered without waiting when the worker's cache can answer it:
    no task, no Redis. Returns the response code and the reply frame; STALE when the cache must
    catch up first (then call again with ``caught_up``); or None: go through :func:`dispatch`."""
    if ctx.worker.waiting_for_service():
        return None
    ext = cmd.ext_fields
    topic = ext.get("topic") if ext is not None else None
    if topic is None:
        return None
    found = ctx.service.cached_route(topic, caught_up=caught_up)
    if found is None or found is STALE:
        return found
    assert not isinstance(found, Stale)
    if found and ext is not None and ZONE_MODE not in ext and "acceptStandardJsonOnly" not in ext:
        # The common request, answered from the cached bytes without building a reply command.
        dialect = Dialect.STANDARD if cmd.version >= Version.V4_9_4 else Dialect.DEFAULT
        return ResponseCode.SUCCESS, ctx.success_frame().frame(cmd.opaque, found.encoded(dialect))
    response = _route_reply(ctx, cmd, topic, found or None)
    return response.code, encode(response)


def _route_reply(
    ctx: HandlerContext, cmd: RemotingCommand, topic: str | None, route: CachedRoute | None
) -> RemotingCommand:
    if route is None:
        return reply(
            ctx,
            cmd,
            ResponseCode.TOPIC_NOT_EXIST,
            remark=topic_not_exist_remark(topic),
        )
    ext = _ext(cmd)
    zone = get_str(ext, ZONE_NAME)
    if get_bool(ext, ZONE_MODE, False) and zone and zone.strip():
        # ZoneRouteRPCHook re-encodes with fastjson's default, whatever the client asked for.
        return reply(ctx, cmd, body=route.zone_encoded(zone))
    standard = cmd.version >= Version.V4_9_4 or get_bool(ext, "acceptStandardJsonOnly", False)
    return reply(ctx, cmd, body=route.encoded(Dialect.STANDARD if standard else Dialect.DEFAULT))


async def get_cluster_info(
    ctx: HandlerContext, conn: ConnectionState, cmd: RemotingCommand
) -> RemotingCommand:
    info = await ctx.service.cluster_info()
    return reply(ctx, cmd, body=_json(cluster_info_obj(info)))


async def get_broker_member_group(
    ctx: HandlerContext, conn: ConnectionState, cmd: RemotingCommand
) -> RemotingCommand:
    ext = _ext(cmd)
    cluster, name = get_str(ext, "clusterName"), get_str(ext, "brokerName")
    addrs = await ctx.service.broker_member_group(cluster or "", name) if name is not None else {}
    group = {"brokerAddrs": IntKeyDict(addrs), "brokerName": name, "cluster": cluster}
    # Java never clears the default remark on this path.
    return reply(ctx, cmd, remark="not set any response code", body=_json({"brokerMemberGroup": group}))


# ---- admin: 205, 327, 216, 217 ----
async def wipe_write_perm(
    ctx: HandlerContext, conn: ConnectionState, cmd: RemotingCommand
) -> RemotingCommand:
    name = get_str(_ext(cmd), "brokerName")
    count = await ctx.service.change_write_perm(name, wipe=True) if name else 0
    return reply(ctx, cmd, ext={"wipeTopicCount": str(count)})


async def add_write_perm(ctx: HandlerContext, conn: ConnectionState, cmd: RemotingCommand) -> RemotingCommand:
    name = get_str(_ext(cmd), "brokerName")
    count = await ctx.service.change_write_perm(name, wipe=False) if name else 0
    return reply(ctx, cmd, ext={"addTopicCount": str(count)})


async def delete_topic(ctx: HandlerContext, conn: ConnectionState, cmd: RemotingCommand) -> RemotingCommand:
    ext = _ext(cmd)
    topic = get_str(ext, "topic")
    if topic is not None:
        await ctx.service.delete_topic(topic, get_str(ext, "clusterName") or None)
    return reply(ctx, cmd)


async def register_topic(ctx: HandlerContext, conn: ConnectionState, cmd: RemotingCommand) -> RemotingCommand:
    topic = get_str(_ext(cmd), "topic")
    if topic is not None and cmd.body:
        try:
            route = lenient_json.loads(cmd.body)
        except ValueError as exc:
            raise BadRequest(f"TopicRouteData body: {exc}") from None
        items = route.get("queueDatas") if isinstance(route, dict) else None
        if isinstance(items, list) and items:
            queues = [QueueData.from_obj(q, f"queueDatas[{i}]") for i, q in enumerate(items)]
            await ctx.service.register_topic(topic, queues)
    return reply(ctx, cmd)


# ---- topic lists: 206, 224, 304, 311-313 ----
async def all_topics(ctx: HandlerContext, conn: ConnectionState, cmd: RemotingCommand) -> RemotingCommand:
    return reply(ctx, cmd, body=_topic_list(await ctx.service.all_topics()))


async def topics_by_cluster(
    ctx: HandlerContext, conn: ConnectionState, cmd: RemotingCommand
) -> RemotingCommand:
    cluster = get_str(_ext(cmd), "cluster")
    topics = await ctx.service.topics_by_cluster(cluster) if cluster is not None else []
    return reply(ctx, cmd, body=_topic_list(topics))


async def system_topics(ctx: HandlerContext, conn: ConnectionState, cmd: RemotingCommand) -> RemotingCommand:
    names, addr = await ctx.service.system_topics()
    return reply(ctx, cmd, body=_topic_list(names, addr))


def unit_topics(kind: str) -> Handler:
    async def handler(ctx: HandlerContext, conn: ConnectionState, cmd: RemotingCommand) -> RemotingCommand:
        return reply(ctx, cmd, body=_topic_list(await ctx.service.unit_topics(kind)))

    return handler


# ---- config: 318, 319 ----
def java_config_view(settings: Settings) -> dict[str, str]:
    """Our settings plus the Java names operators' tools look for (listenPort, bindAddress)."""
    values = settings.as_properties()
    values["listenPort"] = str(settings.remotingPort)
    values["bindAddress"] = settings.listenHost
    return values


async def update_config(ctx: HandlerContext, conn: ConnectionState, cmd: RemotingCommand) -> RemotingCommand:
    if not ctx.settings.allowRemoteConfigUpdate:
        raise PermissionDenied(
            "Can not update config: remote config update is disabled (set allowRemoteConfigUpdate=true)"
        )
    if cmd.body is None:
        return reply(ctx, cmd)
    try:
        changes = parse_properties(cmd.body.decode("utf-8"))
    except (UnicodeDecodeError, PropertiesError):
        return reply(ctx, cmd, ResponseCode.SYSTEM_ERROR, remark="string2Properties error")
    await apply_update(ctx.service, ctx.worker, changes)
    return reply(ctx, cmd)


async def get_config(ctx: HandlerContext, conn: ConnectionState, cmd: RemotingCommand) -> RemotingCommand:
    text = format_properties(java_config_view(ctx.settings))
    return reply(ctx, cmd, body=text.encode() if text.strip() else None)


HANDLERS: dict[int, Handler] = {
    RequestCode.PUT_KV_CONFIG: put_kv_config,
    RequestCode.GET_KV_CONFIG: get_kv_config,
    RequestCode.DELETE_KV_CONFIG: delete_kv_config,
    RequestCode.REGISTER_BROKER: register_broker,
    RequestCode.UNREGISTER_BROKER: unregister_broker,
    RequestCode.GET_ROUTEINFO_BY_TOPIC: get_route,
    RequestCode.GET_BROKER_CLUSTER_INFO: get_cluster_info,
    RequestCode.WIPE_WRITE_PERM_OF_BROKER: wipe_write_perm,
    RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: all_topics,
    RequestCode.DELETE_TOPIC_IN_NAMESRV: delete_topic,
    RequestCode.REGISTER_TOPIC_IN_NAMESRV: register_topic,
    RequestCode.GET_KVLIST_BY_NAMESPACE: get_kv_list,
    RequestCode.GET_TOPICS_BY_CLUSTER: topics_by_cluster,
    RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS: system_topics,
    RequestCode.GET_UNIT_TOPIC_LIST: unit_topics("unit"),
    RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST: unit_topics("unitSub"),
    RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: unit_topics("unitSubUnUnit"),
    RequestCode.UPDATE_NAMESRV_CONFIG: update_config,
    RequestCode.GET_NAMESRV_CONFIG: get_config,
    RequestCode.QUERY_DATA_VERSION: query_data_version,
    RequestCode.ADD_WRITE_PERM_OF_BROKER: add_write_perm,
    RequestCode.GET_BROKER_MEMBER_GROUP: get_broker_member_group,
    RequestCode.BROKER_HEARTBEAT: broker_heartbeat,
}


def operation_name(code: int) -> str:
    try:
        return RequestCode(code).name
    except ValueError:
        return "UNSUPPORTED"


async def dispatch(
    ctx: HandlerContext, conn: ConnectionState, cmd: RemotingCommand, *, admitted: bool = False
) -> RemotingCommand:
    """Run the handler of ``cmd.code``; every failure becomes a reply, never a dead connection.
    ``admitted``: access control already let this request through (the route fast path)."""
    handler = HANDLERS.get(cmd.code)
    try:
        refusal = None if admitted else ctx.access.check(cmd.code, cmd.ext_fields, cmd.body, conn.peer)
        if refusal is not None:  # before any handler: a refusal changes nothing
            return reply(ctx, cmd, ResponseCode.NO_PERMISSION, remark=refusal)
        if handler is None:
            return reply(
                ctx,
                cmd,
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                remark=f" request type {cmd.code} not supported",
            )
        return await handler(ctx, conn, cmd)
    except PermissionDenied as exc:
        return reply(ctx, cmd, ResponseCode.NO_PERMISSION, remark=exc.remark)
    except BadRequest as exc:
        # Java reports a request it cannot use as SYSTEM_ERROR with the exception's text.
        return reply(ctx, cmd, ResponseCode.SYSTEM_ERROR, remark=exc.remark)
    except NamesrvError as exc:
        return reply(ctx, cmd, int(exc.code), remark=exc.remark)
    except Exception as exc:
        log.exception("request code %d from %s failed", cmd.code, conn.peer)
        return reply(ctx, cmd, ResponseCode.SYSTEM_ERROR, remark=f"{type(exc).__name__}: {exc}")
