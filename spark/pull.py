"""An incremental run's first steps: the day's bounds per trace and the tombstones it pulls back.

Theory of operation
-------------------
``spark/incremental.py`` needs, before it audits a day with a state: the first and last seq and
the row count of the day's valid rows per trace (the day must lie beyond the state's last seq;
the new state's last seq; a bound on the longest trace), and the closed keys' tombstones the
day touches (``traces/carry.py``): every tombstone of a msg_key that a valid row of the day
names or that a ``crash`` of the day lists as at risk, of the msg_key of a tombstone whose
txn_id a valid row of the day names, and of a msg_key with a tombstone on a topic that the day
gives a new consumer group (a ``deliver`` / ``consume`` (trace, topic, group) that no carried
row has). The pulled rows are
written as Parquet (the trace schema, as ``closed/`` holds them) and audited with the day.

Two ways to the same answer (``tests/spark/test_pull.py`` holds them equal):

- ``local``: the driver reads the few columns it needs of the day's and the state's Parquet
  files with pyarrow (``driver_read.valid_rows``) and the key index of each ``closed/`` file
  (``closed_keys``: its distinct keys, computed from the file where the state has none), joins
  them in Arrow, then reads every column of the ``closed/`` files that hold a touched key
  (0.7-0.9 s warm for a 1 M-row day against 3.9 M tombstones, 2.1 s when it read ``closed/``
  itself; the Spark jobs below took 2.5-5.7 s against 1.47 M, mostly the fixed cost of some
  ten small jobs).
  It answers only for a day of at most ``LOCAL_DAY_ROWS`` rows whose files, and the state's,
  ``driver_read`` can validate exactly; otherwise it returns None.
- ``by_spark``: the same as Spark jobs over the validated rows (any input Spark reads).

Pyarrow is the library for this; the joins are Arrow's own (``Table.join``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import attrs
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from rmqspec.spark import closed_keys, driver_read
from rmqspec.traces.checks_common import at_risk_keys

# The most rows of a day ``local`` reads on the driver (its keys: ~50 bytes a row, ~1 GB at this
# bound); a larger day takes the Spark jobs, which spread it over the executors.
LOCAL_DAY_ROWS = 20_000_000
_CONSUMING = ("deliver", "consume")


@attrs.frozen
class DayAgainstState:
    """``bounds``: trace -> (first seq, last seq, valid rows) of the day; ``pulled``: the
    tombstones pulled back (written under the pulled directory when not 0)."""

    bounds: dict[str, tuple[int, int, int]]
    pulled: int


def _pairs(rows: pa.Table) -> pa.Table:
    """The distinct (trace, topic, group) of ``rows``' deliver / consume rows with both."""
    mask = pc.and_(pc.is_in(rows["event"], value_set=pa.array(_CONSUMING)),
                   pc.and_(pc.is_valid(rows["topic"]), pc.is_valid(rows["group"])))
    return rows.filter(mask).select(["trace", "topic", "group"]).group_by(["trace", "topic", "group"]).aggregate([])


def _at_risk(day: pa.Table) -> pa.Table:
    """(trace, msg_key) of the keys the day's ``crash`` rows list as at risk (a handful of rows)."""
    crashes = day.filter(pc.equal(day["event"], "crash")).select(["trace", "event", "detail"]).to_pylist()
    pairs = [(r["trace"], k) for r in crashes for k in at_risk_keys(r)]
    return pa.table({"trace": pa.array([t for t, _ in pairs], pa.string()),
                     "msg_key": pa.array([k for _, k in pairs], pa.string())})


def local(day_files: Sequence[str], state: str | None, pulled_dir: Path) -> DayAgainstState | None:
    """``DayAgainstState`` from the driver (pyarrow), or None when ``by_spark`` must answer."""
    files = driver_read.parquet_files(day_files)
    if files is None or sum(pq.ParquetFile(f).metadata.num_rows for f in files) > LOCAL_DAY_ROWS:
        return None
    day = driver_read.valid_rows(files, ("msg_key", "topic", "group", "txn_id", "detail"))
    if day is None:
        return None
    per_trace = day.group_by("trace").aggregate([("seq", "min"), ("seq", "max"), ("seq", "count")])
    bounds = {t: (lo, hi, n) for t, lo, hi, n in zip(
        per_trace["trace"].to_pylist(), per_trace["seq_min"].to_pylist(), per_trace["seq_max"].to_pylist(),
        per_trace["seq_count"].to_pylist(), strict=True)}
    if state is None:
        return DayAgainstState(bounds, 0)
    closed_files = sorted(Path(state, "closed").glob("*.parquet"))
    carried = driver_read.valid_rows(sorted(Path(state, "rows").glob("*.parquet")), ("topic", "group"))
    if carried is None:
        return None
    indexes = []
    for i, f in enumerate(closed_files):  # the closed keys, from each file's index
        index = closed_keys.read(f)
        if index is None:
            return None
        indexes.append(index.append_column("file", pa.repeat(pa.scalar(i, pa.int32()), index.num_rows)))
    if not indexes:
        return DayAgainstState(bounds, 0)
    index = pa.concat_tables(indexes)
    day_keys = pa.concat_tables([day.filter(pc.is_valid(day["msg_key"])).select(["trace", "msg_key"]),
                                 _at_risk(day)])
    day_txns = day.filter(pc.is_valid(day["txn_id"])).select(["trace", "txn_id"])
    new_pairs = _pairs(day).join(_pairs(carried), ["trace", "topic", "group"], join_type="left anti")
    touched = pa.concat_tables([  # the closed keys the day touches
        index.join(day_keys, ["trace", "msg_key"], join_type="left semi").select(["trace", "msg_key"]),
        index.join(new_pairs.select(["trace", "topic"]), ["trace", "topic"], join_type="left semi").select(
            ["trace", "msg_key"]),
        index.join(day_txns, ["trace", "txn_id"], join_type="left semi").select(["trace", "msg_key"]),
    ]).group_by(["trace", "msg_key"]).aggregate([])
    if not touched.num_rows:
        return DayAgainstState(bounds, 0)
    hit_files = pc.unique(index.join(touched, ["trace", "msg_key"], join_type="left semi")["file"]).to_pylist()
    pulled = []
    for i in sorted(hit_files):  # every tombstone of those keys, from the files that hold one, read whole
        rows = driver_read.valid_rows([closed_files[i]], None)  # the valid rows, every column, as closed/ holds it
        if rows is None:
            return None
        keys = rows.select(["trace", "msg_key"]).append_column(
            "row", pa.array(np.arange(rows.num_rows, dtype=np.int64)))
        hit = keys.join(touched, ["trace", "msg_key"], join_type="left semi")["row"]  # touched: the hash side
        pulled.append(rows.take(np.sort(hit.to_numpy())).drop_columns(["trace"]))
    table = pa.concat_tables(pulled, promote_options="permissive")
    pulled_dir.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, pulled_dir / "part-00000.parquet")
    return DayAgainstState(bounds, table.num_rows)


def by_spark(
    spark: SparkSession, day: DataFrame, state: str | None, pulled_dir: Path, has_trace_id: bool
) -> DayAgainstState:
    """``DayAgainstState`` by Spark jobs over ``day`` (its valid rows, typed, with ``trace``)."""
    from rmqspec.spark.incremental import _read as read_state_files
    from rmqspec.spark.incremental import _write_frame
    from rmqspec.spark.inputs import at_risk

    per_trace = day.groupBy("trace").agg(F.min("seq").alias("first"), F.max("seq").alias("last"),
                                         F.count("*").alias("rows")).collect()
    bounds = {r["trace"]: (r["first"], r["last"], r["rows"]) for r in per_trace}
    if state is None:
        return DayAgainstState(bounds, 0)
    closed = read_state_files(spark, [f"{state}/closed"])
    carried = read_state_files(spark, [f"{state}/rows"])
    day_keys = day.filter(F.col("msg_key").isNotNull()).select("trace", "msg_key").unionByName(
        day.filter(F.col("event") == "crash").select("trace", F.explode(at_risk(day)).alias("msg_key")))
    day_txns = day.filter(F.col("txn_id").isNotNull()).select("trace", "txn_id")
    pairs = lambda df: df.filter(  # noqa: E731
        F.col("event").isin(*_CONSUMING) & F.col("topic").isNotNull() & F.col("group").isNotNull()
    ).select("trace", "topic", "group").distinct()
    new_topics = pairs(day).join(pairs(carried), ["trace", "topic", "group"], "left_anti").select(
        "trace", "topic").distinct()
    # the closed keys the day touches (few: not the day's ~all-new msg_keys, which a distinct
    # would shuffle and hold), then every tombstone of them
    touched = closed.join(day_keys, ["trace", "msg_key"], "left_semi").select("trace", "msg_key").unionByName(
        closed.join(F.broadcast(new_topics), ["trace", "topic"], "left_semi").select("trace", "msg_key")
    ).unionByName(
        closed.join(day_txns, ["trace", "txn_id"], "left_semi").select("trace", "msg_key")
    ).filter(F.col("msg_key").isNotNull()).distinct().persist()
    pulled = closed.join(touched, ["trace", "msg_key"], "left_semi").persist()
    try:
        n = pulled.count()
        if n:
            _write_frame(pulled, str(pulled_dir), has_trace_id)
    finally:
        pulled.unpersist()
        touched.unpersist()
    return DayAgainstState(bounds, n)


__all__ = ["DayAgainstState", "by_spark", "local"]
