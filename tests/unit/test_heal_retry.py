"""A heal's replay that fails while Redis is not yet answering steadily is tried again (a worker
whose first commands after a restart hit dead pooled connections must still heal its brokers);
a copy whose connection closed meanwhile is not."""

from __future__ import annotations

import asyncio

from namesrv.domain.errors import StoreUnavailable
from namesrv.domain.model import RawBody, RegisterBrokerRequest, RegisterBrokerResult
from namesrv.registry.heal import RegistrationKeeper
from namesrv.registry.registration import Registration
from namesrv.store.registration_args import BodyFacts


def _request(addr: str) -> RegisterBrokerRequest:
    return RegisterBrokerRequest(
        clusterName="C",
        brokerAddr=addr,
        brokerName="b",
        brokerId=0,
        haServerAddr="",
        wrapper=None,
        body=RawBody(b'{"topicConfigTable":{}}', 479, False),
    )


class FlakyRegister:
    """Fails the first ``failures`` calls of each broker, as Redis just back would."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls: dict[str, int] = {}
        self.replay_of: list[int | None] = []

    async def __call__(
        self, request: RegisterBrokerRequest, facts: BodyFacts | None = None, kept: bytes | None = None
    ) -> tuple[RegisterBrokerResult | None, Registration | None]:
        n = self.calls.get(request.brokerAddr, 0) + 1
        self.calls[request.brokerAddr] = n
        self.replay_of.append(request.replay_of)
        if n <= self.failures:
            raise StoreUnavailable("Redis unavailable: Connection reset by peer")
        return RegisterBrokerResult(), Registration("C", request.brokerAddr, "b", 0, 7)


async def test_a_failed_replay_is_tried_again_until_it_lands() -> None:
    register = FlakyRegister(failures=2)
    outcomes: dict[str, int] = {}
    keeper = RegistrationKeeper(
        register,
        max_bytes=1 << 20,
        count=lambda o, n: outcomes.__setitem__(o, outcomes.get(o, 0) + n),
    )
    epochs: list[int] = []
    keeper.keep("w#1", _request("10.0.0.1:10911"), 1_000, lambda reg: epochs.append(reg.epoch), lambda: True)
    await keeper.on_reset("Redis holds a new data set")
    assert keeper._heal is not None
    await asyncio.wait_for(keeper._heal, 30)
    assert register.calls == {"10.0.0.1:10911": 3}
    assert register.replay_of == [1_000, 1_000, 1_000]  # every try names the time of what it copies
    assert outcomes == {"replayed": 1}
    assert epochs == [7]
    assert keeper.last_heal["retried"] == 2.0


async def test_a_copy_whose_connection_closed_is_not_tried_again() -> None:
    register = FlakyRegister(failures=100)
    keeper = RegistrationKeeper(register, max_bytes=1 << 20)
    keeper.keep("w#1", _request("10.0.0.1:10911"), 1_000, lambda reg: None, lambda: True)
    await keeper.on_reset("Redis holds a new data set")
    await asyncio.sleep(0.05)  # the first try failed, the next waits
    keeper.forget_holder("w#1")  # the broker's connection closed
    assert keeper._heal is not None
    await asyncio.wait_for(keeper._heal, 30)
    assert register.calls["10.0.0.1:10911"] <= 2
    assert keeper.last_heal["failed"] == 1.0
    assert keeper.last_heal["replayed"] == 0.0
