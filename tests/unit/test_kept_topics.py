"""The topic writes a registration sent, packed for a heal's replay: what is unpacked is exactly
what was sent, in order, whatever the names and however many distinct queue writes."""

from __future__ import annotations

from namesrv.registry.kept_topics import WrittenTopics, pack_written, unpack_written
from namesrv.store.registration_args import TopicWrite, TopicWrites

QUEUE = '{"brokerName":"b","perm":6,"readQueueNums":8,"topicSysFlag":0,"writeQueueNums":8}'
ORDER = '{"brokerName":"b","perm":6,"readQueueNums":1,"topicSysFlag":1,"writeQueueNums":1}'


def test_writes_and_mappings_come_back_as_they_were_sent() -> None:
    writes = [
        TopicWrite("%RETRY%group-1", QUEUE, 0),
        TopicWrite("Ordered", ORDER, 1),
        TopicWrite("T-1", QUEUE, 0),
        TopicWrite('Tópico "quoted" / slashed', QUEUE, 0),
        TopicWrite("T-2", ORDER, 1),
    ]
    mappings = {"Ordered": '{"bname":"b","epoch":3,"topic":"Ordered","totalQueues":8}'}
    packed = pack_written(WrittenTopics("b", TopicWrites.of(writes), mappings))
    assert packed is not None
    back = unpack_written(packed)
    assert list(back.writes) == writes
    assert all(type(w) is TopicWrite for w in back.writes)
    assert back.writes[1].sys_flag == 1 and back.writes[1].queue_data_json == ORDER
    assert dict(back.mappings) == mappings
    assert back.broker_name == "b"


def test_a_broker_with_no_topic_and_one_with_one() -> None:
    for writes in ([], [TopicWrite("Only", QUEUE, 0)]):
        packed = pack_written(WrittenTopics("b", TopicWrites.of(writes), {}))
        assert packed is not None
        back = unpack_written(packed)
        assert list(back.writes) == writes and dict(back.mappings) == {}


def test_more_distinct_queue_writes_than_a_short_index_holds() -> None:
    writes = [TopicWrite(f"T{i:06d}", QUEUE.replace('"perm":6', f'"perm":{i}'), 0) for i in range(70_000)]
    packed = pack_written(WrittenTopics("b", TopicWrites.of(writes), {}))
    assert packed is not None
    assert list(unpack_written(packed).writes) == writes


def test_ten_thousand_alike_topics_pack_small() -> None:
    writes = [TopicWrite(f"rip29-topic-{i:05d}", QUEUE, 0) for i in range(10_000)]
    packed = pack_written(WrittenTopics("b", TopicWrites.of(writes), {}))
    assert packed is not None
    assert len(packed) < 40_000  # the names are most of it: 10,000 x 17 bytes before zlib
    assert list(unpack_written(packed).writes) == writes


def test_a_name_with_a_newline_is_not_packed() -> None:
    # no decoder accepts one (names are printable); the replay then decodes the body instead
    assert pack_written(WrittenTopics("b", TopicWrites(["A\nB", "C"], [QUEUE, QUEUE], [0, 0]), {})) is None
