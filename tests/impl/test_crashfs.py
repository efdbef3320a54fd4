"""The page-cache file-system model (``impl/crashfs.py``) on hand-written effect streams."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmqspec.impl.crashfs import (
    PAGE,
    SECTOR,
    CrashState,
    ModelError,
    describe,
    materialize,
    read_tree,
    replay,
    state_files,
)
from rmqspec.impl.effects import Create, Mark, PowerCut, Rename, Resize, Sync, SyncDir, Unlink, Write


def _file(state: CrashState, path: str) -> bytes | None:
    files = state_files(state)
    if path not in files:
        return None
    length, pages = files[path]
    out = bytearray(length)
    for page, content in pages.items():
        out[page * PAGE : min((page + 1) * PAGE, length)] = content[: length - page * PAGE]
    return bytes(out)


def _created(path: str, size: int) -> list:
    return [Create(path), Resize(path, size), SyncDir("")]


def test_unsynced_pages_may_or_may_not_persist_synced_ones_always_do() -> None:
    effects = [*_created("f", 2 * PAGE), Write("f", 10, b"a"), Write("f", PAGE + 5, b"b"), Sync("f", 0, PAGE, False)]
    points, _ = replay(effects)
    before_sync, after_sync = points[-2], points[-1]
    assert [(d.page, d.writes) for d in before_sync.dirty] == [(0, (3,)), (1, (4,))]
    assert [d.page for d in after_sync.dirty] == [1]  # page 0 is durable now
    durable_only = CrashState(after_sync, 0, ())
    assert _file(durable_only, "f") == b"\0" * 10 + b"a" + bytes(2 * PAGE - 11)
    both = CrashState(after_sync, 0, after_sync.dirty)
    content = _file(both, "f")
    assert content is not None and content[PAGE + 5 : PAGE + 6] == b"b"


def test_a_torn_page_mixes_new_and_old_sectors() -> None:
    effects = [*_created("f", PAGE), Write("f", 0, b"x" * PAGE)]
    points, _ = replay(effects)
    (page,) = points[-1].dirty
    assert page.torn_choices() == tuple(range(1, 8))
    torn = CrashState(points[-1], 0, (), (page, 3))
    assert _file(torn, "f") == b"x" * (3 * SECTOR) + bytes(PAGE - 3 * SECTOR)
    assert "first 3 of 8 sectors" in "\n".join(describe(torn))
    # a write inside one sector has no torn variant distinct from lost or persisted
    single, _ = replay([*_created("g", PAGE), Write("g", 600, b"y" * 10)])
    assert single[-1].dirty[0].torn_choices() == ()


def test_metadata_commits_in_order_and_a_rename_is_atomic() -> None:
    effects = [
        *_created("cfg", 0),
        Resize("cfg", 3),
        Write("cfg", 0, b"old"),
        Sync("cfg", 0, 3, True),
        Create("cfg.tmp"),
        Resize("cfg.tmp", 3),
        Write("cfg.tmp", 0, b"new"),
        Sync("cfg.tmp", 0, 3, True),
        Rename("cfg", "cfg.bak"),
        Rename("cfg.tmp", "cfg"),
    ]
    points, _ = replay(effects)
    last = points[-1]
    assert len(last.pending) == 2
    seen = [(_file(CrashState(last, k, ()), "cfg"), _file(CrashState(last, k, ()), "cfg.bak")) for k in range(3)]
    assert seen == [(b"old", None), (None, b"old"), (b"new", b"old")]
    assert "not done     rename cfg.tmp -> cfg" in describe(CrashState(last, 1, ()))
    committed, _ = replay([*effects, SyncDir("")])
    assert committed[-1].pending == ()


def test_truncate_then_rewrite_in_place_can_leave_an_empty_or_zero_file() -> None:
    effects = [
        *_created("off", 0),
        Resize("off", 4),
        Write("off", 0, b"v1v1"),
        Sync("off", 0, 4, True),
        Resize("off", 0),
        Resize("off", 4),
        Write("off", 0, b"v2v2"),
    ]
    points, _ = replay(effects)
    last = points[-1]
    files = {k: _file(CrashState(last, k, ()), "off") for k in range(3)}
    assert files == {0: b"v1v1", 1: b"", 2: b"\0\0\0\0"}
    assert _file(CrashState(last, 2, last.dirty_for(2)), "off") == b"v2v2"


def test_unlink_waits_for_the_journal_and_power_cut_drops_the_page_cache() -> None:
    effects = [*_created("a", PAGE), Write("a", 0, b"z"), Unlink("a")]
    points, _ = replay(effects)
    assert _file(CrashState(points[-1], 0, ()), "a") == bytes(PAGE)
    assert _file(CrashState(points[-1], 1, ()), "a") is None
    after_cut, model = replay([*_created("b", PAGE), Write("b", 0, b"q"), PowerCut()])
    assert after_cut[-1].dirty == () and model.volatile_files() == {"b": bytes(PAGE)}


def test_marks_do_not_make_crash_points_and_bad_streams_are_refused() -> None:
    points, _ = replay([*_created("f", PAGE), Mark("ack"), Write("f", 0, b"x")])
    assert [p.index for p in points] == [-1, 0, 1, 2, 4]
    with pytest.raises(ModelError, match="effect 0: nope does not exist"):
        replay([Write("nope", 0, b"x")])
    with pytest.raises(ModelError, match="past the length"):
        replay([*_created("f", 4), Write("f", 2, b"xyz")])


def test_materialize_writes_the_state_sparsely(tmp_path: Path) -> None:
    name = "commitlog/00000000000000000000"
    effects = [*_created(name, 4 * PAGE), Write(name, 3 * PAGE, b"r")]
    points, _ = replay(effects)
    state = CrashState(points[-1], 0, points[-1].dirty)
    materialize(state, tmp_path / "s")
    tree = read_tree(tmp_path / "s")
    assert tree["commitlog/00000000000000000000"][3 * PAGE] == ord("r")
    assert (tmp_path / "s" / "consumequeue").is_dir() and (tmp_path / "s" / "config").is_dir()
    assert (tmp_path / "s" / "commitlog" / "00000000000000000000").stat().st_blocks * 512 < 4 * PAGE
