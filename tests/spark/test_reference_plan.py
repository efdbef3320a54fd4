"""The reference plan (``spark/reference.py``: the reference checker run per trace in Spark's
Python workers) writes exactly what the SQL rules write: the same violation and observation
rows (every column), the same rejected rows and the same ``summary.json`` — over generated
traces with injected violations, rows rejected on the driver (JSONL) and by Spark (Parquet),
a ``trace_id`` column, a trace without drain, rows lacking fields, unknown statuses, at-risk
keys and configured subscriptions; and without ``trace_id``. ``--plan auto`` picks it for a
small local input only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rmqspec.properties.codes import VIOLATION_CODES
from rmqspec.spark import job, rules
from rmqspec.spark.config import load_config
from rmqspec.spark.job import choose_plan, run_audit
from rmqspec.traces.generator import GenConfig, generate_rows
from rmqspec.traces.io import rows_to_table
from rmqspec.traces.notation import parse
from tests.spark.odd_trace import ODD

pytestmark = pytest.mark.spark

FILTERS = tuple(c for c in VIOLATION_CODES if c.startswith("FILTER"))
OTHERS = tuple(c for c in VIOLATION_CODES if c not in FILTERS)


def _stored(rows: list[dict[str, Any]], trace_id: str | None) -> list[dict[str, Any]]:
    out = []
    for r in rows:
        r = {**r, "detail": json.loads(r["detail"])} if isinstance(r.get("detail"), str) else dict(r)
        if trace_id is not None:
            r["trace_id"] = trace_id
        out.append(r)
    return out


def _audit_both(spark: Any, paths: list[str], out: Path, config_file: Path | None = None) -> dict[str, Any]:
    config = load_config(config_file) if config_file else None
    got = {}
    for plan in ("small", "reference"):
        summary = run_audit(spark, paths, str(out / plan), config, plan=plan)
        tables = {name: pq.read_table(out / plan / name) for name in ("violations", "observations", "rejected")}
        written = json.loads((out / plan / "summary.json").read_text())
        got[plan] = (summary, tables, written)
    return got


def _same(got: dict[str, Any]) -> None:
    (sql, sql_tables, sql_json), (ref, ref_tables, ref_json) = got["small"], got["reference"]
    for name in ("violations", "observations"):
        assert ref_tables[name].schema.equals(sql_tables[name].schema), name
        rows = ref_tables[name].to_pylist()
        assert sorted(map(repr, rows)) == sorted(map(repr, sql_tables[name].to_pylist())), name
        order = [(r.get("trace_id") or "", r["seqs"][-1], r["code"], r["seqs"]) for r in rows]
        assert order == sorted(order), f"{name}: not in the SQL plans' order"
    assert ref_tables["rejected"].schema.equals(sql_tables["rejected"].schema)
    assert sorted(map(repr, ref_tables["rejected"].to_pylist())) == sorted(
        map(repr, sql_tables["rejected"].to_pylist()))
    volatile = ("wall_time_s", "events_per_s", "out", "rejected_sample")
    assert {k: v for k, v in ref_json.items() if k not in volatile} == {
        k: v for k, v in sql_json.items() if k not in volatile}
    assert sorted(ref_json["rejected_sample"]) == sorted(sql_json["rejected_sample"])
    assert ref.exit_code == sql.exit_code
    assert sorted(ref.samples) == sorted(sql.samples)


@pytest.fixture(scope="module")
def with_trace_id(spark, tmp_path_factory) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
    tmp = tmp_path_factory.mktemp("reference_plan")
    traces: dict[str, list[dict[str, Any]]] = {}
    for i, inject in enumerate((OTHERS[: len(OTHERS) // 2], OTHERS[len(OTHERS) // 2:], FILTERS)):
        traces[f"gen{i}"], _ = generate_rows(GenConfig(events=1500, seed=30 + i, inject=inject, crashes=i % 2))
    traces["nodrain"] = [r for r in generate_rows(GenConfig(events=800, seed=40, inject=("LOST", "DLQ_EARLY")))[0]
                         if r["event"] != "drain"]
    traces["odd"] = parse(ODD)
    flat = [r for tid, rows in traces.items() for r in _stored(rows, tid)]
    table = rows_to_table(flat)
    events = table.column("event").to_pylist()
    events[5], events[700] = "warp", "teleport"  # rejected by Spark, with their file#row positions
    table = table.set_column(table.schema.get_field_index("event"), "event", pa.array(events))
    pq.write_table(table, tmp / "traces.parquet")
    jsonl = tmp / "more.jsonl"  # rejected on the driver, with their file:line positions
    good = [json.dumps({k: v for k, v in r.items() if v is not None}) for r in _stored(parse(ODD), "jsonl")]
    jsonl.write_text("\n".join([*good[:3], "{not json", json.dumps({"seq": 99, "ts": "x", "event": "send"}),
                                *good[3:]]) + "\n")
    topic = next(r["topic"] for r in traces["gen0"] if r["event"] == "send")
    config = tmp / "audit.json"
    config.write_text(json.dumps({"groupMaxReconsumeTimes": {"GSMALL": 2}, "subscriptions": {"GNOBODY": [topic]}}))
    return _audit_both(spark, [str(tmp / "traces.parquet"), str(jsonl)], tmp / "out", config), traces


def test_reference_plan_writes_what_the_sql_rules_write(with_trace_id):
    got, traces = with_trace_id
    _same(got)
    summary, tables, written = got["reference"]
    found = {r["code"] for r in tables["violations"].to_pylist()}
    assert set(OTHERS) - {"LOST"} <= found | {"LOST"} and "LOST" in found  # every injection is there
    assert "GNOBODY" in {r["group"] for r in tables["violations"].to_pylist() if r["code"] == "LOST"}
    assert {r["trace_id"] for r in tables["violations"].to_pylist()} >= {"gen0", "gen1", "gen2"}
    assert written["rows_rejected"] == 4 and summary.rows_rejected == 4
    assert written["events_read"] == sum(map(len, traces.values())) + 9 + 2
    positions = [r["position"] for r in tables["rejected"].to_pylist()]
    assert sum(p.endswith(("#5", "#700")) for p in positions) == 2
    assert sum(":4" in p or ":5" in p for p in positions) == 2
    assert "no drain event in the trace" in written["not_judged"]["LOST"]
    assert "send row(s) with unknown status 'OK'" in written["not_judged"]["LOST"]
    assert "lock row(s) with unknown status 'EXPIRED'" in written["not_judged"]["LOCK_OVERLAP"]
    assert "deliver row(s) lack one of" in written["not_judged"]["OFFSET_OVERRUN"]
    odd_lost = [r for r in tables["violations"].to_pylist() if r["trace_id"] == "odd" and r["code"] == "LOST"]
    assert odd_lost == []  # K1 (status OK) is not acknowledged, K2 is at risk


def test_reference_plan_without_trace_id(spark, tmp_path):
    rows, _ = generate_rows(GenConfig(events=1200, seed=50, inject=("LOCK_OVERLAP", "TXN_CHECK_EARLY", "LOST")))
    pq.write_table(rows_to_table(_stored(rows, None)), tmp_path / "t.parquet")
    got = _audit_both(spark, [str(tmp_path / "t.parquet")], tmp_path / "out")
    _same(got)
    violations = got["reference"][1]["violations"]
    assert "trace_id" not in violations.column_names
    assert {"LOCK_OVERLAP", "TXN_CHECK_EARLY", "LOST"} <= set(violations.column("code").to_pylist())


def test_auto_chooses_the_reference_plan_for_small_local_input_only(tmp_path, monkeypatch):
    small = tmp_path / "s.parquet"
    pq.write_table(rows_to_table(parse(ODD)), small)
    assert choose_plan("auto", [str(small)]) == "reference"
    assert choose_plan("auto", [str(tmp_path)]) == "reference"  # a directory counts its files
    assert choose_plan("auto", ["hdfs://nn/traces/day1"]) == "scale"
    for plan in ("reference", "small", "scale"):
        assert choose_plan(plan, ["hdfs://nn/traces/day1"]) == plan
    monkeypatch.setattr(job, "REFERENCE_INPUT_BYTES", 10)
    assert choose_plan("auto", [str(small)]) == "small"
    monkeypatch.setattr(job, "SMALL_INPUT_BYTES", 10)
    assert choose_plan("auto", [str(small)]) == "scale"
    with pytest.raises(ValueError, match="unknown plan"):
        choose_plan("fast", [str(small)])


def test_auto_keeps_the_sql_rules_when_a_pass_is_registered(tmp_path, monkeypatch):
    small = tmp_path / "s.parquet"
    pq.write_table(rows_to_table(parse(ODD)), small)
    monkeypatch.setattr(rules, "PASSES", (*rules.PASSES, ("extra", lambda df, ctx: [])))
    assert choose_plan("auto", [str(small)]) == "small"
