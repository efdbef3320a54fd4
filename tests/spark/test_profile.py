"""``spark.profile``: a breakdown per phase and pass; ``rules.register_pass`` extends the plan."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from rmqspec.spark import rules
from rmqspec.spark.profile import profile_audit, render_profile
from rmqspec.traces.generator import GenConfig, generate_rows
from rmqspec.traces.io import rows_to_table

pytestmark = pytest.mark.spark


def test_profile_has_every_pass_with_its_stages(spark, tmp_path):
    rows, _ = generate_rows(GenConfig(events=800, seed=5))
    pq.write_table(rows_to_table(rows), tmp_path / "t.parquet")
    profiles = profile_audit(spark, [str(tmp_path / "t.parquet")], str(tmp_path / "out"))
    names = [p.name for p in profiles]
    assert names == ["facts", "plan (python)", *(f"pass {name}" for name, _ in rules.PASSES)]
    facts = profiles[0]
    assert facts.stages >= 1 and facts.tasks >= 1 and facts.wall_s > 0
    assert all(p.stages >= 1 and p.run_s >= 0 for p in profiles[2:])
    table = render_profile(profiles)
    assert table.splitlines()[0].split()[:3] == ["phase", "wall", "s"]
    assert len(table.splitlines()) == len(profiles) + 1
    assert spark.conf.get("spark.sql.adaptive.enabled") == "true"  # the small plan's settings are restored


def test_a_registered_pass_reports_through_the_audit(spark, tmp_path, monkeypatch):
    """A rules module adds a pass with ``register_pass``; its findings go out with the others."""
    from rmqspec.spark.job import run_audit
    from rmqspec.traces.notation import parse

    monkeypatch.setattr(rules, "PASSES", rules.PASSES)
    with pytest.raises(ValueError, match="already registered"):
        rules.register_pass("queue", lambda df, ctx: [])

    def marker(df, ctx):  # one finding per drain row
        drains = df.filter(rules.EV() == "drain")
        return [rules._finding(drains, "UNEXPECTED", [rules.SEQ()], (), rules.F.lit("marker pass"))]

    rules.register_pass("marker", marker)
    assert [n for n, _ in rules.PASSES][-1] == "marker"
    trace = parse("0 send t=1 topic=T q=0 key=K st=SEND_OK\n1 drain t=2\n")
    pq.write_table(rows_to_table(trace), tmp_path / "t.parquet")
    summary = run_audit(spark, [str(tmp_path / "t.parquet")], str(tmp_path / "out"))
    found = pq.read_table(tmp_path / "out" / "violations").to_pylist()
    assert [(r["code"], r["seqs"], r["reason"]) for r in found] == [("UNEXPECTED", [1], "marker pass")]
    assert summary.violations["UNEXPECTED"] == 1
