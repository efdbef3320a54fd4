"""Recorded traces of RocketMQ 5.x timer messages: the model broker run by the reference client.

``model_timer_trace(seed)`` runs ``ModelBroker`` under a 5.x profile (``default_config``) with one
concurrent consumer group and one producer: a random mix of timer messages (``TIMER_DELAY_MS``,
``TIMER_DELAY_SEC``, ``TIMER_DELIVER_MS``, some already due, some with a delay level too, which wins),
plain messages and failures consumed again (retries), with kill and power crashes (each followed by
a recovery) and clean restarts between the sends; then the trace ends with a ``drain`` once
everything was consumed, or (``drain_early``) while some timer messages still wait in the wheel.
What it recorded is what the model did, so the audit must find no violation in it (a drain before
the work is done leaves other messages unconsumed: only the timer codes and LOST of the waiting
timer messages speak of the model then).
"""

from __future__ import annotations

import random
from typing import Any

import attrs

from rmqspec.model.broker import ModelBroker
from rmqspec.model.client_timers import Driver
from rmqspec.model.clock import ManualClock
from rmqspec.model.config import default_config
from rmqspec.model.consumer import ConsumeFromWhere, ConsumerConfig
from rmqspec.model.consumer_concurrent import ConcurrentConsumer, ConsumeConcurrentlyStatus
from rmqspec.model.directory import Directory
from rmqspec.model.events import ListRecorder
from rmqspec.model.ids import UniqKeyFactory
from rmqspec.model.message import Message
from rmqspec.model.producer import Producer
from rmqspec.model.timer import is_timer_request, requested_ms

T0 = 1_700_000_000_000
VERSION = "rocketmq-5.2"
_OK = ConsumeConcurrentlyStatus.CONSUME_SUCCESS
_LATER = ConsumeConcurrentlyStatus.RECONSUME_LATER


def _listener(msgs: list[Any], _ctx: Any) -> ConsumeConcurrentlyStatus:
    """``flaky-`` messages fail once."""
    m = msgs[0]
    return _LATER if m.body.startswith(b"flaky") and m.reconsume_times < 1 else _OK


def _properties(rnd: random.Random, now: int) -> dict[str, str]:
    x = rnd.random()
    if x < 0.3:
        return {"TIMER_DELAY_MS": str(rnd.randrange(1, 5000))}
    if x < 0.45:
        return {"TIMER_DELAY_SEC": str(rnd.randrange(0, 6))}
    if x < 0.55:
        return {"TIMER_DELIVER_MS": str(now + rnd.randrange(-2000, 6000))}
    return {}


def _timer_detail(props: dict[str, str], now: int, broker: ModelBroker) -> dict[str, Any]:
    """``detail.timer`` of a timer request put at ``now`` (``conform_timer.TimerRules._timer_plan``'s)."""
    requested = requested_ms(props, now)
    return {"requested": requested, "parsed": requested is not None, "precision": broker.config.timer_precision_ms,
            "max_delay_ms": broker.config.timer_max_delay_sec * 1000}


def model_timer_trace(seed: int, drain_early: bool = False, requests: bool = False) -> list[dict[str, Any]]:
    """The rows one seeded run recorded (see the module docstring)."""
    rnd = random.Random(seed)
    clock = ManualClock(T0 + rnd.randrange(1000))
    recorder = ListRecorder()
    broker = ModelBroker(clock, default_config(VERSION), recorder)
    directory = Directory()
    directory.create_topic(broker, "T", 2)
    directory.create_group(broker, "G")
    driver = Driver(clock, broker, max_step_ms=rnd.choice((20, 100, 300)))
    config = ConsumerConfig(consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    consumer = ConcurrentConsumer(broker, clock, directory, "G", "c1", _listener, config=config, recorder=recorder)
    consumer.subscribe("T")
    producer = Producer(broker, clock, directory, "P", recorder=recorder, uniq_keys=UniqKeyFactory("10.0.0.5", pid=7))
    driver.add(consumer)
    driver.add(producer)
    consumer.start()
    driver.step()
    timers: dict[int, dict[str, Any]] = {}  # seq of a timer request's send row -> its detail.timer
    for i in range(rnd.randint(5, 30)):
        body = b"flaky-%d" % i if rnd.random() < 0.2 else b"m-%d" % i
        level = 2 if rnd.random() < 0.05 else 0
        props = _properties(rnd, clock.now())
        before = len(recorder.events)
        producer.send(Message("T", body, properties=dict(props), delay_level=level))
        if is_timer_request(props):
            timers.update({e.seq: _timer_detail(props, e.ts, broker) for e in recorder.events[before:]
                           if e.event == "send"})
        driver.run_for(rnd.randrange(0, 900))
        x = rnd.random()
        if x < 0.12:
            broker.crash(rnd.choice(("kill", "power")))
            clock.advance(rnd.randrange(1, 3000))
            broker.recover()
        elif x < 0.17:
            broker.close()
            clock.advance(500)
            broker.reopen()
    driver.run_for(rnd.randrange(0, 3000) if drain_early else 60_000)
    consumer.shutdown()
    recorder.emit("drain", clock.now(), actor="test")
    rows = [e.as_row() for e in recorder.events]
    for seq, timer in timers.items() if requests else ():
        rows[seq]["detail"] = {**(rows[seq]["detail"] or {}), "timer": timer}
    return rows


def model_restart_timer_trace(seed: int, flush: str = "SYNC") -> list[dict[str, Any]]:
    """Timer messages waiting in the wheel across a power loss and a second crash close behind it.

    ``ModelBroker`` under ``default_config("rocketmq-5.2")`` (``flush`` "ASYNC": the same with ASYNC
    flushing), one consumer group, the rows its ``ListRecorder`` kept: rounds of a few timer sends
    (0.5-8 s), time for the checkpoint to count them, a ``power`` crash, more timer sends at once
    (under ASYNC the power loss kept only the flushed records, so they reuse the timer-queue
    positions it freed), then, before the next checkpoint (100-900 ms), a ``kill`` or a second
    ``power`` crash; then the wheel is left to deliver everything and the trace ends with a
    ``drain``. A power crash's row lists ``detail.at_risk`` (the msg_keys of the unflushed records,
    as the conformance machine lists those written since its last flush: ``conform_time.py``);
    under SYNC nothing is at risk and no position is reused. What it recorded is what the model did:
    no rule may find a violation in it.
    """
    rnd = random.Random(seed)
    clock = ManualClock(T0 + rnd.randrange(1000))
    recorder = ListRecorder()
    config = default_config(VERSION)
    broker = ModelBroker(clock, config if flush == "SYNC" else attrs.evolve(config, flush=flush), recorder)
    directory = Directory()
    directory.create_topic(broker, "T", 1)
    directory.create_group(broker, "G")
    driver = Driver(clock, broker, max_step_ms=rnd.choice((20, 100)))
    consumer = ConcurrentConsumer(broker, clock, directory, "G", "c1", _listener, recorder=recorder,
                                  config=ConsumerConfig(consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET))
    consumer.subscribe("T")
    producer = Producer(broker, clock, directory, "P", recorder=recorder, uniq_keys=UniqKeyFactory("10.0.0.6", pid=9))
    driver.add(consumer)
    driver.add(producer)
    consumer.start()
    driver.step()
    at_risk: dict[int, list[str]] = {}

    def send(n: int) -> None:
        for _ in range(n):
            producer.send(Message("T", b"t", properties={"TIMER_DELAY_MS": str(rnd.randrange(500, 8000))}))
            driver.run_for(rnd.randrange(0, 50))

    def crash(kind: str) -> None:
        unflushed = broker.records()[broker.durability.flushed:] if kind == "power" else ()
        keys = sorted({key for r in unflushed if (key := r.prop("UNIQ_KEY"))})
        broker.crash(kind)
        if keys:
            at_risk[recorder.events[-1].seq] = keys
        clock.advance(rnd.randrange(1, 200))
        broker.recover(broker.recovery_choices()[0])  # the fewest survivors a crash of this kind allows

    for _ in range(rnd.randint(1, 3)):
        send(rnd.randint(1, 4))
        driver.run_for(rnd.randrange(1000, 2500))  # the checkpoint counts the copies
        crash("power")
        send(rnd.randint(1, 4))
        driver.run_for(rnd.randrange(100, 900))  # before the next checkpoint
        crash(rnd.choice(("kill", "power")))
    driver.run_for(30_000)
    consumer.shutdown()
    recorder.emit("drain", clock.now(), actor="test")
    rows = [e.as_row() for e in recorder.events]
    for seq, keys in at_risk.items():
        rows[seq]["detail"] = {**(rows[seq]["detail"] or {}), "at_risk": keys}
    return rows


def reused_timer_positions(rows: list[dict[str, Any]]) -> set[str]:
    """msg_keys of timer copies stored at a rmq_sys_wheel_timer position a power loss freed (below 1 + the
    highest one stored before it), with a crash after them before their first fire."""
    from rmqspec.model.events import TraceEvent
    from rmqspec.properties.inv_timer import skipped_by_saved_timer_progress

    return skipped_by_saved_timer_progress(TraceEvent(**r) for r in rows)


def waiting_keys(rows: list[dict[str, Any]]) -> set[str]:
    """The msg_keys of timer messages not due at the trace's (last) drain."""
    drain_ts = max(r["ts"] for r in rows if r["event"] == "drain")
    return {
        r["msg_key"] for r in rows
        if r["deliver_ts"] is not None and r["deliver_ts"] > drain_ts
        and ((r["event"] == "send" and not r["delay_level"])
             or (r["event"] == "store" and r["topic"] == "rmq_sys_wheel_timer"))
    }
