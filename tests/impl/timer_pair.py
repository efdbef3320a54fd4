"""The lockstep pair of the timer tests (``test_timer.py``, ``test_timer_restart.py``): a mmap broker
and the model on one clock, each step run on both and compared (results and SPEC §8 events)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from rmqspec.impl.broker import MmapBroker
from rmqspec.model import BrokerConfig, ListRecorder, ManualClock, Message, MessageQueue, ModelBroker
from rmqspec.model.config import default_config
from rmqspec.model.results import BrokerError
from rmqspec.model.timer import TIMER_TOPIC

START_MS = 1_700_000_000_123  # not on a precision boundary
V5 = "rocketmq-5.2"
T0, T1 = MessageQueue("T", 0), MessageQueue("T", 1)
WHEEL = MessageQueue(TIMER_TOPIC, 0)


def config(version: str = V5, **changes: Any) -> BrokerConfig:
    base = attrs.evolve(default_config(version), flush="SYNC", commitlog_file_size=4096)
    return attrs.evolve(base, **changes)


def _observe(fn: Any) -> Any:
    try:
        return fn()
    except BrokerError as e:
        return ("refused", e.code, e.remark)


class Pair:
    """A mmap broker and the model on one clock; ``both`` runs a step on each and compares."""

    def __init__(self, root: Path, cfg: BrokerConfig, start: int = START_MS) -> None:
        self.root = root
        self.clock = ManualClock(start)
        self.model = ModelBroker(self.clock, cfg, ListRecorder())
        self.mmap = MmapBroker.open(root, self.clock, cfg, ListRecorder())
        self.both(lambda b: b.create_topic("T", 2))
        self.both(lambda b: b.create_group("g", retry_max_times=1))

    def both(self, fn: Any) -> Any:
        actual = _observe(lambda: fn(self.mmap))
        assert actual == _observe(lambda: fn(self.model))
        assert self.mmap.recorder.events == self.model.recorder.events
        return actual

    def send(self, queue_id: int = 0, delay_level: int = 0, **props: str) -> Any:
        msg = Message("T", b"timer", tags="A", properties=props, delay_level=delay_level)
        return self.both(lambda b: b.send(msg, queue_id))

    def tick_at(self, ts: int) -> None:
        self.clock.advance(ts - self.clock.now())
        self.both(lambda b: b.tick())

    def pull(self, mq: MessageQueue, offset: int = 0) -> Any:
        return self.both(lambda b: b.pull("g", mq, offset, 32, "*"))

    def events(self, name: str) -> list[Any]:
        return [e for e in self.mmap.recorder.events if e.event == name]


def restart(pair: Pair, kind: str) -> None:
    """``close``+``reopen`` or a crash + ``recover`` on both (the model keeps what the store kept)."""
    if kind == "close":
        pair.both(lambda b: b.close())
        pair.both(lambda b: b.reopen())
        return
    pair.both(lambda b: b.crash(kind))
    pair.mmap.recover()
    survivors = pair.mmap.commitlog_record_count()
    assert survivors in pair.model.recovery_choices()
    pair.model.recover(survivors=survivors)
    assert pair.mmap.recorder.events == pair.model.recorder.events
