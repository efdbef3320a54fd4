"""The injected scenarios of the master/slave codes (issue 43) for the trace generator.

Theory of operation
-------------------
Each scenario plays one master/slave pair of its own (``detail.broker`` = ``InjHa…``, ``detail.broker_id`` 0
master, 1 slave: the rows ``model/ha_pair.py`` writes, docs/trace-schema.md) beside the clean traffic, on its
own topic and keys, and breaks exactly one rule of ``properties/inv_replay_ha.py`` once, recorded as ground truth
(proving rows first, the offending row last). A message is stored through the simulation (``Simulation.store``:
dense queue offsets, 256 bytes a record, so its end is its commitlog offset + 256); the master's ``send`` carries
``detail.role`` / ``wait`` / ``end``; a ``replicate`` moves records to the slave (``commitlog_offset`` its new
end, ``detail.from``, ``detail.records``); an ``ha_link`` DISK_LOST names the slave's end then. The clean
traffic's rows carry no broker name, so its ``store`` rows leave every pair's master records unknown
(a pair's "no master record there" is not judged in a generated trace): the scenarios break rules a record
the rows do show proves. Rows a single broker's rules read (a slave's ``deliver``) are followed by the
consume the clean rules expect. ``traces/scenarios.py`` registers them.
"""

from __future__ import annotations

import json
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rmqspec.traces.scenarios import _Ctx

RECORD = 256  # Simulation.store's record size
Steps = Generator[int, None, None]

__all__ = ["ha_async_tail_lost", "ha_slave_beyond_replicated", "ha_slave_not_prefix", "ha_slave_served_unstored",
           "ha_slave_wrote", "ha_sync_ack_lost", "ha_sync_ack_unreplicated"]


def _broker(ctx: _Ctx, bid: int, **extra: Any) -> dict[str, Any]:
    return {"broker": f"InjHa{ctx.index}{ctx.code}", "broker_id": bid, **extra}


def _stored(ctx: _Ctx, bid: int = 0) -> tuple:
    """A fresh message stored by broker ``bid`` of the pair; its copy."""
    key = ctx.sim.inj_key()
    _, copy = ctx.store(ctx.topic, 0, key, 0, ctx.pgroup,
                        detail=json.dumps(_broker(ctx, bid), sort_keys=True, separators=(",", ":")))
    return copy


def _send(ctx: _Ctx, copy: tuple, role: str, status: str = "SEND_OK") -> int:
    return ctx.sim.emit(
        "send", actor=ctx.producer, group=ctx.pgroup, topic=ctx.topic, queue_id=0, queue_offset=copy[3],
        commitlog_offset=copy[4], msg_key=copy[0], msg_id=copy[5], status=status,
        detail=_broker(ctx, 0, role=role, wait=True, end=copy[4] + RECORD),
    )


def _replicate(ctx: _Ctx, start: int, copies: list[tuple], end: int) -> int:
    return ctx.sim.emit("replicate", actor="broker", commitlog_offset=end,
                        detail=_broker(ctx, 1, **{"from": start, "records": [[c[4], c[0]] for c in copies]}))


def _slave_deliver(ctx: _Ctx, copy: tuple, key: str | None = None) -> int:
    fields = ctx._copy_fields(copy, ctx.c1)
    if key is not None:
        fields["msg_key"] = key
    seq = ctx.sim.emit("deliver", detail=_broker(ctx, 1), **fields)
    ctx.sim.emit("consume", status="SUCCESS", detail=_broker(ctx, 1), **fields)
    return seq


def _disk_lost(ctx: _Ctx, slave_end: int, role: str) -> int:
    return ctx.sim.emit("ha_link", actor="broker", status="DISK_LOST", commitlog_offset=slave_end,
                        detail=_broker(ctx, 0, role=role))


def ha_sync_ack_unreplicated(ctx: _Ctx) -> Steps:
    """A SYNC_MASTER answers SEND_OK before the slave has the message; it reaches the slave 5 ms later."""
    copy = _stored(ctx)
    seq = _send(ctx, copy, "SYNC_MASTER")
    ctx.truth([seq], "a SYNC_MASTER SEND_OK before the slave held the message")
    yield 5
    _replicate(ctx, 0, [copy], copy[4] + RECORD)


def ha_sync_ack_lost(ctx: _Ctx) -> Steps:
    """A SYNC_MASTER SEND_OK answered once the slave had it; the master's disk is then lost while the slave's
    end it knows is back before the message (the slave lost its copy after the ack)."""
    copy = _stored(ctx)
    _replicate(ctx, 0, [copy], copy[4] + RECORD)
    seq = _send(ctx, copy, "SYNC_MASTER")
    yield 5
    lost = _disk_lost(ctx, copy[4], "SYNC_MASTER")
    ctx.truth([seq, lost], "a SYNC_MASTER-acknowledged message is not on the slave at the master's disk loss")


def ha_slave_served_unstored(ctx: _Ctx) -> Steps:
    """The slave serves, at the first record's commitlog offset, the second message (not what it received there)."""
    first, second = _stored(ctx), _stored(ctx)
    _send(ctx, first, "ASYNC_MASTER")
    _send(ctx, second, "ASYNC_MASTER")
    yield 5
    moved = _replicate(ctx, 0, [first, second], second[4] + RECORD)
    yield 5
    seq = _slave_deliver(ctx, (second[0], *first[1:]))
    _slave_deliver(ctx, first)
    ctx.truth([moved, seq], "the slave served a copy it did not receive at that offset")


def ha_slave_beyond_replicated(ctx: _Ctx) -> Steps:
    """The slave serves a message the master stored but never transferred."""
    copy = _stored(ctx)
    _send(ctx, copy, "ASYNC_MASTER")
    yield 5
    seq = _slave_deliver(ctx, copy)
    ctx.truth([seq], "the slave served a copy past its replicated end")
    yield 5
    _replicate(ctx, 0, [copy], copy[4] + RECORD)


def ha_slave_not_prefix(ctx: _Ctx) -> Steps:
    """A transfer that starts 256 bytes past the slave's end (a record skipped)."""
    copy = _stored(ctx)
    _send(ctx, copy, "ASYNC_MASTER")
    yield 5
    seq = _replicate(ctx, RECORD, [copy], copy[4] + RECORD)
    ctx.truth([seq], "a transfer that does not continue the slave's log")


def ha_slave_wrote(ctx: _Ctx) -> Steps:
    """The slave stores a put (checkStoreStatus's SLAVE refusal missing)."""
    copy = _stored(ctx, 1)
    ctx.truth([ctx.seq - 1], f"the slave stored {copy[0]}")
    yield 5


def ha_async_tail_lost(ctx: _Ctx) -> Steps:
    """An ASYNC_MASTER acknowledges a message and loses its disk before the message reached the slave."""
    copy = _stored(ctx)
    seq = _send(ctx, copy, "ASYNC_MASTER")
    yield 5
    lost = _disk_lost(ctx, 0, "ASYNC_MASTER")
    ctx.truth([seq, lost], "the ASYNC_MASTER's unreplicated tail lost with its disk")
