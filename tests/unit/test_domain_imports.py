"""The domain layer knows no wire format and no transport: nothing under ``namesrv/domain``
imports ``namesrv.protocol``, ``namesrv.remoting`` or ``namesrv.http`` (rendering lives in
``namesrv.protocol.render``). Read from the source with ``ast``, so a function-level import
counts as much as a module-level one."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from namesrv.domain.model import DataVersion
from namesrv.protocol.render import data_version_json

DOMAIN = Path(__file__).resolve().parents[2] / "service" / "namesrv" / "domain"
FORBIDDEN = ("namesrv.protocol", "namesrv.remoting", "namesrv.http")


def _imports(path: Path) -> list[tuple[str, str]]:
    """(module, name) of every import in the file; name is "" for ``import module``."""
    found: list[tuple[str, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, "") for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:  # relative to namesrv.domain: level 1 is the package, 2 its parent
                package = ["namesrv", "domain"][: 3 - node.level]
                module = ".".join(package + ([module] if module else []))
            found += [(module, alias.name) for alias in node.names]
    return found


def _forbidden(module: str) -> bool:
    return any(module == bad or module.startswith(bad + ".") for bad in FORBIDDEN)


def _violations(path: Path) -> list[str]:
    """Imports of a forbidden package, ``from namesrv import protocol`` included."""
    return sorted(
        f"{module}:{name}" if name else module
        for module, name in _imports(path)
        if (_forbidden(module) or (name and _forbidden(f"{module}.{name}")))
    )


def _domain_files() -> list[Path]:
    files = sorted(DOMAIN.glob("*.py"))
    assert len(files) >= 4, f"no domain sources found under {DOMAIN}"
    return files


@pytest.mark.parametrize("path", _domain_files(), ids=lambda p: p.name)
def test_domain_module_imports_no_wire_layer_or_transport(path: Path) -> None:
    assert not _violations(path), f"domain/{path.name} imports {_violations(path)}"


def test_the_check_sees_every_kind_of_import(tmp_path: Path) -> None:
    source = tmp_path / "sample.py"
    source.write_text(
        "import namesrv.http.api\n"
        "from namesrv import remoting\n"
        "from namesrv.domain import codes\n"
        "from .. import protocol\n"
        "def f():\n    from namesrv.protocol.fastjson import dumps\n",
        encoding="utf-8",
    )
    assert _violations(source) == [
        "namesrv.http.api",
        "namesrv.protocol.fastjson:dumps",
        "namesrv:protocol",
        "namesrv:remoting",
    ]


@given(st.integers(-(2**63), 2**63 - 1), st.integers(-(2**63), 2**63 - 1), st.integers(-(2**63), 2**63 - 1))
def test_stored_data_version_text_is_what_fastjson_writes(counter: int, state: int, timestamp: int) -> None:
    version = DataVersion(counter, state, timestamp)
    assert version.to_json() == data_version_json(version)
