"""An incremental run's bounds and pulled tombstones (``spark/pull.py``): the driver's pyarrow path
gives exactly the Spark jobs' answer, and leaves to them every input whose row validation it cannot
state."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

from rmqspec.spark import pull
from rmqspec.spark.config import AuditConfig
from rmqspec.spark.incremental import _raw, _typed
from rmqspec.spark.incremental import run as run_incremental
from rmqspec.traces.generator import GenConfig, generate
from rmqspec.traces.io import read_table
from tests.traces.carry_days import touching_day


def _day(spark, files: list[str]):
    return _typed(_raw(spark, files)).filter(F.col("problem").isNull()).drop("problem")


def _both(spark, files: list[str], state: str | None, tmp: Path, has_trace_id: bool):
    """(local's answer and pulled rows, by_spark's answer and pulled rows)."""
    out = []
    for name in ("local", "spark"):
        target = tmp / f"pulled-{name}"
        got = (pull.local(files, state, target) if name == "local"
               else pull.by_spark(spark, _day(spark, files), state, target, has_trace_id))
        assert got is not None
        rows = pq.read_table(target).to_pylist() if got.pulled else []
        out.append((got, sorted(rows, key=lambda r: (r.get("trace_id") or "", r["seq"]))))
    return out


def _nullable(schema: pa.Schema) -> pa.Schema:
    return pa.schema([f.with_nullable(True) for f in schema])


def _write(table: pa.Table, path: Path) -> str:
    path.mkdir(parents=True)
    pq.write_table(table, path / "part-00000.parquet")
    return str(path / "part-00000.parquet")


def _state(spark, tmp: Path, table: pa.Table) -> str:
    day0 = tmp / "day0"
    _write(table, day0)
    run_incremental(spark, [str(day0)], str(tmp / "out0"), AuditConfig(), None, str(tmp / "state0"),
                    on_stage=lambda _s: None, plan="small")
    return str(tmp / "state0")


def _bad_rows(day: list[dict]) -> list[dict]:
    """Rows the row validation rejects (a null ts, an unknown event), one with a seq below the
    day's first: neither may count in the bounds nor pull a tombstone."""
    first = day[0]
    return [{**first, "seq": first["seq"] - 1_000_000, "ts": None},
            {**first, "seq": day[-1]["seq"] + 10, "event": "teleport"}]


def test_the_driver_pulls_what_spark_pulls(spark, tmp_path):
    """A day that touches closed keys (a duplicate consume, a new consumer group of an old topic),
    with rows the validation rejects: the same bounds, count and pulled rows, some pulled."""
    generate(tmp_path / "whole", GenConfig(events=6_000, seed=6, inject=("LOST",), crashes=1))
    table = read_table(tmp_path / "whole")[0].sort_by("seq")
    state = _state(spark, tmp_path, table)
    rows = table.to_pylist()
    closed = set(pq.read_table(Path(state) / "closed").column("msg_key").to_pylist())
    consume = next(r for r in reversed(rows)
                   if r["event"] == "consume" and r["status"] == "SUCCESS" and r["msg_key"] in closed)
    day = touching_day(rows, consume)
    file = _write(pa.Table.from_pylist(day + _bad_rows(day), schema=_nullable(table.schema)), tmp_path / "day1")
    (local, local_rows), (spark_got, spark_rows) = _both(spark, [file], state, tmp_path, False)
    assert local == spark_got and local.pulled > 0
    assert local_rows == spark_rows
    assert local.bounds == {"": (day[0]["seq"], day[-1]["seq"], len(day))}


def test_traces_by_id_pull_the_same_and_count_apart(spark, tmp_path):
    """Three traces in one input (string ``trace_id``; one of them with null ids, trace ""): bounds
    per trace, and a key of t1's tombstones touched in every trace pulls its tombstones of the traces
    where it is closed."""
    parts = []
    for i in range(3):
        generate(tmp_path / f"t{i}", GenConfig(events=2_000, seed=30 + i, crashes=1))
        t = read_table(tmp_path / f"t{i}")[0].sort_by("seq")
        parts.append(t.append_column("trace_id", pa.array([f"t{i}" if i else None] * t.num_rows, pa.string())))
    whole = pa.concat_tables(parts)
    state = _state(spark, tmp_path, whole)
    closed = pq.read_table(Path(state) / "closed").to_pylist()
    touched = next(r for r in closed if r["trace_id"] == "t1" and r["msg_key"] is not None)
    last = {f"t{i}" if i else None: p.column("seq").to_pylist()[-1] for i, p in enumerate(parts)}
    day = [{**touched, "seq": last[t] + 1, "ts": 10**12, "event": "consume", "status": "SUCCESS", "trace_id": t,
            "group": None} for t in last]  # the touched key in every trace (no group: no new consumer)
    file = _write(pa.Table.from_pylist(day, schema=whole.schema), tmp_path / "day1")
    (local, local_rows), (spark_got, spark_rows) = _both(spark, [file], state, tmp_path, True)
    assert local == spark_got and local.pulled > 0
    assert local_rows == spark_rows
    want = sorted(r["seq"] for r in closed if r["msg_key"] == touched["msg_key"])  # in each trace it is closed in
    assert sorted(r["seq"] for r in local_rows) == want
    assert set(local.bounds) == {"", "t1", "t2"}


def test_a_day_without_state_gives_its_bounds(spark, tmp_path):
    generate(tmp_path / "whole", GenConfig(events=1_000, seed=3))
    table = read_table(tmp_path / "whole")[0]
    file = _write(table, tmp_path / "day")
    got = pull.local([file], None, tmp_path / "pulled")
    assert got == pull.by_spark(spark, _day(spark, [file]), None, tmp_path / "pulled", False)
    seqs = table.column("seq").to_pylist()
    assert got == pull.DayAgainstState({"": (min(seqs), max(seqs), len(seqs))}, 0)
    assert not (tmp_path / "pulled").exists()


@pytest.mark.parametrize("change", ["queue_id as text", "escaped json trace_id", "no ts", "a uri"])
def test_inputs_the_driver_cannot_validate_go_to_spark(tmp_path, change):
    """A column of another type (its cast may fail a row), a JSON-encoded trace id with an escape
    (decoded by ``inputs.load``), a missing required column, a URI: ``local`` answers None."""
    generate(tmp_path / "whole", GenConfig(events=200, seed=4))
    table = read_table(tmp_path / "whole")[0]
    if change == "queue_id as text":
        i = table.schema.get_field_index("queue_id")
        table = table.set_column(i, "queue_id", table.column("queue_id").cast(pa.string()))
    elif change == "escaped json trace_id":
        table = table.append_column("trace_id", pa.array(['"t\\u0030"'] * table.num_rows, pa.string()))
    elif change == "no ts":
        table = table.drop_columns(["ts"])
    file = _write(table, tmp_path / "day")
    files = ["hdfs://nowhere/day"] if change == "a uri" else [file]
    assert pull.local(files, None, tmp_path / "pulled") is None


def test_a_day_beyond_the_drivers_bound_goes_to_spark(tmp_path, monkeypatch):
    """A day of more than ``LOCAL_DAY_ROWS`` rows (by its Parquet footers) is left to the Spark jobs:
    the driver would hold its keys."""
    generate(tmp_path / "whole", GenConfig(events=200, seed=4))
    table = read_table(tmp_path / "whole")[0]
    file = _write(table, tmp_path / "day")
    assert pull.local([file], None, tmp_path / "pulled") is not None
    monkeypatch.setattr(pull, "LOCAL_DAY_ROWS", table.num_rows - 1)
    assert pull.local([file], None, tmp_path / "pulled") is None
