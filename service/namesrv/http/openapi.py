"""The OpenAPI 3.1 description served at ``/openapi.json`` (kept in sync by a test)."""

from __future__ import annotations

from typing import Any

from namesrv.http.payloads import KV_NAME

ERROR = {"$ref": "#/components/schemas/Error"}


def _resp(description: str, schema: dict[str, Any] | None = None, *errors: int) -> dict[str, Any]:
    out: dict[str, Any] = {"200": {"description": description}}
    if schema is not None:
        out["200"]["content"] = {"application/json": {"schema": schema}}
    for status in errors:
        out[str(status)] = {"description": "error", "content": {"application/json": {"schema": ERROR}}}
    return out


def _op(
    op_id: str,
    summary: str,
    responses: dict[str, Any],
    *,
    body: dict[str, Any] | None = None,
    params: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    op: dict[str, Any] = {"operationId": op_id, "summary": summary, "responses": responses}
    if body is not None:
        op["requestBody"] = {"required": True, "content": {"application/json": {"schema": body}}}
    if params:
        op["parameters"] = params
    return op


def _path(name: str, description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "description": description,
        "schema": {"type": "string", "maxLength": 255},
    }


def _query(name: str, description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "description": description,
        "schema": {"type": "string"},
    }


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


STR = {"type": "string"}
INT = {"type": "integer"}
BROKER = _path("brokerName", "broker name")
TOPIC = _path("topic", "topic name")
NAMESPACE = _path("namespace", "KV namespace, e.g. ORDER_TOPIC_CONFIG")
KEY = _path("key", "KV key")
# PUT takes the stricter names of KV_NAME (reads and deletes take any name)
KV_PUT_NAME = {"type": "string", "pattern": f"^{KV_NAME.pattern}$"}
KV_PUT_PARAMS = [
    {**NAMESPACE, "schema": KV_PUT_NAME, "description": "KV namespace (not only dots)"},
    {**KEY, "schema": KV_PUT_NAME, "description": "KV key (not only dots)"},
]
TOPIC_LIST = {
    "type": "object",
    "properties": {"topicList": {"type": "array", "items": STR}, "brokerAddr": STR},
}
OK = {"type": "object", "properties": {"code": INT}}

NULLABLE_INT = {"type": ["integer", "null"]}
CONSOLE_SCHEMAS: dict[str, Any] = {
    "ConsoleOverview": {
        "type": "object",
        "properties": {
            "worker": STR,
            "redis": {"type": "object", "properties": {"reachable": {"type": "boolean"}, "reason": STR}},
            "cluster": {"type": "object", "description": "as /v1/cluster"},
            "liveness": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "member": {"type": "string", "description": "<cluster>/<brokerAddr>"},
                        "brokerName": STR,
                        "brokerId": INT,
                        "timeoutMillis": INT,
                        "heartbeatAgeMillis": NULLABLE_INT,
                        "expiresInMillis": NULLABLE_INT,
                        "via": {"type": "string", "description": "the worker that took the registration"},
                        "version": {
                            "type": "integer",
                            "description": "the request version of its last REGISTER_BROKER (MQVersion "
                            "ordinal, e.g. 409); absent when it registered over HTTP",
                        },
                        "versionName": {
                            "type": "string",
                            "description": "that version's MQVersion name, e.g. V4_9_8 (absent with version)",
                        },
                    },
                },
            },
            "brokerPerms": {
                "type": "object",
                "description": "broker name -> its write permission, from the perm of its queues "
                "(the first 1000 names; at most 20,000 queues read over all of them)",
                "additionalProperties": {
                    "type": "object",
                    "properties": {
                        "perm": {"enum": ["rw", "read-only", "partly writable", "no queues"]},
                        "topics": {"type": "integer", "description": "topics it has a queue in"},
                        "checked": {"type": "integer", "description": "of them, read"},
                        "writable": {"type": "integer", "description": "of those, with the write bit"},
                    },
                },
            },
            "workersSeen": INT,
            "kvNamespaces": {"type": "object", "additionalProperties": INT, "description": "bytes held"},
            "topics": INT,
            "watchers": INT,
            "routeCache": {
                "type": "object",
                "description": "this worker's route cache since it started",
                "properties": {
                    "enabled": {"type": "boolean"},
                    "hits": INT,
                    "misses": INT,
                    "hitRatio": {"type": ["number", "null"], "description": "hits / (hits + misses)"},
                },
            },
            "reportUrl": {"type": "string", "description": "consoleReportUrl ('' when not set)"},
        },
    },
    "ConsoleTopics": {
        "type": "object",
        "properties": {
            "total": {"type": "integer", "description": "topics in the fleet"},
            "matched": {"type": "integer", "description": "of them, matching the filter"},
            "topics": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "topic": STR,
                        "readQueueNums": {"type": "integer", "description": "summed over its brokers"},
                        "writeQueueNums": {"type": "integer", "description": "summed over its brokers"},
                        "brokers": {"type": "integer", "description": "broker names holding its queues"},
                    },
                },
            },
        },
    },
}

SCHEMAS: dict[str, Any] = {
    "Error": {
        "type": "object",
        "required": ["code", "remark"],
        "properties": {"code": {"type": "integer", "description": "RocketMQ response code"}, "remark": STR},
    },
    "DataVersion": {
        "type": "object",
        "additionalProperties": False,
        "properties": {"counter": INT, "stateVersion": INT, "timestamp": INT},
    },
    "TopicConfig": {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "topicName": {"type": "string", "description": "must equal its key in topicConfigTable"},
            "readQueueNums": INT,
            "writeQueueNums": INT,
            "perm": INT,
            "topicFilterType": {"enum": ["SINGLE_TAG", "MULTI_TAG"]},
            "topicSysFlag": INT,
            "order": {"type": "boolean"},
            "attributes": {"type": "object", "additionalProperties": STR},
        },
    },
    "TopicConfigSerializeWrapper": {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "dataVersion": _ref("DataVersion"),
            "topicConfigTable": {"type": "object", "additionalProperties": _ref("TopicConfig")},
            "topicQueueMappingInfoMap": {"type": "object", "additionalProperties": {"type": "object"}},
            "mappingDataVersion": _ref("DataVersion"),
            "topicQueueMappingDetailMap": {"type": "object"},
        },
    },
    "RegisterBroker": {
        "type": "object",
        "additionalProperties": False,
        "required": ["clusterName", "brokerAddr", "brokerName", "brokerId"],
        "properties": {
            "clusterName": STR,
            "brokerAddr": {"type": "string", "description": "ip:port"},
            "brokerName": STR,
            "brokerId": {"type": "integer", "minimum": 0, "description": "0 = master"},
            "haServerAddr": STR,
            "heartbeatTimeoutMillis": {"type": "integer", "minimum": 1000, "maximum": 86400000},
            "enableActingMaster": {"type": "boolean", "description": "absent = a 4.x broker"},
            "zoneName": STR,
            "topicConfigSerializeWrapper": _ref("TopicConfigSerializeWrapper"),
            "filterServerList": {"type": "array", "items": STR},
        },
    },
    "RegisterBrokerResult": {
        "type": "object",
        "properties": {
            "code": INT,
            "accepted": {"type": "boolean", "description": "false: an older stateVersion, ignored"},
            "epoch": {"type": "integer", "description": "registration epoch (fences later removals)"},
            "haServerAddr": STR,
            "masterAddr": STR,
            "kvTable": {"type": "object", "properties": {"table": {"type": "object"}}},
        },
    },
    "UnregisterBroker": {
        "type": "object",
        "additionalProperties": False,
        "required": ["clusterName", "brokerAddr", "brokerName", "brokerId"],
        "properties": {
            "clusterName": STR,
            "brokerAddr": STR,
            "brokerName": STR,
            "brokerId": INT,
            "epoch": {"type": "integer", "description": "only remove if this is still the live registration"},
        },
    },
    "BrokerRef": {
        "type": "object",
        "required": ["clusterName", "brokerAddr"],
        "properties": {
            "clusterName": STR,
            "brokerAddr": STR,
            "brokerName": STR,
            "brokerId": INT,
            "dataVersion": _ref("DataVersion"),
        },
    },
    "QueueData": {
        "type": "object",
        "properties": {
            "brokerName": STR,
            "perm": INT,
            "readQueueNums": INT,
            "topicSysFlag": INT,
            "writeQueueNums": INT,
        },
    },
    "BrokerData": {
        "type": "object",
        "properties": {
            "brokerAddrs": {
                "type": "object",
                "additionalProperties": STR,
                "description": "brokerId -> ip:port",
            },
            "brokerName": STR,
            "cluster": STR,
            "enableActingMaster": {"type": "boolean"},
            "zoneName": STR,
        },
    },
    "TopicRouteData": {
        "type": "object",
        "properties": {
            "brokerDatas": {"type": "array", "items": _ref("BrokerData")},
            "queueDatas": {"type": "array", "items": _ref("QueueData")},
            "filterServerTable": {"type": "object", "additionalProperties": {"type": "array", "items": STR}},
            "orderTopicConf": STR,
            "topicQueueMappingByBroker": {"type": "object"},
        },
    },
    "ClusterInfo": {
        "type": "object",
        "properties": {
            "brokerAddrTable": {"type": "object", "additionalProperties": _ref("BrokerData")},
            "clusterAddrTable": {"type": "object", "additionalProperties": {"type": "array", "items": STR}},
        },
    },
}

OPENAPI: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {
        "title": "namesrv-fleet",
        "version": "0.1.0",
        "description": "JSON API of a RocketMQ NameServer fleet. Errors are {code, remark} with "
        "the RocketMQ response code.",
    },
    "components": {"schemas": SCHEMAS | CONSOLE_SCHEMAS},
    "paths": {
        "/livez": {"get": _op("livez", "Process is alive (no Redis call)", _resp("alive"))},
        "/readyz": {
            "get": _op(
                "readyz",
                "Redis reachable, scripts loaded, not draining",
                _resp("ready", {"type": "object"}, 503),
            )
        },
        "/metrics": {"get": _op("metrics", "Prometheus metrics", _resp("text exposition format"))},
        "/openapi.json": {"get": _op("openapi", "This document", _resp("OpenAPI document"))},
        "/rocketmq/nsaddr": {
            "get": _op("nsaddr", "Address server: remoting addresses, ';'-separated", _resp("plain text"))
        },
        "/v1/brokers/register": {
            "post": _op(
                "registerBroker",
                "REGISTER_BROKER (103)",
                _resp("registered", _ref("RegisterBrokerResult"), 400, 409, 413, 503),
                body=_ref("RegisterBroker"),
            )
        },
        "/v1/brokers/unregister": {
            "post": _op(
                "unregisterBroker",
                "UNREGISTER_BROKER (104), fenced when epoch is given",
                _resp("removed", OK, 400, 409),
                body=_ref("UnregisterBroker"),
            )
        },
        "/v1/brokers/heartbeat": {
            "post": _op(
                "brokerHeartbeat",
                "BROKER_HEARTBEAT (904)",
                _resp("refreshed if live", {"type": "object"}, 400),
                body=_ref("BrokerRef"),
            )
        },
        "/v1/brokers/data-version": {
            "post": _op(
                "queryDataVersion",
                "QUERY_DATA_VERSION (322); also a heartbeat",
                _resp("changed flag and stored version", {"type": "object"}, 400),
                body=_ref("BrokerRef"),
            )
        },
        "/v1/brokers/{brokerName}/wipe-write-perm": {
            "post": _op(
                "wipeWritePerm",
                "WIPE_WRITE_PERM_OF_BROKER (205)",
                _resp("topics touched", {"type": "object"}),
                params=[BROKER],
            )
        },
        "/v1/brokers/{brokerName}/add-write-perm": {
            "post": _op(
                "addWritePerm",
                "ADD_WRITE_PERM_OF_BROKER (327)",
                _resp("topics touched", {"type": "object"}),
                params=[BROKER],
            )
        },
        "/v1/brokers/{brokerName}": {
            "get": _op(
                "brokerMemberGroup",
                "GET_BROKER_MEMBER_GROUP (901)",
                _resp("member group", {"type": "object"}),
                params=[BROKER, _query("cluster", "cluster name echoed in the answer")],
            )
        },
        "/v1/routes/{topic}": {
            "get": _op(
                "route",
                "GET_ROUTEINFO_BY_TOPIC (105)",
                _resp("route; header ETag is its version", _ref("TopicRouteData"), 400, 404),
                params=[
                    TOPIC,
                    _query("zone", "only brokers of this zone (and masterless ones)"),
                    _query("watch", "long-poll: an ETag; answers once the route's ETag differs"),
                    _query("wait", "long-poll: seconds to wait at most (0-60, default 30)"),
                ],
            )
        },
        "/ui": {"get": _op("console", "The read-only operations console (HTML)", _resp("text/html"))},
        "/ui/{file}": {
            "get": _op(
                "consoleFile",
                "The console's script and style sheet",
                _resp("console.js or console.css"),
                params=[_path("file", "console.js or console.css")],
            )
        },
        "/v1/console/overview": {
            "get": _op(
                "consoleOverview",
                "The operations console's data: clusters, brokers (version, write permission), KV "
                "namespace sizes, Redis health, this worker's route cache hit ratio, the report link",
                _resp("overview", _ref("ConsoleOverview")),
            )
        },
        "/v1/console/topics": {
            "get": _op(
                "consoleTopics",
                "The console's topic list: topics whose name contains `filter` (any case), sorted, "
                "the first `limit` with their queue counts summed over brokers",
                _resp("topics", _ref("ConsoleTopics"), 400),
                params=[
                    _query("filter", "part of the topic name, any case (at most 255 characters)"),
                    _query("limit", "topics listed with queue counts, 1-500 (default 500)"),
                ],
            )
        },
        "/v1/watch": {
            "get": _op(
                "watch",
                "Server-Sent Events of route, broker up/down/expired and write-permission changes. "
                "Each event's id is its change-log entry id; reconnect with Last-Event-ID to resume "
                "without loss or repeats. Events: the change-log kind (data: id, kind, topics, "
                "brokers, clusters, ...), `resync` (resume id too old: re-read), `dropped` "
                "(slow consumer or shutdown; data: reason). 503 past watchMaxWatchers.",
                {
                    "200": {
                        "description": "text/event-stream",
                        "content": {"text/event-stream": {"schema": {"type": "string"}}},
                    },
                    "400": {"description": "error", "content": {"application/json": {"schema": ERROR}}},
                    "503": {"description": "error", "content": {"application/json": {"schema": ERROR}}},
                },
                params=[
                    _query("topics", "comma-separated topics (default: all)"),
                    _query("clusters", "comma-separated clusters (default: all)"),
                    _query("lastEventId", "resume after this id (same as the Last-Event-ID header)"),
                ],
            )
        },
        "/v1/cluster": {
            "get": _op(
                "clusterInfo", "GET_BROKER_CLUSTER_INFO (106)", _resp("cluster info", _ref("ClusterInfo"))
            )
        },
        "/v1/topics": {
            "get": _op(
                "topicList",
                "GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206), or GET_TOPICS_BY_CLUSTER (224)",
                _resp("topics", TOPIC_LIST, 403),
                params=[_query("cluster", "only topics of this cluster")],
            )
        },
        "/v1/topics/system": {
            "get": _op(
                "systemTopicList",
                "GET_SYSTEM_TOPIC_LIST_FROM_NS (304)",
                _resp("cluster and broker names", TOPIC_LIST),
            )
        },
        "/v1/topics/unit": {
            "get": _op("unitTopicList", "GET_UNIT_TOPIC_LIST (311)", _resp("topics", TOPIC_LIST, 403))
        },
        "/v1/topics/unit-sub": {
            "get": _op(
                "unitSubTopicList", "GET_HAS_UNIT_SUB_TOPIC_LIST (312)", _resp("topics", TOPIC_LIST, 403)
            )
        },
        "/v1/topics/unit-sub-ununit": {
            "get": _op(
                "unitSubUnUnitTopicList",
                "GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST (313)",
                _resp("topics", TOPIC_LIST, 403),
            )
        },
        "/v1/topics/{topic}": {
            "delete": _op(
                "deleteTopic",
                "DELETE_TOPIC_IN_NAMESRV (216)",
                _resp("deleted", OK),
                params=[TOPIC, _query("cluster", "only this cluster's queues")],
            ),
            "put": _op(
                "registerTopic",
                "REGISTER_TOPIC_IN_NAMESRV (217)",
                _resp("stored", OK, 400),
                params=[TOPIC],
                body={
                    "type": "object",
                    "required": ["queueDatas"],
                    "properties": {"queueDatas": {"type": "array", "items": _ref("QueueData")}},
                },
            ),
        },
        "/v1/kv/{namespace}": {
            "get": _op(
                "kvList",
                "GET_KVLIST_BY_NAMESPACE (219)",
                _resp("table", {"type": "object"}, 404),
                params=[NAMESPACE],
            )
        },
        "/v1/kv/{namespace}/{key}": {
            "get": _op(
                "kvGet",
                "GET_KV_CONFIG (101)",
                _resp("value", {"type": "object"}, 404),
                params=[NAMESPACE, KEY],
            ),
            "put": _op(
                "kvPut",
                "PUT_KV_CONFIG (100)",
                _resp("stored", OK, 400),
                params=KV_PUT_PARAMS,
                body={
                    "type": "object",
                    "required": ["value"],
                    "properties": {"value": {"type": ["string", "null"]}},
                },
            ),
            "delete": _op(
                "kvDelete", "DELETE_KV_CONFIG (102)", _resp("deleted", OK), params=[NAMESPACE, KEY]
            ),
        },
        "/v1/config": {
            "get": _op(
                "getConfig",
                "GET_NAMESRV_CONFIG (319): effective settings",
                _resp("settings", {"type": "object", "additionalProperties": STR}),
            ),
            "put": _op(
                "updateConfig",
                "UPDATE_NAMESRV_CONFIG (318), fleet-wide; needs allowRemoteConfigUpdate",
                _resp("outcome", {"type": "object"}, 400, 403),
                body={"type": "object", "additionalProperties": {"type": ["string", "integer", "boolean"]}},
            ),
        },
    },
}


def _add_access_control(doc: dict[str, Any]) -> None:
    """Writes may be refused (403, code 16) and, with aclEnable, carry a RocketMQ-HMAC header."""
    from namesrv.security.http_auth import SCHEME, WRITE_CODES

    doc["components"]["securitySchemes"] = {
        "rocketmqHmac": {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": f"{SCHEME} AccessKey=<ak>, Timestamp=<unix ms>, Signature=<sig>: needed "
            "for writes when aclEnable is true (see README, Security). Without ACL, admin writes are "
            "accepted only from adminAllowFrom.",
        }
    }
    for ops in doc["paths"].values():
        for op in ops.values():
            if op["operationId"] in WRITE_CODES:
                op["security"] = [{}, {"rocketmqHmac": []}]  # {}: no header when ACL is off
                op["responses"]["403"] = {
                    "description": "refused (code 16 NO_PERMISSION); nothing changed",
                    "content": {"application/json": {"schema": ERROR}},
                }


_add_access_control(OPENAPI)
