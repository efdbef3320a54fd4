"""A commitlog file that cannot be created (``Capability.FILE_CREATE_FAULT``, seed D3): CREATE_MAPEDFILE_FAILED.

4.9.8 (``CommitLog.asyncPutMessage``, ``SendMessageProcessor.handlePutMessageResult``,
``EndTransactionProcessor.sendFinalMessage``; ``model/filefault.py``): a put that needs a new file the OS refuses
is answered SYSTEM_ERROR "create mapped file failed, server is busy or broken.", nothing stored; a roll wrote the
old file's blank end first, so every later put needs the file until it can be created. The mmap broker meets a
real obstacle (a directory at the file's path: its ``open`` fails with EEXIST); the model decides by
``FileFault``. Both run the same calls on one clock and must agree on every answer, trace row and offset; the
mmap store's bytes must be 4.9.8's (``store verify``) and a restart must recover.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqspec.impl.broker import MmapBroker
from rmqspec.impl.codec import BLANK_MAGIC
from rmqspec.impl.commitlog import FileCreateFailed
from rmqspec.impl.verify import verify_store
from rmqspec.model import BrokerConfig, Message, MessageQueue, ModelBroker
from rmqspec.model.filefault import CREATE_FILE_REMARK
from rmqspec.model.protocol import Capability, FileFaultBroker
from rmqspec.model.queues import FileFault, Store
from rmqspec.model.results import ResponseCode, TxnAction
from tests.impl.test_broker_lockstep import Pair, ops, run_pair
from tests.impl.two_brokers import both, open_pair

FILE = 4096
BODY = b"x" * 100  # a 256-byte record (T, no properties but the broker's): 16 per 4096-byte file, the last rolls
Q = MessageQueue("T", 0)


def _pair(root: Path, flush: str = "SYNC", broker: type[ModelBroker] = ModelBroker) -> tuple[Any, ...]:
    return open_pair(root, BrokerConfig(flush=flush, commitlog_file_size=FILE), broker)


_both = both


def _fill(model: ModelBroker, mmap: MmapBroker) -> int:
    """Send until a send is refused; returns how many were stored."""
    for n in range(64):
        if isinstance(_both(model, mmap, lambda b: b.send(Message("T", BODY), 0)), tuple):
            return n
    raise AssertionError("no send was refused")


def test_both_brokers_declare_the_capability(tmp_path: Path) -> None:
    _, model, mmap = _pair(tmp_path)
    for b in (model, mmap):
        assert Capability.FILE_CREATE_FAULT in b.capabilities
        assert isinstance(b, FileFaultBroker)
    mmap.close()


@pytest.mark.parametrize("flush", ["SYNC", "ASYNC"])
def test_a_roll_to_an_uncreatable_file_is_refused_and_leaves_the_blank(tmp_path: Path, flush: str) -> None:
    _, model, mmap = _pair(tmp_path, flush)
    assert _both(model, mmap, lambda b: b.block_next_file()) == FILE
    obstacle = tmp_path / "commitlog" / f"{FILE:020d}"
    assert obstacle.is_dir()  # a real obstacle where the file must go
    stored = _fill(model, mmap)
    assert stored == 15  # 15 × 256 bytes, then 256 + 8 > 256 left: the roll
    refused = _both(model, mmap, lambda b: b.send(Message("T", BODY), 0))
    assert refused == ("refused", ResponseCode.SYSTEM_ERROR, CREATE_FILE_REMARK)
    # the old file ends with its blank end record; the write position is the uncreatable file's start
    first = (tmp_path / "commitlog" / f"{0:020d}").read_bytes()
    assert struct.unpack(">ii", first[15 * 256:15 * 256 + 8]) == (256, BLANK_MAGIC)
    assert model.store.write_pos == mmap.store.commitlog.max_offset == FILE
    # a record that would have fitted before the blank needs the file too now
    small = _both(model, mmap, lambda b: b.send(Message("T", b"s"), 0))
    assert small[:2] == ("refused", ResponseCode.SYSTEM_ERROR)
    assert _both(model, mmap, lambda b: b.pull("g", Q, 0, 32, "*")).max_offset == 15
    _both(model, mmap, lambda b: b.unblock_next_file())
    assert not obstacle.exists()
    sent = _both(model, mmap, lambda b: b.send(Message("T", b"s"), 0))
    assert (sent.commitlog_offset, sent.queue_offset) == (FILE, 15)
    mmap.close()
    report = verify_store(tmp_path)
    assert report.ok, [f.line() for f in report.findings]


def test_the_mmap_broker_meets_a_real_os_error(tmp_path: Path) -> None:
    _, _model, mmap = _pair(tmp_path)
    mmap.block_next_file()
    with pytest.raises(FileCreateFailed) as refused:
        for _ in range(64):
            mmap.send(Message("T", BODY), 0)
    assert refused.value.code is ResponseCode.SYSTEM_ERROR
    assert "cannot open" in str(refused.value.cause)  # StoreError from os.open: EEXIST
    with pytest.raises(ValueError):
        mmap.block_next_file()  # one obstacle at a time: caller misuse
    mmap.close()


@pytest.mark.parametrize("restart", ["close", "kill", "power"])
def test_a_restart_resumes_before_the_blank_and_ends_the_fault(tmp_path: Path, restart: str) -> None:
    """No file follows the blank: recovery ends where it starts (recoverNormally / recoverAbnormally), so a
    record that fits goes back into the old file; the fault ended with the process."""
    _, model, mmap = _pair(tmp_path, "ASYNC" if restart == "power" else "SYNC")
    _both(model, mmap, lambda b: b.block_next_file())
    assert _fill(model, mmap) == 15
    _both(model, mmap, lambda b: b.flush())  # the full file, its blank included, on disk
    if restart == "close":
        _both(model, mmap, lambda b: b.close())
        _both(model, mmap, lambda b: b.reopen())
    else:
        _both(model, mmap, lambda b: b.crash(restart))
        mmap.recover()
        survivors = mmap.commitlog_record_count()
        assert survivors == 15
        model.recover(survivors=survivors)
        assert model.recorder.events == mmap.recorder.events
    assert not (tmp_path / "commitlog" / f"{FILE:020d}").exists()
    assert model.store.write_pos == mmap.store.commitlog.max_offset == 15 * 256
    sent = _both(model, mmap, lambda b: b.send(Message("T", b"s"), 0))
    assert sent.commitlog_offset == 15 * 256  # back in the old file, over the blank
    rolled = _both(model, mmap, lambda b: b.send(Message("T", BODY), 0))
    assert rolled.commitlog_offset == FILE  # the fault is gone: the roll creates the file
    mmap.close()
    report = verify_store(tmp_path)
    assert report.ok, [f.line() for f in report.findings]


def test_a_commit_needing_the_file_is_answered_system_error_and_can_be_ended_again(tmp_path: Path) -> None:
    """sendFinalMessage: CREATE_MAPEDFILE_FAILED → SYSTEM_ERROR; the half is not resolved (no op written)."""
    _, model, mmap = _pair(tmp_path)
    half = _both(model, mmap, lambda b: b.send_half(Message("T", BODY), 0, "pg"))
    _both(model, mmap, lambda b: b.block_next_file())
    _fill(model, mmap)

    def end(b: Any) -> Any:
        return b.end_transaction("pg", half.commitlog_offset, half.queue_offset, TxnAction.COMMIT, False)

    assert _both(model, mmap, end) is ResponseCode.SYSTEM_ERROR
    _both(model, mmap, lambda b: b.unblock_next_file())
    assert _both(model, mmap, end) is ResponseCode.SUCCESS
    stored = _both(model, mmap, lambda b: b.pull("g", Q, 0, 32, "*")).messages
    assert stored[-1].commitlog_offset == FILE and stored[-1].properties.get("TRAN_MSG") == "true"
    mmap.close()


def test_a_batch_needing_the_file_is_refused_whole(tmp_path: Path) -> None:
    _, model, mmap = _pair(tmp_path)
    _both(model, mmap, lambda b: b.block_next_file())
    for _ in range(6):
        _both(model, mmap, lambda b: b.send(Message("T", BODY), 0))
    batch = [Message("T", BODY) for _ in range(12)]  # does not fit the 10 left: the roll
    refused = _both(model, mmap, lambda b: b.send_batch(batch, 0))
    assert refused == ("refused", ResponseCode.SYSTEM_ERROR, CREATE_FILE_REMARK)
    assert _both(model, mmap, lambda b: b.pull("g", Q, 0, 32, "*")).max_offset == 6
    _both(model, mmap, lambda b: b.unblock_next_file())
    assert _both(model, mmap, lambda b: b.send_batch(batch, 0)).commitlog_offset == FILE
    mmap.close()


# -- drawn programs: the fault between every other operation, both brokers step by step ---------------------

class FaultPair(Pair):
    """``Pair`` with ``("block",)`` and ``("unblock",)``; one obstacle at a time, gone at a restart. ``refused``
    counts the puts answered CREATE_MAPEDFILE_FAILED's SYSTEM_ERROR (every ``FaultPair``)."""

    blocked = False
    refused = 0

    def both(self, fn: Any) -> Any:
        result = super().both(fn)
        if result == ("refused", ResponseCode.SYSTEM_ERROR):
            FaultPair.refused += 1
        return result

    def step(self, op: tuple) -> None:
        if op[0] == "block":
            if not self.blocked:
                self.both(lambda b: b.block_next_file())
                self.blocked = True
        elif op[0] == "unblock":
            self.both(lambda b: b.unblock_next_file())
            self.blocked = False
        else:
            if op[0] == "restart":
                self.blocked = False
            super().step(op)


sends = st.tuples(st.just("send"), st.integers(0, 1), st.integers(0, 2), st.sampled_from([0, 0, 0, 3]))
fault_ops = st.one_of(ops, sends, st.just(("block",)), st.just(("block",)), st.just(("unblock",)))


def test_brokers_with_an_uncreatable_file_match_step_by_step() -> None:
    FaultPair.refused = 0

    @settings(max_examples=16, deadline=None)
    @given(program=st.lists(fault_ops, min_size=15, max_size=40), flush=st.sampled_from(["SYNC", "ASYNC"]),
           version=st.sampled_from(["rocketmq-4.9", "rocketmq-5.1"]))  # 5.1: the op batch service's writes
    def run(program: list[tuple], flush: str, version: str) -> None:
        config = BrokerConfig(version=version, flush=flush, commitlog_file_size=1024, transaction_check_max=2)
        run_pair([("block",), *program, ("unblock",)], config, pair_class=FaultPair)

    run()
    assert FaultPair.refused >= 5  # the fault is reached, not only drawn


# -- broken brokers: each is caught in lockstep against the mmap broker --------------------------------------

class _StoresAnyway(FileFault):
    def refuses(self, pos: int) -> bool:  # the CHECK guard removed: the record is stored in a file never created
        return False


class _NoBlank(Store):
    def _check_creatable(self, pos: int) -> None:  # refuses, but the failed roll leaves no blank end
        if self.file_fault.refuses(pos):
            from rmqspec.model.queues import FileCreateFailed as ModelFileCreateFailed

            raise ModelFileCreateFailed()


class StoresDespiteFailedCreate(ModelBroker):
    """Answers SEND_OK for a record whose file could not be created."""

    def block_next_file(self) -> int:
        start = super().block_next_file()
        self.store.file_fault = _StoresAnyway(blocked=start)
        return start


class FailedRollWithoutBlank(ModelBroker):
    """Refuses the roll but writes no blank: a later record that fits goes into the old file."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.store.__class__ = _NoBlank


@pytest.mark.parametrize("broken", [StoresDespiteFailedCreate, FailedRollWithoutBlank])
def test_broken_brokers_are_caught_in_lockstep(tmp_path: Path, broken: type[ModelBroker]) -> None:
    _, model, mmap = _pair(tmp_path, broker=broken)
    with pytest.raises(AssertionError):
        _both(model, mmap, lambda b: b.block_next_file())
        for _ in range(20):
            _both(model, mmap, lambda b: b.send(Message("T", BODY), 0))
        _both(model, mmap, lambda b: b.send(Message("T", b"s"), 0))
    mmap.close()
