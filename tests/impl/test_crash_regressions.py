"""Regression tests for the crash states exploration found (``impl/crashtest.py``), one per finding.

Each builds the damaged disk by hand, the way a power cut leaves it, and
checks what recovery keeps.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rmqspec.impl import effects
from rmqspec.impl.checkpoint import read_checkpoint
from rmqspec.impl.codec import MessageRecord, PutError
from rmqspec.impl.effects import Sync, Write
from rmqspec.impl.store import MessageStore, StoreConfig
from rmqspec.impl.verify import verify_store

CFG = StoreConfig(commitlog_file_size=8192, cq_file_size=600, flush="SYNC")
CL0 = Path("commitlog") / "00000000000000000000"


def _records(root: Path, n: int, *, body: bytes = b"payload-" * 20, cfg: StoreConfig = CFG) -> list[int]:
    with MessageStore.open(root, config=cfg) as store:
        offsets = [
            store.put(MessageRecord("T", 0, body, {"TAGS": "a", "KEYS": f"k{i}"}, store_ts=1000 + i)).commitlog_offset
            for i in range(n)
        ]
    (root / "abort").touch()  # as after a crash
    return offsets


def _zero(path: Path, start: int, end: int) -> None:
    with open(path, "r+b") as f:
        f.seek(start)
        f.write(bytes(end - start))


def test_a_record_whose_properties_tail_never_reached_the_disk_is_cut(tmp_path: Path) -> None:
    """The body CRC passes, the lengths agree, the properties end in zeros: RocketMQ keeps it."""
    offsets = _records(tmp_path, 3)
    end = os.path.getsize(tmp_path / CL0)
    with MessageStore.open(tmp_path, config=CFG) as store:
        last_end = store.commitlog_max_offset
    assert last_end < end
    _zero(tmp_path / CL0, last_end - 5, last_end)
    with MessageStore.open(tmp_path, config=CFG) as store:
        assert store.commitlog_max_offset == offsets[2]
        assert store.recovery is not None and store.recovery.corrupt is not None
        assert store.recovery.corrupt.code == "TRUNCATED"
        assert store.max_offset("T", 0) == 2
    assert verify_store(tmp_path).ok


def test_properties_ending_in_nul_are_refused_at_put(tmp_path: Path) -> None:
    with MessageStore.open(tmp_path, config=CFG) as store:
        with pytest.raises(PutError, match="NUL"):
            store.put(MessageRecord("T", 0, b"x", {"p": "v\0"}))
        store.put(MessageRecord("T", 0, b"x", {"p": "v\0w"}))  # only the very end matters


def test_data_after_a_lost_page_is_zeroed_so_it_cannot_come_back(tmp_path: Path) -> None:
    """A page written back before the one holding the end: recovery stops at zeros, then must clear the rest."""
    offsets = _records(tmp_path, 30)
    crossing = next(o for o in offsets if o // 4096 == 0 and (o + 232) // 4096 == 1)
    _zero(tmp_path / CL0, crossing, 4096)  # the record's first page never reached the disk
    with MessageStore.open(tmp_path, config=CFG) as store:
        end = store.commitlog_max_offset
    assert end == crossing
    assert not any((tmp_path / CL0).read_bytes()[end:])
    assert verify_store(tmp_path).ok


def test_a_consume_queue_unit_torn_at_a_sector_boundary_is_rebuilt(tmp_path: Path) -> None:
    """Unit 25 spans bytes 500-520: its offset and size before the 512-byte boundary, its tagsCode after."""
    _records(tmp_path, 30)
    cq = tmp_path / "consumequeue" / "T" / "0" / "00000000000000000000"
    good = cq.read_bytes()
    _zero(cq, 512, 600)  # the second sector was not written: unit 25 keeps offset and size
    with MessageStore.open(tmp_path, config=CFG) as store:
        assert store.max_offset("T", 0) == 30
    assert cq.read_bytes() == good
    assert verify_store(tmp_path).ok


def test_an_empty_last_file_and_an_empty_checkpoint_are_a_crash_not_corruption(tmp_path: Path) -> None:
    _records(tmp_path, 2)
    (tmp_path / "commitlog" / "00000000000000008192").touch()  # created, never sized
    (tmp_path / "checkpoint").write_bytes(b"")  # created, never written
    assert read_checkpoint(tmp_path / "checkpoint").physic_msg_timestamp == 0
    with MessageStore.open(tmp_path, config=CFG) as store:
        assert store.commitlog_max_offset > 0 and store.max_offset("T", 0) == 2
    assert os.path.getsize(tmp_path / "checkpoint") == 4096
    assert verify_store(tmp_path).ok


def test_a_blank_end_record_without_a_next_file_is_not_kept(tmp_path: Path) -> None:
    """RocketMQ's recovery ends before such a blank; the next append goes where the blank was or rolls."""
    cfg = StoreConfig(commitlog_file_size=1024, cq_file_size=600, flush="SYNC")
    offsets = _records(tmp_path, 6, body=b"b" * 200, cfg=cfg)
    assert offsets[-1] >= 1024  # rolled at least once
    for extra in sorted((tmp_path / "commitlog").iterdir())[1:]:
        extra.unlink()  # the file after the blank never made it to the disk
    with MessageStore.open(tmp_path, config=cfg) as store:
        end = store.commitlog_max_offset
        assert 0 < end < 1024 and store.max_offset("T", 0) == sum(1 for o in offsets if o < 1024)
        again = store.put(MessageRecord("T", 0, b"b" * 200, {"TAGS": "a"}, store_ts=9999))
        assert again.commitlog_offset == 1024  # does not fit: a new blank, a new file
    assert verify_store(tmp_path).ok


def test_what_recovery_kept_is_synced_before_anything_is_written_on_top(tmp_path: Path) -> None:
    """After a process crash the page cache may hold bytes never synced; later flushes start at the end."""
    _records(tmp_path, 25, cfg=StoreConfig(commitlog_file_size=8192, cq_file_size=600, flush="ASYNC"))
    with effects.recording(tmp_path) as log, MessageStore.open(tmp_path, config=CFG) as store:
        end = store.commitlog_max_offset
        store.put(MessageRecord("T", 0, b"later", {"TAGS": "a"}, store_ts=50_000))
        store.flush()
    assert end > 4096
    first_write = next(i for i, e in enumerate(log.effects) if isinstance(e, Write) and e.path != "lock")
    synced = {e.path: e for e in log.effects[:first_write] if isinstance(e, Sync)}
    assert synced[str(CL0)].start == 0 and synced[str(CL0)].end >= end
    assert synced["consumequeue/T/0/00000000000000000000"].start == 0


@pytest.mark.parametrize("first_cq_file_kept", [True, False])
def test_a_queue_whose_deleted_records_lost_their_units_resumes_at_its_first_kept_record(
    tmp_path: Path, first_cq_file_kept: bool
) -> None:
    """Retention took the file holding queue offset 0's record; a power loss took the queue's unflushed
    units (a store written as RocketMQ writes it: rmqspec's syncs the queues before it deletes a file).
    Recovery reads from the first kept file and finds queue offset 1 first: the queue resumes there,
    the unit before it a pre-blank below the min offset (before: StoreError "leaves a gap")."""
    cfg = StoreConfig(commitlog_file_size=4096, cq_file_size=200, flush="ASYNC")
    with MessageStore.open(tmp_path, config=cfg) as store:
        store.put(MessageRecord("T", 0, b"first", {"KEYS": "k0"}, store_ts=1000))
        while store.commitlog_max_offset < 4096 - 600:
            store.put(MessageRecord("F", 0, b"f" * 300, {}, store_ts=1001))
        store.put(MessageRecord("F", 0, b"f" * 1000, {}, store_ts=1002))  # rolls into file 1
        kept = store.put(MessageRecord("T", 0, b"second", {"KEYS": "k1"}, store_ts=1003))
        assert kept.commitlog_offset >= 4096 and kept.queue_offset == 1
        store.commitlog.files.flush()  # the CommitLog reached the disk, the consume queues did not
        store.commitlog.files.delete_first(1)  # as RocketMQ deletes: without syncing the queues first
        store.clean_queues()
        if not first_cq_file_kept:  # and the queue's (only) file went too, as a power loss can take it
            for cq_file in (tmp_path / "consumequeue" / "T" / "0").iterdir():
                cq_file.unlink()
        store.crash("power")
    with MessageStore.open(tmp_path, config=cfg) as store:
        assert store.recovery is not None and store.recovery.kind == "abnormal"
        assert (store.min_offset("T", 0), store.max_offset("T", 0)) == (1, 2)
        [record] = store.read_queue("T", 0, 1, 32)
        assert (record.body, record.queue_offset) == (b"second", 1)
        assert store.put(MessageRecord("T", 0, b"third", {}, store_ts=2000)).queue_offset == 2
    report = verify_store(tmp_path)
    assert report.ok, report


def test_retention_syncs_the_consume_queues_before_it_deletes_a_commitlog_file(tmp_path: Path) -> None:
    """A queue whose every record went keeps its offsets across a power loss: they are never handed out again."""
    cfg = StoreConfig(commitlog_file_size=4096, cq_file_size=200, flush="ASYNC")
    with MessageStore.open(tmp_path, config=cfg) as store:
        for i in range(2):
            store.put(MessageRecord("D", 0, b"gone", {}, store_ts=1000 + i))
        while store.commitlog_max_offset < 4096:
            store.put(MessageRecord("F", 0, b"f" * 300, {}, store_ts=1001))
        store.commitlog.files.flush()
        store.delete_files(1)
        store.clean_queues()
        store.crash("power")
    with MessageStore.open(tmp_path, config=cfg) as store:
        assert store.max_offset("D", 0) == 2
        assert store.put(MessageRecord("D", 0, b"new", {}, store_ts=2000)).queue_offset == 2
