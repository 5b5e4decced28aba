"""Config parity (values <-> config/default.toml <-> the service) and the values documentation."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from namesrv.config import FIELDS, Settings, load_settings
from tests.helm import values_doc
from tests.helm.chart import CHART_DIR, ROOT, SERVICE_FQDN, render

DEFAULT_TOML = ROOT / "config" / "default.toml"
CHART_ONLY_DEFAULTS = {"advertisedAddresses": f"{SERVICE_FQDN}:9876"}  # "" in values means the Service
# Where the chart is safer than `make run`: admin requests from loopback only, not from every pod.
CHART_DEFAULTS = {"adminAllowFrom": "127.0.0.0/8,::1/128"}
NOT_IN_VALUES = {"redisUrl"}  # from the redis section, as NAMESRV_REDIS_URL
JSON_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string"}


def toml_defaults() -> dict[str, Any]:
    with DEFAULT_TOML.open("rb") as fh:
        return tomllib.load(fh)


def values_config() -> dict[str, Any]:
    config: dict[str, Any] = values_doc.load_values()["config"]
    return config


def schema() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(values_doc.SCHEMA_FILE.read_text(encoding="utf-8"))
    return loaded


# ---- parity with config/default.toml and the service ----


def test_default_toml_lists_every_option_the_service_reads() -> None:
    assert set(toml_defaults()) == set(FIELDS)


def test_values_config_keys_are_exactly_the_toml_keys() -> None:
    assert list(values_config()) == [k for k in toml_defaults() if k not in NOT_IN_VALUES]


@pytest.mark.parametrize("key", [k for k in FIELDS if k not in NOT_IN_VALUES])
def test_values_config_default_equals_toml_default(key: str) -> None:
    value, default = values_config()[key], CHART_DEFAULTS.get(key, toml_defaults()[key])
    assert value == default
    assert type(value) is type(default)  # 20.0 stays a float, false is not 0


def test_redis_url_default_is_empty_so_the_chart_must_supply_one() -> None:
    assert toml_defaults()["redisUrl"] == ""


@pytest.mark.parametrize("key", [k for k in FIELDS if k not in NOT_IN_VALUES])
def test_schema_matches_the_service_rules(key: str) -> None:
    meta = FIELDS[key].metadata
    node = schema()["properties"]["config"]["properties"][key]
    assert node["type"] == JSON_TYPES[type(FIELDS[key].default)]
    lo = 1 if key in ("httpPort", "remotingPort") else meta["lo"]  # port 0 (random) cannot be probed
    assert node.get("minimum") == lo
    assert node.get("maximum") == meta["hi"]
    assert node.get("enum") == (list(meta["choices"]) or None)


def test_schema_config_keys_and_no_others() -> None:
    config = schema()["properties"]["config"]
    assert config["additionalProperties"] is False
    assert list(config["properties"]) == list(values_config())


def test_rendered_toml_is_the_values_config() -> None:
    rendered = tomllib.loads(render().config_toml)
    assert rendered == {**values_config(), **CHART_ONLY_DEFAULTS}


def test_service_loads_the_rendered_file_with_default_settings(tmp_path: Path) -> None:
    path = tmp_path / "namesrv.toml"
    path.write_text(render().config_toml, encoding="utf-8")
    loaded = load_settings(path, environ={"NAMESRV_REDIS_URL": "redis://redis:6379/0"})
    expected = Settings(
        redisUrl="redis://redis:6379/0", advertisedAddresses=f"{SERVICE_FQDN}:9876", **CHART_DEFAULTS
    )
    assert loaded == expected
    assert Settings() == Settings(**toml_defaults())  # the service's defaults are the TOML's


def test_service_loads_every_kind_of_override(tmp_path: Path) -> None:
    overrides: dict[str, Any] = {
        "orderMessageEnable": True,
        "clientRequestThreadPoolQueueCapacity": 7,
        "shutdownTimeoutSeconds": 12.5,
        "configBlackList": 'a;b "quoted" \\ <x> & ü',
        "advertisedAddresses": "a.example:9876;b.example:9876",
        "logLevel": "DEBUG",
        "eventsMaxLen": 123456789,
    }
    path = tmp_path / "namesrv.toml"
    path.write_text(render({"config": overrides}).config_toml, encoding="utf-8")
    loaded = load_settings(path, environ={})
    for key, value in overrides.items():
        assert getattr(loaded, key) == value


def test_chart_app_version_is_the_project_version() -> None:
    with (ROOT / "pyproject.toml").open("rb") as fh:
        project = tomllib.load(fh)["project"]
    chart = yaml.safe_load((CHART_DIR / "Chart.yaml").read_text(encoding="utf-8"))
    assert chart["appVersion"] == project["version"]
    assert project["scripts"]["namesrv"] == "namesrv.cli:main"


# ---- documentation of every value ----


def test_every_value_is_documented() -> None:
    values, params = values_doc.load_values(), values_doc.parse_params()
    assert values_doc.undocumented(values, params) == []
    assert [p.path for p in params if not values_doc.lookup(values, p.path)[0]] == []
    assert len({p.path for p in params}) == len(params)


def test_every_config_key_is_documented_with_the_service_text() -> None:
    params = {p.path: p for p in values_doc.parse_params()}
    for key in values_config():
        doc: str = FIELDS[key].metadata["doc"]
        first_sentence = doc.split(". ")[0].rstrip(".") + "."
        description = params[f"config.{key}"].description
        assert description.startswith(first_sentence), key
        assert ("[dynamic]" in description) is FIELDS[key].metadata["dynamic"], key


def test_every_documented_value_is_in_the_schema() -> None:
    loaded = schema()
    missing = [p.path for p in values_doc.parse_params() if values_doc.schema_node(loaded, p.path) is None]
    assert missing == []


def test_readme_tables_and_schema_descriptions_are_current() -> None:
    params, values = values_doc.parse_params(), values_doc.load_values()
    readme = values_doc.README_FILE.read_text(encoding="utf-8")
    expected = values_doc.readme_with_tables(readme, values_doc.render_tables(params, values))
    hint = "run: .venv/bin/python -m tests.helm.values_doc --write"
    assert readme == expected, hint
    current = values_doc.SCHEMA_FILE.read_text(encoding="utf-8")
    assert current == values_doc.dump_schema(values_doc.schema_with_descriptions(schema(), params)), hint


def test_values_file_passes_its_own_schema() -> None:
    # Rendering validates the merged values against values.schema.json (the chart defaults + BASE).
    assert render().docs
