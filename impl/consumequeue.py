"""Consume queues: one per (topic, queue id), 20-byte units pointing into the CommitLog.

Theory of operation
-------------------
A unit is ``[commitlog offset i64][size i32][tagsCode i64]`` (RocketMQ
``ConsumeQueue``); unit ``k`` of a queue sits at byte ``20·k`` of the queue's
files, so a queue offset is a unit index. Files live in
``consumequeue/{topic}/{queue_id}/`` and hold ``file_size / 20`` units.

``put(queue_offset, commitlog_offset, size, tags_code)`` follows
``putMessagePositionInfo``: a unit whose record ends at or before the queue's
``max_physic_offset`` was already built (skipped, as recovery re-dispatches);
a unit behind the write position is skipped; a unit ahead of it would leave a
hole and is refused with ``StoreError`` (RocketMQ logs and writes it at the
wrong place; rmqspec refuses, so a gap can never be created silently).

A lookup by time (``offset_by_time``) reads each kept file's mtime, which ``put`` sets to the store time of
the record of the unit it writes, and the units from the file's mapping.

Recovery (``recover``) keeps the leading run of valid units (offset ≥ 0 and
size > 0), and ``truncate_physical(offset)`` drops every unit pointing at or
past a CommitLog offset, from the tail.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

from rmqspec.impl.mappedfile import MappedFileQueue, StoreError
from rmqspec.model.retention import consume_queue_files_to_delete, corrected_min
from rmqspec.model.timesearch import QueueFile, offset_by_time

UNIT_SIZE = 20
DEFAULT_CQ_FILE_SIZE = 300_000 * UNIT_SIZE
_UNIT = struct.Struct(">qiq")
# fillPreBlank: the units before the first real one in a queue's first file.
PRE_BLANK_SIZE = 0x7FFFFFFF


@attrs.frozen
class CQUnit:
    """One consume-queue entry; ``queue_offset`` is its index in the queue."""

    queue_offset: int
    commitlog_offset: int
    size: int
    tags_code: int


def pack_unit(commitlog_offset: int, size: int, tags_code: int) -> bytes:
    return _UNIT.pack(commitlog_offset, size, tags_code)


def unpack_unit(buf: bytes | memoryview, pos: int) -> tuple[int, int, int]:
    return _UNIT.unpack_from(buf, pos)


class _MappedUnits(Sequence[tuple[int, int]]):
    """The ``(commitlog offset, size)`` of a file's written units, read from its mapping as the search probes."""

    def __init__(self, mm: Any, wrote: int) -> None:
        self.mm, self.count = mm, wrote // UNIT_SIZE

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, k: Any) -> Any:
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(self.count))]
        if not 0 <= k < self.count:
            raise IndexError(k)
        offset, size, _tags = _UNIT.unpack_from(self.mm, k * UNIT_SIZE)
        return offset, size


class ConsumeQueue:
    """The consume queue of one (topic, queue id)."""

    def __init__(self, directory: Path, topic: str, queue_id: int, file_size: int) -> None:
        if file_size % UNIT_SIZE:
            raise ValueError(f"consume queue file size {file_size} is not a multiple of {UNIT_SIZE}")
        self.topic = topic
        self.queue_id = queue_id
        self.files = MappedFileQueue(directory, file_size)
        self.max_physic_offset = -1  # end of the last unit's record (RocketMQ maxPhysicOffset)
        self.min_logic = 0  # the queue's min offset (minLogicOffset / 20): retention moves it

    # -- offsets ------------------------------------------------------------------------------

    @property
    def min_offset(self) -> int:
        return self.files.min_offset // UNIT_SIZE

    @property
    def max_offset(self) -> int:
        """One past the last unit (the next queue offset to assign)."""
        return self.files.max_offset // UNIT_SIZE

    # -- write ---------------------------------------------------------------------------------

    def put(self, queue_offset: int, commitlog_offset: int, size: int, tags_code: int,
            store_ts: int | None = None) -> bool:
        """Append one unit; False when it was already built (a repeated dispatch). With ``store_ts`` (the
        record's store time) the file's mtime is set to it: the store's clock is injected, and lookups by
        time read a file's last-modified time (``offset_by_time``)."""
        if commitlog_offset + size <= self.max_physic_offset:
            return False
        expected = queue_offset * UNIT_SIZE
        current = self.files.max_offset
        if expected < current:
            return False
        if expected > current:
            raise StoreError(
                self.files.dir,
                current,
                f"queue offset {queue_offset} of commitlog record {commitlog_offset} leaves a gap "
                f"after queue offset {current // UNIT_SIZE - 1}",
            )
        last = self.files.last()
        if last is None or last.remaining < UNIT_SIZE:
            last = self.files.create_next(current if last is None else None)
        last.append(_UNIT.pack(commitlog_offset, size, tags_code))
        self.max_physic_offset = commitlog_offset + size
        if store_ts is not None:
            os.utime(last.path, ns=(store_ts * 1_000_000, store_ts * 1_000_000))
        return True

    def redispatch(self, queue_offset: int, commitlog_offset: int, size: int, tags_code: int,
                   store_ts: int | None = None, *, commitlog_min: int | None = None) -> bool:
        """Recovery's dispatch: keep unit ``queue_offset`` if it is exactly this one, else rewrite from it.

        A unit that exists but differs (torn by a power cut, or left from a
        CommitLog that recovery cut shorter) is dropped with every unit after
        it; then the unit is appended. True when it was written.

        ``commitlog_min`` is given when recovery reads the CommitLog from its first kept record: a unit
        ahead of the queue's end is then lawful when every unit the queue keeps points below that min —
        the records of the missing units were in files retention deleted, and a power loss took their
        units. The missing units are written as pre-blanks (``fillPreBlank``), below the queue's min
        offset (4.9.8 writes the unit at the queue's end when the file survived empty: docs/fidelity.md R7).
        """
        if commitlog_min is not None:
            self._blank_gap(queue_offset, commitlog_min)
        at = queue_offset * UNIT_SIZE
        if self.files.min_offset <= at < self.files.max_offset:
            if self._unit_at(at) == (commitlog_offset, size, tags_code):
                return False
            self.files.truncate_from(at)
            self.files.set_end(at)
            self.max_physic_offset = -1
            if at > self.files.min_offset:
                clo, prev_size, _tags = self._unit_at(at - UNIT_SIZE)
                self.max_physic_offset = clo + prev_size
        return self.put(queue_offset, commitlog_offset, size, tags_code, store_ts)

    def _blank_gap(self, queue_offset: int, commitlog_min: int) -> None:
        """Pre-blank the units before ``queue_offset`` that retention and a power loss both took (redispatch)."""
        expected = queue_offset * UNIT_SIZE
        if expected <= self.files.max_offset or commitlog_min <= 0 or self.max_physic_offset > commitlog_min:
            return
        if not self.files.files:  # the queue's first file holds the unit (getLastMappedFile + fillPreBlank)
            self.files.create_next(expected - expected % self.files.file_size)
        blank = _UNIT.pack(0, PRE_BLANK_SIZE, 0)
        while self.files.max_offset < expected:
            last = self.files.last()
            assert last is not None
            if last.remaining < UNIT_SIZE:
                last = self.files.create_next()
            last.append(blank * (min(last.remaining, expected - self.files.max_offset) // UNIT_SIZE))

    # -- read ----------------------------------------------------------------------------------

    def units(self, start: int, max_units: int) -> list[CQUnit]:
        """Up to ``max_units`` units from queue offset ``start`` (fewer at the end)."""
        out: list[CQUnit] = []
        start = max(start, self.min_offset)
        stop = min(self.max_offset, start + max(max_units, 0))
        offset = start
        while offset < stop:
            f = self.files.find(offset * UNIT_SIZE)
            if f is None:
                break
            pos = offset * UNIT_SIZE - f.start
            n = min(stop - offset, (f.wrote - pos) // UNIT_SIZE)
            if n <= 0:
                break
            mm = f.mm
            for k in range(n):
                clo, size, tags = _UNIT.unpack_from(mm, pos + k * UNIT_SIZE)
                out.append(CQUnit(offset + k, clo, size, tags))
            offset += n
        return out

    def offset_by_time(self, timestamp: int, commitlog_min: int, store_ts_at: Callable[[int, int], int]) -> int:
        """getOffsetInQueueByTime over this queue's files (``model/timesearch.py``): each kept file with its
        mtime (milliseconds) and the units written in it, read from its mapping."""
        files = [QueueFile(f.start // UNIT_SIZE, os.stat(f.path).st_mtime_ns // 1_000_000, _MappedUnits(f.mm, f.wrote))
                 for f in self.files.files]
        return offset_by_time(files, timestamp, self.min_logic, commitlog_min, store_ts_at)

    # -- recovery ----------------------------------------------------------------------------

    def recover(self) -> None:
        """Keep the leading run of valid units (``ConsumeQueue.recover``), read from the first file.

        RocketMQ reads from the third file from the end and trusts the files before it: after a
        power loss that took a queue's first files' units (the consume queues are flushed
        asynchronously, even under SYNC_FLUSH), its queue keeps their offsets as zero units and
        the re-dispatch puts the surviving records' units in the wrong places — durable messages
        become unreadable (docs/fidelity.md, "RocketMQ trusts the consume-queue files before the
        last three"). rmqspec reads every file."""
        files = self.files.files
        if not files:
            return
        end = files[0].start
        max_phys = -1
        done = False
        for f in files:
            pos = 0
            while pos + UNIT_SIZE <= f.size:
                clo, size, _tags = _UNIT.unpack_from(f.mm, pos)
                if clo >= 0 and size > 0:
                    pos += UNIT_SIZE
                    if size != PRE_BLANK_SIZE:
                        max_phys = clo + size
                else:
                    done = True
                    break
            end = f.start + pos
            if done:
                break
        self.files.set_end(end)
        holder = self.files.find(end)
        if holder is not None and (
            holder is not files[-1] or any(holder.mm[end - holder.start : end - holder.start + UNIT_SIZE])
        ):
            self.files.truncate_from(end)  # later files or a broken unit: forget them
        self.max_physic_offset = max_phys

    def truncate_physical(self, phys_end: int) -> None:
        """Drop units pointing at or past CommitLog offset ``phys_end`` (truncateDirtyLogicFiles)."""
        end = self.files.max_offset
        begin = self.files.min_offset
        new_end = end
        while new_end > begin:
            clo, _size, _tags = self._unit_at(new_end - UNIT_SIZE)
            if clo < phys_end:
                break
            new_end -= UNIT_SIZE
        if new_end < end:
            self.files.truncate_from(new_end)
            self.files.set_end(new_end)
        self.max_physic_offset = -1
        if new_end > begin:
            clo, size, _tags = self._unit_at(new_end - UNIT_SIZE)
            self.max_physic_offset = clo + size

    # -- retention (model/retention.py) -------------------------------------------------------

    def delete_expired(self, commitlog_min: int) -> None:
        """deleteExpiredFile: the files whose last unit points below ``commitlog_min`` (never the
        last), then correctMinOffset."""
        lasts = [self._unit_at(f.end - UNIT_SIZE)[0] if f.wrote == f.size else None for f in self.files.files]
        self.files.delete_first(consume_queue_files_to_delete(lasts, commitlog_min))
        self.correct_min(commitlog_min, self.min_logic)

    def correct_min(self, commitlog_min: int, current: int) -> None:
        """correctMinOffset over the written units of the first file."""
        files = self.files.files
        if not files:
            return
        first = files[0]
        offsets = [_UNIT.unpack_from(first.mm, pos)[0] for pos in range(0, first.wrote - UNIT_SIZE + 1, UNIT_SIZE)]
        self.min_logic = corrected_min(offsets, first.start // UNIT_SIZE, commitlog_min, current)

    def _unit_at(self, byte_offset: int) -> tuple[int, int, int]:
        f = self.files.find(byte_offset)
        assert f is not None, byte_offset
        return _UNIT.unpack_from(f.mm, byte_offset - f.start)

    def flush(self) -> bool:
        return self.files.flush()

    def close(self, *, flush: bool) -> None:
        self.files.close(flush=flush)
