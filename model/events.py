"""Trace events: what the model, the reference client and brokers emit (SPEC §8).

Every state change is one ``TraceEvent``. Emitters call ``recorder.emit(...)``;
the recorder owns the total order and assigns ``seq`` (0, 1, 2, …). The model
knows nothing about files: ``rmqspec.traces`` provides recorders that write
JSONL or Parquet.

Field conventions are SPEC §8's: ``store`` describes the new copy;
``send_back`` names the copy that failed (topic/queue_id/queue_offset) and
carries the new copy's reconsume_times/delay_level (+ ``deliver_ts`` on RETRY);
``schedule_fire`` and ``timer_fire`` name the destination; ``txn_*`` carry ``txn_id`` and the
half's ``msg_key``. ``detail`` is a small JSON-able mapping for extras.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import attrs

EVENTS: tuple[str, ...] = (
    "send",
    "store",
    "deliver",
    "consume",
    "send_back",
    "schedule_fire",
    "commit_offset",
    "lock",
    "unlock",
    "orderly_start",
    "orderly_end",
    "txn_half",
    "txn_end",
    "txn_check",
    "txn_discard",
    "crash",
    "recover",
    "drain",
    "timer_fire",  # 5.x: the timer wheel delivered a timer message (model/timer.py)
    # retention deleted files (model/retention.py): topic null → commitlog_offset is the commitlog's new
    # min; else queue_offset is the queue's new min; detail.cause "reserved" or "forcibly"
    "expire",
    # 5.x pop (model/broker_pop.py): a message handed out with an invisible time; an ack of its handle; a
    # change of its invisible time; the revive service re-put an un-acked one into the pop retry topic
    "pop",
    "ack",
    "change_invisible",
    "revive",
    # master/slave replication (model/ha_pair.py): records transferred to the slave (commitlog_offset its new end);
    # the HA link's changes (status CUT, HEALED, DROPPED, DISK_LOST)
    "replicate",
    "ha_link",
)
EVENT_NAMES: frozenset[str] = frozenset(EVENTS)

# Columns of SPEC §8 besides seq/ts/event, in schema order.
FIELDS: tuple[str, ...] = (
    "actor",
    "group",
    "topic",
    "queue_id",
    "queue_offset",
    "commitlog_offset",
    "msg_key",
    "msg_id",
    "reconsume_times",
    "delay_level",
    "deliver_ts",
    "status",
    "client_id",
    "sharding_key",
    "txn_id",
)


@attrs.frozen
class TraceEvent:
    """One row of a trace."""

    seq: int
    ts: int
    event: str = attrs.field(validator=attrs.validators.in_(EVENT_NAMES))
    actor: str | None = None
    group: str | None = None
    topic: str | None = None
    queue_id: int | None = None
    queue_offset: int | None = None
    commitlog_offset: int | None = None
    msg_key: str | None = None
    msg_id: str | None = None
    reconsume_times: int | None = None
    delay_level: int | None = None
    deliver_ts: int | None = None
    status: str | None = None
    client_id: str | None = None
    sharding_key: str | None = None
    txn_id: str | None = None
    detail: Mapping[str, Any] | None = None

    def as_row(self) -> dict[str, Any]:
        """A plain dict with every column (``detail`` left as a mapping)."""
        return attrs.asdict(self, recurse=False)


@runtime_checkable
class Recorder(Protocol):
    """Receives events in emission order and assigns ``seq``."""

    def emit(self, event: str, ts: int, **fields: Any) -> TraceEvent: ...


class NullRecorder:
    """Drops events (the default when nobody records)."""

    def __init__(self) -> None:
        self._seq = 0

    def emit(self, event: str, ts: int, **fields: Any) -> TraceEvent:
        ev = TraceEvent(seq=self._seq, ts=ts, event=event, **fields)
        self._seq += 1
        return ev


class ListRecorder:
    """Keeps every event in memory, in order (tests, small runs)."""

    def __init__(self) -> None:
        self.events: list[TraceEvent] = []

    def emit(self, event: str, ts: int, **fields: Any) -> TraceEvent:
        ev = TraceEvent(seq=len(self.events), ts=ts, event=event, **fields)
        self.events.append(ev)
        return ev

    def of(self, event: str) -> list[TraceEvent]:
        return [e for e in self.events if e.event == event]
