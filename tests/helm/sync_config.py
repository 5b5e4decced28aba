"""Bring the chart's ``config:`` values and their schema up to date with ``Settings``.

Every option of ``config/default.toml`` (except ``redisUrl``, which comes from the redis section)
is a ``config.*`` value of the chart with the same default, and a schema node with the service's
type, range and choices. A new option only needs ``make config`` and::

    .venv/bin/python -m tests.helm.sync_config && .venv/bin/python -m tests.helm.values_doc --write

Existing descriptions and values in values.yaml are kept (some say how the chart fills them in);
new options get the option's own description and default. The tests in test_chart_values.py check
the result.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

from namesrv.config import FIELDS, Settings
from tests.helm.values_doc import SCHEMA_FILE, VALUES_FILE

NOT_IN_VALUES = {"redisUrl"}
JSON_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string"}
_ENTRY = re.compile(r"^  ## @param config\.(?P<key>\w+) (?P<doc>.*)\n  (?P=key): (?P<value>.*)$", re.M)


def _yaml_scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    return repr(value)


def _doc(key: str) -> str:
    meta = FIELDS[key].metadata
    return str(meta["doc"]) + (" [dynamic]" if meta["dynamic"] else "")


def sync_values(text: str) -> str:
    start = text.index("\nconfig:\n") + len("\nconfig:\n")
    end = start
    lines = text[start:].split("\n")
    for line in lines:  # the block ends at the first line that is not indented
        if line and not line.startswith(" "):
            break
        end += len(line) + 1
    block = text[start:end]
    known = {m["key"]: (m["doc"], m["value"]) for m in _ENTRY.finditer(block)}
    defaults = Settings()
    out = []
    for key in FIELDS:
        if key in NOT_IN_VALUES:
            continue
        doc, value = known.get(key, (_doc(key), _yaml_scalar(getattr(defaults, key))))
        out.append(f"  ## @param config.{key} {doc}\n  {key}: {value}\n")
    trailer = "" if block.endswith("\n\n") else ""
    return text[:start] + "".join(out) + ("\n" if block.endswith("\n\n") else "") + trailer + text[end:]


def sync_schema(schema: dict[str, Any]) -> dict[str, Any]:
    config = schema["properties"]["config"]
    old = config["properties"]
    new: dict[str, Any] = {}
    for key, field in FIELDS.items():
        if key in NOT_IN_VALUES:
            continue
        meta = field.metadata
        node = dict(old.get(key, {}))
        node.setdefault("description", _doc(key))
        node["type"] = JSON_TYPES[type(field.default)]
        for name, bound in (("minimum", meta["lo"]), ("maximum", meta["hi"])):
            if key in ("httpPort", "remotingPort") and name == "minimum":
                bound = 1  # port 0 (random) cannot be probed
            if bound is None:
                node.pop(name, None)
            else:
                node[name] = bound
        if meta["choices"]:
            node["enum"] = list(meta["choices"])
        else:
            node.pop("enum", None)
        new[key] = node
    config["properties"] = new
    return schema


def main() -> None:
    assert dataclasses.is_dataclass(Settings)
    VALUES_FILE.write_text(sync_values(VALUES_FILE.read_text()))
    schema = json.loads(SCHEMA_FILE.read_text())
    SCHEMA_FILE.write_text(json.dumps(sync_schema(schema), indent=2, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
