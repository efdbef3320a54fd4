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


def model_timer_trace(seed: int, drain_early: bool = False) -> list[dict[str, Any]]:
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
    for i in range(rnd.randint(5, 30)):
        body = b"flaky-%d" % i if rnd.random() < 0.2 else b"m-%d" % i
        level = 2 if rnd.random() < 0.05 else 0
        producer.send(Message("T", body, properties=_properties(rnd, clock.now()), delay_level=level))
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
    return [e.as_row() for e in recorder.events]


def waiting_keys(rows: list[dict[str, Any]]) -> set[str]:
    """The msg_keys of timer messages not due at the trace's (last) drain."""
    drain_ts = max(r["ts"] for r in rows if r["event"] == "drain")
    return {
        r["msg_key"] for r in rows
        if r["deliver_ts"] is not None and r["deliver_ts"] > drain_ts
        and ((r["event"] == "send" and not r["delay_level"])
             or (r["event"] == "store" and r["topic"] == "rmq_sys_wheel_timer"))
    }
