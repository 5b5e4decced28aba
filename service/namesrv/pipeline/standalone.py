"""A Spark standalone cluster on this machine, started from the pip-installed PySpark's own jars:
one master and N workers on loopback (the cluster test and ``make bench-pipeline`` use it), and
the ``spark-submit`` command line docs/PIPELINE.md gives users.

Nothing here is a Spark installation: ``SPARK_HOME`` is the ``pyspark`` package folder, which
holds ``bin/spark-class``, ``bin/spark-submit`` and every jar. Each daemon is a child process
this object owns; :meth:`StandaloneCluster.stop` kills them (and only them).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
MASTER_READY = "I have been elected leader"
WORKER_READY = "Successfully registered with master"


def spark_home() -> Path:
    """The pip-installed PySpark's folder: a complete SPARK_HOME (bin/ and jars/)."""
    import pyspark

    return Path(pyspark.__file__).parent


def spark_bin(name: str) -> str:
    """``spark-submit`` / ``spark-class`` next to this Python (the venv's bin), else SPARK_HOME's."""
    beside = Path(sys.executable).parent / name
    return str(beside if beside.exists() else spark_home() / "bin" / name)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def package_zip(service_dir: Path, out: Path) -> Path:
    """``namesrv`` as the zip ``--py-files`` ships (what ``zip -qr namesrv.zip namesrv`` makes)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for path in sorted((service_dir / "namesrv").rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                z.write(path, path.relative_to(service_dir).as_posix())
    return out


def spark_env(work: Path) -> dict[str, str]:
    """The environment of the daemons and of spark-submit: SPARK_HOME = the pip-installed PySpark
    (docs/PIPELINE.md tells users the same), loopback only, logs and scratch under ``work``."""
    env = dict(os.environ)
    env |= {
        "SPARK_HOME": str(spark_home()),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(work / "logs"),
        "SPARK_WORKER_DIR": str(work / "worker"),
        "SPARK_LOCAL_DIRS": str(work / "scratch"),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
    env.pop("PYSPARK_GATEWAY_PORT", None)
    # Only what users ship: the driver finds namesrv in the --py-files zip, not on our path.
    env.pop("PYTHONPATH", None)
    return env


@dataclass
class StandaloneCluster:
    """``workers`` workers of ``cores`` cores each and one master, all on 127.0.0.1."""

    work: Path
    workers: int = 2
    cores: int = 1
    worker_memory: str = "1g"
    port: int = field(default_factory=free_port)
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _start(self, name: str, args: list[str]) -> Path:
        log = self.work / "logs" / f"{name}.out"
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [spark_bin("spark-class"), *args],
                env=spark_env(self.work),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own group: stop() kills the JVM, not just the script
            )
        self.procs.append(proc)
        self.logs.append(log)
        return log

    def start(self, timeout_s: float = 180.0) -> StandaloneCluster:
        for d in ("worker", "scratch"):
            (self.work / d).mkdir(parents=True, exist_ok=True)
        common = ["--host", "127.0.0.1"]
        master = self._start(
            "master", [MASTER_CLASS, *common, "--port", str(self.port), "--webui-port", str(free_port())]
        )
        self._wait(master, MASTER_READY, timeout_s)
        for i in range(self.workers):
            args = [WORKER_CLASS, *common, "--port", str(free_port()), "--webui-port", str(free_port())]
            args += ["--cores", str(self.cores), "--memory", self.worker_memory]
            args += ["--work-dir", str(self.work / "worker" / str(i)), self.url]
            log = self._start(f"worker-{i}", args)
            self._wait(log, WORKER_READY, timeout_s)
        return self

    def _wait(self, log: Path, text: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while text not in log.read_text(errors="replace"):
            if any(p.poll() is not None for p in self.procs):
                self.stop()
                raise RuntimeError(f"a Spark daemon exited while starting; see {log}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{log.name} did not log {text!r} within {timeout_s:.0f} s")
            time.sleep(0.2)

    def stop(self) -> None:
        """Kill every daemon this object started (its process group), workers first."""
        for proc in reversed(self.procs):
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, 15)
                except ProcessLookupError:
                    continue
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
                proc.wait(timeout=30)
        self.procs.clear()

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def submit_command(
    master: str, py_files: Path, args: list[str], conf: dict[str, str] | None = None
) -> list[str]:
    """The documented command: ``spark-submit --master M --py-files namesrv.zip
    .../namesrv/pipeline/__main__.py ARGS`` (the entry script is the package's own)."""
    entry = Path(__file__).with_name("__main__.py")
    cmd = [spark_bin("spark-submit"), "--master", master, "--py-files", str(py_files)]
    for key, value in (conf or {}).items():
        cmd += ["--conf", f"{key}={value}"]
    return [*cmd, str(entry), *args]


def remove(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
