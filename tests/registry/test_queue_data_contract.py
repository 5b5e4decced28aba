"""The QueueData JSON contract between the workers and ``lua/includes/common.lua``.

The Lua scripts change a queue's perm by editing the stored JSON text (``clearWriteBit`` and
``setPerm`` match ``,"perm":<int>,``) instead of decoding and re-encoding it: cjson would
reorder keys and reformat numbers. That is correct only while every QueueData the workers
write has ``perm`` between the fixed neighbours ``brokerName`` and ``readQueueNums``, and no
other text can look like that field. These tests pin both sides, so a change of the key order
in Python fails here rather than silently leaving perms unchanged in Redis.
"""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest

from namesrv.domain.model import QueueData, TopicConfig
from namesrv.protocol import render
from namesrv.protocol.fastjson import quote
from namesrv.registry.service import RegistryService
from tests.builders import register
from tests.registry.helpers import perms_of

LUA = Path(__file__).resolve().parents[2] / "lua"
KEY_ORDER = ["brokerName", "perm", "readQueueNums", "topicSysFlag", "writeQueueNums"]
# What common.lua relies on: perm right after brokerName, right before readQueueNums.
PERM_FIELD = re.compile(r'^\{"brokerName":"(?:[^"\\]|\\.)*","perm":-?\d+,"readQueueNums":')
NAMES = ["broker-a", 'x,"perm":7,"y', "名字", "a\\b"]


@pytest.mark.parametrize("name", NAMES)
def test_workers_write_perm_between_fixed_neighbours(name: str) -> None:
    texts = [
        render.queue_data_json(QueueData(name, perm=7, readQueueNums=8, topicSysFlag=1, writeQueueNums=4)),
        TopicConfig("T", readQueueNums=8, writeQueueNums=4, perm=7, topicSysFlag=1).queue_data_json(
            quote(name)
        ),
    ]
    for text in texts:
        assert list(orjson.loads(text)) == KEY_ORDER
        assert PERM_FIELD.match(text), text
        assert orjson.loads(text) == {
            "brokerName": name,
            "perm": 7,
            "readQueueNums": 8,
            "topicSysFlag": 1,
            "writeQueueNums": 4,
        }


def test_only_common_lua_edits_json_by_pattern() -> None:
    """Another script matching JSON text would need the same contract: keep it in one place."""
    editing = sorted(
        str(p.relative_to(LUA)) for p in LUA.rglob("*.lua") if '"perm":' in p.read_text(encoding="utf-8")
    )
    assert editing == ["includes/common.lua"]


@pytest.mark.parametrize("name", NAMES)
async def test_lua_perm_edits_change_only_the_perm(service: RegistryService, name: str) -> None:
    """A broker name that contains the field's own text is not mistaken for it."""
    await service.register_broker(register(name=name, topics={"T": (8, 4, 7, 1), "Other": (8, 8, 6, 0)}))
    stored = {"brokerName": name, "perm": 7, "readQueueNums": 8, "topicSysFlag": 1, "writeQueueNums": 4}
    assert await service.change_write_perm(name, wipe=True) == 2
    assert await perms_of(service, "T") == {name: 5}
    raw = await service.store.redis.hget(service.store.k.topic("T"), name)
    assert orjson.loads(raw) == {**stored, "perm": 5}
    assert await service.change_write_perm(name, wipe=False) == 2
    raw = await service.store.redis.hget(service.store.k.topic("T"), name)
    assert orjson.loads(raw) == {**stored, "perm": 6}
