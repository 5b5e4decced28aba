"""Run by the interop test in its own process (the C++ library logs and may abort): look up the
route of a topic from the NameServer and send one message with rocketmq 0.4.4 (librocketmq).
With an access key and secret key as third and fourth arguments, it signs every request (ACL)."""

from __future__ import annotations

import json
import sys
import time

from rocketmq.client import Message, Producer
from rocketmq.exceptions import ProducerSendSyncFailed

# librocketmq gives a route lookup about 3 s, connection included, and then says only "No route
# info of this topic": on a machine busy with the rest of the suite (and a CPU hog) that can run
# out. A real producer sends again; so does this one. A refused signature fails every attempt, and
# the tests check the worker's ACL decisions besides.
ATTEMPTS = 3


def main(namesrv: str, topic: str, access_key: str = "", secret_key: str = "") -> int:
    producer = Producer("PG_INTEROP_CPP")
    producer.set_namesrv_addr(namesrv)
    if access_key:  # sign every request, as RocketMQ's ACL clients do
        producer.set_session_credentials(access_key, secret_key, "ALIYUN")
    producer.start()
    try:
        message = Message(topic)
        message.set_keys("k1")
        message.set_tags("TagA")
        message.set_body("hello from the C++ client")
        for attempt in range(1, ATTEMPTS + 1):
            try:
                result = producer.send_sync(message)
                break
            except ProducerSendSyncFailed as exc:
                if attempt == ATTEMPTS:
                    raise
                print(f"attempt {attempt}: {exc}", file=sys.stderr)
                time.sleep(1.0)
        print(json.dumps({"status": int(result.status), "offset": result.offset}))
    finally:
        producer.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
