"""The HTTP surface: health, metrics, OpenAPI, the RocketMQ address server, and a JSON endpoint
for every NameServer operation (RocketMQ's field names, standard JSON)."""

from __future__ import annotations

import socket
from typing import Any

import orjson
from aiohttp import web

from namesrv.domain.codes import ResponseCode, topic_not_exist_remark
from namesrv.domain.errors import BadRequest, NotFound, NotReady, PermissionDenied
from namesrv.domain.model import ClusterInfo, check_name
from namesrv.domain.routes import filter_by_zone
from namesrv.http import payloads as p
from namesrv.http import watch
from namesrv.http.console import setup_console
from namesrv.http.openapi import OPENAPI
from namesrv.keys import ACL_FIELDS, AUTHORIZER, HEALTH, METRICS, SCRIPTS, SERVICE, WORKER
from namesrv.protocol.fastjson import Dialect, dumps
from namesrv.protocol.render import cluster_info_obj, data_version_obj, route_obj
from namesrv.registry.config_update import apply_update
from namesrv.security.http_auth import http_peer

JSON = "application/json"


def fastjson_response(obj: Any, status: int = 200) -> web.Response:
    return web.Response(text=dumps(obj, Dialect.STANDARD), status=status, content_type=JSON)


def json_response(obj: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(obj), status=status, content_type=JSON)


# ---- health, metrics, docs ----
async def livez(request: web.Request) -> web.Response:
    return json_response({"status": "ok", "worker": request.app[WORKER].worker_id})


async def readyz(request: web.Request) -> web.Response:
    worker, health = request.app[WORKER], request.app[HEALTH]
    problems: list[str] = []
    if worker.draining:
        problems.append("draining: shutting down")
    if worker.fatal is not None:
        problems.append(f"stopping: {worker.fatal}")
    if not health.reachable:
        problems.append(f"redis unreachable for {health.down_for():.1f} s: {health.reason}")
    elif not worker.scripts_loaded:
        problems.append("connecting to Redis: loading scripts")
    body: dict[str, Any] = {
        "status": "ready" if not problems else "not ready",
        "worker": worker.worker_id,
        "embeddedRedis": worker.base.embedded_redis,
        "scriptsBundle": request.app[SCRIPTS].bundle_hash if worker.scripts_loaded else None,
        "uptimeSeconds": round(worker.uptime(), 1),
    }
    if worker.base.embedded_redis:
        body["warning"] = (
            "embedded Redis: this worker's registry is private to one process on one "
            "machine; set NAMESRV_REDIS_URL to share a registry between workers"
        )
    if problems:
        body["problems"] = problems
    return json_response(body, 503 if problems else 200)


async def metrics(request: web.Request) -> web.Response:
    return web.Response(
        body=request.app[METRICS].render(),
        content_type="text/plain",
        charset="utf-8",
        headers={"X-Content-Type-Options": "nosniff"},
    )


async def openapi(request: web.Request) -> web.Response:
    return json_response(OPENAPI)


async def nsaddr(request: web.Request) -> web.Response:
    """The RocketMQ address server: ``ip:port;ip:port`` as plain text."""
    s = request.app[WORKER].settings
    text = s.advertisedAddresses
    if not text:
        host = s.listenHost if s.listenHost not in ("0.0.0.0", "::", "") else socket.gethostname()
        text = f"{host}:{s.remotingPort}"
    return web.Response(text=text, content_type="text/plain")


# ---- brokers ----
async def register_broker(request: web.Request) -> web.Response:
    service = request.app[SERVICE]
    # the topics live until the registration is answered: so does the memory they are counted as
    async with p.decoded_body(request, service.decode_budget, p.register_request) as req:
        result, registration = await service.register_broker(req)
    if result is None:  # counted by the service, for both transports
        return json_response({"code": ResponseCode.SYSTEM_ERROR, "remark": "register broker failed"}, 409)
    body: dict[str, Any] = {"code": 0, "accepted": result.accepted}
    if result.haServerAddr:
        body["haServerAddr"] = result.haServerAddr
    if result.masterAddr:
        body["masterAddr"] = result.masterAddr
    if registration:
        body["epoch"] = registration.epoch
    if result.order_topic_config is not None:
        body["kvTable"] = {"table": result.order_topic_config}
    return json_response(body)


async def unregister_broker(request: web.Request) -> web.Response:
    body = await p.json_body(request, request.app[SERVICE].decode_budget)
    p.only(body, p.UNREGISTER_FIELDS, "body")
    cluster, addr = p.required_str(body, "clusterName"), p.required_str(body, "brokerAddr")
    name = p.required_str(body, "brokerName")
    broker_id = p.integer(body, "brokerId", lo=0, hi=2**63 - 1)
    epoch = p.integer(body, "epoch", lo=1, hi=2**63 - 1, required=False)
    peer = http_peer(request.remote)
    refusal = request.app[AUTHORIZER].check_unregister(request.get(ACL_FIELDS), peer, addr, False)
    if refusal is not None:
        raise PermissionDenied(refusal)
    done = await request.app[SERVICE].unregister_broker(
        cluster, addr, name, broker_id or 0, fence_epoch=epoch
    )
    if not done:
        request.app[METRICS].fenced.labels("unregister").inc()
        return json_response(
            {
                "code": ResponseCode.SYSTEM_ERROR,
                "remark": f"fenced: epoch {epoch} is not the live registration",
            },
            409,
        )
    request.app[METRICS].removals.labels("unregister").inc()
    return json_response({"code": 0})


async def heartbeat(request: web.Request) -> web.Response:
    body = await p.json_body(request, request.app[SERVICE].decode_budget)
    p.only(body, p.HEARTBEAT_FIELDS - {"dataVersion"}, "body")
    live = await request.app[SERVICE].heartbeat(
        p.required_str(body, "clusterName"), p.required_str(body, "brokerAddr")
    )
    return json_response({"code": 0, "live": live})


async def query_data_version(request: web.Request) -> web.Response:
    body = await p.json_body(request, request.app[SERVICE].decode_budget)
    p.only(body, p.HEARTBEAT_FIELDS, "body")
    version = p.data_version(body["dataVersion"], "body.dataVersion") if "dataVersion" in body else None
    changed, stored = await request.app[SERVICE].query_data_version(
        p.required_str(body, "clusterName"), p.required_str(body, "brokerAddr"), version
    )
    return json_response(
        {"code": 0, "changed": changed, "dataVersion": data_version_obj(stored) if stored else None}
    )


async def wipe_write_perm(request: web.Request) -> web.Response:
    count = await request.app[SERVICE].change_write_perm(request.match_info["brokerName"], wipe=True)
    return json_response({"code": 0, "wipeTopicCount": count})


async def add_write_perm(request: web.Request) -> web.Response:
    count = await request.app[SERVICE].change_write_perm(request.match_info["brokerName"], wipe=False)
    return json_response({"code": 0, "addTopicCount": count})


async def broker_member_group(request: web.Request) -> web.Response:
    name = check_name(request.match_info["brokerName"], "brokerName")
    cluster = request.query.get("cluster", "")
    addrs = await request.app[SERVICE].broker_member_group(cluster, name)
    return fastjson_response(
        {
            "brokerMemberGroup": {
                "brokerAddrs": {str(k): v for k, v in addrs.items()},
                "brokerName": name,
                "cluster": cluster or None,
            }
        }
    )


# ---- routes and clusters ----
async def route(request: web.Request) -> web.Response:
    if request.app[WORKER].waiting_for_service():
        raise NotReady()
    topic = check_name(request.match_info["topic"], "topic")
    entry = await request.app[SERVICE].route_entry(topic)
    if entry is None:
        raise NotFound(topic_not_exist_remark(topic), ResponseCode.TOPIC_NOT_EXIST)
    zone = request.query.get("zone") if request.query_string else None  # parse only if there is one
    if zone:
        return fastjson_response(route_obj(filter_by_zone(entry.data, zone)))
    return web.Response(body=entry.encoded(Dialect.STANDARD), content_type=JSON)


async def cluster(request: web.Request) -> web.Response:
    info: ClusterInfo = await request.app[SERVICE].cluster_info()
    return fastjson_response(cluster_info_obj(info))


# ---- topics ----
async def topics(request: web.Request) -> web.Response:
    service = request.app[SERVICE]
    cluster_name = request.query.get("cluster")
    if cluster_name:
        names = await service.topics_by_cluster(check_name(cluster_name, "cluster"))
    else:
        names = await service.all_topics()
    return json_response({"topicList": names})


async def system_topics(request: web.Request) -> web.Response:
    names, addr = await request.app[SERVICE].system_topics()
    body: dict[str, Any] = {"topicList": names}
    if addr:
        body["brokerAddr"] = addr
    return json_response(body)


def unit_topics(kind: str) -> Any:
    async def handler(request: web.Request) -> web.Response:
        return json_response({"topicList": await request.app[SERVICE].unit_topics(kind)})

    return handler


async def delete_topic(request: web.Request) -> web.Response:
    topic = check_name(request.match_info["topic"], "topic")
    cluster_name = request.query.get("cluster")
    removed = await request.app[SERVICE].delete_topic(topic, cluster_name)
    return json_response({"code": 0, "removedQueues": removed})


async def register_topic(request: web.Request) -> web.Response:
    topic = check_name(request.match_info["topic"], "topic")
    queues = p.queue_datas(await p.json_body(request, request.app[SERVICE].decode_budget))
    written = await request.app[SERVICE].register_topic(topic, queues)
    return json_response({"code": 0, "written": written})


# ---- KV config ----
def _kv_names(request: web.Request) -> tuple[str, str]:
    return (
        check_name(request.match_info["namespace"], "namespace"),
        check_name(request.match_info["key"], "key"),
    )


def _no_config(namespace: str, key: str | None = None) -> NotFound:
    remark = f"No config item, Namespace: {namespace}" + (f" Key: {key}" if key is not None else "")
    return NotFound(remark, ResponseCode.QUERY_NOT_FOUND)


async def kv_list(request: web.Request) -> web.Response:
    namespace = check_name(request.match_info["namespace"], "namespace")
    table = await request.app[SERVICE].kv_list(namespace)
    if table is None:
        raise _no_config(namespace)
    return json_response({"table": table})


async def kv_get(request: web.Request) -> web.Response:
    namespace, key = _kv_names(request)
    value = await request.app[SERVICE].kv_get(namespace, key)
    if value is None:
        raise _no_config(namespace, key)
    return json_response({"value": value})


async def kv_put(request: web.Request) -> web.Response:
    # Written names follow the HTTP rule; reads and deletes take any name, so keys written over
    # remoting (which, as in Java, takes any) stay readable and removable here.
    namespace, key = _kv_names(request)
    namespace, key = p.kv_name(namespace, "namespace"), p.kv_name(key, "key")
    body = await p.json_body(request, request.app[SERVICE].decode_budget)
    p.only(body, {"value"}, "body")
    if "value" not in body:
        raise BadRequest("body.value is required (null stores an invisible key, as RocketMQ does)")
    value = p.optional_str(body, "value")
    await request.app[SERVICE].kv_put(namespace, key, value)
    return json_response({"code": 0})


async def kv_delete(request: web.Request) -> web.Response:
    namespace, key = _kv_names(request)
    deleted = await request.app[SERVICE].kv_delete(namespace, key)
    return json_response({"code": 0, "deleted": deleted})


# ---- config ----
async def get_config(request: web.Request) -> web.Response:
    return json_response(request.app[WORKER].settings.as_properties())


async def update_config(request: web.Request) -> web.Response:
    worker = request.app[WORKER]
    if not worker.settings.allowRemoteConfigUpdate:
        raise PermissionDenied("remote config update is disabled (set allowRemoteConfigUpdate=true)")
    body = await p.json_body(request, request.app[SERVICE].decode_budget)
    changes = {}
    for key, value in body.items():
        if isinstance(value, bool):
            changes[key] = "true" if value else "false"
        elif isinstance(value, str | int):
            changes[key] = str(value)
        else:
            raise BadRequest(f"body.{key} must be a string, number or boolean")
    outcome = await apply_update(request.app[SERVICE], worker, changes)
    return json_response({"code": 0, **outcome})


def setup_routes(app: web.Application) -> None:
    r = app.router
    r.add_get("/livez", livez, name="livez")
    r.add_get("/readyz", readyz, name="readyz")
    r.add_get("/metrics", metrics, name="metrics")
    r.add_get("/openapi.json", openapi, name="openapi")
    r.add_get("/rocketmq/nsaddr", nsaddr, name="nsaddr")
    r.add_post("/v1/brokers/register", register_broker, name="registerBroker")
    r.add_post("/v1/brokers/unregister", unregister_broker, name="unregisterBroker")
    r.add_post("/v1/brokers/heartbeat", heartbeat, name="brokerHeartbeat")
    r.add_post("/v1/brokers/data-version", query_data_version, name="queryDataVersion")
    r.add_post("/v1/brokers/{brokerName}/wipe-write-perm", wipe_write_perm, name="wipeWritePerm")
    r.add_post("/v1/brokers/{brokerName}/add-write-perm", add_write_perm, name="addWritePerm")
    r.add_get("/v1/brokers/{brokerName}", broker_member_group, name="brokerMemberGroup")
    r.add_get("/v1/routes/{topic}", watch.route, name="route")
    r.add_get("/v1/watch", watch.watch, name="watch")
    setup_console(app)
    r.add_get("/v1/cluster", cluster, name="clusterInfo")
    r.add_get("/v1/topics", topics, name="topicList")
    r.add_get("/v1/topics/system", system_topics, name="systemTopicList")
    r.add_get("/v1/topics/unit", unit_topics("unit"), name="unitTopicList")
    r.add_get("/v1/topics/unit-sub", unit_topics("unitSub"), name="unitSubTopicList")
    r.add_get("/v1/topics/unit-sub-ununit", unit_topics("unitSubUnUnit"), name="unitSubUnUnitTopicList")
    r.add_delete("/v1/topics/{topic}", delete_topic, name="deleteTopic")
    r.add_put("/v1/topics/{topic}", register_topic, name="registerTopic")
    r.add_get("/v1/kv/{namespace}", kv_list, name="kvList")
    r.add_get("/v1/kv/{namespace}/{key}", kv_get, name="kvGet")
    r.add_put("/v1/kv/{namespace}/{key}", kv_put, name="kvPut")
    r.add_delete("/v1/kv/{namespace}/{key}", kv_delete, name="kvDelete")
    r.add_get("/v1/config", get_config, name="getConfig")
    r.add_put("/v1/config", update_config, name="updateConfig")
