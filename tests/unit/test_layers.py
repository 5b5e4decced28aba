"""The architecture, held: imports go inward only, transport -> use cases -> store -> (Lua), with
the wire codec, the domain and a few dependency-free helpers (base) innermost. Read from the
source with ``ast`` (a function-level import counts as much as a module-level one; an ``if
TYPE_CHECKING:`` import, which exists for the type checker only, does not).

A module belongs to the layer of its longest listed prefix; every module of the package must
belong to one, so a new package is placed on purpose."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "service" / "namesrv"

# Innermost first: a module may import its own layer and the ones listed before it.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    (
        "base",
        (
            "namesrv.aio",
            "namesrv.limits",
            "namesrv.config",
            "namesrv.javaprops",
            "namesrv.procs",
            "namesrv.allocator",
            "namesrv.logs",
            "namesrv.metrics",
            "namesrv.keys",  # typed app keys: imports the app's types for the type checker only
            "namesrv.security.redact",
        ),
    ),
    ("domain", ("namesrv.domain",)),
    ("codec", ("namesrv.protocol",)),
    ("store", ("namesrv.store",)),
    (
        "use cases",
        (
            "namesrv.registry",
            "namesrv.decode_budget",
            "namesrv.worker",
            "namesrv.security",
            "namesrv.events",
        ),
    ),
    (
        "transport",
        (
            "namesrv.http",
            "namesrv.remoting",
            "namesrv.tls",
            "namesrv.security.http_auth",
        ),  # an aiohttp middleware
    ),
    (
        "composition",  # wires the layers together, or a program of its own built on them
        (
            "namesrv.app",
            "namesrv.runner",
            "namesrv.cli",
            "namesrv.admin_cli",
            "namesrv.__main__",
            "namesrv.__init__",
            "namesrv.sim",
            "namesrv.pipeline",
            "namesrv.security.reload",  # an app context: starts with the worker
            "namesrv.events.budget",  # an app context
            "namesrv.events.cli",
            "namesrv.client",  # a client of the HTTP API: imports nothing of the service
        ),
    ),
]
RANK = {name: i for i, (name, _) in enumerate(LAYERS)}


def layer_of(module: str) -> str | None:
    best: tuple[int, str] | None = None
    for name, prefixes in LAYERS:
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and (
                best is None or len(prefix) > best[0]
            ):
                best = (len(prefix), name)
    return best[1] if best else None


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return (
        ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        if parts[-1] != "__init__"
        else ".".join(parts)
    )


def imports(path: Path, module: str) -> list[str]:
    """Modules of ours that ``path`` imports at run time (names of ``from x import y`` as x.y)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    type_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            type_only.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    found: list[str] = []
    package = module.split(".")[:-1] if path.name != "__init__.py" else module.split(".")
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            found += [f"{base}.{a.name}" if layer_of(f"{base}.{a.name}") else base for a in node.names]
    return [m for m in found if m == "namesrv" or m.startswith("namesrv.")]


SOURCES = sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_a_module_imports_only_its_own_layer_and_inner_ones(path: Path) -> None:
    module = module_name(path)
    mine = layer_of(module)
    assert mine is not None, f"{module} is in no layer: add it to LAYERS"
    outward = [
        f"{target} ({layer_of(target)})"
        for target in imports(path, module)
        if layer_of(target) is not None and RANK[layer_of(target) or ""] > RANK[mine]
    ]
    assert not outward, f"{module} ({mine}) imports outward: {outward}"


def test_the_check_sees_an_outward_import(tmp_path: Path) -> None:
    sample = PACKAGE / "store" / "sample.py"
    fake = tmp_path / "sample.py"
    fake.write_text("def f():\n    from namesrv.registry.service import RegistryService\n", encoding="utf-8")
    assert imports(fake, "namesrv.store.sample") == ["namesrv.registry.service.RegistryService"]
    assert layer_of("namesrv.registry.service.RegistryService") == "use cases"
    assert layer_of(module_name(sample)) == "store"
