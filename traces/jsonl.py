"""JSONL traces: one JSON object per line, ``detail`` as a nested object.

Reading is two passes over the file: the first finds the extra column names
(so every batch has the same schema) and tells a trace from a non-trace file
(no line is a JSON object with ``seq``/``ts``/``event`` → ``TraceReadError``);
the second validates and yields batches. Blank lines are ignored; a bad line
becomes a ``Rejected`` at ``file:line``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TextIO

import pyarrow as pa

from rmqspec.traces.errors import Rejected, TraceReadError
from rmqspec.traces.validate import KNOWN, batch_rows, check_row, readable_seq, rows_to_batch


def _lines(path: Path) -> Iterator[tuple[int, str | None, str | None]]:
    """(line number, text or None, decode error or None) for each line."""
    try:
        fh = open(path, "rb")  # noqa: SIM115 - closed below, generator
    except OSError as exc:
        raise TraceReadError(path, f"cannot open: {exc.strerror or exc}") from exc
    with fh:
        try:
            for number, raw in enumerate(fh, start=1):
                try:
                    yield number, raw.decode("utf-8"), None
                except UnicodeDecodeError as exc:
                    yield number, None, f"not UTF-8 text ({exc.reason} at byte {exc.start})"
        except OSError as exc:
            raise TraceReadError(path, f"read failed: {exc.strerror or exc}") from exc


def _parse(text: str) -> tuple[Any, str | None]:
    try:
        return json.loads(text), None
    except ValueError as exc:
        msg = getattr(exc, "msg", str(exc))
        col = getattr(exc, "colno", None)
        return None, f"bad JSON: {msg}" + (f" (column {col})" if col else "")


def scan_extras(path: Path) -> list[str]:
    """Extra column names in first-seen order; raises if nothing looks like a trace row."""
    extras: dict[str, None] = {}
    looks_like_trace = False
    any_content = False
    for _number, text, _err in _lines(path):
        if text is None:
            any_content = True
            continue
        if not text.strip():
            continue
        any_content = True
        value, _ = _parse(text)
        if isinstance(value, dict):
            if not looks_like_trace and any(k in value for k in ("seq", "ts", "event")):
                looks_like_trace = True
            for key in value:
                if key not in KNOWN:
                    extras.setdefault(key, None)
    if any_content and not looks_like_trace:
        raise TraceReadError(
            path, "not a JSONL trace: no line is a JSON object with seq/ts/event"
        )
    return list(extras)


def iter_jsonl_batches(
    path: Path,
    batch_rows_n: int = 65_536,
    on_rejected: Callable[[Rejected], None] | None = None,
) -> Iterator[pa.RecordBatch]:
    extras = scan_extras(path)
    rows: list[dict[str, Any]] = []
    for number, text, err in _lines(path):
        where = f"{path}:{number}"
        if text is None:
            if on_rejected:
                on_rejected(Rejected(where, None, err or "unreadable line"))
            continue
        if not text.strip():
            continue
        value, err = _parse(text)
        if err is not None:
            if on_rejected:
                on_rejected(Rejected(where, None, err))
            continue
        if not isinstance(value, dict):
            if on_rejected:
                on_rejected(Rejected(where, None, f"not a JSON object ({type(value).__name__})"))
            continue
        reason = check_row(value)
        if reason is not None:
            if on_rejected:
                on_rejected(Rejected(where, readable_seq(value), reason))
            continue
        rows.append(value)
        if len(rows) >= batch_rows_n:
            yield rows_to_batch(rows, extras)
            rows = []
    if rows:
        yield rows_to_batch(rows, extras)


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.hex()
    if hasattr(value, "isoformat"):
        return value.isoformat()
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")


def dump_row(row: dict[str, Any]) -> str:
    """One JSONL line (no newline): nulls omitted, ``detail`` nested."""
    return json.dumps(
        {k: v for k, v in row.items() if v is not None},
        separators=(",", ":"),
        default=_json_default,
        ensure_ascii=False,
    )


class JsonlWriter:
    """Writes rows / batches / events as JSONL, buffered by the OS file object."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh: TextIO = open(self.path, "w", encoding="utf-8")  # noqa: SIM115
        self.rows_written = 0

    def write_rows(self, rows: Iterable[dict[str, Any]]) -> None:
        fh = self._fh
        n = 0
        for row in rows:
            fh.write(dump_row(row))
            fh.write("\n")
            n += 1
        self.rows_written += n

    def write_batch(self, batch: pa.RecordBatch | pa.Table) -> None:
        batches = batch.to_batches() if isinstance(batch, pa.Table) else [batch]
        for b in batches:
            self.write_rows(batch_rows(b))

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.close()

    def __enter__(self) -> JsonlWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
