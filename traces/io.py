"""Opening traces for reading and writing, whatever their format.

``open_trace(path)`` detects the format (a directory of parts, ``.parquet``,
``.jsonl``/``.ndjson``/``.json``, else by sniffing the ``PAR1`` magic) and
returns a ``TraceSource`` that yields validated Arrow batches, row dicts or
``TraceEvent``s and collects every rejected row in ``source.rejected`` (or
passes it to ``on_rejected``). ``open_writer(path)`` picks a writer the same
way: ``.jsonl`` → JSONL, ``.parquet`` → one Parquet file, anything else → a
partitioned Parquet directory.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Protocol

import attrs
import pyarrow as pa

from rmqspec.model.events import TraceEvent
from rmqspec.traces.errors import Rejected, TraceReadError
from rmqspec.traces.jsonl import JsonlWriter, iter_jsonl_batches
from rmqspec.traces.parquet import (
    DEFAULT_PART_ROWS,
    DEFAULT_ROW_GROUP_ROWS,
    ParquetWriter,
    PartitionedParquetWriter,
    iter_parquet_batches,
    open_parquet,
)
from rmqspec.traces.schema import COLUMNS
from rmqspec.traces.validate import KNOWN, batch_rows, rows_to_batch

JSONL_SUFFIXES = (".jsonl", ".ndjson", ".json")
FORMATS = ("jsonl", "parquet")


def detect_format(path: Path) -> str:
    """``jsonl`` or ``parquet`` for an existing file."""
    if path.suffix == ".parquet":
        return "parquet"
    if path.suffix in JSONL_SUFFIXES:
        return "jsonl"
    try:
        with open(path, "rb") as fh:
            magic = fh.read(4)
    except OSError as exc:
        raise TraceReadError(path, f"cannot open: {exc.strerror or exc}") from exc
    return "parquet" if magic == b"PAR1" else "jsonl"


def trace_files(path: str | Path) -> tuple[str, list[Path]]:
    """(format, files) of a trace path; raises ``TraceReadError`` if there is none."""
    p = Path(path)
    if not p.exists():
        raise TraceReadError(p, "no such file or directory")
    if p.is_dir():
        visible = [f for f in sorted(p.iterdir()) if f.is_file() and f.name[0] not in "._"]
        parquet = [f for f in visible if f.suffix == ".parquet"]
        if parquet:
            return "parquet", parquet
        jsonl = [f for f in visible if f.suffix in JSONL_SUFFIXES]
        if jsonl:
            return "jsonl", jsonl
        raise TraceReadError(p, "directory holds no trace files (*.parquet, *.jsonl)")
    if not p.is_file():
        raise TraceReadError(p, "not a regular file")
    return detect_format(p), [p]


@attrs.define
class TraceSource:
    """A readable trace: ``files`` in order, one ``format``; ``rejected`` fills as you read."""

    path: Path
    format: str
    files: list[Path]
    rejected: list[Rejected] = attrs.field(factory=list)

    def check(self) -> None:
        """Fail early (``TraceReadError``) if a Parquet file is unreadable or not a trace."""
        if self.format == "parquet":
            for f in self.files:
                open_parquet(f)

    def iter_batches(
        self,
        batch_rows_n: int = 65_536,
        on_rejected: Callable[[Rejected], None] | None = None,
    ) -> Iterator[pa.RecordBatch]:
        """Validated batches (``SCHEMA`` columns first, then extras)."""

        def sink(r: Rejected) -> None:
            self.rejected.append(r)
            if on_rejected is not None:
                on_rejected(r)

        for f in self.files:
            if self.format == "parquet":
                yield from iter_parquet_batches(f, batch_rows_n, sink)
            else:
                yield from iter_jsonl_batches(f, batch_rows_n, sink)

    def iter_rows(self, **kw: Any) -> Iterator[dict[str, Any]]:
        """Rows as dicts (``detail`` a mapping, extras kept)."""
        for batch in self.iter_batches(**kw):
            yield from batch_rows(batch)

    def iter_events(self, **kw: Any) -> Iterator[TraceEvent]:
        """Rows as ``TraceEvent`` (extras dropped)."""
        for row in self.iter_rows(**kw):
            yield row_to_event(row)

    def read_table(self, **kw: Any) -> pa.Table:
        batches = list(self.iter_batches(**kw))
        if not batches:
            return empty_table()
        schemas = {b.schema for b in batches}
        if len(schemas) == 1:
            return pa.Table.from_batches(batches)
        return pa.concat_tables(
            [pa.Table.from_batches([b]) for b in batches], promote_options="permissive"
        )


def empty_table() -> pa.Table:
    return pa.Table.from_batches([rows_to_batch([], [])])


def open_trace(path: str | Path, format: str | None = None) -> TraceSource:
    """A ``TraceSource`` for ``path`` (file or directory); ``format`` forces one."""
    fmt, files = trace_files(path)
    if format is not None:
        if format not in FORMATS:
            raise ValueError(f"unknown trace format {format!r}; expected one of {FORMATS}")
        fmt = format
    source = TraceSource(Path(path), fmt, files)
    source.check()
    return source


def read_table(path: str | Path) -> tuple[pa.Table, list[Rejected]]:
    source = open_trace(path)
    table = source.read_table()
    return table, source.rejected


def read_events(path: str | Path) -> tuple[list[TraceEvent], list[Rejected]]:
    source = open_trace(path)
    events = list(source.iter_events())
    return events, source.rejected


def row_to_event(row: dict[str, Any]) -> TraceEvent:
    return TraceEvent(**{k: row.get(k) for k in COLUMNS})


def event_to_row(event: TraceEvent) -> dict[str, Any]:
    row = event.as_row()
    if row.get("detail") is not None:
        row["detail"] = dict(row["detail"])
    return row


def rows_to_table(rows: list[dict[str, Any]]) -> pa.Table:
    extras: dict[str, None] = {}
    for row in rows:
        for key in row:
            if key not in KNOWN:
                extras.setdefault(key, None)
    return pa.Table.from_batches([rows_to_batch(rows, list(extras))])


class TraceWriter(Protocol):
    rows_written: int

    def write_batch(self, batch: pa.RecordBatch | pa.Table) -> None: ...

    def close(self) -> None: ...


def writer_format(path: str | Path, format: str | None = None) -> str:
    """``jsonl``, ``parquet`` (one file) or ``parts`` (a directory) for an output path."""
    p = Path(path)
    if format == "jsonl" or (format is None and p.suffix in JSONL_SUFFIXES):
        return "jsonl"
    if format not in (None, "parquet"):
        raise ValueError(f"unknown trace format {format!r}; expected one of {FORMATS}")
    if p.suffix == ".parquet":
        return "parquet"
    return "parts"


def open_writer(
    path: str | Path,
    format: str | None = None,
    *,
    part_rows: int = DEFAULT_PART_ROWS,
    row_group_rows: int = DEFAULT_ROW_GROUP_ROWS,
) -> JsonlWriter | ParquetWriter | PartitionedParquetWriter:
    kind = writer_format(path, format)
    if kind == "jsonl":
        return JsonlWriter(path)
    if kind == "parquet":
        return ParquetWriter(path, row_group_rows=row_group_rows)
    return PartitionedParquetWriter(path, part_rows=part_rows, row_group_rows=row_group_rows)


def truth_path(path: str | Path) -> Path:
    """Where the ground truth of a generated trace lives."""
    kind = writer_format(path) if not Path(path).is_dir() else "parts"
    p = Path(path)
    return p / "_truth.json" if kind == "parts" else p.with_name(p.name + ".truth.json")


def write_events(events: Iterable[TraceEvent], path: str | Path, format: str | None = None) -> int:
    rows = [event_to_row(e) for e in events]
    with open_writer(path, format) as w:
        w.write_batch(rows_to_table(rows))
    return len(rows)


def convert(
    src: str | Path,
    dst: str | Path,
    format: str | None = None,
    *,
    part_rows: int = DEFAULT_PART_ROWS,
    on_progress: Callable[[int, int | None], None] | None = None,
) -> tuple[int, list[Rejected]]:
    """Copy ``src`` to ``dst`` (any format to any), skipping rejected rows; (rows, rejected)."""
    source = open_trace(src)
    n = 0
    with open_writer(dst, format, part_rows=part_rows) as w:
        for batch in source.iter_batches():
            w.write_batch(batch)
            n += batch.num_rows
            if on_progress:
                on_progress(n, None)
    return n, source.rejected
