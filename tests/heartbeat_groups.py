"""One consumer group, two clients heartbeating different subscriptions: the same steps on any ``Broker``.

Run in-process on ``ModelBroker`` / ``MmapBroker`` (tests/model/test_subscriptions.py), on a
``RemoteBroker`` against ``rmqspec serve`` (tests/remoting/test_server_subscriptions.py) and against real
RocketMQ 4.9.8 (tests/interop/test_heartbeat_real.py runs ``python -m tests.heartbeat_groups '{json}'``
inside the fixture's namespace). ``run`` returns the observations; the tests compare them between
brokers and check the 4.9.8 facts on them.

A case names two clients, each with (expression, expression_type, sub_version), and the order they
heartbeat in. Steps (topic with 4 queues, 16 messages: queue q holds TagA, TagB, TagC, no tag):
1. both clients heartbeat (in the case's order), then the client that heartbeated first heartbeats
   again (a repeat heartbeat of an older subscription changes nothing);
2. each client pulls its queues (``AllocateMessageQueueAveragely``: client 1 → 0, 1; client 2 → 2, 3)
   from 0 WITHOUT the subscription flag, with its own subVersion, and "consumes" what the Java client
   keeps: a TAG client re-checks the tag strings (``PullAPIWrapper.processPullResult``), a SQL92 client
   keeps everything the broker returned;
3. refusals: a pull whose subVersion is newer than the broker's (SUBSCRIPTION_NOT_LATEST), a topic the
   group does not subscribe (SUBSCRIPTION_NOT_EXIST), a group nobody heartbeated (SUBSCRIPTION_NOT_EXIST);
4. the winner unregisters, the other re-heartbeats and pulls queue 0 again (the group keeps the
   winner's subscription: only a greater subVersion replaces it); then it unregisters too and pulls
   (the group info is gone).
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
import traceback
from functools import partial
from typing import Any

from rmqspec.model.message import Message, MessageQueue
from rmqspec.model.pullfilter import subscription_matches
from rmqspec.model.results import BrokerError

QUEUES = 4
TAGS = ("TagA", "TagB", "TagC", None)
REGIONS = ("HZ", "SH", "BJ")
MESSAGES = 16

Sub = tuple[str, str, int]  # expression, expression_type, sub_version

CASES: dict[str, dict[str, Any]] = {
    # both TAG: the later-built subscription (version 2000) wins, whatever the heartbeat order
    "tag": {"c1": ("TagA", "TAG", 1000), "c2": ("TagB || TagC", "TAG", 2000), "order": ["c2", "c1"]},
    # TAG wins over SQL92: the SQL92 client gets TagA messages of any region
    "tag-vs-sql": {"c1": ("TagA", "TAG", 2000), "c2": ("region = 'HZ'", "SQL92", 1000), "order": ["c1", "c2"]},
    # both SQL92: the broker evaluates the winner's expression on both clients' queues
    "sql": {"c1": ("a BETWEEN 3 AND 9", "SQL92", 1000), "c2": ("region IN ('HZ', 'SH')", "SQL92", 2000),
            "order": ["c1", "c2"]},
    # SQL92 wins over TAG: the TAG client re-checks its tags on what the SQL92 filter let through
    "sql-vs-tag": {"c1": ("TAGS = 'TagB' OR region = 'BJ'", "SQL92", 2000), "c2": ("TagA || TagB", "TAG", 1000),
                   "order": ["c2", "c1"]},
    # the winner's SQL92 does not compile: no filter data, every pull of the topic is refused
    "bad-sql": {"c1": ("*", "TAG", 1000), "c2": ("a >", "SQL92", 2000), "order": ["c1", "c2"]},
}


def message(topic: str, i: int) -> tuple[Message, int]:
    q = i % QUEUES
    tags = TAGS[(i // QUEUES) % len(TAGS)]
    props = {"a": str(i), "region": REGIONS[i % len(REGIONS)]}
    uniq = hashlib.md5(f"{topic}/{i}".encode()).hexdigest().upper()  # stable per (topic, i)
    return Message(topic, b"hb-%d" % i, tags=tags, properties=props, uniq_key=uniq), q


def queues_of(client: str) -> tuple[int, ...]:
    return (0, 1) if client == "c1" else (2, 3)


def keeps(sub: Sub, tags: str | None, props: dict[str, str]) -> bool:
    """What the Java client keeps of a pulled message: tag strings re-checked for TAG, all for SQL92."""
    expression, kind, _ = sub
    if kind == "TAG":
        return bool(subscription_matches(expression, kind, tags, props))
    return True


def _pull(broker: Any, group: str, mq: MessageQueue, sub: Sub) -> dict[str, Any]:
    try:
        res = broker.pull(group, mq, 0, 32, None, sub[1], sub[2])
    except BrokerError as exc:
        return {"code": exc.code.name, "remark": exc.remark}
    return {"status": res.status.name, "next": res.next_begin_offset,
            "offsets": [m.queue_offset for m in res.messages],
            "consumed": [m.queue_offset for m in res.messages if keeps(sub, m.tags, dict(m.properties))]}


def run(broker: Any, name: str, topic: str, group: str, settle: Any = None) -> list[dict[str, Any]]:
    """The case's steps on ``broker`` (topic and group must be fresh); ``settle(broker, topic)`` waits
    until every sent message is pullable (a real broker dispatches in the background)."""
    case = CASES[name]
    subs: dict[str, Sub] = {c: tuple(case[c]) for c in ("c1", "c2")}  # type: ignore[misc]
    cid = {c: f"127.0.0.1@{group}-{c}" for c in subs}
    broker.create_topic(topic, QUEUES)
    broker.create_topic(topic + "_other", 1)
    for i in range(MESSAGES):
        msg, q = message(topic, i)
        broker.send(msg, q)
    if settle is not None:
        settle(broker, topic)
    out: list[dict[str, Any]] = []
    for c in [*case["order"], case["order"][0]]:
        broker.heartbeat(group, cid[c], {topic: subs[c]})
    for c in ("c1", "c2"):
        for q in queues_of(c):
            out.append({"step": "pull", "client": c, "queue": q, **_pull(broker, group, MessageQueue(topic, q),
                                                                           subs[c])})
    winner = max(subs, key=lambda c: subs[c][2])
    other = "c1" if winner == "c2" else "c2"
    newer = (subs[winner][0], subs[winner][1], subs[winner][2] + 1)
    out.append({"step": "newer-version", **_pull(broker, group, MessageQueue(topic, 0), newer)})
    out.append({"step": "other-topic", **_pull(broker, group, MessageQueue(topic + "_other", 0), subs[winner])})
    out.append({"step": "unknown-group", **_pull(broker, group + "_nobody", MessageQueue(topic, 0), subs[winner])})
    broker.unregister_consumer(group, cid[winner])
    broker.heartbeat(group, cid[other], {topic: subs[other]})
    out.append({"step": "winner-left", **_pull(broker, group, MessageQueue(topic, 0), subs[other])})
    broker.unregister_consumer(group, cid[other])
    out.append({"step": "all-left", **_pull(broker, group, MessageQueue(topic, 0), subs[other])})
    return out


STALE_FILTER = "stale-filter"


def run_stale_filter(broker: Any, topic: str, group: str, settle: Any = None) -> list[dict[str, Any]]:
    """The two broker tables apart: c1's SQL92 (version 3000) leaves the group's table when c1 heartbeats
    without the topic (its filter data is only marked dead); c2 then adds the topic with another SQL92 of
    an older version (1000): the table holds c2's expression, the filter data keeps c1's, and a pull
    evaluates c1's (ConsumerFilterManager ignores a version ≤ the one it has)."""
    broker.create_topic(topic, QUEUES)
    broker.create_topic(topic + "_other", 1)
    for i in range(MESSAGES):
        msg, q = message(topic, i)
        broker.send(msg, q)
    if settle is not None:
        settle(broker, topic)
    first: Sub = ("region = 'BJ'", "SQL92", 3000)
    second: Sub = ("region = 'HZ'", "SQL92", 1000)
    c1, c2 = f"127.0.0.1@{group}-c1", f"127.0.0.1@{group}-c2"
    out: list[dict[str, Any]] = []
    broker.heartbeat(group, c1, {topic: first})
    out.append({"step": "first", **_pull(broker, group, MessageQueue(topic, 0), first)})
    broker.heartbeat(group, c1, {topic + "_other": ("*", "TAG", 3000)})
    out.append({"step": "topic-left", **_pull(broker, group, MessageQueue(topic, 0), first)})
    broker.heartbeat(group, c2, {topic: second})
    out.append({"step": "older-added", **_pull(broker, group, MessageQueue(topic, 0), second)})
    out.append({"step": "newer-than-table", **_pull(broker, group, MessageQueue(topic, 0), first)})
    return out


def wait_dispatched(broker: Any, topic: str, timeout_s: float = 10.0) -> None:
    """Until every queue of ``topic`` shows its messages to a subscription-carrying pull."""
    want = {q: sum(1 for i in range(MESSAGES) if i % QUEUES == q) for q in range(QUEUES)}
    deadline = time.monotonic() + timeout_s
    for q, n in want.items():
        while len(broker.pull("HB_SETTLE", MessageQueue(topic, q), 0, 32).messages) < n:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}/{q}: fewer than {n} messages pullable after {timeout_s} s")
            time.sleep(0.02)


def main(argv: list[str]) -> int:
    """Inside the fixture's namespace: every case against the real broker, one JSON line."""
    from rmqspec.model.clock import WallClock
    from rmqspec.remoting.adapter import RemoteBroker

    args = json.loads(argv[0])
    out: dict[str, Any] = {}
    broker = RemoteBroker("127.0.0.1:9876", WallClock())
    try:
        for name in args["cases"]:
            scenario = run_stale_filter if name == STALE_FILTER else partial(run, name=name)
            out[name] = scenario(broker, topic=f"{args['prefix']}_{name.replace('-', '_')}",
                                 group=f"{args['prefix']}_G_{name.replace('-', '_')}", settle=wait_dispatched)
    except Exception:
        out = {"crashed": traceback.format_exc()}
    finally:
        broker.close()
    sys.stdout.write(json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
