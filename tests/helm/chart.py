"""Render, lint and validate the Helm chart offline: Helm v4 SDK + kubernetes-validate, no CLI."""

from __future__ import annotations

import copy
import functools
import importlib
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import helm_python as helm
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART_DIR = ROOT / "helm" / "namesrv"
RELEASE = "rel"
NAMESPACE = "mq"
FULLNAME = "rel-namesrv"
SERVICE_FQDN = f"{FULLNAME}.{NAMESPACE}.svc.cluster.local"
REDIS_URL = "redis://redis-master.redis.svc.cluster.local:6379/0"
# The smallest values that render: the chart refuses to run without a Redis.
BASE: dict[str, Any] = {"redis": {"url": REDIS_URL}}
OLDEST_KUBE = "1.29.0"
# Custom resources kubernetes-validate has no schema for; the tests check them field by field.
CUSTOM_KINDS = frozenset(
    {("monitoring.coreos.com/v1", "ServiceMonitor"), ("monitoring.coreos.com/v1", "PrometheusRule")}
)

# kubernetes-validate ships no type information: bind its API to typed names once, here.
_kv: Any = importlib.import_module("kubernetes_validate")
_kv_utils: Any = importlib.import_module("kubernetes_validate.utils")
validate_manifest = cast(Callable[[dict[str, Any], str, bool], str], _kv.validate)
ValidationError = cast(type[Exception], _kv_utils.ValidationError)
NEWEST_KUBE = cast(str, _kv_utils.latest_version())
KUBE_VERSIONS = (OLDEST_KUBE, NEWEST_KUBE)

# validate() re-reads its (large) JSON schemas on every call; they never change, so cache them.
if not hasattr(_kv_utils.schema_contents, "cache_info"):
    _kv_utils.schema_contents = functools.lru_cache(maxsize=None)(_kv_utils.schema_contents)


def merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Deep-merge two values mappings (override wins), like Helm's -f layering."""
    out = copy.deepcopy(dict(base))
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


@dataclass(frozen=True)
class Rendered:
    files: dict[str, str]
    docs: list[dict[str, Any]]

    @property
    def notes(self) -> str:
        return self.files["namesrv/templates/NOTES.txt"]

    def kinds(self) -> list[tuple[str, str]]:
        return sorted((d["kind"], d["metadata"]["name"]) for d in self.docs)

    def all(self, kind: str) -> list[dict[str, Any]]:
        return [d for d in self.docs if d["kind"] == kind]

    def one(self, kind: str, name: str = FULLNAME) -> dict[str, Any]:
        found = [d for d in self.docs if d["kind"] == kind and d["metadata"]["name"] == name]
        assert len(found) == 1, f"expected one {kind}/{name}, got {self.kinds()}"
        return found[0]

    @property
    def deployment(self) -> dict[str, Any]:
        return self.one("Deployment")

    @property
    def container(self) -> dict[str, Any]:
        containers: list[dict[str, Any]] = self.deployment["spec"]["template"]["spec"]["containers"]
        assert [c["name"] for c in containers] == ["namesrv"]
        return containers[0]

    @property
    def config_toml(self) -> str:
        text: str = self.one("ConfigMap")["data"]["namesrv.toml"]
        return text


@functools.cache
def _chart() -> helm.Chart:
    helm.disable_logging()  # lint mode logs `fail` messages; the tests assert on them instead
    return helm.Chart.load(CHART_DIR)


@functools.cache
def _render_json(values_json: str) -> Rendered:
    files = _chart().render(json.loads(values_json), name=RELEASE, namespace=NAMESPACE)
    docs: list[dict[str, Any]] = []
    for path, text in sorted(files.items()):
        if not path.endswith(".yaml"):
            continue
        for doc in yaml.safe_load_all(text):
            if doc is not None:
                assert isinstance(doc, dict), f"{path}: a manifest must be a mapping"
                docs.append(doc)
    return Rendered(files, docs)


def render(values: Mapping[str, Any] | None = None, *, base: bool = True) -> Rendered:
    """Render as `helm template rel helm/namesrv -n mq`; BASE (a Redis URL) is layered first."""
    merged = merge(BASE, values or {}) if base else dict(values or {})
    return _render_json(json.dumps(merged, sort_keys=True))


def render_error(values: Mapping[str, Any], *, base: bool = True) -> str:
    """The message of the error rendering raises (the test fails if rendering succeeds)."""
    try:
        render(values, base=base)
    except helm.HelmError as exc:
        return str(exc)
    raise AssertionError(f"rendering succeeded with {values!r}")


def lint(values: Mapping[str, Any], kube_version: str) -> list[dict[str, Any]]:
    """`helm lint --strict --kube-version` messages for the chart with these values."""
    report = helm.lint(CHART_DIR, dict(values), strict=True, kube_version=f"v{kube_version}")
    messages: list[dict[str, Any]] = report["messages"]
    return messages


def iter_validation_errors(docs: list[dict[str, Any]], kube_version: str) -> Iterator[str]:
    """`kubernetes-validate --strict` for every built-in manifest; yields one line per failure."""
    for doc in docs:
        if (doc["apiVersion"], doc["kind"]) in CUSTOM_KINDS:
            continue
        try:
            validate_manifest(doc, kube_version, True)
        except ValidationError as exc:
            yield f"{doc['kind']}/{doc['metadata']['name']} on {kube_version}: {exc}"


def env_of(container: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in container.get("env", [])}


def pod_specs(rendered: Rendered) -> Iterator[tuple[str, dict[str, Any]]]:
    """(``Kind/name``, pod spec) of every workload, CronJob and bare Pod."""
    for doc in rendered.docs:
        spec = doc.get("spec", {})
        if doc["kind"] == "Pod":
            yield f"Pod/{doc['metadata']['name']}", spec
        elif doc["kind"] in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
            yield f"{doc['kind']}/{doc['metadata']['name']}", spec["template"]["spec"]
        elif doc["kind"] == "CronJob":
            yield f"CronJob/{doc['metadata']['name']}", spec["jobTemplate"]["spec"]["template"]["spec"]


def pod_labels(rendered: Rendered) -> Iterator[tuple[str, dict[str, str]]]:
    for doc in rendered.docs:
        spec = doc.get("spec", {})
        if doc["kind"] == "Pod":
            yield f"Pod/{doc['metadata']['name']}", doc["metadata"]["labels"]
        elif doc["kind"] == "Deployment":
            yield f"Deployment/{doc['metadata']['name']}", spec["template"]["metadata"]["labels"]
        elif doc["kind"] == "CronJob":
            labels = spec["jobTemplate"]["spec"]["template"]["metadata"]["labels"]
            yield f"CronJob/{doc['metadata']['name']}", labels
