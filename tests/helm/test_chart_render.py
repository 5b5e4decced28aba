"""The Helm chart, rendered offline: lint, Kubernetes schemas, and what the manifests must say."""

from __future__ import annotations

import hashlib
import math
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from namesrv.config import load_settings
from tests.helm.chart import (
    BASE,
    FULLNAME,
    KUBE_VERSIONS,
    NAMESPACE,
    REDIS_URL,
    SERVICE_FQDN,
    Rendered,
    ValidationError,
    env_of,
    iter_validation_errors,
    lint,
    merge,
    pod_labels,
    pod_specs,
    render,
    render_error,
    validate_manifest,
)

NAMESRV_ADDR = f"{SERVICE_FQDN}:9876"
PROMETHEUS_NS = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
BROKERS_NS = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "rocketmq"}}}

VARIANTS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "existing-secret": {"redis": {"url": "", "existingSecret": "namesrv-redis"}},
    "password-secret": {
        "redis": {"url": "rediss://app@redis.redis.svc:6380/2", "passwordSecret": {"name": "redis-auth"}}
    },
    "dev-redis": {"redis": {"url": "", "dev": {"enabled": True}}},
    "hpa": {"autoscaling": {"enabled": True}},
    "acl": {"acl": {"existingSecret": "namesrv-acl"}, "config": {"aclMode": "permissive"}},
    "service-monitor": {"serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}}},
    "cronjob": {"eventsExport": {"enabled": True, "existingClaim": "namesrv-events"}},
    "ops-kit": {"grafanaDashboard": {"enabled": True}, "prometheusRule": {"enabled": True}},
    "network-policy": {
        "networkPolicy": {
            "enabled": True,
            "http": {"from": [PROMETHEUS_NS]},
            "remoting": {"allowExternal": False, "from": [BROKERS_NS]},
        }
    },
    "tls-permissive": {"config": {"tlsMode": "permissive"}, "tls": {"existingSecret": "namesrv-tls"}},
    "tls-enforcing-mtls": {
        "config": {"tlsMode": "enforcing", "tlsClientAuth": "require"},
        "tls": {"existingSecret": "namesrv-tls"},
        "serviceMonitor": {
            "enabled": True,
            "tlsConfig": {"ca": {"secret": {"name": "namesrv-tls", "key": "ca.crt"}}},
        },
    },
    "everything": {
        "autoscaling": {"enabled": True, "targetMemoryUtilizationPercentage": 80},
        "serviceMonitor": {"enabled": True, "namespace": "monitoring"},
        "grafanaDashboard": {"enabled": True, "namespace": "monitoring", "folder": "RocketMQ"},
        "prometheusRule": {"enabled": True, "namespace": "monitoring", "alertLabels": {"team": "mq"}},
        "eventsExport": {"enabled": True, "out": "s3://bucket/namesrv", "format": "jsonl", "timeZone": "UTC"},
        "networkPolicy": {"enabled": True},
        "pdb": {"maxUnavailable": None, "minAvailable": 2},
        "service": {
            "type": "LoadBalancer",
            "nodePorts": {"remoting": 30876},
            "loadBalancerSourceRanges": ["10.0.0.0/8"],
        },
        "image": {"digest": "sha256:" + "a" * 64},
        "imagePullSecrets": [{"name": "regcred"}],
        "extraEnv": [{"name": "NAMESRV_LOG_FORMAT", "value": "json"}],
        "podAnnotations": {"team": "mq"},
        "priorityClassName": "system-cluster-critical",
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "mq", "effect": "NoSchedule"}],
        "terminationGracePeriodSeconds": 60,
        "config": {"shutdownTimeoutSeconds": 45.5, "logFormat": "json", "allowRemoteConfigUpdate": True},
    },
}


def variant(name: str) -> Rendered:
    return render(VARIANTS[name])


def containers_of(rendered: Rendered) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    return [(where, spec, c) for where, spec in pod_specs(rendered) for c in spec["containers"]]


# ---- lint and Kubernetes schemas, for every variant ----


@pytest.mark.parametrize("kube_version", KUBE_VERSIONS)
@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_lint_strict_has_no_warning(name: str, kube_version: str) -> None:
    messages = lint(merge(BASE, VARIANTS[name]), kube_version)
    # Only the informational "icon is recommended" (severity 1): no warning (2) and no error (3).
    assert [(m["severity"], m["path"], m["error"]) for m in messages] == [
        (1, "Chart.yaml", "icon is recommended")
    ]


@pytest.mark.parametrize("kube_version", KUBE_VERSIONS)
@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_every_manifest_is_valid_kubernetes(name: str, kube_version: str) -> None:
    rendered = variant(name)
    assert rendered.docs
    assert list(iter_validation_errors(rendered.docs, kube_version)) == []


def test_validator_is_strict() -> None:
    """kubernetes-validate --strict rejects an unknown field, so the test above means something."""
    service = merge(render().one("Service"), {"spec": {"portz": []}})
    with pytest.raises(ValidationError, match="portz"):
        validate_manifest(service, KUBE_VERSIONS[0], True)


def test_objects_rendered_by_default() -> None:
    assert render().kinds() == [
        ("ConfigMap", FULLNAME),
        ("Deployment", FULLNAME),
        ("Pod", f"{FULLNAME}-test-connection"),
        ("PodDisruptionBudget", FULLNAME),
        ("Service", FULLNAME),
        ("Service", f"{FULLNAME}-headless"),
        ("ServiceAccount", FULLNAME),
    ]


# ---- Redis: one shared table, or no render at all ----


def test_no_redis_fails_with_a_clear_message() -> None:
    message = render_error({}, base=False)
    assert "namesrv: no Redis configured." in message
    for hint in ("redis.url", "redis.existingSecret", "redis.dev.enabled=true", "embedded Redis"):
        assert hint in message


def test_two_redis_sources_fail() -> None:
    message = render_error({"redis": {"existingSecret": "s", "dev": {"enabled": True}}})
    assert "choose one Redis source, not redis.url and redis.existingSecret and redis.dev.enabled" in message


@pytest.mark.parametrize("replicas", [1, -1])
def test_write_replicas_with_the_dev_redis_fail(replicas: int) -> None:
    values = {"redis": {"url": "", "dev": {"enabled": True}}, "config": {"redisWriteReplicas": replicas}}
    message = render_error(values)
    assert "config.redisWriteReplicas needs a Redis with replicas; redis.dev has none" in message


@pytest.mark.parametrize(
    "url",
    [
        "redis://:s3cret@redis:6379/0",
        "redis://app:s3cret@redis:6379/0",
        "rediss://redis:6380/0?password=s3cret",
        "redis://redis:6379/0?ssl_cert_reqs=none&password=s3cret",
    ],
)
def test_password_in_redis_url_is_refused(url: str) -> None:
    message = render_error({"redis": {"url": url}})
    assert "redis.url must not contain a password" in message
    assert "s3cret" not in message


def test_redis_url_without_password_reaches_the_pods_as_env() -> None:
    rendered = render()
    assert env_of(rendered.container)["NAMESRV_REDIS_URL"] == {
        "name": "NAMESRV_REDIS_URL",
        "value": REDIS_URL,
    }
    assert "redisUrl" not in tomllib.loads(rendered.config_toml)
    assert REDIS_URL not in rendered.config_toml


def test_existing_secret_supplies_the_whole_url() -> None:
    rendered = variant("existing-secret")
    env = env_of(rendered.container)
    assert env["NAMESRV_REDIS_URL"] == {
        "name": "NAMESRV_REDIS_URL",
        "valueFrom": {"secretKeyRef": {"name": "namesrv-redis", "key": "redis-url"}},
    }
    assert rendered.all("Secret") == []  # the chart never creates one


def test_password_secret_is_spliced_into_the_url_by_kubernetes() -> None:
    env = env_of(variant("password-secret").container)
    names = [e["name"] for e in variant("password-secret").container["env"]]
    assert names.index("REDIS_PASSWORD") < names.index("NAMESRV_REDIS_URL")  # $(VAR) needs it defined first
    assert env["REDIS_PASSWORD"]["valueFrom"] == {
        "secretKeyRef": {"name": "redis-auth", "key": "redis-password"}
    }
    assert env["NAMESRV_REDIS_URL"]["value"] == "rediss://app:$(REDIS_PASSWORD)@redis.redis.svc:6380/2"


def test_sentinel_and_cluster_urls_pass_through_verbatim() -> None:
    url = "redis+sentinel://s1.redis:26379,s2.redis:26379/mymaster/0"
    env = env_of(render({"redis": {"url": url}}).container)
    assert env["NAMESRV_REDIS_URL"]["value"] == url
    env = env_of(render({"redis": {"url": url, "passwordSecret": {"name": "auth"}}}).container)
    assert env["NAMESRV_REDIS_URL"]["value"] == (
        "redis+sentinel://:$(REDIS_PASSWORD)@s1.redis:26379,s2.redis:26379/mymaster/0"
    )


def test_password_secret_needs_a_url() -> None:
    message = render_error({"redis": {"url": "", "existingSecret": "s", "passwordSecret": {"name": "p"}}})
    assert "redis.passwordSecret is used with redis.url only" in message


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_no_secret_in_any_configmap(name: str) -> None:
    rendered = variant(name)
    for cm in rendered.all("ConfigMap"):
        text = str(cm["data"])
        assert "redisUrl =" not in text
        assert "redis://" not in text and "rediss://" not in text
        assert "password" not in text.lower()
        assert "secret" not in text.lower()


def test_dev_redis_is_one_official_pod_with_a_loud_warning() -> None:
    rendered = variant("dev-redis")
    redis = rendered.one("Deployment", f"{FULLNAME}-redis")
    assert redis["spec"]["replicas"] == 1
    assert redis["spec"]["strategy"] == {"type": "Recreate"}
    (container,) = redis["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "redis:7.4"
    assert container["args"] == ["redis-server", "--save", "", "--appendonly", "no", "--protected-mode", "no"]
    service = rendered.one("Service", f"{FULLNAME}-redis")
    assert [(p["name"], p["port"]) for p in service["spec"]["ports"]] == [("redis", 6379)]
    url = env_of(rendered.container)["NAMESRV_REDIS_URL"]["value"]
    assert url == f"redis://{FULLNAME}-redis:6379/0"
    assert "WARNING: redis.dev.enabled=true" in rendered.notes
    assert "trials only" in rendered.notes
    assert "WARNING" not in render().notes


# ---- names, ports, Services ----


def test_services_expose_remoting_and_http() -> None:
    rendered = render()
    service = rendered.one("Service")
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["ports"] == [
        {"name": "remoting", "port": 9876, "targetPort": "remoting", "protocol": "TCP"},
        {"name": "http", "port": 8080, "targetPort": "http", "protocol": "TCP", "appProtocol": "http"},
    ]
    headless = rendered.one("Service", f"{FULLNAME}-headless")
    assert headless["spec"]["clusterIP"] == "None"
    assert headless["spec"]["publishNotReadyAddresses"] is False
    assert [p["name"] for p in headless["spec"]["ports"]] == ["remoting", "http"]
    selector = rendered.deployment["spec"]["selector"]["matchLabels"]
    assert (
        service["spec"]["selector"]
        == headless["spec"]["selector"]
        == selector
        == {
            "app.kubernetes.io/name": "namesrv",
            "app.kubernetes.io/instance": "rel",
            "app.kubernetes.io/component": "nameserver",
        }
    )


def test_container_ports_follow_the_config() -> None:
    assert render().container["ports"] == [
        {"name": "remoting", "containerPort": 9876, "protocol": "TCP"},
        {"name": "http", "containerPort": 8080, "protocol": "TCP"},
    ]
    moved = render({"config": {"httpPort": 18080, "remotingPort": 19876}})
    assert [p["containerPort"] for p in moved.container["ports"]] == [19876, 18080]
    assert moved.one("Service")["spec"]["ports"][0]["targetPort"] == "remoting"
    assert "httpPort = 18080" in moved.config_toml
    assert "config.httpPort and config.remotingPort must differ" in render_error(
        {"config": {"httpPort": 9000, "remotingPort": 9000}}
    )


def test_service_type_and_node_ports() -> None:
    service = variant("everything").one("Service")
    assert service["spec"]["type"] == "LoadBalancer"
    assert service["spec"]["loadBalancerSourceRanges"] == ["10.0.0.0/8"]
    assert [(p["name"], p.get("nodePort")) for p in service["spec"]["ports"]] == [
        ("remoting", 30876),
        ("http", None),
    ]


def test_only_worker_pods_are_selected_by_the_services() -> None:
    rendered = render(
        {
            "redis": {"url": "", "dev": {"enabled": True}},
            "eventsExport": {"enabled": True, "existingClaim": "c"},
        }
    )
    selector = rendered.one("Service")["spec"]["selector"]
    selected = [
        where
        for where, labels in pod_labels(rendered)
        if all(labels.get(k) == v for k, v in selector.items())
    ]
    assert selected == [f"Deployment/{FULLNAME}"]


def test_long_names_fit_in_63_characters() -> None:
    rendered = render({"fullnameOverride": "n" * 63, "redis": {"url": "", "dev": {"enabled": True}}})
    for doc in rendered.docs:
        assert len(doc["metadata"]["name"]) <= 63
    assert rendered.one("Service", "n" * 54 + "-headless")
    assert rendered.one("Service", "n" * 57 + "-redis")


def test_image_defaults_to_app_version() -> None:
    assert render().container["image"] == "namesrv-fleet:0.1.0"
    assert render({"image": {"tag": "1.2.3"}}).container["image"] == "namesrv-fleet:1.2.3"
    assert variant("everything").container["image"] == "namesrv-fleet@sha256:" + "a" * 64


# ---- probes, shutdown ----


def test_probes_hit_livez_and_readyz() -> None:
    container = render().container
    assert container["startupProbe"] == {
        "httpGet": {"path": "/livez", "port": "http"},
        "initialDelaySeconds": 0,
        "periodSeconds": 2,
        "timeoutSeconds": 2,
        "failureThreshold": 45,
    }
    assert container["livenessProbe"] == {
        "httpGet": {"path": "/livez", "port": "http"},
        "initialDelaySeconds": 0,
        "periodSeconds": 10,
        "timeoutSeconds": 3,
        "failureThreshold": 3,
    }
    assert container["readinessProbe"] == {
        "httpGet": {"path": "/readyz", "port": "http"},
        "initialDelaySeconds": 0,
        "periodSeconds": 5,
        "timeoutSeconds": 3,
        "failureThreshold": 2,
        "successThreshold": 1,
    }
    bare = render({"startupProbe": {"enabled": False}, "livenessProbe": {"enabled": False}}).container
    assert "startupProbe" not in bare and "livenessProbe" not in bare and "readinessProbe" in bare


def test_shutdown_timing_defaults() -> None:
    rendered = render()
    pod = rendered.deployment["spec"]["template"]["spec"]
    assert rendered.container["lifecycle"] == {"preStop": {"exec": {"command": ["sleep", "5"]}}}
    assert pod["terminationGracePeriodSeconds"] == 30  # 5 (preStop) + 20 (shutdownTimeoutSeconds) + 5


@pytest.mark.parametrize(
    ("pre_stop", "shutdown", "expected"), [(5, 20.0, 30), (10, 42.5, 58), (0, 0, 5), (3, 1.01, 10)]
)
def test_grace_period_is_computed_from_the_app_timeout(pre_stop: int, shutdown: float, expected: int) -> None:
    rendered = render({"preStopSleepSeconds": pre_stop, "config": {"shutdownTimeoutSeconds": shutdown}})
    assert expected == pre_stop + math.ceil(shutdown) + 5
    assert rendered.deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == expected
    assert ("lifecycle" in rendered.container) is (pre_stop > 0)


def test_explicit_grace_period_must_cover_the_arithmetic() -> None:
    pod = variant("everything").deployment["spec"]["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] == 60  # >= 5 + 46 + 5
    message = render_error({"terminationGracePeriodSeconds": 25})
    assert (
        "terminationGracePeriodSeconds=25 is too short: preStopSleepSeconds (5) + "
        "config.shutdownTimeoutSeconds (20, rounded up) + 5 s to close = 30. Raise it to at least 30"
    ) in message
    message = render_error({"terminationGracePeriodSeconds": 30, "config": {"shutdownTimeoutSeconds": 21}})
    assert "Raise it to at least 31" in message


# ---- configuration, checksum ----


def test_config_file_is_mounted_and_passed_to_namesrv() -> None:
    rendered = render()
    assert rendered.container["args"] == ["--config", "/etc/namesrv/namesrv.toml"]
    assert "command" not in rendered.container  # the image's ENTRYPOINT, namesrv
    mounts = {m["name"]: m for m in rendered.container["volumeMounts"]}
    assert mounts["config"] == {"name": "config", "mountPath": "/etc/namesrv", "readOnly": True}
    volumes = {v["name"]: v for v in rendered.deployment["spec"]["template"]["spec"]["volumes"]}
    assert volumes["config"] == {"name": "config", "configMap": {"name": FULLNAME}}
    assert list(rendered.one("ConfigMap")["data"]) == ["namesrv.toml"]


def checksum(rendered: Rendered) -> str:
    value: str = rendered.deployment["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
    return value


def test_checksum_is_the_configmap_digest() -> None:
    rendered = render()
    configmap = rendered.files["namesrv/templates/configmap.yaml"]
    assert checksum(rendered) == hashlib.sha256(configmap.encode()).hexdigest()


@pytest.mark.parametrize(
    "change",
    [
        {"config": {"logLevel": "DEBUG"}},
        {"config": {"shutdownTimeoutSeconds": 25}},
        {"config": {"advertisedAddresses": "ns.example.com:9876"}},
        {"service": {"ports": {"remoting": 19876}}},  # moves the advertised Service address
    ],
)
def test_checksum_changes_when_config_changes(change: dict[str, Any]) -> None:
    assert checksum(render(change)) != checksum(render())


@pytest.mark.parametrize(
    "change",
    [{"replicaCount": 5}, {"image": {"tag": "9.9.9"}}, {"resources": {"requests": {"cpu": "1"}}}],
)
def test_checksum_is_stable_when_config_does_not_change(change: dict[str, Any]) -> None:
    assert checksum(render(change)) == checksum(render())


def test_pod_annotations_are_kept_next_to_the_checksum() -> None:
    annotations = variant("everything").deployment["spec"]["template"]["metadata"]["annotations"]
    assert set(annotations) == {"checksum/config", "team"}


# ---- security ----


def test_worker_security_context() -> None:
    rendered = render()
    pod = rendered.deployment["spec"]["template"]["spec"]
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 10001,
        "runAsGroup": 10001,
        "fsGroup": 10001,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert rendered.container["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 10001,
        "runAsGroup": 10001,
        "privileged": False,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert pod["automountServiceAccountToken"] is False
    assert pod["serviceAccountName"] == FULLNAME
    assert rendered.one("ServiceAccount")["automountServiceAccountToken"] is False


def test_every_container_is_hardened() -> None:
    rendered = render(
        {
            "redis": {"url": "", "dev": {"enabled": True}},
            "eventsExport": {"enabled": True, "existingClaim": "c"},
        }
    )
    seen = []
    for where, spec, container in containers_of(rendered):
        seen.append(where)
        sc = container["securityContext"]
        assert sc["runAsNonRoot"] is True, where
        assert sc["readOnlyRootFilesystem"] is True, where
        assert sc["allowPrivilegeEscalation"] is False, where
        assert sc["capabilities"] == {"drop": ["ALL"]}, where
        assert sc["seccompProfile"] == {"type": "RuntimeDefault"}, where
        assert spec["securityContext"]["runAsNonRoot"] is True, where
        assert spec["automountServiceAccountToken"] is False, where
        assert "resources" in container, where
    assert sorted(seen) == [
        f"CronJob/{FULLNAME}-events-export",
        f"Deployment/{FULLNAME}",
        f"Deployment/{FULLNAME}-redis",
        f"Pod/{FULLNAME}-test-connection",
    ]


def test_tmp_is_the_only_writable_path() -> None:
    rendered = render()
    mounts = {m["mountPath"]: m for m in rendered.container["volumeMounts"]}
    assert set(mounts) == {"/etc/namesrv", "/tmp"}
    volumes = {v["name"]: v for v in rendered.deployment["spec"]["template"]["spec"]["volumes"]}
    assert volumes["tmp"] == {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}


def test_resources_have_requests_and_a_memory_limit() -> None:
    assert render().container["resources"] == {
        "requests": {"cpu": "250m", "memory": "256Mi"},
        "limits": {"memory": "512Mi"},
    }


def test_network_policy_restricts_the_admin_port() -> None:
    policy = variant("network-policy").one("NetworkPolicy")
    assert policy["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "nameserver"
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    client = {"podSelector": {"matchLabels": {f"{FULLNAME}-client": "true"}}}
    assert policy["spec"]["ingress"] == [
        {"ports": [{"port": "remoting", "protocol": "TCP"}], "from": [client, BROKERS_NS]},
        {"ports": [{"port": "http", "protocol": "TCP"}], "from": [client, PROMETHEUS_NS]},
    ]
    default = render({"networkPolicy": {"enabled": True}}).one("NetworkPolicy")
    assert default["spec"]["ingress"] == [
        {"ports": [{"port": "remoting", "protocol": "TCP"}]},  # brokers and clients from anywhere
        {"ports": [{"port": "http", "protocol": "TCP"}], "from": [client]},
    ]
    # The chart's own test pod carries the client label, so `helm test` passes with the policy on.
    assert (
        render().one("Pod", f"{FULLNAME}-test-connection")["metadata"]["labels"][f"{FULLNAME}-client"]
        == "true"
    )


# ---- scaling and availability ----


def test_replicas_without_hpa() -> None:
    rendered = render()
    assert rendered.deployment["spec"]["replicas"] == 3
    assert rendered.all("HorizontalPodAutoscaler") == []
    assert rendered.deployment["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 0},
    }


def test_hpa_on_means_no_replicas_field() -> None:
    rendered = variant("hpa")
    assert "replicas" not in rendered.deployment["spec"]
    hpa = rendered.one("HorizontalPodAutoscaler")
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": FULLNAME}
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (3, 10)
    assert hpa["spec"]["metrics"] == [
        {
            "type": "Resource",
            "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}},
        }
    ]
    everything = variant("everything").one("HorizontalPodAutoscaler")
    assert [m["resource"]["name"] for m in everything["spec"]["metrics"]] == ["cpu", "memory"]
    assert "autoscaling needs" in render_error(
        {"autoscaling": {"enabled": True, "targetCPUUtilizationPercentage": None}}
    )
    assert "minReplicas must not exceed" in render_error(
        {"autoscaling": {"enabled": True, "minReplicas": 5, "maxReplicas": 4}}
    )


def test_pdb_allows_one_eviction_at_a_time() -> None:
    rendered = render()
    pdb = rendered.one("PodDisruptionBudget")
    assert pdb["spec"] == {
        "maxUnavailable": 1,
        "unhealthyPodEvictionPolicy": "AlwaysAllow",
        "selector": {"matchLabels": rendered.deployment["spec"]["selector"]["matchLabels"]},
    }
    assert variant("everything").one("PodDisruptionBudget")["spec"]["minAvailable"] == 2
    assert "maxUnavailable" not in variant("everything").one("PodDisruptionBudget")["spec"]
    assert "set only one of pdb.minAvailable and pdb.maxUnavailable" in render_error(
        {"pdb": {"minAvailable": 1}}
    )
    assert render({"pdb": {"create": False}}).all("PodDisruptionBudget") == []


def test_topology_spread_over_zones_then_nodes() -> None:
    rendered = render()
    selector = rendered.deployment["spec"]["selector"]["matchLabels"]
    constraints = rendered.deployment["spec"]["template"]["spec"]["topologySpreadConstraints"]
    assert constraints == [
        {
            "maxSkew": 1,
            "topologyKey": key,
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": selector},
            "matchLabelKeys": ["pod-template-hash"],
        }
        for key in ("topology.kubernetes.io/zone", "kubernetes.io/hostname")
    ]
    custom = [{"maxSkew": 2, "topologyKey": "rack", "whenUnsatisfiable": "DoNotSchedule"}]
    spec = render({"topologySpreadConstraints": custom}).deployment["spec"]["template"]["spec"]
    assert spec["topologySpreadConstraints"] == custom
    spec = render({"topologySpread": {"enabled": False}}).deployment["spec"]["template"]["spec"]
    assert "topologySpreadConstraints" not in spec


# ---- optional objects ----


def test_service_monitor_scrapes_metrics_from_the_main_service() -> None:
    rendered = variant("service-monitor")
    monitor = rendered.one("ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["namespace"] == NAMESPACE
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    assert monitor["spec"]["endpoints"] == [
        {"port": "http", "path": "/metrics", "interval": "30s", "scrapeTimeout": "10s", "honorLabels": False}
    ]
    selector = monitor["spec"]["selector"]["matchLabels"]
    matches = [
        s["metadata"]["name"]
        for s in rendered.all("Service")
        if all(s["metadata"]["labels"].get(k) == v for k, v in selector.items())
    ]
    assert matches == [FULLNAME]  # not the headless Service: no double scrape
    assert variant("everything").one("ServiceMonitor")["metadata"]["namespace"] == "monitoring"


def test_cronjob_exports_the_change_log_to_a_claim() -> None:
    rendered = variant("cronjob")
    cron = rendered.one("CronJob", f"{FULLNAME}-events-export")
    assert cron["spec"]["schedule"] == "*/15 * * * *"
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    (container,) = pod["containers"]
    assert container["image"] == rendered.container["image"]
    assert container["args"] == ["events", "export", "--out", "/export/namesrv-events", "--format", "parquet"]
    env = env_of(container)
    assert env["NAMESRV_REDIS_URL"] == env_of(rendered.container)["NAMESRV_REDIS_URL"]
    assert env["NAMESRV_NAMESPACE"]["value"] == "namesrv"
    assert {"name": "export", "persistentVolumeClaim": {"claimName": "namesrv-events"}} in pod["volumes"]
    assert {"name": "export", "mountPath": "/export"} in container["volumeMounts"]


def test_cronjob_to_an_object_store_needs_no_claim() -> None:
    cron = variant("everything").one("CronJob", f"{FULLNAME}-events-export")
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["args"] == ["events", "export", "--out", "s3://bucket/namesrv", "--format", "jsonl"]
    assert [v["name"] for v in pod["volumes"]] == ["tmp"]
    assert cron["spec"]["timeZone"] == "UTC"


@pytest.mark.parametrize("export", [{"enabled": True}, {"enabled": True, "out": "/data/events"}])
def test_cronjob_without_a_lasting_destination_fails(export: dict[str, Any]) -> None:
    assert "eventsExport needs a destination that outlives the job" in render_error({"eventsExport": export})


def test_connection_test_checks_the_service() -> None:
    pod = render().one("Pod", f"{FULLNAME}-test-connection")
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    (container,) = pod["spec"]["containers"]
    script = container["args"][0]
    compile(script, "test-connection", "exec")  # the embedded check is valid Python
    assert f'base = "http://{FULLNAME}:8080"' in script
    assert '"/readyz"' in script and '"/rocketmq/nsaddr"' in script
    assert f'"{NAMESRV_ADDR}"' in script
    assert render({"testConnection": {"enabled": False}}).all("Pod") == []


# ---- NOTES.txt ----


def test_notes_print_the_namesrv_addr_and_a_route_check() -> None:
    notes = render().notes
    assert f"namesrvAddr={NAMESRV_ADDR}" in notes
    assert f"export NAMESRV_ADDR={NAMESRV_ADDR}" in notes
    assert f"{FULLNAME}-headless.{NAMESPACE}.svc.cluster.local:9876" in notes
    assert f"-Drocketmq.namesrv.domain={SERVICE_FQDN}:8080" in notes
    assert f"kubectl -n {NAMESPACE} port-forward service/{FULLNAME} 8080:8080" in notes
    assert "curl -s localhost:8080/v1/routes/TopicTest" in notes
    assert f"mqadmin topicRoute -n {NAMESRV_ADDR} -t TopicTest" in notes
    assert re.search(r"Workers: 3 \(Deployment rel-namesrv\)", notes)
    assert "Workers: 3 to 10 (HorizontalPodAutoscaler rel-namesrv)" in variant("hpa").notes


# ---- schema ----


@pytest.mark.parametrize(
    ("values", "complaint"),
    [
        ({"replicaCount": "two"}, "at '/replicaCount': got string, want integer"),
        ({"replicas": 3}, "additional properties 'replicas' not allowed"),
        ({"config": {"redisUrl": "redis://x"}}, "additional properties 'redisUrl' not allowed"),
        ({"config": {"logLevel": "TRACE"}}, "at '/config/logLevel'"),
        ({"config": {"httpPort": 0}}, "at '/config/httpPort'"),
        ({"config": {"scanNotActiveBrokerInterval": 99}}, "at '/config/scanNotActiveBrokerInterval'"),
        ({"config": {"orderMessageEnable": "yes"}}, "got string, want boolean"),
        ({"service": {"type": "ExternalName"}}, "at '/service/type'"),
        ({"redis": {"url": "redis-master:6379"}}, "at '/redis/url'"),
        ({"eventsExport": {"format": "csv"}}, "at '/eventsExport/format'"),
        ({"image": {"pullPolicy": "Sometimes"}}, "at '/image/pullPolicy'"),
        ({"preStopSleepSeconds": -1}, "at '/preStopSleepSeconds'"),
    ],
)
def test_schema_rejects_bad_values(values: dict[str, Any], complaint: str) -> None:
    message = render_error(values)
    assert "values don't meet the specifications of the schema" in message
    assert complaint in message


# ---- TLS ----


def test_tls_secret_is_mounted_as_a_directory_and_named_in_the_config(tmp_path: Path) -> None:
    rendered = variant("tls-enforcing-mtls")
    mounts = {m["name"]: m for m in rendered.container["volumeMounts"]}
    # a directory mount (no subPath): a renewed Secret reaches the running pod, which reloads it
    assert mounts["tls"] == {"name": "tls", "mountPath": "/etc/namesrv-tls", "readOnly": True}
    volumes = {v["name"]: v for v in rendered.deployment["spec"]["template"]["spec"]["volumes"]}
    assert volumes["tls"] == {"name": "tls", "secret": {"secretName": "namesrv-tls", "defaultMode": 0o440}}
    config = tomllib.loads(rendered.config_toml)
    assert (config["tlsMode"], config["tlsClientAuth"]) == ("enforcing", "require")
    assert (config["tlsCertFile"], config["tlsKeyFile"], config["tlsClientCaFile"]) == (
        "/etc/namesrv-tls/tls.crt",
        "/etc/namesrv-tls/tls.key",
        "/etc/namesrv-tls/ca.crt",
    )
    path = tmp_path / "namesrv.toml"
    path.write_text(rendered.config_toml, encoding="utf-8")
    assert load_settings(path, environ={}).tlsCertFile == "/etc/namesrv-tls/tls.crt"


def test_tls_without_client_auth_names_no_ca() -> None:
    config = tomllib.loads(variant("tls-permissive").config_toml)
    assert (config["tlsCertFile"], config["tlsClientCaFile"]) == ("/etc/namesrv-tls/tls.crt", "")
    assert "tls" not in {m["name"] for m in render().container["volumeMounts"]}


def test_enforcing_tls_probes_and_scrapes_over_https() -> None:
    rendered = variant("tls-enforcing-mtls")
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert rendered.container[probe]["httpGet"]["scheme"] == "HTTPS"
    (endpoint,) = rendered.one("ServiceMonitor")["spec"]["endpoints"]
    assert endpoint["scheme"] == "https"
    assert endpoint["tlsConfig"] == {"ca": {"secret": {"name": "namesrv-tls", "key": "ca.crt"}}}
    script = rendered.one("Pod", f"{FULLNAME}-test-connection")["spec"]["containers"][0]["args"][0]
    compile(script, "test-connection", "exec")
    assert f'base = "https://{FULLNAME}:8080"' in script
    # permissive keeps plain probes: plain HTTP is still served
    assert "scheme" not in variant("tls-permissive").container["livenessProbe"]["httpGet"]


def test_tls_mode_without_a_certificate_fails() -> None:
    message = render_error({"config": {"tlsMode": "enforcing"}})
    assert "namesrv: config.tlsMode=enforcing needs a certificate: set tls.existingSecret" in message


def test_tls_secret_without_tls_mode_fails() -> None:
    message = render_error({"tls": {"existingSecret": "namesrv-tls"}})
    assert "tls.existingSecret is set but config.tlsMode is disabled" in message
