"""Client-side paths of the reference consumers, unit-tested against a tiny broker double.

The double (``DoubleBroker`` below) only serves pre-built messages and answers
send_back / lock_batch with chosen codes, so failure paths the real broker
rarely produces (a send_back SYSTEM_ERROR, an OFFSET_ILLEGAL, a refused lock)
can be pinned exactly. Integration and scenario tests use the real ModelBroker.
"""

from __future__ import annotations

from rmqspec.model.message import MessageQueue, StoredMessage
from rmqspec.model.results import PullResult, PullStatus, ResponseCode


def stored(
    offset: int,
    topic: str = "T",
    queue_id: int = 0,
    tags: str | None = None,
    reconsume_times: int = 0,
    properties: dict[str, str] | None = None,
) -> StoredMessage:
    return StoredMessage(
        msg_id=f"{1000 + offset:032X}", uniq_key=f"{offset + 1:032X}", topic=topic,
        queue_id=queue_id, queue_offset=offset, commitlog_offset=10_000 + offset, body=b"b",
        tags=tags, keys=(), properties=properties or {}, reconsume_times=reconsume_times,
        born_ts=0, store_ts=0, sys_flag=0, prepared_txn_offset=0,
    )


class DoubleBroker:
    capabilities = frozenset()

    def __init__(self) -> None:
        self.queues: dict[tuple[str, int], list[StoredMessage]] = {}
        self.offsets: dict[tuple[str, MessageQueue], int] = {}
        self.send_back_code = ResponseCode.SUCCESS
        self.send_backs: list[tuple] = []
        self.grant_locks = True
        self.lock_calls: list[tuple[str, tuple[MessageQueue, ...]]] = []
        self.unlock_calls: list[tuple[str, tuple[MessageQueue, ...]]] = []
        self.illegal: dict[MessageQueue, int] = {}
        self.pulls: list[tuple[MessageQueue, int]] = []
        self.query_error = False

    def add(self, *msgs: StoredMessage) -> None:
        for m in msgs:
            self.queues.setdefault((m.topic, m.queue_id), []).append(m)

    def pull(self, group, mq, offset, max_nums=32, subscription="*"):
        self.pulls.append((mq, offset))
        msgs = self.queues.get((mq.topic, mq.queue_id), [])
        hi = len(msgs)
        if mq in self.illegal:
            return PullResult(PullStatus.OFFSET_ILLEGAL, (), self.illegal.pop(mq), 0, hi)
        if offset > hi:
            return PullResult(PullStatus.OFFSET_ILLEGAL, (), hi, 0, hi)
        if offset == hi:
            return PullResult(PullStatus.NO_NEW_MSG, (), offset, 0, hi)
        batch = tuple(msgs[offset : offset + max_nums])
        return PullResult(PullStatus.FOUND, batch, offset + len(batch), 0, hi)

    def send_back(self, group, commitlog_offset, delay_level, origin_msg_id, max_reconsume_times):
        self.send_backs.append((group, commitlog_offset, delay_level, origin_msg_id,
                                max_reconsume_times))
        return self.send_back_code

    def update_offset(self, group, mq, offset):
        self.offsets[(group, mq)] = offset

    def query_offset(self, group, mq):
        if self.query_error:
            raise ConnectionError("query lost")
        return self.offsets.get((group, mq), -1)

    def lock_batch(self, group, client_id, mqs):
        mqs = tuple(mqs)
        self.lock_calls.append((client_id, mqs))
        return frozenset(mqs) if self.grant_locks else frozenset()

    def unlock_batch(self, group, client_id, mqs):
        self.unlock_calls.append((client_id, tuple(mqs)))

    def tick(self):
        return []


# ---------------------------------------------------------------------------

import pytest  # noqa: E402

from rmqspec.model.client_timers import TimerQueue  # noqa: E402
from rmqspec.model.clock import ManualClock  # noqa: E402
from rmqspec.model.consumer import (  # noqa: E402
    ConsumeFromWhere,
    ConsumerConfig,
    MessageModel,
)
from rmqspec.model.consumer_concurrent import (  # noqa: E402
    ConcurrentConsumer,
    ConsumeConcurrentlyStatus,
)
from rmqspec.model.consumer_orderly import (  # noqa: E402
    ConsumeOrderlyStatus,
    OrderlyConsumer,
    clamp_suspend,
)
from rmqspec.model.directory import Directory  # noqa: E402
from rmqspec.model.events import ListRecorder  # noqa: E402

OK = ConsumeConcurrentlyStatus.CONSUME_SUCCESS
LATER = ConsumeConcurrentlyStatus.RECONSUME_LATER
FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
MQ = MessageQueue("T", 0)


class World:
    def __init__(self, queues: int = 1) -> None:
        self.clock = ManualClock(0)
        self.broker = DoubleBroker()
        self.directory = Directory()
        self.directory.add_route("T", queues)
        self.directory.add_route("%RETRY%G", 1)
        self.recorder = ListRecorder()

    def consumer(self, cls=ConcurrentConsumer, listener=None, cid="c1", **cfg):
        cfg.setdefault("consume_from_where", FIRST)
        c = cls(
            self.broker, self.clock, self.directory, "G", cid,
            listener or (lambda msgs, ctx: OK),
            config=ConsumerConfig(**cfg), recorder=self.recorder,
        )
        c.subscribe("T")
        return c


def test_timer_queue_runs_in_due_then_arming_order():
    clock = ManualClock(0)
    tq = TimerQueue(clock)
    seen = []
    tq.schedule(5, "b", lambda: seen.append("b"))
    tq.schedule(0, "a1", lambda: seen.append("a1"))
    t = tq.schedule(0, "a2", lambda: seen.append("a2"))
    tq.schedule(0, "a3", lambda: seen.append("a3"))
    tq.cancel(t)
    assert [x.kind for x in tq.due()] == ["a1", "a3"]
    for timer in tq.due():
        tq.pop(timer)
        timer.action()
    assert seen == ["a1", "a3"]
    assert tq.next_due() == 5
    with pytest.raises(ValueError):
        tq.schedule(-1, "x", lambda: None)


def test_send_back_failure_keeps_message_and_reconsumes_locally_after_5s():
    w = World()
    w.broker.add(stored(0), stored(1))
    w.broker.send_back_code = ResponseCode.SYSTEM_ERROR
    calls: list[tuple[int, int, int]] = []

    def listener(msgs, ctx):
        calls.append((w.clock.now(), msgs[0].queue_offset, msgs[0].reconsume_times))
        return LATER if msgs[0].queue_offset == 0 and len(calls) == 1 else OK

    c = w.consumer(listener=listener)
    c.start()
    c.step()
    pq = c.process_queues[MQ]
    assert calls == [(0, 0, 0), (0, 1, 0)]
    assert pq.offsets() == [0]  # the failed message stays
    assert pq.get(0).reconsume_times == 1  # incremented in memory
    assert c.committed_offset(MQ) <= 0  # never passes the unacknowledged message
    c.run_until(4999)
    assert len(calls) == 2
    c.run_until(5000)
    assert calls[2] == (5000, 0, 1)
    assert pq.offsets() == []
    assert c.committed_offset(MQ) == 2
    consume = w.recorder.of("consume")
    assert [(e.queue_offset, e.status) for e in consume] == [
        (0, "RECONSUME_LATER"), (1, "SUCCESS"), (0, "SUCCESS")
    ]
    assert w.broker.send_backs[0][1] == 10_000  # tried once, answered SYSTEM_ERROR


def test_ack_index_acks_a_prefix_and_sends_back_the_rest_with_the_context_level():
    w = World()
    w.broker.add(*(stored(o) for o in range(3)))

    def listener(msgs, ctx):
        ctx.ack_index = 0
        ctx.delay_level_when_next_consume = 5
        return OK

    c = w.consumer(listener=listener, consume_message_batch_max_size=3)
    c.start()
    c.step()
    assert [(b[1], b[2], b[4]) for b in w.broker.send_backs] == [(10_001, 5, 16), (10_002, 5, 16)]
    assert c.committed_offset(MQ) == 3


@pytest.mark.parametrize("outcome", ["none", "raise", "later"])
def test_none_exception_and_reconsume_later_fail_the_whole_batch(outcome):
    w = World()
    w.broker.add(stored(0), stored(1))

    def listener(msgs, ctx):
        ctx.ack_index = 5  # ignored: RECONSUME_LATER means ackIndex = −1
        if outcome == "raise":
            raise RuntimeError("boom")
        return None if outcome == "none" else LATER

    c = w.consumer(listener=listener, consume_message_batch_max_size=2)
    c.start()
    c.step()
    assert [b[1] for b in w.broker.send_backs] == [10_000, 10_001]
    assert [b[2] for b in w.broker.send_backs] == [0, 0]
    assert {e.status for e in w.recorder.of("consume")} == {"RECONSUME_LATER"}


def test_broadcasting_drops_failures_and_keeps_offsets_locally():
    w = World()
    w.broker.add(stored(0), stored(1))
    c = w.consumer(listener=lambda m, x: LATER, message_model=MessageModel.BROADCASTING)
    c.start()
    c.step()
    assert w.broker.send_backs == []
    assert c.committed_offset(MQ) == 2
    assert all(
        e.detail["dropped"] is True and e.detail["return_type"] == "FAILED" for e in w.recorder.of("consume")
    )
    assert all(e.status == "RECONSUME_LATER" for e in w.recorder.of("consume"))
    assert "%RETRY%G" not in c.subscriptions
    c.run_until(10_000)  # persist task: local store only
    assert c.offset_store.persisted[MQ] == 2
    assert w.broker.offsets == {}


def test_retry_copies_reach_the_listener_with_their_original_topic():
    w = World()
    retry_mq = MessageQueue("%RETRY%G", 0)
    w.broker.add(stored(0, topic="%RETRY%G", properties={"RETRY_TOPIC": "T"}, reconsume_times=1))
    seen = []
    c = w.consumer(listener=lambda msgs, ctx: seen.extend(msgs) or OK)
    c.start()
    c.step()
    assert [(m.topic, m.reconsume_times) for m in seen] == [("T", 1)]
    ev = w.recorder.of("consume")[0]
    assert (ev.topic, ev.queue_offset, ev.status) == ("%RETRY%G", 0, "SUCCESS")
    assert c.committed_offset(retry_mq) == 1


def test_client_side_tag_filter_drops_unsubscribed_tags():
    w = World()
    w.broker.add(stored(0, tags="A"), stored(1, tags="B"), stored(2, tags="C"), stored(3))
    seen = []
    c = w.consumer(listener=lambda msgs, ctx: seen.extend(msgs) or OK)
    c.subscribe("T", "A || C")
    c.start()
    c.step()
    assert [m.tags for m in seen] == ["A", "C"]
    commits = [e.queue_offset for e in w.recorder.of("commit_offset") if e.topic == "T"]
    # smallest remaining (2), queueOffsetMax + 1 after the last put (offset 2), then
    # correctTagsOffset on the empty pull moves past the filtered tail
    assert commits == [2, 3, 4]


def test_offset_illegal_drops_the_queue_and_fixes_the_offset_10s_later():
    w = World()
    w.broker.add(stored(0))
    w.broker.illegal[MQ] = 7
    c = w.consumer()
    c.start()
    c.step()
    first_pq = c.process_queues[MQ]
    assert first_pq.dropped
    c.run_until(9_999)
    assert w.broker.offsets.get(("G", MQ)) is None
    c.run_until(10_000)
    assert w.broker.offsets[("G", MQ)] == 7  # updated without increase-only, persisted
    assert MQ not in c.process_queues
    c.run_until(20_000)  # the next rebalance takes the queue again from the stored offset
    assert c.process_queues[MQ] is not first_pq
    assert (MQ, 7) in w.broker.pulls


def test_first_position_rules():
    w = World()
    w.broker.add(*(stored(o) for o in range(4)))
    last = w.consumer(consume_from_where=ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET)
    assert last.compute_pull_from_where(MQ) == 4  # max offset
    assert last.compute_pull_from_where(MessageQueue("%RETRY%G", 0)) == 0
    first = w.consumer()
    assert first.compute_pull_from_where(MQ) == 0
    w.broker.offsets[("G", MQ)] = 2
    assert last.compute_pull_from_where(MQ) == 2
    w.broker.query_error = True
    assert first.compute_pull_from_where(MQ) == -1


def test_clamp_suspend():
    assert clamp_suspend(-1, 1000) == 1000
    assert clamp_suspend(1, 1000) == 10
    assert clamp_suspend(60_000, 1000) == 30_000


def test_orderly_request_with_expired_client_lock_retries_lock_instead_of_consuming():
    w = World()
    w.broker.add(stored(0))
    seen = []
    c = w.consumer(
        OrderlyConsumer,
        listener=lambda m, x: seen.append(w.clock.now()) or ConsumeOrderlyStatus.SUCCESS,
        lock_first_delay_ms=100_000,  # keep lockAll out of the way
    )
    c.start()
    c.step()
    assert seen == [0]
    pq = c.process_queues[MQ]
    pq.last_lock_timestamp = -30_001  # older than 30 s on the client
    w.broker.add(stored(1))
    w.broker.grant_locks = False
    c.run_until(1000)  # the next pull finds message 1; the consume request sees the expiry
    assert seen == [0]
    assert [(t.kind, t.due) for t in c.timers.pending() if t.kind == "try_lock"] == [
        ("try_lock", 1100)
    ]
    c.run_until(1100)  # try-lock fails → resubmit 3000 ms later
    assert [(t.kind, t.due) for t in c.timers.pending() if t.kind == "consume"] == [
        ("consume", 4100)
    ]
    w.broker.grant_locks = True
    c.run_until(4209)  # still expired at 4100 → try-lock at 4200 is granted → consume at 4210
    assert seen == [0]
    c.run_until(4210)
    assert seen == [0, 4210]


def test_orderly_suspend_then_dlq_at_max_then_commit():
    w = World()
    w.broker.add(stored(0), stored(1))
    calls = []

    def listener(msgs, ctx):
        calls.append((w.clock.now(), msgs[0].queue_offset, msgs[0].reconsume_times))
        if msgs[0].queue_offset == 0:
            ctx.suspend_current_queue_time_millis = 2000
            return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        return ConsumeOrderlyStatus.SUCCESS

    c = w.consumer(OrderlyConsumer, listener=listener, max_reconsume_times=2)
    c.start()
    c.run_until(10_000)
    assert calls[:4] == [(0, 0, 0), (2000, 0, 1), (4000, 0, 2), (4000, 1, 0)]
    assert [(b[1], b[2], b[4]) for b in w.broker.send_backs] == [(10_000, -1, 2)]
    assert c.committed_offset(MQ) == 2
    starts = w.recorder.of("orderly_start")
    ends = w.recorder.of("orderly_end")
    assert len(starts) == len(ends) == 4
    assert ends[0].status == "SUSPEND_CURRENT_QUEUE_A_MOMENT"


def test_orderly_rebalance_needs_the_lock_and_unlocks_dropped_queues():
    w = World(queues=2)
    w.broker.add(stored(0, queue_id=0))
    c1 = w.consumer(OrderlyConsumer, cid="c1", listener=lambda m, x: None)
    c1.start()
    c1.step()
    assert set(c1.process_queues) == {MessageQueue("T", 0), MessageQueue("T", 1),
                                      MessageQueue("%RETRY%G", 0)}
    c2 = w.consumer(OrderlyConsumer, cid="c2", listener=lambda m, x: None)
    c2.start()
    c1.step()
    # c1 keeps T/0 and the retry queue; T/1 went to c2: it held no message → unlocked at once
    assert MessageQueue("T", 1) not in c1.process_queues
    assert ("c1", (MessageQueue("T", 1),)) in w.broker.unlock_calls


def test_orderly_manual_commit_success_keeps_commit_rollback_puts_back():
    """autoCommit=false (processConsumeResult, 4.9.8): SUCCESS commits nothing, COMMIT commits
    every message taken since the last commit, ROLLBACK puts them back and resubmits later."""
    w = World()
    w.broker.add(stored(0), stored(1), stored(2))
    calls = []
    c = None

    def listener(msgs, ctx):
        ctx.auto_commit = False
        off = msgs[0].queue_offset
        calls.append((w.clock.now(), off, c.committed_offset(MQ)))
        if off == 0:
            return ConsumeOrderlyStatus.SUCCESS
        if off == 1:
            return ConsumeOrderlyStatus.COMMIT
        if len([x for x in calls if x[1] == 2]) == 1:
            ctx.suspend_current_queue_time_millis = 1000
            return ConsumeOrderlyStatus.ROLLBACK
        return ConsumeOrderlyStatus.COMMIT

    c = w.consumer(OrderlyConsumer, listener=listener)
    c.start()
    c.run_until(5000)
    assert [x[1] for x in calls] == [0, 1, 2, 2]
    assert calls[1][2] < 1  # SUCCESS on 0 committed nothing
    assert calls[3][0] - calls[2][0] == 1000  # ROLLBACK: consumed again after the suspend time
    assert c.committed_offset(MQ) == 3
    ends = [e.status for e in w.recorder.of("orderly_end")]
    assert ends == ["SUCCESS", "COMMIT", "ROLLBACK", "COMMIT"]


def test_orderly_manual_commit_rollback_reconsumes_an_uncommitted_success():
    w = World()
    w.broker.add(stored(0), stored(1))
    seen = []

    def listener(msgs, ctx):
        ctx.auto_commit = False
        seen.append(msgs[0].queue_offset)
        if seen == [0, 1]:
            return ConsumeOrderlyStatus.ROLLBACK
        return ConsumeOrderlyStatus.SUCCESS if msgs[0].queue_offset == 0 else ConsumeOrderlyStatus.COMMIT

    c = w.consumer(OrderlyConsumer, listener=listener)
    c.start()
    c.run_until(5000)
    assert seen == [0, 1, 0, 1]  # the rollback put back 0 too (taken since the last commit)
    assert c.committed_offset(MQ) == 2


@pytest.mark.parametrize("status", [ConsumeOrderlyStatus.COMMIT, ConsumeOrderlyStatus.ROLLBACK])
def test_orderly_auto_commit_treats_commit_and_rollback_as_success(status):
    w = World()
    w.broker.add(stored(0))
    c = w.consumer(OrderlyConsumer, listener=lambda m, x: status)
    c.start()
    c.run_until(1000)
    assert c.committed_offset(MQ) == 1
    assert [e.status for e in w.recorder.of("consume")] == ["SUCCESS"]


def test_orderly_consume_lock_held_while_listener_runs_blocks_remove():
    w = World()
    w.broker.add(stored(0))
    seen = []
    c = None

    def listener(msgs, ctx):
        pq = c.process_queues[MQ]
        seen.append((pq.consume_lock_held, c.remove_unnecessary_message_queue(MQ, pq), pq.try_unlock_times))
        return ConsumeOrderlyStatus.SUCCESS

    c = w.consumer(OrderlyConsumer, listener=listener)
    c.start()
    c.run_until(1000)
    assert seen == [(True, False, 1)]
    pq = c.process_queues[MQ]
    assert not pq.consume_lock_held
    assert c.remove_unnecessary_message_queue(MQ, pq) is True


def test_orderly_rebalance_while_listener_busy_keeps_the_queue_locked():
    """RebalancePushImpl.removeUnnecessaryMessageQueue: consume lock busy → neither unlocked nor dropped."""
    w = World(queues=2)
    w.broker.add(stored(0, queue_id=0))
    joiner = w.consumer(OrderlyConsumer, cid="c0", listener=lambda m, x: ConsumeOrderlyStatus.SUCCESS)
    c = None
    during = []

    def listener(msgs, ctx):
        if not during:
            joiner.start()
            c.do_rebalance()  # the rebalance thread runs while this listener holds the consume lock
            pq = c.process_queues.get(MQ)
            unlocked = any(MQ in mqs for cid, mqs in w.broker.unlock_calls if cid == "c9")
            during.append((pq is not None, pq is not None and pq.dropped, pq and pq.try_unlock_times, unlocked))
        return ConsumeOrderlyStatus.SUCCESS

    c = w.consumer(OrderlyConsumer, cid="c9", listener=listener)
    c.start()
    c.run_until(100)
    assert during == [(True, True, 1, False)]  # kept, dropped, one failed try, still locked
    c.do_rebalance()  # the listener finished: the next rebalance unlocks and removes the queue
    assert MQ not in c.process_queues
    assert any(MQ in mqs for cid, mqs in w.broker.unlock_calls if cid == "c9")


def _slow_listener(w, ms, calls):
    def listener(msgs, ctx):
        calls.append(w.clock.now())
        w.clock.advance(ms)  # a listener that takes time: the clock moves while it runs
        return ConsumeOrderlyStatus.SUCCESS

    return listener


def test_orderly_loop_yields_after_max_time_consume_continuously():
    """B10: past MAX_TIME_CONSUME_CONTINUOUSLY (60 s) the request resubmits itself 10 ms later."""
    w = World()
    w.broker.add(*(stored(i) for i in range(4)))
    calls = []
    c = w.consumer(OrderlyConsumer, listener=_slow_listener(w, 25_000, calls), client_lock_max_live_ms=200_000)
    c.start()
    c.run_until(200_000)
    assert calls == [0, 25_000, 50_000, 75_010]
    assert c.committed_offset(MQ) == 4


def test_orderly_loop_lock_expired_by_a_long_listener_tries_lock_in_10ms():
    """B10: a listener that outlives the client's lock (30 s) ends the loop: tryLockLater 10 ms, then
    (lock granted) the request is resubmitted 10 ms later."""
    w = World()
    w.broker.add(stored(0), stored(1))
    calls = []
    c = w.consumer(OrderlyConsumer, listener=_slow_listener(w, 31_000, calls))
    c.start()
    c.run_until(100_000)
    assert calls == [0, 31_020]
    assert c.committed_offset(MQ) == 2
