"""A ModelBroker and an MmapBroker on one manual clock, driven side by side (the step-by-step fault tests)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from rmqspec.impl.broker import MmapBroker
from rmqspec.model import BrokerConfig, ListRecorder, ManualClock, ModelBroker
from rmqspec.model.results import BrokerError

START_MS = 1_700_000_000_000


def open_pair(root: Path, config: BrokerConfig, broker: type[ModelBroker] = ModelBroker,
              topics: Iterable[tuple[str, int]] = (("T", 1),),
              groups: Iterable[str] = ()) -> tuple[ManualClock, Any, MmapBroker]:
    """The clock, the model (``broker``) and the mmap broker in ``root``, each with ``topics`` and ``groups``."""
    clock = ManualClock(START_MS)
    model = broker(clock, config, ListRecorder())
    mmap = MmapBroker.open(root, clock, config, ListRecorder())
    for b in (model, mmap):
        for topic, queues in topics:
            b.create_topic(topic, queues)
        for group in groups:
            b.create_group(group)
    return clock, model, mmap


def both(model: Any, mmap: MmapBroker, fn: Callable[[Any], Any],
         misuse: tuple[type[Exception], ...] = ()) -> Any:
    """``fn`` on both brokers: equal answers (a refusal by code and remark, a ``misuse`` by its type) and equal
    trace rows; the answer."""
    out = []
    for b in (model, mmap):
        try:
            out.append(fn(b))
        except BrokerError as e:
            out.append(("refused", e.code, e.remark))
        except misuse as e:
            out.append(("misuse", type(e).__name__))
    assert out[0] == out[1]
    assert model.recorder.events == mmap.recorder.events
    return out[0]
