"""Parquet traces: one file, or a directory of ``part-NNNNN.parquet`` parts.

``detail`` is a JSON string column. The partitioned writer streams: it keeps
one part open, rolls to the next after ``part_rows`` rows, and never holds
more than the batch it is given. Readers iterate row groups batch by batch
and validate each (``validate.validate_batch``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from rmqspec.traces.errors import Rejected, TraceReadError
from rmqspec.traces.schema import REQUIRED, SCHEMA
from rmqspec.traces.validate import validate_batch

DEFAULT_PART_ROWS = 1_000_000
DEFAULT_ROW_GROUP_ROWS = 131_072
PART_FORMAT = "part-{:05d}.parquet"


def open_parquet(path: Path) -> pq.ParquetFile:
    try:
        pf = pq.ParquetFile(path)
    except OSError as exc:
        raise TraceReadError(path, f"cannot open: {exc}") from exc
    except (pa.ArrowInvalid, pa.ArrowException) as exc:
        raise TraceReadError(path, f"not a readable Parquet file: {exc}") from exc
    missing = [c for c in REQUIRED if c not in pf.schema_arrow.names]
    if missing:
        raise TraceReadError(path, f"not a trace file: missing column(s) {', '.join(missing)}")
    return pf


def iter_parquet_batches(
    path: Path,
    batch_rows: int = 65_536,
    on_rejected: Callable[[Rejected], None] | None = None,
) -> Iterator[pa.RecordBatch]:
    pf = open_parquet(path)
    base = 0
    try:
        for raw in pf.iter_batches(batch_size=batch_rows):
            good, rejected = validate_batch(raw, lambda i: f"{path}#{i}", base)
            base += raw.num_rows
            if on_rejected:
                for r in rejected:
                    on_rejected(r)
            if good.num_rows:
                yield good
    except (OSError, pa.ArrowException) as exc:
        raise TraceReadError(path, f"corrupt Parquet data after row {base}: {exc}") from exc


def _align(table: pa.Table, schema: pa.Schema) -> pa.Table | None:
    """``table`` with ``schema``'s columns (missing → nulls) or None if it has new ones."""
    if table.schema.equals(schema, check_metadata=False):
        return table
    if any(name not in schema.names for name in table.schema.names):
        return None
    cols = []
    for field in schema:
        if field.name in table.schema.names:
            col = table.column(field.name)
            if col.type != field.type:
                try:
                    col = col.cast(field.type)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                    return None
            cols.append(col)
        else:
            cols.append(pa.nulls(table.num_rows, field.type))
    return pa.Table.from_arrays(cols, schema=schema)


class ParquetWriter:
    """A single Parquet file; the schema is fixed by the first batch."""

    def __init__(self, path: str | Path, *, row_group_rows: int = DEFAULT_ROW_GROUP_ROWS) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.row_group_rows = row_group_rows
        self._writer: pq.ParquetWriter | None = None
        self._schema: pa.Schema | None = None
        self.rows_written = 0

    def write_batch(self, batch: pa.RecordBatch | pa.Table) -> None:
        table = pa.Table.from_batches([batch]) if isinstance(batch, pa.RecordBatch) else batch
        if self._writer is None:
            self._schema = table.schema
            self._writer = pq.ParquetWriter(self.path, self._schema, compression="zstd")
        aligned = _align(table, self._schema)
        if aligned is None:
            raise ValueError(
                f"{self.path}: a batch has columns {table.schema.names} that do not fit the "
                f"file's schema {self._schema.names}; write a partitioned directory instead"
            )
        self._writer.write_table(aligned, row_group_size=self.row_group_rows)
        self.rows_written += aligned.num_rows

    def close(self) -> None:
        if self._writer is None:
            self._writer = pq.ParquetWriter(self.path, SCHEMA, compression="zstd")
        self._writer.close()

    def __enter__(self) -> ParquetWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class PartitionedParquetWriter:
    """A directory of ``part-NNNNN.parquet`` files of at most ``part_rows`` rows each."""

    def __init__(
        self,
        directory: str | Path,
        *,
        part_rows: int = DEFAULT_PART_ROWS,
        row_group_rows: int = DEFAULT_ROW_GROUP_ROWS,
    ) -> None:
        if part_rows <= 0:
            raise ValueError(f"part_rows must be positive, got {part_rows}")
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        for old in self.directory.glob("part-*.parquet"):
            old.unlink()
        self.part_rows = part_rows
        self.row_group_rows = min(row_group_rows, part_rows)
        self._part: ParquetWriter | None = None
        self._part_rows = 0
        self.parts: list[Path] = []
        self.rows_written = 0

    def _roll(self) -> None:
        if self._part is not None:
            self._part.close()
        path = self.directory / PART_FORMAT.format(len(self.parts))
        self.parts.append(path)
        self._part = ParquetWriter(path, row_group_rows=self.row_group_rows)
        self._part_rows = 0

    def write_batch(self, batch: pa.RecordBatch | pa.Table) -> None:
        table = pa.Table.from_batches([batch]) if isinstance(batch, pa.RecordBatch) else batch
        offset = 0
        while offset < table.num_rows:
            if self._part is None or self._part_rows >= self.part_rows:
                self._roll()
            assert self._part is not None
            if self._part._schema is not None and _align(table, self._part._schema) is None:
                self._roll()  # new extra columns: start a part with the new schema
            take = min(self.part_rows - self._part_rows, table.num_rows - offset)
            self._part.write_batch(table.slice(offset, take))
            self._part_rows += take
            self.rows_written += take
            offset += take

    def close(self) -> None:
        if self._part is None:
            self._roll()
        assert self._part is not None
        self._part.close()

    def __enter__(self) -> PartitionedParquetWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
