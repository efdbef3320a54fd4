"""What an incremental audit carries of a master/slave pair's rows (issue 43): the rows that rebuild, at
the end of the carried rows, the state ``properties/inv_replay_ha.judge_pair`` holds at the end of the
history (``traces/carry.py``'s theory; its docstring lists this rule with the other kinds).

Theory of operation
-------------------
The replay keeps, per pair (``detail.broker``) of a trace, and per trace for the rows naming no pair:

- the slave's end and the ``replicate`` row that set it (the last at the highest ``commitlog_offset``; the
  end only grows), or "unknown for good" (a pair's ``replicate`` without ``commitlog_offset``, or any
  ``replicate`` naming no pair);
- what reached the slave: per commitlog offset, the record of the last ``replicate`` naming it, or "unknown
  for good" (a ``replicate`` whose records are unreadable, or any naming no pair);
- the master's records of the epoch: per offset, the last ``store`` since the epoch began (the pair's last
  ``ha_link`` DISK_LOST or without status, or the trace's last ``ha_link`` naming no pair that may be a
  disk loss), or "unknown" (a pair's ``store`` without ``commitlog_offset``, or a ``store`` naming no pair,
  since that epoch began);
- the acknowledged sends of the epoch: per msg_key the last acknowledged master ``send`` and the last
  SYNC_MASTER SEND_OK of a waiting message (read at a disk loss against the slave's end it names), or
  "unknown" (an epoch begun by a row that may be a disk loss).

Each "last per key" state is rebuilt by carrying that row, each "unknown for good" by carrying the first
row that made it so, each "unknown since the epoch began" by the last such row and the row that began the
epoch: replayed in seq order, the carried rows leave every one of these values as the history does (the
carried rows of a pair are a subset of its rows in the same order; a row kept for one value is earlier than
the row another value keeps, or writes a key whose last writer is kept too). Rows a value does not
read — a slave's ``deliver`` (it only reads), a ``store`` / ``send`` of the slave (the row's own
judgement), a send not acknowledged, an earlier epoch's records and acks — are not carried. A pair created
on a later day reads the flags the rows naming no pair set: the trace's first such ``replicate``, its last
such ``store`` (``nameless_store``, kept by the caller: the Spark aggregations find it among the stores
naming no broker at all) and its last such ``ha_link`` are carried for it.

Cost: the carried rows grow with what the replay keeps — the slave's records (a ``replicate`` row per
transfer, until a later one names the same offsets) and the epoch's master records and acknowledged sends
(until a disk loss), each with its msg_key's tombstones (``carry_trace`` keeps a carried key's rows
together). Beside a cluster's traffic a pair's rows are a few (a generated trace with the pair scenarios
carries under a quarter of its rows: tests/traces/test_carry.py); a trace of one long-lived pair carries
its epoch's acknowledged messages. Any future disk loss may name a slave's end below an old ack, and any future slave
read may name an old offset, so no smaller set of rows is exact; bounding it needs those rows as
tombstones pulled back by the day's pair rows (by offset, by disk loss), which ``pull`` does not do.
Findings re-judged on carried rows name only rows an earlier run saw and are dropped by ``carry.merge``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from rmqspec.properties.inv_replay_ha import _ACKED, HA_EVENTS, MASTER, SLAVE
from rmqspec.traces.checks_common import detail_of

# the events whose rows are a pair's by their event alone (read without ``detail.broker_id``)
PAIR_LINKS = ("replicate", "ha_link")


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def pair_candidate(event: str, detail_text: str | None) -> bool:
    """A row ``carry_pairs`` must see: a replicate / ha_link, or a store, send or deliver whose detail text
    names ``"broker`` (every other row of those events names no pair: a nameless store when a store)."""
    return event in PAIR_LINKS or (event in HA_EVENTS and detail_text is not None and '"broker' in detail_text)


@attrs.define
class _Pair:
    """The seqs of the rows that set a pair's replay state (module docstring)."""

    end: tuple[int, int] = (0, -1)  # (the slave's end, the seq of the replicate that set it; -1: none)
    no_end: int | None = None  # the first replicate without commitlog_offset
    unreadable: int | None = None  # the first replicate whose records are unreadable
    slave_log: dict[int, int] = attrs.field(factory=dict)  # offset -> seq of the last replicate naming it
    epoch: int | None = None  # the last ha_link DISK_LOST / without status
    master: dict[int, int] = attrs.field(factory=dict)  # offset -> seq of the epoch's last store there
    blind: int | None = None  # the epoch's last store without commitlog_offset
    acked: dict[str, int] = attrs.field(factory=dict)  # msg_key -> the epoch's last acknowledged send
    sync_acked: dict[str, int] = attrs.field(factory=dict)  # msg_key -> the epoch's last SYNC SEND_OK (wait)

    def new_epoch(self) -> None:
        self.master, self.blind, self.acked, self.sync_acked = {}, None, {}, {}

    def seqs(self) -> set[int]:
        out = {s for s in (self.no_end, self.unreadable, self.epoch, self.blind) if s is not None}
        if self.end[1] >= 0:
            out.add(self.end[1])
        out.update(self.slave_log.values(), self.master.values(), self.acked.values(), self.sync_acked.values())
        return out


@attrs.frozen
class PairCarry:
    """``kept``: seqs of the rows to carry; ``nameless_store``: the last ``store`` among the rows that names no
    pair (carried too: the caller takes the last of it and of the stores it did not hand over)."""

    kept: frozenset[int]
    nameless_store: int | None


def carry_pairs(rows: Iterable[Mapping[str, Any]]) -> PairCarry:
    """The rows of one trace (in seq order; any subset holding every ``pair_candidate``) that rebuild the
    pair replay's state."""
    pairs: dict[str, _Pair] = {}
    nameless_replicate: int | None = None
    nameless_link: int | None = None
    nameless_store: int | None = None
    for row in rows:
        event = row["event"]
        if event not in HA_EVENTS:
            continue
        seq = int(row["seq"])
        detail = detail_of(row)
        bid = _int(detail.get("broker_id"))
        name = detail.get("broker") if isinstance(detail.get("broker"), str) else None
        if bid == SLAVE and event in ("store", "send"):
            continue  # HA_SLAVE_WROTE: the row's own judgement
        if name is None or (bid is None and event in ("store", "send", "deliver")):
            if event == "replicate" and nameless_replicate is None:
                nameless_replicate = seq
            elif event == "store":
                nameless_store = seq
            elif event == "ha_link" and row.get("status") in (None, "DISK_LOST"):
                nameless_link = seq
                for p in pairs.values():
                    p.new_epoch()
            continue
        p = pairs.setdefault(name, _Pair())
        if event == "replicate":
            _replicate(p, row, detail, seq)
        elif event == "ha_link":
            if row.get("status") in (None, "DISK_LOST"):
                p.epoch = seq
                p.new_epoch()
        elif event == "store":
            offset = _int(row.get("commitlog_offset"))
            if offset is None:
                p.blind = seq
            else:
                p.master[offset] = seq
        elif event == "send" and bid == MASTER:
            _send(p, row, detail, seq)
    kept = {s for s in (nameless_replicate, nameless_link) if s is not None}
    for p in pairs.values():
        kept |= p.seqs()
    return PairCarry(frozenset(kept), nameless_store)


def _replicate(p: _Pair, row: Mapping[str, Any], detail: Mapping[str, Any], seq: int) -> None:
    records = detail.get("records")
    readable = isinstance(records, list)
    for item in records if readable else ():
        offset = _int(item[0]) if isinstance(item, list) and len(item) == 2 else None
        if offset is None or not (item[1] is None or isinstance(item[1], str)):
            readable = False
            continue
        p.slave_log[offset] = seq
    if not readable and p.unreadable is None:
        p.unreadable = seq
    end = _int(row.get("commitlog_offset"))
    if end is None:
        if p.no_end is None:
            p.no_end = seq
    elif end >= p.end[0]:
        p.end = (end, seq)


def _send(p: _Pair, row: Mapping[str, Any], detail: Mapping[str, Any], seq: int) -> None:
    key, status = row.get("msg_key"), row.get("status")
    if _int(detail.get("end")) is None or detail.get("role") is None or status not in _ACKED:
        return
    if not isinstance(key, str):
        return
    p.acked[key] = seq
    if detail.get("role") == "SYNC_MASTER" and status == "SEND_OK" and detail.get("wait") is True:
        p.sync_acked[key] = seq
