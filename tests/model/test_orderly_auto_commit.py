"""Orderly consumption without autoCommit (seed 001, B13): COMMIT and ROLLBACK, judged by the audit.

4.9.8's ConsumeMessageOrderlyService.processConsumeResult with ``context.setAutoCommit(false)``: SUCCESS
commits nothing, COMMIT commits everything the queue consumed since the last commit, ROLLBACK puts all of
it back, consumed again in order after the suspend time. The reference client's trace audits clean (the
re-consumption is DUPLICATED, an observation; ORDER_KEY_REORDERED compares anew after the owner's
ROLLBACK), and a client whose ROLLBACK forgets what it took loses those messages (LOST)."""

from __future__ import annotations

from typing import Any

from rmqspec.model.broker import ModelBroker
from rmqspec.model.client_timers import Driver
from rmqspec.model.clock import ManualClock
from rmqspec.model.consumer import ConsumeFromWhere, ConsumerConfig
from rmqspec.model.consumer_orderly import ConsumeOrderlyStatus, OrderlyConsumer
from rmqspec.model.directory import Directory
from rmqspec.model.events import ListRecorder
from rmqspec.model.message import Message
from rmqspec.model.producer import Producer
from rmqspec.traces.checker import check


class ForgetfulRollback(OrderlyConsumer):
    """A broken client: its ROLLBACK drops what it took instead of putting it back."""

    def process_consume_result(self, msgs, status, context, pq, mq) -> bool:
        if status is ConsumeOrderlyStatus.ROLLBACK and not context.auto_commit:
            pq.commit()  # forgotten: neither committed nor consumed again
            return True
        return super().process_consume_result(msgs, status, context, pq, mq)


def _run(cls: type[OrderlyConsumer]) -> tuple[list[dict[str, Any]], list[bytes]]:
    clock = ManualClock(1_000_000)
    rec = ListRecorder()
    broker = ModelBroker(clock, recorder=rec)  # the broker's own rows: stores, locks
    d = Directory()
    d.create_topic(broker, "T", 1)
    d.create_group(broker, "G")
    driver = Driver(clock, broker, max_step_ms=100)
    producer = Producer(broker, clock, d, "P", recorder=rec)
    driver.add(producer)
    seen: list[bytes] = []
    answers = iter([ConsumeOrderlyStatus.SUCCESS, ConsumeOrderlyStatus.SUCCESS, ConsumeOrderlyStatus.ROLLBACK])

    def listener(msgs: Any, ctx: Any) -> ConsumeOrderlyStatus:
        ctx.auto_commit = False
        ctx.suspend_current_queue_time_millis = 1000
        seen.extend(m.body for m in msgs)
        return next(answers, ConsumeOrderlyStatus.COMMIT)

    consumer = cls(broker, clock, d, "G", "c1", listener, recorder=rec,
                   config=ConsumerConfig(consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET))
    consumer.subscribe("T")
    driver.add(consumer)
    consumer.start()
    driver.run_until(clock.now() + 2_000)
    for body in (b"a", b"b", b"c", b"d"):
        producer.send(Message("T", body))
    driver.run_until(clock.now() + 30_000)
    rec.emit("drain", clock.now(), actor="test")
    return [e.as_row() for e in rec.events], seen


def test_a_rollback_consumes_everything_uncommitted_again_and_audits_clean() -> None:
    rows, seen = _run(OrderlyConsumer)
    assert seen[:3] == [b"a", b"b", b"c"] and seen[3:6] == [b"a", b"b", b"c"] and seen[-1] == b"d"
    assert [r["status"] for r in rows if r["event"] == "orderly_end"][2] == "ROLLBACK"
    report = check(rows)
    assert report.violations == ()
    assert {f.code for f in report.observations} == {"DUPLICATED"}  # a and b: consumed, rolled back, again
    # the rollback is what makes the second pass in order: without it, the owner went backwards
    unmarked = [{**r, "status": None} if r["status"] == "ROLLBACK" else r for r in rows]
    assert {f.code for f in check(unmarked).violations} == {"ORDER_KEY_REORDERED"}


def test_a_rollback_that_forgets_loses_messages() -> None:
    rows, seen = _run(ForgetfulRollback)
    assert seen == [b"a", b"b", b"c", b"d"]
    lost = [f for f in check(rows).violations if f.code == "LOST"]
    assert lost, "a, b and c were taken, rolled back and never consumed: LOST"
