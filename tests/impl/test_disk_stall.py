"""A hung disk (``Capability.DISK_STALL``): FLUSH_DISK_TIMEOUT under SYNC_FLUSH, on the model and the mmap broker.

4.9.8 (``CommitLog.GroupCommitService.doCommit``, ``FlushDiskWatcher``, ``SendMessageProcessor``): a put that
waits for its flush and does not get it within ``syncFlushTimeout`` is answered FLUSH_DISK_TIMEOUT (code 10),
the message stored; the group commit's first pass after the disk recovers flushes it. Both brokers run the same
calls on one clock; their answers, trace rows and the survivors a power loss allows must agree, and the mmap
store's flushed position (the real msync) must not move while the disk hangs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rmqspec.impl.broker import MmapBroker
from rmqspec.model import BrokerConfig, ManualClock, Message, MessageQueue, ModelBroker
from rmqspec.model.protocol import Capability, StallBroker
from rmqspec.model.results import SendStatus
from tests.impl.two_brokers import open_pair


def _pair(root: Path, flush: str) -> tuple[ManualClock, ModelBroker, MmapBroker]:
    return open_pair(root, BrokerConfig(flush=flush, commitlog_file_size=4096), topics=(("T", 2),), groups=("G",))


def _send(brokers: tuple[ModelBroker, MmapBroker], body: bytes, wait: bool = True) -> SendStatus:
    statuses = set()
    for b in brokers:
        msg = Message(topic="T", body=body, uniq_key="K" + body.decode(), wait=None if wait else "false")
        statuses.add(b.send(msg, 0).status)
    assert len(statuses) == 1, statuses
    return statuses.pop()


def test_both_brokers_declare_the_capability(tmp_path: Path) -> None:
    _, model, mmap = _pair(tmp_path, "SYNC")
    for b in (model, mmap):
        assert Capability.DISK_STALL in b.capabilities
        assert isinstance(b, StallBroker)


def test_a_waiting_put_on_a_hung_disk_is_answered_flush_disk_timeout_and_stored(tmp_path: Path) -> None:
    clock, model, mmap = _pair(tmp_path, "SYNC")
    brokers = (model, mmap)
    assert _send(brokers, b"1") is SendStatus.SEND_OK
    flushed = mmap.store.flushed_offset
    for b in brokers:
        b.stall_disk(6_000)
    assert _send(brokers, b"2") is SendStatus.FLUSH_DISK_TIMEOUT
    assert _send(brokers, b"3", wait=False) is SendStatus.SEND_OK  # WAIT=false: answered without waiting
    clock.advance(1_000)
    for b in brokers:
        b.tick()  # the group commit's pass: the disk still hangs
    assert mmap.store.flushed_offset == flushed  # no msync reached the files
    assert model.recorder.events == mmap.recorder.events
    sends = [e for e in mmap.recorder.events if e.event == "send"]
    assert [e.status for e in sends] == ["SEND_OK", "FLUSH_DISK_TIMEOUT", "SEND_OK"]
    for b in brokers:  # stored: readable at once
        got = b.pull("G", MessageQueue("T", 0), 0, 32)
        assert [m.uniq_key for m in got.messages] == ["K1", "K2", "K3"]
    for b in brokers:
        b.crash("power")
    # a power loss during the stall may take everything written since the last flush
    assert model.recovery_choices() == mmap.recovery_choices() == range(1, 4)
    crash = [e for e in mmap.recorder.events if e.event == "crash"][-1]
    assert crash.detail["at_risk"] == ["K2", "K3"]


@pytest.mark.parametrize("wait_first", [True, False])
def test_the_first_group_commit_after_the_stall_flushes_its_backlog(tmp_path: Path, wait_first: bool) -> None:
    clock, model, mmap = _pair(tmp_path, "SYNC")
    brokers = (model, mmap)
    for b in brokers:
        b.stall_disk(5_000)
    assert _send(brokers, b"1") is SendStatus.FLUSH_DISK_TIMEOUT
    clock.advance(5_000)  # the stall ends
    if wait_first:  # a waiting put flushes everything written before it
        assert _send(brokers, b"2") is SendStatus.SEND_OK
    else:  # the group commit's pass at the next tick
        for b in brokers:
            b.tick()
    assert mmap.store.flushed_offset == mmap.store.commitlog_max_offset
    for b in brokers:
        b.crash("power")
    total = 2 if wait_first else 1
    assert model.recovery_choices() == mmap.recovery_choices() == range(total, total + 1)
    assert model.recorder.events == mmap.recorder.events


def test_async_flush_passes_wait_for_the_disk(tmp_path: Path) -> None:
    """ASYNC: no put waits (all answered SEND_OK); the FlushRealTimeService's passes flush nothing on a hung disk,
    and the first pass after it flushes as usual."""
    clock, model, mmap = _pair(tmp_path, "ASYNC")
    brokers = (model, mmap)
    for b in brokers:
        b.stall_disk(30_000)
    for i in range(3):
        assert _send(brokers, str(i).encode()) is SendStatus.SEND_OK
    for _ in range(3):  # thorough passes would be due: the disk hangs
        clock.advance(11_000)
        for b in brokers:
            b.tick()
    assert mmap.store.flushed_offset == 0
    assert model.durability.flushed == 0
    for _ in range(2):  # a pass sees what the previous pass saw
        clock.advance(11_000)
        for b in brokers:
            b.tick()
    assert mmap.store.flushed_offset == mmap.store.commitlog_max_offset
    assert model.durability.flushed == 3


def test_a_restart_or_a_flush_ends_the_stall(tmp_path: Path) -> None:
    _clock, model, mmap = _pair(tmp_path, "SYNC")
    brokers = (model, mmap)
    for b in brokers:
        b.stall_disk(60_000)
    assert _send(brokers, b"1") is SendStatus.FLUSH_DISK_TIMEOUT
    for b in brokers:
        b.flush()  # waits for the disk
    assert _send(brokers, b"2") is SendStatus.SEND_OK
    for b in brokers:
        b.stall_disk(60_000)
        b.crash("kill")
        b.recover()
    assert _send(brokers, b"3") is SendStatus.SEND_OK  # the machine came back with its disk
    assert model.recorder.events == mmap.recorder.events
