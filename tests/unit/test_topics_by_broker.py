"""The route cache's index of which cached topics show a broker name, grouped by the names a
route shows."""

from __future__ import annotations

from namesrv.registry.topics_by_broker import TopicsByBroker


def test_a_broker_names_every_topic_of_every_group_that_shows_it() -> None:
    index = TopicsByBroker()
    wide = {f"broker-{n}" for n in range(100)}
    for n in range(1000):
        index.add(f"T{n}", wide)  # one group: the RIP-29 shape, every topic on every name
    index.add("solo", {"broker-0", "other"})
    assert len(index._topics) == 2  # one set of topics per group, not one per name
    assert sorted(index.topics_of("broker-7")) == sorted(f"T{n}" for n in range(1000))
    assert sorted(index.topics_of("broker-0")) == sorted([*(f"T{n}" for n in range(1000)), "solo"])
    assert index.topics_of("other") == ["solo"]
    assert index.topics_of("unknown") == []
    assert len(index) == 101


def test_the_last_topic_of_a_group_takes_its_names_with_it() -> None:
    index = TopicsByBroker()
    index.add("A", {"b1", "b2"})
    index.add("B", {"b1", "b2"})
    index.add("C", {"b2", "b3"})
    index.discard("A", {"b1", "b2"})
    assert sorted(index.topics_of("b1")) == ["B"]
    index.discard("B", {"b1", "b2"})
    assert index.topics_of("b1") == []
    assert sorted(index.topics_of("b2")) == ["C"]
    assert len(index) == 2  # b2 and b3: b1 is gone with its only group
    index.discard("C", {"b2", "b3"})
    index.discard("C", {"b2", "b3"})  # twice, or never added: nothing happens
    index.discard("Z", {"x"})
    assert len(index) == 0 and index._topics == {}


def test_topics_of_is_a_copy_the_caller_may_discard_from() -> None:
    index = TopicsByBroker()
    for topic in ("A", "B", "C"):
        index.add(topic, {"b1"})
    for topic in index.topics_of("b1"):
        index.discard(topic, {"b1"})
    assert index.topics_of("b1") == [] and len(index) == 0
