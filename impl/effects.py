"""The store's durable effects, recorded: every write, flush, file creation, deletion and rename.

Theory of operation
-------------------
Crash-state exploration (``crashfs``, ``crashtest``) replays what the store
asked the operating system to do and asks which disk states a power loss could
have left. This module records that request stream for one store root:

========== ===================================================== ================================
effect     what the store did                                     durability (``crashfs``)
========== ===================================================== ================================
``Create`` ``open(O_CREAT)`` of a file that did not exist          metadata: journal order
``Resize`` ``ftruncate`` (also a write that extends a file)        metadata: journal order
``Write``  bytes stored at a file offset (mmap store or pwrite)    page cache until synced
``Sync``   ``msync`` of a range (``meta=False``) or ``fsync``      the range's pages; fsync also
           (``meta=True``)                                        commits the journal
``Unlink`` a file removed                                          metadata
``Rename`` ``os.replace(src, dst)``                               metadata (atomic)
``SyncDir`` ``fsync`` of a directory                               commits the journal
``PowerCut`` the workload simulated a power loss itself            volatile state := durable
``Mark``   a semantic note for the oracle (no disk effect)
========== ===================================================== ================================

Marks: ``append`` (offset, size: a CommitLog record was appended),
``recovered`` (end: the store finished recovery and kept ``[min, end)``),
``config_write`` (file, text) / ``config_done`` (file) around an atomic
rewrite of a config file, and the workload driver's ``ack`` (a SYNC send was
acknowledged) and ``flushed`` (``flush()``/``close()`` returned).

Activation: ``recording(root)`` installs one ``EffectLog``; a file opened under
its root while it is installed gets a ``FileTap`` (``tap_for``), so the hot
paths (``MappedFile.append``) test one attribute, ``tap is None``, and cost
nothing more when no recorder is attached. Everything else asks ``active()``.
Paths are relative to the root, with ``/`` separators. Single-threaded, like
the store.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs


@attrs.frozen
class Create:
    path: str


@attrs.frozen
class Resize:
    path: str
    length: int


@attrs.frozen
class Write:
    path: str
    offset: int
    data: bytes = attrs.field(repr=lambda d: f"<{len(d)} bytes>")


@attrs.frozen
class Sync:
    """``msync``/``fdatasync`` of ``[start, end)`` (``meta=False``) or ``fsync`` of the file."""

    path: str
    start: int
    end: int
    meta: bool


@attrs.frozen
class Unlink:
    path: str


@attrs.frozen
class Rename:
    src: str
    dst: str


@attrs.frozen
class SyncDir:
    path: str


@attrs.frozen
class PowerCut:
    """The recorded workload cut the power itself (``crash("power")``)."""


@attrs.frozen
class Mark:
    kind: str
    data: tuple[tuple[str, Any], ...] = ()

    def get(self, key: str, default: Any = None) -> Any:
        for k, v in self.data:
            if k == key:
                return v
        return default


Effect = Create | Resize | Write | Sync | Unlink | Rename | SyncDir | PowerCut | Mark
WHOLE_FILE = 1 << 62


class EffectLog:
    """The effects of one store root, in program order."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(os.path.abspath(root))
        self._real_root = self.root.resolve()
        self.effects: list[Effect] = []
        self.paused = 0

    def rel(self, path: str | Path) -> str | None:
        """``path`` relative to the root (``/``-separated), None when outside it."""
        p = Path(os.path.abspath(path))
        try:
            rel = p.relative_to(self.root)
        except ValueError:
            try:  # the root was given through a symlink
                rel = (p.parent.resolve() / p.name).relative_to(self._real_root)
            except (ValueError, OSError):
                return None
        text = rel.as_posix()
        return "" if text == "." else text

    def add(self, effect: Effect) -> None:
        if not self.paused:
            self.effects.append(effect)

    def mark(self, kind: str, **data: Any) -> None:
        self.add(Mark(kind, tuple(data.items())))

    def tap(self, path: str | Path) -> FileTap | None:
        rel = self.rel(path)
        return None if rel is None else FileTap(self, rel)

    @contextlib.contextmanager
    def pause(self) -> Iterator[None]:
        """Record nothing inside (a simulated power cut rewrites files the recorder must not see)."""
        self.paused += 1
        try:
            yield
        finally:
            self.paused -= 1


class FileTap:
    """One file's effects, for the mmap hot paths."""

    __slots__ = ("log", "path")

    def __init__(self, log: EffectLog, path: str) -> None:
        self.log = log
        self.path = path

    def create(self) -> None:
        self.log.add(Create(self.path))

    def resize(self, length: int) -> None:
        self.log.add(Resize(self.path, length))

    def write(self, offset: int, data: bytes | bytearray | memoryview) -> None:
        self.log.add(Write(self.path, offset, bytes(data)))

    def sync(self, start: int, end: int, *, meta: bool) -> None:
        self.log.add(Sync(self.path, start, end, meta))

    def unlink(self) -> None:
        self.log.add(Unlink(self.path))


_active: EffectLog | None = None


def active() -> EffectLog | None:
    """The installed recorder, if any."""
    return _active


def tap_for(path: str | Path) -> FileTap | None:
    """A tap for ``path`` when a recorder is installed and ``path`` is under its root."""
    return None if _active is None else _active.tap(path)


@contextlib.contextmanager
def recording(root: str | Path) -> Iterator[EffectLog]:
    """Install a recorder for the store at ``root`` for the duration of the block."""
    global _active
    if _active is not None:
        raise RuntimeError(f"already recording the store at {_active.root}")
    log = EffectLog(root)
    _active = log
    try:
        yield log
    finally:
        _active = None
        log.paused += 1  # taps held by still-open files record nothing more


def record_dir_sync(path: str | Path) -> None:
    log = _active
    if log is not None:
        rel = log.rel(path)
        if rel is not None:
            log.add(SyncDir(rel))
