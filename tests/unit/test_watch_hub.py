"""The watch hub's fan-out and bounds, driven with change-log entries as the feed hands them."""

from __future__ import annotations

from namesrv.registry.watch import WatchEvent, WatchHub

ENTRY = {"kind": "topicRegister", "topic": "T1", "upserted": "[]"}


async def test_slow_consumer_is_dropped_with_the_reason() -> None:
    position = ["5-0"]
    hub = WatchHub(lambda: position[0], max_watchers=10, queue_max=2)
    slow = hub.watch(["T1"], [], None)
    other = hub.watch(["T2"], [], None)
    for n in range(1, 4):
        position[0] = f"5-{n}"
        await hub.on_event("topicRegister", ENTRY)
    assert slow.dropped == "slow consumer: more than 2 events undelivered"
    assert slow.closed.is_set()
    assert other.dropped is None and other.queue.qsize() == 0
    assert hub.watching == 1
    assert hub.dropped_slow == 1


async def test_resume_replays_after_the_id_and_resyncs_when_too_old() -> None:
    position = ["5-0"]
    hub = WatchHub(lambda: position[0], max_watchers=10, history=2)
    for n in range(1, 4):
        position[0] = f"5-{n}"
        await hub.on_event("topicRegister", ENTRY)
    resumed = hub.watch([], [], "5-2")
    assert [resumed.queue.get_nowait().id for _ in range(resumed.queue.qsize())] == ["5-3"]
    # The history of 2 holds 5-2 and 5-3: resuming after 5-1 loses nothing, after 5-0 it would.
    oldest = hub.watch([], [], "5-1")
    assert [oldest.queue.get_nowait().id for _ in range(oldest.queue.qsize())] == ["5-2", "5-3"]
    too_old = hub.watch([], [], "5-0")
    assert too_old.queue.qsize() == 1
    assert too_old.queue.get_nowait().as_json() == {
        "id": "",
        "kind": "resync",
        "topics": [],
        "brokers": [],
        "clusters": [],
        "reason": "event 5-0 is too old to resume from",
    }


def _queues_entry(first: int, count: int) -> dict[str, str]:
    """A registerQueues entry naming ``count`` topics, as one chunk of a registration writes it."""
    pairs = ",".join(f'["T{n}",0]' for n in range(first, first + count))
    return {"kind": "registerQueues", "brokerName": "b", "upserted": f"[{pairs}]", "queueDatas": "[{}]"}


async def test_the_history_holds_at_most_its_topic_budget() -> None:
    """Ten events of 1,000 topics against a budget of 2,500: the newest two stay (2,000 topics),
    the third would make 3,000; resuming after a forgotten one resyncs, after a kept one replays."""
    position = ["7-0"]
    hub = WatchHub(lambda: position[0], max_watchers=10, history=100, history_topics=2500)
    for n in range(1, 11):
        position[0] = f"7-{n}"
        await hub.on_event("registerQueues", _queues_entry(n * 1000, 1000))
    assert [(e.id, e.topics[0]) for e in _resumed(hub, "7-8")] == [("7-9", "T9000"), ("7-10", "T10000")]
    assert [e.kind for e in _resumed(hub, "7-7")] == ["resync"]
    # one event over the whole budget is kept all the same: the newest is always resumable
    position[0] = "7-11"
    await hub.on_event("registerQueues", _queues_entry(0, 3000))
    assert [e.id for e in _resumed(hub, "7-10")] == ["7-11"]
    assert [e.kind for e in _resumed(hub, "7-9")] == ["resync"]


def _resumed(hub: WatchHub, last_event_id: str) -> list[WatchEvent]:
    """What a watcher of everything that resumes after ``last_event_id`` is sent first."""
    watcher = hub.watch([], [], last_event_id)
    return [watcher.queue.get_nowait() for _ in range(watcher.queue.qsize())]


async def test_a_consumer_too_slow_for_the_topics_it_was_sent_is_dropped() -> None:
    """Bounded by topic names as well as events: three events of 1,000 topics fit a budget of
    2,500 only if the watcher reads one meanwhile."""
    position = ["8-0"]
    hub = WatchHub(lambda: position[0], max_watchers=10, queue_max=100, queue_topics=2500)
    slow, reading = hub.watch([], [], None), hub.watch([], [], None)
    for n in range(1, 4):
        position[0] = f"8-{n}"
        await hub.on_event("registerQueues", _queues_entry(n * 1000, 1000))
        if n == 2:
            reading.queue.get_nowait()
    assert slow.dropped == "slow consumer: more than 2500 topic names undelivered"
    assert reading.dropped is None and reading.queue.qsize() == 2 and reading.queue.topics == 2000
    assert hub.watching == 1 and hub.dropped_slow == 1
    # one event bigger than the whole budget still reaches a watcher that has read everything
    position[0] = "8-4"
    [reading.queue.get_nowait() for _ in range(reading.queue.qsize())]
    await hub.on_event("registerQueues", _queues_entry(0, 3000))
    assert reading.queue.qsize() == 1 and reading.queue.topics == 3000 and reading.dropped is None
