"""The attacker: ``python -m bench.abuse.attacker --plan JSON`` runs one attack for the plan's
seconds in a process of its own, so its CPU and sockets are not the legitimate clients'.

It writes JSON lines to stdout: ``{"event": "start"}`` once everything is built and the attack
begins, then ``{"event": "done", ...}`` with what it got back (:class:`bench.abuse.attacks.Tally`),
after every one of its connections is closed.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import sys
import time
from typing import Any

import orjson

from bench.abuse.attacks import ATTACKS, Attack
from bench.abuse.plan import Plan
from bench.loops import run_fast

STOP_TIMEOUT = 10.0  # s for the attack loops to end once cancelled


def raise_fd_limit() -> int:
    """The idle-connection attack holds 10,000 sockets: raise the soft limit to the hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def emit(event: dict[str, Any]) -> None:
    sys.stdout.write(orjson.dumps(event).decode() + "\n")
    sys.stdout.flush()


async def attack(plan: Plan) -> dict[str, Any]:
    a = Attack(plan)
    loops = await ATTACKS[plan.scenario](a)
    started = time.monotonic()
    cpu_before = cpu_seconds()
    a.until = started + plan.seconds
    tasks = [asyncio.ensure_future(loop) for loop in loops]
    emit({"event": "start", "loops": len(tasks)})
    await asyncio.sleep(plan.seconds)
    held_at_end = a.held
    for task in tasks:
        task.cancel()
    _, stuck = await asyncio.wait(tasks, timeout=STOP_TIMEOUT)
    for session in a.sessions:
        await session.close()
    # a loop that died of an exception stopped attacking early: the orchestrator reports it
    errors = [
        repr(task.exception())
        for task in tasks
        if task.done() and not task.cancelled() and task.exception() is not None
    ]
    return {
        "event": "done",
        "seconds": round(time.monotonic() - started, 2),
        "cpu_seconds": round(cpu_seconds() - cpu_before, 3),
        "tally": dict(sorted(a.tally.items())),
        "notes": a.notes | ({"held at end": held_at_end} if plan.scenario == "idle-connections" else {}),
        "loops": len(tasks),
        "errors": len(errors) + len(stuck),
        "first_errors": sorted(set(errors))[:3] + ([f"{len(stuck)} loops did not stop"] if stuck else []),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.abuse.attacker", description=__doc__)
    parser.add_argument("--plan", required=True, help="the Plan as JSON (bench.abuse.plan.Plan.to_json)")
    plan = Plan.from_json(parser.parse_args(argv).plan)
    if plan.scenario not in ATTACKS:
        parser.error(f"unknown attack {plan.scenario!r}; one of {', '.join(ATTACKS)}")
    raise_fd_limit()
    emit(run_fast(attack(plan)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
