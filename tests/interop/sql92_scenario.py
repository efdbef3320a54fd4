"""SQL92 pulls through RemoteBroker against the real 4.9.8 broker, run INSIDE the fixture's namespace.

``test_sql92_real.py`` runs ``ip netns exec $RMQ_NETNS python -m tests.interop.sql92_scenario '{json}'``
with a topic, messages (tags + user properties + UNIQ_KEY) and expressions. This process sends the
messages, waits until the consume queue shows all of them, then per expression pulls the queue from 0
with ``expression_type="SQL92"`` through the adapter (CHECK_CLIENT_CONFIG first, then PULL_MESSAGE) and,
for an expression the check refuses, also sends the raw PULL_MESSAGE (no check) to record what 4.9.8
serves then. It prints one JSON object: per expression ``{"status", "offsets", "next"}`` or
``{"code", "remark"}`` (+ ``"raw"``). Observation only; the judging is in the test.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from typing import Any

from rmqspec.model.clock import WallClock
from rmqspec.model.message import Message, MessageQueue
from rmqspec.model.results import BrokerError
from rmqspec.remoting import client_ops as ops
from rmqspec.remoting.adapter import RemoteBroker

NAMESRV = "127.0.0.1:9876"
GROUP = "SQL92_G"


def run(args: dict[str, Any]) -> dict[str, Any]:
    b = RemoteBroker(NAMESRV, WallClock())
    try:
        topic = args["topic"]
        b.create_topic(topic, 1)
        b.create_group(GROUP)
        mq = MessageQueue(topic, 0)
        for m in args["messages"]:
            b.send(Message(topic, b"m", tags=m["tags"], properties=m["properties"], uniq_key=m["uniq_key"]), 0)
        n = len(args["messages"])
        deadline = time.monotonic() + 10
        while len(b.pull(GROUP, mq, 0, 32).messages) < n and time.monotonic() < deadline:
            time.sleep(0.02)
        out: dict[str, Any] = {"results": []}
        for expr in args["expressions"]:
            try:
                res = b.pull(GROUP, mq, 0, 32, expr, "SQL92")
                out["results"].append({"status": res.status.name, "next": res.next_begin_offset,
                                       "offsets": [m.queue_offset for m in res.messages]})
            except BrokerError as exc:
                out["results"].append({"code": exc.code.name, "remark": exc.remark,
                                       "raw": _raw_pull(b, mq, expr) if expr else None})
        return out
    finally:
        b.close()


def _raw_pull(b: RemoteBroker, mq: MessageQueue, expr: str) -> list[int] | dict[str, str]:
    """PULL_MESSAGE with the expression and without CHECK_CLIENT_CONFIG: the queue offsets served, or the refusal
    (4.9.8 serves every message of an expression that does not compile; another broker may refuse it)."""
    try:
        raw = ops.parse_pull(b._invoke(ops.pull_request(GROUP, mq, 0, 32, expr, "SQL92")))
    except BrokerError as exc:
        return {"code": exc.code.name}
    return [m.queue_offset for m in raw.messages]


def main(argv: list[str]) -> int:
    try:
        obs = run(json.loads(argv[0]))
    except Exception:
        obs = {"crashed": traceback.format_exc()}
    sys.stdout.write(json.dumps(obs) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
