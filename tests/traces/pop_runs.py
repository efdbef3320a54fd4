"""Recorded traces of RocketMQ 5.x pop consumption: the model broker's own rows, honest and broken.

``model_pop_trace(seed, broken)`` runs ``ModelBroker`` under a 5.x profile (``default_config``), or one of
``tests/pop_brokers.py``'s broken pop brokers, with its ``ListRecorder``: a producer sends to a topic of two
queues while group ``GP`` pops (any queue, short invisible times), acks some handles (some late, some
twice), changes the invisible time of others, and group ``GPO`` pops queues orderly with two attempts;
the clock moves in ticks (the revive service runs on them), with kills between. The rows are the
broker's (``pop`` per message handed out, ``ack`` with what the ack met, ``change_invisible``,
``revive`` after the retry copy's ``store``) and the producer's ``send``s; the trace ends with a
``drain``. An honest run breaks no rule; each broken broker's run breaks its rule in the pop tables
(``properties/inv_pop.py``), which the reference checker and the Spark audit report alike.
"""

from __future__ import annotations

import contextlib
import random
from typing import Any

from rmqspec.model.broker import ModelBroker
from rmqspec.model.clock import ManualClock
from rmqspec.model.config import default_config
from rmqspec.model.directory import Directory
from rmqspec.model.events import ListRecorder
from rmqspec.model.ids import UniqKeyFactory
from rmqspec.model.message import Message
from rmqspec.model.producer import Producer
from rmqspec.model.results import BrokerError

T0 = 1_700_000_000_000
VERSION = "rocketmq-5.2"
G, GO, T = "GP", "GPO", "T"


def model_pop_trace(seed: int, broken: str | None = None, steps: int = 80) -> list[dict[str, Any]]:
    """The rows one seeded run recorded (see the module docstring); ``broken``: a name of
    ``tests/pop_brokers.POP_BROKEN``."""
    rnd = random.Random(seed)
    clock = ManualClock(T0 + rnd.randrange(1000))
    recorder = ListRecorder()
    config = default_config(VERSION)
    if broken is None:
        broker = ModelBroker(clock, config, recorder)
    else:
        from tests.pop_brokers import POP_BROKEN

        broker = POP_BROKEN[broken](clock, config)
        broker.recorder = recorder
    directory = Directory()
    directory.create_topic(broker, T, 2)
    for group in (G, GO):
        directory.create_group(broker, group)
    producer = Producer(broker, clock, directory, "P", recorder=recorder, uniq_keys=UniqKeyFactory("10.0.0.5", pid=7))
    held: list[Any] = []  # handles handed out, some acked already (a second ack), some revived (a late one)
    for i in range(steps):
        x = rnd.random()
        if x < 0.3:
            producer.send(Message(T, b"m-%d" % i))
        elif x < 0.5:
            held += [p.handle for p in broker.pop(G, T, -1, rnd.randint(1, 3), rnd.choice((1_000, 3_000))).messages]
        elif x < 0.65:
            attempt = rnd.choice(("A1", "A2"))
            held += [p.handle for p in broker.pop(GO, T, rnd.randrange(2), 2, 3_000, order=True,
                                                  attempt_id=attempt).messages]
        elif x < 0.8 and held:
            y = rnd.random()  # the newest handle mostly (in time), another one, or one acked again
            handle = held.pop() if y < 0.5 else held[rnd.randrange(len(held))] if y < 0.6 \
                else held.pop(rnd.randrange(len(held)))
            broker.ack(GO if handle.order else G, T, handle)
        elif x < 0.86 and held:
            handle = held[rnd.randrange(len(held))]
            if not handle.order:
                with contextlib.suppress(BrokerError):  # a handle whose message is gone: refused as 5.3.3 does
                    held.append(broker.change_invisible_time(G, T, handle, rnd.choice((2_000, 5_000))))
        elif x < 0.9:
            broker.crash("kill")
            clock.advance(rnd.randrange(1, 500))
            broker.recover()
        for _ in range(rnd.randrange(0, 12)):
            clock.advance(100)
            broker.tick()
    recorder.emit("drain", clock.now(), actor="test")
    return [e.as_row() for e in recorder.events]
