"""Errors and per-row findings of trace readers.

- ``TraceReadError``: the input as a whole cannot be read (missing file,
  unreadable, corrupt Parquet, not a trace at all). Names the path and why.
- ``Rejected``: one row that was skipped, with where it was (``file:line``
  for JSONL, ``file#row`` for Parquet), its ``seq`` when readable, and why.
  Readers collect these and carry on; they are data, not exceptions.
"""

from __future__ import annotations

import attrs


class TraceReadError(Exception):
    """A trace input cannot be read at all; ``path`` and ``reason`` say why."""

    def __init__(self, path: object, reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")


@attrs.frozen
class Rejected:
    """One skipped row: ``position`` (file:line or file#row), ``seq`` if readable, ``reason``."""

    position: str
    seq: int | None
    reason: str

    def __str__(self) -> str:
        seq = "?" if self.seq is None else str(self.seq)
        return f"{self.position} (seq {seq}): {self.reason}"
