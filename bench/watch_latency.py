"""Watch latency: from a broker registration written through one worker to the SSE event about
it on another worker's ``/v1/watch`` stream (the change feed's poll plus the fan-out)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp

from bench.fleet import Bench
from bench.stats import percentile_ms
from namesrv.client.watch import sse_events

SAMPLES = 100
TOPIC = "BenchWatch"


def _body(counter: int) -> dict[str, Any]:
    # two topics: a first registration with exactly one topic is refused (RocketMQ's rule R7)
    table = {
        name: {"topicName": name, "readQueueNums": queues, "writeQueueNums": queues, "perm": 6}
        for name, queues in ((TOPIC, counter % 16 + 1), (f"{TOPIC}-fixed", 1))
    }
    return {
        "clusterName": "BenchWatch",
        "brokerName": "watch-broker",
        "brokerAddr": "127.0.10.1:10911",
        "brokerId": 0,
        "haServerAddr": "127.0.10.1:10912",
        "topicConfigSerializeWrapper": {
            "dataVersion": {"counter": counter, "stateVersion": 0, "timestamp": 1700000000000},
            "topicConfigTable": table,
        },
        "filterServerList": [],
    }


async def run_watch(b: Bench) -> dict[str, Any]:
    writer, reader = b.workers[0].url, b.workers[-1].url
    lags: list[float] = []
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{reader}/v1/watch", params={"topics": TOPIC}, timeout=None) as stream,
    ):
        events = sse_events(stream)
        for counter in range(1, SAMPLES + 1):
            started = time.perf_counter()
            async with session.post(f"{writer}/v1/brokers/register", json=_body(counter)) as resp:
                resp.raise_for_status()
            async for event in events:
                if event.event == "registerQueues" and TOPIC in event.json()["topics"]:
                    lags.append(time.perf_counter() - started)
                    break
            await asyncio.sleep(0.01)
    lags.sort()
    return {
        "samples": len(lags),
        "p50_ms": round(percentile_ms(lags, 50), 1),
        "p99_ms": round(percentile_ms(lags, 99), 1),
        "max_ms": round(lags[-1] * 1000, 1) if lags else None,
        "workers": len(b.workers),
    }
