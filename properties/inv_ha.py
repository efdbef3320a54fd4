"""Invariants of a master/slave pair (issue 43), judged over the pair's trace rows alone.

Theory of operation
-------------------
The rows come from ``model/ha_pair.py`` (or any pair writing the same columns, docs/trace-schema.md): every row
of a pair names its broker in ``detail.broker_id`` (0 master, 1 slave); the master's ``store`` rows say what it
stored where; ``replicate`` rows say what reached the slave (``commitlog_offset`` its new end,
``detail.records`` the [offset, msg_key] pairs); the master's ``send`` rows carry ``detail.role`` and
``detail.end`` (the record's end); ``ha_link`` DISK_LOST marks the master's disk lost. One pass keeps the
slave's end and the master's stored copies per epoch (a disk loss starts a new epoch of the master's log).

Each predicate below is named after its anomaly and gives a code:

- ``SyncAckUnreplicatedProperty`` (HA_SYNC_ACK_UNREPLICATED): a SEND_OK answered by a SYNC_MASTER for a waiting
  message whose end is past the slave's end at the answer (CommitLog.submitReplicaRequest: the answer waits for
  push2SlaveMaxOffset ≥ the message's end).
- ``SyncAckLostProperty`` (HA_SYNC_ACK_LOST): at a master disk loss, a SYNC_MASTER SEND_OK the slave does not hold.
- ``SlaveServedUnstoredProperty`` (HA_SLAVE_SERVED_UNSTORED): the slave delivered a copy that neither reached it
  from the master (a replicate row) nor is the master's at that commitlog offset (msg_keys compared).
- ``SlaveBeyondReplicatedProperty`` (HA_SLAVE_BEYOND_REPLICATED): the slave delivered a copy at or past its
  replicated end.
- ``SlaveNotPrefixProperty`` (HA_SLAVE_NOT_PREFIX): a replicate row moves a record that is not the master's
  record at that offset, or does not continue where the slave's log ended.
- ``SlaveWroteProperty`` (HA_SLAVE_WROTE): the slave stored a copy or acknowledged a send (a ``store`` or a
  ``send`` row of broker 1): DefaultMessageStore.checkStoreStatus refuses every put on a SLAVE.
- ``AsyncLossObservation`` (HA_ASYNC_TAIL_LOST, an observation, never a violation): at a disk loss of an
  ASYNC_MASTER, the acknowledged messages lost are exactly the unreplicated tail (reported with that cause).

A missing value never makes a finding (SPEC §8): a row without ``detail.broker_id`` is not a pair's row and is
skipped; a send without ``detail.end`` or ``detail.role``, a delivery without ``commitlog_offset``, a replicate
without ``detail.records`` is not judged. A pair's trace starts with the pair (the slave's end is 0 then).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from rmqspec.model.events import TraceEvent
from rmqspec.properties.history import History
from rmqspec.properties.inv_base import Invariant, Violation

MASTER, SLAVE = 0, 1
INVARIANT_CODES = (
    "HA_SYNC_ACK_UNREPLICATED",
    "HA_SYNC_ACK_LOST",
    "HA_SLAVE_SERVED_UNSTORED",
    "HA_SLAVE_BEYOND_REPLICATED",
    "HA_SLAVE_NOT_PREFIX",
    "HA_SLAVE_WROTE",
)
OBSERVATION_CODES = ("HA_ASYNC_TAIL_LOST",)


def _d(ev: TraceEvent, key: str, default: Any = None) -> Any:
    return (ev.detail or {}).get(key, default)


def _bid(ev: TraceEvent) -> int | None:
    bid = _d(ev, "broker_id")
    return bid if isinstance(bid, int) else None


@attrs.define
class _Replay:
    """The pair as its rows show it: the slave's end, the master's copies of this epoch, the SYNC acks."""

    slave_end: int = 0
    master: dict[int, tuple[str | None, int | None, str | None]] = attrs.field(factory=dict)
    sync_acked: dict[str, int] = attrs.field(factory=dict)  # msg_key -> end, SYNC SEND_OKs of this epoch
    acked: dict[str, int] = attrs.field(factory=dict)  # msg_key -> end, every ack of this epoch
    slave_log: dict[int, str | None] = attrs.field(factory=dict)  # offset -> msg_key, what reached the slave


def _v(code: str, ev: TraceEvent, step_of: Sequence[int] | None, reason: str, expected: object = "",
       actual: object = "") -> Violation:
    step = step_of[ev.seq] if step_of is not None and 0 <= ev.seq < len(step_of) else ev.seq
    return Violation(code=code, step=step, reason=reason, expected=str(expected), actual=str(actual), seq=ev.seq)


def check_pair(events: Iterable[TraceEvent], step_of: Sequence[int] | None = None) -> list[Violation]:
    """Every HA invariant over ``events`` (violations only; ``observations`` lists the observations)."""
    return _judge(events, step_of)[0]


def observations(events: Iterable[TraceEvent], step_of: Sequence[int] | None = None) -> list[Violation]:
    """HA_ASYNC_TAIL_LOST findings: what a disk loss took, with its cause."""
    return _judge(events, step_of)[1]


def _judge(events: Iterable[TraceEvent], step_of: Sequence[int] | None) -> tuple[list[Violation], list[Violation]]:
    out: list[Violation] = []
    obs: list[Violation] = []
    r = _Replay()
    for ev in events:
        bid = _bid(ev)
        if bid is None:
            continue
        if bid == SLAVE and ev.event in ("store", "send"):
            # SlaveWroteProperty
            out.append(_v("HA_SLAVE_WROTE", ev, step_of, f"the slave wrote a {ev.event} row",
                          "every put refused on a SLAVE (SERVICE_NOT_AVAILABLE)", ev.status or ev.event))
        elif bid == MASTER and ev.event == "store" and ev.commitlog_offset is not None:
            r.master[ev.commitlog_offset] = (ev.msg_key, ev.queue_offset, ev.topic)
        elif ev.event == "replicate":
            _replicate(r, ev, step_of, out)
        elif bid == MASTER and ev.event == "send":
            _send(r, ev, step_of, out)
        elif bid == SLAVE and ev.event == "deliver" and ev.commitlog_offset is not None:
            _slave_deliver(r, ev, step_of, out)
        elif ev.event == "ha_link" and ev.status == "DISK_LOST":
            _disk_lost(r, ev, step_of, out, obs)
    return out, obs


def _replicate(r: _Replay, ev: TraceEvent, step_of: Sequence[int] | None, out: list[Violation]) -> None:
    """SlaveNotPrefixProperty: each moved record is the master's at its offset, continuing the slave's log."""
    records = _d(ev, "records")
    start = _d(ev, "from")
    if isinstance(start, int) and start != r.slave_end:
        out.append(_v("HA_SLAVE_NOT_PREFIX", ev, step_of, "a transfer does not continue the slave's log",
                      f"from {r.slave_end}", f"from {start}"))
    if isinstance(records, list):
        for item in records:
            offset, key = item[0], item[1]
            stored = r.master.get(offset)
            if stored is None or stored[0] != key:
                out.append(_v("HA_SLAVE_NOT_PREFIX", ev, step_of,
                              f"the slave received a record at {offset} the master did not store there",
                              stored[0] if stored else "no master record", key))
            r.slave_log[offset] = key
    if ev.commitlog_offset is not None:
        r.slave_end = max(r.slave_end, ev.commitlog_offset)


def _send(r: _Replay, ev: TraceEvent, step_of: Sequence[int] | None, out: list[Violation]) -> None:
    """SyncAckUnreplicatedProperty."""
    end, role, key = _d(ev, "end"), _d(ev, "role"), ev.msg_key
    if not isinstance(end, int) or role is None:
        return
    if ev.status in ("SEND_OK", "FLUSH_DISK_TIMEOUT", "FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE") and key:
        r.acked[key] = end
    if role == "SYNC_MASTER" and ev.status == "SEND_OK" and _d(ev, "wait", True):
        if key:
            r.sync_acked[key] = end
        if end > r.slave_end:
            out.append(_v("HA_SYNC_ACK_UNREPLICATED", ev, step_of,
                          "a SYNC_MASTER answered SEND_OK before the slave held the message",
                          f"slave end >= {end}", f"slave end {r.slave_end}"))


def _slave_deliver(r: _Replay, ev: TraceEvent, step_of: Sequence[int] | None, out: list[Violation]) -> None:
    """SlaveBeyondReplicatedProperty and SlaveServedUnstoredProperty."""
    offset = ev.commitlog_offset
    assert offset is not None
    if offset >= r.slave_end:
        out.append(_v("HA_SLAVE_BEYOND_REPLICATED", ev, step_of, "the slave served a copy past its replicated end",
                      f"commitlog offset < {r.slave_end}", offset))
    if offset in r.slave_log:
        key = r.slave_log[offset]
        if ev.msg_key is None or key is None or key == ev.msg_key:
            return
    else:
        stored = r.master.get(offset)
        key = stored[0] if stored else None
        if stored is not None and (ev.msg_key is None or key == ev.msg_key):
            return
    out.append(_v("HA_SLAVE_SERVED_UNSTORED", ev, step_of, "the slave served a copy the master did not store there",
                  key or "a master record at that offset", ev.msg_key))


def _disk_lost(r: _Replay, ev: TraceEvent, step_of: Sequence[int] | None, out: list[Violation],
               obs: list[Violation]) -> None:
    """SyncAckLostProperty and AsyncLossObservation; a new epoch of the master's log begins."""
    slave_end = r.slave_end
    for key, end in sorted(r.sync_acked.items()):
        if end > slave_end:
            out.append(_v("HA_SYNC_ACK_LOST", ev, step_of, f"{key}, acknowledged by a SYNC_MASTER, is lost with "
                          "the master's disk", f"on the slave (end >= {end})", f"slave end {slave_end}"))
    if _d(ev, "role") == "ASYNC_MASTER":
        lost = sorted(k for k, end in r.acked.items() if end > slave_end)
        if lost:
            obs.append(_v("HA_ASYNC_TAIL_LOST", ev, step_of,
                          f"{len(lost)} acknowledged message(s) lost with the ASYNC_MASTER's disk: the tail past "
                          f"the slave's replicated end {slave_end} (cause: replication after the answer)",
                          "", ",".join(lost)))
    r.master = {}
    r.sync_acked = {}
    r.acked = {}


def _only(code: str) -> Any:
    def check(h: History) -> list[Violation]:
        return [v for v in check_pair(h.events, h.step_of) if v.code == code]
    return check


def _observed(h: History) -> list[Violation]:
    return observations(h.events, h.step_of)


_SRC = "S/CommitLog.submitReplicaRequest, S/ha/HAService, S/DefaultMessageStore.checkStoreStatus (4.9.8)"
# the named invariants, for tools that list invariants over a History (not in invariants.py's set: a pair's rows
# come from model/ha_pair.py, not from the single-broker conformance machine)
HA_INVARIANTS: tuple[Invariant, ...] = (
    Invariant("SyncAckUnreplicatedProperty", "HA_SYNC_ACK_UNREPLICATED", "always",
              "a SYNC_MASTER SEND_OK is on the slave when answered", _SRC, _only("HA_SYNC_ACK_UNREPLICATED")),
    Invariant("SyncAckLostProperty", "HA_SYNC_ACK_LOST", "always",
              "a SYNC_MASTER SEND_OK survives the master's disk loss", _SRC, _only("HA_SYNC_ACK_LOST")),
    Invariant("SlaveServedUnstoredProperty", "HA_SLAVE_SERVED_UNSTORED", "always",
              "the slave serves only what the master stored", _SRC, _only("HA_SLAVE_SERVED_UNSTORED")),
    Invariant("SlaveBeyondReplicatedProperty", "HA_SLAVE_BEYOND_REPLICATED", "always",
              "the slave serves nothing past its replicated end", _SRC, _only("HA_SLAVE_BEYOND_REPLICATED")),
    Invariant("SlaveNotPrefixProperty", "HA_SLAVE_NOT_PREFIX", "always",
              "the slave's log is a prefix of the master's", _SRC, _only("HA_SLAVE_NOT_PREFIX")),
    Invariant("SlaveWroteProperty", "HA_SLAVE_WROTE", "always",
              "the slave refuses writes", _SRC, _only("HA_SLAVE_WROTE")),
    Invariant("AsyncLossObservation", "HA_ASYNC_TAIL_LOST", "observation",
              "an ASYNC_MASTER's disk loss takes exactly the unreplicated tail", _SRC, _observed),
)
