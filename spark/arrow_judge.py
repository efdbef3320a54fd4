"""What the audit's ``mapInArrow`` judges share: partitioning, the findings' schema, numpy helpers.

A judge gets one partition's rows as Arrow batches (every row of a key in that
partition: ``keyed``), judges them with numpy over integer codes of their
keys, and returns its findings as dicts of ``FINDING_COLUMNS``; ``judge``
turns such a function into a ``mapInArrow`` function.

Why numpy and not ``pyarrow.compute`` alone: the rules need segmented running
minima and maxima ("the last grant before this row in its queue"), which
``numpy.minimum.accumulate`` gives in one pass over a whole partition once
each segment is shifted out of its neighbours' range (``running``); pyarrow's
cumulative functions do not reset per segment.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import types as T

from rmqspec.spark.rules import KEYS, shuffled_by

__all__ = [
    "FINDINGS_ARROW",
    "NONE",
    "codes",
    "encoded",
    "event_in",
    "finding",
    "ints",
    "judge",
    "keyed",
    "not_null",
    "running",
    "segment_min",
    "sorted_segments",
    "starts",
]

_ARROW_TYPES = {T.StringType(): pa.string(), T.IntegerType(): pa.int32()}
FINDINGS_ARROW = pa.schema(
    [
        ("kind", pa.string()),
        ("code", pa.string()),
        ("seqs", pa.list_(pa.int64())),
        ("trace", pa.string()),
        *((name, _ARROW_TYPES[dtype]) for name, dtype in KEYS),
        ("reason", pa.string()),
    ]
)
NONE = np.iinfo(np.int64).max  # "no such row" in a min over seqs


def keyed(rows: DataFrame, *cols: str) -> DataFrame:
    """``rows`` with every value of ``cols`` in one partition: hash-partitioned by them, or,
    when the session runs on one shuffle partition (small inputs), all in one partition
    without a shuffle. (``mapInArrow`` has no required distribution: unlike a window, it
    gets no shuffle from the planner, and the input may be several files.)"""
    if rows.sparkSession.conf.get("spark.sql.shuffle.partitions") == "1":
        return rows.coalesce(1)
    return rows.transform(shuffled_by(*cols))


def judge(
    fn: Callable[[pa.Table], list[dict[str, Any]]],
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """A ``mapInArrow`` function: the partition's batches as one table, ``fn``'s findings out."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        got = list(batches)
        if not got:  # an empty partition
            return
        table = pa.Table.from_batches(got).combine_chunks()
        if table.num_rows:
            found = fn(table)
            if found:
                yield pa.RecordBatch.from_pylist(found, schema=FINDINGS_ARROW)

    return run


def finding(kind: str, code: str, seqs: list[int], trace: str, reason: str, **keys: Any) -> dict[str, Any]:
    """One finding as a dict of ``FINDING_COLUMNS`` (absent keys are null)."""
    out: dict[str, Any] = {"kind": kind, "code": code, "seqs": [int(s) for s in seqs], "trace": trace}
    for name, _dtype in KEYS:
        value = keys.get(name)
        out[name] = None if value is None else (int(value) if name == "queue_id" else value)
    out["reason"] = reason
    return out


def encoded(column: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, list[Any]]:
    """(integer codes of a column's values: equal values, equal codes, null -1; the value of each code)."""
    enc = pc.dictionary_encode(column)
    if isinstance(enc, pa.ChunkedArray):
        enc = enc.combine_chunks()
    return enc.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64), enc.dictionary.to_pylist()


def codes(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    return encoded(column)[0]


def ints(column: pa.ChunkedArray | pa.Array, null: int) -> np.ndarray:
    """An integer column as int64, nulls replaced by ``null``."""
    return column.fill_null(null).to_numpy().astype(np.int64)


def not_null(table: pa.Table, *names: str) -> np.ndarray:
    """Bool: the row has a value in every column of ``names``."""
    keep = np.ones(table.num_rows, dtype=bool)
    for name in names:
        keep &= ~table[name].is_null().to_numpy(zero_copy_only=False)
    return keep


def event_in(table: pa.Table, *names: str) -> np.ndarray:
    """Bool: the row's event is one of ``names``."""
    return pc.is_in(table["event"], value_set=pa.array(names)).to_numpy(zero_copy_only=False)


def starts(*keys: np.ndarray) -> np.ndarray:
    """Bool: the row starts a new segment of ``keys`` (rows sorted by them)."""
    n = len(keys[0])
    new = np.zeros(n, dtype=bool)
    if n:
        new[0] = True
        for k in keys:
            new[1:] |= k[1:] != k[:-1]
    return new


def sorted_segments(table: pa.Table, keep: np.ndarray, keys: tuple[str, ...]) -> tuple[pa.Table, np.ndarray]:
    """(the rows of ``keep`` sorted by ``keys`` then seq; bool: the row starts a new segment of
    ``keys``). Nulls are a value of their own."""
    t = table.filter(pa.array(keep))
    coded = [encoded(t[k])[0] if pa.types.is_string(t.schema.field(k).type) else ints(t[k], -1) for k in keys]
    order = np.lexsort((ints(t["seq"], 0), *reversed(coded)))
    return t.take(pa.array(order)), starts(*(c[order] for c in coded))


def segment_min(values: np.ndarray, new: np.ndarray) -> np.ndarray:
    """Per row, the min of ``values`` over its segment."""
    ids = np.cumsum(new) - 1
    return np.minimum.reduceat(values, np.flatnonzero(new))[ids] if len(values) else values


def running(values: np.ndarray, new: np.ndarray, *, largest: bool) -> np.ndarray:
    """Per row, the min (or max) of ``values`` over the rows before it in its segment.

    ``values`` are in [0, n] (n: none); the result is n for "no row before". One
    global ``accumulate``: each segment is shifted below (for max: above)
    every earlier one, so a running value never crosses a segment start.
    """
    n = len(values)
    if not n:
        return values
    span = n + 2
    ids = np.cumsum(new) - 1
    if largest:
        shifted = np.where(values < n, values, -1) + ids * span
        incl = np.maximum.accumulate(shifted) - ids * span
        incl = np.where(incl < 0, n, incl)
    else:
        shifted = values - ids * span
        incl = np.minimum.accumulate(shifted) + ids * span
    out = np.empty(n, dtype=np.int64)
    out[0] = n
    out[1:] = incl[:-1]
    out[new] = n
    return out
