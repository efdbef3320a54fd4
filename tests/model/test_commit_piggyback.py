"""Seed E15's client half: the commitOffset a pull carries (the reference client's ``piggyback``,
``model/consumer.py``) is judged by the audit's OFFSET_OVERRUN.

A model push consumer over ModelBroker, recorded: three messages, the first one's listener runs 30 s
(``context.runs_for_ms``) while the client goes on pulling. The honest piggyback sends the client's offset,
the smallest offset still in its ProcessQueue (0 while the first message runs, so nothing: the Java client
sends it only when it is > 0), and the trace audits clean. A deliberately broken piggyback (this test only)
sends what the pulls reached instead (``queue_offset_max + 1``): the broker stores 3 while offset 0 is still
being consumed, and OFFSET_OVERRUN reports it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rmqspec.model.broker import ModelBroker
from rmqspec.model.client_timers import Driver
from rmqspec.model.clock import ManualClock
from rmqspec.model.consumer import ConsumeFromWhere, ConsumerConfig
from rmqspec.model.consumer_concurrent import ConcurrentConsumer, ConsumeConcurrentlyStatus
from rmqspec.model.directory import Directory
from rmqspec.model.events import ListRecorder
from rmqspec.model.message import Message, MessageQueue
from rmqspec.model.producer import Producer
from rmqspec.traces.checker import check

RUNS_MS = 30_000


def _run(broken: Callable[[ConcurrentConsumer], Callable[[MessageQueue], None]] | None) -> list[dict[str, Any]]:
    clock, rec = ManualClock(1_700_000_000_000), ListRecorder()
    broker = ModelBroker(clock, recorder=rec)
    d = Directory()
    d.create_topic(broker, "T", 1)
    d.create_group(broker, "G")
    p = Producer(broker, clock, d, "P", recorder=rec)
    for i in range(3):
        p.send(Message("T", b"m%d" % i))

    def listener(msgs: Any, ctx: Any) -> ConsumeConcurrentlyStatus:
        if msgs[0].queue_offset == 0 and msgs[0].reconsume_times == 0:
            ctx.runs_for_ms = RUNS_MS
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    c = ConcurrentConsumer(broker, clock, d, "G", "c1", listener, recorder=rec,
                           config=ConsumerConfig(consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET))
    c.subscribe("T")
    if broken is not None:
        c.offset_store.piggyback = broken(c)  # type: ignore[method-assign]
    driver = Driver(clock, broker, max_step_ms=1000)
    driver.add(c)
    c.start()
    driver.run_for(2 * RUNS_MS)
    c.shutdown()
    rec.emit("drain", clock.now(), actor="test")
    return [e.as_row() for e in rec.events]


def _pulled_offset(c: ConcurrentConsumer) -> Callable[[MessageQueue], None]:
    """Piggyback what the pulls reached, not what was consumed."""
    store = c.offset_store

    def piggyback(mq: MessageQueue) -> None:
        pq = c.process_queues.get(mq)
        if pq is not None and pq.msg_count:
            store._send(mq, pq.queue_offset_max + 1)  # type: ignore[attr-defined]

    return piggyback


def test_the_honest_piggyback_audits_clean() -> None:
    rows = _run(None)
    assert [r["queue_offset"] for r in rows if r["event"] == "consume"] == [1, 2, 0]  # 0 answered 30 s later
    stored = [(r["ts"], r["queue_offset"]) for r in rows if r["event"] == "commit_offset" and r["actor"] == "G"]
    # 0 (the persist timer) while offset 0 runs, 3 once it is answered
    assert {o for ts, o in stored if ts < 1_700_000_000_000 + RUNS_MS} == {0} and stored[-1][1] == 3
    assert check(rows).violations == ()


def test_a_piggyback_past_a_running_message_is_offset_overrun() -> None:
    rows = _run(_pulled_offset)
    assert [r["queue_offset"] for r in rows if r["event"] == "commit_offset" and r["actor"] == "G"][:1] == [3]
    assert {f.code for f in check(rows).violations} == {"OFFSET_OVERRUN"}
