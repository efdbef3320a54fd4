"""The client differential: rmqspec's client functions against the real 4.9.8 client's, for drawn inputs.

The real functions run in one JVM, the project's ``interop/java/v4/ClientOracle.java`` on the release
jars (one JSON request per line, one answer per line); Hypothesis draws the inputs, each asked of the JVM
and of rmqspec's own function, and every answer must agree (shrunk to the smallest input when not):

- ``putUserProperty`` (seed 004, G4): the names RocketMQ reserves and the blank names and values it
  refuses (Java's ``trim()``: every char up to U+0020) against ``put_user_property`` and the message it
  makes (``model/message.py``).
  rmqspec also refuses a name or value holding ``\\x01`` / ``\\x02`` (it would corrupt the properties
  string; 4.9.8 stores it and its readers then split it) or a lone surrogate (4.9.8's UTF-8 encoder
  stores ``?`` for it): fidelity B2;
- ``setKeys(Collection)`` (G6): the KEYS property every reader sees, against ``Message(keys=…)``. rmqspec
  refuses a key holding a space (4.9.8 joins the keys with spaces and splits them again);
- ``string2messageProperties`` (G8, the codec every reader uses) against ``decode_properties``: any text;
- ``FilterAPI.buildSubscriptionData`` (C10, C11: the tag expression every client and broker parses)
  against ``model/filterapi.py``: its subString, tags set and code set, or the split error;
- ``DefaultMQPushConsumer.subscribe`` / ``unsubscribe`` called in a drawn order (C11: subscribing one topic
  twice, the last subscription wins; an expression that does not split throws and keeps the one before)
  against the reference consumer's ``subscribe`` / ``unsubscribe`` (``model/consumer.py``): the subscription
  table after the calls, and which calls were refused;
- ``encodeMessages`` / ``decodeMessages`` (G13, the batch body): Java's bytes decoded by
  ``remoting/records.decode_batch`` and ours by Java give the same items, and the bodies are as long;
- ``DefaultMQPushConsumerImpl.checkConfig`` (E5) against ``model/consumer_check.py``: configurations with up
  to three numbers at or past their ranges' edges; both start, or both refuse at the same first check;
- ``UtilAll.timeMillisToHumanString3`` and ``UtilAll.parseDate(…, "yyyyMMddHHmmss")`` (E6: the default
  ``consumeTimestamp`` and CONSUME_FROM_TIMESTAMP's reading of it), in a UTC JVM, against
  ``model/timesearch.py``: well-formed strings, fields that roll over (lenient), short strings, foreign
  characters and trailing text;
- ``ConsumeMessageConcurrentlyService.submitConsumeRequest`` (A1, seed 000:3-5): a pulled list split into
  ConsumeRequests of consumeMessageBatchMaxSize, in the order the consume pool is given them (the JVM's
  pool records and runs none), against the reference concurrent consumer's ``_submit_consume_request``
  (``model/consumer_concurrent.py``: the ``consume`` timers it arms, in order): batch sizes over 1..1024
  and lists of 1..40 messages (PullCallback submits only a non-empty list);
- ``ConsumeMessageConcurrentlyService.ConsumeRequest.run`` (A3, seed 000:61-63, 128-133) on a ProcessQueue
  dropped before the request runs, by its listener (a rebalance while the listener runs), or never, for
  drawn answers (SUCCESS, RECONSUME_LATER, null, an exception) in both message models, against the reference
  consumer's ``consume_request``: whether the listener was called, the offset in the offset store's memory
  and the messages left in the ProcessQueue;
- ``RebalancePushImpl.removeUnnecessaryMessageQueue`` (B16, seed 001:67-73): a ProcessQueue of drawn messages, some
  taken by an orderly batch, its consume lock busy or free, orderly or concurrent, clustering or broadcasting,
  against the reference consumer's ``remove_unnecessary_message_queue``: the answer, the unlocks (at once, or
  unlockDelay's 20 s later) and tryUnlockTimes;
- ``RemoteBrokerOffsetStore.updateOffset`` and the client's persist task (A23, seed 000:467-488, 551-556):
  drawn updates (increase-only or not) change the memory only, and ``persistAll`` runs first 10 s after the
  client's start, then every persistConsumerOffsetInterval (drawn), against the reference consumer's offset
  store and ``persist`` timers;
- ``AllocateMessageQueueAveragely`` / ``…ByCircle`` (E18) over the lists RebalanceImpl sorts, against
  ``model/allocate.py``: topics and client ids drawn beyond the BMP, where Java's UTF-16 order and
  Python's code-point order differ;
- the pull guards (E9, ``model/pull_flow.py``): ``ProcessQueue``'s msgCount / msgSize after drawn puts,
  removes, takes, commits, rollbacks and clears (bodies around 1 MiB); ``RebalancePushImpl
  .messageQueueChanged``'s per-queue thresholds for drawn per-topic ones and table sizes; and the delay
  ``DefaultMQPushConsumerImpl.pullMessage`` re-arms a request with (suspended, cached count, cached MiB,
  span; concurrent and orderly) or that it goes on to pull, against ``held_back``.

The push consumer's rebalance table and pull loop (B4, E2) are compared in ``test_client_differential_push.py``.
"""

from __future__ import annotations

import base64
import json
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from rmqspec.model.allocate import STRATEGIES
from rmqspec.model.clock import ManualClock
from rmqspec.model.consumer import ConsumerConfig, MessageModel
from rmqspec.model.consumer_check import RANGES, ConsumerConfigError
from rmqspec.model.consumer_concurrent import ConcurrentConsumer, ConsumeConcurrentlyStatus
from rmqspec.model.consumer_orderly import OrderlyConsumer
from rmqspec.model.directory import Directory
from rmqspec.model.filterapi import SubscriptionSplitError, build_subscription
from rmqspec.model.message import (
    NAME_VALUE_SEPARATOR,
    PROPERTY_KEYS,
    PROPERTY_SEPARATOR,
    SYSTEM_PROPERTY_NAMES,
    InvalidMessage,
    Message,
    MessageQueue,
    StoredMessage,
    decode_properties,
    encode_properties,
    put_user_property,
)
from rmqspec.model.process_queue import MIB, ProcessQueue
from rmqspec.model.pull_flow import FlowThresholds, held_back
from rmqspec.model.timesearch import format_consume_timestamp, parse_consume_timestamp
from rmqspec.remoting.records import BatchItem, decode_batch, encode_batch
from tests.interop.realrmq import RealRocketMQ

DEFAULTS = ConsumerConfig()
CLIENT = "4.9.8"  # the client whose functions these are (the 4.x classes: interop/java/v4)
SEPARATORS = (NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR)
# characters where implementations part: blanks Java trims (<= U+0020) and those it does not (U+00A0,
# U+3000), the separators, a non-ASCII letter, one beyond the BMP (a surrogate pair in Java), one in
# U+E000-U+FFFF (above a surrogate in code points, below one in UTF-16), a lone surrogate
CHARS = st.sampled_from(["a", "b", "Z", "0", " ", "\t", "\n", "\x00", "\x1f", "\u00a0", "\u3000", "\x01", "\x02",
                         "é", "\U0001f600", "\uff21", "\ud800"])
TEXT = st.lists(CHARS, max_size=8).map("".join)
NAMES = st.one_of(TEXT, st.sampled_from(sorted(SYSTEM_PROPERTY_NAMES)),
                  st.sampled_from(sorted(SYSTEM_PROPERTY_NAMES)).map(str.lower))


class Oracle:
    """The JVM: one request, one answer."""

    def __init__(self, cmd: list[str]) -> None:
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, encoding="ascii")
        self.asked = 0

    def ask(self, fn: str, **args: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"fn": fn, **args}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError(f"ClientOracle ended: {self.proc.stderr.read() if self.proc.stderr else ''}")
        self.asked += 1
        return json.loads(line)

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def oracle(realrmq: RealRocketMQ) -> Iterator[Oracle]:
    java = RealRocketMQ(CLIENT)
    o = Oracle(java.java("ClientOracle"))
    yield o
    o.close()
    print(f"ClientOracle answered {o.asked} requests")


def _ours(make: Any) -> tuple[Any, str | None]:
    """(value, None) or (None, the refusal's field and reason)."""
    try:
        return make(), None
    except InvalidMessage as exc:
        return None, str(exc)


@given(name=NAMES, value=TEXT)
@example(name=" ", value="x")
@example(name="a", value="\t")
@example(name="a", value="\u00a0")
@example(name="DELAY", value="1")
def test_put_user_property(oracle: Oracle, name: str, value: str) -> None:
    real = oracle.ask("putUserProperty", name=name, value=value)
    ours, refused = _ours(lambda: Message("T", b"", properties=put_user_property({}, name, value)).properties)
    if "error" in real:
        assert refused is not None, f"4.9.8 refuses {name!r}={value!r} ({real['error']}); rmqspec stores it"
    elif refused is not None:
        assert any(s in name or s in value for s in (*SEPARATORS, "\ud800")), \
            f"rmqspec refuses {name!r}={value!r} ({refused}); 4.9.8 stores it"
    else:
        assert real["ok"] == dict(ours)


@given(keys=st.lists(TEXT, max_size=4))
@example(keys=["\ta", "b"])
@example(keys=[])
@example(keys=["a", ""])
def test_set_keys(oracle: Oracle, keys: list[str]) -> None:
    real = oracle.ask("setKeys", keys=keys)
    assert "error" not in real, real
    ours, refused = _ours(lambda: Message("T", b"", keys=tuple(keys)).wire_properties())
    if refused is not None:
        assert any(" " in k or any(s in k for s in (*SEPARATORS, "\ud800")) for k in keys), \
            f"rmqspec refuses the keys {keys!r} ({refused}); 4.9.8 sets KEYS={real['ok']!r}"
        return
    def seen(keys: str | None) -> str | None:  # what every reader makes of the property on the wire
        return decode_properties(encode_properties({PROPERTY_KEYS: keys or ""})).get(PROPERTY_KEYS)

    assert seen(real["ok"]) == seen(ours.get(PROPERTY_KEYS)), (keys, real["ok"], ours.get(PROPERTY_KEYS))


@given(sub=st.one_of(st.none(), st.lists(st.one_of(CHARS, st.sampled_from(["||", "|", "*", "TagA"])), max_size=8)
                     .map("".join)))
@example(sub=" * ")
@example(sub=" || ")
@example(sub="||")
@example(sub="TagA||\u00a0TagB ")
def test_subscription(oracle: Oracle, sub: str | None) -> None:
    real = oracle.ask("subscription", subString=sub)
    try:
        ours = build_subscription(sub)
    except SubscriptionSplitError:
        assert "error" in real, (sub, real)
        return
    assert "error" not in real, (sub, real)
    want = real["ok"]
    assert (ours.sub_string, ours.tags, ours.codes) == (want["subString"], set(want["tags"]), set(want["codes"])), sub


EXPRESSIONS = st.sampled_from(["*", "", "TagA", "TagB || TagA", " TagC ", "||", " || "])
CALLS = st.lists(st.tuples(st.sampled_from(["T", "U"]), st.one_of(st.none(), EXPRESSIONS)), min_size=1, max_size=6)


@given(calls=CALLS)
@example(calls=[("T", "TagA"), ("T", "TagB")])  # seed 001:181-183: only TagB is subscribed
@example(calls=[("T", "TagA"), ("T", "TagB || TagA")])
@example(calls=[("T", "TagA"), ("T", "||")])
def test_subscribe_twice(oracle: Oracle, calls: list[tuple[str, str | None]]) -> None:
    real = oracle.ask("subscribe", calls=calls)["ok"]
    consumer = ConcurrentConsumer(None, ManualClock(0), Directory(), "G1", "127.0.0.1@1", lambda msgs, ctx: None)
    refused = []
    for i, (topic, expression) in enumerate(calls):
        try:
            if expression is None:
                consumer.unsubscribe(topic)
            else:
                consumer.subscribe(topic, expression)
        except SubscriptionSplitError:
            refused.append(i)
    assert refused == real["failed"], calls
    ours = {t: (s.sub_string, s.tags, s.codes) for t, s in consumer.subscriptions.items()}
    want = {t: (d["subString"], set(d["tags"]), set(d["codes"])) for t, d in real["table"].items()}
    assert ours == want, calls


@given(text=st.lists(st.one_of(CHARS, st.sampled_from(["\x01", "\x02", "ab"])), max_size=14).map("".join))
@example(text="a\x01\x02b\x01c\x02")
@example(text="\U0001f600\x01")
def test_properties_codec(oracle: Oracle, text: str) -> None:
    real = oracle.ask("properties", text=text)
    assert real["ok"] == decode_properties(text), text


PROPS = st.dictionaries(TEXT.filter(lambda s: s and not any(c in s for c in SEPARATORS) and "\ud800" not in s),
                        TEXT.filter(lambda s: s and not any(c in s for c in SEPARATORS) and "\ud800" not in s),
                        max_size=3)
ITEMS = st.lists(st.builds(BatchItem, flag=st.integers(-(2**31), 2**31 - 1), body=st.binary(max_size=40),
                           properties=PROPS), min_size=1, max_size=4)


def _wire(items: list[BatchItem]) -> list[dict[str, Any]]:
    return [{"flag": i.flag, "body": base64.b64encode(i.body).decode(), "properties": i.properties} for i in items]


@given(items=ITEMS)
@example(items=[BatchItem(0, b"", {})])
def test_batch_body(oracle: Oracle, items: list[BatchItem]) -> None:
    theirs = base64.b64decode(oracle.ask("encodeMessages", items=_wire(items))["ok"])
    mine = encode_batch(items)
    assert len(theirs) == len(mine)
    assert decode_batch(theirs) == items
    back = oracle.ask("decodeMessages", bytes=base64.b64encode(mine).decode())
    assert back["ok"] == _wire(items)


EDGES = st.sampled_from([-2, -1, 0, 1, 2, 20, 999, 1000, 1001, 1024, 1025, 65535, 65536, 102_400, 102_401,
                         6_553_500, 6_553_501])


@given(changes=st.dictionaries(st.sampled_from([r[1] for r in RANGES]), EDGES, max_size=3))
@example(changes={"consume_thread_min": 21})
@example(changes={"pull_threshold_for_topic": -1, "pull_interval_ms": 65535})
def test_check_config(oracle: Oracle, changes: dict[str, int]) -> None:
    config = {r[0]: changes.get(r[1], getattr(DEFAULTS, r[1])) for r in RANGES}
    real = oracle.ask("checkConfig", config=config)["ok"]
    try:
        ConsumerConfig(**changes)
    except ConsumerConfigError as exc:
        assert real is not None, f"rmqspec refuses {changes} ({exc}); 4.9.8 starts"
        assert real.startswith(exc.field + " "), f"{changes}: 4.9.8 says {real!r}, rmqspec {exc}"
        return
    assert real is None, f"4.9.8 refuses {changes} ({real!r}); rmqspec starts"


def _stored(offset: int) -> StoredMessage:
    return StoredMessage(msg_id=f"id{offset}", uniq_key=f"k{offset}", topic="T", queue_id=0, queue_offset=offset,
                         commitlog_offset=offset * 100, body=b"", tags=None, keys=(), properties={},
                         reconsume_times=0, born_ts=0, store_ts=0, sys_flag=0, prepared_txn_offset=0)


class _BatchesSeen(ConcurrentConsumer):
    """The reference consumer whose ConsumeRequest.run only notes its batch (as the JVM's pool does)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.seen: list[list[int]] = []

    def consume_request(self, msgs: list[StoredMessage], pq: ProcessQueue, mq: MessageQueue) -> None:
        self.seen.append([m.queue_offset for m in msgs])


@given(first=st.integers(0, 2**40), count=st.integers(1, 40),
       batch=st.one_of(st.integers(1, 12), st.sampled_from([32, 1023, 1024])))
@example(first=0, count=1, batch=1)  # the default: one message per ConsumeRequest
@example(first=7, count=10, batch=3)  # the last batch is the rest (1)
@example(first=0, count=32, batch=32)  # a list as long as the batch: one request
def test_submit_consume_request_split(oracle: Oracle, first: int, count: int, batch: int) -> None:
    """A1. 4.9.8 (client jar, ``javap -c``): ``size() <= consumeMessageBatchMaxSize`` is one ConsumeRequest, else
    consecutive requests of that many, the last the rest, each ``consumeExecutor.submit``ted in order; PullCallback
    submits only a non-empty msgFoundList. A client that cuts differently (an off-by-one, a batch past the
    maximum, a reordering) fails here."""
    offsets = list(range(first, first + count))
    real = oracle.ask("submitConsume", offsets=offsets, batch=batch)["ok"]
    clock = ManualClock(0)
    consumer = _BatchesSeen(None, clock, Directory(), "G1", "127.0.0.1@1", lambda msgs, ctx: None,
                            config=ConsumerConfig(consume_message_batch_max_size=batch))
    consumer._submit_consume_request([_stored(o) for o in offsets], ProcessQueue(), MessageQueue("T", "b", 0), True)
    timers = consumer.timers.due()
    assert {t.kind for t in timers} <= {"consume"}
    for t in timers:
        t.action()
    assert consumer.seen == real, (offsets, batch)


ANSWERS = {"SUCCESS": ConsumeConcurrentlyStatus.CONSUME_SUCCESS, "LATER": ConsumeConcurrentlyStatus.RECONSUME_LATER,
           "NULL": None}


@given(first=st.integers(0, 2**40), count=st.integers(1, 5), broadcasting=st.booleans(),
       drop=st.sampled_from(["before", "during", "never"]), answer=st.sampled_from([*ANSWERS, "THROW"]))
@example(first=5, count=3, broadcasting=False, drop="before", answer="SUCCESS")  # returns at once: no listener
@example(first=5, count=3, broadcasting=False, drop="during", answer="SUCCESS")  # the result is not processed
@example(first=5, count=1, broadcasting=False, drop="never", answer="NULL")  # send-back fails: consumed again
def test_consume_request_on_a_dropped_queue(oracle: Oracle, first: int, count: int, broadcasting: bool, drop: str,
                                            answer: str) -> None:
    """A3. 4.9.8 (client jar, ``javap -c``): ``ConsumeRequest.run`` returns before the listener when the ProcessQueue
    is dropped; after the listener it runs ``processConsumeResult`` only when the queue is still not dropped (else
    a warning: the new owner consumes the messages again), and ``processConsumeResult`` updates the offset only
    when ``removeMessage`` answered ≥ 0 and the queue is not dropped. In clustering a RECONSUME_LATER is sent back
    (here it fails: no broker, the client never started) and the message stays, consumed again 5 s later. A client
    that processes a dropped queue's result (its offset would move for a queue another client owns) fails here."""
    offsets = list(range(first, first + count))
    if answer == "LATER" and not broadcasting:
        answer = "NULL"  # the same result (RECONSUME_LATER); both send back, which fails at once
    real = oracle.ask("consumeRequest", offsets=offsets, broadcasting=broadcasting, drop=drop, answer=answer)["ok"]
    model = MessageModel.BROADCASTING if broadcasting else MessageModel.CLUSTERING
    pq = ProcessQueue()
    called: list[bool] = []

    def listener(msgs: Any, ctx: Any) -> ConsumeConcurrentlyStatus | None:
        called.append(True)
        if drop == "during":
            pq.dropped = True
        if answer == "THROW":
            raise RuntimeError("listener")
        return ANSWERS[answer]

    consumer = ConcurrentConsumer(None, ManualClock(0), Directory(), "G1", "127.0.0.1@1", listener,
                                  config=ConsumerConfig(message_model=model))
    consumer.running = True  # started, as far as ConsumeRequest.run looks (the Java service never is either)
    mq = MessageQueue("T", "b", 0)
    msgs = [_stored(o) for o in offsets]
    pq.put_messages(msgs)
    if drop == "before":
        pq.dropped = True
    consumer.consume_request(msgs, pq, mq)
    ours = {"called": bool(called), "offset": consumer.offset_store.table.get(mq, -1), "left": len(pq.offsets())}
    assert ours == real, (offsets, broadcasting, drop, answer)


class _UnlocksSeen(OrderlyConsumer):
    """The reference consumer noting its unlock calls (the real one asks the broker, as the oracle's does)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.unlocked = 0

    def unlock(self, mq: MessageQueue) -> None:
        self.unlocked += 1


class _ConcurrentUnlocksSeen(ConcurrentConsumer):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.unlocked = 0

    def unlock(self, mq: MessageQueue) -> None:
        self.unlocked += 1


@given(orderly=st.booleans(), broadcasting=st.booleans(), count=st.integers(0, 4), taken=st.integers(0, 4),
       busy=st.sampled_from([False] * 7 + [True]))
@example(orderly=True, broadcasting=False, count=3, taken=1, busy=False)  # messages left: unlock 20 s later
@example(orderly=True, broadcasting=False, count=3, taken=3, busy=False)  # all taken: none left, unlock now
@example(orderly=True, broadcasting=False, count=2, taken=0, busy=True)  # a listener runs: kept, locked
def test_remove_unnecessary_message_queue(oracle: Oracle, orderly: bool, broadcasting: bool, count: int, taken: int,
                                          busy: bool) -> None:
    """B16. 4.9.8 (client jar, ``javap -c``): persist and remove the offset; only orderly clustering then tries the
    consume lock (``tryLock(1000 ms)``): held → ``incTryUnlockTimes``, false (neither unlocked nor removed); free →
    ``unlockDelay``: ``hasTempMessage()`` (the message map, not the batch taken) → unlock scheduled
    UNLOCK_DELAY_TIME_MILLS (20000) later, else unlock at once; true. A client that unlocks a queue with
    messages left at once, or keeps one whose lock is free, fails here."""
    real = oracle.ask("removeQueue", orderly=orderly, broadcasting=broadcasting, count=count, taken=taken,
                      busy=busy)["ok"]
    model = MessageModel.BROADCASTING if broadcasting else MessageModel.CLUSTERING
    cls = _UnlocksSeen if orderly else _ConcurrentUnlocksSeen
    clock = ManualClock(0)
    consumer = cls(None, clock, Directory(), "G1", "127.0.0.1@1", lambda msgs, ctx: None,
                   config=ConsumerConfig(message_model=model))
    pq = ProcessQueue()
    pq.put_messages([_stored(o) for o in range(count)])
    pq.take_messages(taken, 0)
    pq.dropped = True
    pq.consume_lock_held = busy
    answer = consumer.remove_unnecessary_message_queue(MessageQueue("T", "b", 0), pq)
    unlocks: list[Any] = ["now"] * consumer.unlocked
    for timer in consumer.timers.pending():
        before = consumer.unlocked
        timer.action()
        if consumer.unlocked > before:
            unlocks.append(timer.due - clock.now())
    ours = {"answer": answer, "unlocks": unlocks, "tryUnlockTimes": pq.try_unlock_times}
    assert ours == real, (orderly, broadcasting, count, taken, busy)


@given(interval=st.one_of(st.just(5000), st.integers(1, 60_000)),
       updates=st.lists(st.tuples(st.integers(-1, 12), st.booleans()), max_size=6))
@example(interval=5000, updates=[(5, True), (3, True), (7, False), (2, False)])  # increase-only keeps 5; a set lowers
def test_update_offset_and_the_persist_schedule(oracle: Oracle, interval: int, updates: list[tuple[int, bool]]) -> None:
    """A23. 4.9.8 (client jar, ``javap -c``): ``RemoteBrokerOffsetStore.updateOffset`` puts the first offset of a
    queue, then sets it (``increaseOnly``: only when higher, ``MixAll.compareAndIncreaseOnly``): memory only, no
    ``persistAll``; ``MQClientInstance.startScheduledTask`` runs ``persistAllConsumerOffset`` at a fixed rate,
    10000 ms after start, then every ``persistConsumerOffsetInterval``. A client that writes on every update, or
    persists on another schedule, fails here."""
    real = oracle.ask("persistOffsets", interval=interval, updates=updates)["ok"]
    clock = ManualClock(0)
    consumer = ConcurrentConsumer(None, clock, Directory(), "G1", "127.0.0.1@1", lambda msgs, ctx: None,
                                  config=ConsumerConfig(persist_consumer_offset_interval_ms=interval))
    mq = MessageQueue("T", "b", 0)
    for offset, increase_only in updates:  # the broker is None: a write to it would raise
        consumer.offset_store.update_offset(mq, offset, increase_only)
    memory = consumer.offset_store.table.get(mq, -1)
    consumer.start()
    persist = [t for t in consumer.timers.pending() if t.kind == "persist"]
    assert len(persist) == 1
    first = persist[0].due - clock.now()
    clock.advance(first)
    assert consumer.timers.pop(persist[0])
    persist[0].action()  # persistAll of no queue (none was allocated): nothing is sent
    [again] = [t for t in consumer.timers.pending() if t.kind == "persist"]
    ours = {"memory": memory, "persistedByUpdates": 0, "schedule": [first, again.due - clock.now()]}
    assert ours == real, (interval, updates)


TOPICS = st.sampled_from(["T", "Ta", "T\U0001f600", "T\uff21", "t"])
MQS = st.lists(st.tuples(TOPICS, st.sampled_from(["broker-a", "broker-b"]), st.integers(0, 11)),
               min_size=1, max_size=14, unique=True)
CIDS = st.lists(st.sampled_from(["10.0.0.1@1", "10.0.0.1@2", "10.0.0.2@1", "c\U0001f600", "c\uff21", "C"]),
                min_size=1, max_size=5, unique=True)


@given(strategy=st.sampled_from(sorted(STRATEGIES)), mqs=MQS, cids=CIDS, pick=st.integers(0, 5))
def test_allocate(oracle: Oracle, strategy: str, mqs: list[tuple[str, str, int]], cids: list[str],
                  pick: int) -> None:
    cid = cids[pick] if pick < len(cids) else "absent@0"
    real = oracle.ask("allocate", strategy=strategy, cid=cid, mqs=mqs, cids=cids)
    ours = STRATEGIES[strategy](cid, [MessageQueue(t, q, b) for t, b, q in mqs], cids)
    assert [tuple(r) for r in real["ok"]] == [(m.topic, m.broker_name, m.queue_id) for m in ours]


# CONSUME_FROM_TIMESTAMP's string (E6): the default consumeTimestamp's format and RebalancePushImpl's parse
DIGITS = st.text(st.sampled_from("0123456789"), min_size=2, max_size=2)
STAMPS = st.one_of(
    st.integers(0, 4_102_444_800_000).map(format_consume_timestamp),  # well-formed, 1970..2100
    st.tuples(st.integers(1970, 2100).map(str), DIGITS, DIGITS, DIGITS, DIGITS, DIGITS).map("".join),  # rolls
    st.tuples(st.integers(1970, 2100).map(str), st.text(st.sampled_from("0123456789x"), max_size=12),
              st.text(st.sampled_from("0123456789x"), max_size=4)).map("".join),  # short, foreign, trailing
)


@given(ms=st.integers(0, 4_102_444_800_000), text=STAMPS)
@example(ms=0, text="20261301000000")  # month 13: January of the next year
@example(ms=0, text="20260100000000")  # day 0: the last day of the month before
@example(ms=0, text="20260101000000trailing")  # parsed from the start, the rest after the digits ignored
@example(ms=0, text="2026010100000")  # the seconds take the digits there are
@example(ms=0, text="202601010000")  # no seconds: null
@example(ms=0, text="20260x01000000")  # a foreign character in a field: null
@example(ms=0, text="202601010000001234")  # every digit after is the seconds: 1234 s
def test_consume_timestamp(oracle: Oracle, ms: int, text: str) -> None:
    real = oracle.ask("consumeTimestamp", ms=ms, text=text)["ok"]
    assert real["format"] == format_consume_timestamp(ms), ms
    try:
        ours: int | None = parse_consume_timestamp(text)
    except ValueError:
        ours = None
    assert real["parsed"] == ours, f"{text!r}: 4.9.8 parses {real['parsed']}, rmqspec {ours}"


# The pull guards (E9): ProcessQueue's counters, messageQueueChanged's thresholds, pullMessage's guards
SIZES = st.sampled_from([0, 1, 700, MIB - 1, MIB, MIB + 1])
PQ_OPS = st.lists(st.one_of(
    st.tuples(st.sampled_from(["put", "remove"]), st.lists(st.integers(0, 6), max_size=4, unique=True)),
    st.tuples(st.just("take"), st.integers(0, 3)),
    st.tuples(st.sampled_from(["commit", "rollback", "clear"])),
), max_size=14)


def _sized(offset: int, size: int) -> StoredMessage:
    return StoredMessage(msg_id=f"{offset:032X}", uniq_key=f"{offset + 1:032X}", topic="T", queue_id=0,
                         queue_offset=offset, commitlog_offset=offset, body=bytes(size), tags=None, keys=(),
                         properties={}, reconsume_times=0, born_ts=0, store_ts=0, sys_flag=0, prepared_txn_offset=0)


@given(sizes=st.lists(SIZES, min_size=7, max_size=7), ops=PQ_OPS)
@example(sizes=[10, 20, 5, 0, 0, 0, 0], ops=[("put", [0, 1]), ("take", 1), ("put", [2]), ("commit",), ("remove", [1])])
def test_process_queue_counters(oracle: Oracle, sizes: list[int], ops: list[tuple[Any, ...]]) -> None:
    """msgCount and msgSize after each op. The ops the pull loop can make: a put never brings back an offset
    of the consuming batch (4.9.8 would count it twice) and a commit has a batch to commit (4.9.8 throws)."""
    pq = ProcessQueue()
    sent: list[list[Any]] = []
    ours = []
    for op in ops:
        if op[0] in ("put", "remove"):
            offsets = [o for o in op[1] if op[0] == "remove" or o not in pq.consuming_offsets()]
            sent.append([op[0], [[o, sizes[o]] for o in offsets]])
            if op[0] == "put":
                pq.put_messages([_sized(o, sizes[o]) for o in offsets])
            else:
                pq.remove_messages(offsets)
        elif op[0] == "take":
            sent.append(["take", op[1]])
            pq.take_messages(op[1])
        elif op[0] == "commit":
            if not pq.consuming_offsets():
                continue
            sent.append(["commit"])
            pq.commit()
        else:
            sent.append([op[0]])
            pq.rollback() if op[0] == "rollback" else pq.clear()
        ours.append([pq.msg_count, pq.msg_size])
    if sent:
        assert oracle.ask("processQueue", ops=sent)["ok"] == ours, sent


PER_QUEUE = st.integers(1, 65535)
PER_TOPIC = st.one_of(st.just(-1), st.integers(1, 6_553_500), st.integers(1, 12))
SIZE_PER_QUEUE = st.integers(1, 1024)
SIZE_PER_TOPIC = st.one_of(st.just(-1), st.integers(1, 102_400), st.integers(1, 12))


def _java_config(cfg: ConsumerConfig) -> dict[str, int]:
    return {"pullThresholdForQueue": cfg.pull_threshold_for_queue,
            "pullThresholdForTopic": cfg.pull_threshold_for_topic,
            "pullThresholdSizeForQueue": cfg.pull_threshold_size_for_queue,
            "pullThresholdSizeForTopic": cfg.pull_threshold_size_for_topic,
            "consumeConcurrentlyMaxSpan": cfg.consume_concurrently_max_span}


@given(per_queue=PER_QUEUE, per_topic=PER_TOPIC, size_per_queue=SIZE_PER_QUEUE, size_per_topic=SIZE_PER_TOPIC,
       queues=st.integers(0, 40))
@example(per_queue=1000, per_topic=100, size_per_queue=100, size_per_topic=7, queues=5)
@example(per_queue=7, per_topic=3, size_per_queue=9, size_per_topic=-1, queues=11)
def test_queue_thresholds(oracle: Oracle, per_queue: int, per_topic: int, size_per_queue: int, size_per_topic: int,
                          queues: int) -> None:
    cfg = ConsumerConfig(pull_threshold_for_queue=per_queue, pull_threshold_for_topic=per_topic,
                         pull_threshold_size_for_queue=size_per_queue, pull_threshold_size_for_topic=size_per_topic)
    real = oracle.ask("queueThresholds", config=_java_config(cfg), queues=queues)["ok"]
    th = FlowThresholds.of(cfg)
    th.on_queues_changed(cfg, queues)
    assert real == [th.for_queue, th.size_for_queue], (cfg, queues)


@given(per_queue=st.integers(1, 6), size_per_queue=st.integers(1, 3), span=st.integers(1, 12), orderly=st.booleans(),
       paused=st.booleans(), msgs=st.lists(st.tuples(st.integers(0, 14), st.sampled_from([0, 9, MIB // 2, MIB + 1])),
                                           min_size=1, max_size=8, unique_by=lambda m: m[0]))
@example(per_queue=2, size_per_queue=1, span=2000, orderly=False, paused=False, msgs=[(0, MIB), (1, MIB)])
@example(per_queue=2, size_per_queue=1, span=2000, orderly=False, paused=False, msgs=[(0, MIB), (1, MIB - 1)])
def test_pull_guard(oracle: Oracle, per_queue: int, size_per_queue: int, span: int, orderly: bool, paused: bool,
                    msgs: list[tuple[int, int]]) -> None:
    """The delay pullMessage re-arms a request with, or that it went on to pull (the oracle's 7777)."""
    cfg = ConsumerConfig(pull_threshold_for_queue=per_queue, pull_threshold_size_for_queue=size_per_queue,
                         consume_concurrently_max_span=span)
    real = oracle.ask("pullGuard", config=_java_config(cfg), orderly=orderly, paused=paused,
                      msgs=[[o, n] for o, n in msgs])["ok"]
    pq = ProcessQueue()
    pq.put_messages([_sized(o, n) for o, n in msgs])
    ours = held_back(cfg, FlowThresholds.of(cfg), pq, paused=paused, orderly=orderly)
    assert real == (7777 if ours is None else ours), (cfg, orderly, paused, msgs)
