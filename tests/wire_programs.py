"""Drawn programs that hold a broker on the wire to the model, step for step: seeds E14, E15, C11, D9 and E6.

A ``Target`` is a broker reached over the wire (``rmqspec serve`` in-process, ``tests/remoting/wire_pair.py``, or
real RocketMQ 4.9.8 inside the interop fixture's namespace) beside a ``ModelBroker`` that receives the same
requests. Each program draws its steps from a Hypothesis ``data`` object, runs every step on both, and asserts
they answer alike; ``reached`` collects which outcomes a run met, so a test can require its budget to reach
them all. Topic and group names carry ``prefix``, so one real broker serves many examples (the model then lives
for the whole run, so both commitlogs stay alike).

- ``pulls_answer_as_the_model`` (E14, E15): a queue U of small tagged messages, a queue T of larger ones, an
  empty queue E; with ``Target.expire`` (``serve`` only: the clock moves 73 h, into the deleteWhen hour, and
  both brokers tick) retention deletes every commitlog file but the last. Then pulls: queue, offset up to two
  past the max, subscription, maxMsgNums, the commit flag with a commitOffset, the suspend flag (when
  ``Target.suspend``). Judged: the wire's response code is what 4.9.8's PullMessageProcessor answers for the
  model store's GetMessageStatus (``CODE_OF``, read with ``javap -c`` from the 4.9.8 broker jar's switch map),
  the remark is that status's name (``serve`` cannot tell a NO_MATCHED_MSG's cause under a tag filter, fidelity
  R6: judged only with ``Target.exact_remarks``, as for the real broker),
  the client's reading (``client_ops.parse_pull``) equals the model's ``PullResult``, and with the commit flag
  the broker stores the commitOffset whatever the answer (QUERY_CONSUMER_OFFSET equals the model's).
- ``subscriptions_as_the_model`` (C11): up to three clients of one group heartbeat a subscription of topic S
  (a tag expression with a subVersion drawn from few values, so ties and older versions come up), or one
  without S (the group drops it), or unregister; pulls without the subscription flag (a 4.9.8 push consumer's
  default) with a drawn subVersion show which subscription the broker holds: the one with the greatest
  subVersion, not the last heartbeat (``model/subscriptions.py``), or SUBSCRIPTION_NOT_EXIST /
  SUBSCRIPTION_NOT_LATEST with their remarks.
- ``lookups_answer_as_the_model`` (D9, E6): sends to a queue L of two queues (small or large bodies) with clock
  steps of 0 to 3 ms between them (equal store times; on the real broker, sleeps, and the model's clock is set
  to each message's store time read back from the broker, ``Target.learn_store_times``), then with
  ``Target.expire`` retention, then SEARCH_OFFSET_BY_TIMESTAMP for a queue of L, an empty queue E or a topic
  never created, at a unit's store time, a millisecond either side, or far before or after: the wire's answer
  (``RemoteBroker.search_offset``) is the model's, and the model's is one ``tests/timesearch_rule.py``'s
  independent statement allows; ``reached`` collects the rule's clauses.

``python -m tests.wire_programs '{json}'`` runs both against the broker at 127.0.0.1:9876 (the real broker, from
inside its namespace: ``tests/interop/test_wire_programs_real.py``) and prints one JSON line.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

import attrs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmqspec.model import ModelBroker
from rmqspec.model.message import Message, MessageQueue
from rmqspec.model.queues import GetStatus, tag_filter
from rmqspec.model.results import BrokerError, PullResult, PullStatus
from rmqspec.remoting import client_ops as ops
from rmqspec.remoting.adapter import RemoteBroker
from rmqspec.remoting.client import RemotingClient
from rmqspec.remoting.codes import PULL_FLAG_COMMIT_OFFSET, PULL_FLAG_SUBSCRIPTION, PULL_FLAG_SUSPEND
from rmqspec.remoting.command import RemotingCommand
from tests.timesearch_rule import allowed, stamps

TIMEOUT_MS = 10_000
TAGS = ("TagA", "TagB", None)
SUBSCRIPTIONS = ("*", "TagA", "TagB || TagC")
VERSIONS = (1000, 2000, 3000)
CLIENTS = ("c1", "c2", "c3")
SETTINGS: dict[str, Any] = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}

# PullMessageProcessor.processRequest's switch (4.9.8 broker jar): GetMessageStatus → response code
CODE_OF: dict[GetStatus, Callable[[int], int]] = {
    GetStatus.FOUND: lambda _offset: 0,
    GetStatus.MESSAGE_WAS_REMOVING: lambda _offset: 20,
    GetStatus.NO_MESSAGE_IN_QUEUE: lambda offset: 19 if offset == 0 else 21,
    GetStatus.NO_MATCHED_MESSAGE: lambda _offset: 20,
    GetStatus.OFFSET_FOUND_NULL: lambda _offset: 19,
    GetStatus.OFFSET_OVERFLOW_BADLY: lambda _offset: 21,
    GetStatus.OFFSET_OVERFLOW_ONE: lambda _offset: 19,
    GetStatus.OFFSET_TOO_SMALL: lambda _offset: 21,
}


@attrs.define
class Target:
    """A broker on the wire and the model beside it (see the module docstring)."""

    model: ModelBroker
    remote: RemoteBroker
    conn: RemotingClient  # raw requests the Broker protocol does not express
    expire: Callable[[], None] | None = None  # retention: files past the reserve deleted on both
    suspend: bool = True  # draw the suspend flag (serve answers a held pull at its next tick)
    many_messages: int = 45  # queue T's largest draw (it pushes U's commitlog files behind the last)
    exact_remarks: bool = False  # every remark judged (serve cannot name a NO_MATCHED_MSG's cause under a filter)
    learn_store_times: bool = False  # the model's clock is not the broker's: read each store time back (lookups)


def pull_request(group: str, mq: MessageQueue, offset: int, max_nums: int, subscription: str, *,
                 commit: int | None = None, suspend: bool = False) -> RemotingCommand:
    """PULL_MESSAGE with the subscription in the request (``PullSysFlag``: commit 1, suspend 2, subscription 4);
    ``commit`` sets the commit flag and commitOffset, ``suspend`` the suspend flag with suspendTimeoutMillis 0."""
    cmd = ops.pull_request(group, mq, offset, max_nums, subscription)
    flags = PULL_FLAG_SUBSCRIPTION | (PULL_FLAG_COMMIT_OFFSET if commit is not None else 0)
    cmd.ext_fields["sysFlag"] = str(flags | (PULL_FLAG_SUSPEND if suspend else 0))
    cmd.ext_fields["commitOffset"] = str(commit if commit is not None else 0)
    return cmd


def ask_offset(conn: RemotingClient, group: str, mq: MessageQueue) -> int:
    """QUERY_CONSUMER_OFFSET; QUERY_NOT_FOUND is −1."""
    return ops.parse_query_offset(conn.invoke(ops.query_offset_request(group, mq), TIMEOUT_MS))


def seen(res: PullResult) -> tuple[Any, ...]:
    return (res.status, res.next_begin_offset, res.min_offset, res.max_offset,
            [(m.topic, m.queue_offset, m.commitlog_offset, m.uniq_key, m.tags, m.body) for m in res.messages])


# ---------------------------------------------------------------------------------------------------------
# E14, E15


def _fill(t: Target, data: st.DataObject, prefix: str) -> None:
    """The same sends to both brokers: they must store them at the same offsets (the files roll alike)."""
    units = data.draw(st.integers(1, 24), label="U messages")  # over 10 fill U's first consume-queue file
    u_tags = data.draw(st.lists(st.sampled_from(TAGS), min_size=units, max_size=units), label="U tags")
    t_count = data.draw(st.integers(0, t.many_messages), label="T messages")
    for topic in ("U", "T", "E"):  # E stays empty
        t.model.create_topic(prefix + topic, 1)
        t.remote.create_topic(prefix + topic, 1)
    sends = [Message(topic=prefix + "U", body=b"u", tags=tag, uniq_key=f"{prefix}U{i}") for i, tag in enumerate(u_tags)]
    sends += [Message(topic=prefix + "T", body=b"x" * 200, uniq_key=f"{prefix}T{i}") for i in range(t_count)]
    for msg in sends:
        ours, theirs = t.model.send(msg, 0), t.remote.send(msg, 0)
        assert (ours.queue_offset, ours.commitlog_offset) == (theirs.queue_offset, theirs.commitlog_offset), msg


def _judge_pull(t: Target, data: st.DataObject, reached: set[str], prefix: str) -> None:
    group = prefix + "G"
    mq = MessageQueue(prefix + data.draw(st.sampled_from(("U", "T", "E")), label="topic"), 0)
    high = t.model.store.max_offset(mq.topic, 0)
    offset = data.draw(st.integers(0, high + 2), label="offset")
    sub = data.draw(st.sampled_from(SUBSCRIPTIONS), label="subscription")
    max_nums = data.draw(st.sampled_from((1, 4, 32)), label="maxMsgNums")
    commit = data.draw(st.none() | st.integers(0, high + 2), label="commitOffset")
    suspend = t.suspend and data.draw(st.booleans(), label="suspend")
    got = t.model.store.get_message(mq.topic, 0, offset, max_nums, tag_filter(sub), None).status
    ours = t.model.pull(group, mq, offset, max_nums, sub)
    if commit is not None:
        t.model.update_offset(group, mq, commit)
    resp = t.conn.invoke(pull_request(group, mq, offset, max_nums, sub, commit=commit, suspend=suspend), TIMEOUT_MS)
    what = f"{mq.topic}@{offset} {sub!r} max {max_nums}: store {got.name}"
    assert resp.code == CODE_OF[got](offset), f"{what}: answered {resp.code} {resp.remark}"
    if t.exact_remarks or not (ours.status is PullStatus.NO_MATCHED_MSG and sub != "*"):
        assert resp.remark == got.name, f"{what}: remark {resp.remark}"
    assert seen(ops.parse_pull(resp)) == seen(ours), what
    assert ask_offset(t.conn, group, mq) == t.model.query_offset(group, mq), f"{what}: after commit {commit}"
    reached.add(got.name)
    if commit is not None and got is not GetStatus.FOUND:
        reached.add("commit:not_found")
    if suspend and resp.code == 19 and commit is not None:
        reached.add("commit:held")


def pulls_answer_as_the_model(t: Target, data: st.DataObject, reached: set[str], prefix: str = "") -> None:
    _fill(t, data, prefix)
    if t.expire is not None and data.draw(st.booleans(), label="expire"):
        t.expire()
    for _ in range(data.draw(st.integers(1, 10), label="pulls")):
        _judge_pull(t, data, reached, prefix)


# ---------------------------------------------------------------------------------------------------------
# C11


def _outcome(broker: Any, group: str, mq: MessageQueue, version: int) -> tuple[Any, ...]:
    try:
        res = broker.pull(group, mq, 0, 32, None, "TAG", version)
    except BrokerError as exc:
        return (exc.code.name, exc.remark)
    return (res.status.name, res.next_begin_offset, [m.queue_offset for m in res.messages])


def subscriptions_as_the_model(t: Target, data: st.DataObject, reached: set[str], prefix: str = "") -> None:
    topic, other, group = prefix + "S", prefix + "S2", prefix + "G"
    for name in (topic, other):
        t.model.create_topic(name, 1)
        t.remote.create_topic(name, 1)
    for i in range(6):
        msg = Message(topic=topic, body=b"s%d" % i, tags=TAGS[i % len(TAGS)], uniq_key=f"{prefix}S{i}")
        t.model.send(msg, 0)
        t.remote.send(msg, 0)
    mq = MessageQueue(topic, 0)
    held: tuple[str, int] | None = None  # what the model's table should hold for S: (expression, version)
    members: set[str] = set()
    for _ in range(data.draw(st.integers(1, 10), label="steps")):
        step = data.draw(st.sampled_from(("heartbeat", "heartbeat", "drop", "unregister", "pull")), label="step")
        client = f"127.0.0.1@{prefix}{data.draw(st.sampled_from(CLIENTS), label='client')}"
        if step == "heartbeat":
            expression = data.draw(st.sampled_from(SUBSCRIPTIONS), label="expression")
            version = data.draw(st.sampled_from(VERSIONS), label="subVersion")
            subs = {topic: (expression, "TAG", version)}
            if held is not None and version <= held[1] and expression != held[0]:
                reached.add("older_kept")
            if held is not None and version > held[1]:
                reached.add("newer_replaced")
            if held is None or version > held[1]:
                held = (expression, version)
            members.add(client)
        elif step == "drop":
            subs = {other: ("*", "TAG", VERSIONS[0])}
            if held is not None:
                reached.add("topic_dropped")
            held = None
            members.add(client)
        elif step == "unregister":
            t.model.unregister_consumer(group, client)
            t.remote.unregister_consumer(group, client)
            members.discard(client)
            if not members:
                held = None
            continue
        else:
            version = data.draw(st.sampled_from((0, *VERSIONS, VERSIONS[-1] + 1)), label="pull subVersion")
            ours, theirs = _outcome(t.model, group, mq, version), _outcome(t.remote, group, mq, version)
            assert theirs == ours, f"pull with subVersion {version}: held {held}"
            reached.add(ours[0])
            continue
        t.model.heartbeat(group, client, subs)
        t.remote.heartbeat(group, client, subs)


# ---------------------------------------------------------------------------------------------------------
# D9, E6


def _stored_at(t: Target, mq: MessageQueue, offset: int) -> int:
    """The broker's store time of the message at ``offset`` (pulled back; the real broker dispatches later)."""
    for _ in range(200):
        res = ops.parse_pull(t.conn.invoke(pull_request("LOOKUP_READER", mq, offset, 1, "*"), TIMEOUT_MS))
        if res.messages:
            return res.messages[0].store_ts
        time.sleep(0.01)
    raise AssertionError(f"{mq.topic}@{offset}: never dispatched")


def _send_timed(t: Target, data: st.DataObject, msg: Message, queue_id: int) -> None:
    step = data.draw(st.sampled_from((0, 0, 1, 2, 3)), label="ms before")
    if not t.learn_store_times:
        t.model.clock.advance(step)
        ours, theirs = t.model.send(msg, queue_id), t.remote.send(msg, queue_id)
    else:
        time.sleep(step / 1000)
        theirs = t.remote.send(msg, queue_id)
        stored = _stored_at(t, MessageQueue(msg.topic, queue_id), theirs.queue_offset)
        assert stored >= t.model.clock.now(), f"the broker's store time {stored} went back"
        t.model.clock.set(stored)
        ours = t.model.send(msg, queue_id)
    assert (ours.queue_offset, ours.commitlog_offset) == (theirs.queue_offset, theirs.commitlog_offset), msg


def lookups_answer_as_the_model(t: Target, data: st.DataObject, reached: set[str], prefix: str = "") -> None:
    for topic, nums in (("L", 2), ("E", 1)):
        t.model.create_topic(prefix + topic, nums)
        t.remote.create_topic(prefix + topic, nums)
    for i in range(data.draw(st.integers(1, 24), label="sends")):
        body = b"l" * data.draw(st.sampled_from((1, 600)), label="body")
        msg = Message(topic=prefix + "L", body=body, uniq_key=f"{prefix}L{i}")
        _send_timed(t, data, msg, data.draw(st.integers(0, 1), label="queue"))
    if t.expire is not None and data.draw(st.booleans(), label="expire"):
        t.expire()
    for _ in range(data.draw(st.integers(1, 10), label="lookups")):
        topic, q = data.draw(st.sampled_from((("L", 0), ("L", 1), ("E", 0), ("N", 0))), label="queue")
        times = stamps(t.model.store, prefix + topic, q)
        if times and data.draw(st.booleans(), label="at a unit"):
            timestamp = data.draw(st.sampled_from(times), label="unit time") + data.draw(st.integers(-1, 1))
        else:
            timestamp = data.draw(st.sampled_from((0, times[0] - 60_000 if times else 1, 1 << 50)), label="far")
        ours = t.model.search_offset(prefix + topic, q, timestamp)
        theirs = t.remote.search_offset(prefix + topic, q, timestamp)
        answers, kind = allowed(t.model.store, prefix + topic, q, timestamp)
        assert theirs == ours, f"search {topic}:{q} at {timestamp} ({kind}): answered {theirs}, the model {ours}"
        assert ours in answers, f"search {topic}:{q} at {timestamp} ({kind}): the model {ours}, the rule {answers}"
        reached.update(k for k in kind.split(":") if k)


# ---------------------------------------------------------------------------------------------------------
# inside the real broker's namespace


PROGRAMS: dict[str, Callable[[Target, st.DataObject, set[str], str], None]] = {
    "pulls": pulls_answer_as_the_model,
    "subscriptions": subscriptions_as_the_model,
    "lookups": lookups_answer_as_the_model,
}


def run_program(t: Target, name: str, examples: int, prefix: str) -> set[str]:
    """``examples`` drawn runs of program ``name`` on ``t``, each with fresh names; the outcomes reached."""
    reached: set[str] = set()
    counter = iter(range(1 << 30))

    def one(data: st.DataObject) -> None:
        PROGRAMS[name](t, data, reached, f"{prefix}{next(counter)}_")

    # derandomized, as the suite's ``ci`` profile: this process does not load tests/conftest.py
    settings(max_examples=examples, database=None, derandomize=True, **SETTINGS)(given(st.data())(one))()
    return reached


def main(argv: list[str]) -> int:
    """Inside the fixture's namespace: each program against the broker at 127.0.0.1:9876, one JSON line
    (per program its reached outcomes, or the failure)."""
    from rmqspec.model import ManualClock
    from rmqspec.model.clock import WallClock

    args = json.loads(argv[0])
    out: dict[str, Any] = {}
    remote = RemoteBroker("127.0.0.1:9876", WallClock())
    conn = RemotingClient.connect(remote.broker_addr, timeout_ms=TIMEOUT_MS)
    t = Target(ModelBroker(ManualClock(1_700_000_000_000)), remote, conn, suspend=False,
               many_messages=args.get("many_messages", 3), exact_remarks=True, learn_store_times=True)
    try:
        for name in args["programs"]:
            try:
                out[name] = {"reached": sorted(run_program(t, name, args["examples"], f"{args['prefix']}{name}"))}
            except Exception:  # reported to the test, which fails with it
                out[name] = {"failed": traceback.format_exc()[-6000:]}
    finally:
        conn.close()
        remote.close()
    sys.stdout.write(json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
