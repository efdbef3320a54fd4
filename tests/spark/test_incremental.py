"""Incremental Spark audits (``spark/incremental.py``, ``spark/carry.py``): day by day with the
carried state, the findings are exactly those of a full audit of the concatenation; the Spark
carry keeps exactly the rows the reference ``traces.carry.carry_trace`` keeps; a bad STATE_DIR is
one line and exit 2."""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from rmqspec.spark import carry as carry_mod
from rmqspec.spark.carry import carry, collect_local, collect_per_trace
from rmqspec.spark.config import AuditConfig
from rmqspec.spark.errors import StateError
from rmqspec.spark.incremental import _raw, _read, _typed, _with_crashes, read_state
from rmqspec.spark.incremental import run as run_incremental
from rmqspec.traces.carry import carry_trace
from rmqspec.traces.checker import check, validate
from rmqspec.traces.generator import GenConfig, generate
from rmqspec.traces.io import read_table
from rmqspec.traces.scenarios import SCENARIOS
from tests.traces.carry_days import schedule_reuse_days, touching_day, transaction_days
from tests.untraced import budget_run

NO_FILTERS = tuple(c for c in SCENARIOS if "FILTER" not in c and "SUBSCRIPTION" not in c)


def _split(rows: list[dict], cuts: list[int], tmp: Path) -> list[str]:
    table = read_table(tmp / "whole")[0].sort_by("seq")
    days = []
    for i, (a, b) in enumerate(itertools.pairwise([0, *cuts, len(rows)])):
        day = tmp / f"day{i}"
        day.mkdir()
        pq.write_table(table.slice(a, b - a), day / "part-00000.parquet")
        days.append(str(day))
    return days


def _found(out: Path) -> list[tuple]:
    got = []
    for name in ("violations", "observations"):
        for r in pq.read_table(out / name).to_pylist():
            got.append((r["code"], tuple(r["seqs"]), r["msg_key"], r["group"]))
    return sorted(got)


@budget_run
@pytest.mark.parametrize(
    ("plan", "carry_rows"),
    [("small", None), ("small", 0), ("reference", None)],
    ids=["small-driver", "small-aggregations", "reference"],
)
def test_days_with_state_give_the_findings_of_the_whole_history(spark, tmp_path, monkeypatch, plan, carry_rows):
    """With the SQL rules (``small``: the differential test of spark/carry.py, both ways — ``collect_local`` on the
    driver, or ``carry``'s aggregations with ``TRACE_CARRY_ROWS`` at 0 — and the rules against the checker) and with
    the reference plan (the incremental path honours it; it carries in its own job). ``collect_per_trace``, the
    Spark task that stands in for ``collect_local`` when the driver cannot read the files, gives the same
    ``Carried`` (``test_spark_carry_keeps_the_rows_the_reference_keeps``, rows compared field by field)."""
    if carry_rows is not None:
        monkeypatch.setattr(carry_mod, "TRACE_CARRY_ROWS", carry_rows)
    generate(tmp_path / "whole", GenConfig(events=12_000, seed=5, inject=NO_FILTERS, crashes=1))
    rows = sorted(read_table(tmp_path / "whole")[0].to_pylist(), key=lambda r: r["seq"])
    report = check(rows)
    full = sorted((f.code, f.seqs, f.keys.get("msg_key"), f.keys.get("group"))
                  for f in (*report.violations, *report.observations))
    assert len(full) > 15
    retries = [i for i, r in enumerate(rows) if r["event"] == "send_back" and r["status"] == "RETRY"]
    cut = retries[len(retries) // 2] + 1  # day 1 ends with a retry pending…
    resolved = {r["txn_id"] for r in rows[:cut] if r["event"] == "txn_end"}
    assert any(r["event"] == "txn_half" and r["txn_id"] not in resolved for r in rows[:cut])  # …a half open
    assert any(r["event"] == "orderly_start" for r in rows[:cut])  # …and orderly windows, locks held
    days = _split(rows, [cut], tmp_path)
    config = AuditConfig()
    state = None
    for i, day in enumerate(days):
        out, state_out = tmp_path / f"out{i}", str(tmp_path / f"state{i}")
        summary = run_incremental(spark, [day], str(out), config, state, state_out,
                                  on_stage=lambda _s: None, plan=plan)
        state = state_out
    assert _found(out) == full
    assert sum(summary.violations.values()) + sum(summary.observations.values()) == len(full)
    meta = json.loads((Path(state) / "state.json").read_text())
    assert meta["rows"] < len(rows) / 4
    assert meta["last_seq"] == {"": rows[-1]["seq"]}
    # the day after: nothing new, the same findings from the state alone (no drain: LOST stays judged)
    tail = tmp_path / "empty"
    tail.mkdir()
    pq.write_table(read_table(tmp_path / "whole")[0].slice(0, 0), tail / "part-00000.parquet")
    run_incremental(spark, [str(tail)], str(tmp_path / "out_tail"), config, state, None,
                    on_stage=lambda _s: None, plan=plan)
    assert _found(tmp_path / "out_tail") == full
    # a day that is not the next one: named, before any audit
    with pytest.raises(StateError, match="not the day after this state"):
        run_incremental(spark, [days[0]], str(tmp_path / "out_again"), config, state, None,
                        on_stage=lambda _s: None, plan=plan)


@budget_run
@pytest.mark.parametrize("plan", ["small", "reference"])
def test_closed_keys_come_back_when_a_day_touches_them(spark, tmp_path, plan):
    """The tombstones pulled back (``traces/carry.py``'s case in Spark): a new consumer group of an
    old topic (LOST for every closed message of it), a duplicate SUCCESS of a closed message
    (DUPLICATED against its first consume, a tombstone) and a second drain (LOST re-judged)."""
    import pyarrow as pa

    from rmqspec.spark.job import run_audit

    generate(tmp_path / "whole", GenConfig(events=6_000, seed=6, inject=("LOST",), crashes=1))
    table = read_table(tmp_path / "whole")[0].sort_by("seq")
    days = [str(tmp_path / "day0"), str(tmp_path / "day1")]
    Path(days[0]).mkdir()
    pq.write_table(table, Path(days[0]) / "part-00000.parquet")

    def audit(i: int) -> None:
        run_incremental(spark, [days[i]], str(tmp_path / f"out{i}"), AuditConfig(),
                        str(tmp_path / "state0") if i else None, str(tmp_path / f"state{i}"),
                        on_stage=lambda _s: None, plan=plan)

    audit(0)
    day1 = table.to_pylist()
    closed_keys = set(pq.read_table(tmp_path / "state0" / "closed").column("msg_key").to_pylist())
    closed0 = pq.read_table(tmp_path / "state0" / "closed").num_rows
    consume = next(r for r in reversed(day1)
                   if r["event"] == "consume" and r["status"] == "SUCCESS" and r["msg_key"] in closed_keys)
    day2 = touching_day(day1, consume)
    seq = day2[0]["seq"]
    Path(days[1]).mkdir()
    pq.write_table(pa.Table.from_pylist(day2, schema=table.schema), Path(days[1]) / "part-00000.parquet")
    audit(1)
    run_audit(spark, days, str(tmp_path / "full"), plan=plan)
    pulled = json.loads((tmp_path / "out1" / "summary.json").read_text())["incremental"]["tombstones_pulled"]
    assert pulled > 0
    full = _found(tmp_path / "full")
    assert _found(tmp_path / "out1") == full
    assert any(code == "LOST" and group == "CG_NEW" for code, _seqs, _key, group in full)
    assert any(code == "DUPLICATED" and seqs[-1] == seq + 1 for code, seqs, _key, _group in full)
    # the pulled tombstones left the old ones: every seq once, in rows/ or in closed/
    closed = pq.read_table(tmp_path / "state1" / "closed").column("seq").to_pylist()
    kept = pq.read_table(tmp_path / "state1" / "rows").column("seq").to_pylist()
    assert len(set(closed)) == len(closed) and not set(closed) & set(kept)
    # …in the rewritten copy of the earlier day's file (next to the day's own); state0 is unchanged
    files = sorted((tmp_path / "state1" / "closed").glob("tombstones-*.parquet"))
    earlier = [f for f in files if (tmp_path / "state0" / "closed" / f.name).exists()]
    assert len(files) == 2 and len(earlier) == 1
    assert pq.read_table(earlier[0]).num_rows + pulled == closed0


def test_earlier_tombstone_files_go_on_less_the_pulled_ones(tmp_path):
    """``OldClosed.write``: the previous state's tombstone files, unchanged, into the new state: a
    hard link on the same file system, a copy on another (``/dev/shm``, a tmpfs, here); a file
    with a tombstone pulled back is written anew without it, the old one left as it was."""
    import os
    import shutil
    import tempfile

    import pyarrow as pa

    from rmqspec.spark.incremental import OldClosed

    old = tmp_path / "state0" / "closed"
    old.mkdir(parents=True)
    for i in range(2):
        pq.write_table(pa.table({"seq": [i, i + 10]}), old / f"tombstones-{i}.parquet")
    (old / "_SUCCESS").touch()
    shm = Path(tempfile.mkdtemp(dir="/dev/shm"))
    try:
        for root in (tmp_path, shm):
            new = root / "state1" / "closed"
            OldClosed(files=str(old)).write(new)
            assert sorted(f.name for f in new.iterdir()) == ["tombstones-0.parquet", "tombstones-1.parquet"]
            assert pq.read_table(new).column("seq").to_pylist() == pq.read_table(old).column("seq").to_pylist()
            linked = (new / "tombstones-0.parquet").stat().st_ino == (old / "tombstones-0.parquet").stat().st_ino
            assert linked == (os.stat(root).st_dev == os.stat(tmp_path).st_dev)
    finally:
        shutil.rmtree(shm)
    pulled = OldClosed(str(old), pa.table({"seq": pa.array([10], pa.int64())}))
    pulled.write(tmp_path / "state2" / "closed")
    assert pq.read_table(tmp_path / "state2" / "closed").column("seq").to_pylist() == [0, 1, 11]
    assert pq.read_table(old / "tombstones-0.parquet").column("seq").to_pylist() == [0, 10]
    assert (tmp_path / "state2" / "closed" / "tombstones-1.parquet").stat().st_ino == (
        old / "tombstones-1.parquet").stat().st_ino
    OldClosed().write(tmp_path / "state3" / "closed")  # no earlier state: an empty directory
    assert list((tmp_path / "state3" / "closed").iterdir()) == []


def _state(path: Path) -> dict[str, list]:
    return {name: sorted((sorted(r.items()) for r in pq.read_table(path / name).to_pylist()), key=repr)
            for name in ("rows", "closed", "findings")}


def _days(spark, days: list[str], tmp_path: Path, plan: str) -> list[dict[str, list]]:
    """Each day audited with the state of the one before (``{plan}-out{i}``, ``{plan}-state{i}``);
    the state written after each day."""
    state, states = None, []
    for i, day in enumerate(days):
        state_out = tmp_path / f"{plan}-state{i}"
        run_incremental(spark, [day], str(tmp_path / f"{plan}-out{i}"), AuditConfig(), state,
                        str(state_out), on_stage=lambda _s: None, plan=plan)
        # both plans' new tombstones are written from the driver (``_write_carried``): the reference
        # plan's from the audit's job, the SQL plans' from ``carry.collect_per_trace``: a file per day
        assert len(list((state_out / "closed").glob("tombstones-*.parquet"))) == 1 + i
        states.append(_state(state_out))
        state = str(state_out)
    return states


@budget_run
def test_the_reference_plans_state_from_the_audit_job_is_the_sql_plans_state(spark, tmp_path):
    """The reference plan computes the new state in the audit's own job (no second read of the
    history, ``reference.Carried``); it writes the same rows, tombstones and findings as the SQL
    plan's aggregations, on day 1 and on day 2 (old tombstones kept, pulled ones replaced)."""
    generate(tmp_path / "whole", GenConfig(events=8_000, seed=9, inject=NO_FILTERS, crashes=1))
    rows = sorted(read_table(tmp_path / "whole")[0].to_pylist(), key=lambda r: r["seq"])
    days = _split(rows, [len(rows) // 3, 2 * len(rows) // 3], tmp_path)
    states = {plan: _days(spark, days, tmp_path, plan) for plan in ("reference", "small")}
    for ref, sql in zip(states["reference"], states["small"], strict=True):
        assert ref == sql
    assert all(s["rows"] and s["closed"] for s in states["reference"])


@budget_run
def test_traces_with_trace_id_carry_the_same_state_on_both_plans(spark, tmp_path):
    """Three traces in one input (a ``trace_id`` column), each cut in two days: both plans write
    the same state (``trace_id`` kept), and day 2 gives the findings of a full audit."""
    import pyarrow as pa

    from rmqspec.spark.job import run_audit

    halves: list[list[pa.Table]] = [[], []]
    for i in range(3):
        generate(tmp_path / f"t{i}", GenConfig(events=3_000, seed=20 + i, inject=NO_FILTERS, crashes=1))
        table = read_table(tmp_path / f"t{i}")[0].sort_by("seq")
        table = table.append_column("trace_id", pa.array([f"t{i}"] * table.num_rows, pa.string()))
        cut = table.num_rows // 2
        halves[0].append(table.slice(0, cut))
        halves[1].append(table.slice(cut))
    days = []
    for d, parts in enumerate(halves):
        (tmp_path / f"day{d}").mkdir()
        pq.write_table(pa.concat_tables(parts), tmp_path / f"day{d}" / "part-00000.parquet")
        days.append(str(tmp_path / f"day{d}"))
    run_audit(spark, days, str(tmp_path / "full"), plan="small")
    states: dict[str, dict[str, list]] = {}
    for plan in ("reference", "small"):
        states[plan] = _days(spark, days, tmp_path, plan)[-1]
        got = sorted(
            (r["trace_id"], r["code"], tuple(r["seqs"]))
            for name in ("violations", "observations")
            for r in pq.read_table(tmp_path / f"{plan}-out1" / name).to_pylist()
        )
        want = sorted(
            (r["trace_id"], r["code"], tuple(r["seqs"]))
            for name in ("violations", "observations")
            for r in pq.read_table(tmp_path / "full" / name).to_pylist()
        )
        assert got == want and len(want) > 10
    assert states["reference"] == states["small"]
    assert {dict(r)["trace_id"] for r in states["reference"]["rows"]} == {"t0", "t1", "t2"}


@budget_run
@pytest.mark.parametrize("per_trace", [False, "spark", "driver"], ids=["aggregations", "per-trace", "driver"])
def test_spark_carry_keeps_the_rows_the_reference_keeps(spark, batch, per_trace):
    path = str(batch.out.parent / "batch.parquet")
    history = _read(spark, [path])
    got: dict[str, tuple[set, set, set]] = {}
    rows_got: dict[tuple[str, int], dict] = {}
    if per_trace:  # the rows themselves come back: they must be the history's rows, as read
        # several traces per task; or the driver's pyarrow read (JSON-encoded trace ids decoded)
        carried = (collect_per_trace(history, {}, partitions=3) if per_trace == "spark"
                   else collect_local([path], {}))
        assert carried is not None
        for i, table in enumerate((carried.rows, carried.tombstones)):
            for r in table.to_pylist():
                got.setdefault(r["trace"], (set(), set(), set()))[i].add(r["seq"])
                rows_got[(r["trace"], r["seq"])] = r
        for trace, keys in carried.open_keys.items():
            got.setdefault(trace, (set(), set(), set()))[2].update(keys)
    else:
        keep, tomb, open_keys = carry(spark, _with_crashes(spark, history), {})
        for name, frame, col in (("keep", keep, "seq"), ("tomb", tomb, "seq"), ("open", open_keys, "msg_key")):
            for r in frame.collect():
                got.setdefault(r["trace"], (set(), set(), set()))[("keep", "tomb", "open").index(name)].add(r[col])
    checked = 0
    for trace_id, rows in batch.rows.items():
        good, _ = validate([{**r, "trace_id": trace_id} for r in rows])
        good.sort(key=lambda r: r["seq"])
        want = carry_trace(good)
        assert got.get(trace_id, (set(), set(), set())) == want, trace_id
        checked += 1
    assert checked > 300
    if per_trace:
        read = {(r["trace"], r["seq"]): r for r in history.collect()}
        assert len(rows_got) > 1000
        for key, row in rows_got.items():
            assert row == {**read[key].asDict(), "trace": key[0]}, key


@budget_run
def test_spark_carry_keeps_a_closed_keys_highest_schedule_position(spark, tmp_path):
    """``carry``'s aggregations on the case the batch lacks (``tests/traces/carry_days.py``): k1's
    SCHEDULE_TOPIC_XXXX store at 5, the highest of its queue before the power crash, stays."""
    import pyarrow as pa

    from rmqspec.traces.schema import SCHEMA

    day1, _ = schedule_reuse_days()
    pq.write_table(pa.Table.from_pylist(day1, schema=SCHEMA), tmp_path / "day1.parquet")
    keep, tomb, open_keys = carry(spark, _with_crashes(spark, _read(spark, [str(tmp_path / "day1.parquet")])), {})
    got = ({r["seq"] for r in keep.collect()}, {r["seq"] for r in tomb.collect()},
           {r["msg_key"] for r in open_keys.collect()})
    good, _ = validate(day1)
    assert 5 in got[0] and got == carry_trace(good)


def test_the_carry_next_to_the_audit_can_be_cancelled(spark, batch):
    """A failed audit cancels the carry it started next to it (its job group): ``cancel`` returns
    once the thread is done, and the session runs the next job."""
    from rmqspec.spark.incremental import _Alongside

    alongside = _Alongside(spark, _read(spark, [str(batch.out.parent / "batch.parquet")]), AuditConfig(), 2)
    alongside.cancel()
    assert alongside._future.done()
    assert spark.range(5).count() == 5
    again = _Alongside(spark, _read(spark, [str(batch.out.parent / "batch.parquet")]), AuditConfig(), 2)
    assert again.result().rows.num_rows > 0


def test_a_run_that_fails_in_the_audit_leaves_no_state(spark, tmp_path, monkeypatch):
    """The driver's carry writes ``rows/`` and ``closed/`` next to the audit, before it ends: when the
    audit then fails, the target over an earlier state holds no ``state.json``, so no later run
    takes it for a state."""
    from rmqspec.spark import incremental

    generate(tmp_path / "whole", GenConfig(events=2_000, seed=8, crashes=1))
    rows = sorted(read_table(tmp_path / "whole")[0].to_pylist(), key=lambda r: r["seq"])
    days = _split(rows, [len(rows) // 2], tmp_path)
    target = tmp_path / "state-next"
    run_incremental(spark, [days[0]], str(tmp_path / "out0"), AuditConfig(), None, str(tmp_path / "state0"),
                    on_stage=lambda _s: None, plan="small")
    shutil.copytree(tmp_path / "state0", target)  # an earlier, whole state where the next one goes
    assert read_state(str(target), AuditConfig())
    started = []

    def failing_audit(*_args, **_kwargs):
        started.append(True)
        raise RuntimeError("the audit failed")

    monkeypatch.setattr("rmqspec.spark.job.run_audit", failing_audit)
    with pytest.raises(RuntimeError, match="the audit failed"):
        incremental.run(spark, [days[1]], str(tmp_path / "out1"), AuditConfig(), str(tmp_path / "state0"),
                        str(target), on_stage=lambda _s: None, plan="small")
    assert started and not (target / "state.json").exists()
    with pytest.raises(StateError, match=r"state\.json: missing"):
        read_state(str(target), AuditConfig())


@pytest.mark.parametrize(
    ("setup", "needle"),
    [
        (lambda d: None, "not a state directory"),
        (lambda d: d.mkdir(), "state.json: missing"),
        (lambda d: (d.mkdir(), (d / "state.json").write_text("{")), "state.json: unreadable"),
        (lambda d: (d.mkdir(), (d / "state.json").write_text('{"format": "x"}')), "not an audit state"),
        (lambda d: (d.mkdir(), (d / "state.json").write_text(
            '{"format": "rmqspec-audit-state", "version": 9}')), "version 9"),
    ],
)
def test_a_bad_state_dir_is_named_with_its_reason(tmp_path, setup, needle):
    state = tmp_path / "st"
    setup(state)
    with pytest.raises(StateError, match=needle):
        read_state(str(state), AuditConfig())


def test_a_state_made_with_other_parameters_is_refused(tmp_path):
    state = tmp_path / "st"
    state.mkdir()
    from rmqspec.spark.incremental import FORMAT, VERSION, fingerprint

    params = fingerprint(AuditConfig()) | {"retry_max_times": 3}
    (state / "state.json").write_text(json.dumps(
        {"format": FORMAT, "version": VERSION, "params": params, "last_seq": {"": 9}}))
    with pytest.raises(StateError, match="retry_max_times"):
        read_state(str(state), AuditConfig())


def test_a_state_keeps_its_parameters_across_op_batching(tmp_path):
    """A 4.9 audit's parameters are those of a state written before op batching existed (no
    ``op_batch_ms``); a 5.1 audit (op_batch_ms 3000) refuses such a state, naming the parameter."""
    from rmqspec.spark.config import load_config
    from rmqspec.spark.incremental import FORMAT, VERSION, fingerprint

    state = tmp_path / "st"
    state.mkdir()
    old = {k: v for k, v in fingerprint(AuditConfig()).items() if k != "op_batch_ms"}
    assert fingerprint(load_config(None, "rocketmq-4.9")) == old == fingerprint(load_config(None, "rocketmq-5.0"))
    (state / "state.json").write_text(json.dumps(
        {"format": FORMAT, "version": VERSION, "params": old, "last_seq": {"": 9}}))
    with pytest.raises(StateError, match=r"\(op_batch_ms\): use the same --config and --profile"):
        read_state(str(state), load_config(None, "rocketmq-5.1"))
    with pytest.raises(StateError, match="rows: missing"):  # the parameters agree: on to the files
        read_state(str(state), load_config(None, "rocketmq-4.9"))


def test_cli_bad_state_dir_exits_2_with_one_line(tmp_path):
    day = tmp_path / "day"
    generate(day, GenConfig(events=500, seed=1))
    proc = subprocess.run(
        [sys.executable, "-m", "rmqspec.cli", "audit", str(day), "--out", str(tmp_path / "o"),
         "--since", str(tmp_path / "nope")],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0
    assert "nope: not a state directory" in proc.stderr


@budget_run
def test_closed_transactions_come_back_in_spark(spark, tmp_path):
    """``tests/traces/carry_days.transaction_days`` in Spark, its four cases as four traces of one
    input: ``carry``'s aggregations close the transactions ``carry_trace`` closes, and the daily
    runs (their pull, on the driver and by Spark jobs) give the findings of the whole history on
    both plans."""
    import pyarrow as pa

    from rmqspec.spark import pull
    from rmqspec.spark.job import run_audit
    from rmqspec.traces.schema import SCHEMA

    cases = ("top", "txn_id", "at_risk", "window")
    both = [transaction_days(case) for case in cases]
    days = []
    for i in range(2):
        days.append(str(tmp_path / f"day{i}"))
        Path(days[-1]).mkdir()
        rows = [{**r, "trace_id": case} for case, d in zip(cases, both, strict=True) for r in d[i]]
        schema = SCHEMA.append(pa.field("trace_id", pa.string()))
        pq.write_table(pa.Table.from_pylist(rows, schema=schema), Path(days[-1]) / "part-00000.parquet")
    keep, tomb, open_keys = carry(spark, _with_crashes(spark, _read(spark, days)), {})
    for case, (day1, day2, _code) in zip(cases, both, strict=True):
        got = ({r["seq"] for r in keep.collect() if r["trace"] == case},
               {r["seq"] for r in tomb.collect() if r["trace"] == case},
               {r["msg_key"] for r in open_keys.collect() if r["trace"] == case})
        assert got == carry_trace(validate([*day1, *day2])[0]), case
    spark.catalog.clearCache()
    run_audit(spark, days, str(tmp_path / "full"), plan="small")
    full = _found(tmp_path / "full")
    assert {"TXN_CHECK_EARLY", "TXN_CHECK_AFTER_RESOLVED"} <= {code for code, *_ in full}
    for plan in ("small", "reference"):
        for i, day in enumerate(days):
            run_incremental(spark, [day], str(tmp_path / f"{plan}{i}"), AuditConfig(),
                            str(tmp_path / f"{plan}-state0") if i else None, str(tmp_path / f"{plan}-state{i}"),
                            on_stage=lambda _s: None, plan=plan)
        assert _found(tmp_path / f"{plan}1") == full, plan
    state = str(tmp_path / "small-state0")
    local = pull.local([days[1]], state, tmp_path / "pulled-local")
    by_spark = pull.by_spark(spark, _typed(_raw(spark, [days[1]])).drop("problem"), state, tmp_path / "pulled-spark",
                             True)
    assert local is not None and local.pulled == by_spark.pulled >= 4  # x1's half and COMMIT, twice
