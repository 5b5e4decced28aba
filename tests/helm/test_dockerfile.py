"""The Dockerfile agrees with the service: entry point, ports, health check, user, stages."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import threading
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest
from aiohttp import web

from namesrv.cli import build_parser
from namesrv.http.api import setup_routes
from tests.helm.chart import ROOT, render

DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
BUILD_TOOLS = re.compile(r"\b(gcc|g\+\+|clang|make|build-essential|apt-get|apk|dnf|yum)\b")


@dataclass
class Instruction:
    keyword: str
    args: str

    def exec_form(self) -> list[str]:
        """The JSON (exec) form of CMD/ENTRYPOINT/HEALTHCHECK CMD arguments."""
        text = self.args
        if self.keyword == "HEALTHCHECK":
            text = text.split(" CMD ", 1)[1] if " CMD " in f" {text}" else ""
        value = json.loads(text.strip())
        assert isinstance(value, list) and all(isinstance(v, str) for v in value), self
        return value

    def options(self) -> dict[str, str]:
        """``--name=value`` flags in front of the arguments (COPY --from, HEALTHCHECK --interval)."""
        return dict(re.findall(r"--([a-z-]+)=(\S+)", self.args.split(" CMD ")[0]))


@dataclass
class Stage:
    base: str
    name: str
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]

    def all_args(self, keyword: str) -> list[str]:
        return [i.args for i in self.all(keyword)]

    def last(self, keyword: str) -> Instruction:
        found = self.all(keyword)
        assert found, f"stage {self.name} has no {keyword}"
        return found[-1]


def parse_dockerfile(text: str) -> tuple[dict[str, str], list[Stage]]:
    """Global ARGs and stages: comments dropped, backslash continuations joined."""
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1].rstrip() + " "
            continue
        logical.append(pending + line)
        pending = ""
    assert not pending, "dangling line continuation"
    global_args: dict[str, str] = {}
    stages: list[Stage] = []
    for line in logical:
        keyword, _, args = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            words = args.split()
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else str(len(stages))
            stages.append(Stage(base=words[0], name=name))
        elif not stages:
            assert keyword == "ARG", f"{keyword} before the first FROM"
            key, _, default = args.partition("=")
            global_args[key] = default
        else:
            stages[-1].instructions.append(Instruction(keyword, args.strip()))
    return global_args, stages


@pytest.fixture(scope="module")
def dockerfile() -> tuple[dict[str, str], list[Stage]]:
    return parse_dockerfile(DOCKERFILE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def final(dockerfile: tuple[dict[str, str], list[Stage]]) -> Stage:
    return dockerfile[1][-1]


def expand(text: str, args: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], text)


def service_defaults() -> dict[str, Any]:
    with (ROOT / "config" / "default.toml").open("rb") as fh:
        return tomllib.load(fh)


def service_routes() -> set[str]:
    app = web.Application()
    setup_routes(app)
    return {r.canonical for r in app.router.resources()}


def test_multi_stage_slim_python_from_the_lockfile(dockerfile: tuple[dict[str, str], list[Stage]]) -> None:
    args, stages = dockerfile
    assert [s.name for s in stages] == ["build", "runtime"]
    # The official slim Python by default; docker/make-base.sh's Debian stand-in via --build-arg.
    assert args["BASE_IMAGE"] == "python:3.11-slim-bookworm"
    assert [s.base for s in stages] == ["${BASE_IMAGE}", "${BASE_IMAGE}"]
    build_runs = [i.args for i in stages[0].all("RUN")]
    locked = [r for r in build_runs if "-r requirements.lock" in r]
    assert len(locked) == 1 and "--require-hashes" in locked[0] and "--no-deps" in locked[0]
    # The service itself adds nothing unlocked: --no-deps, and pip check proves the set complete.
    assert any("--no-deps ." in r and "pip check" in r for r in build_runs)


def test_final_stage_installs_no_build_tools(final: Stage) -> None:
    for run in final.all("RUN"):
        assert not BUILD_TOOLS.search(run.args), run.args
        assert "pip install" not in run.args, "the final stage only copies what the build stage installed"
    copies = [c for c in final.all("COPY") if "from" in c.options()]
    assert [(c.options()["from"], c.args.split()[-2:]) for c in copies] == [
        ("build", ["/opt/namesrv", "/opt/namesrv"])
    ]


def test_runs_as_a_numeric_non_root_user(final: Stage) -> None:
    user = final.last("USER").args
    assert re.fullmatch(r"\d+(:\d+)?", user), "numeric, so runAsNonRoot can verify it"
    uid, _, gid = user.partition(":")
    assert int(uid) != 0 and (not gid or int(gid) != 0)
    # The chart runs the pods as the image's user.
    pod = render().deployment["spec"]["template"]["spec"]
    assert (pod["securityContext"]["runAsUser"], pod["securityContext"]["runAsGroup"]) == (int(uid), int(gid))


def test_entrypoint_is_the_namesrv_console_script(final: Stage) -> None:
    assert final.last("ENTRYPOINT").exec_form() == ["namesrv"]
    assert final.last("CMD").exec_form() == []
    with (ROOT / "pyproject.toml").open("rb") as fh:
        assert tomllib.load(fh)["project"]["scripts"]["namesrv"] == "namesrv.cli:main"
    # The chart's container args go to that entry point, and the service's CLI accepts them.
    chart_args = render().container["args"]
    assert build_parser().parse_args(chart_args).config == "/etc/namesrv/namesrv.toml"


def test_exposes_the_service_ports(final: Stage) -> None:
    defaults = service_defaults()
    exposed = {int(p.split("/")[0]) for e in final.all("EXPOSE") for p in e.args.split()}
    assert exposed == {defaults["httpPort"], defaults["remotingPort"]} == {8080, 9876}


def healthcheck_code(final: Stage) -> str:
    command = final.last("HEALTHCHECK").exec_form()
    assert command[:2] == ["python", "-c"], "slim images have no curl: Python's stdlib checks /livez"
    return command[2]


def test_healthcheck_hits_livez(final: Stage) -> None:
    code = healthcheck_code(final)
    compile(code, "HEALTHCHECK", "exec")
    assert "/livez" in code and "/livez" in service_routes()
    assert "'8080'" in code and service_defaults()["httpPort"] == 8080
    options = final.last("HEALTHCHECK").options()
    assert set(options) == {"interval", "timeout", "start-period", "retries"}


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/livez" else 404)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return


@contextmanager
def livez_server() -> Iterator[int]:
    server = HTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def run_healthcheck(code: str, port: int) -> int:
    env = {**os.environ, "NAMESRV_HTTP_PORT": str(port)}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=20).returncode


def test_healthcheck_passes_on_a_live_worker_and_fails_otherwise(final: Stage) -> None:
    code = healthcheck_code(final)
    with livez_server() as port:
        assert run_healthcheck(code, port) == 0
    assert run_healthcheck(code, port) != 0  # nothing listens any more


def test_build_context_is_only_what_the_image_needs() -> None:
    lines = [
        ln for ln in DOCKERIGNORE.read_text(encoding="utf-8").splitlines() if ln and not ln.startswith("#")
    ]
    assert lines[0] == "**"
    allowed = {ln[1:].rstrip("/") for ln in lines if ln.startswith("!")}
    assert allowed == {
        "requirements.lock",
        "docker/wheels",
        "pyproject.toml",
        "README.md",
        "service",
        "lua",
        "config",
    }
    copied = set()
    _, stages = parse_dockerfile(DOCKERFILE.read_text(encoding="utf-8"))
    for stage in stages:
        for copy in stage.all("COPY"):
            if "from" not in copy.options():
                copied.update(shlex.split(copy.args)[:-1])
    assert copied
    for path in copied:
        assert any(path.rstrip("/") == a or path.startswith(f"{a}/") for a in allowed), path


def test_oci_labels_name_the_version_revision_and_base(final: Stage) -> None:
    labels = dict(
        re.findall(r'(org\.opencontainers\.image\.[a-z.]+)="([^"]*)"', " ".join(final.all_args("LABEL")))
    )
    assert labels["org.opencontainers.image.title"] == "namesrv-fleet"
    assert labels["org.opencontainers.image.licenses"] == "Apache-2.0"
    assert labels["org.opencontainers.image.version"] == "${VERSION}"
    assert labels["org.opencontainers.image.revision"] == "${REVISION}"
    assert labels["org.opencontainers.image.created"] == "${CREATED}"
    assert labels["org.opencontainers.image.base.name"] == "${BASE_IMAGE}"
    # docker/build-image.sh fills those build arguments (the tag: <version>-<git sha>).
    script = (ROOT / "docker" / "build-image.sh").read_text(encoding="utf-8")
    for arg in ("BASE_IMAGE", "VERSION", "REVISION", "CREATED", "WHEELHOUSE_ONLY"):
        assert f'--build-arg "{arg}=' in script or f"--build-arg {arg}=" in script, arg
    assert 'tag="${TAG:-$IMAGE:$version-$short}"' in script
