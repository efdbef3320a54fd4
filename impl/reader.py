"""Read-only access to a store directory of any file size, for ``verify`` and ``dump``.

Theory of operation
-------------------
The tools never trust the directory: every file is opened read-only (an
unreadable or foreign file becomes a ``Finding``, never an exception), file
sizes come from disk, and a file that is shorter than its siblings is read as
it is. ``list_segment_files`` classifies a directory's entries into the
20-digit-named files and findings for everything else; ``ReadOnlyFile`` maps
one file (or reads it, when it is empty or cannot be mapped);
``iter_file_records`` walks one CommitLog file and re-synchronises after a
corrupt record whose header is intact (bad CRC, wrong physicalOffset) so one
bit flip yields one finding.

A ``Finding`` is ``(code, file, offset, reason)``: ``file`` relative to the
store root, ``offset`` the byte offset inside that file (0 for file-level
findings).
"""

from __future__ import annotations

import bisect
import itertools
import mmap
import os
from collections.abc import Iterator
from pathlib import Path

import attrs

from rmqspec.impl.codec import Blank, CorruptRecord, DecodedRecord, End, decode_at, peek_size
from rmqspec.impl.mappedfile import NAME_PATTERN, data_extents


@attrs.frozen
class Finding:
    code: str
    file: str
    offset: int
    reason: str

    def to_dict(self) -> dict[str, object]:
        return {"code": self.code, "file": self.file, "offset": self.offset, "reason": self.reason}

    def line(self) -> str:
        return f"{self.code} {self.file}@{self.offset}: {self.reason}"


class NotAStore(Exception):
    """The directory is not a RocketMQ store (or cannot be read at all)."""


def rel(root: Path, path: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


class ReadOnlyFile:
    """One store file opened read-only; ``buf`` supports slicing and struct unpacking."""

    def __init__(self, path: Path, start: int) -> None:
        self.path = path
        self.start = start
        fd = os.open(path, os.O_RDONLY)
        try:
            self.size = os.fstat(fd).st_size
            # allocated ranges: the rest of a sparse file reads as zeros
            self.extents: list[tuple[int, int]] = data_extents(fd, 0, self.size)
            if self.size > 0:
                try:
                    self.buf: mmap.mmap | bytes = mmap.mmap(fd, self.size, access=mmap.ACCESS_READ)
                except (OSError, ValueError):
                    self.buf = _read_all(fd, self.size)
            else:
                self.buf = b""
        finally:
            os.close(fd)

    @property
    def end(self) -> int:
        return self.start + self.size

    def close(self) -> None:
        if isinstance(self.buf, mmap.mmap):
            self.buf.close()


def _read_all(fd: int, size: int) -> bytes:
    chunks = []
    while size > 0:
        chunk = os.read(fd, min(size, 1 << 24))
        if not chunk:
            break
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def list_segment_files(root: Path, directory: Path, *, unit: int = 1) -> tuple[list[ReadOnlyFile], list[Finding]]:
    """Open the 20-digit files of ``directory`` in offset order; findings for the rest.

    Checks: names are 20 digits; every file has the directory's common size
    (the most frequent one) which is a multiple of ``unit``; each name equals
    the previous name plus the previous size.
    """
    findings: list[Finding] = []
    files: list[ReadOnlyFile] = []
    try:
        entries = sorted(directory.iterdir())
    except OSError as exc:
        return [], [Finding("UNREADABLE", rel(root, directory), 0, f"cannot list: {exc.strerror}")]
    for path in entries:
        name = rel(root, path)
        if not NAME_PATTERN.match(path.name):
            findings.append(Finding("BAD_FILE_NAME", name, 0, "not a 20-digit offset name"))
            continue
        if not path.is_file():
            findings.append(Finding("BAD_FILE_NAME", name, 0, "not a regular file"))
            continue
        try:
            files.append(ReadOnlyFile(path, int(path.name)))
        except OSError as exc:
            findings.append(Finding("UNREADABLE", name, 0, f"cannot read: {exc.strerror}"))
    if not files:
        return files, findings
    sizes = [f.size for f in files]
    common = max(set(sizes), key=lambda s: (sizes.count(s), -sizes.index(s)))
    for f in files:
        name = rel(root, f.path)
        if f.size != common:
            findings.append(Finding("BAD_FILE_SIZE", name, 0, f"{f.size} bytes; the other files have {common}"))
        elif unit > 1 and f.size % unit:
            findings.append(Finding("BAD_FILE_SIZE", name, 0, f"{f.size} bytes is not a multiple of {unit}"))
    for prev, f in itertools.pairwise(files):
        if f.start != prev.start + prev.size:
            findings.append(
                Finding(
                    "BAD_FILE_NAME",
                    rel(root, f.path),
                    0,
                    f"name says offset {f.start} but the previous file {prev.path.name} "
                    f"({prev.size} bytes) ends at {prev.start + prev.size}",
                )
            )
    return files, findings


# Codes after which the record's own size is trustworthy, so scanning can continue.
RESYNC_CODES = frozenset({"BAD_CRC", "BAD_PHYSICAL_OFFSET"})


def iter_file_records(
    f: ReadOnlyFile, *, check_crc: bool = True
) -> Iterator[DecodedRecord | Blank | End | CorruptRecord]:
    """Every item of one CommitLog file in order; stops after an End, a Blank or a fatal error."""
    pos = 0
    buf = f.buf
    while True:
        try:
            item = decode_at(buf, pos, base_offset=f.start, limit=f.size, check_crc=check_crc)
        except CorruptRecord as exc:
            if exc.code in RESYNC_CODES:
                lenient = decode_at(
                    buf,
                    pos,
                    base_offset=f.start,
                    limit=f.size,
                    check_crc=False,
                    check_physical=False,
                )
                exc.record = lenient if isinstance(lenient, DecodedRecord) else None
                yield exc
                size, _magic = peek_size(buf, pos)
                pos += size
                continue
            yield exc
            return
        yield item
        if isinstance(item, (Blank, End)):
            return
        pos += item.size


class CommitLogReader:
    """Random access to records by absolute offset across the files of a CommitLog."""

    def __init__(self, files: list[ReadOnlyFile]) -> None:
        self.files = files
        self._starts = [f.start for f in files]

    @property
    def min_offset(self) -> int:
        return self.files[0].start if self.files else 0

    def find(self, offset: int) -> ReadOnlyFile | None:
        i = bisect.bisect_right(self._starts, offset) - 1
        if i < 0:
            return None
        f = self.files[i]
        return f if offset < f.end else None

    def decode(self, offset: int, *, check_crc: bool = False) -> DecodedRecord:
        """The record at ``offset`` or ``CorruptRecord`` saying why there is none."""
        f = self.find(offset)
        if f is None:
            raise CorruptRecord("CQ_DANGLING", offset, "outside every commitlog file")
        item = decode_at(f.buf, offset - f.start, base_offset=f.start, check_crc=check_crc)
        if isinstance(item, DecodedRecord):
            return item
        kind = "an end-of-file blank record" if isinstance(item, Blank) else "zero bytes"
        raise CorruptRecord("CQ_DANGLING", offset, f"{kind}, not a message record")
