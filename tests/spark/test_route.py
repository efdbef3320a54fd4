"""A routed producer's rules (issue 43) in the Spark audit, against the reference checker.

Hypothesis draws traces of routed producers' acknowledged sends (``tests/traces/route_runs.py``: gaps in
the attempt numbers, attempts lacking a field, rows without an actor or a fault flag, odd fault tables);
with the hand-written witnesses (``traces/checker_cases_route.py``) and the generator's injections of both
codes, the audit of all of them in one input (the route pass, ``spark/rules_route.py``, and the reference
plan) gives exactly the checker's findings — code, seqs, keys and reason. In-process, the route pass's
judge agrees with the checker on every drawn trace, several traces and producers in one partition. The
drawn traces cut in two days and audited incrementally give the whole history's findings (a routed
producer's sends are carried: PRODUCER_FAULT_WINDOW replays its attempts from its first).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, Phase, given, settings

from rmqspec.properties.inv_route import ROUTE_CODES
from rmqspec.spark.config import AuditConfig
from rmqspec.spark.incremental import run as run_incremental
from rmqspec.spark.job import run_audit
from rmqspec.spark.rules_route import _COLUMNS, _Judge
from rmqspec.traces.checker import check
from rmqspec.traces.checker_cases import PARAMS
from rmqspec.traces.checker_cases_route import ROUTE_CASES
from rmqspec.traces.generator import GenConfig, generate_rows
from rmqspec.traces.io import rows_to_table
from rmqspec.traces.notation import parse
from tests.spark.judge_runs import judged_rows
from tests.traces.route_runs import route_trace
from tests.untraced import budget_run

pytestmark = pytest.mark.spark

TRACES = 120
_KEYS = ("group", "topic", "queue_id", "msg_key", "client_id", "txn_id")


def _text(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``detail`` as the JSON text a Spark task hands the judge (``inputs.route_detail``)."""
    return [{**r, "detail": r["detail"] if isinstance(r["detail"], str) else json.dumps(r["detail"])} for r in rows]


def _stored(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``detail`` as a mapping: what a trace file stores (``rows_to_table`` writes a string as a JSON string)."""
    return [{**r, "detail": json.loads(r["detail"]) if isinstance(r.get("detail"), str) else r.get("detail")}
            for r in rows]


@given(route_trace(), route_trace())
def test_the_route_judge_finds_what_the_checker_finds(one, two):
    """Two traces in one partition (the judge splits them by trace, sorts by seq)."""
    rows = [{**r, "trace": tid} for tid, trace in (("t1", one), ("t2", two)) for r in _text(trace)]
    found = judged_rows(_Judge(PARAMS), [{c: r.get(c) for c in _COLUMNS} for r in reversed(rows)], _COLUMNS,
                        {"trace", "event", "actor", "group", "topic", "msg_key", "detail"})
    got = sorted((f["trace"], f["code"], tuple(f["seqs"]), f["group"], f["topic"], f["msg_key"], f["reason"])
                 for f in found)
    report = check([{**r, "trace_id": r.pop("trace")} for r in rows], PARAMS)
    want = sorted((f.trace_id, f.code, f.seqs, f.keys["group"], f.keys["topic"], f.keys["msg_key"], f.reason)
                  for f in report.violations if f.code in ROUTE_CODES)
    assert got == want


def _traces(n: int) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}

    @settings(max_examples=n, derandomize=True, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(route_trace())
    def collect(rows: list[dict[str, Any]]) -> None:
        out[f"r{len(out):03d}"] = _stored(rows)

    collect()
    return out


def _write(rows: dict[str, list[dict[str, Any]]], path: Path) -> None:
    path.mkdir(parents=True)
    flat = [{**r, "trace_id": tid} for tid, trace in rows.items() for r in trace]
    pq.write_table(rows_to_table(flat), path / "part-00000.parquet")


def _found(out: Path) -> list[tuple[Any, ...]]:
    return sorted((r["trace_id"], r["code"], tuple(r["seqs"]), *(r[k] for k in _KEYS), r["reason"])
                  for name in ("violations", "observations") for r in pq.read_table(out / name).to_pylist())


def _checked(rows: dict[str, list[dict[str, Any]]]) -> list[tuple[Any, ...]]:
    report = check([{**r, "trace_id": tid} for tid, trace in rows.items() for r in trace], PARAMS)
    return sorted((f.trace_id, f.code, tuple(f.seqs), *(f.keys.get(k) for k in _KEYS), f.reason)
                  for f in (*report.violations, *report.observations))


@pytest.fixture(scope="module")
def drawn() -> dict[str, list[dict[str, Any]]]:
    rows = _traces(TRACES)
    for i, (_, text, _) in enumerate(ROUTE_CASES):
        rows[f"case{i}"] = _stored(parse(text))
    for code in ROUTE_CODES:
        gen, _ = generate_rows(GenConfig(events=2000, seed=7, inject=(code,)))
        rows[f"gen:{code}"] = _stored(gen)
    return rows


@budget_run
def test_routed_traces_audit_as_the_checker_audits_them(spark, tmp_path, drawn):
    want = _checked(drawn)
    for code in ROUTE_CODES:
        assert sum(f[1] == code for f in want) >= 10, code
    _write(drawn, tmp_path / "in")
    for plan in ("small", "scale", "reference"):
        run_audit(spark, [str(tmp_path / "in")], str(tmp_path / plan), plan=plan)
        assert _found(tmp_path / plan) == want, plan


@budget_run
def test_routed_traces_cut_in_two_days_give_the_findings_of_the_whole(spark, tmp_path, drawn):
    """Each drawn trace cut in two at its middle row: day 2 with day 1's state gives the whole history's
    findings."""
    subset = {tid: rows for tid, rows in drawn.items() if tid.startswith("r")}
    days: list[dict[str, list[dict[str, Any]]]] = [{}, {}]
    for tid, rows in subset.items():
        cut = len(rows) // 2
        days[0][tid], days[1][tid] = rows[:cut], rows[cut:]
    for i, day in enumerate(days):
        _write({tid: rows for tid, rows in day.items() if rows}, tmp_path / f"day{i}")
    want = _checked(subset)
    assert any(f[1] == "PRODUCER_FAULT_WINDOW" and int(f[2][-1]) >= len(subset[f[0]]) // 2 for f in want)
    for plan in ("small", "reference"):
        state = None
        for i in range(2):
            state_out = str(tmp_path / f"{plan}-state{i}")
            run_incremental(spark, [str(tmp_path / f"day{i}")], str(tmp_path / f"{plan}{i}"), AuditConfig(), state,
                            state_out, on_stage=lambda _s: None, plan=plan)
            state = state_out
        assert _found(tmp_path / f"{plan}1") == want, plan
