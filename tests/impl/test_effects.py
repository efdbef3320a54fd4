"""The durable-effects recorder (``impl/effects.py``) and its hooks in the store."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmqspec.impl import crashfs, crashwork, effects
from rmqspec.impl.codec import MessageRecord
from rmqspec.impl.configfiles import write_atomically
from rmqspec.impl.effects import Create, Mark, Rename, Resize, Sync, SyncDir, Unlink, Write
from rmqspec.impl.store import MessageStore, StoreConfig

CFG = StoreConfig(commitlog_file_size=4096, cq_file_size=200, flush="SYNC")


def test_no_recorder_no_taps(tmp_path: Path) -> None:
    assert effects.active() is None and effects.tap_for(tmp_path / "x") is None
    with MessageStore.open(tmp_path, config=CFG) as store:
        store.put(MessageRecord("T", 0, b"b", store_ts=1))
        assert all(f.tap is None for f in store.commitlog.files.files)


def test_a_store_session_is_recorded_in_program_order(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with effects.recording(root) as log:
        with pytest.raises(RuntimeError, match="already recording"), effects.recording(tmp_path):
            pass
        store = MessageStore.open(root, config=CFG)
        put = store.put(MessageRecord("T", 0, b"body", {"TAGS": "a"}, store_ts=5))
        store.close()
    kinds = [type(e).__name__ for e in log.effects]
    # the lock file (created, then "lock" written durably: 4.9.8's start writes it), then recovery's mark
    assert kinds[:5] == ["Create", "Resize", "Write", "Sync", "Mark"]
    assert log.effects[2] == Write("lock", 0, b"lock")
    cl = "commitlog/00000000000000000000"
    cq = "consumequeue/T/0/00000000000000000000"
    assert Create(cl) in log.effects and Resize(cl, 4096) in log.effects
    write = next(e for e in log.effects if isinstance(e, Write) and e.path == cl)
    assert write.offset == put.commitlog_offset and len(write.data) == put.size
    after = log.effects[log.effects.index(write) :]
    assert after[1] == Mark("append", (("offset", 0), ("size", put.size)))
    assert any(isinstance(e, Write) and e.path == cq for e in after)
    assert Sync(cl, 0, put.size, False) in after  # SYNC: msync before the put returns
    assert Unlink("abort") in log.effects and log.effects[-1] == SyncDir("")
    # the recorder is closed: nothing more is added
    n = len(log.effects)
    with MessageStore.open(root, config=CFG) as again:
        again.put(MessageRecord("T", 0, b"more", store_ts=6))
    assert len(log.effects) == n and log.rel(tmp_path / "elsewhere") is None


def test_a_config_rewrite_is_two_renames_never_an_in_place_write(tmp_path: Path) -> None:
    path = tmp_path / "config" / "consumerOffset.json"
    with effects.recording(tmp_path) as log:
        write_atomically(path, "{}")
        write_atomically(path, '{"offsetTable":{}}')
    second = log.effects[log.effects.index(Mark("config_done", (("file", "config/consumerOffset.json"),))) + 1 :]
    assert [type(e).__name__ for e in second] == [
        "Mark",
        "Create",
        "Resize",
        "Write",
        "Sync",
        "Rename",
        "Rename",
        "SyncDir",
        "Mark",
    ]
    assert Rename("config/consumerOffset.json", "config/consumerOffset.json.bak") in second
    assert not any(isinstance(e, Write) and not e.path.endswith(".tmp") for e in log.effects)
    assert (tmp_path / "config" / "consumerOffset.json.bak").read_text() == "{}"


@pytest.mark.parametrize("name", [*crashwork.WORKLOADS, "random-60-3"])
def test_replaying_a_recorded_workload_rebuilds_the_real_files(tmp_path: Path, name: str) -> None:
    """The recorder misses nothing: the model's view after the last effect is the directory byte for byte."""
    workload = crashwork.random_workload(60, 3) if name.startswith("random") else crashwork.WORKLOADS[name]
    recording = crashwork.record(workload, tmp_path / "store")
    _points, model = crashfs.replay(recording.effects)
    assert model.volatile_files() == crashfs.read_tree(tmp_path / "store")
    again = crashwork.record(workload, tmp_path / "again")
    assert again.effects == recording.effects  # workloads are deterministic (manual clock)
