"""The rules leave out work the facts pass shows to be empty; leaving it out changes nothing.

``all_findings`` takes ``has_crash`` (any crash row), ``has_power`` (any power-loss crash)
and ``has_filters`` (any row carrying a filter detail); ``run_audit`` sets them from the
facts pass. On traces where they are false, the findings with every flag forced on (all
the joins run) must equal the findings with the flags as the facts say.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

from rmqspec.spark import inputs as inputs_mod
from rmqspec.spark import job
from rmqspec.spark.rules import all_findings
from rmqspec.traces.checker_cases import PARAMS
from rmqspec.traces.generator import GenConfig, generate_rows
from rmqspec.traces.io import rows_to_table

pytestmark = pytest.mark.spark


def _findings(spark, path: str, **flags: bool) -> list[tuple]:
    prepared = inputs_mod.prepare([path], path + ".out")
    rows, _ = inputs_mod.load(spark, prepared)
    facts, _unknown = job._facts(rows)
    base = rows.filter(F.col("problem").isNull()).select(
        "trace", *inputs_mod.AUDIT_COLUMNS, *inputs_mod.DERIVED_COLUMNS
    )
    base = job._with_trace_facts(spark, base, facts)
    good = [r for r in facts if r["good"]]
    found = all_findings(
        base,
        PARAMS,
        has_drain=any(r["drain"] is not None for r in good),
        at_risk=job._at_risk(spark, facts),
        **flags,
    )
    return sorted((r["code"], tuple(r["seqs"]), r["group"], r["msg_key"], r["reason"]) for r in found.collect())


@pytest.mark.parametrize(("crashes", "inject"), [(0, ("LOST",)), (2, ("LOST", "TXN_UNRESOLVED"))])
def test_leaving_out_the_empty_exemptions_changes_no_finding(spark, tmp_path, crashes, inject):
    rows, truth = generate_rows(GenConfig(events=3000, seed=21, crashes=crashes, inject=inject))
    assert truth
    path = tmp_path / "trace.parquet"
    pq.write_table(rows_to_table(rows), path)
    assert not any(r["event"] == "crash" and r.get("status") == "power" for r in rows)
    assert not any(r.get("detail") and "subscription" in str(r["detail"]) for r in rows)
    everything = _findings(spark, str(path), has_crash=True, has_power=True, has_filters=True)
    assert any(f[0] == "LOST" for f in everything)
    as_the_facts_say = _findings(
        spark, str(path), has_crash=crashes > 0, has_power=False, has_filters=False
    )
    assert as_the_facts_say == everything


def test_the_sql_plans_read_no_row_index(spark, tmp_path):
    """Without ``positions`` no scan builds ``_metadata`` (a row index for every row): Spark keeps
    it in a frame that names it even when the query drops ``position``."""
    rows, _ = generate_rows(GenConfig(events=200, seed=5))
    path = tmp_path / "trace.parquet"
    pq.write_table(rows_to_table(rows), path)
    prepared = inputs_mod.prepare([str(path)], str(tmp_path / "out"))

    def scan_of(positions: bool) -> str:
        rows, _ = inputs_mod.load(spark, prepared, positions=positions)
        valid = rows.filter(F.col("problem").isNull()).select("seq", "event")
        return valid._jdf.queryExecution().executedPlan().toString()

    assert "row_index" in scan_of(True)
    assert "row_index" not in scan_of(False)
    rows_without, _ = inputs_mod.load(spark, prepared, positions=False)
    assert rows_without.filter(F.col("position").isNotNull()).count() == 0


@pytest.mark.parametrize("traces", [1, 3])
def test_the_inlined_trace_facts_are_the_joined_ones(spark, tmp_path, monkeypatch, traces):
    """``epoch``, ``crashes`` and ``drain`` as compiled comparisons (few crash / recover / drain
    seqs) equal the broadcast join's lambdas (beyond ``INLINE_TRACE_FACTS``) on every row, for
    one trace and for several (one with no crash at all)."""
    parts = []
    for i in range(traces):
        rows, _ = generate_rows(GenConfig(events=1500, seed=30 + i, crashes=2 if i < 2 else 0))
        table = rows_to_table(rows)
        if traces > 1:
            table = table.append_column("trace_id", pa.array([f"t{i}"] * table.num_rows, pa.string()))
        parts.append(table)
    path = tmp_path / "trace.parquet"
    pq.write_table(pa.concat_tables(parts), path)
    prepared = inputs_mod.prepare([str(path)], str(tmp_path / "out"))
    rows, _ = inputs_mod.load(spark, prepared)
    facts, _unknown = job._facts(rows)
    base = rows.filter(F.col("problem").isNull()).select("trace", "seq")

    def facts_of_rows() -> list[tuple]:
        got = job._with_trace_facts(spark, base, facts).select("trace", "seq", "epoch", "crashes", "drain")
        return sorted(tuple(r) for r in got.collect())

    inlined = facts_of_rows()
    monkeypatch.setattr(job, "INLINE_TRACE_FACTS", 0)
    joined = facts_of_rows()
    assert inlined == joined
    assert len({r[0] for r in inlined}) == traces
    assert {r[2] for r in inlined} >= {0, 1, 2} and {r[3] for r in inlined} >= {0, 1}
    assert any(r[4] is not None for r in inlined)
