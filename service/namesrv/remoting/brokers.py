"""Handlers of what brokers send: registration (103, 104), liveness (322, 904) and the member
group lookup of a broker set (901)."""

from __future__ import annotations

from dataclasses import replace

from namesrv.domain.codes import ZONE_NAME, ResponseCode
from namesrv.domain.errors import BadRequest
from namesrv.domain.model import DataVersion, RawBody, RegisterBrokerRequest
from namesrv.protocol import lenient_json
from namesrv.protocol.fastjson import IntKeyDict
from namesrv.protocol.headers import get_bool, get_int, get_long, get_str
from namesrv.protocol.register_body import crc32_matches
from namesrv.protocol.remoting import RemotingCommand
from namesrv.protocol.render import data_version_json
from namesrv.remoting.context import (
    ConnectionState,
    HandlerContext,
    ext_of,
    fastjson_body,
    reply,
    required,
)


async def register_broker(
    ctx: HandlerContext, conn: ConnectionState, cmd: RemotingCommand
) -> RemotingCommand:
    ext = ext_of(cmd)
    if not crc32_matches(get_int(ext, "bodyCrc32", 0), cmd.body):
        return reply(ctx, cmd, ResponseCode.SYSTEM_ERROR, remark="crc32 not match", ext={})
    broker_id = get_long(ext, "brokerId")
    if broker_id is None:
        raise BadRequest("brokerId is required")
    request = RegisterBrokerRequest(
        clusterName=required(ext, "clusterName"),
        brokerAddr=required(ext, "brokerAddr"),
        brokerName=required(ext, "brokerName"),
        brokerId=broker_id,
        haServerAddr=get_str(ext, "haServerAddr") or "",
        wrapper=None,
        body=RawBody(cmd.body, cmd.version, get_bool(ext, "compressed", False)),
        zoneName=get_str(ext, ZONE_NAME),
        heartbeatTimeoutMillis=get_long(ext, "heartbeatTimeoutMillis"),
        enableActingMaster=get_bool(ext, "enableActingMaster"),
        holder=conn.holder,
    )
    result, registration = await ctx.service.register_broker(request)
    if result is None:
        return reply(ctx, cmd, ResponseCode.SYSTEM_ERROR, remark="register broker failed", ext={})
    if registration is not None:
        ctx.service.keeper.keep(
            conn.holder,
            request,
            registration.registered_at,
            conn.replayed,
            conn.is_open,
            registration.facts,
            registration.written,
        )
        # the writes are the keeper's now (packed): the connection holds the rest
        conn.registrations[(registration.cluster, registration.addr)] = replace(registration, written=None)
    header: dict[str, str] = {}
    if result.haServerAddr:
        header["haServerAddr"] = result.haServerAddr
    if result.masterAddr:
        header["masterAddr"] = result.masterAddr
    body = (
        fastjson_body({"table": result.order_topic_config}) if result.order_topic_config is not None else None
    )
    return reply(ctx, cmd, ext=header, body=body)


async def unregister_broker(
    ctx: HandlerContext, conn: ConnectionState, cmd: RemotingCommand
) -> RemotingCommand:
    ext = ext_of(cmd)
    cluster, addr, name = (
        required(ext, "clusterName"),
        required(ext, "brokerAddr"),
        required(ext, "brokerName"),
    )
    broker_id = get_long(ext, "brokerId")
    known = conn.registrations.get((cluster, addr))
    refusal = ctx.access.check_unregister(cmd.ext_fields, conn.peer, addr, known is not None)
    if refusal is not None:  # refused before anything changed
        return reply(ctx, cmd, ResponseCode.NO_PERMISSION, remark=refusal)
    conn.registrations.pop((cluster, addr), None)
    ctx.service.keeper.forget(conn.holder, cluster, addr)
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
    ext = ext_of(cmd)
    cluster, addr = required(ext, "clusterName"), required(ext, "brokerAddr")
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
    ext = ext_of(cmd)
    await ctx.service.heartbeat(required(ext, "clusterName"), required(ext, "brokerAddr"))
    return reply(ctx, cmd)


async def get_broker_member_group(
    ctx: HandlerContext, conn: ConnectionState, cmd: RemotingCommand
) -> RemotingCommand:
    ext = ext_of(cmd)
    cluster, name = get_str(ext, "clusterName"), get_str(ext, "brokerName")
    addrs = await ctx.service.broker_member_group(cluster or "", name) if name is not None else {}
    group = {"brokerAddrs": IntKeyDict(addrs), "brokerName": name, "cluster": cluster}
    # Java never clears the default remark on this path.
    return reply(
        ctx, cmd, remark="not set any response code", body=fastjson_body({"brokerMemberGroup": group})
    )
