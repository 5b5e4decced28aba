"""Handlers of what operators' tools (mqadmin) send: write permissions of a broker (205, 327),
deleting and creating topics (216, 217), and topic lists (206, 224, 304, 311-313)."""

from __future__ import annotations

from namesrv.domain.errors import BadRequest
from namesrv.domain.model import QueueData
from namesrv.protocol import lenient_json
from namesrv.protocol.headers import get_str
from namesrv.protocol.remoting import RemotingCommand
from namesrv.remoting.context import (
    ConnectionState,
    Handler,
    HandlerContext,
    ext_of,
    fastjson_body,
    reply,
)


# ---- admin: 205, 327, 216, 217 ----
async def wipe_write_perm(
    ctx: HandlerContext, conn: ConnectionState, cmd: RemotingCommand
) -> RemotingCommand:
    name = get_str(ext_of(cmd), "brokerName")
    count = await ctx.service.change_write_perm(name, wipe=True) if name else 0
    return reply(ctx, cmd, ext={"wipeTopicCount": str(count)})


async def add_write_perm(ctx: HandlerContext, conn: ConnectionState, cmd: RemotingCommand) -> RemotingCommand:
    name = get_str(ext_of(cmd), "brokerName")
    count = await ctx.service.change_write_perm(name, wipe=False) if name else 0
    return reply(ctx, cmd, ext={"addTopicCount": str(count)})


async def delete_topic(ctx: HandlerContext, conn: ConnectionState, cmd: RemotingCommand) -> RemotingCommand:
    ext = ext_of(cmd)
    topic = get_str(ext, "topic")
    if topic is not None:
        await ctx.service.delete_topic(topic, get_str(ext, "clusterName") or None)
    return reply(ctx, cmd)


async def register_topic(ctx: HandlerContext, conn: ConnectionState, cmd: RemotingCommand) -> RemotingCommand:
    topic = get_str(ext_of(cmd), "topic")
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
def _topic_list(topics: list[str], broker_addr: str | None = None) -> bytes:
    return fastjson_body({"brokerAddr": broker_addr, "topicList": topics})


async def all_topics(ctx: HandlerContext, conn: ConnectionState, cmd: RemotingCommand) -> RemotingCommand:
    return reply(ctx, cmd, body=_topic_list(await ctx.service.all_topics()))


async def topics_by_cluster(
    ctx: HandlerContext, conn: ConnectionState, cmd: RemotingCommand
) -> RemotingCommand:
    cluster = get_str(ext_of(cmd), "cluster")
    topics = await ctx.service.topics_by_cluster(cluster) if cluster is not None else []
    return reply(ctx, cmd, body=_topic_list(topics))


async def system_topics(ctx: HandlerContext, conn: ConnectionState, cmd: RemotingCommand) -> RemotingCommand:
    names, addr = await ctx.service.system_topics()
    return reply(ctx, cmd, body=_topic_list(names, addr))


def unit_topics(kind: str) -> Handler:
    async def handler(ctx: HandlerContext, conn: ConnectionState, cmd: RemotingCommand) -> RemotingCommand:
        return reply(ctx, cmd, body=_topic_list(await ctx.service.unit_topics(kind)))

    return handler
