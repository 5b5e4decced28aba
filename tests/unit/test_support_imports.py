"""The tests and the bench share helpers through ``support/`` only: nothing in tests/ imports the
bench (but tests/bench, which tests it), and support/ imports neither, nor pytest."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def top_level_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.split(".")[0])
    return found


def sources(folder: str, skip: str | None = None) -> list[Path]:
    return sorted(
        p
        for p in (ROOT / folder).rglob("*.py")
        if "__pycache__" not in p.parts and (skip is None or skip not in p.relative_to(ROOT).parts)
    )


@pytest.mark.parametrize("path", sources("tests", skip="bench"), ids=lambda p: str(p.relative_to(ROOT)))
def test_tests_do_not_import_the_bench(path: Path) -> None:
    assert "bench" not in top_level_imports(path)


@pytest.mark.parametrize("path", sources("support"), ids=lambda p: str(p.relative_to(ROOT)))
def test_support_imports_neither_tests_nor_bench_nor_pytest(path: Path) -> None:
    assert top_level_imports(path) & {"tests", "bench", "pytest"} == set()


def test_the_check_sees_a_bench_import(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("def f():\n    from bench.procs import Proc\n", encoding="utf-8")
    assert "bench" in top_level_imports(sample)
