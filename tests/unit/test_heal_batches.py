"""A split registration (5.x ``enableSplitRegistration``) is kept as every batch of its
DataVersion and replayed batch by batch, each later batch saying it continues the replay."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from namesrv.domain.errors import StoreUnavailable
from namesrv.domain.model import DataVersion, RawBody, RegisterBrokerRequest, RegisterBrokerResult
from namesrv.protocol.register_body import data_version_text
from namesrv.registry import heal
from namesrv.registry.heal import RegistrationKeeper
from namesrv.registry.kept_topics import WrittenTopics
from namesrv.registry.registration import Registration
from namesrv.sim.bodies import register_body_compressed, register_body_json
from namesrv.sim.broker import topic_configs
from namesrv.store.registration_args import BodyFacts, TopicWrite, TopicWrites

ADDR = "10.0.0.1:10911"


def _batch(topics: list[str], counter: int, *, compressed: bool = False) -> RegisterBrokerRequest:
    version = DataVersion(counter, 0, 1_700_000_000_000)
    table = topic_configs(topics)
    data = register_body_compressed(table, version) if compressed else register_body_json(table, version)
    return RegisterBrokerRequest("C", ADDR, "b", 0, "", None, body=RawBody(data, 479, compressed))


class Recorder:
    """Registers every call with a new epoch; fails the calls whose number is in ``fail``."""

    def __init__(self, fail: frozenset[int] = frozenset()) -> None:
        self.fail = fail
        self.calls: list[tuple[bytes | None, bool]] = []  # (body, replay_continues)
        self.facts: list[BodyFacts | None] = []
        self.ids: list[int] = []  # brokerId of each call

    async def __call__(
        self, request: RegisterBrokerRequest, facts: BodyFacts | None = None, kept: bytes | None = None
    ) -> tuple[RegisterBrokerResult | None, Registration | None]:
        assert request.body is not None
        self.calls.append((request.body.data, request.replay_continues))
        self.facts.append(facts)
        self.ids.append(request.brokerId)
        if len(self.calls) in self.fail:
            raise StoreUnavailable("Redis unavailable: Connection reset by peer")
        return RegisterBrokerResult(), Registration("C", ADDR, "b", 0, 100 + len(self.calls))


async def _heal(keeper: RegistrationKeeper) -> None:
    await keeper.on_reset("Redis holds a new data set")
    assert keeper._heal is not None
    await asyncio.wait_for(keeper._heal, 30)


def test_the_data_version_is_read_from_json_and_compressed_bodies_alone() -> None:
    json_body = _batch(["A", "B"], 3).body
    packed = _batch(["A", "B"], 3, compressed=True).body
    assert json_body is not None and packed is not None
    expected = b'{"counter":3,"stateVersion":0,"timestamp":1700000000000}'
    assert data_version_text(json_body.data, version=479, compressed=False) == expected
    assert data_version_text(packed.data, version=479, compressed=True) == expected
    # a DataVersion after a table far longer than the probe is found at the tail
    tail = b'{"topicConfigTable":{' + b" " * 200_000 + b'},"dataVersion":{"counter":9}}'
    assert data_version_text(tail, version=479, compressed=False) == b'{"counter":9}'
    assert data_version_text(b"{" + b" " * 200_000 + b"}", version=479, compressed=False) is None
    assert data_version_text(b"x\x9c garbage", version=479, compressed=True) is None
    assert data_version_text(None, version=479, compressed=False) is None


async def test_every_batch_of_one_data_version_is_replayed_in_order() -> None:
    register = Recorder()
    keeper = RegistrationKeeper(register, max_bytes=1 << 20)
    epochs: list[int] = []
    batches = [_batch([f"T{i}-{j}" for j in range(3)], 5) for i in range(3)]
    for request in [*batches, batches[0]]:  # the next period sends the first batch again
        keeper.keep("w#1", request, 1_000, lambda reg: epochs.append(reg.epoch), lambda: True)
    assert len(keeper) == 1
    await _heal(keeper)
    assert [body for body, _ in register.calls] == [b.body.data for b in batches if b.body]
    assert [later for _, later in register.calls] == [False, True, True]
    assert epochs == [101, 102, 103]
    assert keeper.last_heal["replayed"] == 1.0


async def test_a_new_data_version_replaces_the_batches_kept() -> None:
    register = Recorder()
    keeper = RegistrationKeeper(register, max_bytes=1 << 20)
    for request in (_batch(["A"], 5), _batch(["B"], 5), _batch(["A", "B", "C"], 6, compressed=True)):
        keeper.keep("w#1", request, 1_000, lambda reg: None, lambda: True)
    await _heal(keeper)
    newest = _batch(["A", "B", "C"], 6, compressed=True).body
    assert newest is not None
    assert register.calls == [(newest.data, False)]


async def test_a_failed_batch_is_retried_without_replaying_the_batches_before_it() -> None:
    register = Recorder(fail=frozenset({2}))
    keeper = RegistrationKeeper(register, max_bytes=1 << 20)
    batches = [_batch([f"T{i}"], 5) for i in range(3)]
    for request in batches:
        keeper.keep("w#1", request, 1_000, lambda reg: None, lambda: True)
    await _heal(keeper)
    sent = [b.body.data for b in batches if b.body]
    assert register.calls == [(sent[0], False), (sent[1], True), (sent[1], True), (sent[2], True)]
    assert keeper.last_heal == {**keeper.last_heal, "replayed": 1.0, "retried": 1.0, "failed": 0.0}


async def test_a_heal_that_makes_progress_is_not_given_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """The retry window counts from the last batch that landed: a big broker on a slow Redis
    takes longer than the window in all, and must still come back whole."""
    monkeypatch.setattr(heal, "RETRY_FOR_SECONDS", 0.5)

    class Slow(Recorder):
        async def __call__(
            self, request: RegisterBrokerRequest, facts: BodyFacts | None = None, kept: bytes | None = None
        ) -> tuple[RegisterBrokerResult | None, Registration | None]:
            await asyncio.sleep(0.3)
            return await super().__call__(request, facts, kept)

    register = Slow(fail=frozenset({3}))  # the third batch fails once, 0.9 s after the start
    keeper = RegistrationKeeper(register, max_bytes=1 << 20)
    for request in [_batch([f"T{i}"], 5) for i in range(3)]:
        keeper.keep("w#1", request, 1_000, lambda reg: None, lambda: True)
    await _heal(keeper)
    assert len(register.calls) == 4
    assert keeper.last_heal["replayed"] == 1.0


def _facts(count: int) -> BodyFacts:
    return BodyFacts('{"counter":5}', 0, None, count, f"digest-{count}", True)


async def test_masters_are_replayed_before_slaves_with_the_facts_of_each_batch() -> None:
    """A slave replayed before its master would write every topic as the lowest id of its
    broker name; and each batch carries what it amounted to, so a slave's replay decodes
    nothing."""
    register = Recorder()
    keeper = RegistrationKeeper(register, max_bytes=1 << 20)
    for n, broker_id in enumerate([2, 1, 0, 1, 0]):
        base = _batch([f"T{n}"], 5)
        request = replace(base, brokerAddr=f"10.0.0.{n}:10911", brokerId=broker_id)
        # the first copy's registration decoded nothing (Redis reused its record): no facts
        facts = None if n == 0 else _facts(n)
        keeper.keep("w#1", request, 1_000, lambda reg: None, lambda: True, facts)
    await _heal(keeper)
    assert register.ids == [0, 0, 2, 1, 1]
    assert register.facts == [_facts(2), _facts(4), None, _facts(1), _facts(3)]


async def test_a_body_kept_again_takes_the_facts_of_its_latest_decode() -> None:
    register = Recorder()
    keeper = RegistrationKeeper(register, max_bytes=1 << 20)
    request = _batch(["A"], 5)
    keeper.keep("w#1", request, 1_000, lambda reg: None, lambda: True, None)
    keeper.keep("w#1", request, 2_000, lambda reg: None, lambda: True, None)  # Redis reused it
    await _heal(keeper)
    keeper.keep("w#1", request, 3_000, lambda reg: None, lambda: True, _facts(1))
    await _heal(keeper)
    assert register.facts == [None, _facts(1)]


async def test_writes_that_push_a_copy_past_the_bound_drop_it_cleanly() -> None:
    """A body kept again with its topic writes grows its copy; past ``max_bytes`` the copy goes
    (counted), as any copy over the bound does."""
    outcomes: dict[str, int] = {}
    keeper = RegistrationKeeper(
        Recorder(), max_bytes=1 << 20, count=lambda o, n: outcomes.__setitem__(o, outcomes.get(o, 0) + n)
    )
    request = _batch([f"T{i}" for i in range(200)], 5)
    keeper.keep("w#1", request, 1_000, lambda reg: None, lambda: True, _facts(1))
    keeper.max_bytes = keeper.bytes  # the copy just fits
    writes = [TopicWrite(f"T{i}", f'{{"perm":{i}}}', 0) for i in range(200)]  # 200 shapes: no zlib win
    keeper.keep(
        "w#1",
        request,
        2_000,
        lambda reg: None,
        lambda: True,
        _facts(1),
        WrittenTopics("b", TopicWrites.of(writes), {}),
    )
    assert (len(keeper), keeper.bytes, outcomes) == (0, 0, {"dropped": 1})


async def test_a_kept_body_is_inflated_only_when_the_replay_reads_it() -> None:
    """A replay that sends kept writes, or a slave's, needs only the body's hash: the kept bytes
    stay compressed. One that decodes reads the very bytes the broker sent."""
    hashes: list[str] = []

    class HashOnly(Recorder):
        async def __call__(
            self, request: RegisterBrokerRequest, facts: BodyFacts | None = None, kept: bytes | None = None
        ) -> tuple[RegisterBrokerResult | None, Registration | None]:
            assert request.body is not None
            hashes.append(request.body.hash)
            return RegisterBrokerResult(), Registration("C", ADDR, "b", 0, 101)

    sent = [_batch(["A", "B"], 5), _batch(["C"], 5, compressed=True)]
    keeper = RegistrationKeeper(HashOnly(), max_bytes=1 << 20)
    for request in sent:
        keeper.keep("w#1", request, 1_000, lambda reg: None, lambda: True)
    await _heal(keeper)
    assert hashes == [r.body.hash for r in sent if r.body] and keeper.bodies_inflated == 0

    register = Recorder()
    keeper = RegistrationKeeper(register, max_bytes=1 << 20)
    for request in sent:
        keeper.keep("w#1", request, 1_000, lambda reg: None, lambda: True)
    await _heal(keeper)
    assert [body for body, _ in register.calls] == [r.body.data for r in sent if r.body]
    assert keeper.bodies_inflated == 2
