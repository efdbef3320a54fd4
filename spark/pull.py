"""An incremental run's first steps: the day's bounds per trace and the tombstones it pulls back.

Theory of operation
-------------------
``spark/incremental.py`` needs, before it audits a day with a state: the first and last seq and
the row count of the day's valid rows per trace (the day must lie beyond the state's last seq;
the new state's last seq; a bound on the longest trace), and the closed keys' tombstones the
day touches (``traces/carry.py``): every tombstone of a msg_key that a valid row of the day
names, and of a msg_key with a tombstone on a topic that the day gives a new consumer group
(a ``deliver`` / ``consume`` (trace, topic, group) that no carried row has). The pulled rows are
written as Parquet (the trace schema, as ``closed/`` holds them) and audited with the day.

Two ways to the same answer (``tests/spark/test_pull.py`` holds them equal):

- ``local``: the driver reads the few columns it needs of the day's and the state's Parquet
  files with pyarrow (``closed/`` a file, a day's tombstones, at a time: the touched keys
  first, then every column of the files that hold one) and joins them in Arrow (1.0-1.4 s
  warm for a 1 M-row day against 1.47 M tombstones, 1.8-2.1 s against 3.4 M; the Spark jobs
  below took 2.5-5.7 s, mostly the fixed cost of some ten small jobs). It answers only for a
  day of at most ``LOCAL_DAY_ROWS`` rows whose files, and the state's, are local and have a
  row validation (``inputs._problem``) it can state exactly: the audit columns present in the
  types the validation expects (so no cast can fail: a row is invalid only for a null seq, ts
  or event, or an unknown event), and trace ids that are plain or JSON strings without a
  quote, backslash or control character inside (decoded as ``inputs.load`` decodes them).
  Otherwise it returns None.
- ``by_spark``: the same as Spark jobs over the validated rows (any input Spark reads).

Pyarrow is the library for this; the joins are Arrow's own (``Table.join``), nothing is
hand-rolled but the validity mask and the trace id's decoding, which mirror ``inputs.load``.
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

from rmqspec.model.events import EVENTS
from rmqspec.spark import inputs as inputs_mod

# The Arrow type of each audit column in which the row validation's cast can never fail.
_ARROW: dict[str, pa.DataType] = {
    name: {"LongType": pa.int64(), "IntegerType": pa.int32(), "StringType": pa.string()}[type(t).__name__]
    for name, t in inputs_mod.TYPES.items()
}
_TRACE_TYPES = (pa.string(), pa.int64(), pa.int32())
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


def parquet_files(paths: Sequence[str]) -> list[Path] | None:
    """The local Parquet files of ``paths`` (files, or directories of ``*.parquet``); None if a
    path is a URI."""
    out: list[Path] = []
    for p in paths:
        if inputs_mod._is_uri(p):
            return None
        local = Path(p.removeprefix("file:"))
        out.extend(sorted(local.glob("*.parquet")) if local.is_dir() else [local])
    return out


def _valid(t: pa.Table) -> pa.ChunkedArray:
    """``inputs._problem`` is null, for a file whose columns have the validation's types."""
    known = pc.fill_null(pc.is_in(t["event"], value_set=pa.array(EVENTS)), False)
    return pc.and_(pc.and_(pc.is_valid(t["seq"]), pc.is_valid(t["ts"])), known)


def valid_rows(files: Sequence[Path], columns: Sequence[str] | None) -> pa.Table | None:
    """The valid rows of ``files`` with ``trace``, ``seq``, ``event`` and ``columns`` (null where a file lacks one;
    None: every column of the file, as it is); None when the validation of some file cannot be
    stated here (see the module docstring)."""
    tables = []
    for f in files:
        schema = pq.read_schema(f)
        names = set(schema.names)
        if not {"seq", "ts", "event"} <= names:
            return None
        if any(schema.field(n).type != t for n, t in _ARROW.items() if n in names):
            return None
        if "trace_id" in names and schema.field("trace_id").type not in _TRACE_TYPES:
            return None
        read = None if columns is None else sorted({"seq", "ts", "event", "trace_id", *columns} & names)
        t = pq.read_table(f, columns=read)
        t = t.filter(_valid(t))
        if "trace_id" in names:
            trace = _trace(t["trace_id"])
            if trace is None:
                return None
        else:
            trace = pc.fill_null(pa.nulls(t.num_rows, pa.string()), "")
        if columns is None:
            tables.append(t.append_column("trace", trace))
            continue
        cols = {"trace": trace, "seq": t["seq"], "event": t["event"]}
        for c in columns:
            cols[c] = t[c] if c in names else pa.nulls(t.num_rows, _ARROW.get(c, pa.string()))
        tables.append(pa.table(cols))
    if not tables:
        names = ("seq", "event", *(columns or ()))
        return pa.table({"trace": pa.array([], pa.string()), **{c: pa.array([], _ARROW[c]) for c in names}})
    return pa.concat_tables(tables, promote_options="permissive")


def _trace(trace_id: pa.ChunkedArray) -> pa.ChunkedArray | None:
    """``inputs.load``'s trace of each ``trace_id``: its text, "" for null, and a JSON string (as
    rmqspec's trace writers store extra columns) decoded: one with no quote, backslash or control
    character inside loses its quotes; None (Spark decodes it) for any other."""
    trace = pc.fill_null(pc.cast(trace_id, pa.string()), "")
    if pc.any(pc.match_substring_regex(trace, "[\\x00-\\x1f]")).as_py():
        return None
    quoted = pc.match_substring_regex(trace, '^".*"$')
    if not pc.any(quoted).as_py():
        return trace
    if pc.any(pc.match_substring_regex(trace, '^".*["\\\\].*"$')).as_py():
        return None
    return pc.if_else(quoted, pc.utf8_slice_codeunits(trace, 1, -1), trace)


def _pairs(rows: pa.Table) -> pa.Table:
    """The distinct (trace, topic, group) of ``rows``' deliver / consume rows with both."""
    mask = pc.and_(pc.is_in(rows["event"], value_set=pa.array(_CONSUMING)),
                   pc.and_(pc.is_valid(rows["topic"]), pc.is_valid(rows["group"])))
    return rows.filter(mask).select(["trace", "topic", "group"]).group_by(["trace", "topic", "group"]).aggregate([])


def local(day_files: Sequence[str], state: str | None, pulled_dir: Path) -> DayAgainstState | None:
    """``DayAgainstState`` from the driver (pyarrow), or None when ``by_spark`` must answer."""
    files = parquet_files(day_files)
    if files is None or sum(pq.ParquetFile(f).metadata.num_rows for f in files) > LOCAL_DAY_ROWS:
        return None
    day = valid_rows(files, ("msg_key", "topic", "group"))
    if day is None:
        return None
    per_trace = day.group_by("trace").aggregate([("seq", "min"), ("seq", "max"), ("seq", "count")])
    bounds = {t: (lo, hi, n) for t, lo, hi, n in zip(
        per_trace["trace"].to_pylist(), per_trace["seq_min"].to_pylist(), per_trace["seq_max"].to_pylist(),
        per_trace["seq_count"].to_pylist(), strict=True)}
    if state is None:
        return DayAgainstState(bounds, 0)
    closed_files = sorted(Path(state, "closed").glob("*.parquet"))
    carried = valid_rows(sorted(Path(state, "rows").glob("*.parquet")), ("topic", "group"))
    if carried is None:
        return None
    day_keys = day.filter(pc.is_valid(day["msg_key"])).select(["trace", "msg_key"])
    new_pairs = _pairs(day).join(_pairs(carried), ["trace", "topic", "group"], join_type="left anti")
    new_topics = new_pairs.select(["trace", "topic"])
    touched_parts = []
    for f in closed_files:  # the closed keys the day touches, a file (a day's tombstones) at a time
        closed = valid_rows([f], ("msg_key", "topic"))
        if closed is None:
            return None
        closed = closed.filter(pc.is_valid(closed["msg_key"]))
        touched_parts += [
            closed.join(day_keys, ["trace", "msg_key"], join_type="left semi").select(["trace", "msg_key"]),
            closed.join(new_topics, ["trace", "topic"], join_type="left semi").select(["trace", "msg_key"]),
        ]
    touched = pa.concat_tables(touched_parts).group_by(["trace", "msg_key"]).aggregate([]) if touched_parts else None
    if touched is None or not touched.num_rows:
        return DayAgainstState(bounds, 0)
    pulled = []
    for f in closed_files:  # every tombstone of those keys, as closed/ holds it, read whole where one is
        keys = valid_rows([f], ("msg_key",))
        assert keys is not None  # the same file was read above
        keys = keys.append_column("row", pa.array(np.arange(keys.num_rows, dtype=np.int64)))
        hit = keys.join(touched, ["trace", "msg_key"], join_type="left semi")["row"]  # touched: the hash side
        if len(hit):
            rows = valid_rows([f], None)  # the same valid rows in the same order, every column
            assert rows is not None
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

    per_trace = day.groupBy("trace").agg(F.min("seq").alias("first"), F.max("seq").alias("last"),
                                         F.count("*").alias("rows")).collect()
    bounds = {r["trace"]: (r["first"], r["last"], r["rows"]) for r in per_trace}
    if state is None:
        return DayAgainstState(bounds, 0)
    closed = read_state_files(spark, [f"{state}/closed"])
    carried = read_state_files(spark, [f"{state}/rows"])
    day_keys = day.filter(F.col("msg_key").isNotNull()).select("trace", "msg_key")
    pairs = lambda df: df.filter(  # noqa: E731
        F.col("event").isin(*_CONSUMING) & F.col("topic").isNotNull() & F.col("group").isNotNull()
    ).select("trace", "topic", "group").distinct()
    new_topics = pairs(day).join(pairs(carried), ["trace", "topic", "group"], "left_anti").select(
        "trace", "topic").distinct()
    # the closed keys the day touches (few: not the day's ~all-new msg_keys, which a distinct
    # would shuffle and hold), then every tombstone of them
    touched = closed.join(day_keys, ["trace", "msg_key"], "left_semi").select("trace", "msg_key").unionByName(
        closed.join(F.broadcast(new_topics), ["trace", "topic"], "left_semi").select("trace", "msg_key")
    ).distinct().persist()
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
