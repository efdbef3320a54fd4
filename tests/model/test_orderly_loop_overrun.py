"""The orderly loop's MAX_TIME_CONSUME_CONTINUOUSLY (seed 001, B10), judged by the audit: ORDERLY_LOOP_OVERRUN.

4.9.8's ``ConsumeMessageOrderlyService.ConsumeRequest.run`` (client jar, ``javap -c``) notes ``beginTime`` when
its loop starts and, before each batch, after the lock checks, resubmits itself 10 ms later and ends when
``now − beginTime > MAX_TIME_CONSUME_CONTINUOUSLY`` (``-Drocketmq.client.maxTimeConsumeContinuously``, 60000 ms).
The reference client states that interval on each ``orderly_start`` (``detail.loop_age_ms``, with its limit
``detail.loop_max_ms``), and the audit judges it.

Drawn runs (Hypothesis: listeners that take time, batch sizes, limits, suspends): the reference client's
trace audits clean, while a broken client of our own whose loop never yields (``Unyielding``: the check
left out) is caught by ORDERLY_LOOP_OVERRUN alone — exactly in the runs where the reference client yielded
(the two clients are deterministic and alike until the first yield).
"""

from __future__ import annotations

from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from rmqspec.model.broker import ModelBroker
from rmqspec.model.client_timers import Driver
from rmqspec.model.clock import ManualClock
from rmqspec.model.consumer import ConsumeFromWhere, ConsumerConfig
from rmqspec.model.consumer_orderly import ConsumeOrderlyStatus, OrderlyConsumer
from rmqspec.model.directory import Directory
from rmqspec.model.events import ListRecorder
from rmqspec.model.message import Message
from rmqspec.model.producer import Producer
from rmqspec.properties.codes import AuditParams
from rmqspec.traces.checker import check


class Yields(OrderlyConsumer):
    """The reference client, counting the times its loop yielded past MAX_TIME_CONSUME_CONTINUOUSLY with
    messages left to take."""

    yielded = 0

    def _past_max_time(self, interval: int) -> bool:
        past = super()._past_max_time(interval)
        self.yielded += past and any(pq.offsets() for pq in self.process_queues.values())  # a batch was left
        return past


class Unyielding(Yields):
    """A broken client: its loop never checks MAX_TIME_CONSUME_CONTINUOUSLY, so one busy queue keeps the
    consume thread (the other queues' requests wait)."""

    def _past_max_time(self, interval: int) -> bool:
        super()._past_max_time(interval)
        return False


def _run(cls: type[Yields], durations: list[int], statuses: list[bool], count: int, batch: int,
         max_ms: int, lock_ms: int = 30_000) -> tuple[list[dict[str, Any]], int, list[int]]:
    """``count`` messages on one queue; the listener's n-th call takes ``durations[n % len]`` ms and answers
    SUCCESS, or SUSPEND when ``statuses[n % len]`` is False; ``lock_ms``: the client lock's lifetime (the
    model's lockAll does not run inside a loop, so with 30 s a loop ends by the lock first: fidelity CL12).
    Returns (the trace rows, the times the loop yielded, the batches' stated loop ages)."""
    clock = ManualClock(1_000_000)
    rec = ListRecorder()
    broker = ModelBroker(clock, recorder=rec)  # the broker's rows: stores, locks
    d = Directory()
    d.create_topic(broker, "T", 1)
    d.create_group(broker, "G")
    driver = Driver(clock, broker, max_step_ms=1000)
    producer = Producer(broker, clock, d, "P", recorder=rec)
    driver.add(producer)
    calls = [0]

    def listener(msgs: Any, ctx: Any) -> ConsumeOrderlyStatus:
        n = calls[0]
        calls[0] += 1
        clock.advance(durations[n % len(durations)])  # a listener that takes time
        ctx.suspend_current_queue_time_millis = 500
        ok = statuses[n % len(statuses)]
        return ConsumeOrderlyStatus.SUCCESS if ok else ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT

    config = ConsumerConfig(consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                            consume_message_batch_max_size=batch, max_time_consume_continuously_ms=max_ms,
                            client_lock_max_live_ms=lock_ms)
    consumer = cls(broker, clock, d, "G", "c1", listener, recorder=rec, config=config)
    consumer.subscribe("T")
    driver.add(consumer)
    consumer.start()
    driver.run_until(clock.now() + 2_000)
    for i in range(count):
        producer.send(Message("T", b"m%d" % i))
    end = clock.now() + 3_000_000
    while clock.now() < end and len({e.queue_offset for e in rec.events if e.event == "consume" and e.status
                                     == "SUCCESS"}) < count:
        driver.run_until(clock.now() + 50_000)  # until every message was consumed: the drain says so
    rec.emit("drain", clock.now(), actor="test")
    rows = [e.as_row() for e in rec.events]
    ages = [r["detail"]["loop_age_ms"] for r in rows if r["event"] == "orderly_start"]
    return rows, consumer.yielded, ages


RUNS = dict(
    durations=st.lists(st.one_of(st.integers(0, 25_000), st.sampled_from([0, 10_000, 20_000, 25_000])), min_size=1,
                       max_size=5),
    statuses=st.lists(st.booleans(), min_size=1, max_size=4).map(lambda s: [True, *s]),
    count=st.integers(1, 10),
    batch=st.integers(1, 3),
    max_ms=st.one_of(st.just(60_000), st.integers(1_000, 40_000), st.integers(40_000, 70_000)),
    lock_ms=st.sampled_from([30_000, 200_000]),
)


@settings(max_examples=40, deadline=None)
@given(**RUNS)
@example(durations=[25_000], statuses=[True], count=4, batch=1, max_ms=60_000, lock_ms=200_000)  # yields at 75 s
@example(durations=[6_932], statuses=[True], count=3, batch=1, max_ms=13_868, lock_ms=30_000)  # yields, none left
@example(durations=[0], statuses=[True], count=8, batch=1, max_ms=60_000, lock_ms=30_000)  # never yields
def test_the_reference_loop_audits_clean_and_an_unyielding_one_is_caught(
    durations: list[int], statuses: list[bool], count: int, batch: int, max_ms: int, lock_ms: int
) -> None:
    params = AuditParams(client_lock_ms=lock_ms)  # the audit's client lock lifetime is the client's
    rows, yielded, ages = _run(Yields, durations, statuses, count, batch, max_ms, lock_ms)
    report = check(rows, params)
    assert report.violations == (), [f.as_dict() for f in report.violations]
    assert ages and all(a <= max_ms for a in ages)
    broken, _, broken_ages = _run(Unyielding, durations, statuses, count, batch, max_ms, lock_ms)
    found = {f.code for f in check(broken, params).violations}
    assert found == ({"ORDERLY_LOOP_OVERRUN"} if yielded else set()), (found, yielded, broken_ages)


def test_the_fixed_example_yields_at_60_s_and_the_broken_loop_takes_the_fourth_batch_at_75_s() -> None:
    """B10's fixed example (starts 0, 25 s, 50 s, then 75.01 s after a resubmit): the unyielding loop takes the
    fourth batch 75 s into its loop, reported with that age."""
    rows, yielded, ages = _run(Yields, [25_000], [True], 4, 1, 60_000, 200_000)
    assert (yielded, ages) == (1, [0, 25_000, 50_000, 0])
    params = AuditParams(client_lock_ms=200_000)
    assert check(rows, params).violations == ()
    broken, _, broken_ages = _run(Unyielding, [25_000], [True], 4, 1, 60_000, 200_000)
    assert broken_ages == [0, 25_000, 50_000, 75_000]
    [finding] = check(broken, params).violations
    start = next(r for r in broken if r["event"] == "orderly_start" and r["detail"]["loop_age_ms"] == 75_000)
    assert (finding.code, finding.seqs) == ("ORDERLY_LOOP_OVERRUN", (start["seq"],))
    assert "75000 ms into its consume request's loop" in finding.reason
