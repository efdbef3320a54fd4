"""Trace files read on the driver with pyarrow, validated exactly as ``inputs.load`` validates them.

Theory of operation
-------------------
An incremental run's driver-side steps (``spark/pull.py``, ``carry.collect_local``) read local
Parquet files without Spark. They must see the same valid rows, with the same ``trace``, as the
audit's Spark read (``inputs.load``: ``inputs._problem`` null; ``trace`` from ``trace_id``).
``valid_rows`` states that only where it can state it exactly — the audit columns present in
the types the validation expects (then no cast can fail: a row is invalid only for a null seq,
ts or event, or an unknown event), and trace ids that are plain or JSON strings without a quote,
backslash or control character inside (decoded as ``inputs.load`` decodes them) — and answers
None for anything else, so that the caller takes its Spark way. Pyarrow reads and filters;
nothing is hand-rolled but the validity mask and the id's decoding, which mirror ``inputs.load``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from rmqspec.model.events import EVENTS
from rmqspec.spark import inputs as inputs_mod

# The Arrow type of each audit column in which the row validation's cast can never fail.
_ARROW: dict[str, pa.DataType] = {
    name: {"LongType": pa.int64(), "IntegerType": pa.int32(), "StringType": pa.string()}[type(t).__name__]
    for name, t in inputs_mod.TYPES.items()
}
_TRACE_TYPES = (pa.string(), pa.int64(), pa.int32())


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
            trace = pa.repeat(pa.scalar("", pa.string()), t.num_rows)
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


__all__ = ["parquet_files", "valid_rows"]
