"""The Python half of ``tests/interop/test_sql92_client_real.py``, run INSIDE the real broker's namespace.

``python -m tests.interop.sql92_client_scenario send '{json}'`` creates the topic (two queues) on the broker at
127.0.0.1:9876 and sends the messages (tags + user properties + UNIQ_KEY) to alternating queues through
``RemoteBroker``; it prints where each was stored. ``... model '{json}'`` runs rmqspec's reference push consumer
(``ConcurrentConsumer`` over ``RemoteBroker`` on the wall clock, CONSUME_FROM_FIRST_OFFSET), one group per
expression, each subscribed with ``MessageSelector.by_sql``, for ``wait_ms``, and prints per group the
``"queue:offset"`` it consumed. Observation only; the judging is in the test.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from typing import Any

from rmqspec.model.clock import WallClock
from rmqspec.model.consumer import ConsumeFromWhere, ConsumerConfig
from rmqspec.model.consumer_concurrent import ConcurrentConsumer, ConsumeConcurrentlyStatus
from rmqspec.model.directory import Directory
from rmqspec.model.message import Message
from rmqspec.model.subscription_data import MessageSelector
from rmqspec.remoting.adapter import RemoteBroker

NAMESRV = "127.0.0.1:9876"
QUEUES = 2


def send(args: dict[str, Any]) -> dict[str, Any]:
    b = RemoteBroker(NAMESRV, WallClock())
    try:
        b.create_topic(args["topic"], QUEUES)
        placed = []
        for i, m in enumerate(args["messages"]):
            res = b.send(Message(args["topic"], b"m%d" % i, tags=m["tags"], properties=m["properties"],
                                 uniq_key=m["uniq_key"]), i % QUEUES)
            placed.append(f"{i % QUEUES}:{res.queue_offset}")
        return {"placed": placed}
    finally:
        b.close()


def model(args: dict[str, Any]) -> dict[str, Any]:
    clock = WallClock()
    b = RemoteBroker(NAMESRV, clock)
    directory = Directory()
    directory.add_route(args["topic"], QUEUES)
    seen: dict[str, list[str]] = {}
    consumers = []
    try:
        for group, expression in args["groups"].items():
            directory.create_group(b, group)
            mine = seen.setdefault(group, [])

            def listener(msgs: list, ctx: Any, mine: list[str] = mine) -> ConsumeConcurrentlyStatus:
                mine.extend(f"{m.queue_id}:{m.queue_offset}" for m in msgs)
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

            c = ConcurrentConsumer(b, clock, directory, group, f"127.0.0.1@{group}", listener,
                                   config=ConsumerConfig(consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET))
            c.subscribe(args["topic"], MessageSelector.by_sql(expression))
            c.start()
            consumers.append(c)
        deadline = time.monotonic() + args["wait_ms"] / 1000
        while time.monotonic() < deadline:
            for c in consumers:
                c.step()
            time.sleep(0.01)
        for c in consumers:
            c.shutdown()
        return {group: sorted(consumed) for group, consumed in seen.items()}
    finally:
        b.close()


def main(argv: list[str]) -> int:
    try:
        out = {"send": send, "model": model}[argv[1]](json.loads(argv[2]))
    except Exception:
        out = {"crashed": traceback.format_exc()}
    sys.stdout.write(json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
