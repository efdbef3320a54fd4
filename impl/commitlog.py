"""The CommitLog: every record of every topic, appended in store order (RocketMQ ``CommitLog``).

Theory of operation
-------------------
``append(prepared, queue_offset)`` places a prepared record at the write
position of the last file. When the record plus the 8-byte end marker does not
fit in what is left of the file (RocketMQ's ``msgLen + END_FILE_MIN_BLANK_LENGTH
> maxBlank``), the rest of the file gets a blank record ``[remaining][0xCBD43194]``
and the record goes to the start of a new file. So every file except the last
ends with a blank record, and a record never spans files.

``scan(start)`` walks records from a file start, yielding decoded records, and
stops at the first zero header, the last file's end, or the first invalid record
(``ScanStop`` says why and where). Recovery uses it to find the end of valid
data; dispatch uses it to rebuild consume queues.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import attrs

from rmqspec.impl.codec import (
    END_FILE_MIN_BLANK_LENGTH,
    MESSAGE_MAGIC,
    SYSFLAG_POSITION,
    Blank,
    CorruptRecord,
    DecodedRecord,
    End,
    Prepared,
    PutError,
    decode_at,
    encode_blank,
)
from rmqspec.impl.mappedfile import MappedFile, MappedFileQueue, StoreError, file_name
from rmqspec.model.filefault import CREATE_FILE_CODE, CREATE_FILE_REMARK, next_file_start
from rmqspec.model.message import BORNHOST_V6_FLAG
from rmqspec.model.results import BrokerError, ResponseCode


class FileCreateFailed(BrokerError):
    """CREATE_MAPEDFILE_FAILED: the next commitlog file could not be created (``model/filefault.py``)."""

    def __init__(self, cause: StoreError) -> None:
        super().__init__(CREATE_FILE_CODE, CREATE_FILE_REMARK)
        self.cause = cause


@attrs.frozen
class ScanStop:
    """Where a scan ended: ``offset`` is one past the last valid record; ``error`` if corrupt."""

    offset: int
    error: CorruptRecord | None = None


class CommitLog:
    """Append-only record log over a ``MappedFileQueue``."""

    def __init__(self, directory: Path, file_size: int) -> None:
        self.files = MappedFileQueue(directory, file_size)
        self.file_size = file_size
        # storeTs of the last appended record (RocketMQ MappedFile.storeTimestamp).
        self.last_store_ts = 0
        self.obstacle: Path | None = None  # Capability.FILE_CREATE_FAULT: a directory at the next file's path

    @property
    def max_offset(self) -> int:
        return self.files.max_offset

    @property
    def min_offset(self) -> int:
        return self.files.min_offset

    # -- append ----------------------------------------------------------------------------

    def check_fits(self, prepared: Prepared) -> None:
        if prepared.size + END_FILE_MIN_BLANK_LENGTH > self.file_size:
            raise PutError(
                ResponseCode.MESSAGE_ILLEGAL,
                "record size",
                prepared.size,
                f"does not fit a commitlog file of {self.file_size} bytes (with the 8-byte end marker)",
            )

    def reserve(self, size: int) -> None:
        """Make room for ``size`` bytes appended as one (a batch: CommitLog.putMessages never splits
        one across files): roll to the next file now unless they fit before the last one's end marker."""
        if size + END_FILE_MIN_BLANK_LENGTH > self.file_size:
            raise PutError(ResponseCode.MESSAGE_ILLEGAL, "batch size", size,
                           f"does not fit a commitlog file of {self.file_size} bytes (with the 8-byte end marker)")
        self._file_for(size)

    def next_position(self, prepared: Prepared) -> tuple[int, bool]:
        """(physical offset the record will get, whether it opens a new file)."""
        self.check_fits(prepared)
        last = self.files.last()
        if last is None:
            return self.files.min_offset, True
        if last.wrote == 0:
            return last.start, True
        if last.remaining == 0 or prepared.size + END_FILE_MIN_BLANK_LENGTH > last.remaining:
            return last.end, True
        return last.start + last.wrote, False

    def append(self, prepared: Prepared, queue_offset: int) -> int:
        """Write the record (rolling to a new file when needed); return its physical offset."""
        self.check_fits(prepared)
        f = self._file_for(prepared.size)
        offset = f.start + f.wrote
        f.append(prepared.pack(queue_offset, offset))
        self.last_store_ts = prepared.record.store_ts
        return offset

    def _file_for(self, size: int) -> MappedFile:
        last = self.files.last()
        if last is None:
            return self._create(self.files.min_offset)
        if last.remaining == 0:
            return self._create()
        if size + END_FILE_MIN_BLANK_LENGTH > last.remaining:
            last.append(encode_blank(last.remaining))
            last.wrote = last.size
            return self._create()  # a failure leaves the blank written and the file full, as 4.9.8 does
        return last

    def _create(self, start: int | None = None) -> MappedFile:
        """getLastMappedFile(0): the next file, or CREATE_MAPEDFILE_FAILED when the OS refuses it."""
        try:
            return self.files.create_next(start)
        except StoreError as exc:
            raise FileCreateFailed(exc) from exc

    # -- a file that cannot be created (model/filefault.py) --------------------------------------

    def block_next_file(self) -> int:
        """Stand a directory at the path of the file after the one holding the write position, so that
        creating it fails (O_CREAT|O_EXCL: EEXIST); returns its start offset."""
        if self.obstacle is not None:
            raise ValueError(f"the commitlog file {self.obstacle.name} is already uncreatable")
        start = next_file_start(self.max_offset, self.file_size)
        path = self.files.dir / file_name(start)
        self.files.dir.mkdir(parents=True, exist_ok=True)
        path.mkdir()
        self.obstacle = path
        return start

    def unblock_next_file(self) -> None:
        """Remove the obstacle (if any)."""
        if self.obstacle is not None:
            self.obstacle.rmdir()
            self.obstacle = None

    # -- read ----------------------------------------------------------------------------------

    def read(self, offset: int) -> DecodedRecord:
        """The record starting at ``offset``; raises ``CorruptRecord`` if there is none."""
        f = self.files.find(offset)
        # past the read position (a TransientStorePool's uncommitted bytes): selectMappedBuffer finds nothing
        if f is None or offset >= f.start + f.readable:
            raise CorruptRecord(
                "NOT_FOUND",
                offset,
                f"outside the readable commitlog [{self.min_offset}, {self.files.readable_offset})",
            )
        result = decode_at(f.mm, offset - f.start, base_offset=f.start, limit=f.readable)
        if not isinstance(result, DecodedRecord):
            raise CorruptRecord("NOT_FOUND", offset, "no message record starts here")
        return result

    def scan(
        self, start: int, *, limit: int | None = None, check_crc: bool = True
    ) -> Iterator[DecodedRecord | ScanStop]:
        """Yield records from ``start`` (a record start) until the end of valid data.

        The last item is always a ``ScanStop``. ``limit`` caps the scan at a
        known write position (the live store); ``None`` scans whole files
        (recovery).
        """
        offset = start
        files = self.files.files
        i = 0 if not files else max(0, (start - files[0].start) // self.file_size)
        while i < len(files):
            f = files[i]
            pos = offset - f.start
            end = f.size if limit is None else min(f.size, max(limit - f.start, 0))
            while True:
                if pos >= end:
                    if end < f.size:  # stopped by the limit inside this file
                        yield ScanStop(f.start + pos)
                        return
                    break
                try:
                    item = decode_at(f.mm, pos, base_offset=f.start, limit=f.size, check_crc=check_crc)
                except CorruptRecord as exc:
                    yield ScanStop(f.start + pos, exc)
                    return
                if isinstance(item, End):
                    yield ScanStop(f.start + pos)
                    return
                if isinstance(item, Blank):
                    if i + 1 == len(files):  # no file after it: the data ends before the blank
                        yield ScanStop(f.start + pos)
                        return
                    break
                yield item
                pos += item.size
            i += 1
            if i < len(files):
                offset = files[i].start
            else:
                yield ScanStop(f.end)
                return
        yield ScanStop(offset)

    def first_store_ts(self, f: MappedFile) -> int | None:
        """storeTs of the first record of ``f`` if it starts with a message (recovery's test)."""
        magic = int.from_bytes(f.content(4, 4), "big", signed=True)
        if magic != MESSAGE_MAGIC:
            return None
        sys_flag = int.from_bytes(f.content(SYSFLAG_POSITION, 4), "big", signed=True)
        born = 20 if sys_flag & BORNHOST_V6_FLAG else 8
        pos = 48 + born
        return int.from_bytes(f.content(pos, 8), "big", signed=True)

    # -- durability ---------------------------------------------------------------------------

    def flush(self) -> bool:
        return self.files.flush()

    @property
    def flushed_offset(self) -> int:
        return self.files.flushed_offset
