"""The Spark audit agrees with the reference checker and with the ground truth."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from rmqspec.properties.codes import OBSERVATION_CODES, VIOLATION_CODES
from rmqspec.traces.checker import check
from rmqspec.traces.checker_cases import CASES, PARAMS
from rmqspec.traces.notation import render
from tests.traces.retention_runs import HALVES_AND_TIMERS
from tests.untraced import budget_run

pytestmark = pytest.mark.spark


def _violations(items):
    return sorted(i for i in items if i[0] in VIOLATION_CODES)


@pytest.mark.parametrize("index", range(len(CASES)), ids=[c.name[:40] for c in CASES])
def test_hand_written_case(batch, index):
    tid = f"case{index:02d}"
    assert batch.spark.get(tid, []) == batch.truth[tid], render(batch.rows[tid])
    assert batch.checker.get(tid, []) == batch.truth[tid]


@pytest.mark.parametrize("code", VIOLATION_CODES)
def test_generator_injection_found_exactly(batch, code):
    tid = f"gen:{code}"
    assert batch.truth[tid], "the generator injected nothing"
    assert {c for c, _ in batch.truth[tid]} == {code}
    assert _violations(batch.spark.get(tid, [])) == batch.truth[tid]
    assert _violations(batch.checker.get(tid, [])) == batch.truth[tid]


@pytest.mark.parametrize("tid", ["clean:11", "clean:12", "clean:13"])
def test_clean_generated_trace_has_no_violation(batch, tid):
    assert len(batch.rows[tid]) >= 2500
    assert _violations(batch.spark.get(tid, [])) == []
    assert _violations(batch.checker.get(tid, [])) == []
    assert batch.spark.get(tid, []) == batch.checker.get(tid, [])


def test_recorded_broker_traces_audit_clean(batch):
    """SPEC §8: what ModelBroker and MmapBroker really did — every conformance example and
    the client workload — holds every §8.1 rule, in Spark and in the reference checker."""
    recorded = [tid for tid in batch.rows if tid.startswith(("conf:", "workload:"))]
    assert {tid.split(":")[1] for tid in recorded} == {"model", "mmap"}
    assert sum(len(batch.rows[tid]) for tid in recorded) > 5000
    for tid in recorded:
        assert _violations(batch.spark.get(tid, [])) == [], tid
        assert _violations(batch.checker.get(tid, [])) == [], tid
        assert batch.spark.get(tid, []) == batch.checker.get(tid, []), tid


def test_retention_traces(batch):
    """Issue 42: LOST reads what an ``expire`` took alike in Spark and the reference checker — of the lawful
    run only the kept files' unconsumed keys, of the early one the taken keys too, their reasons naming
    the deletion (``tests/traces/test_retention_audit.py`` pins the keys)."""
    lawful, early = batch.spark["retention:lawful"], batch.spark["retention:early"]
    assert lawful == batch.checker["retention:lawful"] and early == batch.checker["retention:early"]
    assert {c for c, _ in lawful + early} == {"LOST"} and len(lawful) < len(early)
    table = pq.read_table(batch.out / "violations").to_pylist()
    reasons = [r["reason"] for r in table if r["trace_id"] == "retention:early"]
    named = [r for r in reasons if "before fileReservedTime allowed" in r]
    assert len(named) == len(early) - len(lawful)
    assert not any("fileReservedTime" in r["reason"] for r in table if r["trace_id"] == "retention:lawful")


def test_retention_of_halves_and_timer_copies(batch):
    """Issue 42: TXN_UNRESOLVED and TIMER_UNFIRED judge a half or a timer copy only where the ``expire`` rows
    kept it, alike in Spark and the reference checker (``tests/traces/test_retention_audit.py`` pins the
    keys): the model's unresolved halves retention kept, and the broken wheel's forgotten copies it kept."""
    halves, lost = batch.spark["retention:halves"], batch.spark["retention:wheel_lost"]
    assert halves == batch.checker["retention:halves"] and lost == batch.checker["retention:wheel_lost"]
    assert {c for c, _ in halves} == {"TXN_UNRESOLVED"}
    assert {c for c, _ in lost} == {"TXN_UNRESOLVED", "TIMER_UNFIRED"}
    assert 0 < sum(c == "TIMER_UNFIRED" for c, _ in lost) < HALVES_AND_TIMERS // 2


def test_model_traces_of_timer_messages(batch):
    """5.x timer messages through ModelBroker with crashes (``tests/traces/timer_runs.py``): a late drain
    gives no violation, an early one no timer code nor LOST of a waiting timer message — in Spark as in
    the reference checker, finding for finding."""
    from tests.traces.timer_runs import waiting_keys

    traced = [tid for tid in batch.rows if tid.startswith("timer:")]
    assert len(traced) >= 10 and any(r["event"] == "timer_fire" for tid in traced for r in batch.rows[tid])
    for tid in traced:
        assert batch.spark.get(tid, []) == batch.checker.get(tid, []), tid
        if int(tid.rsplit(":", 1)[1]) % 2 == 0:
            assert _violations(batch.spark.get(tid, [])) == [], tid
    assert not [f for f in batch.report.violations if (f.trace_id or "").startswith("timer:")
                and (f.code.startswith("TIMER_") or f.keys.get("msg_key") in waiting_keys(batch.rows[f.trace_id]))]


def test_model_traces_of_timer_messages_across_two_close_crashes(batch):
    """The model through a power loss and a second crash before the next timer checkpoint, SYNC and ASYNC
    (``tests/traces/timer_runs.model_restart_timer_trace``): no violation — TIMER_UNFIRED judged — in
    Spark as in the reference checker."""
    traced = [tid for tid in batch.rows if tid.startswith("restart:")]
    assert {tid.split(":")[1] for tid in traced} == {"SYNC", "ASYNC"}
    for tid in traced:
        assert _violations(batch.spark.get(tid, [])) == [], tid
        assert batch.spark.get(tid, []) == batch.checker.get(tid, []), tid
        assert "TIMER_UNFIRED" not in check(batch.rows[tid], PARAMS).not_judged, tid


def test_model_traces_of_pop(batch):
    """5.x pop through ModelBroker (``tests/traces/pop_runs.py``): the honest runs give no violation, each
    broken pop broker's gives its table's code — in Spark as in the reference checker, finding for finding."""
    from tests.pop_brokers import POP_BROKEN

    traced = [tid for tid in batch.rows if tid.startswith("pop:")]
    assert {tid.split(":")[1] for tid in traced} == {"model", *POP_BROKEN}
    found: dict[str, set[str]] = {}
    for tid in traced:
        assert batch.spark.get(tid, []) == batch.checker.get(tid, []), tid
        found.setdefault(tid.split(":")[1], set()).update(c for c, _ in _violations(batch.spark.get(tid, [])))
    assert found.pop("model") == set()
    assert found == {name: {"LOCK_LIFECYCLE" if "orderly" in name else "MESSAGE_LIFECYCLE"} for name in POP_BROKEN}


def test_model_traces_of_ha_pairs(batch):
    """A master/slave pair's runs (``tests/traces/ha_runs.py``, issue 43): in Spark as in the reference checker,
    finding for finding; the honest pair breaks no HA rule, each broken pair its own (``ha_brokers.CAUGHT_BY``)
    in one run at least."""
    from tests.ha_brokers import BROKEN_PAIRS, CAUGHT_BY

    traced = [tid for tid in batch.rows if tid.startswith("ha:")]
    assert {tid.split(":")[1] for tid in traced} == {"model", *BROKEN_PAIRS}
    found: dict[str, set[str]] = {}
    for tid in traced:
        assert batch.spark.get(tid, []) == batch.checker.get(tid, []), tid
        found.setdefault(tid.split(":")[1], set()).update(c for c, _ in batch.spark.get(tid, []))
    assert {c for c in found.pop("model") if c.startswith("HA_")} <= {"HA_ASYNC_TAIL_LOST"}
    for name, code in CAUGHT_BY.items():
        assert code in found[name], (name, sorted(found[name]))


def test_differential_random_traces(batch):
    """Hypothesis-drawn traces: Spark and the reference checker find the same things."""
    random_ids = [t for t in batch.rows if t.startswith("hyp")]
    assert len(random_ids) >= 200
    found = {code for t in random_ids for code, _ in batch.checker.get(t, [])}
    assert len(found) >= 12, f"random traces reach too few rules: {sorted(found)}"
    for tid in random_ids:
        spark, ref = batch.spark.get(tid, []), batch.checker.get(tid, [])
        assert spark == ref, f"{tid}\n{render(batch.rows[tid])}\nspark={spark}\nchecker={ref}"


def test_dropped_fields_are_withheld_alike(batch):
    """Traces with optional fields dropped (SPEC §8, issue 41): Spark withholds what the rows lacking
    fields leave unjudged exactly as the reference checker does, and finds nothing the complete trace
    does not find (``tests/traces/test_monotonic.py`` has the property itself)."""
    from tests.traces.monotone import PER_KEY

    dropped = [t for t in batch.rows if t.startswith("drop")]
    assert len(dropped) >= 30
    withheld = 0
    for tid in dropped:
        spark, ref = batch.spark.get(tid, []), batch.checker.get(tid, [])
        assert spark == ref, f"{tid}\n{render(batch.rows[tid])}\nspark={spark}\nchecker={ref}"
        source = batch.checker.get(tid.split(":", 1)[1], [])
        last = {(code, seqs[-1]) for code, seqs in source}
        assert all(code in PER_KEY or (code, seqs[-1]) in last for code, seqs in ref), tid
        withheld += len(source) > len(ref)
    assert withheld >= 5, "the drops withheld too little to test the withholding"


def test_uniq_keys_in_every_client_format_audit_clean(batch):
    """docs/fidelity.md B14: msg_key / txn_id are opaque strings to the audit — a 56-char key of the
    Java client on an IPv6 host, lower-case, Go-client, 5.x-client and arbitrary-character keys."""
    from tests.uniq_keys import IPV6_JAVA

    rows = batch.rows["uniq:model"]
    assert any(r["msg_key"] == IPV6_JAVA for r in rows) and any(r["event"] == "drain" for r in rows)
    assert batch.spark.get("uniq:model", []) == [] == batch.checker.get("uniq:model", [])


def test_summary_counts_match_the_checker(batch):
    summary = json.loads((batch.out / "summary.json").read_text())
    v, o = batch.report.counts()
    assert summary["violations"] == v and set(v) == set(VIOLATION_CODES)
    assert summary["observations"] == o and set(o) == set(OBSERVATION_CODES)
    assert summary["events_read"] == batch.report.events_read == sum(map(len, batch.rows.values()))
    assert summary["rows_rejected"] == 0
    assert summary["not_judged"] == dict(batch.report.not_judged)
    assert "LOST" in summary["not_judged"]  # some traces have no drain
    assert "send row(s) with unknown status 'OK'" in summary["not_judged"]["LOST"]
    assert "lock row(s) with unknown status 'EXPIRED'" in summary["not_judged"]["LOCK_OVERLAP"]
    assert summary["events_per_s"] > 0 and summary["master"].startswith("local")
    assert batch.summary.exit_code == 1


def test_output_layout(batch):
    table = pq.read_table(batch.out / "violations")
    assert table.column_names == [
        "code", "seqs", "trace_id", "group", "topic", "queue_id", "msg_key", "client_id",
        "txn_id", "reason",
    ]  # fmt: skip
    assert str(table.schema.field("seqs").type) == "list<element: int64>"
    lock = next(r for r in table.to_pylist() if r["code"] == "LOCK_OVERLAP")
    assert lock["group"] and lock["topic"] and lock["queue_id"] is not None and lock["client_id"]
    assert lock["reason"]
    assert pq.read_table(batch.out / "rejected").num_rows == 0


@budget_run
def test_scale_plan_gives_the_same_findings(spark, batch, tmp_path, monkeypatch):
    """The plan for large inputs (AQE, sized shuffles, findings written from the driver, or sorted
    and written by Spark when they are many) finds and writes exactly what the small-input plan
    (cached rows, one collect) does."""
    import pyarrow as pa

    from rmqspec.spark import job
    from rmqspec.spark.job import run_audit
    from rmqspec.traces.io import rows_to_table

    gen = sorted(t for t in batch.rows if t.startswith("gen:"))
    tids = [t for t in batch.rows if t.startswith("case")] + gen[::2]  # every other injected code
    flat = [{**r, "trace_id": t} for t in tids for r in batch.rows[t]]
    stored = [{**r, "detail": json.loads(r["detail"])} if isinstance(r.get("detail"), str) else r for r in flat]
    pq.write_table(rows_to_table(stored), tmp_path / "cases.parquet")
    got = {}
    for plan, collected in (("small", None), ("scale", None), ("scale", 0)):
        if collected is not None:  # every finding sorted and written by Spark
            monkeypatch.setattr(job, "COLLECTED_FINDINGS", collected)
        out = tmp_path / f"out-{plan}-{collected}"
        summary = run_audit(spark, [str(tmp_path / "cases.parquet")], str(out), plan=plan)
        tables = [pq.read_table(out / name) for name in ("violations", "observations")]
        got[(plan, collected)] = (
            pa.concat_tables(tables).to_pylist(), summary.violations, summary.not_judged, summary.samples
        )
    assert got[("small", None)] == got[("scale", None)] == got[("scale", 0)]
    assert sum(got[("scale", 0)][1].values()) > 30
