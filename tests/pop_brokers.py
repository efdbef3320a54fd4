"""Deliberately broken 5.x pop brokers (``tests/broken_brokers.py``'s pattern; ``model/pop.py``,
``model/broker_pop.py``), judged under ``--profile rocketmq-5.2`` (under 4.9 nobody pops: they pass).

Each breaks one rule of issue 40's list, through the broker's pop state (``PopState``, a subclass put in
place) or its revive: a revive before the invisible time ends, an acked message revived, acks forgotten
by a restart, an orderly queue never blocked, a revived copy that keeps its reconsume times. The
conformance machine's pop ladder (``properties/conform_pop.py``) shows each: in lockstep the model answers
otherwise, and alone ``PopLifecycleProperty`` / ``PopOrderLifecycleProperty`` replay the rows through the
POP and POP_ORDER tables (``properties/inv_pop.py``).
"""

from __future__ import annotations

from typing import Any

import attrs

from rmqspec.model.broker import ModelBroker
from rmqspec.model.pop import CheckPoint, OrderInfo, Pending, PopState
from rmqspec.model.queues import Record

EARLY_MS = 2_500  # the revive service reads its clock this far ahead: a revive up to 500 ms early


class _PopBroken(ModelBroker):
    """A 5.x ModelBroker whose pop state is ``state_class`` (one rule broken)."""

    state_class: type[PopState] = PopState

    def __init__(self, clock: Any, config: Any, workdir: Any = None) -> None:
        super().__init__(clock, config)
        self.pop_state.__class__ = self.state_class


class _ReviveAhead(PopState):
    __slots__ = ()

    def due(self, now: int) -> list[Pending]:
        return super().due(now + EARLY_MS)


class PopReviveEarly(_PopBroken):
    """The revive service revives a checkpoint half a second before its revive time (pop time + invisible
    time): a message not acked is handed out again while it should still be invisible."""

    state_class = _ReviveAhead


class _AcksMissCheckpoints(PopState):
    __slots__ = ()

    def ack(self, key: Any, offset: int) -> Pending | None:
        return None


class PopAckedRevived(_PopBroken):
    """An ack is answered SUCCESS but never marks its checkpoint: the acked message is revived."""

    state_class = _AcksMissCheckpoints


class _AcksForgotten(PopState):
    __slots__ = ()

    def restore(self, now: int) -> None:
        super().restore(now)
        for pending in self.pending.values():
            pending.acked = frozenset()


class PopAckLostOnRestart(_PopBroken):
    """A restart rebuilds the checkpoints without their acks (the revive log read back without its ack
    records): a message acked before a kill is revived after it."""

    state_class = _AcksForgotten


class _Unblocking(OrderInfo):
    __slots__ = ()

    def need_block(self, *args: Any, **kwargs: Any) -> bool:
        return False


class _NeverBlocks(PopState):
    __slots__ = ()

    def order_info(self, topic: str, group: str, queue_id: int) -> OrderInfo | None:
        info = super().order_info(topic, group, queue_id)
        if info is not None:
            info.__class__ = _Unblocking
        return info


class PopOrderlyNotBlocked(_PopBroken):
    """needBlock always false: an orderly queue is handed to another attempt while its batch is in flight."""

    state_class = _NeverBlocks


class PopReconsumeKept(_PopBroken):
    """reviveRetry puts the copy with the popped message's reconsume times, not one more."""

    def _revive_one(self, now: int, ck: CheckPoint, entry: Record, target: str) -> bool:
        return super()._revive_one(now, ck, attrs.evolve(entry, reconsume_times=entry.reconsume_times - 1), target)


def _factory(cls: type[ModelBroker]) -> Any:
    def make(clock: Any, config: Any, workdir: Any = None) -> ModelBroker:
        return cls(clock, config, workdir)

    make.__name__ = f"{cls.__name__}_factory"
    make.__doc__ = cls.__doc__
    return make


POP_BROKEN: dict[str, Any] = {
    "pop_revive_early": _factory(PopReviveEarly),
    "pop_acked_revived": _factory(PopAckedRevived),
    "pop_ack_lost_on_restart": _factory(PopAckLostOnRestart),
    "pop_orderly_not_blocked": _factory(PopOrderlyNotBlocked),
    "pop_reconsume_kept": _factory(PopReconsumeKept),
}
