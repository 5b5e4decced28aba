"""The remoting protocol's request table and dispatch: one small handler per RocketMQ request
code, grouped by family in :mod:`.routes`, :mod:`.brokers`, :mod:`.kv_config` and :mod:`.admin`
(the context they share is :mod:`.context`). :func:`dispatch` checks access, runs the handler and
turns every failure into Java's reply, never a dead connection.
"""

from __future__ import annotations

import logging

from namesrv.domain.codes import RequestCode, ResponseCode
from namesrv.domain.errors import BadRequest, NamesrvError, PermissionDenied
from namesrv.protocol.remoting import RemotingCommand
from namesrv.remoting.admin import (
    add_write_perm,
    all_topics,
    delete_topic,
    register_topic,
    system_topics,
    topics_by_cluster,
    unit_topics,
    wipe_write_perm,
)
from namesrv.remoting.brokers import (
    broker_heartbeat,
    get_broker_member_group,
    query_data_version,
    register_broker,
    unregister_broker,
)
from namesrv.remoting.context import ConnectionState, Handler, HandlerContext, reply
from namesrv.remoting.kv_config import (
    delete_kv_config,
    get_config,
    get_kv_config,
    get_kv_list,
    put_kv_config,
    update_config,
)
from namesrv.remoting.routes import get_cluster_info, get_route

log = logging.getLogger(__name__)


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
