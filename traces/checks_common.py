"""Shared vocabulary of the reference checker (``traces.checker``) and the Spark audit.

Theory of operation
-------------------
A trace is a list of rows (plain dicts with the SPEC §8 columns) in ``seq``
order. Each §8.1 rule is one detector function named after its anomaly that
reads the whole trace and yields ``Finding`` values; nothing raises. The
detectors are split by key family (``checks_order``, ``checks_delivery``,
``checks_retry``, ``checks_lock``, ``checks_txn``, ``checks_lifecycle``, ``checks_filter``,
``checks_table``, ``checks_timer``); the Spark audit
(``rmqspec.spark.rules``) implements the same rules with the same names and
the same ``seqs`` conventions, and a differential test holds them equal.

Conventions both sides share (also in ``docs/audit-rules.md``):

- ``seqs``: proving event(s) first, the offending row's seq last.
- Only ``seq``, ``ts`` and ``event`` are required. A row lacking a field a rule reads is
  skipped by the rule's detector, and what it could change (the keys, queues or transactions
  it may belong to) is withheld from the findings and counted in ``not_judged``
  (``traces.unjudged``; ``NEEDS`` below words it): removing information never adds a finding.
- An acknowledged ``send`` has a null status, the response code ``SUCCESS``
  or one of RocketMQ's ``SendStatus`` values; ``FAILED``, ``TIMEOUT`` and
  the other response codes mark a send the producer never saw acknowledged.
- Status vocabularies (``STATUS_VOCABULARY``): a row whose status is not
  one its event's rules know is judged as the rules' "other" case (a send
  not acknowledged…) and counted per value in ``not_judged`` of those rules
  (``unknown_statuses``) — never a silent skip.
- ``deliver`` / ``consume`` / ``send_back`` name the stored copy
  (retry copies live in ``%RETRY%{group}``); ``commit_offset`` carries the
  committed offset in ``queue_offset``.
- An optional extra column ``trace_id`` splits one input into independent
  traces (every rule is evaluated per trace); without it the input is one trace.
- At-risk keys: a ``crash`` whose ``detail`` has ``at_risk`` (a list of
  msg_keys: written since the last flush when an ASYNC broker lost power)
  makes those keys legitimately losable. LOST, TXN_UNRESOLVED (by the
  half's msg_key) and RECOVERED are not reported for a msg_key listed by
  any ``crash`` of the trace; other rules still judge them. Entries that
  are not strings are ignored (``at_risk_keys``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import attrs

from rmqspec.model.message import schedules_delay
from rmqspec.model.results import ResponseCode, SendStatus
from rmqspec.properties.codes import AuditParams, Code, ObservationCode
from rmqspec.properties.inv_replay import detail_of  # re-exported: the checks import it from here

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
TIMER_TOPIC = "rmq_sys_wheel_timer"  # 5.x: timer copies wait here (model/timer.py)
DLQ_PREFIX = "%DLQ%"
# The label of the "not judged" entries of rows of timer messages not due at the drain
# (``traces/unjudged.py``): LOST does not judge them, and says why (``NOT_JUDGED_WHY``).
NOT_DUE = "timer_not_due"
# ... and of the send row an imported RocketMQ message trace adds for the keys it shows consumed but
# never published (``traces/msgtrace.py``): UNEXPECTED does not judge the trace, and says why.
UNRECORDED = "unrecorded_sends"
# ... and of an ``expire`` row (retention deleted files, issue 42): LOST, TXN_UNRESOLVED and TIMER_UNFIRED
# read which keys, halves and timer copies the files took (``checks_retention``); the last two do not judge
# one an ``expire`` may have taken, and the report counts the rows under this reason.
EXPIRED = "retention_expired"
NOT_JUDGED_WHY: dict[str, str] = {
    NOT_DUE: "row(s) of timer messages not due at the drain (a send or a store in rmq_sys_wheel_timer "
             "whose deliver_ts is after the drain's ts)",
    UNRECORDED: "row(s) standing for sends a RocketMQ message trace does not record (a oneway send, an "
                "attempt no answer came for: the client's trace hook writes no Pub for them), of keys "
                "the trace shows consumed but never published",
    EXPIRED: "expire row(s): retention deleted files, whether or not their messages were consumed; a "
             "transaction half or timer copy one of them may have taken (its commitlog offset or queue "
             "position below the row's, or given by no row) is not judged",
}
# SendStatus values (SPEC §2 SendResult) and the response code SUCCESS (SPEC §2
# lists response codes as send results; SUCCESS is what the broker answers a
# stored message with).
ACKED_SEND_STATUSES: frozenset[str] = frozenset({*(s.value for s in SendStatus), ResponseCode.SUCCESS.name})
# Statuses of a send the producer did not see acknowledged: the client's own
# failures and every other response code.
FAILED_SEND_STATUSES: frozenset[str] = frozenset(
    {"FAILED", "TIMEOUT", *(c.name for c in ResponseCode if c.name not in ACKED_SEND_STATUSES)}
)
# A send no answer came for (issue 42; ``detail.send_mode`` says SYNC, ASYNC or ONEWAY):
# ``ONEWAY``, sent with RocketMQ's oneway flag (sendOneway: the broker answers nothing, so it is
# never acknowledged and its delivery is the expected path, not a recovery); ``NO_RESPONSE``, a
# sync or async attempt whose answer was lost or timed out (the broker may have stored it: the
# producer's retry then stores the message again, under the same msg_key).
ONEWAY = "ONEWAY"
NO_RESPONSE = "NO_RESPONSE"
# detail.message_model of a broadcasting client's rows (issue 42); absent means clustering
BROADCASTING = "BROADCASTING"
UNANSWERED_SEND_STATUSES: frozenset[str] = frozenset({ONEWAY, NO_RESPONSE})
# event -> (the status values its rules know, the codes whose rules read that
# status). A non-null status outside the set is judged as the rules' "other"
# case and reported in those codes' ``not_judged`` with its count and value.
STATUS_VOCABULARY: dict[str, tuple[frozenset[str], tuple[str, ...]]] = {
    "send": (ACKED_SEND_STATUSES | FAILED_SEND_STATUSES | UNANSWERED_SEND_STATUSES, (Code.LOST,)),
    "send_back": (
        frozenset({"RETRY", "DLQ"}),
        (Code.LOST, Code.RETRY_EARLY, Code.DLQ_EARLY, Code.DLQ_MISSED, Code.DLQ_DELAYED),
    ),
    "lock": (
        frozenset({"GRANTED", "DENIED"}),
        (Code.ORDER_KEY_REORDERED, Code.LOCK_OVERLAP, Code.ORDERLY_WITHOUT_LOCK),
    ),
    "txn_end": (
        frozenset({"COMMIT", "ROLLBACK", "UNKNOWN"}),
        (
            Code.LOST,
            Code.TXN_VISIBLE_BEFORE_COMMIT,
            Code.TXN_ROLLBACK_VISIBLE,
            Code.TXN_DOUBLE_RESOLVED,
            Code.TXN_UNRESOLVED,
            Code.TXN_CHECK_AFTER_RESOLVED,
        ),
    ),
}
KEY_COLUMNS: tuple[str, ...] = ("group", "topic", "queue_id", "msg_key", "client_id", "txn_id")

_Q = ("group", "topic", "queue_id")
# the rows a consumer writes (a broadcasting one marks them, ``broadcasting_row``)
_CLIENT_EVENTS = frozenset({"deliver", "consume", "commit_offset"})
_LOCK = (*_Q, "client_id", "status")
# code -> ((event, the fields the rule reads on that event), ...): the wording of the report's
# "not judged" section. Which rows lacking one of them leave what unjudged (the rule's part they
# may change: a key, a queue, a transaction, from that row on or anywhere) is
# ``traces.unjudged.row_unjudged``; the report counts those rows per (code, event).
NEEDS: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {
    Code.ORDER_QUEUE_GAP: (("store", ("topic", "queue_id", "queue_offset")),),
    Code.ORDER_KEY_REORDERED: (
        ("lock", _LOCK),
        ("unlock", (*_Q, "client_id")),
        ("consume", (*_Q, "client_id", "queue_offset", "status")),
        ("orderly_end", (*_Q, "client_id")),  # a ROLLBACK's
    ),
    Code.LOST: (
        ("send", ("topic", "queue_id", "queue_offset", "msg_key")),
        ("store", ("topic", "queue_id", "queue_offset", "msg_key", "deliver_ts")),
        ("deliver", ("group", "topic", "client_id", "msg_key")),
        ("consume", ("group", "topic", "client_id", "msg_key", "status")),
        ("send_back", ("group", "msg_key", "status")),
        ("commit_offset", (*_Q, "queue_offset")),
        ("crash", ("status",)),
    ),
    Code.UNEXPECTED: (
        ("send", ("msg_key",)),
        ("store", ("msg_key",)),
        ("txn_half", ("msg_key",)),
        ("deliver", ("msg_key",)),
        ("consume", ("msg_key",)),
    ),
    Code.RETRY_EARLY: (
        ("send_back", ("status", "group", "msg_key", "reconsume_times", "delay_level", "deliver_ts")),
        ("deliver", ("group", "msg_key", "reconsume_times")),
    ),
    Code.DLQ_EARLY: (("send_back", ("status", "group", "reconsume_times", "delay_level")),),
    Code.DLQ_MISSED: (
        ("send_back", ("status", "group", "msg_key", "reconsume_times")),
        ("deliver", ("group", "msg_key", "reconsume_times")),
    ),
    Code.DELAY_EARLY: (
        ("store", ("topic", "deliver_ts", "reconsume_times", "msg_key", "msg_id")),
        ("schedule_fire", ("msg_key", "msg_id", "reconsume_times")),
        ("deliver", ("msg_key", "reconsume_times")),
    ),
    Code.LOCK_OVERLAP: (("lock", _LOCK), ("unlock", (*_Q, "client_id"))),
    Code.ORDERLY_WITHOUT_LOCK: (("lock", _LOCK), ("orderly_start", (*_Q, "client_id"))),
    Code.ORDERLY_CONCURRENT: (
        ("lock", _LOCK),  # a GRANTED to the starting client tells a lawful takeover (ORDERLY_LOCK_OUTLIVED)
        ("orderly_start", (*_Q, "client_id")),
        ("orderly_end", (*_Q, "client_id")),
    ),
    Code.OFFSET_OVERRUN: (
        ("commit_offset", (*_Q, "queue_offset")),
        ("deliver", (*_Q, "queue_offset")),
        ("consume", (*_Q, "queue_offset", "status")),
        ("send_back", (*_Q, "queue_offset")),
    ),
    Code.TXN_VISIBLE_BEFORE_COMMIT: (
        ("txn_half", ("msg_key",)),
        ("txn_end", ("msg_key", "status")),
        ("deliver", ("msg_key",)),
    ),
    Code.TXN_ROLLBACK_VISIBLE: (
        ("txn_half", ("msg_key",)),
        ("txn_end", ("msg_key", "status")),
        ("deliver", ("msg_key",)),
    ),
    Code.TXN_DOUBLE_RESOLVED: (("txn_end", ("txn_id", "status")), ("txn_discard", ("txn_id",))),
    Code.TXN_CHECK_EARLY: (("txn_half", ("txn_id",)), ("txn_check", ("txn_id",))),
    Code.TXN_CHECK_EXCEEDED: (("txn_check", ("txn_id", "detail.check_times")),),
    Code.TXN_UNRESOLVED: (
        ("txn_half", ("txn_id", "msg_key", "queue_offset")),
        ("txn_end", ("txn_id", "status")),
        ("txn_check", ("queue_offset",)),
        ("txn_discard", ("txn_id",)),
        ("crash", ("status",)),
    ),
    Code.TXN_CHECK_AFTER_RESOLVED: (
        ("txn_half", ("txn_id", "queue_offset")),
        ("txn_end", ("msg_key", "status")),
        ("txn_check", ("txn_id", "msg_key", "queue_offset", "detail.check_times")),
        ("crash", ("status",)),
    ),
    Code.TXN_DISCARD_EARLY: (
        ("txn_half", ("txn_id",)),
        ("txn_check", ("txn_id",)),
        ("txn_discard", ("txn_id",)),
    ),
    Code.DLQ_DELAYED: (("send_back", ("status", "group", "msg_key")), ("store", ("topic", "msg_key"))),
    Code.SCHEDULE_DUPLICATED: (
        ("store", ("topic", "reconsume_times", "msg_key")),
        ("schedule_fire", ("msg_key", "reconsume_times")),
    ),
    Code.OFFSET_LOST: (("commit_offset", (*_Q, "queue_offset", "status")),),
    Code.FILTER_MISMATCH: (
        ("send", ("msg_key",)),
        ("store", ("msg_key",)),
        ("deliver", ("msg_key",)),
        ("consume", ("msg_key", "status")),
    ),
    Code.FILTER_SKIPPED: (
        ("send", ("topic", "queue_id", "queue_offset", "msg_key")),
        ("store", ("topic", "queue_id", "queue_offset", "msg_key")),
        ("deliver", ("group", "topic", "client_id", "msg_key")),
        ("consume", ("group", "topic", "client_id", "msg_key")),
        ("commit_offset", (*_Q, "queue_offset")),
    ),
    Code.TIMER_EARLY: (
        ("send", ("msg_key",)),
        ("store", ("topic", "msg_key", "deliver_ts")),
        ("timer_fire", ("msg_key", "deliver_ts")),
        ("deliver", ("topic", "msg_key", "reconsume_times")),
    ),
    Code.TIMER_DUPLICATED: (("timer_fire", ("msg_key", "detail.from_commitlog_offset")),),
    Code.TIMER_UNFIRED: (("timer_fire", ("msg_key",)),),
    Code.ORDER_KEY_SPLIT: (("send", ("group", "topic", "queue_id", "sharding_key", "detail.route_queues")),),
}


@attrs.frozen
class Finding:
    """One violation or observation: its code, the proving and offending seqs, keys, why."""

    code: str
    seqs: tuple[int, ...]
    keys: Mapping[str, Any] = attrs.field(factory=dict, hash=False)
    reason: str = ""
    trace_id: str | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "seqs": list(self.seqs)}
        if self.trace_id is not None:
            out["trace_id"] = self.trace_id
        out.update({k: self.keys.get(k) for k in KEY_COLUMNS})
        out["reason"] = self.reason
        return out


def keys_of(row: Mapping[str, Any], *names: str) -> dict[str, Any]:
    """The key columns ``names`` of ``row`` (nulls included, others absent)."""
    return {n: row.get(n) for n in names}


def acked_send(row: Mapping[str, Any]) -> bool:
    """A ``send`` the producer saw acknowledged (null status, SUCCESS or a SendStatus value)."""
    return row["status"] is None or row["status"] in ACKED_SEND_STATUSES


def oneway_send(row: Mapping[str, Any]) -> bool:
    """A ``send`` made oneway (status ``ONEWAY``): never acknowledged, and delivering it recovers nothing."""
    return row["event"] == "send" and row["status"] == ONEWAY


def unknown_statuses(rows: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], int]:
    """(event, status) -> rows whose non-null status the event's rules do not know."""
    out: dict[tuple[str, str], int] = {}
    for row in rows:
        vocabulary = STATUS_VOCABULARY.get(row["event"])
        status = row.get("status")
        if vocabulary is not None and status is not None and status not in vocabulary[0]:
            out[(row["event"], status)] = out.get((row["event"], status), 0) + 1
    return out


def timer_send(row: Mapping[str, Any]) -> bool:
    """A ``send`` of a timer message (5.x): not delayed (``delayed_send``) and with a
    ``deliver_ts`` (SPEC §8: the earliest legal delivery; a client-side trace may give a lower
    bound of it). A send without deliver_ts is not one (``traces/unjudged.py``'s conventions)."""
    return row["event"] == "send" and not delayed_send(row) and row["deliver_ts"] is not None


def delayed_send(row: Mapping[str, Any]) -> bool:
    """A ``send`` with a delay level > 0, the only levels RocketMQ schedules: a level ≤ 0 (null, 0, a
    client's -1) is stored as sent and never scheduled (``getDelayTimeLevel() > 0`` in CommitLog and
    5.x's HookUtils)."""
    return row["event"] == "send" and schedules_delay(row.get("delay_level"))


def broadcasting_row(row: Mapping[str, Any]) -> bool:
    """A row of a broadcasting client: ``detail.message_model`` is BROADCASTING (issue 42). Every consumer
    of a broadcasting group gets every message from where it started (the queue's max offset for a client
    without an offsets file), keeps its offsets itself, and drops a failed message; absent means clustering."""
    detail = row.get("detail")
    if detail is None or (isinstance(detail, str) and BROADCASTING not in detail):
        return False  # most rows: no JSON to parse
    return detail_of(row).get("message_model") == BROADCASTING


def has(row: Mapping[str, Any], *fields: str) -> bool:
    """Whether every one of ``fields`` is set on ``row`` (a loop, not ``all`` over a generator:
    the checker and ``carry_trace`` call this about twice per row)."""
    for f in fields:  # noqa: SIM110 - a loop is 2.4x faster here (see the docstring)
        if row.get(f) is None:
            return False
    return True


def at_risk_keys(row: Mapping[str, Any]) -> list[str]:
    """The string entries of ``detail.at_risk`` of a ``crash`` row (else none).

    ``detail`` may still be its JSON text (rows straight from a file) or a
    mapping; anything that is not a JSON object with a list ``at_risk`` gives
    no keys.
    """
    if row["event"] != "crash":
        return []
    keys = detail_of(row).get("at_risk")
    if not isinstance(keys, list):
        return []
    return [k for k in keys if isinstance(k, str)]


@attrs.frozen
class Trace:
    """One trace ready for the detectors: rows in seq order plus derived facts.

    ``epochs[i]`` is the number of ``crash``/``recover`` rows before row ``i``
    (SPEC §8.1 "epoch"); ``drain_seq`` is the seq of the last ``drain`` row or
    None, ``drain_ts`` its ts; ``consumers`` maps a topic to the groups that consume it (seen in
    ``deliver``/``consume`` rows, plus the configured subscriptions);
    ``at_risk`` holds the msg_keys any ``crash`` lists in ``detail.at_risk``; ``broadcasting`` the
    groups with a broadcasting row (``broadcasting_row``: LOST is judged per client for them).
    """

    rows: Sequence[Mapping[str, Any]]
    epochs: Sequence[int]
    drain_seq: int | None
    consumers: Mapping[str, frozenset[str]]
    params: AuditParams
    at_risk: frozenset[str] = frozenset()
    drain_ts: int | None = None
    broadcasting: frozenset[str] = frozenset()

    @classmethod
    def build(
        cls,
        rows: Sequence[Mapping[str, Any]],
        params: AuditParams,
        subscriptions: Mapping[str, Sequence[str]] | None = None,
    ) -> Trace:
        epochs = []
        epoch = 0
        drain = drain_ts = None
        consumers: dict[str, set[str]] = {}
        at_risk: set[str] = set()
        broadcasting: set[str] = set()
        for group, topics in (subscriptions or {}).items():
            for topic in topics:
                consumers.setdefault(topic, set()).add(group)
        for row in rows:
            epochs.append(epoch)
            ev = row["event"]
            if ev in ("crash", "recover"):
                epoch += 1
                at_risk.update(at_risk_keys(row))
            elif ev == "drain":  # the last one (of two with one seq, the later ts)
                if drain is None or (row["seq"], row["ts"]) > (drain, drain_ts):
                    drain, drain_ts = row["seq"], row["ts"]
            elif ev in ("deliver", "consume") and has(row, "group", "topic"):
                consumers.setdefault(row["topic"], set()).add(row["group"])
            if ev in _CLIENT_EVENTS and row.get("group") is not None and broadcasting_row(row):
                broadcasting.add(row["group"])
        return cls(
            rows=rows,
            epochs=epochs,
            drain_seq=drain,
            consumers={t: frozenset(g) for t, g in consumers.items()},
            params=params,
            at_risk=frozenset(at_risk),
            drain_ts=drain_ts,
            broadcasting=frozenset(broadcasting),
        )

    def of(self, *events: str) -> Iterator[tuple[int, Mapping[str, Any]]]:
        """(index, row) of the rows with one of ``events``, in seq order."""
        for i, row in enumerate(self.rows):
            if row["event"] in events:
                yield i, row


def violation(code: Code, seqs: Sequence[int], keys: Mapping[str, Any], reason: str) -> Finding:
    return Finding(
        code=code.value, seqs=tuple(int(s) for s in seqs), keys=dict(keys), reason=reason
    )


def observation(
    code: ObservationCode, seqs: Sequence[int], keys: Mapping[str, Any], reason: str
) -> Finding:
    return Finding(
        code=code.value, seqs=tuple(int(s) for s in seqs), keys=dict(keys), reason=reason
    )


def route_queues(row: Mapping[str, Any]) -> int | None:
    """A keyed ``send``'s ``detail.route_queues`` (the number of queues of the route its producer's
    MessageQueueSelector chose among, ``mqs.size()``) when it is a positive JSON integer, else None."""
    value = detail_of(row).get("route_queues")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _json_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def loop_age(row: Mapping[str, Any]) -> tuple[int, int] | None:
    """An ``orderly_start``'s (``detail.loop_age_ms``, ``detail.loop_max_ms``) when it states both as JSON
    integers, the age ≥ 0 and the limit > 0, else None: not judged (ORDERLY_LOOP_OVERRUN). The limit is the
    client's MAX_TIME_CONSUME_CONTINUOUSLY (-Drocketmq.client.maxTimeConsumeContinuously, 60000 by default): a
    row must state it, or a row that lost it would be judged under a default it may not have run with."""
    detail = row.get("detail")
    if detail is None or (isinstance(detail, str) and "loop_age_ms" not in detail):
        return None  # most rows: no JSON to parse
    found = detail_of(row)
    age, limit = _json_int(found.get("loop_age_ms")), _json_int(found.get("loop_max_ms"))
    if age is None or limit is None or age < 0 or limit <= 0:
        return None
    return age, limit
