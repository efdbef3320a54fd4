"""The master/slave pair's rows replayed (issue 43): the one pass behind ``properties/inv_ha.py`` (over a
``History``), ``traces/checks_ha.py`` (the reference checker) and ``spark/rules_ha.py`` (the Spark audit),
written on plain rows (its module name is one ``traces`` may import: tests/test_layering.py).

Theory of operation
-------------------
A pair (``model/ha_pair.py``, or any pair writing the same columns, docs/trace-schema.md) names itself on every
row in ``detail.broker`` and the broker in ``detail.broker_id`` (0 master, 1 slave). ``judge_pair(rows)``
takes a trace's rows in seq order (plain mappings: a ``TraceEvent.as_row()``, a checker row, a Spark row with
``detail`` as JSON text) and keeps, in one pass, what the rows show of each pair:

- the slave's end (push2SlaveMaxOffset): the largest ``commitlog_offset`` of the ``replicate`` rows so far
  (a pair's trace starts with the pair: 0 before the first);
- the master's records of this epoch (``store`` rows of broker 0: commitlog offset → msg_key), and what reached
  the slave (``replicate`` rows' ``detail.records``, ``[commitlog_offset, msg_key]`` pairs);
- the master's acknowledged sends of this epoch (``send`` rows of broker 0 with ``detail.end``): all of them, and
  the SYNC_MASTER SEND_OKs of a waiting message. A ``ha_link`` DISK_LOST (the master's disk gone) ends the epoch.

Findings (``HaFinding``, seqs ascending, the offending row last):

- HA_SYNC_ACK_UNREPLICATED: a SEND_OK of a SYNC_MASTER (``detail.role``) for a waiting message whose
  ``detail.end`` is past the slave's end at the answer (CommitLog.submitReplicaRequest waits for
  push2SlaveMaxOffset ≥ the end). [last replicate, send] (just [send] before any).
- HA_SYNC_ACK_LOST: at a DISK_LOST, each SYNC SEND_OK of the epoch whose end is past the slave's end there
  (the ``ha_link`` row's ``commitlog_offset``, push2SlaveMaxOffset at the loss: a slave that lost records
  after an ack shows it; without it the loss is not judged). [send, ha_link].
- HA_SLAVE_SERVED_UNSTORED: a slave ``deliver`` of a copy that neither reached it (a replicate record at that
  offset, msg_keys compared) nor is the master's at that offset. [replicate or store, deliver] ([deliver]).
- HA_SLAVE_BEYOND_REPLICATED: a slave ``deliver`` at or past the slave's end. [last replicate, deliver].
- HA_SLAVE_NOT_PREFIX: a ``replicate`` whose ``detail.from`` is not the slave's end, or whose record is not the
  master's record at that offset. [store, replicate] ([replicate]).
- HA_SLAVE_WROTE: a ``store`` or ``send`` row of broker 1 (DefaultMessageStore.checkStoreStatus refuses every
  put on a SLAVE). [row].
- HA_ASYNC_TAIL_LOST (an observation): at a DISK_LOST of an ASYNC_MASTER (``detail.role``), the acknowledged
  sends past the slave's end there: the unreplicated tail, lost. [sends..., ha_link].

A missing value never makes a finding (SPEC §8; ``tests/traces/test_monotonic.py``): a row's own judgement
needs what it reads (a send without ``detail.end``, ``detail.role`` or a SEND_OK status, a delivery without
``commitlog_offset`` or ``detail.broker_id`` is not judged); and what other rows would have told is *unknown*,
never a default — a ``replicate`` without ``commitlog_offset`` leaves the slave's end unknown from there on
(no finding reads it after), one without readable ``detail.records`` leaves what reached the slave unknown; a
``store`` without ``detail.broker_id`` or ``commitlog_offset`` (it may be the master's) leaves the master's
records unknown for the epoch (a ``store`` without msg_key: that offset's key unknown); an ``ha_link`` without
status may be a disk loss, so the acks and the master's records before it are judged no more (a later
DISK_LOST starts a known epoch again). ``replicate`` and ``ha_link`` rows are a pair's by their event and
read without ``detail.broker_id``. A master's ``send`` without ``detail.wait`` (WAIT_STORE_MSG_OK) is not
judged by the SYNC rules: a message that does not wait is answered before the slave has it. Malformed values
(a ``detail.end`` not an integer, a record not an ``[offset, msg_key]`` pair) are read as absent. One pair
per broker name: each pair (``detail.broker``) is replayed on its own rows; a row without the name may be any
pair's (one seen before or after it), so what it would have told is unknown for every pair — the slave's write
(a ``store`` / ``send`` of broker 1) is judged without it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from rmqspec.properties.codes import Code, ObservationCode
from rmqspec.properties.inv_replay import detail_of

__all__ = ["HA_EVENTS", "HA_OBSERVATION_CODES", "HA_VIOLATION_CODES", "HaFinding", "judge_pair"]

MASTER, SLAVE = 0, 1
HA_VIOLATION_CODES: tuple[str, ...] = (
    Code.HA_SYNC_ACK_UNREPLICATED.value,
    Code.HA_SYNC_ACK_LOST.value,
    Code.HA_SLAVE_SERVED_UNSTORED.value,
    Code.HA_SLAVE_BEYOND_REPLICATED.value,
    Code.HA_SLAVE_NOT_PREFIX.value,
    Code.HA_SLAVE_WROTE.value,
)
HA_OBSERVATION_CODES: tuple[str, ...] = (ObservationCode.HA_ASYNC_TAIL_LOST.value,)
# the events the replay reads (a pair's rows among them carry ``detail.broker_id``)
HA_EVENTS = ("store", "send", "deliver", "replicate", "ha_link")
_ACKED = ("SEND_OK", "FLUSH_DISK_TIMEOUT", "FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE")


@attrs.frozen
class HaFinding:
    """One finding: its code, the proving rows' seqs then the offending one, keys, why, and (for ``Violation``)
    what was expected and what the rows show."""

    code: str
    seqs: tuple[int, ...]
    keys: Mapping[str, Any] = attrs.field(factory=dict, hash=False)
    reason: str = ""
    expected: str = ""
    actual: str = ""
    observation: bool = False


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _key(value: Any) -> str | None:
    return value if isinstance(value, str) else None


@attrs.define
class _Replay:
    """The pair as its rows show it (``None`` / False: unknown, see the module docstring)."""

    slave_end: int | None = 0
    end_row: int | None = None  # seq of the replicate row that set the slave's end
    master: dict[int, tuple[str | None, int]] = attrs.field(factory=dict)  # offset -> (msg_key, store seq)
    master_known: bool = True
    slave_log: dict[int, tuple[str | None, int]] = attrs.field(factory=dict)  # offset -> (msg_key, replicate seq)
    slave_log_known: bool = True
    acks_known: bool = True
    sync_acked: dict[str, tuple[int, int]] = attrs.field(factory=dict)  # msg_key -> (end, send seq)
    acked: dict[str, tuple[int, int]] = attrs.field(factory=dict)
    out: list[HaFinding] = attrs.field(factory=list)  # shared by the trace's pairs

    def find(self, code: Code | ObservationCode, proof: Iterable[int | None], row: Mapping[str, Any], reason: str,
             expected: object = "", actual: object = "", observation: bool = False) -> None:
        _find(self.out, code, proof, row, reason, expected, actual, observation)

    def unknown_epoch(self) -> None:
        """A row that may be this pair's disk loss: the acks and the master's records before it are unknown."""
        self.master, self.master_known = {}, False
        self.sync_acked, self.acked, self.acks_known = {}, {}, False


def _find(out: list[HaFinding], code: Code | ObservationCode, proof: Iterable[int | None], row: Mapping[str, Any],
          reason: str, expected: object = "", actual: object = "", observation: bool = False) -> None:
    seqs = sorted({s for s in proof if s is not None} | {int(row["seq"])})
    keys = {"msg_key": row.get("msg_key")} if row.get("msg_key") is not None else {}
    out.append(HaFinding(str(code), tuple(seqs), keys, reason, str(expected), str(actual), observation))


def judge_pair(rows: Iterable[Mapping[str, Any]]) -> list[HaFinding]:
    """Every HA finding (violations and the observation) of one trace's rows in seq order, each pair (its
    ``detail.broker``) replayed on its own rows."""
    out: list[HaFinding] = []
    pairs: dict[str, _Replay] = {}
    nameless = _Nameless()
    for row in rows:
        event = row["event"]
        if event not in HA_EVENTS:
            continue
        detail = detail_of(row)
        bid = _int(detail.get("broker_id"))
        name = _key(detail.get("broker"))
        if event == "store" and bid == SLAVE:  # the row's own judgement: any pair's slave
            _find(out, Code.HA_SLAVE_WROTE, (), row, "the slave wrote a store row",
                  "every put refused on a SLAVE (SERVICE_NOT_AVAILABLE)", row.get("status") or event)
            continue
        if bid == SLAVE and event == "send":
            _find(out, Code.HA_SLAVE_WROTE, (), row, "the slave wrote a send row",
                  "every put refused on a SLAVE (SERVICE_NOT_AVAILABLE)", row.get("status") or event)
            continue
        if name is None or (bid is None and event in ("store", "send", "deliver")):
            nameless.row(event, row.get("status"), bid, pairs.values())
            continue
        r = pairs.get(name)
        if r is None:
            r = pairs[name] = nameless.new_pair(out)
        if event == "replicate":
            _replicate(r, row, detail)
        elif event == "ha_link":
            _ha_link(r, row, detail)
        elif event == "store":
            _master_store(r, row)
        elif event == "send" and bid == MASTER:
            _send(r, row, detail)
        elif event == "deliver" and bid == SLAVE:
            _slave_deliver(r, row)
    return out


@attrs.define
class _Nameless:
    """What the rows no pair can be told for left unknown (a row without ``detail.broker``, or a ``store``
    without ``detail.broker_id``): it may be any pair's, one already seen or one seen later."""

    replicate: bool = False
    store: bool = False
    link: bool = False

    def row(self, event: str, status: Any, bid: int | None, pairs: Iterable[_Replay]) -> None:
        if event == "replicate":
            self.replicate = True
            for r in pairs:
                r.slave_end, r.slave_log_known = None, False
        elif event == "store" and bid != SLAVE:
            self.store = True
            for r in pairs:
                r.master_known = False
        elif event == "ha_link" and status in (None, "DISK_LOST"):
            self.link = True
            for r in pairs:
                r.unknown_epoch()

    def new_pair(self, out: list[HaFinding]) -> _Replay:
        return _Replay(out=out, slave_end=None if self.replicate else 0, slave_log_known=not self.replicate,
                       master_known=not (self.store or self.link), acks_known=not self.link)


def _master_store(r: _Replay, row: Mapping[str, Any]) -> None:
    offset = _int(row.get("commitlog_offset"))
    if offset is None:
        r.master_known = False  # it may be a master's record at an offset the replay cannot tell
        return
    r.master[offset] = (_key(row.get("msg_key")), int(row["seq"]))


def _replicate(r: _Replay, row: Mapping[str, Any], detail: Mapping[str, Any]) -> None:
    """HA_SLAVE_NOT_PREFIX: each moved record is the master's at its offset, continuing the slave's log."""
    start = _int(detail.get("from"))
    if start is not None and r.slave_end is not None and start != r.slave_end:
        r.find(Code.HA_SLAVE_NOT_PREFIX, (r.end_row,), row, "a transfer does not continue the slave's log",
               f"from {r.slave_end}", f"from {start}")
    records = detail.get("records")
    items = records if isinstance(records, list) else None
    for item in items or ():
        offset = _int(item[0]) if isinstance(item, list) and len(item) == 2 else None
        if offset is None or not (item[1] is None or isinstance(item[1], str)):
            r.slave_log_known = False
            continue
        key = item[1]
        stored = r.master.get(offset)
        if key is not None and stored is not None and stored[0] is not None and stored[0] != key:
            r.find(Code.HA_SLAVE_NOT_PREFIX, (stored[1],), row,
                   f"the slave received a record at {offset} the master stored another at", stored[0], key)
        elif stored is None and r.master_known:
            r.find(Code.HA_SLAVE_NOT_PREFIX, (), row,
                   f"the slave received a record at {offset} the master did not store there", "no master record",
                   key)
        r.slave_log[offset] = (key, int(row["seq"]))
    if items is None:
        r.slave_log_known = False
    end = _int(row.get("commitlog_offset"))
    if end is None:
        r.slave_end = None  # unknown from here on: a later end is a lower bound only
    elif r.slave_end is not None and end >= r.slave_end:
        r.slave_end, r.end_row = end, int(row["seq"])


def _send(r: _Replay, row: Mapping[str, Any], detail: Mapping[str, Any]) -> None:
    """HA_SYNC_ACK_UNREPLICATED; the acks a disk loss is judged against."""
    end, role, key, status = _int(detail.get("end")), detail.get("role"), _key(row.get("msg_key")), row.get("status")
    if end is None or role is None or status not in _ACKED:
        return
    seq = int(row["seq"])
    if key is not None:
        r.acked[key] = (end, seq)
    if role == "SYNC_MASTER" and status == "SEND_OK" and detail.get("wait") is True:
        if key is not None:
            r.sync_acked[key] = (end, seq)
        if r.slave_end is not None and end > r.slave_end:
            r.find(Code.HA_SYNC_ACK_UNREPLICATED, (r.end_row,), row,
                   "a SYNC_MASTER answered SEND_OK before the slave held the message",
                   f"slave end >= {end}", f"slave end {r.slave_end}")


def _slave_deliver(r: _Replay, row: Mapping[str, Any]) -> None:
    """HA_SLAVE_BEYOND_REPLICATED and HA_SLAVE_SERVED_UNSTORED."""
    offset = _int(row.get("commitlog_offset"))
    if offset is None:
        return
    key = _key(row.get("msg_key"))
    if r.slave_end is not None and offset >= r.slave_end:
        r.find(Code.HA_SLAVE_BEYOND_REPLICATED, (r.end_row,), row, "the slave served a copy past its replicated end",
               f"commitlog offset < {r.slave_end}", offset)
    got = r.slave_log.get(offset)
    if got is not None:
        if key is None or got[0] is None or got[0] == key:
            return
        r.find(Code.HA_SLAVE_SERVED_UNSTORED, (got[1],), row, "the slave served a copy it did not receive there",
               got[0], key)
        return
    if not r.slave_log_known:
        return  # a transfer whose records are unknown may have brought it
    stored = r.master.get(offset)
    if stored is not None:
        if key is None or stored[0] is None or stored[0] == key:
            return
        r.find(Code.HA_SLAVE_SERVED_UNSTORED, (stored[1],), row, "the slave served a copy the master did not store "
               "there", stored[0], key)
    elif r.master_known:
        r.find(Code.HA_SLAVE_SERVED_UNSTORED, (), row, "the slave served a copy the master did not store there",
               "a master record at that offset", key)


def _ha_link(r: _Replay, row: Mapping[str, Any], detail: Mapping[str, Any]) -> None:
    """HA_SYNC_ACK_LOST and HA_ASYNC_TAIL_LOST at a disk loss; a new epoch of the master's log begins."""
    status = row.get("status")
    if status is None:
        r.unknown_epoch()  # it may be a disk loss: the epochs' acks and the master's records are not told apart
        return
    if status != "DISK_LOST":
        return
    end = _int(row.get("commitlog_offset"))  # the slave's end the master knew at the loss
    if end is not None and r.acks_known:
        for key, (ack_end, seq) in sorted(r.sync_acked.items()):
            if ack_end > end:
                r.find(Code.HA_SYNC_ACK_LOST, (seq,), row, f"{key}, acknowledged by a SYNC_MASTER, is lost with "
                       "the master's disk", f"on the slave (end >= {ack_end})", f"slave end {end}")
        lost = sorted((k, seq) for k, (ack_end, seq) in r.acked.items() if ack_end > end)
        if detail.get("role") == "ASYNC_MASTER" and lost:
            r.find(ObservationCode.HA_ASYNC_TAIL_LOST, (seq for _, seq in lost), row,
                   f"{len(lost)} acknowledged message(s) lost with the ASYNC_MASTER's disk: the tail past the "
                   f"slave's replicated end {end} (cause: replication after the answer)",
                   "", ",".join(k for k, _ in lost), observation=True)
    r.master, r.master_known = {}, True
    r.sync_acked, r.acked, r.acks_known = {}, {}, True
