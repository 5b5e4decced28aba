"""What the synthetic history generator simulates (:mod:`.synth`), without its dependencies:
the command line reads the flags from here, so ``python -m namesrv.pipeline run`` needs only
PySpark on a cluster's driver."""

from __future__ import annotations

from dataclasses import dataclass

DAY_MS = 86_400_000


@dataclass(frozen=True)
class FleetSpec:
    """A fleet and what happens to it. Rates are per member per day unless noted."""

    clusters: int = 2
    names_per_cluster: int = 3
    slaves: int = 1
    topics: int = 600
    days: float = 2.0
    start_ms: int = 1_793_491_200_000  # 2026-11-01T00:00:00Z
    heartbeat_ms: int = 5_000  # BROKER_HEARTBEAT interval (0: registrations only)
    register_ms: int = 30_000
    timeout_ms: int = 20_000
    crashes: float = 0.4  # member dies; expired by the sweep; restarts after a downtime
    restarts: float = 0.3  # graceful: unregister, restart
    closes: float = 0.3  # connection closed (fenced close removal), quick reconnect
    stale_closes: float = 0.5  # a late close of an old connection after a reconnect: fenced
    flappers: int = 1  # members that flap for an hour a day
    slow: int = 1  # members with slow heartbeats (gaps up to ~1.1x the timeout)
    wipes_per_day: float = 1.0  # fleet-wide: wipe a broker name's write perm for a while
    topic_churn_per_day: float = 4.0  # fleet-wide: topics created/deleted by admins
    acting_master: bool = False
    bad_rate: float = 0.0  # fraction of extra bad lines (corrupt, unknown kind, duplicate...)
    max_events: int = 0  # stop after this many events per shard (0: no limit)
    seed: int = 7


PRESETS: dict[str, FleetSpec] = {
    # the committed sample report: small enough to read, everything happens at least once
    "sample": FleetSpec(bad_rate=0.0005),
    # make bench-pipeline: 24 names x 2 = 48 members heartbeating every second
    "bench": FleetSpec(
        clusters=4,
        names_per_cluster=6,
        topics=3000,
        days=3.0,
        heartbeat_ms=1_000,
        timeout_ms=10_000,
        acting_master=True,
        bad_rate=0.00001,
    ),
}
