"""The chart's operations kit: a Grafana dashboard ConfigMap and a PrometheusRule, off by default.

Every metric the dashboard and the alerts query must be one a running worker exports: the test
collects the names from the rendered objects themselves, so a new panel or alert is checked as soon
as it is added (and one over a metric the workers do not export fails here, not on a dark panel).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from namesrv.keys import REMOTING
from namesrv.sim.broker import SimBroker, topic_configs
from namesrv.sim.client import RemotingClient
from tests.helm.chart import CHART_DIR, FULLNAME, NAMESPACE, Rendered, render

KIT = {"grafanaDashboard": {"enabled": True}, "prometheusRule": {"enabled": True}}
DASHBOARD = f"{FULLNAME}-dashboard"
# The labels Prometheus adds to every scraped series (target labels), not exported by the workers.
TARGET_LABELS = {"namespace", "service", "pod", "instance", "job", "endpoint", "container"}
METRIC = re.compile(r"\b((?:namesrv|process)_[a-z0-9_]+)\b")
SELECTOR = re.compile(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\}")
MATCHER = re.compile(r'(\w+)\s*=\s*"([^"]*)"')
SEVERITIES = {"critical", "warning"}
ALERTS = [
    "NamesrvNoReadyWorkers",
    "NamesrvWorkerNotReady",
    "NamesrvRedisUnreachable",
    "NamesrvChangeFeedStale",
    "NamesrvBrokersExpiringInBulk",
    "NamesrvShedding",
]


def kit(**overrides: Any) -> Rendered:
    values: dict[str, Any] = json.loads(json.dumps(KIT))
    for key, value in overrides.items():
        values[key] = {**values[key], **value}
    return render(values)


def dashboard(rendered: Rendered) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(rendered.one("ConfigMap", DASHBOARD)["data"]["namesrv-fleet.json"])
    return loaded


def rules(rendered: Rendered) -> list[dict[str, Any]]:
    [group] = rendered.one("PrometheusRule")["spec"]["groups"]
    found: list[dict[str, Any]] = group["rules"]
    return found


def expressions(rendered: Rendered) -> Iterator[tuple[str, str]]:
    """(where, PromQL) of every dashboard target, dashboard variable and alert."""
    board = dashboard(rendered)
    for panel in board["panels"]:
        for target in panel["targets"]:
            yield f"panel {panel['title']!r}", target["expr"]
    for variable in board["templating"]["list"]:
        if variable["type"] == "query":
            yield f"variable {variable['name']}", variable["query"]["query"]
    for rule in rules(rendered):
        yield f"alert {rule['alert']}", rule["expr"]


# ---- off by default, and where it goes ----


def test_kit_is_off_by_default() -> None:
    kinds = {kind for kind, _ in render().kinds()}
    assert "PrometheusRule" not in kinds
    assert ("ConfigMap", DASHBOARD) not in render().kinds()


def test_dashboard_configmap_carries_the_sidecar_label_and_the_json_file() -> None:
    cm = kit().one("ConfigMap", DASHBOARD)
    assert cm["metadata"]["namespace"] == NAMESPACE
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert "annotations" not in cm["metadata"]
    assert list(cm["data"]) == ["namesrv-fleet.json"]
    source = json.loads((CHART_DIR / "dashboards" / "namesrv-fleet.json").read_text(encoding="utf-8"))
    assert dashboard(kit()) == source

    custom = kit(
        grafanaDashboard={
            "namespace": "monitoring",
            "sidecarLabel": "grafana.io/dashboard",
            "sidecarLabelValue": "namesrv",
            "folder": "RocketMQ",
            "labels": {"team": "mq"},
        }
    ).one("ConfigMap", DASHBOARD)["metadata"]
    assert custom["namespace"] == "monitoring"
    assert (custom["labels"]["grafana.io/dashboard"], custom["labels"]["team"]) == ("namesrv", "mq")
    assert "grafana_dashboard" not in custom["labels"]
    assert custom["annotations"] == {"grafana_folder": "RocketMQ"}


def test_dashboard_json_is_a_well_formed_grafana_dashboard() -> None:
    board = dashboard(kit())
    assert (board["uid"], board["title"]) == ("namesrv-fleet", "namesrv-fleet")
    variables = {v["name"] for v in board["templating"]["list"]}
    assert variables == {"datasource", "namespace", "service"}
    panels = board["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    assert len({p["title"] for p in panels}) == len(panels)
    for panel in panels:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24 and grid["w"] > 0 and grid["h"] > 0, panel["title"]
        assert panel["description"] and panel["targets"], panel["title"]
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert len({t["refId"] for t in panel["targets"]}) == len(panel["targets"])
        for target in panel["targets"]:
            # Every query is scoped to the chosen release, so two fleets never add up.
            assert 'namespace="$namespace", service="$service"' in target["expr"], panel["title"]
    # No two panels overlap on the grid.
    cells = [(x, y) for p in panels for x, y in _cells(p["gridPos"])]
    assert len(cells) == len(set(cells))


def _cells(grid: dict[str, int]) -> Iterator[tuple[int, int]]:
    for x in range(grid["x"], grid["x"] + grid["w"]):
        for y in range(grid["y"], grid["y"] + grid["h"]):
            yield x, y


def test_rules_name_the_alerts_with_severity_and_text() -> None:
    rendered = kit(prometheusRule={"alertLabels": {"team": "mq"}, "labels": {"release": "prometheus"}})
    rule_object = rendered.one("PrometheusRule")
    assert rule_object["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule_object["metadata"]["namespace"] == NAMESPACE
    assert rule_object["metadata"]["labels"]["release"] == "prometheus"
    found = rules(rendered)
    assert [r["alert"] for r in found] == ALERTS
    for rule in found:
        assert set(rule) <= {"alert", "expr", "for", "labels", "annotations"}, rule["alert"]
        assert rule["labels"]["severity"] in SEVERITIES and rule["labels"]["team"] == "mq"
        assert set(rule["annotations"]) == {"summary", "description"}
    severities = {r["alert"]: r["labels"]["severity"] for r in found}
    assert severities["NamesrvNoReadyWorkers"] == severities["NamesrvRedisUnreachable"] == "critical"


def test_rules_select_this_release_and_take_the_thresholds_from_values() -> None:
    found = {
        r["alert"]: r["expr"]
        for r in rules(kit(prometheusRule={"expiredBrokersBurst": 12, "bypassRatio": 0.2}))
    }
    for alert, expr in found.items():
        for _, matchers in SELECTOR.findall(expr):
            labels = dict(MATCHER.findall(matchers))
            assert (labels["namespace"], labels["service"]) == (NAMESPACE, FULLNAME), alert
    assert found["NamesrvBrokersExpiringInBulk"].endswith(">= 12")
    assert found["NamesrvChangeFeedStale"].endswith("> 0.2")
    # service= is the Service the ServiceMonitor scrapes (the one Prometheus labels the series with).
    monitor = render({"serviceMonitor": {"enabled": True}}).one("ServiceMonitor")
    selected = monitor["spec"]["selector"]["matchLabels"]
    services = [s for s in render().all("Service") if selected.items() <= s["metadata"]["labels"].items()]
    assert [s["metadata"]["name"] for s in services] == [FULLNAME]


@pytest.mark.skipif(
    shutil.which("promtool") is None, reason="promtool not on PATH (apt-get install prometheus)"
)
def test_promtool_accepts_the_rules(tmp_path: Path) -> None:
    spec = kit(prometheusRule={"alertLabels": {"team": "mq"}}).one("PrometheusRule")["spec"]
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    result = subprocess.run(
        ["promtool", "check", "rules", str(path)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(ALERTS)} rules found" in result.stdout


# ---- every metric queried is exported by a running worker ----


def exported_series(text: str) -> dict[str, list[dict[str, str]]]:
    """Sample name -> label sets, from a /metrics page. A labelled family with no sample yet still
    counts as exported under the sample names its type gives (``_total``, ``_bucket``, ...)."""
    suffixes = {
        "counter": ["_total", "_created"],
        "gauge": [""],
        "histogram": ["_bucket", "_sum", "_count", "_created"],
        "summary": ["", "_sum", "_count", "_created"],
    }
    series: dict[str, list[dict[str, str]]] = {}
    for family in text_string_to_metric_families(text):
        for suffix in suffixes.get(family.type, [""]):
            series.setdefault(family.name + suffix, [])
        for sample in family.samples:
            series.setdefault(sample.name, []).append(dict(sample.labels))
    return series


@pytest.fixture
async def metrics_page(client: Any) -> str:
    """A worker's /metrics after one registration and one route lookup over remoting."""
    async with await RemotingClient.connect(f"127.0.0.1:{client.app[REMOTING].port}") as conn:
        broker = SimBroker(
            conn,
            "DefaultCluster",
            "broker-a",
            "127.0.0.1:10911",
            topics=topic_configs(["TopicTest", "TBW102"]),
        )
        assert (await broker.register()).code == 0
        assert (await conn.invoke(105, {"topic": "TopicTest"})).code == 0
    resp = await client.get("/metrics")
    assert resp.status == 200
    text: str = await resp.text()
    return text


async def test_every_metric_the_kit_queries_is_exported_by_a_worker(metrics_page: str) -> None:
    exported = exported_series(metrics_page)
    used: dict[str, set[str]] = {}
    for where, expr in expressions(kit()):
        for name in METRIC.findall(expr):
            used.setdefault(name, set()).add(where)
        # Anything queried with a selector is one of ours: a typo'd prefix would otherwise hide.
        for name, _ in SELECTOR.findall(expr):
            assert METRIC.fullmatch(name), f"{where}: {name} is not a namesrv_/process_ metric"
    missing = {name: sorted(where) for name, where in used.items() if name not in exported}
    assert missing == {}
    # The kit covers what the issue asks for.
    assert {
        "namesrv_ready",
        "namesrv_route_cache_lookups_total",
        "namesrv_request_seconds_bucket",
        "namesrv_script_seconds_bucket",
        "namesrv_expired_brokers_total",
        "namesrv_redis_errors_total",
        "namesrv_gc_pause_seconds_bucket",
    } <= set(used)


async def test_every_label_value_the_kit_matches_is_one_a_worker_exports(metrics_page: str) -> None:
    exported = exported_series(metrics_page)
    for where, expr in expressions(kit()):
        for name, matchers in SELECTOR.findall(expr):
            for label, value in MATCHER.findall(matchers):
                if label in TARGET_LABELS or value.startswith("$"):
                    continue
                values = {labels.get(label) for labels in exported[name]}
                assert value in values, f"{where}: {name}{{{label}={value!r}}} never exported (only {values})"
