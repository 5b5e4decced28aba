"""Handlers of route and cluster lookups (105, 106): what clients ask most, answered from the
worker's route cache when it can, without a task or a Redis round trip."""

from __future__ import annotations

from namesrv.domain.codes import ZONE_MODE, ZONE_NAME, ResponseCode, Version, topic_not_exist_remark
from namesrv.domain.errors import NotReady
from namesrv.protocol.fastjson import Dialect
from namesrv.protocol.headers import get_bool, get_str
from namesrv.protocol.remoting import RemotingCommand, encode
from namesrv.protocol.render import cluster_info_obj
from namesrv.registry.route_lookups import STALE, CachedRoute, Stale
from namesrv.remoting.context import (
    ConnectionState,
    HandlerContext,
    ext_of,
    fastjson_body,
    reply,
)


async def get_route(ctx: HandlerContext, conn: ConnectionState, cmd: RemotingCommand) -> RemotingCommand:
    if ctx.worker.waiting_for_service():
        raise NotReady()
    topic = get_str(ext_of(cmd), "topic")
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
    ext = ext_of(cmd)
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
    return reply(ctx, cmd, body=fastjson_body(cluster_info_obj(info)))
