"""Which messages retention may have taken, and whether it was allowed to (issue 42): LOST's, TXN_UNRESOLVED's
and TIMER_UNFIRED's reading of ``expire`` rows.

Theory of operation
-------------------
RocketMQ deletes expired commitlog files whether or not a group consumed them
(``DefaultMessageStore.CleanCommitLogService``, ``model/retention.py``): what a deleted file held is not
LOST. LOST still judges a key when the trace proves retention did not take it, or took it early.

- An ``expire`` row with a null ``topic`` says the commitlog's min offset is now its
  ``commitlog_offset``. A copy of a key (the ``store``, ``send`` and ``txn_half`` rows naming one
  ``commitlog_offset``) whose row comes before it is **kept** by it when its offset is at or above that
  min, **taken** when below, and unknown when no row of the copy gives its offset (or the ``expire`` row
  gives none).
- An ``expire`` row with a ``topic`` says that queue's min offset is now its ``queue_offset`` (the
  conformance machine's observer writes them; a null ``queue_id``: any queue of the topic). A row placing
  a key in that topic before it (a ``store``, or a plain ``send``: a delayed or timer send's position is
  its schedule copy's) keeps it when in another queue or at or above that min; a row without a topic, a
  position or a queue, and a delayed or timer send, prove nothing. A copy an earlier commitlog row
  already put below the commitlog's min is that row's to judge (the broker writes a queue's row with the
  commitlog row that moved it). A queue's row that also gives a ``commitlog_offset`` reads the copies its
  position does not keep by that offset, as a commitlog row.
- Taken **early**: the copy's ``store`` row (the broker's, its ts the store time) is younger than
  fileReservedTime at a commitlog row of ``detail.cause`` ``reserved`` (the files were past
  fileReservedTime, not the disk over 0.85 taking every file at once), and the audit was given
  fileReservedTime (``AuditParams.expire_reserved_ms``: the configuration's ``fileReservedTimeMs``, the
  conformance machine's broker). A file goes once its last write is fileReservedTime old, and its last
  write is no earlier than any copy in it: such a deletion breaks the rule.

LOST judges a key only when every ``expire`` row before the drain keeps or takes early every copy of the
key before it (``verdict``): otherwise the key is not judged (``Verdict.judged`` False). A key taken
early is judged, and its LOST reason says when and by how much (``Verdict.reason``). Every part is
monotone in the rows' fields: a missing offset, position, cause or ts only makes the key unjudged; a
copy row without its msg_key in a trace with an ``expire`` row leaves LOST unjudged
(``traces/unjudged.py``).

TXN_UNRESOLVED and TIMER_UNFIRED read the same rows for the copies they wait on (``kept``): a half, and
the re-put copies the check service writes of it, in RMQ_SYS_TRANS_HALF_TOPIC (``half_copies``: its
``txn_half`` and ``txn_check`` rows, keyed by txn_id, each giving its copy's ``commitlog_offset`` and
half-queue ``queue_offset``); a timer message's copy in rmq_sys_wheel_timer (``timer_copies``: its
``store`` rows there, and its sends that may be timer sends, which give the timer copy's offsets). One is
judged only when every ``expire`` row before the drain kept every such copy before it: a commitlog row
by an offset at or above its min, a queue row of the copies' own topic by a position at or above its
min (a queue row of another topic takes none of them; a row giving both offsets takes a copy only below
both: ``kept``). A copy an ``expire`` may have taken, or whose
offset no row gives, is not judged, nor is one taken before fileReservedTime (the rows these rules read
give no store time). RocketMQ settles that a taken copy is never served again: 4.9's check service
reads the half queue, and a unit whose file went answers OFFSET_TOO_SMALL / MESSAGE_WAS_REMOVING /
OFFSET_FOUND_NULL, which TransactionalMessageBridge maps to OFFSET_ILLEGAL and ``check`` skips to the
next begin offset (no check, no discard, no op: the half stays unresolved); 5.x's timer wheel drops a
copy whose record it cannot read (TimerMessageStore: ``enqueue_get_miss`` on enqueue, a unit below the
queue's min skipped, ``dequeue_get_msg_miss`` on dequeue: the request released, nothing re-put).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from rmqspec.properties.codes import AuditParams
from rmqspec.traces.checks_common import TIMER_TOPIC, delayed_send, detail_of, timer_send

__all__ = ["COPY_EVENTS", "HALF_EVENTS", "HALF_TOPIC", "Verdict", "copies_by_key", "expire_rows", "half_copies",
           "kept", "timer_copies", "timer_copy", "verdict"]

COPY_EVENTS: tuple[str, ...] = ("store", "send", "txn_half")
HALF_EVENTS: tuple[str, ...] = ("txn_half", "txn_check")  # a half and its re-put copies
HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"


@attrs.frozen
class Verdict:
    """What retention did to one key: whether LOST may judge it, and the first ``expire`` that took a
    copy early with how many ms before fileReservedTime allowed (None: none was)."""

    judged: bool
    early_seq: int | None = None
    early_ms: int | None = None

    @property
    def reason(self) -> str:
        """The clause LOST's reason adds ("" unless a copy was taken early)."""
        if self.early_ms is None:
            return ""
        return (f"; retention deleted its file at seq {self.early_seq}, {self.early_ms} ms before "
                "fileReservedTime allowed (detail.cause reserved)")


JUDGED = Verdict(True)
NOT_JUDGED = Verdict(False)


def expire_rows(rows: Iterable[Mapping[str, Any]], drain: int) -> list[Mapping[str, Any]]:
    """The ``expire`` rows up to the drain's seq, in seq order."""
    return [r for r in rows if r["event"] == "expire" and r["seq"] <= drain]


def _queue_keeps(expire: Mapping[str, Any], row: Mapping[str, Any]) -> bool:
    """Whether a queue's ``expire`` row proves it kept the copy ``row`` (a row of the key before it)."""
    if row["event"] == "txn_half":
        return True  # a half lives in its own topic
    if row.get("topic") is None:
        return False
    if row["topic"] != expire["topic"]:
        return True
    if row["event"] == "send" and (delayed_send(row) or timer_send(row)):
        return False
    queue, own = expire.get("queue_id"), row.get("queue_id")
    if queue is not None and own is not None and own != queue:
        return True
    low, at = expire.get("queue_offset"), row.get("queue_offset")
    return low is not None and at is not None and at >= low


def _early_ms(expire: Mapping[str, Any], stores: Sequence[Mapping[str, Any]], reserved_ms: int | None) -> int | None:
    """How early the commitlog ``expire`` row took a copy whose broker ``store`` rows are ``stores``."""
    if reserved_ms is None or not stores or detail_of(expire).get("cause") != "reserved":
        return None
    early = min(r["ts"] for r in stores) - (expire["ts"] - reserved_ms)
    return early if early > 0 else None


def verdict(copies: Sequence[Mapping[str, Any]], expires: Sequence[Mapping[str, Any]],
            params: AuditParams) -> Verdict:
    """What the ``expires`` (``expire_rows``) did to a key whose copy rows (``COPY_EVENTS`` with its
    msg_key, in seq order) are ``copies``."""
    if not expires:
        return JUDGED
    first: tuple[int, int] | None = None  # (seq, ms) of the first early taking
    gone = -1  # the commitlog's min by the commitlog rows so far: what lies below is judged by them
    for expire in expires:
        before = [r for r in copies if r["seq"] < expire["seq"]]
        low = expire.get("commitlog_offset")
        if expire.get("topic") is not None:
            # its queue reading settles what it keeps and what an earlier commitlog reading judged; a
            # commitlog offset it also gives reads the rest as a commitlog row would (so dropping its topic
            # and position never makes a copy kept)
            before = [r for r in before if not (_queue_keeps(expire, r) or (
                r.get("commitlog_offset") is not None and r["commitlog_offset"] < gone))]
            if low is None:
                if before:
                    return NOT_JUDGED
                continue
        gone = max(gone, low if low is not None else -1)
        if before and low is None:
            return NOT_JUDGED
        by_copy: dict[int, list[Mapping[str, Any]]] = {}
        for r in before:
            if r.get("commitlog_offset") is None:
                return NOT_JUDGED
            by_copy.setdefault(r["commitlog_offset"], []).append(r)
        for offset, rows in by_copy.items():
            if offset >= low:
                continue
            ms = _early_ms(expire, [r for r in rows if r["event"] == "store"], params.expire_reserved_ms)
            if ms is None:
                return NOT_JUDGED
            if first is None:
                first = (expire["seq"], ms)
    return JUDGED if first is None else Verdict(True, *first)


def _rows_by(rows: Iterable[Mapping[str, Any]], events: tuple[str, ...],
             field: str) -> dict[Any, list[Mapping[str, Any]]]:
    out: dict[Any, list[Mapping[str, Any]]] = {}
    for r in rows:
        if r["event"] in events and r.get(field) is not None:
            out.setdefault(r[field], []).append(r)
    return out


def copies_by_key(rows: Iterable[Mapping[str, Any]]) -> dict[Any, list[Mapping[str, Any]]]:
    """msg_key -> its copy rows (``COPY_EVENTS``), in seq order."""
    return _rows_by(rows, COPY_EVENTS, "msg_key")


def kept(copies: Sequence[Mapping[str, Any]], expires: Sequence[Mapping[str, Any]], home: str) -> bool:
    """Whether the ``expires`` (``expire_rows``) provably kept every one of ``copies`` (rows of copies
    living in topic ``home``, in seq order) that came before them. An ``expire`` row may have taken a copy
    that is below it on both of its readings: by the commitlog (a copy whose ``commitlog_offset`` is below
    the row's, or unknown; every copy when the row gives none) and by the queue (for a row of ``home``, a
    copy whose ``queue_offset``, its position in ``home``'s queue, is below the row's, or unknown; every
    copy when the row gives none; for a row of no topic, every copy; for a row of another topic, none).
    A commitlog row (no topic, no position) then reads by the commitlog alone, the model's queue rows (no
    commitlog offset) by the queue alone; a row giving both takes a copy only below both (a queue's units
    go only with the records they point to). Each absent field only widens what a row may have taken, so
    dropping one never makes a copy kept."""
    for expire in expires:
        topic = expire.get("topic")
        if topic is not None and topic != home:
            continue
        low, position = expire.get("commitlog_offset"), expire.get("queue_offset") if topic is not None else None
        for r in copies:
            if r["seq"] >= expire["seq"]:
                continue
            by_log = low is None or r.get("commitlog_offset") is None or r["commitlog_offset"] < low
            by_queue = topic is None or position is None or r.get("queue_offset") is None \
                or r["queue_offset"] < position
            if by_log and by_queue:
                return False
    return True


def half_copies(rows: Iterable[Mapping[str, Any]]) -> dict[Any, list[Mapping[str, Any]]]:
    """txn_id -> its ``HALF_EVENTS`` rows (the half's copies in ``HALF_TOPIC``), in seq order."""
    return _rows_by(rows, HALF_EVENTS, "txn_id")


def timer_copy(row: Mapping[str, Any]) -> bool:
    """Whether ``row`` may place a copy in rmq_sys_wheel_timer: a ``store`` there (or of unknown topic),
    a ``send`` not delayed (a timer send gives its timer copy's offsets; one without ``deliver_ts`` may
    be one, so it counts too: fewer keys judged, never more)."""
    if row["event"] == "store":
        return row.get("topic") in (TIMER_TOPIC, None)
    return row["event"] == "send" and not delayed_send(row)


def timer_copies(rows: Iterable[Mapping[str, Any]]) -> dict[Any, list[Mapping[str, Any]]]:
    """msg_key -> its rows that may place a copy in rmq_sys_wheel_timer (``timer_copy``), in seq order."""
    out: dict[Any, list[Mapping[str, Any]]] = {}
    for r in rows:
        if r.get("msg_key") is not None and r["event"] in ("store", "send") and timer_copy(r):
            out.setdefault(r["msg_key"], []).append(r)
    return out
