"""Ghost history: what the model broker acknowledged, delivered and resolved.

Theory of operation
-------------------
Ghost variables (kafka-tlaplus style) exist only so that properties can be
checked later: the broker *writes* them at each state change and *never reads
them* (``tests/model/test_ghost.py`` pins the fence: broker modules only call
``note_*``). Entries are immutable and shared between forks of a model, so a
``copy.deepcopy`` of the broker copies only the lists.

What is recorded (one list per kind, in order):

- ``acked``: sends the broker acknowledged (plain, delayed, committed
  transactions) with the stored copy's position and whether it was durable
  at acknowledgement (SYNC) — invariants such as "no loss" start here;
- ``stored``: every stored copy, system topics included;
- ``delivered``: every message a pull returned, per group;
- ``committed``: every consumer-offset update (clients' and the
  transaction check service's group);
- ``locks``: every lock decision (granted or denied) and every release;
- ``sent_back``: every successful CONSUMER_SEND_MSG_BACK (RETRY or DLQ);
- ``fired``: every schedule-service delivery;
- ``timer_fired``: every timer-wheel delivery (5.x; ``level`` 0);
- ``txn_halves``, ``txn_resolutions``, ``txn_checks``, ``txn_discards``;
- ``crashes``: each crash with the records it lost.

RocketMQ has no such structure; it is the model's observation log.
"""

from __future__ import annotations

from typing import Any

import attrs


def _immutable(cls: type) -> type:
    def __deepcopy__(self: Any, memo: dict[int, Any]) -> Any:
        return self

    cls.__deepcopy__ = __deepcopy__  # type: ignore[attr-defined]
    return cls


@_immutable
@attrs.frozen
class Stored:
    ts: int
    topic: str
    queue_id: int
    queue_offset: int
    commitlog_offset: int
    msg_key: str | None
    reconsume_times: int
    deliver_ts: int | None


@_immutable
@attrs.frozen
class Acked:
    ts: int
    kind: str  # "plain", "delayed", "commit", "half"
    msg_key: str | None
    topic: str
    queue_id: int
    commitlog_offset: int
    queue_offset: int
    durable: bool


@_immutable
@attrs.frozen
class Delivered:
    ts: int
    group: str
    topic: str
    queue_id: int
    queue_offset: int
    commitlog_offset: int
    msg_key: str | None
    reconsume_times: int


@_immutable
@attrs.frozen
class OffsetCommitted:
    ts: int
    group: str
    topic: str
    queue_id: int
    offset: int


@_immutable
@attrs.frozen
class LockEvent:
    ts: int
    group: str
    topic: str
    queue_id: int
    client_id: str
    status: str  # GRANTED, DENIED, RELEASED


@_immutable
@attrs.frozen
class SentBack:
    ts: int
    group: str
    route: str  # RETRY or DLQ
    msg_key: str | None
    failed_commitlog_offset: int
    new_commitlog_offset: int
    reconsume_times: int
    delay_level: int
    deliver_ts: int | None


@_immutable
@attrs.frozen
class Fired:
    ts: int
    level: int
    deliver_ts: int
    from_commitlog_offset: int
    new_commitlog_offset: int
    topic: str
    queue_id: int
    msg_key: str | None


@_immutable
@attrs.frozen
class TxnNote:
    ts: int
    producer_group: str | None
    txn_id: str | None
    half_commitlog_offset: int
    status: str  # HALF, COMMIT, ROLLBACK, UNKNOWN, CHECK, DISCARD
    from_check: bool = False
    check_times: int = 0


@_immutable
@attrs.frozen
class Crashed:
    ts: int
    kind: str
    survivors: int
    lost: tuple[int, ...]  # commitlog offsets of lost records


@attrs.define
class GhostHistory:
    """The fenced-off observation log of one model broker."""

    acked: list[Acked] = attrs.Factory(list)
    stored: list[Stored] = attrs.Factory(list)
    delivered: list[Delivered] = attrs.Factory(list)
    committed: list[OffsetCommitted] = attrs.Factory(list)
    locks: list[LockEvent] = attrs.Factory(list)
    sent_back: list[SentBack] = attrs.Factory(list)
    fired: list[Fired] = attrs.Factory(list)
    timer_fired: list[Fired] = attrs.Factory(list)
    txn_halves: list[TxnNote] = attrs.Factory(list)
    txn_resolutions: list[TxnNote] = attrs.Factory(list)
    txn_checks: list[TxnNote] = attrs.Factory(list)
    txn_discards: list[TxnNote] = attrs.Factory(list)
    crashes: list[Crashed] = attrs.Factory(list)

    def note_acked(self, entry: Acked) -> None:
        self.acked.append(entry)

    def note_stored(self, entry: Stored) -> None:
        self.stored.append(entry)

    def note_delivered(self, entry: Delivered) -> None:
        self.delivered.append(entry)

    def note_committed(self, entry: OffsetCommitted) -> None:
        self.committed.append(entry)

    def note_lock(self, entry: LockEvent) -> None:
        self.locks.append(entry)

    def note_sent_back(self, entry: SentBack) -> None:
        self.sent_back.append(entry)

    def note_fired(self, entry: Fired) -> None:
        self.fired.append(entry)

    def note_timer_fired(self, entry: Fired) -> None:
        self.timer_fired.append(entry)

    def note_txn(self, entry: TxnNote) -> None:
        target = {
            "HALF": self.txn_halves,
            "CHECK": self.txn_checks,
            "DISCARD": self.txn_discards,
        }.get(entry.status, self.txn_resolutions)
        target.append(entry)

    def note_crash(self, entry: Crashed) -> None:
        self.crashes.append(entry)

    # Queries for properties and tests (never called by broker logic).

    def acked_keys(self) -> set[str]:
        return {a.msg_key for a in self.acked if a.msg_key is not None and a.kind != "half"}

    def deliveries_of(self, group: str, msg_key: str) -> list[Delivered]:
        return [d for d in self.delivered if d.group == group and d.msg_key == msg_key]

    def checks_of(self, txn_id: str) -> list[TxnNote]:
        return [c for c in self.txn_checks if c.txn_id == txn_id]
