"""The Lua <-> Python contract, read from the scripts themselves: the change-log kinds they append
are exactly :class:`EventKind`, and every kind the route cache acts on exists."""

from __future__ import annotations

import re
from pathlib import Path

from namesrv.registry.route_impact import BROKER_EVENTS, TOPIC_EVENTS
from namesrv.store.changelog import REMOVAL_REASONS, EventKind

LUA = Path(__file__).resolve().parents[2] / "lua"
EMIT = re.compile(r"emit\([^,]+,\s*maxLen,\s*('([A-Za-z]+)'|reason|kind)")
KIND_ASSIGNED = re.compile(r"^.*\bkind = .*$", re.M)  # a script choosing its kind: setWritePerm


def appended_kinds() -> set[str]:
    kinds: set[str] = set()
    for path in sorted(LUA.rglob("*.lua")):
        for match in EMIT.finditer(path.read_text()):
            if match.group(1) == "reason":  # unregisterBroker: the caller's reason is the kind
                kinds.update(str(reason) for reason in REMOVAL_REASONS)
            elif match.group(1) == "kind":
                for line in KIND_ASSIGNED.findall(path.read_text()):
                    kinds.update(re.findall(r"'([A-Za-z]+)'", line))
            else:
                kinds.add(match.group(2))
    return kinds


def test_the_scripts_append_exactly_the_kinds_python_knows() -> None:
    assert appended_kinds() == {str(kind) for kind in EventKind}


def test_every_kind_the_route_cache_acts_on_is_appended_by_a_script() -> None:
    assert {str(k) for k in TOPIC_EVENTS | BROKER_EVENTS} <= appended_kinds()


def test_every_kind_is_documented_in_the_lua_readme() -> None:
    readme = (LUA / "README.md").read_text()
    for kind in EventKind:
        assert f"`{kind}`" in readme, kind
