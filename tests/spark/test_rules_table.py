"""The table pass (``spark/rules_table.py``), in-process, against the reference checker.

The pass runs the checker's own replays (``properties/inv_replay_*.py``) on each partition, so what can
differ is what it hands them: the rows it selects and ships (the message rows' ``detail`` only on
send-backs, ``check_times`` text for ``detail.check_times``, the ``epoch`` column for the restarts), the
partitioning (per trace, per msg_key, per txn_id), and the per-trace "unkeyed" facts. Hypothesis draws
traces over tiny key domains with nulls anywhere; each judge, given rows as ``mapInArrow`` would, must
give exactly the checker's findings of its code (keys and reason included).
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rmqspec.properties.inv_replay import epochs_of, unkeyed_of
from rmqspec.spark.rules_table import (
    LOCK_COLUMNS,
    MESSAGE_COLUMNS,
    TXN_COLUMNS,
    _by_trace,
    _locks,
    _messages,
    _Txns,
)
from rmqspec.traces.checker import validate
from rmqspec.traces.checker_cases import PARAMS as _PARAMS
from tests.spark.judge_runs import checked_rows, drawn_rows, judged_rows

_STRINGS = {"trace", "event", "group", "topic", "client_id", "status", "msg_key", "txn_id", "check_times", "detail"}
# A drawn trace mixes all three families, or keeps to one (each replay's findings need a few of its rows).
_FAMILIES = {
    "lock": ("lock", "lock", "lock", "unlock", "crash", "recover"),
    "message": ("send_back", "send_back", "store", "store", "store", "schedule_fire", "crash"),
    "txn": ("txn_half", "txn_end", "txn_check", "txn_check", "txn_check", "txn_discard", "crash", "recover"),
}
_EVENTS = tuple(e for events in _FAMILIES.values() for e in events)
_STATUS = {
    "lock": ("GRANTED", "GRANTED", "DENIED", "DENIED", "EXPIRED", None),
    "send_back": ("RETRY", "RETRY", "DLQ", None),
    "txn_end": ("COMMIT", "ROLLBACK", "UNKNOWN", None),
    "crash": ("kill",),
}
_FIELDS = {
    "group": ("G", "G", "H", None),
    "topic": ("T", "SCHEDULE_TOPIC_XXXX", "SCHEDULE_TOPIC_XXXX", "%DLQ%G", "%RETRY%G", "%DLQ%H", None),
    "queue_id": (0, 1, None),
    "client_id": ("C1", "C2", None),
    "msg_key": ("K1", "K2", None),
    "txn_id": ("K1", "K2", "K1", "K2", "K1", "K2", None),
    "reconsume_times": (0, 1, 1, 2, None),
    "delay_level": (-1, 3, 4, None),
}


@st.composite
def _trace(draw: Any) -> list[dict[str, Any]]:
    events = _FAMILIES.get(draw(st.sampled_from((*_FAMILIES, "all"))), _EVENTS)
    rows = drawn_rows(draw, events=events, gaps=(0, 1, 30_000, 60_000, 60_001), statuses=_STATUS, fields=_FIELDS,
                      most=40)  # fmt: skip
    for row in rows:
        if row["event"] == "txn_check" and draw(st.booleans()):
            row["detail"] = {"check_times": draw(st.sampled_from((0, 1, 2, 3, "2", "x")))}
        elif row["event"] == "send_back" and draw(st.booleans()):
            row["detail"] = {k: draw(st.sampled_from(v)) for k, v in
                             (("code", ("SUCCESS", "SYSTEM_ERROR")), ("requested_level", (0, -1, 3)), ("max", (1, 16)))}
    return rows


def _shipped(rows: list[dict[str, Any]], columns: tuple[str, ...], keep: Any) -> list[dict[str, Any]]:
    epochs = epochs_of(rows)
    out = []
    for row, epoch in zip(rows, epochs, strict=True):
        if keep(row):
            full = {**{c: row.get(c) for c in columns}, "trace": "", "epoch": epoch}
            detail = row.get("detail") or {}
            if "detail" in columns:
                full["detail"] = json.dumps(detail) if row["event"] == "send_back" and detail else None
            if "check_times" in columns:
                value = detail.get("check_times")
                full["check_times"] = None if value is None else value if isinstance(value, str) else json.dumps(value)
            out.append({c: full[c] for c in columns})
    return out


def _message_row(row: dict[str, Any]) -> bool:
    topic = row.get("topic")
    copy = topic is None or topic == "SCHEDULE_TOPIC_XXXX" or topic.startswith(("%DLQ%", "%RETRY%"))
    return row.get("msg_key") is not None and (row["event"] in ("send_back", "schedule_fire")
                                               or (row["event"] == "store" and copy))


def _judged(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    good, rejected = validate(rows)
    assert not rejected
    unkeyed = {"": unkeyed_of(good)}
    lock = _shipped(good, LOCK_COLUMNS, lambda r: r["event"] in ("lock", "unlock", "crash", "recover"))
    message = _shipped(good, MESSAGE_COLUMNS, _message_row)
    txn = _shipped(good, TXN_COLUMNS, lambda r: r["event"].startswith("txn_") and r.get("txn_id") is not None)
    found = [
        *judged_rows(_by_trace(_locks(_PARAMS)), lock, LOCK_COLUMNS, _STRINGS),
        *judged_rows(_by_trace(_messages(_PARAMS, unkeyed)), message, MESSAGE_COLUMNS, _STRINGS),
        *judged_rows(_Txns(_PARAMS, unkeyed), txn, TXN_COLUMNS, _STRINGS),
    ]
    return sorted((f["code"], tuple(f["seqs"]), f["group"], f["topic"], f["queue_id"], f["msg_key"], f["client_id"],
                   f["txn_id"], f["reason"]) for f in found)  # fmt: skip


def _checked(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted(
        (f.code, f.seqs, *(f.keys.get(k) for k in ("group", "topic", "queue_id", "msg_key", "client_id", "txn_id")),
         f.reason)
        for f in checked_rows(rows, {"MESSAGE_LIFECYCLE", "LOCK_LIFECYCLE", "TXN_LIFECYCLE"}, _PARAMS)
    )  # fmt: skip


@given(_trace())
def test_the_table_judges_find_what_the_checker_finds(rows):
    assert _judged(rows) == _checked(rows)


def test_every_replay_is_reached_by_the_drawn_traces():
    """The drawn traces give findings of all three codes (else the test above proves little)."""
    seen: set[str] = set()

    @settings(max_examples=300)
    @given(_trace())
    def collect(rows: list[dict[str, Any]]) -> None:
        seen.update(code for code, *_ in _checked(rows))

    collect()
    assert seen == {"MESSAGE_LIFECYCLE", "LOCK_LIFECYCLE", "TXN_LIFECYCLE"}
