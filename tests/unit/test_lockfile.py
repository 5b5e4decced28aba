"""The lockfiles agree with pyproject.toml and with each other.

uv.lock is the source (``make lock`` resolves it again); requirements.lock (the image's runtime set,
hash-pinned) and constraints.lock (every package ``make install`` may pull in) are exported from it.
A dependency changed in pyproject.toml without ``make lock`` fails here, not in a build later.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.helm.chart import ROOT

PROJECT = "namesrv-fleet"
PIN = re.compile(r"^(?P<name>[A-Za-z0-9._-]+)==(?P<version>[^\s;\\]+)")
HASH = re.compile(r"--hash=sha256:([0-9a-f]{64})")


@dataclass
class Pin:
    name: str
    version: str
    hashes: set[str] = field(default_factory=set)


def read_pins(name: str) -> dict[str, list[Pin]]:
    """``name==version`` entries of an exported requirements file, with their hashes. A package
    may be pinned once per Python range (``numpy==2.4.6 ; python_full_version < '3.12'``)."""
    pins: dict[str, list[Pin]] = {}
    current: Pin | None = None
    for line in (ROOT / name).read_text(encoding="utf-8").splitlines():
        found = PIN.match(line)
        if found:
            current = Pin(canonicalize_name(found["name"]), found["version"])
            pins.setdefault(current.name, []).append(current)
        elif current:
            current.hashes.update(HASH.findall(line))
    return pins


@pytest.fixture(scope="module")
def lock() -> dict[str, list[dict[str, Any]]]:
    """uv.lock's packages by name: one entry per locked version."""
    with (ROOT / "uv.lock").open("rb") as fh:
        packages: list[dict[str, Any]] = tomllib.load(fh)["package"]
    by_name: dict[str, list[dict[str, Any]]] = {}
    for package in packages:
        by_name.setdefault(canonicalize_name(package["name"]), []).append(package)
    return by_name


def versions(packages: list[dict[str, Any]]) -> list[str]:
    return sorted(p["version"] for p in packages)


@pytest.fixture(scope="module")
def pyproject() -> dict[str, Any]:
    with (ROOT / "pyproject.toml").open("rb") as fh:
        project: dict[str, Any] = tomllib.load(fh)["project"]
    return project


def wheel_hashes(package: dict[str, Any]) -> set[str]:
    return {w["hash"].removeprefix("sha256:") for w in package.get("wheels", [])}


def closure(lock: dict[str, list[dict[str, Any]]], roots: list[dict[str, Any]]) -> set[str]:
    """Every package the given dependency entries pull in, following extras (markers ignored)."""
    seen: set[tuple[str, str]] = set()
    todo = list(roots)
    while todo:
        dep = todo.pop()
        name = canonicalize_name(dep["name"])
        for extra in [None, *dep.get("extra", [])]:
            if (name, extra or "") in seen:
                continue
            seen.add((name, extra or ""))
            for package in lock[name]:
                if extra is None:
                    todo.extend(package.get("dependencies", []))
                else:
                    todo.extend(package.get("optional-dependencies", {}).get(extra, []))
    return {name for name, _ in seen}


def declared(pyproject: dict[str, Any]) -> Iterator[tuple[str, str, str]]:
    """(group, name, specifier) of every dependency pyproject.toml declares; group "" is the runtime."""
    groups = {"": pyproject["dependencies"], **pyproject.get("optional-dependencies", {})}
    for group, requirements in groups.items():
        for text in requirements:
            req = Requirement(text)
            yield group, canonicalize_name(req.name), str(req.specifier)


def locked(project: dict[str, Any]) -> Iterator[tuple[str, str, str]]:
    for dep in project["metadata"]["requires-dist"]:
        extra = re.search(r"extra == '([^']+)'", dep.get("marker", ""))
        specifier = str(Requirement(f"x{dep.get('specifier', '')}").specifier)
        yield (extra[1] if extra else ""), canonicalize_name(dep["name"]), specifier


def declared_groups(pyproject_file: dict[str, Any]) -> Iterator[tuple[str, str, str]]:
    """(group, name, specifier) of every PEP 735 dependency group entry (include-group not used)."""
    for group, requirements in pyproject_file.get("dependency-groups", {}).items():
        for text in requirements:
            req = Requirement(text)
            yield group, canonicalize_name(req.name), str(req.specifier)


def locked_groups(project: dict[str, Any]) -> Iterator[tuple[str, str, str]]:
    for group, deps in project["metadata"].get("requires-dev", {}).items():
        for dep in deps:
            specifier = str(Requirement(f"x{dep.get('specifier', '')}").specifier)
            yield group, canonicalize_name(dep["name"]), specifier


def test_uv_lock_was_resolved_from_this_pyproject(
    lock: dict[str, list[dict[str, Any]]], pyproject: dict[str, Any]
) -> None:
    [project] = lock[PROJECT]
    assert project["version"] == pyproject["version"]
    assert sorted(locked(project)) == sorted(declared(pyproject)), "pyproject.toml changed: run `make lock`"
    with (ROOT / "pyproject.toml").open("rb") as fh:
        groups = sorted(declared_groups(tomllib.load(fh)))
    assert sorted(locked_groups(project)) == groups, "pyproject.toml changed: run `make lock`"


def test_test_tools_are_a_dependency_group_not_a_published_extra(pyproject: dict[str, Any]) -> None:
    extras = {
        canonicalize_name(Requirement(t).name)
        for ts in pyproject["optional-dependencies"].values()
        for t in ts
    }
    assert not extras & {"pytest", "mypy", "ruff", "hypothesis"}
    assert "dev" not in pyproject["optional-dependencies"]


def test_requirements_lock_pins_exactly_the_runtime_set_with_locked_hashes(
    lock: dict[str, list[dict[str, Any]]],
) -> None:
    pins = read_pins("requirements.lock")
    [project] = lock[PROJECT]
    assert set(pins) == closure(lock, project["dependencies"]) - {PROJECT}
    assert {"redis", "aiohttp", "hiredis", "uvloop"} <= set(pins)
    for name, found in pins.items():
        assert sorted(p.version for p in found) == versions(lock[name]), name
        for pin in found:
            [package] = [p for p in lock[name] if p["version"] == pin.version]
            # Every hash the image build accepts is one uv recorded for that very release.
            recorded = wheel_hashes(package) | {
                package.get("sdist", {}).get("hash", "").removeprefix("sha256:")
            }
            assert pin.hashes and pin.hashes <= recorded, name
    assert "pytest" not in pins and "pyspark" not in pins  # test and pipeline tools stay out of the image


def test_constraints_lock_pins_every_locked_package(lock: dict[str, list[dict[str, Any]]]) -> None:
    pins = read_pins("constraints.lock")
    assert set(pins) == set(lock) - {PROJECT}
    for name, found in pins.items():
        assert sorted(p.version for p in found) == versions(lock[name]), name
