"""The ``checkpoint`` file (RocketMQ ``StoreCheckpoint``): 4096 bytes, three i64 timestamps.

Layout (big-endian): physicMsgTimestamp @0 (storeTs of the last record flushed
in the CommitLog), logicsMsgTimestamp @8 (storeTs of the last record whose
consume-queue unit was flushed), indexMsgTimestamp @16 (0: rmqspec builds no
index files; the real store also leaves 0 until an index file fills up, so a
broker with ``messageIndexSafe`` recovers from the first CommitLog file). The
rest is zero.

Abnormal recovery starts re-dispatching at the last CommitLog file whose first
record's storeTs ≤ ``min_timestamp()`` = min(physic, logics) − 3000 ms (floored
at 0), as RocketMQ does.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import attrs

from rmqspec.impl.mappedfile import StoreError

CHECKPOINT_SIZE = 4096
MARGIN_MS = 3000
_LAYOUT = struct.Struct(">qqq")


@attrs.frozen
class Checkpoint:
    physic_msg_timestamp: int = 0
    logics_msg_timestamp: int = 0
    index_msg_timestamp: int = 0

    def min_timestamp(self) -> int:
        """RocketMQ ``getMinTimestamp``: min(physic, logics) − 3 s, at least 0."""
        return max(0, min(self.physic_msg_timestamp, self.logics_msg_timestamp) - MARGIN_MS)

    def encode(self) -> bytes:
        head = _LAYOUT.pack(self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp)
        return head + bytes(CHECKPOINT_SIZE - len(head))


def read_checkpoint(path: Path) -> Checkpoint:
    """Read a checkpoint file; a missing file is all zeros. Raises ``StoreError`` if too short."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return Checkpoint()
    except OSError as exc:
        raise StoreError(path, None, f"cannot read: {exc.strerror}") from exc
    if len(data) < _LAYOUT.size:
        raise StoreError(path, len(data), f"checkpoint has {len(data)} bytes, expected {CHECKPOINT_SIZE}")
    return Checkpoint(*_LAYOUT.unpack_from(data, 0))


def write_checkpoint(path: Path, checkpoint: Checkpoint) -> None:
    """Overwrite the checkpoint in place and fsync it (RocketMQ forces its mapped buffer)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, checkpoint.encode(), 0)
        os.fsync(fd)
    finally:
        os.close(fd)
