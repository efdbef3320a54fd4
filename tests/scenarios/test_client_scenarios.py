"""Reference-client scenarios against the real ModelBroker (SPEC §4.2, §4.5, §4.6).

Each test is named after the RocketMQ behaviour it pins. Brokers come from
the ``broker`` / ``clock`` fixtures (``conftest.BROKERS``), so every broker in
the registry runs these scenarios; the Hypothesis property builds a fresh
model broker per example. Worlds use the model's Directory (routes + group
membership) and are stepped with a ``Driver`` over the ManualClock, which
ticks the broker as time advances. The recorder receives the client's events;
the producer records its own sends (``broker_records_events=False``) because
a registry broker records nothing; broker-side outcomes are read back through
the protocol (pulls of the retry topic).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rmqspec.model import factory
from rmqspec.model.client_timers import Driver
from rmqspec.model.clock import ManualClock
from rmqspec.model.consumer import ConsumeFromWhere, ConsumerConfig, MessageModel
from rmqspec.model.consumer_concurrent import ConcurrentConsumer, ConsumeConcurrentlyStatus
from rmqspec.model.consumer_orderly import ConsumeOrderlyStatus, OrderlyConsumer
from rmqspec.model.directory import Directory
from rmqspec.model.events import ListRecorder
from rmqspec.model.link import Link
from rmqspec.model.message import Message, MessageQueue
from rmqspec.model.producer import Producer, TransactionProducer
from rmqspec.model.results import BrokerError, PullStatus, ResponseCode, TxnAction

OK = ConsumeConcurrentlyStatus.CONSUME_SUCCESS
LATER = ConsumeConcurrentlyStatus.RECONSUME_LATER
FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


class World:
    """One ModelBroker, a Directory, a recorder and a Driver over a manual clock."""

    def __init__(self, broker, clock: ManualClock, topic_queues: int = 1,
                 groups: tuple[str, ...] = ("G",)) -> None:
        self.clock = clock
        self.t0 = self.clock.now()
        self.recorder = ListRecorder()
        self.broker = broker
        self.directory = Directory()
        self.directory.create_topic(self.broker, "T", topic_queues)
        for g in groups:
            self.directory.create_group(self.broker, g)
        self.driver = Driver(self.clock, self.broker, max_step_ms=100)
        self.producer = Producer(self.broker, self.clock, self.directory, "P",
                                 recorder=self.recorder, broker_records_events=False)
        self.driver.add(self.producer)

    def consumer(self, listener, cls=ConcurrentConsumer, cid="c1", group="G", broker=None,
                 **cfg):
        cfg.setdefault("consume_from_where", FIRST)
        cfg.setdefault("long_polling_recheck_ms", 100)
        c = cls(broker or self.broker, self.clock, self.directory, group, cid, listener,
                config=ConsumerConfig(**cfg), recorder=self.recorder)
        c.subscribe("T")
        self.driver.add(c)
        return c

    def send(self, body: bytes, **kw):
        return self.producer.send(Message("T", body), **kw)

    def at(self, ms: int) -> int:
        return self.t0 + ms

    def run_until(self, ms: int) -> None:
        self.driver.run_until(self.at(ms))

    def retry_copies(self, group: str = "G") -> list:
        """Copies in the group's retry queue (none when the broker never created it)."""
        try:
            result = self.broker.pull("probe", MessageQueue(f"%RETRY%{group}", 0), 0, 32)
        except BrokerError as e:
            assert e.code is ResponseCode.TOPIC_NOT_EXIST
            return []
        return list(result.messages) if result.status is PullStatus.FOUND else []


def assert_commit_never_passes_unacked(consumers) -> None:
    for c in consumers:
        for mq, pq in c.process_queues.items():
            low = pq.lowest_unacknowledged()
            if low is not None and not pq.dropped:
                assert c.committed_offset(mq) <= low, (c.client_id, mq, pq)


# ---------------------------------------------------------------------------


@settings(max_examples=15)
@given(
    outcomes=st.lists(st.sampled_from(["ok", "later", "raise", "ok_backfail"]), min_size=1,
                      max_size=6),
    batch=st.integers(1, 3),
)
def test_process_queue_commit_offset_never_passes_an_unacknowledged_message(outcomes, batch):
    """Random results per delivery (incl. lost send-backs), checked after every step.

    Also no loss: every sent message is eventually consumed with SUCCESS.
    """
    clock = ManualClock(1_700_000_000_000)
    w = World(factory(clock), clock, topic_queues=2)
    link = Link(w.broker)
    script = iter(outcomes)

    def listener(msgs, ctx):
        outcome = next(script, "ok")
        if outcome == "ok_backfail":
            link.fail("send_back", times=1)
            ctx.ack_index = 0
            return OK
        if outcome == "raise":
            raise RuntimeError("listener failed")
        return OK if outcome == "ok" else LATER

    c = w.consumer(listener, broker=link, consume_message_batch_max_size=batch,
                   long_polling_recheck_ms=1000)
    w.driver.max_step_ms = 1000
    w.driver.after_step = lambda: assert_commit_never_passes_unacked([c])
    c.start()
    keys = {w.send(b"m%d" % i).uniq_key for i in range(6)}
    w.run_until(700_000)  # six failures of one message: 10 s + 30 s + 1 m + … + 4 m
    succeeded = {e.msg_key for e in w.recorder.of("consume") if e.status == "SUCCESS"}
    assert succeeded == keys
    assert all(pq.lowest_unacknowledged() is None for pq in c.process_queues.values())


def _allocation(make_broker, clock, strategy: str, queues: int, consumers: int):
    w = World(make_broker(), clock, topic_queues=queues)
    cs = [w.consumer(lambda m, x: OK, cid=f"cid-{i}", allocate_strategy=strategy)
          for i in range(consumers)]
    for c in cs:
        c.start()
    w.driver.step()
    return [sorted(mq.queue_id for mq in c.process_queues if mq.topic == "T") for c in cs]


def test_allocation_averagely_matches_rocketmq_for_8_queues_3_consumers(make_broker, clock):
    assert _allocation(make_broker, clock, "AVG", 8, 3) == [[0, 1, 2], [3, 4, 5], [6, 7]]


def test_allocation_by_circle_matches_rocketmq_for_8_queues_3_consumers(make_broker, clock):
    assert _allocation(make_broker, clock, "AVG_BY_CIRCLE", 8, 3) == [[0, 3, 6], [1, 4, 7], [2, 5]]


def test_allocation_for_3_queues_5_consumers_leaves_two_consumers_idle(make_broker, clock):
    for strategy in ("AVG", "AVG_BY_CIRCLE"):
        assert _allocation(make_broker, clock, strategy, 3, 5) == [[0], [1], [2], [], []]


def test_rebalance_after_a_consumer_leaves_hands_its_queues_over_without_loss(broker, clock):
    w = World(broker, clock, topic_queues=4)
    consumed: list[bytes] = []

    def listener(msgs, ctx):
        consumed.extend(m.body for m in msgs)
        return OK

    a = w.consumer(listener, cid="a")
    b = w.consumer(listener, cid="b")
    a.start()
    b.start()
    for i in range(8):
        w.send(b"x%d" % i)
    w.run_until(2_000)
    b.shutdown()
    for i in range(8, 16):
        w.send(b"x%d" % i)
    w.run_until(5_000)
    assert sorted(a.process_queues) == sorted(
        [MessageQueue("T", i) for i in range(4)] + [MessageQueue("%RETRY%G", 0)]
    )
    assert sorted(set(consumed)) == sorted(b"x%d" % i for i in range(16))


def test_orderly_consumption_stops_when_the_client_lock_is_older_than_30s(broker, clock):
    """Lock renewals are lost; the client stops consuming once its lock is > 30 s old."""
    w = World(broker, clock, topic_queues=1)
    link = Link(w.broker)
    consumed: list[tuple[int, bytes]] = []

    def listener(msgs, ctx):
        consumed.extend((w.clock.now() - w.t0, m.body) for m in msgs)
        return ConsumeOrderlyStatus.SUCCESS

    c = w.consumer(listener, cls=OrderlyConsumer, broker=link)
    c.start()
    w.run_until(1_000)  # rebalance locked T/0 at 0; lockAll at 1 s renewed it
    pq = c.process_queues[MessageQueue("T", 0)]
    assert pq.locked and pq.last_lock_timestamp == w.at(1_000)
    link.fail("lock_batch")  # every later renewal and try-lock is lost
    w.send(b"early")
    w.run_until(31_000)
    assert [b for _, b in consumed] == [b"early"]
    w.run_until(31_002)  # lock granted at 1 000 is now 30 001 ms old on the client
    w.send(b"late")
    w.run_until(60_000)
    assert [b for _, b in consumed] == [b"early"]  # the queue holds it, nobody consumes it
    assert [m.body for m in (pq.get(o) for o in pq.offsets())] == [b"late"]
    for ev in w.recorder.of("orderly_start"):
        assert ev.detail["lock_age_ms"] <= 30_000
    link.heal()
    w.run_until(64_000)  # the next try-lock succeeds (our broker lock is still ours) → consume
    assert [b for _, b in consumed] == [b"early", b"late"]
    starts = w.recorder.of("orderly_start")
    ends = w.recorder.of("orderly_end")
    assert len(starts) == len(ends) == 2


def test_send_back_failure_reconsumes_locally_after_5s_and_keeps_the_message_in_the_process_queue(
    broker, clock
):
    w = World(broker, clock)
    link = Link(w.broker)
    attempts: list[tuple[int, int]] = []

    def listener(msgs, ctx):
        attempts.append((w.clock.now() - w.t0, msgs[0].reconsume_times))
        return LATER if len(attempts) == 1 else OK

    c = w.consumer(listener, broker=link)
    c.start()
    link.fail("send_back", times=1)
    w.send(b"m0")
    w.send(b"m1")
    w.run_until(0)
    mq = MessageQueue("T", 0)
    pq = c.process_queues[mq]
    assert pq.offsets() == [0]  # m0 failed and its send-back was lost: it stays
    assert c.committed_offset(mq) == 0  # m1 is acknowledged but the offset waits for m0
    w.run_until(4_999)
    assert len(attempts) == 2
    w.run_until(5_000)
    assert attempts == [(0, 0), (0, 0), (5_000, 1)]
    assert pq.offsets() == []
    assert c.committed_offset(mq) == 2
    assert link.lost["send_back"] == 1
    w.run_until(60_000)
    assert w.retry_copies() == []  # the broker never saw the lost send-back


def test_concurrent_message_failing_twice_then_succeeding_is_consumed_three_times_10s_then_30s(
    broker, clock
):
    w = World(broker, clock)
    deliveries: list[tuple[int, str, int]] = []

    def listener(msgs, ctx):
        m = msgs[0]
        deliveries.append((w.clock.now() - w.t0, m.topic, m.reconsume_times))
        return LATER if len(deliveries) < 3 else OK

    c = w.consumer(listener)
    c.start()
    sent = w.send(b"flaky")
    w.run_until(60_000)
    assert [(topic, r) for _, topic, r in deliveries] == [("T", 0), ("T", 1), ("T", 2)]
    t = [ts for ts, _, _ in deliveries]
    assert 10_000 <= t[1] - t[0] <= 10_300  # level 3
    assert 30_000 <= t[2] - t[1] <= 30_300  # level 4
    consumes = [e for e in w.recorder.of("consume") if e.msg_key == sent.uniq_key]
    assert [e.status for e in consumes] == ["RECONSUME_LATER", "RECONSUME_LATER", "SUCCESS"]
    assert [e.topic for e in consumes] == ["T", "%RETRY%G", "%RETRY%G"]
    assert [(m.reconsume_times, m.uniq_key) for m in w.retry_copies()] == [
        (1, sent.uniq_key), (2, sent.uniq_key)
    ]


def test_broadcasting_drops_failures(broker, clock):
    w = World(broker, clock, topic_queues=2)
    seen: dict[str, list[bytes]] = {"a": [], "b": []}

    def listener_for(cid):
        def listener(msgs, ctx):
            seen[cid].extend(m.body for m in msgs)
            return LATER if cid == "a" else OK
        return listener

    a = w.consumer(listener_for("a"), cid="a", message_model=MessageModel.BROADCASTING)
    b = w.consumer(listener_for("b"), cid="b", message_model=MessageModel.BROADCASTING)
    a.start()
    b.start()
    for i in range(4):
        w.send(b"b%d" % i)
    w.run_until(60_000)
    assert sorted(seen["a"]) == sorted(seen["b"]) == [b"b0", b"b1", b"b2", b"b3"]
    assert w.retry_copies() == []  # failures are dropped, never sent back
    for mq in (MessageQueue("T", 0), MessageQueue("T", 1)):
        assert a.committed_offset(mq) == b.committed_offset(mq) == 2
    # offsets stay local: the broker never got the 2 the clients hold (never committed answers 0)
    assert w.broker.query_offset("G", MessageQueue("T", 0)) == 0


def test_transactional_producer_with_check_listener_commits_after_a_lost_end_transaction(
    broker, clock
):
    w = World(broker, clock)
    checked: list[str] = []

    def check_listener(msg):
        checked.append(msg.uniq_key)
        return TxnAction.COMMIT

    tp = TransactionProducer(w.broker, w.clock, w.directory, "TXP", recorder=w.recorder,
                             check_listener=check_listener, broker_records_events=False)
    w.driver.add(tp)
    consumed: list[tuple[int, bytes]] = []
    c = w.consumer(lambda msgs, ctx: consumed.extend(
        (w.clock.now() - w.t0, m.body) for m in msgs) or OK)
    c.start()
    result = tp.send_in_transaction(Message("T", b"order-1"), lambda m: TxnAction.COMMIT,
                                    lose_end=True)
    assert result.local_state is TxnAction.COMMIT and result.end_code is None
    w.run_until(30_000)
    assert consumed == []  # the half stays invisible while the commit is lost
    w.run_until(125_000)
    assert checked == [result.transaction_id]
    assert [b for _, b in consumed] == [b"order-1"]
    ends = w.recorder.of("txn_end")
    assert [(e.status, e.detail["from_check"]) for e in ends] == [("COMMIT", True)]
    assert w.driver.unanswered == []


def test_orderly_queues_move_to_a_joining_consumer_and_stay_in_queue_order(broker, clock):
    """c2 joins: c1 drops and unlocks the queues it loses, c2 locks them and continues in order."""
    w = World(broker, clock, topic_queues=2)
    log: list[tuple[str, int, bytes]] = []

    def listener_for(cid):
        def listener(msgs, ctx):
            log.extend((cid, m.queue_id, m.body) for m in msgs)
            return ConsumeOrderlyStatus.SUCCESS
        return listener

    c1 = w.consumer(listener_for("c1"), cls=OrderlyConsumer, cid="c1")
    c1.start()
    for i in range(4):
        w.send(b"a%d" % i, sharding_key=f"k{i}")
    w.run_until(2_000)
    c2 = w.consumer(listener_for("c2"), cls=OrderlyConsumer, cid="c2")
    c2.start()
    w.run_until(3_000)
    for i in range(4):
        w.send(b"b%d" % i, sharding_key=f"k{i}")
    w.run_until(60_000)
    owned1 = {mq.queue_id for mq in c1.process_queues if mq.topic == "T"}
    owned2 = {mq.queue_id for mq in c2.process_queues if mq.topic == "T"}
    assert owned1 == {0} and owned2 == {1}
    for q in (0, 1):
        bodies = [b for _, qid, b in log if qid == q]
        assert bodies == sorted(bodies, key=lambda b: (b[:1], b[1:]))  # a* before b*, in order
        late_consumers = {cid for cid, qid, b in log if qid == q and b.startswith(b"b")}
        assert late_consumers == {"c1" if q == 0 else "c2"}
    assert len(log) == 8  # nothing lost, nothing consumed twice
    for ev in w.recorder.of("orderly_start"):
        assert ev.detail["lock_age_ms"] <= 30_000
