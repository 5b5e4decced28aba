"""What a load process is asked to do (:class:`LoadJob`), what each reports back
(:class:`LoadResult`), and the one summary of all of them (:class:`LoadSummary`)."""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from bench.stats import percentile_ms

Protocol = Literal["remoting", "http"]


@dataclass(frozen=True)
class LoadJob:
    name: str
    protocol: Protocol
    targets: tuple[tuple[str, int], ...]
    topics: tuple[str, ...]
    uniform: bool  # True: each request picks a topic uniformly at random; False: round robin
    conns: int  # connections per process per target
    depth: int  # closed loop: requests in flight per connection
    rate: float = 0.0  # open loop: total requests/s over all processes; 0 = closed loop
    warmup: float = 2.0
    duration: float = 5.0
    version: int = 479  # request version; >= 401 asks for standard JSON
    # open loop in steps: (seconds, fraction of ``rate``) from the window's start (the warm-up runs
    # at the first step's rate); replies then also record when they were meant to be sent
    steps: tuple[tuple[float, float], ...] = ()
    # set by the pool:
    start_at: float = 0.0
    procs: int = 1
    index: int = 0


@dataclass
class LoadResult:
    """What one process measured in the window (replies received inside it)."""

    completed: int = 0
    errors: int = 0
    error_codes: dict[int, int] = field(default_factory=dict)
    latencies: array[float] = field(default_factory=lambda: array("d"))
    intended: array[float] = field(default_factory=lambda: array("d"))
    offsets: array[float] = field(default_factory=lambda: array("d"))  # steps: intended send - window start
    sent: int = 0
    late: int = 0
    skipped: int = 0
    cpu: float = 0.0
    window: float = 0.0
    connections: int = 0
    disconnects: int = 0  # connections the server closed while the job ran
    unanswered: int = 0  # requests in flight on them
    failure: str | None = None


@dataclass
class LoadSummary:
    """All processes of one job merged."""

    name: str
    protocol: str
    mode: str
    target_rate: float
    rps: float  # successful replies/s in the window
    replies_per_s: float  # all replies/s (errors included)
    completed: int
    errors: int
    error_codes: dict[str, int]
    p50_ms: float
    p90_ms: float
    p99_ms: float
    p999_ms: float
    max_ms: float
    intended_p50_ms: float | None
    intended_p99_ms: float | None
    late_fraction: float | None
    skipped: int
    loadgen_procs: int
    loadgen_connections: int
    disconnects: int
    in_flight: int | None
    loadgen_cores: float  # CPU seconds of all load processes / window
    loadgen_core_max: float  # the busiest load process, 1.0 = it used a whole core
    duration: float
    failures: list[str]

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def summarize(job: LoadJob, results: Sequence[LoadResult]) -> LoadSummary:
    failures = [r.failure for r in results if r.failure]
    ok = [r for r in results if not r.failure]
    latencies = sorted(x for r in ok for x in r.latencies)
    intended = sorted(x for r in ok for x in r.intended)
    completed = sum(r.completed for r in ok)
    unanswered = sum(r.unanswered for r in ok)
    errors = sum(r.errors for r in ok) + unanswered
    codes: dict[str, int] = {}
    for r in ok:
        for code, count in r.error_codes.items():
            codes[str(code)] = codes.get(str(code), 0) + count
    if unanswered:
        codes["unanswered (connection closed by the server)"] = unanswered
    sent = sum(r.sent for r in ok)
    open_loop = job.rate > 0
    connections = sum(r.connections for r in ok)
    return LoadSummary(
        name=job.name,
        protocol=job.protocol,
        mode="open" if open_loop else "closed",
        target_rate=job.rate,
        rps=(completed - errors + unanswered) / job.duration,
        replies_per_s=completed / job.duration,
        completed=completed,
        errors=errors,
        error_codes=codes,
        p50_ms=percentile_ms(latencies, 50),
        p90_ms=percentile_ms(latencies, 90),
        p99_ms=percentile_ms(latencies, 99),
        p999_ms=percentile_ms(latencies, 99.9),
        max_ms=latencies[-1] * 1000 if latencies else float("nan"),
        intended_p50_ms=percentile_ms(intended, 50) if open_loop else None,
        intended_p99_ms=percentile_ms(intended, 99) if open_loop else None,
        late_fraction=(sum(r.late for r in ok) / sent if sent else 0.0) if open_loop else None,
        skipped=sum(r.skipped for r in ok),
        loadgen_procs=len(results),
        loadgen_connections=connections,
        disconnects=sum(r.disconnects for r in ok),
        in_flight=None if open_loop else connections * job.depth,
        loadgen_cores=sum(r.cpu for r in ok) / job.duration,
        loadgen_core_max=max((r.cpu / job.duration for r in ok), default=0.0),
        duration=job.duration,
        failures=failures,
    )
