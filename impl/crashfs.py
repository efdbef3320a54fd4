"""A page-cache model of the file system: recorded effects in, the disk states a power loss can leave out.

Theory of operation
-------------------
``replay(effects)`` runs a recorded effect stream (``effects``) through a
small model of a journaling file system and returns a ``CrashPoint`` after
every effect that changes the disk (a write, a sync, a metadata change). A
crash point knows

- the **durable image**: every file's pages as of the last ``Sync`` covering
  them, under the namespace and lengths of the last journal commit;
- the **dirty pages**: 4 KiB pages written since they were last synced (their
  content at the crash point, and which writes made them dirty);
- the **pending metadata**: creations, length changes, unlinks and renames
  not yet committed, in program order.

The rules (ext4 ``data=ordered``-like, slightly more pessimistic):

- data: a page reaches the disk when an ``msync``/``fsync`` covers it; before
  that, at a crash, any subset of the dirty pages may have been written back,
  and the page being written at the instant of the cut may be **torn**: its
  first ``k`` 512-byte sectors new, the rest old (``k`` = 1..7);
- metadata (``Create``, ``Resize``, ``Unlink``, ``Rename``) goes to a journal
  in program order: an ``fsync`` of a file or a directory commits all of it;
  at a crash any *prefix* of the uncommitted part may have committed. A
  rename is therefore atomic: done or not. A length can commit before the
  data (the file then reads zeros there), as under ``data=writeback``;
- ``PowerCut`` (the recorded workload cut the power itself): the volatile
  state becomes the durable image.

A ``CrashState`` is one choice at one crash point: the metadata prefix, the
set of dirty pages that persisted, and an optional torn page (another dirty
page, the one being written back at the instant of the cut). ``materialize(state, directory)`` writes
it as real files (sparse: only non-zero pages are written) and
``describe(state)`` says which writes persisted. Identical states of one
window (crash points with no sync or metadata change between them) share a
``key``; the explorer keeps the latest, whose promises are the strictest.

Paths are relative to the store root; offsets are byte offsets in a file;
page ``p`` is ``[p·4096, (p+1)·4096)``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import attrs

from rmqspec.impl.effects import (
    Create,
    Effect,
    Mark,
    PowerCut,
    Rename,
    Resize,
    Sync,
    SyncDir,
    Unlink,
    Write,
)

PAGE = 4096
SECTOR = 512
SECTORS = PAGE // SECTOR
ZERO_PAGE = bytes(PAGE)
STORE_DIRS = ("commitlog", "consumequeue", "config")

# A metadata operation in the journal: ("create", path, ino), ("resize", ino, length, effect index),
# ("unlink", path), ("rename", src, dst).
MetaOp = tuple


@attrs.frozen
class DirtyPage:
    """A page written since its last sync: its content now and the writes that made it so."""

    ino: int
    page: int
    version: int
    content: bytes = attrs.field(repr=False)
    writes: tuple[int, ...]  # effect indices, in order
    base: bytes | None = attrs.field(repr=False)  # the durable content (None: zeros)
    choices: tuple[int, ...] = attrs.field(repr=False)  # see torn_choices

    def torn_choices(self) -> tuple[int, ...]:
        """The sector counts ``k`` whose torn page differs from both the old and the new page."""
        return self.choices

    def torn(self, k: int) -> bytes:
        old = self.base or ZERO_PAGE
        return self.content[: k * SECTOR] + old[k * SECTOR :]


def torn_choices(base: bytes | None, content: bytes) -> tuple[int, ...]:
    """The sector counts ``k`` for which the first ``k`` sectors new + the rest old is a third page."""
    old = base or ZERO_PAGE
    diff = [old[s * SECTOR : (s + 1) * SECTOR] != content[s * SECTOR : (s + 1) * SECTOR] for s in range(SECTORS)]
    return tuple(k for k in range(1, SECTORS) if any(diff[:k]) and any(diff[k:]))


@attrs.frozen(eq=False)
class Durable:
    """The durable image: namespace, lengths and page contents (shared between crash points)."""

    serial: int
    names: dict[str, int]
    lengths: dict[int, int]
    pages: dict[int, dict[int, bytes]]
    synced: dict[tuple[int, int], int]  # (ino, page) -> index of the effect that synced it


@attrs.frozen(eq=False)
class CrashPoint:
    """The disk after effect ``index`` (and the marks right after it)."""

    index: int  # the last effect applied
    window: int  # crash points with equal windows differ only by data writes
    durable: Durable
    pending: tuple[MetaOp, ...]
    dirty: tuple[DirtyPage, ...]  # in write order (by last write)
    paths: dict[int, str]  # ino -> a name it had (for descriptions)
    _live: dict[int, tuple[DirtyPage, ...]] = attrs.field(factory=dict, repr=False)  # dirty_for, memoized

    def namespace(self, prefix: int) -> tuple[dict[str, int], dict[int, int], Cuts]:
        """(names, lengths, shrinks) with the first ``prefix`` pending operations committed."""
        names = dict(self.durable.names)
        lengths = dict(self.durable.lengths)
        cut: Cuts = {}
        for op in self.pending[:prefix]:
            _apply_meta(op, names, lengths, cut)
        return names, lengths, cut

    def dirty_for(self, prefix: int) -> tuple[DirtyPage, ...]:
        """The dirty pages of files that exist with ``prefix`` metadata operations committed."""
        found = self._live.get(prefix)
        if found is None:
            if not self.pending:
                live = set(self.durable.names.values())
            else:
                live = set(self.namespace(prefix)[0].values())
            found = self._live[prefix] = tuple(d for d in self.dirty if d.ino in live)
        return found


@attrs.frozen
class CrashState:
    """One disk a power cut at ``point`` can leave."""

    point: CrashPoint = attrs.field(repr=lambda p: f"<point {p.index}>")
    prefix: int  # pending metadata operations committed
    persisted: tuple[DirtyPage, ...]  # dirty pages fully written back
    torn: tuple[DirtyPage, int] | None = None  # (another dirty page, sectors written): cut mid-write

    @property
    def key(self) -> tuple:
        torn = None if self.torn is None else (self.torn[0].ino, self.torn[0].page, self.torn[0].version, self.torn[1])
        pages = frozenset((d.ino, d.page, d.version) for d in self.persisted)
        return (self.point.window, self.prefix, pages, torn)


Cuts = dict[int, list[tuple[int, int]]]  # ino -> [(shorter length, effect index of the shrink)]


def _apply_meta(op: MetaOp, names: dict[str, int], lengths: dict[int, int], cut: Cuts | None) -> None:
    kind = op[0]
    if kind == "create":
        names[op[1]] = op[2]
        lengths[op[2]] = 0
    elif kind == "resize":
        ino, length = op[1], op[2]
        if cut is not None and length < lengths.get(ino, 0):
            cut.setdefault(ino, []).append((length, op[3]))
        lengths[ino] = length
    elif kind == "unlink":
        names.pop(op[1], None)
    elif kind == "rename":
        ino = names.pop(op[1], None)
        if ino is not None:
            names[op[2]] = ino
    else:  # pragma: no cover - the model only builds the four kinds
        raise ValueError(f"unknown metadata operation {op!r}")


class ModelError(Exception):
    """The effect stream contradicts itself (a recorder bug): names the effect index."""


class FsModel:
    """The file-system model one effect stream is replayed through."""

    def __init__(self) -> None:
        self.names: dict[str, int] = {}
        self.lengths: dict[int, int] = {}
        self.pages: dict[int, dict[int, bytearray]] = {}
        self.durable = Durable(0, {}, {}, {}, {})
        self._durable_dirty = False  # the durable image changed since the last snapshot
        self.pending: list[MetaOp] = []
        self.dirty: dict[tuple[int, int], list[int]] = {}  # (ino, page) -> write effect indices
        self.versions: dict[tuple[int, int], int] = {}
        self.paths: dict[int, str] = {}
        self._next_ino = 1
        self._window = 0
        self._page_cache: dict[tuple[int, int, int, int], DirtyPage] = {}

    # -- effects -------------------------------------------------------------------------------

    def apply(self, index: int, effect: Effect) -> bool:
        """Apply one effect; True if the disk changed (a new crash point)."""
        if isinstance(effect, Write):
            return self._write(index, effect)
        if isinstance(effect, Mark):
            return False
        self._window += 1
        if isinstance(effect, Sync):
            self._sync(index, effect)
        elif isinstance(effect, SyncDir):
            self._commit()
        elif isinstance(effect, Create):
            ino = self._next_ino
            self._next_ino += 1
            self.names[effect.path] = ino
            self.lengths[ino] = 0
            self.pages[ino] = {}
            self.paths[ino] = effect.path
            self.pending.append(("create", effect.path, ino))
        elif isinstance(effect, Resize):
            ino = self._ino(index, effect.path)
            old = self.lengths[ino]
            if effect.length < old:
                self._zero_tail(index, ino, effect.length)
            self.lengths[ino] = effect.length
            self.pending.append(("resize", ino, effect.length, index))
        elif isinstance(effect, Unlink):
            self._ino(index, effect.path)
            del self.names[effect.path]
            self.pending.append(("unlink", effect.path))
        elif isinstance(effect, Rename):
            ino = self._ino(index, effect.src)
            del self.names[effect.src]
            self.names[effect.dst] = ino
            self.paths[ino] = effect.dst
            self.pending.append(("rename", effect.src, effect.dst))
        elif isinstance(effect, PowerCut):
            self._power_cut()
        else:  # pragma: no cover - exhaustive over Effect
            raise ModelError(f"effect {index}: unknown effect {effect!r}")
        return True

    def _ino(self, index: int, path: str) -> int:
        try:
            return self.names[path]
        except KeyError:
            raise ModelError(f"effect {index}: {path} does not exist") from None

    def _page(self, ino: int, page: int) -> bytearray:
        pages = self.pages[ino]
        buf = pages.get(page)
        if buf is None:
            base = self.durable.pages.get(ino, {}).get(page)
            buf = bytearray(base) if base is not None else bytearray(PAGE)
            pages[page] = buf
        return buf

    def _touch(self, index: int, ino: int, page: int) -> None:
        key = (ino, page)
        self.versions[key] = self.versions.get(key, 0) + 1
        writes = self.dirty.get(key)
        if writes is None:
            self.dirty[key] = [index]
        else:
            writes.append(index)

    def _write(self, index: int, effect: Write) -> bool:
        ino = self._ino(index, effect.path)
        end = effect.offset + len(effect.data)
        if end > self.lengths[ino]:
            raise ModelError(
                f"effect {index}: write [{effect.offset}, {end}) past the length {self.lengths[ino]} of {effect.path}"
            )
        changed = False
        data = effect.data
        pos = effect.offset
        while pos < end:
            page, off = divmod(pos, PAGE)
            n = min(PAGE - off, end - pos)
            chunk = data[pos - effect.offset : pos - effect.offset + n]
            buf = self._page(ino, page)
            if buf[off : off + n] != chunk:
                buf[off : off + n] = chunk
                self._touch(index, ino, page)
                changed = True
            pos += n
        return changed

    def _zero_tail(self, index: int, ino: int, length: int) -> None:
        for page, buf in self.pages[ino].items():
            start = max(length - page * PAGE, 0)
            if start < PAGE and any(buf[start:]):
                buf[start:] = bytes(PAGE - start)
                self._touch(index, ino, page)

    def _durable_pages(self) -> dict[int, dict[int, bytes]]:
        if not self._durable_dirty:
            # copy on first change after a snapshot: snapshots share the old dicts
            self.durable = Durable(
                self.durable.serial + 1,
                dict(self.durable.names),
                dict(self.durable.lengths),
                {ino: dict(p) for ino, p in self.durable.pages.items()},
                dict(self.durable.synced),
            )
            self._durable_dirty = True
        return self.durable.pages

    def _sync(self, index: int, effect: Sync) -> None:
        ino = self._ino(index, effect.path)
        first = effect.start // PAGE
        last = -(-min(effect.end, max(self.lengths[ino], effect.start)) // PAGE)
        for key in [k for k in self.dirty if k[0] == ino and first <= k[1] < last]:
            del self.dirty[key]
            self._durable_pages().setdefault(ino, {})[key[1]] = bytes(self.pages[ino][key[1]])
            self.durable.synced[key] = index
        if effect.meta:
            self._commit()

    def _commit(self) -> None:
        if not self.pending:
            return
        self._durable_pages()
        cut: Cuts = {}
        for op in self.pending:
            _apply_meta(op, self.durable.names, self.durable.lengths, cut)
        for ino, shrinks in cut.items():
            pages = self.durable.pages.get(ino, {})
            for page in list(pages):
                content = cut_page(pages[page], page, self.durable.synced.get((ino, page), -1), shrinks)
                if content is None:
                    del pages[page]
                else:
                    pages[page] = content
        self.pending.clear()

    def _power_cut(self) -> None:
        self.names = dict(self.durable.names)
        self.lengths = dict(self.durable.lengths)
        durable = self.durable.pages
        self.pages = {ino: {p: bytearray(b) for p, b in durable.get(ino, {}).items()} for ino in self.lengths}
        self.pending.clear()
        self.dirty.clear()

    # -- crash points ------------------------------------------------------------------------

    def point(self, index: int) -> CrashPoint:
        self._durable_dirty = False
        dirty = []
        for (ino, page), writes in sorted(self.dirty.items(), key=lambda kv: kv[1][-1]):
            key = (ino, page, self.versions[(ino, page)], self.durable.serial)
            found = self._page_cache.get(key)
            if found is None:
                content = bytes(self.pages[ino][page])
                base = self.durable.pages.get(ino, {}).get(page)
                found = DirtyPage(key[0], key[1], key[2], content, tuple(writes), base, torn_choices(base, content))
                self._page_cache[key] = found
            dirty.append(found)
        return CrashPoint(index, self._window, self.durable, tuple(self.pending), tuple(dirty), dict(self.paths))

    def volatile_files(self) -> dict[str, bytes]:
        """Every file's content as the running process sees it (for self-checks)."""
        out = {}
        for path, ino in self.names.items():
            length = self.lengths[ino]
            buf = bytearray(length)
            for page, content in self.pages[ino].items():
                start = page * PAGE
                if start < length:
                    buf[start : min(start + PAGE, length)] = content[: length - start]
            out[path] = bytes(buf)
        return out


def replay(effects: Sequence[Effect]) -> tuple[list[CrashPoint], FsModel]:
    """Crash points after every disk-changing effect (index = the effect's position)."""
    model = FsModel()
    points: list[CrashPoint] = [model.point(-1)]
    for index, effect in enumerate(effects):
        if model.apply(index, effect):
            points.append(model.point(index))
    return points, model


# -- states --------------------------------------------------------------------------------------


def cut_page(content: bytes, page: int, synced_at: int, shrinks: list[tuple[int, int]]) -> bytes | None:
    """A durable page after committed shrinks issued after it was synced (None: all gone)."""
    for length, at in shrinks:
        if at > synced_at:
            start = max(length - page * PAGE, 0)
            if start == 0:
                return None
            if start < PAGE:
                content = content[:start] + bytes(PAGE - start)
    return content


def state_files(state: CrashState) -> dict[str, tuple[int, dict[int, bytes]]]:
    """path -> (length, {page: content}) of the disk ``state`` describes (zero pages omitted)."""
    point = state.point
    names, lengths, cuts = point.namespace(state.prefix)
    chosen: dict[tuple[int, int], bytes] = {(d.ino, d.page): d.content for d in state.persisted}
    if state.torn is not None:
        page, k = state.torn
        chosen[(page.ino, page.page)] = page.torn(k)
    out: dict[str, tuple[int, dict[int, bytes]]] = {}
    for path, ino in names.items():
        length = lengths.get(ino, 0)
        npages = -(-length // PAGE)
        shrinks = cuts.get(ino)
        pages: dict[int, bytes] = {}
        durable = point.durable.pages.get(ino, {})
        for page in durable.keys() | {p for (i, p) in chosen if i == ino}:
            if page >= npages:
                continue
            content = chosen.get((ino, page))
            if content is None:
                content = durable[page]
                if shrinks is not None:
                    content = cut_page(content, page, point.durable.synced.get((ino, page), -1), shrinks)
            if content is not None and content != ZERO_PAGE:
                pages[page] = content
        out[path] = (length, pages)
    return out


def materialize(state: CrashState, directory: str | os.PathLike[str]) -> None:
    """Write the disk of ``state`` into ``directory`` (which must be empty or absent)."""
    root = str(directory)
    os.makedirs(root, exist_ok=True)
    for name in STORE_DIRS:
        os.makedirs(os.path.join(root, name), exist_ok=True)
    made = set()
    for path, (length, pages) in state_files(state).items():
        full = os.path.join(root, path)
        parent = os.path.dirname(full)
        if parent not in made:
            os.makedirs(parent, exist_ok=True)
            made.add(parent)
        fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            if length:
                os.ftruncate(fd, length)
            for page, content in pages.items():
                start = page * PAGE
                os.pwrite(fd, content[: length - start] if start + PAGE > length else content, start)
        finally:
            os.close(fd)


def read_tree(directory: str | os.PathLike[str]) -> dict[str, bytes]:
    """Every regular file under ``directory`` (relative ``/`` paths → content)."""
    root = Path(directory)
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# -- descriptions --------------------------------------------------------------------------------


def _span(page: DirtyPage) -> str:
    return f"[{page.page * PAGE}, {(page.page + 1) * PAGE})"


def _writes(indices: Iterable[int]) -> str:
    return ", ".join(f"#{i}" for i in indices)


def describe(state: CrashState) -> list[str]:
    """Which writes persisted: one line per file area and per pending metadata operation."""
    point = state.point
    lines = [f"power cut after effect #{point.index}"]
    dirty = point.dirty_for(state.prefix)
    persisted = {(d.ino, d.page) for d in state.persisted}
    torn_key = None if state.torn is None else (state.torn[0].ino, state.torn[0].page)
    for d in dirty:
        where = f"{point.paths.get(d.ino, f'inode {d.ino}')} {_span(d)}"
        if (d.ino, d.page) in persisted:
            lines.append(f"persisted    {where}: writes {_writes(d.writes)}")
        elif (d.ino, d.page) == torn_key:
            assert state.torn is not None
            k = state.torn[1]
            lines.append(f"torn         {where}: first {k} of {SECTORS} sectors of writes {_writes(d.writes)}")
        else:
            lines.append(f"lost         {where}: writes {_writes(d.writes)}")
    for i, op in enumerate(point.pending):
        done = "committed   " if i < state.prefix else "not done    "
        lines.append(f"{done} {_meta_text(op, point.paths)}")
    if len(lines) == 1:
        lines.append("nothing pending: the durable image only")
    return lines


def _meta_text(op: MetaOp, paths: dict[int, str]) -> str:
    if op[0] == "create":
        return f"create {op[1]}"
    if op[0] == "resize":
        return f"set length of {paths.get(op[1], op[1])} to {op[2]}"
    if op[0] == "unlink":
        return f"unlink {op[1]}"
    return f"rename {op[1]} -> {op[2]}"
