"""What a trace's rows lacking fields leave unjudged (SPEC §8: missing optional data is "not judged").

Theory of operation
-------------------
Only ``seq``, ``ts`` and ``event`` are required; any other column (and any key of a
structured ``detail``) may be absent on any row. The detectors of ``checks_*.py`` (and the
Spark judges that copy them) skip a row that lacks what they read, or read an absent value
as a default; on their own they would then judge the rest as if the row did not exist, and
report what the trace cannot prove. This module states, once for the reference checker and
the Spark audit, what each row lacking a field could change, and the audit withholds those
findings: **removing information from a trace never adds a finding**.

``row_unjudged(row, facts)`` maps one row to ``Unjudged`` entries, one per rule (code) the
missing fields touch: the *scope* of that rule the row may belong to (the key columns whose
values the row does give — an absent key column is a wildcard) and the *span* of offending
rows it may change — every later one for a rule that only looks back (``since`` = the row's
seq), any for a rule that looks ahead (LOST, TXN_UNRESOLVED, TIMER_UNFIRED, UNEXPECTED, RECOVERED,
the half-visibility and filter rules), or only the row itself when the rule judges the row and
nothing else reads it (``since == until == seq``). A finding is withheld (``Withheld.covers``)
when an entry of its code matches it: equal on every key of the entry and its last seq (the
offending row) in the span. Each entry is as narrow as the rule's key allows: a row missing
only a queue's offset leaves that queue unjudged from that row on, not the whole trace.

An entry depends on the row and on ``TraceFacts`` (the trace's crash rows, whether some crash
lists keys at risk, whether the filter rules read the trace, the first and last seq of the
rows the crash exemptions read positions from, ``ANCHORS``, and the last drain's seq and ts: what
the Spark audit's facts pass knows before any rule runs), never on other rows, so the Spark audit
computes the same entries in one pass over the rows a cheap column test (``CANDIDATES``) lets
through, and withholds with two anti-joins (``spark/unjudged.py``). An incremental audit carries the
rows whose entries reach beyond themselves (``lasting_rows``, ``traces/carry.py``); the facts they
read survive the carry (every crash and drain row is carried, a trace with filter details whole, and
a commit, a half-queue and a schedule position before each crash).

A few absent values are values, not unknowns, by the conventions SPEC §8 and
``traces/README.md`` fix, and are read as such:

- a ``send`` without status is acknowledged (SPEC §8.1, LOST);
- a ``crash`` without ``detail.at_risk`` puts no key at risk;
- a ``send_back`` without ``detail.max`` was judged against the group's configured max (the
  request carried none);
- a ``deliver`` / ``consume`` without ``detail.subscription`` shows none (a group's subscriptions
  are those its rows show: a group no row shows one of consumes all of a topic), one without
  ``detail.expression_type`` a TAG subscription; a message's ``detail.tags`` / ``detail.properties``
  absent where the other is given: it has none (RocketMQ's own defaults) — a message no row states
  attributes of is unknown to the filter rules, and LOST leaves it to a group that filters its topic
  (``checks_filter.filter_exempt``);
- a ``send`` without ``delay_level`` is not delayed, one without ``deliver_ts`` is not a timer message
  (5.x; a ``store`` of its msg_key in rmq_sys_wheel_timer still says it is one); a COMMIT ``txn_end``
  without topic commits to its half's (LOST's reading: RocketMQ writes the real topic the half
  names); a ``store`` in RMQ_SYS_TRANS_OP_HALF_TOPIC without msg_key is an op message (it has no
  UNIQ_KEY);
- a consumer's row (``deliver``, ``consume``, ``commit_offset``, ``orderly_start`` / ``orderly_end``)
  without ``detail.message_model`` is a clustering client's; a broadcasting client's says BROADCASTING
  (``checks_common.broadcasting_row``; issue 42); a ``commit_offset`` without ``detail.from_where``
  is a commit, not where a client began pulling a queue;
- a routed ``send`` without ``detail.latency_max`` and ``detail.not_available_duration``: 4.9.8's fault tables;
- an ``orderly_end`` without status is not a ROLLBACK (a listener without autoCommit putting back
  what it consumed since its last commit: ORDER_KEY_REORDERED compares anew after the owner's).

Dropping one of them changes what the trace says (the property test in ``tests/traces/test_monotonic.py``
leaves them out and says why). Everything else absent is unknown. ``not_judged`` counts, per (code, event),
the rows with an entry of that code: the report's "not judged" section (``checker.not_judged_reasons``).

An ``expire`` row (retention deleted files) lacks nothing either: it leaves OFFSET_OVERRUN unjudged
after it (a client answered OFFSET_ILLEGAL commits past what it was delivered). LOST, TXN_UNRESOLVED and
TIMER_UNFIRED read which keys, halves and timer copies the files took themselves (``checks_retention``);
the row is counted under the reason ``EXPIRED`` for the last two (an entry of its own seq, which their
findings, ending at the drain, never have). One more kind of entry comes from a row that lacks nothing: a timer
message's row (a timer ``send``, a ``store`` in rmq_sys_wheel_timer) before the drain whose
``deliver_ts`` is after the drain's ts leaves LOST of its msg_key unjudged (the message may still
wait in the wheel), counted under the reason ``checks_common.NOT_JUDGED_WHY[NOT_DUE]``
(``Unjudged.why``) instead of a missing field.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import attrs

from rmqspec.properties.codes import Code, ObservationCode
from rmqspec.traces.checks_common import (
    ACKED_SEND_STATUSES,
    DLQ_PREFIX,
    EXPIRED,
    NOT_DUE,
    ONEWAY,
    SCHEDULE_TOPIC,
    TIMER_TOPIC,
    UNRECORDED,
    Finding,
    broadcasting_row,
    detail_of,
)

__all__ = [
    "ANCHORS",
    "CANDIDATES",
    "DETAIL_FIELDS",
    "FILTER_EVENTS",
    "SET",
    "TraceFacts",
    "Unjudged",
    "Withheld",
    "anchor",
    "assess",
    "candidate",
    "filter_text",
    "lasting_rows",
    "not_judged",
    "row_unjudged",
    "trace_facts",
    "withhold",
]

SCOPE_KEYS: tuple[str, ...] = ("group", "topic", "queue_id", "msg_key", "client_id", "txn_id")
FILTER_EVENTS: tuple[str, ...] = ("send", "store", "deliver", "consume")
_FILTER_NAMES = ('"subscription"', '"properties"', '"tags"')
_FILTER_SET = frozenset(FILTER_EVENTS)
_QUEUE = ("group", "topic", "queue_id")
OP_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"


class _Set:
    """``SET`` in a condition's values: any non-null value."""

    def __repr__(self) -> str:
        return "SET"


SET = _Set()
# Fields of ``CANDIDATES`` read from ``detail`` (the Spark audit's derived columns of the same names).
DETAIL_FIELDS: frozenset[str] = frozenset({"check_times", "from_commitlog_offset"})
# event -> (condition, fields): the rows some entry may come from are rows of ``event`` that
# lack one of ``fields`` while every (column, values) of ``condition`` holds (the column's value
# in ``values``; ``None`` in ``values`` lets a null through, ``SET`` any other value); empty
# ``fields``: every row the condition lets through (a timer message's rows, which LOST may not judge
# at the drain). A superset of the rows ``row_unjudged`` gives entries for (a test holds it so),
# cheap to state as a Spark column.
Condition = tuple[tuple[str, tuple[Any, ...]], ...]
CANDIDATES: tuple[tuple[str, Condition, tuple[str, ...]], ...] = (
    ("store", (), ("topic", "queue_id", "queue_offset", "msg_key")),
    ("store", (("topic", (SCHEDULE_TOPIC,)),), ("deliver_ts", "reconsume_times", "msg_id")),
    ("store", (("topic", (TIMER_TOPIC,)),), ()),
    ("send", (), ("topic", "msg_key")),
    ("send", (("delay_level", (None, 0)),), ("queue_id", "queue_offset")),
    ("send", (("delay_level", (None, 0)), ("deliver_ts", (SET,))), ()),
    ("deliver", (), ("group", "topic", "queue_id", "queue_offset", "msg_key", "reconsume_times", "client_id")),
    ("consume", (), ("group", "topic", "queue_id", "queue_offset", "msg_key", "status", "client_id")),
    ("send_back", (), ("group", "topic", "queue_id", "queue_offset", "msg_key", "reconsume_times", "status")),
    ("send_back", (("status", ("RETRY", None)),), ("delay_level", "deliver_ts")),
    ("send_back", (("status", ("DLQ", None)),), ("delay_level",)),
    ("schedule_fire", (), ("msg_key", "msg_id", "reconsume_times")),
    ("timer_fire", (), ("msg_key", "deliver_ts", "from_commitlog_offset")),
    ("txn_half", (), ("msg_key", "txn_id", "queue_offset")),
    ("txn_end", (), ("msg_key", "status", "txn_id")),
    ("txn_check", (), ("txn_id", "queue_offset", "msg_key", "check_times")),
    ("txn_discard", (), ("txn_id",)),
    ("commit_offset", (), ("group", "topic", "queue_id", "queue_offset", "client_id")),
    ("lock", (), ("group", "topic", "queue_id", "client_id", "status")),
    ("unlock", (), ("group", "topic", "queue_id", "client_id")),
    ("orderly_start", (), ("group", "topic", "queue_id", "client_id")),
    ("orderly_end", (), ("group", "topic", "queue_id", "client_id")),
    ("crash", (), ("status",)),
    ("expire", (), ()),
)


@attrs.frozen
class Unjudged:
    """One rule's part a row lacking fields leaves unjudged: findings of ``code`` equal on every
    (key, value) of ``keys`` whose offending (last) seq lies in [``since``, ``until``] (None:
    unbounded)."""

    code: str
    keys: tuple[tuple[str, Any], ...] = ()
    since: int | None = None
    until: int | None = None
    # why, when the row lacks nothing: a key of ``checks_common.NOT_JUDGED_WHY`` (counted under it)
    why: str | None = None

    def covers(self, finding: Finding) -> bool:
        last = finding.seqs[-1]
        if (self.since is not None and last < self.since) or (self.until is not None and last > self.until):
            return False
        return all(finding.keys.get(k) == v for k, v in self.keys)


# Rows whose seqs ``TraceFacts`` keeps (``anchor``): the first commit with a full queue key and
# offset; the first and last txn_half / txn_check with a half-queue position; the first and last
# SCHEDULE_TOPIC_XXXX store with a position; the first and last ``expire`` (a copy row without its
# msg_key before the last leaves LOST unjudged: ``checks_retention``). The crash exemptions of LOST and
# TXN_UNRESOLVED read positions only when such a row and a crash surround the row lacking one.
ANCHORS: tuple[str, ...] = ("commit", "half_position", "schedule_position", "expire")
_ANCHOR_EVENTS = frozenset({"commit_offset", "txn_half", "txn_check", "store", "expire"})


def anchor(row: Mapping[str, Any]) -> str | None:
    """Which of ``ANCHORS`` ``row`` is, if any."""
    ev = row["event"]
    if ev == "commit_offset":
        full = all(row.get(c) is not None for c in ("group", "topic", "queue_id", "queue_offset"))
        return "commit" if full else None
    if ev in ("txn_half", "txn_check"):
        return "half_position" if row.get("queue_offset") is not None else None
    if ev == "store" and row.get("topic") == SCHEDULE_TOPIC and row.get("queue_offset") is not None:
        return "schedule_position"
    if ev == "expire":
        return "expire"
    return None


@attrs.frozen
class TraceFacts:
    """What the entries of a row may depend on besides the row: the trace's ``crash`` rows as
    (seq, status) in seq order, whether a crash lists keys at risk, whether the filter rules read
    the trace (a row of ``FILTER_EVENTS`` whose detail text names a subscription or attributes),
    the (first seq, last seq) of each of ``ANCHORS`` present, and the (seq, ts) of the last
    ``drain`` (None: no drain)."""

    crashes: tuple[tuple[int, str | None], ...] = ()
    at_risk: bool = False
    filtered: bool = False
    anchors: Mapping[str, tuple[int, int]] = attrs.field(factory=dict)
    drain: tuple[int, int] | None = None

    def not_due(self, seq: int, deliver_ts: int | None) -> bool:
        """Whether a timer message's row at ``seq`` due at ``deliver_ts`` (None: unknown) comes
        before the drain and is not due at its ts (LOST does not judge it then)."""
        return self.drain is not None and seq < self.drain[0] and (deliver_ts is None or deliver_ts > self.drain[1])

    def _seqs(self, power: bool) -> list[int]:
        # a crash without status may have been a power loss
        return [s for s, st in self.crashes if not power or st in ("power", None)]

    def crash_between(self, low: int | None, high: int | None, power: bool = False) -> bool:
        """Whether a crash (a power loss, when ``power``) lies strictly between two seqs (None:
        no bound on that side)."""
        return any((low is None or low < s) and (high is None or s < high) for s in self._seqs(power))

    def any_power(self) -> bool:
        return bool(self._seqs(True))

    def first(self, name: str) -> int | None:
        """The first seq of the anchor ``name``, or None."""
        got = self.anchors.get(name)
        return got[0] if got else None

    def last(self, name: str) -> int | None:
        got = self.anchors.get(name)
        return got[1] if got else None

    def positioned_after(self, seq: int, name: str) -> bool:
        """A power crash after ``seq``, then an ``name`` anchor after it."""
        last = self.last(name)
        return last is not None and self.crash_between(seq, last, power=True)

    def positioned_before(self, seq: int, name: str, power: bool = True) -> bool:
        """An ``name`` anchor, then a crash (a power loss, when ``power``) before ``seq``."""
        first = self.first(name)
        return first is not None and self.crash_between(first, seq, power=power)


def filter_text(row: Mapping[str, Any]) -> bool:
    """Whether the filter rules read ``row``: an event of ``FILTER_EVENTS`` whose ``detail`` JSON text
    names a subscription, properties or tags (the Spark audit's ``inputs.filter_detail`` test)."""
    if row["event"] not in FILTER_EVENTS:
        return False
    detail = row.get("detail")
    if detail is None:
        return False
    text = detail if isinstance(detail, str) else json.dumps(detail)
    return any(name in text for name in _FILTER_NAMES)


def trace_facts(rows: Iterable[Mapping[str, Any]]) -> TraceFacts:
    """``TraceFacts`` of one trace's rows (any order)."""
    from rmqspec.traces.checks_common import at_risk_keys

    crashes: list[tuple[int, str | None]] = []
    at_risk = filtered = False
    anchors: dict[str, tuple[int, int]] = {}
    drain: tuple[int, int] | None = None
    for row in rows:
        event = row["event"]
        if event == "drain":
            if drain is None or (row["seq"], row["ts"]) > drain:
                drain = (int(row["seq"]), int(row["ts"]))
            continue
        if event == "crash":
            crashes.append((row["seq"], row.get("status")))
            at_risk = at_risk or bool(at_risk_keys(row))
            continue
        if not filtered and event in _FILTER_SET and row.get("detail") is not None:
            filtered = filter_text(row)
        if event not in _ANCHOR_EVENTS:
            continue
        name = anchor(row)
        if name is not None:
            seq = int(row["seq"])
            low, high = anchors.get(name, (seq, seq))
            anchors[name] = (min(low, seq), max(high, seq))
    return TraceFacts(tuple(sorted(crashes, key=lambda c: c[0])), at_risk, filtered, anchors, drain)


_BY_EVENT: dict[str, list[tuple[Condition, tuple[str, ...]]]] = {}
for _event, _condition, _fields in CANDIDATES:
    _BY_EVENT.setdefault(_event, []).append((_condition, _fields))


def candidate(row: Mapping[str, Any]) -> bool:
    """Whether ``row`` is one of ``CANDIDATES``' rows (only those can have entries). Loops, not
    ``all`` / ``any`` over generators: the checker calls this once per row."""
    event = row["event"]
    get = row.get
    for condition, fields in _BY_EVENT.get(event, ()):
        holds = True
        for c, values in condition:
            value = get(c)
            if value not in values and (value is None or SET not in values):
                holds = False
                break
        if not holds:
            continue
        if not fields:
            return True
        for f in fields:
            if (get(f) if f not in DETAIL_FIELDS else _value(row, f)) is None:
                return True
    return event in _FILTER_SET and get("detail") is not None and filter_text(row)


def _value(row: Mapping[str, Any], name: str) -> Any:
    """A column, or one of ``DETAIL_FIELDS`` of the row's detail (``from_commitlog_offset`` only
    as a JSON integer: ``checks_timer.from_commitlog_offset``)."""
    if name == "from_commitlog_offset":
        from rmqspec.traces.checks_timer import from_commitlog_offset

        return from_commitlog_offset(row)
    if name in DETAIL_FIELDS:
        return detail_of(row).get(name)
    return row.get(name)


class _Entries:
    """The entries of one row, built with one call per rule."""

    def __init__(self, row: Mapping[str, Any]):
        self.row = row
        self.seq = int(row["seq"])
        self.out: list[Unjudged] = []

    def lacks(self, *fields: str) -> bool:
        return any(_value(self.row, f) is None for f in fields)

    def _keys(self, names: Sequence[str]) -> tuple[tuple[str, Any], ...]:
        return tuple((n, self.row[n]) for n in names if self.row.get(n) is not None)

    def ahead(self, code: str, *names: str, why: str | None = None) -> None:
        """Findings of ``code`` in the scope ``names`` anywhere (a rule that looks ahead)."""
        self.out.append(Unjudged(str(code), self._keys(names), why=why))

    def later(self, code: str, *names: str) -> None:
        """Findings of ``code`` in the scope ``names`` from this row on (a rule that looks back)."""
        self.out.append(Unjudged(str(code), self._keys(names), since=self.seq))

    def here(self, code: str, why: str | None = None) -> None:
        """The finding of ``code`` this row itself would give."""
        self.out.append(Unjudged(str(code), (), since=self.seq, until=self.seq, why=why))


def row_unjudged(row: Mapping[str, Any], facts: TraceFacts) -> list[Unjudged]:
    """The entries of one (valid) row: what its missing fields leave unjudged, rule by rule."""
    rule = _RULES.get(row["event"])
    if rule is None:
        return []
    e = _Entries(row)
    rule(e, row, facts)
    if facts.filtered:
        if row["event"] in FILTER_EVENTS:
            _filters(e, row)
        elif row["event"] == "commit_offset":
            _filter_commit(e, row)
    return e.out


# ------------------------------------------------------------------ per event


def _store(e: _Entries, r: Mapping[str, Any], f: TraceFacts) -> None:
    topic = r.get("topic")
    if e.lacks("topic", "queue_id", "queue_offset"):
        e.later(Code.ORDER_QUEUE_GAP, "topic", "queue_id")
    if e.lacks("msg_key") and topic != OP_TOPIC:  # an op message has no UNIQ_KEY: no one's message
        e.ahead(Code.UNEXPECTED)
    # LOST's exemptions: a consumer offset saved before a crash past a store at a reused position;
    # a schedule copy at a position a power loss reused (it needs a position before the loss)
    _copy_of_someone(e, f, Code.LOST, Code.TIMER_UNFIRED)
    placed = e.lacks("topic", "queue_id", "queue_offset", "msg_key")
    if placed and f.positioned_before(e.seq, "commit", power=False):
        e.ahead(Code.LOST, "msg_key")
    if topic in (SCHEDULE_TOPIC, None) and placed:
        if f.positioned_before(e.seq, "schedule_position"):
            e.ahead(Code.LOST, "msg_key")
        if e.lacks("topic", "queue_id", "queue_offset") and f.positioned_after(e.seq, "schedule_position"):
            e.ahead(Code.LOST)  # the highest position before a loss
    if topic in (SCHEDULE_TOPIC, None):
        if e.lacks("topic", "deliver_ts", "reconsume_times", "msg_key", "msg_id"):
            e.later(Code.DELAY_EARLY, "msg_key")
        if e.lacks("topic", "reconsume_times", "msg_key"):
            e.later(Code.SCHEDULE_DUPLICATED, "msg_key")
    if (topic is None or topic.startswith(DLQ_PREFIX)) and e.lacks("topic", "msg_key"):
        group = topic[len(DLQ_PREFIX):] if topic is not None else None
        keys = tuple(kv for kv in (("group", group), ("msg_key", r.get("msg_key"))) if kv[1] is not None)
        e.out.append(Unjudged(Code.DLQ_DELAYED.value, keys, since=e.seq))
    if topic is None:  # maybe a delayed or timer copy: a broadcasting client's LOST leaves such keys
        e.ahead(Code.LOST, "msg_key")
    # a timer copy (rmq_sys_wheel_timer) not due at the drain: LOST does not judge its msg_key
    if topic in (TIMER_TOPIC, None) and f.not_due(e.seq, r.get("deliver_ts")):
        complete = topic is not None and r.get("deliver_ts") is not None
        e.ahead(Code.LOST, "msg_key", why=NOT_DUE if complete else None)
    # TIMER_EARLY: a timer copy bounds its key's first delivery, a copy elsewhere drops the bound
    if e.lacks("msg_key") and topic != OP_TOPIC:
        e.later(Code.TIMER_EARLY)
    elif topic is None or (topic == TIMER_TOPIC and e.lacks("deliver_ts")):
        e.later(Code.TIMER_EARLY, "msg_key")


def _send(e: _Entries, r: Mapping[str, Any], f: TraceFacts) -> None:
    if e.lacks("topic", "msg_key"):
        e.here(Code.LOST)  # an acknowledgement missing: fewer findings, never more
    _copy_of_someone(e, f, Code.LOST, Code.TIMER_UNFIRED)
    if e.lacks("msg_key"):
        e.ahead(Code.UNEXPECTED, why=UNRECORDED if detail_of(r).get("unrecorded") is True else None)
        if r.get("status") is None or r["status"] in ACKED_SEND_STATUSES | {ONEWAY}:
            e.ahead(ObservationCode.RECOVERED)  # an acknowledgement, or a oneway send, of some key
    plain = not r.get("delay_level") and r.get("deliver_ts") is None  # its position is in its topic
    if plain and e.lacks("topic", "queue_id", "queue_offset", "msg_key") and f.positioned_before(
            e.seq, "commit", power=False):
        e.ahead(Code.LOST, "msg_key")
    if not r.get("delay_level"):
        if r.get("deliver_ts") is not None and f.not_due(e.seq, r["deliver_ts"]):  # a timer send
            e.ahead(Code.LOST, "msg_key", why=NOT_DUE)
        if e.lacks("msg_key"):  # a timer send bounds, another send drops the bound of its key
            e.later(Code.TIMER_EARLY)


def _deliver(e: _Entries, r: Mapping[str, Any], _f: TraceFacts) -> None:
    if e.lacks("msg_key"):
        for code in (Code.UNEXPECTED, Code.TXN_VISIBLE_BEFORE_COMMIT, Code.TXN_ROLLBACK_VISIBLE):
            e.here(code)
    if e.lacks("group", "topic", "queue_id", "queue_offset"):
        e.here(Code.OFFSET_OVERRUN)  # only this row: a deliver missing leaves fewer offsets pending
    if e.lacks("group", "msg_key", "reconsume_times"):
        e.here(Code.RETRY_EARLY)
        e.here(Code.DLQ_MISSED)
    if e.lacks("msg_key", "reconsume_times"):
        e.here(Code.DELAY_EARLY)
    if e.lacks("msg_key", "reconsume_times", "topic"):
        e.here(Code.TIMER_EARLY)


def _consume(e: _Entries, r: Mapping[str, Any], _f: TraceFacts) -> None:
    success = r.get("status") in ("SUCCESS", None)
    if success and e.lacks("group", "topic", "queue_id", "client_id", "queue_offset", "status"):
        e.later(Code.ORDER_KEY_REORDERED, *_QUEUE)
    if success and e.lacks("group", "msg_key", "status"):
        e.ahead(Code.LOST, "group", "msg_key")
    if broadcasting_row(r):  # a broadcasting client's consume of any status counts, for its client only
        if e.lacks("group", "msg_key", "client_id"):
            e.ahead(Code.LOST, "group", "msg_key")
        if e.lacks("group", "topic", "queue_id", "queue_offset", "client_id"):
            e.later(Code.OFFSET_OVERRUN, *_QUEUE)
    if success and e.lacks("group", "topic", "queue_id", "queue_offset", "status"):
        e.later(Code.OFFSET_OVERRUN, *_QUEUE)
    if e.lacks("msg_key"):
        e.here(Code.UNEXPECTED)


def _send_back(e: _Entries, r: Mapping[str, Any], _f: TraceFacts) -> None:
    status = r.get("status")
    retry, dlq = status in ("RETRY", None), status in ("DLQ", None)
    if dlq and e.lacks("group", "msg_key", "status"):
        e.ahead(Code.LOST, "group", "msg_key")
        e.later(Code.DLQ_DELAYED, "group", "msg_key")
    if e.lacks("group", "topic", "queue_id", "queue_offset"):
        e.later(Code.OFFSET_OVERRUN, *_QUEUE)
    if retry and e.lacks("status", "delay_level", "deliver_ts"):
        e.here(Code.RETRY_EARLY)
    if retry and e.lacks("status", "group", "msg_key", "reconsume_times", "deliver_ts"):
        e.later(Code.RETRY_EARLY, "group", "msg_key")
    if dlq and e.lacks("status", "group", "reconsume_times", "delay_level"):
        e.here(Code.DLQ_EARLY)
    if retry and e.lacks("status", "group", "reconsume_times"):
        e.here(Code.DLQ_MISSED)
    if e.lacks("group", "msg_key", "reconsume_times"):
        e.later(Code.DLQ_MISSED, "group", "msg_key")  # the max in force for the copy it made


def _schedule_fire(e: _Entries, r: Mapping[str, Any], _f: TraceFacts) -> None:
    if e.lacks("msg_key", "reconsume_times"):
        e.later(Code.DELAY_EARLY, "msg_key")
        e.later(Code.SCHEDULE_DUPLICATED, "msg_key")
    if e.lacks("msg_id"):
        e.here(Code.DELAY_EARLY)


def _timer_fire(e: _Entries, _r: Mapping[str, Any], _f: TraceFacts) -> None:
    if e.lacks("msg_key", "deliver_ts"):
        e.here(Code.TIMER_EARLY)
    if e.lacks("msg_key"):  # a fire drops its key's delivery bound; it fires some key
        e.later(Code.TIMER_EARLY)
        e.ahead(Code.TIMER_UNFIRED)
    if e.lacks("msg_key", "from_commitlog_offset"):
        e.here(Code.TIMER_DUPLICATED)


def _copy_of_someone(e: _Entries, f: TraceFacts, *codes: str, key: str = "msg_key") -> None:
    """A copy row without its msg_key (a half's without its txn_id) before the last ``expire``: which
    key's copy retention took (or kept) is unknown, so ``codes`` judge none (``checks_retention``)."""
    last = f.last("expire")
    if last is not None and e.seq < last and e.lacks(key):
        for code in codes:
            e.ahead(code)


def _txn_half(e: _Entries, r: Mapping[str, Any], f: TraceFacts) -> None:
    _copy_of_someone(e, f, Code.LOST)
    _copy_of_someone(e, f, Code.TXN_UNRESOLVED, key="txn_id")
    if e.lacks("msg_key"):
        e.ahead(Code.UNEXPECTED)
        e.ahead(ObservationCode.RECOVERED)
        e.here(Code.TXN_VISIBLE_BEFORE_COMMIT)
        e.here(Code.TXN_ROLLBACK_VISIBLE)
        if f.at_risk:
            e.ahead(Code.TXN_UNRESOLVED, "txn_id")
    if e.lacks("txn_id"):
        e.ahead(Code.TXN_CHECK_EARLY)
        e.here(Code.TXN_UNRESOLVED)
        e.later(Code.TXN_CHECK_AFTER_RESOLVED)
        e.later(Code.TXN_DISCARD_EARLY)
    elif e.lacks("queue_offset"):
        e.later(Code.TXN_CHECK_AFTER_RESOLVED, "txn_id")
    if e.lacks("queue_offset"):  # the check progress a power loss leaves (``skipped_halves``)
        if f.crash_between(e.seq, None, power=True):
            e.ahead(Code.TXN_UNRESOLVED)
        elif f.positioned_before(e.seq, "half_position"):
            e.ahead(Code.TXN_UNRESOLVED, "txn_id")


def _txn_end(e: _Entries, r: Mapping[str, Any], f: TraceFacts) -> None:
    status = r.get("status")
    if status not in ("COMMIT", "ROLLBACK", None):
        return
    # without its topic a COMMIT acknowledges on its half's (the only topic RocketMQ writes it to);
    # without its position or txn_id an op resolves no copy (fewer TXN_CHECK_AFTER_RESOLVED)
    if e.lacks("msg_key", "status"):
        if status != "ROLLBACK":
            e.ahead(ObservationCode.RECOVERED, "msg_key")
        e.ahead(Code.TXN_VISIBLE_BEFORE_COMMIT, "msg_key")
        e.ahead(Code.TXN_ROLLBACK_VISIBLE, "msg_key")
    if e.lacks("txn_id", "status"):
        e.later(Code.TXN_DOUBLE_RESOLVED, "txn_id")
        e.later(ObservationCode.DUPLICATE_COMMIT, "txn_id")
        e.ahead(Code.TXN_UNRESOLVED, "txn_id")
    if f.any_power() and e.lacks("msg_key", "status"):  # ``unseen_ops`` counts ops by key
        e.later(Code.TXN_CHECK_AFTER_RESOLVED)


def _txn_check(e: _Entries, r: Mapping[str, Any], f: TraceFacts) -> None:
    _copy_of_someone(e, f, Code.TXN_UNRESOLVED, key="txn_id")  # a re-put copy of some half
    if e.lacks("txn_id"):
        for code in (Code.TXN_CHECK_EARLY, Code.TXN_CHECK_EXCEEDED):
            e.here(code)
        e.later(Code.TXN_CHECK_AFTER_RESOLVED)
        e.later(Code.TXN_DISCARD_EARLY)
    else:
        if e.lacks("queue_offset", "check_times"):
            e.later(Code.TXN_CHECK_AFTER_RESOLVED, "txn_id")
        # a check number repeats only after a crash (the check service resumes from its saved
        # progress): in a trace with a crash, a check without one may be a repeat that does not
        # count, or the check a later one repeats
        if e.lacks("check_times") and f.crashes:
            e.later(Code.TXN_CHECK_EXCEEDED, "txn_id")
    if e.lacks("msg_key") and f.at_risk:
        e.here(Code.TXN_CHECK_AFTER_RESOLVED)
    if e.lacks("queue_offset") and f.crash_between(e.seq, None, power=True):
        e.ahead(Code.TXN_UNRESOLVED)


def _txn_discard(e: _Entries, _r: Mapping[str, Any], _f: TraceFacts) -> None:
    if e.lacks("txn_id"):
        e.here(Code.TXN_DOUBLE_RESOLVED)
        e.ahead(Code.TXN_UNRESOLVED)
        e.here(Code.TXN_DISCARD_EARLY)


def _commit_offset(e: _Entries, r: Mapping[str, Any], f: TraceFacts) -> None:
    if broadcasting_row(r) and e.lacks("group", "topic", "queue_id", "queue_offset", "client_id"):
        e.ahead(Code.LOST, "group", "topic", "client_id")  # maybe where a client's run (re)started
    if e.lacks("group", "topic", "queue_id", "queue_offset"):
        e.here(Code.OFFSET_OVERRUN)
        e.later(Code.OFFSET_LOST, *_QUEUE)
        if f.crash_between(e.seq, None):
            e.ahead(Code.LOST, "group")


def _lock(e: _Entries, r: Mapping[str, Any], _f: TraceFacts) -> None:
    if r.get("status") in ("GRANTED", None) and e.lacks("group", "topic", "queue_id", "client_id", "status"):
        for code in (Code.ORDER_KEY_REORDERED, Code.LOCK_OVERLAP, Code.ORDERLY_WITHOUT_LOCK,
                     Code.ORDERLY_CONCURRENT, ObservationCode.ORDERLY_LOCK_OUTLIVED):
            e.later(code, *_QUEUE)  # whose GRANTED it is tells a lawful takeover


def _unlock(e: _Entries, _r: Mapping[str, Any], _f: TraceFacts) -> None:
    if e.lacks("group", "topic", "queue_id", "client_id"):
        e.later(Code.ORDER_KEY_REORDERED, *_QUEUE)
        e.later(Code.LOCK_OVERLAP, *_QUEUE)


def _orderly_start(e: _Entries, _r: Mapping[str, Any], _f: TraceFacts) -> None:
    if e.lacks("group", "topic", "queue_id", "client_id"):
        e.here(Code.ORDERLY_WITHOUT_LOCK)
        e.here(Code.ORDERLY_CONCURRENT)
        e.here(ObservationCode.ORDERLY_LOCK_OUTLIVED)


def _orderly_end(e: _Entries, r: Mapping[str, Any], _f: TraceFacts) -> None:
    if e.lacks("group", "topic", "queue_id", "client_id"):
        e.later(Code.ORDERLY_CONCURRENT, *_QUEUE)
        e.later(ObservationCode.ORDERLY_LOCK_OUTLIVED, *_QUEUE)
        if r.get("status") == "ROLLBACK":  # maybe the owner's: the order compared anew after it
            e.later(Code.ORDER_KEY_REORDERED, *_QUEUE)


def _crash(e: _Entries, _r: Mapping[str, Any], _f: TraceFacts) -> None:
    if e.lacks("status"):  # maybe a power loss: its exemptions are unknown
        e.ahead(Code.LOST)
        e.ahead(Code.TXN_UNRESOLVED)
        e.later(Code.TXN_CHECK_AFTER_RESOLVED)


def _filters(e: _Entries, r: Mapping[str, Any]) -> None:
    """The filter rules (``checks_filter``) on a trace they read: subscriptions of a group's clients,
    the attributes of a message (from the first row of its msg_key carrying them), where a message
    sits in its queue, who got it, and the commits of filtering groups."""
    ev, d = r["event"], detail_of(r)
    subscribed = isinstance(d.get("subscription"), str) and ev in ("deliver", "consume")
    if ("tags" in d or "properties" in d) and e.lacks("msg_key"):
        for code in (Code.FILTER_MISMATCH, Code.FILTER_SKIPPED, Code.LOST):
            e.ahead(code)
    if subscribed and e.lacks("group", "topic", "client_id"):
        e.ahead(ObservationCode.SUBSCRIPTION_INCONSISTENT, "group", "topic")
        e.ahead(Code.FILTER_SKIPPED, "group")
        e.ahead(Code.LOST, "group")
    if ev == "consume" and subscribed and e.lacks("msg_key", "status", "topic"):
        e.here(Code.FILTER_MISMATCH)  # without its topic the row names no one message of the key
    # a message FILTER_SKIPPED reports (placed by its store, else its send if not delayed) or of a
    # topic a group filters whose attributes no row states is not LOST
    placed = ev == "store" or (ev == "send" and not r.get("delay_level") and r.get("deliver_ts") is None)
    if (placed and e.lacks("queue_id", "queue_offset")) or (ev in ("store", "send") and e.lacks("topic", "msg_key")):
        e.ahead(Code.LOST, "msg_key")
    if ev == "deliver" and e.lacks("group", "msg_key", "client_id"):
        e.ahead(Code.FILTER_SKIPPED, "group", "msg_key")


def _filter_commit(e: _Entries, _r: Mapping[str, Any]) -> None:
    if e.lacks("group", "topic", "queue_id", "queue_offset"):
        e.ahead(Code.FILTER_SKIPPED, "group")
        e.ahead(Code.LOST, "group")


def _expire(e: _Entries, r: Mapping[str, Any], _f: TraceFacts) -> None:
    """Retention deleted files (issue 42): LOST, TXN_UNRESOLVED and TIMER_UNFIRED read what they took
    (``checks_retention``; the row counted for the last two); a commit after it past deliveries they took
    is not judged (a client answered OFFSET_ILLEGAL drops its process queue, commits the new min)."""
    for code in (Code.TXN_UNRESOLVED, Code.TIMER_UNFIRED):
        e.here(code, why=EXPIRED)
    e.later(Code.OFFSET_OVERRUN)
    if r.get("topic") is None and (r.get("queue_id") is not None or r.get("queue_offset") is not None):
        e.ahead(Code.LOST)  # a queue's row without its topic: which queue's keys it took is unknown


_RULES = {
    "store": _store,
    "send": _send,
    "deliver": _deliver,
    "consume": _consume,
    "send_back": _send_back,
    "schedule_fire": _schedule_fire,
    "timer_fire": _timer_fire,
    "txn_half": _txn_half,
    "txn_end": _txn_end,
    "txn_check": _txn_check,
    "txn_discard": _txn_discard,
    "commit_offset": _commit_offset,
    "lock": _lock,
    "unlock": _unlock,
    "orderly_start": _orderly_start,
    "orderly_end": _orderly_end,
    "crash": _crash,
    "expire": _expire,
}


# ------------------------------------------------------------------ a trace


@attrs.frozen
class Withheld:
    """Every entry of a trace, indexed: ``covers(finding)`` says whether it is withheld."""

    exact: frozenset[tuple[str, int]] = frozenset()
    # code -> key names -> key values -> the lowest ``since`` (None: unbounded)
    open: Mapping[str, Mapping[tuple[str, ...], Mapping[tuple[Any, ...], int | None]]] = attrs.field(factory=dict)

    @classmethod
    def of(cls, entries: Iterable[Unjudged]) -> Withheld:
        exact: set[tuple[str, int]] = set()
        open_: dict[str, dict[tuple[str, ...], dict[tuple[Any, ...], int | None]]] = {}
        for u in entries:
            if u.until is not None:
                assert u.since == u.until and not u.keys
                exact.add((u.code, u.until))
                continue
            names = tuple(k for k, _ in u.keys)
            values = tuple(v for _, v in u.keys)
            by = open_.setdefault(u.code, {}).setdefault(names, {})
            if values not in by:
                by[values] = u.since
            else:
                low = by[values]
                by[values] = None if low is None or u.since is None else min(low, u.since)
        return cls(frozenset(exact), open_)

    def covers(self, finding: Finding) -> bool:
        return self.covers_row(finding.code, finding.seqs, finding.keys)

    def covers_row(self, code: str, seqs: Sequence[int], keys: Mapping[str, Any]) -> bool:
        """Whether a finding (``code``, ``seqs``, its key columns ``keys``) is withheld."""
        last = seqs[-1]
        if (code, last) in self.exact:
            return True
        for names, by in self.open.get(code, {}).items():
            values = tuple(keys.get(n) for n in names)
            if values in by:
                since = by[values]
                if since is None or last >= since:
                    return True
        return False

    def lasting(self) -> Withheld:
        """The entries that reach beyond their own row (what an incremental audit applies to the
        findings earlier days stored: ``traces/carry.py``)."""
        return Withheld(frozenset(), self.open)

    def __bool__(self) -> bool:
        return bool(self.exact or self.open)


def not_judged(entries: Iterable[tuple[int, str, Unjudged]]) -> dict[tuple[str, str], int]:
    """(code, event) -> rows with an entry of that code, from (row seq, event, entry) triples."""
    seen: set[tuple[str, str, int]] = set()
    for seq, event, u in entries:
        seen.add((u.code, event, seq))
    out: dict[tuple[str, str], int] = {}
    for code, event, _ in seen:
        out[(code, event)] = out.get((code, event), 0) + 1
    return out


def assess(rows: Sequence[Mapping[str, Any]]) -> tuple[Withheld, dict[tuple[str, str], int]]:
    """(what to withhold, (code, event) -> rows not judged) for one trace's valid rows."""
    facts = trace_facts(rows)
    triples: list[tuple[int, str, Unjudged]] = []
    for row in rows:
        if candidate(row):
            triples.extend((row["seq"], u.why or row["event"], u) for u in row_unjudged(row, facts))
    return Withheld.of(u for _, _, u in triples), not_judged(triples)


def lasting_rows(rows: Sequence[Mapping[str, Any]]) -> set[int]:
    """Seqs of one trace's rows with an entry beyond their own row: an incremental audit carries
    them for good (``traces/carry.py``), so every later day withholds what they leave unjudged."""
    facts = trace_facts(rows)
    return {
        row["seq"] for row in rows if candidate(row) and any(u.until is None for u in row_unjudged(row, facts))
    }


def withhold(findings: Iterable[Finding], withheld: Withheld) -> Iterator[Finding]:
    """The findings ``withheld`` does not cover."""
    if not withheld:
        yield from findings
        return
    for f in findings:
        if not withheld.covers(f):
            yield f
