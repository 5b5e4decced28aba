"""Handlers of the KV config (100, 101, 102, 219) and of the NameServer's own config (318, 319)."""

from __future__ import annotations

from namesrv.config import JAVA_ALIASES, JAVA_UNSUPPORTED_WHEN_TRUE, Settings
from namesrv.domain.codes import ResponseCode, java_str
from namesrv.domain.errors import PermissionDenied
from namesrv.javaprops import PropertiesError, format_properties, parse_properties
from namesrv.protocol.headers import get_str
from namesrv.protocol.remoting import RemotingCommand
from namesrv.registry.config_update import apply_update
from namesrv.remoting.context import (
    ConnectionState,
    HandlerContext,
    ext_of,
    fastjson_body,
    reply,
)


# ---- KV config: 100, 101, 102, 219 ----
async def put_kv_config(ctx: HandlerContext, conn: ConnectionState, cmd: RemotingCommand) -> RemotingCommand:
    ext = ext_of(cmd)
    namespace, key = get_str(ext, "namespace"), get_str(ext, "key")
    if namespace is None or key is None:
        return reply(ctx, cmd, ResponseCode.SYSTEM_ERROR, remark="namespace or key is null")
    await ctx.service.kv_put(namespace, key, get_str(ext, "value"))
    return reply(ctx, cmd)


async def get_kv_config(ctx: HandlerContext, conn: ConnectionState, cmd: RemotingCommand) -> RemotingCommand:
    ext = ext_of(cmd)
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
    ext = ext_of(cmd)
    namespace, key = get_str(ext, "namespace"), get_str(ext, "key")
    if namespace is not None and key is not None:
        await ctx.service.kv_delete(namespace, key)
    return reply(ctx, cmd)


async def get_kv_list(ctx: HandlerContext, conn: ConnectionState, cmd: RemotingCommand) -> RemotingCommand:
    namespace = get_str(ext_of(cmd), "namespace")
    table = await ctx.service.kv_list(namespace) if namespace is not None else None
    if table is None:
        remark = f"No config item, Namespace: {java_str(namespace)}"
        return reply(ctx, cmd, ResponseCode.QUERY_NOT_FOUND, remark=remark)
    return reply(ctx, cmd, body=fastjson_body({"table": table}))


# ---- config: 318, 319 ----
def java_config_view(settings: Settings) -> dict[str, str]:
    """Our settings plus every Java key that is true of this worker: the three Java names of our
    own options, and the three Java features a worker refuses to turn on (always false here).
    Java's other keys (JAVA_NOT_APPLICABLE: thread pools, Netty tuning, file paths) are left out:
    any value would claim a setting that does nothing."""
    values = settings.as_properties()
    for java, ours in JAVA_ALIASES.items():
        values[java] = values[ours]
    for java in JAVA_UNSUPPORTED_WHEN_TRUE:
        values[java] = "false"
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
