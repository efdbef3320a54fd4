"""Recorders that write traces as they are emitted (SPEC §8).

``JsonlRecorder`` and ``ParquetRecorder`` implement
``rmqspec.model.events.Recorder``: they assign ``seq`` (0, 1, 2, …), keep up
to ``buffer_rows`` events in memory and write them out when the buffer is
full and on ``close()`` (also a context manager). A ``ParquetRecorder`` on a
path without ``.parquet`` writes a partitioned directory. ``events_to_table``
and ``events_to_jsonl`` convert a ``ListRecorder``'s events after the fact.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from rmqspec.model.events import TraceEvent
from rmqspec.traces.io import event_to_row, open_writer, rows_to_table
from rmqspec.traces.jsonl import JsonlWriter, dump_row
from rmqspec.traces.parquet import DEFAULT_PART_ROWS


class _Buffered(abc.ABC):
    def __init__(self, buffer_rows: int) -> None:
        if buffer_rows <= 0:
            raise ValueError(f"buffer_rows must be positive, got {buffer_rows}")
        self.buffer_rows = buffer_rows
        self._buffer: list[TraceEvent] = []
        self._seq = 0
        self.closed = False

    def emit(self, event: str, ts: int, **fields: Any) -> TraceEvent:
        if self.closed:
            raise RuntimeError(f"{type(self).__name__} is closed; cannot record {event!r}")
        ev = TraceEvent(seq=self._seq, ts=ts, event=event, **fields)
        self._seq += 1
        self._buffer.append(ev)
        if len(self._buffer) >= self.buffer_rows:
            self.flush()
        return ev

    @property
    def count(self) -> int:
        return self._seq

    def flush(self) -> None:
        if self._buffer:
            self._write(self._buffer)
            self._buffer = []

    @abc.abstractmethod
    def _write(self, events: list[TraceEvent]) -> None:
        """Write a batch of events to the backing file."""

    def close(self) -> None:
        if self.closed:
            return
        self.flush()
        self._close()
        self.closed = True

    @abc.abstractmethod
    def _close(self) -> None:
        """Close the backing file."""

    def __enter__(self) -> _Buffered:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class JsonlRecorder(_Buffered):
    """Records to a JSONL file; ``extra`` columns (e.g. ``trace_id``) are added to every row."""

    def __init__(
        self, path: str | Path, *, buffer_rows: int = 4096, extra: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(buffer_rows)
        self.path = Path(path)
        self.extra = dict(extra or {})
        self._writer = JsonlWriter(self.path)

    def _write(self, events: list[TraceEvent]) -> None:
        self._writer.write_rows({**event_to_row(e), **self.extra} for e in events)

    def _close(self) -> None:
        self._writer.close()


class ParquetRecorder(_Buffered):
    """Records to one Parquet file (``*.parquet``) or a partitioned directory."""

    def __init__(
        self,
        path: str | Path,
        *,
        buffer_rows: int = 65_536,
        part_rows: int = DEFAULT_PART_ROWS,
    ) -> None:
        super().__init__(buffer_rows)
        self.path = Path(path)
        self._writer = open_writer(self.path, "parquet", part_rows=part_rows)

    def _write(self, events: list[TraceEvent]) -> None:
        self._writer.write_batch(events_to_table(events))

    def _close(self) -> None:
        self._writer.close()


def open_recorder(path: str | Path, **kw: Any) -> JsonlRecorder | ParquetRecorder:
    """A JSONL recorder for ``*.jsonl``/``*.ndjson``/``*.json``, else a Parquet recorder."""
    p = Path(path)
    if p.suffix in (".jsonl", ".ndjson", ".json"):
        return JsonlRecorder(p, **kw)
    return ParquetRecorder(p, **kw)


def events_to_table(events: Iterable[TraceEvent]) -> pa.Table:
    """``TraceEvent``s → an Arrow table of ``SCHEMA``."""
    return rows_to_table([event_to_row(e) for e in events])


def events_to_jsonl(events: Iterable[TraceEvent], path: str | Path) -> int:
    """Write ``events`` as JSONL to ``path``; returns the number written."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with open(p, "w", encoding="utf-8") as fh:
        for e in events:
            fh.write(dump_row(event_to_row(e)))
            fh.write("\n")
            n += 1
    return n
