"""Fixed-size memory-mapped files and their directory (RocketMQ ``MappedFile``/``MappedFileQueue``).

Theory of operation
-------------------
A ``MappedFileQueue`` is one directory of equally sized files, each named by
the 20-digit zero-padded absolute offset of its first byte (``00000000000000000000``,
``00000000001073741824``, …). Offsets are absolute throughout: ``write(offset,
data)`` and ``read(offset, n)`` address the concatenation of all files.

Each ``MappedFile`` keeps two positions relative to its start: ``wrote`` (bytes
written) and ``flushed`` (bytes known to be on disk: ``flush()`` is a real
``msync`` of the dirty range). New files are created sparse with
``ftruncate``, so a 1 GiB default costs nothing until written.

Rolling (the blank end-of-file record) is the CommitLog's business; this
module only provides ``last()`` / ``create_next()``.

Two operations exist for recovery and crash simulation:

- ``truncate_from(offset)`` forgets everything at and after ``offset``: later
  files are deleted and the rest of the file holding ``offset`` is zeroed, so
  no stale record can resurface after a later append. Zeroing writes zeros
  over the file's allocated extents only (``SEEK_DATA``/``SEEK_HOLE``; holes
  already read as zeros) and msyncs them; the file never changes size, so a
  crash half-way through can leave stale bytes (recovery stops before them
  again) but never a short file.
- ``lose_unflushed(keep)`` simulates power loss: every byte past each file's
  flushed position is zeroed, except ``keep`` bytes right after the first
  unflushed position (a torn write).

A file created while the queue is ``transient`` (a TransientStorePool,
``model/committing.py``) gets a write buffer: ``append`` puts the bytes in
process memory (``pending``, the bytes ``[committed, wrote)``) and ``commit``
writes them into the mapping, as ``MappedFile.commit0`` writes the pool's
buffer to the file channel. Until then nothing of them is in the file (a
process crash loses them), and ``readable`` (RocketMQ's ``getReadPosition``:
the committed position of a file with a buffer, else ``wrote``) bounds reads
and flushes. Files loaded from the directory never have a buffer.

Loading tolerates an empty last file (a crash between a file's creation and
its sizing leaves one): it is sized, and reads as zeros (RocketMQ's
``MappedFileQueue.load`` refuses to start instead). Any other size mismatch is
an error.

Durable effects (``effects``): every file gets a ``FileTap`` when a recorder
is installed; creation, writes, msyncs, zeroing and deletion are reported to
it. Without a recorder the hooks cost one ``is None`` test.
"""

from __future__ import annotations

import errno
import mmap
import os
import re
from collections.abc import Iterator
from pathlib import Path

from rmqspec.impl import effects
from rmqspec.model.committing import able_to_commit
from rmqspec.model.flushing import able_to_flush

NAME_PATTERN = re.compile(r"^[0-9]{20}$")
PAGE = mmap.PAGESIZE
_ZERO_CHUNK = bytes(1 << 16)


class StoreError(Exception):
    """The store directory cannot be used: names the file, the byte offset and the reason."""

    def __init__(self, path: str | os.PathLike[str], offset: int | None, reason: str) -> None:
        where = f"{path}" if offset is None else f"{path} at byte {offset}"
        super().__init__(f"{where}: {reason}")
        self.path = str(path)
        self.offset = offset
        self.reason = reason


def file_name(offset: int) -> str:
    """The 20-digit zero-padded name of the file starting at absolute ``offset``."""
    return f"{offset:020d}"


def data_extents(fd: int, start: int, size: int) -> list[tuple[int, int]]:
    """The allocated ranges of ``[start, size)`` of an open file (holes read as zeros).

    Uses ``SEEK_DATA``/``SEEK_HOLE``; where the file system cannot answer, the
    whole range counts as data.
    """
    extents: list[tuple[int, int]] = []
    offset = start
    while offset < size:
        try:
            data = os.lseek(fd, offset, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # no data after offset
                break
            return [(offset, size)]
        if data >= size:
            break
        hole = min(os.lseek(fd, data, os.SEEK_HOLE), size)
        extents.append((data, hole))
        offset = hole
    return extents


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    effects.record_dir_sync(path)


class MappedFile:
    """One fixed-size file mapped read-write; positions are relative to ``start``."""

    def __init__(self, path: Path, start: int, size: int, *, create: bool, allow_empty: bool = False) -> None:
        self.path = path
        self.start = start
        self.size = size
        self.tap = effects.tap_for(path)
        self.was_empty = False  # loaded with 0 bytes and sized
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
        try:
            self._fd = os.open(path, flags, 0o644)
        except OSError as exc:
            raise StoreError(path, None, f"cannot open: {exc.strerror}") from exc
        try:
            if create:
                if self.tap is not None:
                    self.tap.create()
                self._resize(size)
            else:
                actual = os.fstat(self._fd).st_size
                if actual == 0 and allow_empty:
                    # a crash between creating and sizing the file: it holds nothing
                    self._resize(size)
                    os.fsync(self._fd)
                    if self.tap is not None:
                        self.tap.sync(0, size, meta=True)
                    self.was_empty = True
                elif actual != size:
                    raise StoreError(path, None, f"file size {actual}, expected {size}")
            self.mm = mmap.mmap(self._fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(self._fd)
            raise
        self.wrote = 0
        self.flushed = 0
        self.committed = 0  # with a write buffer: the bytes written into the mapping (MappedFile.committedPosition)
        self.pending: bytearray | None = None  # the write buffer's bytes [committed, wrote); None: no buffer

    def give_buffer(self) -> None:
        """Borrow a write buffer (TransientStorePool.borrowBuffer): appends go to process memory."""
        self.committed = self.wrote
        self.pending = bytearray()

    @property
    def readable(self) -> int:
        """``getReadPosition``: the committed position with a write buffer, else the write position."""
        return self.committed if self.pending is not None else self.wrote

    def commit(self, upto: int | None = None) -> bool:
        """``commit0``: write the buffer's bytes up to ``upto`` (all) into the mapping; a file committed to its
        end gives its buffer back. True if anything was committed."""
        if self.pending is None:
            return False
        end = self.wrote if upto is None else upto
        n = end - self.committed
        if n > 0:
            self.write(self.committed, bytes(self.pending[:n]))
            del self.pending[:n]
            self.committed = end
        if self.committed == self.size:
            self.pending = None  # TransientStorePool.returnBuffer
        return n > 0

    def content(self, pos: int, n: int) -> bytes:
        """The bytes ``[pos, pos + n)`` as written, the write buffer's included (the process's own view)."""
        if self.pending is None or pos + n <= self.committed:
            return bytes(self.mm[pos : pos + n])
        head = bytes(self.mm[pos : self.committed]) if pos < self.committed else b""
        lo = max(pos, self.committed) - self.committed
        return head + bytes(self.pending[lo : lo + n - len(head)])

    def _resize(self, size: int) -> None:
        os.ftruncate(self._fd, size)
        if self.tap is not None:
            self.tap.resize(size)

    @property
    def end(self) -> int:
        return self.start + self.size

    @property
    def remaining(self) -> int:
        return self.size - self.wrote

    def write(self, pos: int, data: bytes) -> None:
        self.mm[pos : pos + len(data)] = data
        if self.tap is not None:
            self.tap.write(pos, data)

    def append(self, data: bytes) -> int:
        """Write ``data`` at the write position; return the position it went to."""
        pos = self.wrote
        if self.pending is not None:  # into the write buffer: the file sees it at the commit
            self.pending += data
            self.wrote = pos + len(data)
            return pos
        self.mm[pos : pos + len(data)] = data
        self.wrote = pos + len(data)
        if self.tap is not None:
            self.tap.write(pos, data)
        return pos

    def flush(self, upto: int | None = None) -> bool:
        """msync the bytes written since the last flush (to ``upto``: all readable); True if anything was flushed."""
        end = self.readable if upto is None else upto
        if self.flushed >= end:
            return False
        start = self.flushed - self.flushed % PAGE
        self.mm.flush(start, end - start)
        if self.tap is not None:
            self.tap.sync(start, end, meta=False)
        self.flushed = end
        return True

    def zero_from(self, pos: int, keep: bytes = b"") -> None:
        """Zero ``[pos, size)`` in place, write ``keep`` at ``pos``, msync; the size never changes."""
        end = pos
        mm = self.mm
        for first, last in self._data_extents(pos):
            for chunk in range(first, last, len(_ZERO_CHUNK)):
                stop = min(chunk + len(_ZERO_CHUNK), last)
                zeros = _ZERO_CHUNK[: stop - chunk]
                if mm[chunk:stop] != zeros:
                    mm[chunk:stop] = zeros
                    if self.tap is not None:
                        self.tap.write(chunk, zeros)
                    end = stop
        if keep:
            mm[pos : pos + len(keep)] = keep
            if self.tap is not None:
                self.tap.write(pos, keep)
            end = max(end, pos + len(keep))
        if end > pos:
            start = pos - pos % PAGE
            mm.flush(start, end - start)
            if self.tap is not None:
                self.tap.sync(start, end, meta=False)
        self.wrote = min(self.wrote, pos)
        self.flushed = min(self.flushed, pos)
        self.committed = min(self.committed, pos)
        if self.pending is not None:
            del self.pending[self.wrote - self.committed:]

    def _data_extents(self, pos: int) -> list[tuple[int, int]]:
        return data_extents(self._fd, pos, self.size)

    def close(self, *, flush: bool) -> None:
        if self.mm.closed:
            return
        if flush:
            self.mm.flush()
            if self.tap is not None:
                self.tap.sync(0, self.size, meta=False)
        self.mm.close()
        os.close(self._fd)

    def destroy(self) -> None:
        self.close(flush=False)
        if self.tap is not None:
            self.tap.unlink()
        self.path.unlink(missing_ok=True)


class MappedFileQueue:
    """A directory of equally sized mapped files addressed by absolute offset."""

    def __init__(self, directory: Path, file_size: int) -> None:
        if file_size <= 0:
            raise ValueError(f"file size must be positive, got {file_size}")
        self.dir = directory
        self.file_size = file_size
        self.files: list[MappedFile] = []
        # TransientStorePool (model/committing.py): files created starting at or after ``buffered_from`` get a
        # write buffer (None: no pool); ``committed_where``: MappedFileQueue.committedWhere
        self.buffered_from: int | None = None
        self.committed_where = 0

    # -- loading --------------------------------------------------------------------------

    def load(self) -> None:
        """Map every file of the directory; refuse foreign names, wrong sizes and holes."""
        self.dir.mkdir(parents=True, exist_ok=True)
        names = sorted(p.name for p in self.dir.iterdir())
        expected: int | None = None
        for name in names:
            path = self.dir / name
            if not NAME_PATTERN.match(name) or not path.is_file():
                raise StoreError(path, None, "not a store file (expected a 20-digit offset name)")
            start = int(name)
            if start % self.file_size:
                raise StoreError(path, None, f"name is not a multiple of the file size {self.file_size}")
            if expected is not None and start != expected:
                raise StoreError(path, None, f"expected the next file to start at {expected}")
            last = name == names[-1]
            self.files.append(MappedFile(path, start, self.file_size, create=False, allow_empty=last))
            expected = start + self.file_size
        for f in self.files:
            f.wrote = f.flushed = f.size  # recovery sets the real positions

    # -- positions ------------------------------------------------------------------------

    @property
    def min_offset(self) -> int:
        return self.files[0].start if self.files else 0

    @property
    def max_offset(self) -> int:
        """One past the last written byte."""
        if not self.files:
            return 0
        last = self.files[-1]
        return last.start + last.wrote

    @property
    def readable_offset(self) -> int:
        """One past the last byte of the readable prefix (what the reput reaches: each file's read position,
        the committed one of a buffered file); the files before ``committed_where``'s are readable whole."""
        if not self.files:
            return 0
        first = max(0, min((self.committed_where - self.files[0].start) // self.file_size, len(self.files) - 1))
        for f in self.files[first:]:
            if f.readable < f.size:
                return f.start + f.readable
        return self.files[-1].end if self.files else 0

    @property
    def flushed_offset(self) -> int:
        for f in self.files:
            if f.flushed < f.size:
                return f.start + f.flushed
        return self.files[-1].end if self.files else 0

    def last(self) -> MappedFile | None:
        return self.files[-1] if self.files else None

    def create_next(self, start: int | None = None) -> MappedFile:
        """Create the file after the last one (or at ``start`` for an empty queue)."""
        if self.files:
            start = self.files[-1].end
        elif start is None:
            start = 0
        if start % self.file_size:
            raise ValueError(f"file start {start} is not a multiple of {self.file_size}")
        self.dir.mkdir(parents=True, exist_ok=True)
        f = MappedFile(self.dir / file_name(start), start, self.file_size, create=True)
        if self.buffered_from is not None and start >= self.buffered_from:
            f.give_buffer()
        self.files.append(f)
        fsync_dir(self.dir)
        return f

    def find(self, offset: int) -> MappedFile | None:
        """The file holding absolute ``offset`` (None when outside every file)."""
        if not self.files or offset < self.files[0].start:
            return None
        index = (offset - self.files[0].start) // self.file_size
        return self.files[index] if index < len(self.files) else None

    def read(self, offset: int, n: int) -> bytes:
        f = self.find(offset)
        if f is None:
            return b""
        pos = offset - f.start
        return f.mm[pos : min(pos + n, f.size)]

    def iter_from(self, offset: int) -> Iterator[MappedFile]:
        for f in self.files:
            if f.end > offset:
                yield f

    # -- durability -------------------------------------------------------------------------

    def flush(self) -> bool:
        flushed = False
        for f in self.files:
            if f.flushed < f.readable:
                flushed = f.flush() or flushed
        return flushed

    def flush_least(self, least_pages: int, limit: int) -> bool:
        """``MappedFileQueue.flush(leastPages)`` over the bytes below ``limit`` (what the service saw):
        msync the first file not flushed to there when ``isAbleToFlush`` (``model/flushing.py``); True if
        it flushed."""
        f = next((f for f in self.files if f.flushed < min(f.readable, limit - f.start)), None)
        if f is None:
            return False
        upto = min(f.readable, limit - f.start)
        return able_to_flush(upto, f.flushed, f.size, least_pages) and f.flush(upto)

    def commit_least(self, least_pages: int) -> bool:
        """``MappedFileQueue.commit(leastPages)``: the file holding ``committed_where`` commits when
        ``isAbleToCommit`` (``model/committing.py``); a file without a buffer answers its write position; True
        if ``committed_where`` moved."""
        f = self.find(self.committed_where)
        if f is None:
            return False
        if f.pending is not None and able_to_commit(f.wrote, f.committed, f.size, least_pages):
            f.commit()
        where = f.start + f.readable
        moved, self.committed_where = where != self.committed_where, where
        return moved

    def commit_through(self, end: int) -> None:
        """Commit every write buffer up to absolute ``end`` (the files before its own whole)."""
        for f in self.files:
            if f.start < end and f.pending is not None:
                f.commit(min(f.wrote, end - f.start))
        self.committed_where = max(self.committed_where, self.readable_offset)

    def commit_all(self) -> None:
        """Commit every write buffer (a flush, a clean shutdown)."""
        for f in self.files:
            f.commit()
        self.committed_where = self.readable_offset

    def sync_all(self) -> None:
        """msync every written byte, flushed or not (after a crash the page cache may still hold them)."""
        for f in self.files:
            if f.wrote > 0:
                end = min(f.size, -(-f.wrote // PAGE) * PAGE)
                f.mm.flush(0, end)
                if f.tap is not None:
                    f.tap.sync(0, end, meta=False)

    def set_end(self, offset: int) -> None:
        """After recovery: positions of every file end at ``offset`` (all on disk)."""
        for f in self.files:
            pos = min(max(offset - f.start, 0), f.size)
            f.wrote = f.flushed = f.committed = pos

    def truncate_from(self, offset: int) -> None:
        """Forget every byte at and after ``offset`` (delete later files, zero the rest)."""
        changed = False
        while self.files and self.files[-1].start > offset:
            self.files.pop().destroy()
            changed = True
        f = self.find(offset)
        if f is not None:
            pos = offset - f.start
            f.zero_from(pos)
            f.wrote = f.flushed = f.committed = pos
        if changed:
            fsync_dir(self.dir)

    def delete_first(self, count: int) -> None:
        """Delete the ``count`` oldest files (retention; MappedFileQueue.deleteExpiredFile)."""
        for _ in range(min(count, len(self.files))):
            self.files.pop(0).destroy()
        if count:
            fsync_dir(self.dir)

    def lose_unflushed(self, keep: int = 0) -> None:
        """Power loss: zero bytes past each file's flushed position, keeping ``keep`` torn bytes."""
        torn_left = keep
        for f in self.files:
            if f.flushed >= f.wrote:
                continue
            kept = b""
            if torn_left > 0:
                n = min(torn_left, f.wrote - f.flushed)
                kept = f.mm[f.flushed : f.flushed + n]
                torn_left = 0
            f.zero_from(f.flushed, kept)

    def close(self, *, flush: bool) -> None:
        for f in self.files:
            f.close(flush=flush)
        self.files = []
