"""The pull guards of the reference push consumer (seed row E9; ``model/pull_flow.py``).

Facts from ``javap -c -p`` of rocketmq-client-4.9.8.jar: ``DefaultMQPushConsumerImpl.pullMessage`` checks
dropped, then ``isPause()`` (re-arm after 1000 ms), then ``msgCount > pullThresholdForQueue``, then
``msgSize / 1 MiB > pullThresholdSizeForQueue``, then (concurrent) the span, each re-arming after 50 ms;
``doRebalance`` does nothing while paused and ``resume()`` rebalances; ``RebalancePushImpl
.messageQueueChanged`` sets the per-queue thresholds to ``max(1, perTopic / processQueueTable.size())``
when the per-topic value is not −1; ``ProcessQueue`` counts body bytes only.

The judge (``flow_violations``) reads what a watching broker saw at each pull — the time, whether the
test had suspended the client, the queue's cached count and bytes, the size of the client's process-queue
table — and derives the thresholds itself from the config, so it does not trust the client's own
numbers. The reference client's drawn runs (concurrent and orderly, suspend windows, slow listeners,
large bodies, per-topic thresholds) are clean and consume everything; each broken client below (one
guard left out) is caught by it in a small fixed run, and in the property's own drawn runs
(``test_the_drawn_runs_catch_each_broken_client``).
"""

from __future__ import annotations

import attrs
import pytest
from hypothesis import Phase, find, given, settings
from hypothesis import strategies as st

from rmqspec.model.broker import ModelBroker
from rmqspec.model.client_timers import Driver
from rmqspec.model.clock import ManualClock
from rmqspec.model.consumer import ConsumeFromWhere, ConsumerConfig, PushConsumer
from rmqspec.model.consumer_concurrent import ConcurrentConsumer, ConsumeConcurrentlyStatus
from rmqspec.model.consumer_orderly import ConsumeOrderlyStatus, OrderlyConsumer
from rmqspec.model.directory import Directory
from rmqspec.model.events import ListRecorder
from rmqspec.model.message import Message, MessageQueue
from rmqspec.model.process_queue import MIB, ProcessQueue
from rmqspec.model.producer import Producer
from rmqspec.model.pull_flow import PULL_TIME_DELAY_MILLS_WHEN_SUSPEND, UNLIMITED, FlowThresholds, held_back
from tests.model.test_client_unit import MQ, OK, World, stored

T0 = 1_700_000_000_000
FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


# ---------------------------------------------------------------------------
# The judge


@attrs.frozen
class PullSeen:
    ts: int
    mq: MessageQueue
    suspended: bool  # the test had called suspend() and not yet resume()
    count: int
    size: int
    queue_count: int  # the client's process-queue table


def expected_thresholds(cfg: ConsumerConfig, queue_count: int) -> tuple[int, int]:
    """What messageQueueChanged leaves for a table of ``queue_count`` queues (the judge's own arithmetic)."""
    count, size = cfg.pull_threshold_for_queue, cfg.pull_threshold_size_for_queue
    if queue_count:
        if cfg.pull_threshold_for_topic != UNLIMITED:
            count = max(1, cfg.pull_threshold_for_topic // queue_count)
        if cfg.pull_threshold_size_for_topic != UNLIMITED:
            size = max(1, cfg.pull_threshold_size_for_topic // queue_count)
    return count, size


def flow_violations(cfg: ConsumerConfig, pulls: list[PullSeen]) -> list[str]:
    """Every pull a 4.9.8 client would not have sent: while suspended, or over a cache threshold."""
    found = []
    for p in pulls:
        count_max, size_max = expected_thresholds(cfg, p.queue_count)
        if p.suspended:
            found.append(f"{p.ts}: pulled {p.mq} while suspended")
        if p.count > count_max:
            found.append(f"{p.ts}: pulled {p.mq} holding {p.count} messages > {count_max}")
        if p.size // MIB > size_max:
            found.append(f"{p.ts}: pulled {p.mq} holding {p.size // MIB} MiB > {size_max}")
    return found


class WatchedBroker(ModelBroker):
    """The model broker, noting the client's cache at each pull of the watched group."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__(clock)
        self.watched: PushConsumer | None = None
        self.suspended = False
        self.pulls: list[PullSeen] = []

    def pull(self, group, mq, offset, *args, **kwargs):
        c = self.watched
        if c is not None and group == c.group and mq in c.process_queues:
            pq = c.process_queues[mq]
            self.pulls.append(PullSeen(self.clock.now(), mq, self.suspended, pq.msg_count, pq.msg_size,
                                       len(c.process_queues)))
        return super().pull(group, mq, offset, *args, **kwargs)


# ---------------------------------------------------------------------------
# Broken clients: each leaves out one guard


def _broken(base: type[PushConsumer], **overrides: bool) -> type[PushConsumer]:
    """``base`` with the guards ``overrides`` names left out (the judge must catch each)."""

    class Broken(base):  # type: ignore[misc, valid-type]
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            if overrides.get("static_thresholds"):
                self.thresholds = _StaticThresholds.of(self.config)
            if overrides.get("ignore_size"):
                self.thresholds = _NoSizeThresholds.of(self.config)

        def pull_message(self, req) -> None:
            if overrides.get("ignore_suspend") and self.paused:
                self.paused = False
                try:
                    super().pull_message(req)
                finally:
                    self.paused = True
                return
            super().pull_message(req)

    return Broken


class _NoSizeThresholds(FlowThresholds):
    """No size limit (a client without msgSize accounting)."""

    def __attrs_post_init__(self) -> None:
        self.size_for_queue = 2**31 - 1

    def on_queues_changed(self, config, queue_count) -> None:
        super().on_queues_changed(config, queue_count)
        self.size_for_queue = 2**31 - 1


class _StaticThresholds(FlowThresholds):
    def on_queues_changed(self, config, queue_count) -> None:
        """Never recomputed: the per-topic thresholds are ignored."""


# ---------------------------------------------------------------------------
# Runs


@attrs.frozen
class Plan:
    orderly: bool
    queues: int
    bodies: tuple[int, ...]  # body sizes, one message each, sent at start
    listener_ms: int  # how long a concurrent listener runs / an orderly one suspends its first try
    pauses: tuple[tuple[int, int], ...]  # (start after T0, length), in order, not overlapping
    config: ConsumerConfig


def run(plan: Plan, cls: type[PushConsumer] | None = None) -> tuple[WatchedBroker, set[str], set[str]]:
    """Run ``plan``; the broker, the keys sent and the keys consumed with SUCCESS."""
    clock = ManualClock(T0)
    broker = WatchedBroker(clock)
    d = Directory()
    d.create_topic(broker, "T", plan.queues)
    d.create_group(broker, "G")
    rec = ListRecorder()
    seen: set[int] = set()

    def concurrent(msgs, ctx):
        ctx.runs_for_ms = plan.listener_ms
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    def orderly(msgs, ctx):
        first = [m for m in msgs if (m.queue_id, m.queue_offset) not in seen]
        seen.update((m.queue_id, m.queue_offset) for m in msgs)
        if first and plan.listener_ms >= 10:
            ctx.suspend_current_queue_time_millis = plan.listener_ms
            return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        return ConsumeOrderlyStatus.SUCCESS

    base = cls or (OrderlyConsumer if plan.orderly else ConcurrentConsumer)
    c = base(broker, clock, d, "G", "c1", orderly if plan.orderly else concurrent, config=plan.config,
             recorder=rec)
    c.subscribe("T")
    broker.watched = c
    bodies = {n: bytes(n) for n in set(plan.bodies)}
    sent = set()
    p = Producer(broker, clock, d, "P")
    for i, n in enumerate(plan.bodies):
        sent.add(p.send(Message("T", bodies[n]), queue_id=i % plan.queues).uniq_key)
    driver = Driver(clock, broker, max_step_ms=1000)
    driver.add(c)
    c.start()
    driver.step()
    for start, length in plan.pauses:
        driver.run_until(T0 + start)
        c.suspend()
        broker.suspended = True
        driver.run_until(T0 + start + length)
        broker.suspended = False
        c.resume()
    driver.run_for(240_000)
    c.shutdown()
    consumed = {e.as_row()["msg_key"] for e in rec.events
                if e.as_row()["event"] == "consume" and e.as_row()["status"] == "SUCCESS"}
    return broker, sent, consumed


def _pauses(draw) -> tuple[tuple[int, int], ...]:
    out, t = [], 0
    for _ in range(draw(st.integers(0, 3))):
        t += draw(st.integers(0, 5_000))
        length = draw(st.integers(1, 8_000))
        out.append((t, length))
        t += length
    return tuple(out)


@st.composite
def plans(draw) -> Plan:
    orderly = draw(st.booleans())
    cfg = ConsumerConfig(
        consume_from_where=FIRST,
        pull_batch_size=draw(st.integers(1, 8)),
        pull_threshold_for_queue=draw(st.one_of(st.just(1000), st.integers(1, 12))),
        pull_threshold_size_for_queue=draw(st.integers(1, 3)),
        pull_threshold_for_topic=draw(st.one_of(st.just(UNLIMITED), st.sampled_from([1, 3, 10, 40]))),
        pull_threshold_size_for_topic=draw(st.one_of(st.just(UNLIMITED), st.sampled_from([1, 2, 6]))),
    )
    return Plan(
        orderly=orderly,
        queues=draw(st.integers(1, 3)),
        bodies=(draw(st.sampled_from([700_000, 300_000, 16])),) * draw(st.integers(1, 18))
        + tuple(draw(st.lists(st.sampled_from([16, 1_100_000]), max_size=3))),
        listener_ms=draw(st.sampled_from([2_500, 600, 40, 0])),
        pauses=_pauses(draw),
        config=cfg,
    )


@given(plans())
def test_the_reference_client_never_pulls_past_a_guard_and_consumes_everything(plan):
    broker, sent, consumed = run(plan)
    assert flow_violations(plan.config, broker.pulls) == []
    assert consumed == sent
    assert broker.pulls  # the judge had something to read


@pytest.mark.parametrize("fault", ["ignore_suspend", "ignore_size", "static_thresholds"])
def test_the_drawn_runs_catch_each_broken_client(fault):
    """The property's own runs have the power: drawing as the property does (derandomized, no shrinking), a
    run where the judge catches the client without ``fault``'s guard turns up within the ci budget."""

    def caught(plan: Plan) -> bool:
        cls = _broken(OrderlyConsumer if plan.orderly else ConcurrentConsumer, **{fault: True})
        return bool(flow_violations(plan.config, run(plan, cls)[0].pulls))

    found = find(plans(), caught, settings=settings(max_examples=60, derandomize=True, database=None,
                                                    phases=[Phase.generate]))
    assert caught(found)


SMALL = Plan(orderly=False, queues=2, bodies=(700_000,) * 8, listener_ms=2_500, pauses=((0, 3_000),),
             config=ConsumerConfig(consume_from_where=FIRST, pull_batch_size=2, pull_threshold_for_queue=3,
                                   pull_threshold_size_for_queue=1, pull_threshold_for_topic=UNLIMITED))


def test_the_fixed_run_is_clean_for_the_reference_client():
    broker, sent, consumed = run(SMALL)
    assert flow_violations(SMALL.config, broker.pulls) == [] and consumed == sent


def test_a_client_that_pulls_while_suspended_is_caught():
    broker, _, _ = run(SMALL, _broken(ConcurrentConsumer, ignore_suspend=True))
    assert any("while suspended" in v for v in flow_violations(SMALL.config, broker.pulls))


def test_a_client_without_the_size_guard_is_caught():
    plan = attrs.evolve(SMALL, pauses=(), config=attrs.evolve(SMALL.config, pull_threshold_for_queue=1000))
    broker, sent, consumed = run(plan)
    assert flow_violations(plan.config, broker.pulls) == [] and consumed == sent
    assert max(p.size for p in broker.pulls) // MIB == 1  # the size guard held the queues back
    broker, _, _ = run(plan, _broken(ConcurrentConsumer, ignore_size=True))
    assert any("MiB >" in v for v in flow_violations(plan.config, broker.pulls))


def test_a_client_that_ignores_the_per_topic_threshold_is_caught():
    cfg = attrs.evolve(SMALL.config, pull_threshold_for_queue=1000, pull_threshold_size_for_queue=100,
                       pull_threshold_for_topic=4)  # 3 queues (T's 2 and the retry topic's): 1 each
    plan = attrs.evolve(SMALL, bodies=(16,) * 12, pauses=(), config=cfg)
    broker, _, _ = run(plan, _broken(ConcurrentConsumer, static_thresholds=True))
    assert any("messages > 1" in v for v in flow_violations(cfg, broker.pulls))
    broker, sent, consumed = run(plan)
    assert flow_violations(cfg, broker.pulls) == [] and consumed == sent


def test_an_orderly_client_that_pulls_while_suspended_is_caught():
    plan = attrs.evolve(SMALL, orderly=True, listener_ms=1_000)
    broker, _, _ = run(plan, _broken(OrderlyConsumer, ignore_suspend=True))
    assert any("while suspended" in v for v in flow_violations(plan.config, broker.pulls))


# ---------------------------------------------------------------------------
# The guards' order and delays, one at a time


def _cfg(**kw) -> ConsumerConfig:
    return ConsumerConfig(**kw)


def test_held_back_follows_pull_messages_order():
    cfg = _cfg(pull_threshold_for_queue=2, pull_threshold_size_for_queue=1, consume_concurrently_max_span=5)
    th = FlowThresholds.of(cfg)
    pq = ProcessQueue()
    assert held_back(cfg, th, pq, paused=False, orderly=False) is None
    assert held_back(cfg, th, pq, paused=True, orderly=False) == PULL_TIME_DELAY_MILLS_WHEN_SUSPEND == 1000
    big = [attrs.evolve(stored(o), body=bytes(MIB // 2 + 1)) for o in range(3)]
    pq.put_messages(big[:2])  # 2 messages, 1 MiB + 2 bytes: 1 whole MiB, not over 1
    assert pq.msg_size == 2 * (MIB // 2 + 1) and pq.msg_size_mib == 1
    assert held_back(cfg, th, pq, paused=False, orderly=False) is None
    pq.put_messages(big[2:])  # 3 > 2 messages
    assert held_back(cfg, th, pq, paused=False, orderly=False) == cfg.flow_control_delay_ms == 50
    assert held_back(cfg, th, pq, paused=True, orderly=False) == 1000  # pause is checked first
    pq.remove_messages([0])  # 2 messages, 1 MiB: free again
    assert held_back(cfg, th, pq, paused=False, orderly=False) is None
    pq.put_messages([attrs.evolve(stored(9), body=bytes(MIB))])  # 3 messages again, 2 MiB
    th.for_queue = 10
    assert held_back(cfg, th, pq, paused=False, orderly=False) == 50  # the size guard
    th.size_for_queue = 2
    assert held_back(cfg, th, pq, paused=False, orderly=False) == 50  # the span: 9 − 1 > 5
    assert held_back(cfg, th, pq, paused=False, orderly=True) is None  # orderly has no span guard


def test_thresholds_follow_message_queue_changed():
    cfg = _cfg(pull_threshold_for_queue=7, pull_threshold_size_for_queue=9, pull_threshold_for_topic=10,
               pull_threshold_size_for_topic=UNLIMITED)
    th = FlowThresholds.of(cfg)
    th.on_queues_changed(cfg, 0)
    assert (th.for_queue, th.size_for_queue) == (7, 9)  # an empty table changes nothing
    th.on_queues_changed(cfg, 3)
    assert (th.for_queue, th.size_for_queue) == (3, 9)
    th.on_queues_changed(cfg, 11)
    assert th.for_queue == 1  # at least 1
    cfg2 = _cfg(pull_threshold_size_for_topic=5)
    th2 = FlowThresholds.of(cfg2)
    th2.on_queues_changed(cfg2, 2)
    assert (th2.for_queue, th2.size_for_queue) == (1000, 2)


def test_suspend_rearms_pulls_after_1000_ms_and_stops_rebalancing():
    w = World(queues=2)
    w.broker.add(stored(0))
    c = w.consumer()
    c.start()
    c.step()
    pulled = len(w.broker.pulls)  # each queue once, T-0 twice (FOUND pulls again at once)
    assert pulled == 4
    c.suspend()
    c.run_until(1_000)  # the empty pulls' re-arm (long_polling_recheck_ms) finds the client suspended
    assert len(w.broker.pulls) == pulled
    assert sorted({t.due for t in c.timers.pending() if t.kind == "pull"}) == [2_000]
    c.run_until(1_999)
    assert sorted({t.due for t in c.timers.pending() if t.kind == "pull"}) == [2_000]
    w.directory.add_route("T", 4)  # two more queues: the 20 s rebalance would take them
    c.run_until(45_000)
    assert len(w.broker.pulls) == pulled and len(c.process_queues) == 3  # T's 2 and the retry queue
    assert sorted({t.due for t in c.timers.pending() if t.kind == "pull"}) == [46_000]
    c.resume()  # a rebalance at once takes the new queues; the held pulls run at their next turn
    assert len(c.process_queues) == 5
    c.step()
    assert len(w.broker.pulls) == pulled + 2  # the new queues' first pulls
    c.run_until(46_000)  # the three held pulls, and the new queues' re-pulls after their empty ones
    assert len(w.broker.pulls) == pulled + 2 + 3 + 2


def test_the_per_topic_threshold_is_divided_by_the_whole_table():
    w = World(queues=4)
    c = w.consumer(pull_threshold_for_topic=100, pull_threshold_size_for_topic=7)
    c.start()
    c.step()
    assert len(c.process_queues) == 5  # T's 4 and the retry topic's 1
    assert (c.thresholds.for_queue, c.thresholds.size_for_queue) == (20, 1)
    c2 = w.consumer(cid="c2", pull_threshold_for_topic=100, pull_threshold_size_for_topic=7)
    c2.start()  # joins the group: c1 rebalances at once
    c.step()
    assert len(c.process_queues) == 3  # 2 of T's, the retry queue (AVG: c1 is first)
    assert (c.thresholds.for_queue, c.thresholds.size_for_queue) == (33, 2)


def test_a_size_held_queue_is_pulled_50_ms_after_its_cache_drains():
    w = World()
    w.broker.add(*[attrs.evolve(stored(o), body=bytes(MIB)) for o in range(3)])
    c = w.consumer(listener=_slow(500), pull_threshold_size_for_queue=1)
    c.start()
    c.step()
    assert [o for q, o in w.broker.pulls if q == MQ] == [0]  # 3 MiB cached: held back
    c.run_until(499)
    assert [o for q, o in w.broker.pulls if q == MQ] == [0]
    due = [t.due for t in c.timers.pending() if t.kind == "pull" and t.key == MQ]
    assert due == [500]  # 50 ms steps
    c.run_until(500)  # the listeners answer at 500; the pull at 500 ran before them
    assert c.process_queues[MQ].msg_size == 0
    c.run_until(550)
    assert [o for q, o in w.broker.pulls if q == MQ] == [0, 3]


def _slow(ms: int):
    def listener(msgs, ctx):
        ctx.runs_for_ms = ms
        return OK

    return listener
