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

import attrs
import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from rmqspec.properties.codes import AuditParams
from rmqspec.spark.arrow_judge import Columns, judge
from rmqspec.spark.rules_txn import _COLUMNS, TXN_EVENTS, _Judge, rows_to_judge
from rmqspec.traces.checker import validate
from rmqspec.traces.checker_cases import PARAMS
from rmqspec.traces.checker_cases_batch import OP_BATCH_CASES, OP_BATCH_PARAMS
from rmqspec.traces.checks_common import Trace, at_risk_keys, detail_of
from rmqspec.traces.checks_lifecycle import unseen_ops
from rmqspec.traces.checks_txn import skipped_halves
from rmqspec.traces.notation import parse
from tests.spark.judge_runs import checked_rows, drawn_rows, judged_rows

CODES = {
    "TXN_DOUBLE_RESOLVED", "DUPLICATE_COMMIT", "TXN_CHECK_EARLY", "TXN_CHECK_EXCEEDED", "TXN_UNRESOLVED",
    "TXN_CHECK_AFTER_RESOLVED", "TXN_DISCARD_EARLY",
}  # fmt: skip
_STRINGS = {"trace", "event", "status", "txn_id", "msg_key", "check_times"}
_EVENTS = (*TXN_EVENTS, "txn_end", "txn_check", "crash", "recover")
_STATUS = {"txn_end": ("COMMIT", "ROLLBACK", "UNKNOWN"), "crash": ("kill", "power", "power")}
_GAPS = (0, 1, 3000, 6000, 60_000)
# op_batch_ms 700: an END's op is written 2100 ms after it (``checker_cases_batch``)
_BATCH_GAPS = (0, 1, 700, 2100, 2101, 6000, 60_000)


@st.composite
def _trace(draw: Any, gaps: tuple[int, ...] = _GAPS) -> list[dict[str, Any]]:
    fields = {"txn_id": ("X1", "X2", None), "msg_key": ("K1", "K2", None), "queue_offset": (0, 1, 2, None)}
    rows = drawn_rows(draw, events=_EVENTS, gaps=gaps, statuses=_STATUS, fields=fields, most=30)
    for row in rows:
        if row["event"] == "txn_check" and draw(st.booleans()):
            row["detail"] = {"check_times": draw(st.sampled_from((0, 1, 2, "1", "x")))}
        if row["event"] == "crash":
            row["detail"] = {"at_risk": draw(st.lists(st.sampled_from(("K1", "K2")), max_size=2))}
    if draw(st.booleans()):
        rows.append({"seq": len(rows), "ts": rows[-1]["ts"] + 1, "event": "drain"})
    return rows


def _text(value: Any) -> str | None:
    """``inputs.check_times``: a JSON string as itself, any other JSON value as its JSON text."""
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value)


def _judged(rows: list[dict[str, Any]], params: AuditParams = PARAMS) -> list[tuple[Any, ...]]:
    good, _ = validate(rows)
    full = Trace.build(good, params)
    drains = [r["seq"] for r in rows if r["event"] == "drain"]
    risky = {"": {k for r in rows for k in at_risk_keys(r)}}
    family = [
        {**{c: r.get(c) for c in _COLUMNS}, "trace": "", "drain": max(drains) if drains else None,
         "check_times": _text((r.get("detail") or {}).get("check_times"))}
        for r in rows
        if r["event"] in TXN_EVENTS and r["txn_id"] is not None
    ]  # fmt: skip
    # as ``rules.txn_rules`` collects them
    downs = {"": [(r["seq"], r["ts"], r["event"]) for r in rows if r["event"] in ("crash", "recover")]}
    rules = _Judge(params, risky, {"": skipped_halves(full)}, {"": unseen_ops(full)}, downs)
    return sorted(
        (f["kind"], f["code"], tuple(f["seqs"]), f["txn_id"], f["msg_key"], f["reason"])
        for f in judged_rows(rules, family, _COLUMNS, _STRINGS)
    )


def _checked(rows: list[dict[str, Any]], params: AuditParams = PARAMS) -> list[tuple[Any, ...]]:
    kinds = {"DUPLICATE_COMMIT": "observation"}
    return sorted(
        (kinds.get(f.code, "violation"), f.code, tuple(f.seqs), f.keys.get("txn_id"), f.keys.get("msg_key"), f.reason)
        for f in checked_rows(rows, CODES, params)
    )


@given(_trace())
def test_the_judge_finds_what_the_checker_finds(rows):
    assert _judged(rows) == _checked(rows)


# transactionCheckMax 2 and a 72 s file reserve: TXN_CHECK_EXCEEDED and both sides of TXN_DISCARD_EARLY's
# age bound are within a few drawn rows (the judge keeps a transaction's rows only when some rule may fire).
_TIGHT = attrs.evolve(PARAMS, transaction_check_max=2, file_reserved_ms=72_000)


@given(_trace())
def test_the_judge_finds_what_the_checker_finds_with_tight_limits(rows):
    assert _judged(rows, _TIGHT) == _checked(rows, _TIGHT)


@st.composite
def _batch_trace(draw: Any) -> list[dict[str, Any]]:
    """Transactions whose ENDs and checks fall around the op batch window, with restarts between."""
    events = ("txn_half", "txn_end", "txn_end", "txn_check", "txn_check", "crash", "recover")
    fields = {"txn_id": ("X1", "X2"), "queue_offset": (0, 1)}
    rows = drawn_rows(draw, events=events, gaps=_BATCH_GAPS, statuses=_STATUS, fields=fields, most=20)
    for row in rows:
        row["msg_key"] = row["txn_id"]
        if row["event"] == "txn_check":
            row["detail"] = {"check_times": draw(st.sampled_from((1, 1, 2)))}
        if row["event"] in ("crash", "recover"):
            row.update(txn_id=None, msg_key=None, queue_offset=None)
    return rows


@given(st.one_of(_trace(_BATCH_GAPS), _batch_trace()))
def test_the_judge_finds_what_the_checker_finds_with_op_batching(rows):
    """5.1.0+'s batched ops: the judge, given the crash and recover rows' seq, ts and event the driver
    collects, judges TXN_CHECK_AFTER_RESOLVED as the checker does on the whole trace (a recover as the
    first restart row after an END — a clean restart — included)."""
    assert _judged(rows, OP_BATCH_PARAMS) == _checked(rows, OP_BATCH_PARAMS)


def test_with_op_batching_a_judge_without_the_restarts_finds_no_check_after_resolution():
    """Without the driver's crash and recover ts every op may have been lost in one: nothing, never more."""
    rows = [{c: r.get(c) for c in _COLUMNS} | {"trace": "", "drain": None,
                                                "check_times": _text(detail_of(r).get("check_times"))}
            for r in parse(OP_BATCH_CASES[0].text)]  # fmt: skip
    found = judged_rows(_Judge(OP_BATCH_PARAMS, {}, {}, {}, {"": []}), rows, _COLUMNS, _STRINGS)
    assert sorted(tuple(f["seqs"]) for f in found) == [(6, 10), (7, 11)]
    assert judged_rows(_Judge(OP_BATCH_PARAMS, {}, {}, {}), rows, _COLUMNS, _STRINGS) == []


def test_the_judge_skips_only_transactions_no_rule_can_fire_in():
    """A half and its COMMIT long after is no finding: its rows never reach the detectors; a second COMMIT,
    a check or a missing resolution at the drain keeps them."""
    def kept(events: list[tuple[str, str | None, int]], drain: int | None = None) -> list[bool]:
        rows = [{"trace": "", "seq": i, "ts": ts, "event": ev, "status": status, "txn_id": "X1", "msg_key": "K1",
                 "queue_offset": 0, "check_times": None, "drain": drain}
                for i, (ev, status, ts) in enumerate(events)]  # fmt: skip
        schema = pa.schema([(c, pa.string() if c in _STRINGS else pa.int64()) for c in _COLUMNS])
        return rows_to_judge(Columns(pa.Table.from_pylist(rows, schema=schema)), PARAMS).tolist()

    plain = [("txn_half", "SEND_OK", 0), ("txn_end", "COMMIT", 100)]
    assert kept(plain) == [False, False]
    assert kept(plain, drain=5) == [False, False]
    assert kept([*plain, ("txn_end", "COMMIT", 200)]) == [True] * 3
    assert kept([("txn_half", "SEND_OK", 0), ("txn_end", "UNKNOWN", 100)], drain=5) == [True] * 2
    assert kept([*plain[:1], ("txn_check", None, 10_000), plain[1]]) == [False] * 3  # on time, no op before it
    assert kept([*plain[:1], ("txn_check", None, 10), plain[1]]) == [True] * 3  # early
    assert kept([*plain, ("txn_check", None, 10_000)]) == [True] * 3  # after the op


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
    family = [{c: r.get(c) for c in _COLUMNS} | {"trace": "", "drain": 6, "check_times": "1" if r["seq"] == 5 else None}
              for r in rows if r["event"] in TXN_EVENTS]  # fmt: skip
    blind = [f["code"] for f in judged_rows(_Judge(PARAMS, {}, {}, {}), family, _COLUMNS, _STRINGS)]
    assert blind == ["TXN_CHECK_AFTER_RESOLVED"]


def test_an_empty_partition_gives_nothing():
    assert list(judge(_Judge(PARAMS, {}, {}, {}))(iter([]))) == []
