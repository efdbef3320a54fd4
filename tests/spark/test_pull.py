"""An incremental run's bounds and pulled tombstones (``spark/pull.py``): the driver's pyarrow path
gives exactly the Spark jobs' answer, and leaves to them every input whose row validation it cannot
state."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

from rmqspec.spark import closed_keys, driver_read, pull
from rmqspec.spark.config import AuditConfig
from rmqspec.spark.incremental import _raw, _typed
from rmqspec.spark.incremental import run as run_incremental
from rmqspec.traces.generator import GenConfig, generate
from rmqspec.traces.io import read_table
from tests.traces.carry_days import touching_day


def _day(spark, files: list[str]):
    return _typed(_raw(spark, files)).filter(F.col("problem").isNull()).drop("problem")


def _both(spark, files: list[str], state: str | None, tmp: Path, has_trace_id: bool):
    """(local's answer and pulled rows, by_spark's answer and pulled rows); ``local`` answers the
    same with the state's key indexes gone or stale (a state from before them, a file replaced)."""
    out = []
    for name in ("local", "stale", "spark"):
        target = tmp / f"pulled-{name}"
        if name == "spark":
            got = pull.by_spark(spark, _day(spark, files), state, target, has_trace_id)
        else:
            got = pull.local(files, state if name == "local" else _stale(state, tmp), target)
        assert got is not None
        rows = pq.read_table(target).to_pylist() if got.pulled else []
        out.append((got, sorted(rows, key=lambda r: (r.get("trace_id") or "", r["seq"]))))
    if state:
        _indexes_match(Path(state))
    assert out[0] == out[1]
    return out[0], out[2]


def _stale(state: str | None, tmp: Path) -> str | None:
    """A copy of ``state`` whose key indexes are empty ones recorded for another file (the first,
    third, ...) or gone (the others)."""
    if state is None:
        return None
    copy = tmp / "stale-state"
    shutil.copytree(state, copy)
    for i, f in enumerate(sorted(closed_keys.index_dir(copy / "closed").iterdir())):
        if i % 2:
            f.unlink()
        else:
            empty = pq.read_table(f).slice(0, 0)
            pq.write_table(empty.replace_schema_metadata({b"rmqspec.tombstones_fingerprint": b"1:0"}), f)
    return str(copy)


def _indexes_match(state: Path) -> None:
    """Each ``closed/`` file of ``state`` has its stored key index: what ``closed_keys`` computes from
    the file."""
    files = sorted((state / "closed").glob("*.parquet"))
    assert files and sorted(f.name for f in closed_keys.index_dir(state / "closed").iterdir()) == [
        f.name for f in files]
    for f in files:
        stored = closed_keys.read(f)
        assert stored is not None and stored.schema.metadata is None
        computed = closed_keys.of_rows(driver_read.valid_rows([f], closed_keys.KEY_COLUMNS))
        assert _sorted(stored).equals(_sorted(computed))


def _sorted(index: pa.Table) -> pa.Table:
    return index.sort_by([(c, "ascending") for c in index.column_names])


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


def test_key_indexes_go_on_with_their_files(spark, tmp_path):
    """``OldClosed.write`` takes each tombstones file's key index over with it: linked with a file it
    links, written anew (what ``closed_keys`` computes from the new file) with one it rewrites."""
    from rmqspec.spark.incremental import OldClosed

    generate(tmp_path / "whole", GenConfig(events=3_000, seed=8, crashes=1))
    state = Path(_state(spark, tmp_path, read_table(tmp_path / "whole")[0].sort_by("seq")))
    (old,) = sorted((state / "closed").glob("*.parquet"))
    old_index = closed_keys.index_dir(state / "closed") / old.name
    OldClosed(str(state / "closed")).write(tmp_path / "linked" / "closed")
    assert (closed_keys.index_dir(tmp_path / "linked" / "closed") / old.name).stat().st_ino == old_index.stat().st_ino
    tombstones = pq.read_table(old, columns=["seq", "msg_key"])
    key = next(k for k in tombstones.column("msg_key").to_pylist() if k is not None)
    seqs = tombstones.filter(pc.equal(tombstones["msg_key"], key)).select(["seq"])  # a key pulled back
    OldClosed(str(state / "closed"), seqs).write(tmp_path / "rewritten" / "closed")
    _indexes_match(tmp_path / "rewritten")
    new_index = closed_keys.read(tmp_path / "rewritten" / "closed" / old.name)
    assert new_index is not None and new_index.num_rows < pq.read_table(old_index).num_rows
    # the old file's index beside the rewritten file: its fingerprint is another file's, so it is not taken
    shutil.copyfile(old_index, closed_keys.index_dir(tmp_path / "rewritten" / "closed") / old.name)
    assert _sorted(closed_keys.read(tmp_path / "rewritten" / "closed" / old.name)).equals(_sorted(new_index))
