"""The table's rows: every attack of issue #25 and of the round before it, in the issue's order,
after a baseline without any attack."""

from __future__ import annotations

from dataclasses import dataclass

BASELINE = "baseline"


@dataclass(frozen=True)
class Scenario:
    name: str  # the attack's name in bench.abuse.attacks.ATTACKS (none for the baseline)
    source: str  # where it comes from: "#25 row N" or "#11" (the round before)
    fleet: str  # "plain" (default settings) or "acl" (aclEnable with an ACL file)
    what: str


SCENARIOS = (
    Scenario(BASELINE, "", "plain", "no attack: the legitimate traffic alone"),
    Scenario(
        "zlib-bomb",
        "#25 row 1",
        "plain",
        "20 connections send REGISTER_BROKER, compressed=true, a 64 KB body inflating to 63 MiB, "
        "again as soon as answered",
    ),
    Scenario(
        "kv-flood",
        "#25 row 3",
        "plain",
        "PUT_KV_CONFIG of 60 KiB values into one namespace as fast as answered, and 4 loops "
        "reading it (219, GET /v1/kv/FLOOD)",
    ),
    Scenario(
        "idle-connections",
        "#25 row 4",
        "plain",
        "10,000 connections from one address that send nothing; each one closed is opened again after 1 s",
    ),
    Scenario(
        "acl-unregister",
        "#25 row 5",
        "acl",
        "ACL on: an app account, correctly signed, sends UNREGISTER_BROKER for every legitimate "
        "broker in loops",
    ),
    Scenario(
        "http-bad-input",
        "#25 row 6",
        "plain",
        'HTTP loops: readQueueNums "8", a topic under a key that is not its topicName, KV namespace ../..',
    ),
    Scenario(
        "partial-frames",
        "#11",
        "plain",
        "100 connections each send 10 MiB of a 12 MiB frame and stop; each one closed starts over after 1 s",
    ),
    Scenario(
        "connection-flood",
        "#11",
        "plain",
        "32 loops connect and reset at once, every other connection after writing a lookup",
    ),
    Scenario(
        "oversized-names",
        "#11",
        "plain",
        "10 MB topic and broker names in lookups and registrations, over remoting and HTTP",
    ),
    Scenario(
        "malformed-frames",
        "#11",
        "plain",
        "17 kinds of malformed frame (garbage, lying lengths, bad JSON headers, nesting bombs), "
        "one per connection",
    ),
)
NAMES = tuple(s.name for s in SCENARIOS)


def by_name(names: tuple[str, ...]) -> list[Scenario]:
    """The chosen scenarios in table order, those of the plain fleet first (one fleet start each)."""
    chosen = [s for s in SCENARIOS if s.name in names]
    return sorted(chosen, key=lambda s: s.fleet != "plain")
