"""The chart's value documentation: ``## @param`` lines in values.yaml -> README table and schema.

values.yaml documents every value with ``## @param <path> [<[object]|[array]>] <description>``
(the bitnami convention); ``## @section <title>`` starts a table. From these lines this module
renders the parameter tables of ``helm/namesrv/README.md`` (between the ``<!-- params:begin -->``
and ``<!-- params:end -->`` markers) and the ``description`` of each documented node in
``values.schema.json``. The tests check both are current; after editing values.yaml run::

    .venv/bin/python -m tests.helm.values_doc --write
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

CHART_DIR = Path(__file__).resolve().parents[2] / "helm" / "namesrv"
VALUES_FILE = CHART_DIR / "values.yaml"
README_FILE = CHART_DIR / "README.md"
SCHEMA_FILE = CHART_DIR / "values.schema.json"
BEGIN, END = "<!-- params:begin -->", "<!-- params:end -->"

_PARAM = re.compile(r"^\s*## @param (?P<path>\S+)(?: \[(?P<kind>object|array)\])? (?P<text>.+)$")
_SECTION = re.compile(r"^\s*## @section (?P<title>.+)$")


@dataclass(frozen=True)
class Param:
    path: str
    description: str
    section: str
    free_form: bool  # [object]/[array]: a Kubernetes structure documented as a whole


def load_values() -> dict[str, Any]:
    values = yaml.safe_load(VALUES_FILE.read_text(encoding="utf-8"))
    assert isinstance(values, dict)
    return values


def parse_params(text: str | None = None) -> list[Param]:
    """Every ``@param`` of values.yaml, in file order, with the section it belongs to."""
    source = VALUES_FILE.read_text(encoding="utf-8") if text is None else text
    params: list[Param] = []
    section = ""
    for line in source.splitlines():
        if m := _SECTION.match(line):
            section = m["title"].strip()
        elif m := _PARAM.match(line):
            params.append(Param(m["path"], m["text"].strip(), section, m["kind"] is not None))
    return params


def lookup(values: dict[str, Any], path: str) -> tuple[bool, Any]:
    """``(found, value)`` for a dotted path."""
    node: Any = values
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return False, None
        node = node[part]
    return True, node


def leaf_paths(values: dict[str, Any], prefix: str = "") -> list[str]:
    """Dotted paths of every value that is not a non-empty mapping."""
    paths: list[str] = []
    for key, value in values.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            paths.extend(leaf_paths(value, f"{path}."))
        else:
            paths.append(path)
    return paths


def undocumented(values: dict[str, Any], params: list[Param]) -> list[str]:
    """Leaf paths covered neither by their own @param nor by a free-form ancestor's."""
    documented = {p.path for p in params}
    free = [p.path for p in params if p.free_form]
    return [
        path
        for path in leaf_paths(values)
        if path not in documented and not any(path.startswith(f"{f}.") for f in free)
    ]


def _markdown(text: str) -> str:
    """Table-cell text: pipes escaped, angle brackets kept from reading as HTML."""
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def _cell(value: Any) -> str:
    return "`" + json.dumps(value, separators=(",", ":")).replace("|", "\\|") + "`"


def render_tables(params: list[Param], values: dict[str, Any]) -> str:
    """The Markdown parameter tables, one per section."""
    out: list[str] = []
    section: str | None = None
    for p in params:
        if p.section != section:
            section = p.section
            out += ["", f"### {section}", "", "| Name | Description | Default |", "| --- | --- | --- |"]
        _, value = lookup(values, p.path)
        out.append(f"| `{p.path}` | {_markdown(p.description)} | {_cell(value)} |")
    return "\n".join(out).strip() + "\n"


def readme_with_tables(readme: str, tables: str) -> str:
    head, sep, rest = readme.partition(BEGIN)
    _, sep2, tail = rest.partition(END)
    if not sep or not sep2:
        raise ValueError(f"{README_FILE} lacks the {BEGIN} / {END} markers")
    return f"{head}{BEGIN}\n{tables}{END}{tail}"


def schema_node(schema: dict[str, Any], path: str) -> dict[str, Any] | None:
    node: Any = schema
    for part in path.split("."):
        props = node.get("properties") if isinstance(node, dict) else None
        if not isinstance(props, dict) or part not in props:
            return None
        node = props[part]
    return node if isinstance(node, dict) else None


def schema_with_descriptions(schema: dict[str, Any], params: list[Param]) -> dict[str, Any]:
    """A copy of the schema whose documented nodes carry the @param description first."""
    copy: dict[str, Any] = json.loads(json.dumps(schema))
    for p in params:
        node = schema_node(copy, p.path)
        if node is not None:
            rest = {k: v for k, v in node.items() if k != "description"}
            node.clear()
            node.update({"description": p.description, **rest})
    return copy


def dump_schema(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument(
        "--write", action="store_true", help="rewrite README.md tables and schema descriptions"
    )
    args = parser.parse_args(argv)
    params, values = parse_params(), load_values()
    readme = readme_with_tables(README_FILE.read_text(encoding="utf-8"), render_tables(params, values))
    schema = dump_schema(
        schema_with_descriptions(json.loads(SCHEMA_FILE.read_text(encoding="utf-8")), params)
    )
    if args.write:
        README_FILE.write_text(readme, encoding="utf-8")
        SCHEMA_FILE.write_text(schema, encoding="utf-8")
        return 0
    sys.stdout.write(render_tables(params, values))
    return 0


if __name__ == "__main__":
    sys.exit(main())
