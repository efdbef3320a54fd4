"""The transaction judge (``spark/rules_txn.py``), in-process, against the checker.

The judge runs the checker's own detectors on a partition's transaction rows,
so what can differ is what it gives them: rows rebuilt from Arrow (the
``check_times`` text standing for ``detail.check_times``), the drain, the
at-risk keys, and the skipped halves and unseen ops computed from rows the
partition lacks. Hypothesis draws traces with power losses that list keys as
at risk; the judge, given those facts as the driver collects them, must give
exactly the checker's findings of its seven codes.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from rmqspec.spark.arrow_judge import FINDINGS_ARROW, judge
from rmqspec.spark.rules_txn import _COLUMNS, TXN_EVENTS, _Judge
from rmqspec.traces.checker import check_trace, validate
from rmqspec.traces.checker_cases import PARAMS
from rmqspec.traces.checks_common import Trace, at_risk_keys
from rmqspec.traces.checks_lifecycle import unseen_ops
from rmqspec.traces.checks_txn import skipped_halves

CODES = {
    "TXN_DOUBLE_RESOLVED", "DUPLICATE_COMMIT", "TXN_CHECK_EARLY", "TXN_CHECK_EXCEEDED", "TXN_UNRESOLVED",
    "TXN_CHECK_AFTER_RESOLVED", "TXN_DISCARD_EARLY",
}  # fmt: skip
_EVENTS = (*TXN_EVENTS, "txn_end", "txn_check", "crash")
_STATUS = {"txn_end": ("COMMIT", "ROLLBACK", "UNKNOWN"), "crash": ("kill", "power", "power")}


@st.composite
def _trace(draw: Any) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    ts = 0
    for seq in range(draw(st.integers(1, 30))):
        event = draw(st.sampled_from(_EVENTS))
        ts += draw(st.sampled_from((0, 1, 3000, 6000, 60_000)))
        row = {
            "seq": seq,
            "ts": ts,
            "event": event,
            "txn_id": draw(st.sampled_from(("X1", "X2", None))),
            "msg_key": draw(st.sampled_from(("K1", "K2", None))),
            "status": draw(st.sampled_from(_STATUS.get(event, (None,)))),
            "queue_offset": draw(st.sampled_from((0, 1, 2, None))),
        }
        if event == "txn_check" and draw(st.booleans()):
            row["detail"] = {"check_times": draw(st.sampled_from((0, 1, 2, "1", "x")))}
        if event == "crash":
            row["detail"] = {"at_risk": draw(st.lists(st.sampled_from(("K1", "K2")), max_size=2))}
        rows.append(row)
    if draw(st.booleans()):
        rows.append({"seq": len(rows), "ts": ts + 1, "event": "drain"})
    return rows


def _text(value: Any) -> str | None:
    """``inputs.check_times``: a JSON string as itself, any other JSON value as its JSON text."""
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value)


def _judged(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    good, _ = validate(rows)
    full = Trace.build(good, PARAMS)
    drains = [r["seq"] for r in rows if r["event"] == "drain"]
    risky = {"": {k for r in rows for k in at_risk_keys(r)}}
    family = [
        {**{c: r.get(c) for c in _COLUMNS}, "trace": "", "drain": max(drains) if drains else None,
         "check_times": _text((r.get("detail") or {}).get("check_times"))}
        for r in rows
        if r["event"] in TXN_EVENTS and r["txn_id"] is not None
    ]  # fmt: skip
    strings = {"trace", "event", "status", "txn_id", "msg_key", "check_times"}
    schema = pa.schema([(c, pa.string() if c in strings else pa.int64()) for c in _COLUMNS])
    batch = pa.RecordBatch.from_pylist(family, schema=schema)
    rules = _Judge(PARAMS, risky, {"": skipped_halves(full)}, {"": unseen_ops(full)})
    out = list(judge(rules)(iter([batch])))
    assert all(b.schema == FINDINGS_ARROW for b in out)
    return sorted(
        (f["kind"], f["code"], tuple(f["seqs"]), f["txn_id"], f["msg_key"], f["reason"])
        for b in out
        for f in b.to_pylist()
    )


def _checked(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    good, rejected = validate(rows)
    assert not rejected
    _, findings = check_trace(good, PARAMS)
    kinds = {"DUPLICATE_COMMIT": "observation"}
    return sorted(
        (kinds.get(f.code, "violation"), f.code, tuple(f.seqs), f.keys.get("txn_id"), f.keys.get("msg_key"), f.reason)
        for f in findings
        if f.code in CODES
    )


@given(_trace())
def test_the_judge_finds_what_the_checker_finds(rows):
    assert _judged(rows) == _checked(rows)


def test_an_unseen_op_is_exempt():
    """After a power loss that lost an op, the next op is unseen: the check after it is no finding
    (it would be TXN_CHECK_AFTER_RESOLVED without the driver's unseen ops)."""
    raw = [
        ("txn_half", "X1", "K1", None, 0, None),
        ("txn_end", "X1", "K1", "COMMIT", 0, None),
        ("crash", None, None, "power", None, {"at_risk": ["K1"]}),
        ("txn_half", "X2", "K2", None, 0, None),
        ("txn_end", "X2", "K2", "COMMIT", 0, None),
        ("txn_check", "X2", "K2", None, 1, {"check_times": 1}),
        ("drain", None, None, None, None, None),
    ]
    rows = [
        {"seq": i, "ts": i * 10_000, "event": ev, "txn_id": txn, "msg_key": key, "status": status,
         "queue_offset": pos, **({"detail": detail} if detail else {})}
        for i, (ev, txn, key, status, pos, detail) in enumerate(raw)
    ]  # fmt: skip
    assert _judged(rows) == _checked(rows) == []
    batch = pa.RecordBatch.from_pylist(
        [{c: r.get(c) for c in _COLUMNS} | {"trace": "", "drain": 6, "check_times": "1" if r["seq"] == 5 else None}
         for r in rows if r["event"] in TXN_EVENTS],
        schema=pa.schema([(c, pa.string() if c in ("trace", "event", "status", "txn_id", "msg_key", "check_times")
                           else pa.int64()) for c in _COLUMNS]),
    )  # fmt: skip
    blind = [f["code"] for b in judge(_Judge(PARAMS, {}, {}, {}))(iter([batch])) for f in b.to_pylist()]
    assert blind == ["TXN_CHECK_AFTER_RESOLVED"]


def test_an_empty_partition_gives_nothing():
    assert list(judge(_Judge(PARAMS, {}, {}, {}))(iter([]))) == []
