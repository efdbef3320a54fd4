"""Row validation against the trace schema (SPEC §8).

A row is valid when ``seq``, ``ts`` and ``event`` are present and non-null,
``event`` is a known event name, every schema column has its schema type
(integers are JSON/Python ints — not bools, not floats; int32 columns are in
range; strings are strings) and ``detail`` is a JSON object (a mapping, or a
string that decodes to one). Unknown columns are extras and not checked.

``check_row`` returns the reason a row is bad (one line) or ``None``; it also
normalises ``detail`` to a mapping in place. ``validate_batch`` does the same
for an Arrow record batch with vectorised kernels, falling back to
``check_row`` per row only when a column cannot be cast to its schema type.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from rmqspec.traces.errors import Rejected
from rmqspec.traces.schema import COLUMNS, EVENT_NAMES, EVENTS, REQUIRED, SCHEMA

INT64_RANGE = (-(2**63), 2**63 - 1)
INT32_RANGE = (-(2**31), 2**31 - 1)

INT_COLUMNS: dict[str, tuple[int, int]] = {}
STR_COLUMNS: set[str] = set()
for _f in SCHEMA:
    if _f.name == "detail":
        continue
    if pa.types.is_int64(_f.type):
        INT_COLUMNS[_f.name] = INT64_RANGE
    elif pa.types.is_int32(_f.type):
        INT_COLUMNS[_f.name] = INT32_RANGE
    else:
        STR_COLUMNS.add(_f.name)
KNOWN: frozenset[str] = frozenset(COLUMNS)
_EVENT_SET = pa.array(list(EVENTS), pa.string())


def _describe(value: Any) -> str:
    text = repr(value)
    if len(text) > 40:
        text = text[:37] + "..."
    return f"{type(value).__name__} {text}"


def readable_seq(row: dict[str, Any]) -> int | None:
    seq = row.get("seq")
    return seq if type(seq) is int else None


def check_row(row: dict[str, Any]) -> str | None:
    """Why ``row`` is not a valid trace row, or ``None``; decodes a string ``detail``."""
    for name in REQUIRED:
        if row.get(name) is None:
            return f"missing required field {name!r}"
    for name, (lo, hi) in INT_COLUMNS.items():
        value = row.get(name)
        if value is None:
            continue
        if type(value) is not int:
            return f"field {name!r}: expected an integer, got {_describe(value)}"
        if not lo <= value <= hi:
            return f"field {name!r}: {value} is out of range"
    for name in STR_COLUMNS:
        value = row.get(name)
        if value is not None and type(value) is not str:
            return f"field {name!r}: expected a string, got {_describe(value)}"
    if row["event"] not in EVENT_NAMES:
        return f"unknown event {row['event']!r}"
    detail = row.get("detail")
    if detail is not None:
        if isinstance(detail, str):
            try:
                detail = json.loads(detail)
            except ValueError as exc:
                return f"field 'detail': not valid JSON ({exc.msg})"
            row["detail"] = detail
        if not isinstance(detail, dict):
            return f"field 'detail': expected a JSON object, got {_describe(detail)}"
    return None


def rows_to_batch(rows: list[dict[str, Any]], extras: list[str]) -> pa.RecordBatch:
    """Valid rows (``detail`` as mapping or None) → a batch of ``SCHEMA`` + extras.

    Extras are JSON-encoded into string columns tagged ``rmqspec.extra=json``
    so a JSONL → Parquet → JSONL round trip restores the original values.
    """
    arrays = []
    for field in SCHEMA:
        name = field.name
        if name == "detail":
            values = [
                None if r.get("detail") is None else json.dumps(r["detail"], sort_keys=True)
                for r in rows
            ]
        else:
            values = [r.get(name) for r in rows]
        arrays.append(pa.array(values, field.type))
    fields = list(SCHEMA)
    for name in extras:
        values = [None if r.get(name) is None else json.dumps(r[name]) for r in rows]
        arrays.append(pa.array(values, pa.string()))
        fields.append(pa.field(name, pa.string(), metadata={"rmqspec.extra": "json"}))
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


def validate_batch(
    batch: pa.RecordBatch,
    position: Callable[[int], str],
    row_base: int = 0,
) -> tuple[pa.RecordBatch, list[Rejected]]:
    """Split ``batch`` into (valid rows as ``SCHEMA`` + extras, rejections).

    ``position(i)`` names row ``row_base + i`` for a rejection. Columns of the
    wrong Arrow type are cast when every value fits; otherwise the batch is
    checked row by row with ``check_row``.
    """
    names = batch.schema.names
    arrays: list[pa.Array] = []
    for field in SCHEMA:
        if field.name not in names:
            arrays.append(pa.nulls(batch.num_rows, field.type))
            continue
        col = batch.column(names.index(field.name))
        if col.type != field.type:
            try:
                col = pc.cast(col, field.type, safe=True)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                return _validate_rows(batch, position, row_base)
        arrays.append(col)
    extra_fields = [f for f in batch.schema if f.name not in KNOWN]
    extra_arrays = [batch.column(names.index(f.name)) for f in extra_fields]
    seq, ts, event = arrays[0], arrays[1], arrays[2]
    bad = pc.or_(pc.or_(pc.is_null(seq), pc.is_null(ts)), pc.is_null(event))
    bad = pc.or_(bad, pc.invert(pc.fill_null(pc.is_in(event, value_set=_EVENT_SET), False)))
    detail = arrays[-1]
    bad_detail: list[int] = []
    if detail.null_count < len(detail):
        for i, text in enumerate(detail.to_pylist()):
            if text is None:
                continue
            try:
                ok = isinstance(json.loads(text), dict)
            except ValueError:
                ok = False
            if not ok:
                bad_detail.append(i)
    if bad_detail:
        mask = [False] * batch.num_rows
        for i in bad_detail:
            mask[i] = True
        bad = pc.or_(bad, pa.array(mask))
    out = pa.RecordBatch.from_arrays(
        arrays + extra_arrays, schema=pa.schema(list(SCHEMA) + extra_fields)
    )
    if not pc.any(bad).as_py():
        return out, []
    rejected: list[Rejected] = []
    indices = pc.indices_nonzero(bad).to_pylist()
    for i in indices:
        row = {f.name: arrays[k][i].as_py() for k, f in enumerate(SCHEMA)}
        reason = check_row(row) or "field 'detail': expected a JSON object"
        rejected.append(Rejected(position(row_base + i), readable_seq(row), reason))
    return out.filter(pc.invert(bad)), rejected


def _validate_rows(
    batch: pa.RecordBatch, position: Callable[[int], str], row_base: int
) -> tuple[pa.RecordBatch, list[Rejected]]:
    extra_fields = [f for f in batch.schema if f.name not in KNOWN]
    good: list[dict[str, Any]] = []
    rejected: list[Rejected] = []
    for i, row in enumerate(batch.to_pylist()):
        reason = check_row(row)
        if reason is None:
            good.append(row)
        else:
            rejected.append(Rejected(position(row_base + i), readable_seq(row), reason))
    known = rows_to_batch(good, [])
    arrays = list(known.columns)
    for f in extra_fields:
        values = [r.get(f.name) for r in good]
        arrays.append(pa.array(values, f.type))
    return (
        pa.RecordBatch.from_arrays(arrays, schema=pa.schema(list(SCHEMA) + extra_fields)),
        rejected,
    )


def batch_rows(batch: pa.RecordBatch) -> Iterator[dict[str, Any]]:
    """Rows of a validated batch as dicts: ``detail`` and JSON-tagged extras decoded."""
    json_cols = [
        f.name
        for f in batch.schema
        if f.name == "detail" or (f.metadata or {}).get(b"rmqspec.extra") == b"json"
    ]
    for row in batch.to_pylist():
        for name in json_cols:
            value = row.get(name)
            if value is not None:
                row[name] = json.loads(value)
        yield row
