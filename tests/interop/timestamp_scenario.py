"""The sending half of ``tests/interop/test_consume_timestamp_real.py``, run inside the real broker's namespace.

``python -m tests.interop.timestamp_scenario TOPIC`` creates TOPIC with two queues on the broker at
127.0.0.1:9876, sends 12 messages to alternating queues 250 ms apart, reads each store time back and stores
the same messages in a ``ModelBroker`` at those times (``tests/wire_programs.py``'s ``_send_timed`` way); then
it picks ``consumeTimestamp`` — the second after the fifth message's store time, formatted as the 4.9.8 client
formats it — and prints one JSON line: the timestamp, every store time, and per queue the offsets the model
says a broadcasting CONSUME_FROM_TIMESTAMP consumer consumes (from ``search_offset`` to the end).
"""

from __future__ import annotations

import json
import sys
import time

from rmqspec.model import ManualClock, ModelBroker
from rmqspec.model.clock import WallClock
from rmqspec.model.message import Message, MessageQueue
from rmqspec.model.timesearch import format_consume_timestamp, parse_consume_timestamp
from rmqspec.remoting import client_ops as ops
from rmqspec.remoting.adapter import RemoteBroker
from rmqspec.remoting.client import RemotingClient
from tests.wire_programs import TIMEOUT_MS, pull_request


def main(topic: str) -> int:
    remote = RemoteBroker("127.0.0.1:9876", WallClock())
    conn = RemotingClient.connect(remote.broker_addr, timeout_ms=TIMEOUT_MS)
    model = ModelBroker(ManualClock(0))
    try:
        for b in (model, remote):
            b.create_topic(topic, 2)
        stamps = []
        for i in range(12):
            time.sleep(0.25)
            msg = Message(topic=topic, body=b"ts%d" % i, uniq_key=f"{topic}-{i}")
            theirs = remote.send(msg, i % 2)
            stored = None
            for _ in range(200):
                res = ops.parse_pull(conn.invoke(pull_request("TS_READER", MessageQueue(topic, i % 2),
                                                              theirs.queue_offset, 1, "*"), TIMEOUT_MS))
                if res.messages:
                    stored = res.messages[0].store_ts
                    break
                time.sleep(0.01)
            assert stored is not None, f"message {i} never dispatched"
            model.clock.set(stored)
            ours = model.send(msg, i % 2)
            assert (ours.queue_offset, ours.commitlog_offset) == (theirs.queue_offset, theirs.commitlog_offset)
            stamps.append(stored)
        text = format_consume_timestamp((stamps[4] // 1000 + 1) * 1000)
        at = parse_consume_timestamp(text)
        expect = {str(q): list(range(model.search_offset(topic, q, at), model.store.max_offset(topic, q)))
                  for q in (0, 1)}
    finally:
        conn.close()
        remote.close()
    sys.stdout.write(json.dumps({"consume_timestamp": text, "stamps": stamps, "expect": expect}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
