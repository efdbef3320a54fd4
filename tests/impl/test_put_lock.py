"""The put lock's hold (``Capability.PUT_LOCK_HOLD``, seed D1): OS_PAGECACHE_BUSY, on the model and the mmap broker.

4.9.8 (``DefaultMessageStore.isOSPageCacheBusy``, ``SendMessageProcessor.rejectRequest`` /
``handlePutMessageResult``, ``EndTransactionProcessor.sendFinalMessage``; ``model/putlock.py``): a slow put holds
the put lock; held strictly longer than ``osPageCacheBusyTimeOutMills`` (and less than 10,000,000 ms) the store is
busy: a send arriving then is answered SYSTEM_BUSY "[REJECTREQUEST]…", a put reaching the store SYSTEM_ERROR,
nothing stored. Before the timeout a put would wait for the lock (not modelled: caller misuse, ``PutWouldWait``).
Both brokers run the same calls on one clock; their answers, trace rows and stores must agree.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqspec.impl.broker import MmapBroker
from rmqspec.model import BrokerConfig, Message, MessageQueue, ModelBroker
from rmqspec.model.protocol import Capability, PutLockBroker
from rmqspec.model.putlock import BUSY_GUARD_MS, REJECT_REMARK, LockState, PutLock, PutWouldWait
from rmqspec.model.results import PullStatus, ResponseCode, TxnAction
from rmqspec.properties.brokerconf import broker_conf_from_text, broker_config_from_conf
from tests.impl.test_broker_lockstep import Pair, ops, run_pair
from tests.impl.two_brokers import both, open_pair

Q = MessageQueue("T", 0)


def _pair(root: Path, config: BrokerConfig | None = None, broker: type[ModelBroker] = ModelBroker) -> tuple[Any, ...]:
    return open_pair(root, config or BrokerConfig(commitlog_file_size=4096), broker, groups=("g",))


def _both(model: ModelBroker, mmap: MmapBroker, fn: Any) -> Any:
    """``both``, a put that would wait for the lock answered "would wait" (caller misuse)."""
    out = both(model, mmap, fn, (PutWouldWait,))
    return "would wait" if out == ("misuse", "PutWouldWait") else out


def _count(model: ModelBroker, mmap: MmapBroker) -> int:
    assert len(model.records()) == mmap.commitlog_record_count()
    return mmap.commitlog_record_count()


def test_both_brokers_declare_the_capability(tmp_path: Path) -> None:
    _, model, mmap = _pair(tmp_path)
    for b in (model, mmap):
        assert Capability.PUT_LOCK_HOLD in b.capabilities
        assert isinstance(b, PutLockBroker)
    mmap.close()


def test_the_busy_test_is_strict_and_guarded() -> None:
    lock = PutLock()
    lock.hold(0, 2 * BUSY_GUARD_MS)
    assert lock.state(1000, 1000) is LockState.WAITING  # diff > timeout, strictly
    assert lock.state(1001, 1000) is LockState.BUSY
    assert lock.state(BUSY_GUARD_MS, 1000) is LockState.WAITING  # diff < 10,000,000: held, but not "busy"
    assert lock.state(2 * BUSY_GUARD_MS, 1000) is LockState.FREE  # the slow put completed
    with pytest.raises(ValueError):
        PutLock().hold(0, 0)


def test_broker_conf_sets_the_timeout() -> None:
    cfg = broker_config_from_conf(broker_conf_from_text("osPageCacheBusyTimeOutMills=50\n", "b.conf"))
    assert cfg.os_page_cache_busy_timeout_ms == 50
    assert BrokerConfig().os_page_cache_busy_timeout_ms == 1000


@pytest.mark.parametrize("flush", ["SYNC", "ASYNC"])
def test_a_busy_store_refuses_every_put_and_serves_reads(tmp_path: Path, flush: str) -> None:
    clock, model, mmap = _pair(tmp_path, BrokerConfig(flush=flush, commitlog_file_size=4096))
    half = _both(model, mmap, lambda b: b.send_half(Message("T", b"h"), 0, "pg"))
    sent = _both(model, mmap, lambda b: b.send(Message("T", b"a"), 0))
    _both(model, mmap, lambda b: b.send(Message("T", b"d", delay_level=1), 0))  # due in 1 s
    before = _count(model, mmap)
    _both(model, mmap, lambda b: b.hold_put_lock(5_000))
    assert _both(model, mmap, lambda b: b.send(Message("T", b"x"), 0)) == "would wait"
    clock.advance(1_000)
    assert _both(model, mmap, lambda b: b.tick()) == "would wait"  # its delivery would wait for the lock
    clock.advance(1)
    busy = ("refused", ResponseCode.SYSTEM_BUSY, REJECT_REMARK)
    assert _both(model, mmap, lambda b: b.send(Message("T", b"x"), 0)) == busy
    assert _both(model, mmap, lambda b: b.send_half(Message("T", b"x"), 0, "pg")) == busy
    assert _both(model, mmap, lambda b: b.send_batch([Message("T", b"x"), Message("T", b"y")], 0)) == busy
    _both(model, mmap, lambda b: b.send_oneway(Message("T", b"x"), 0))  # refused, unanswered
    assert _both(model, mmap, lambda b: b.send_back("g", sent.commitlog_offset, 0, None, None)) \
        is ResponseCode.SYSTEM_BUSY

    def end(b: Any, action: TxnAction) -> Any:
        return b.end_transaction("pg", half.commitlog_offset, half.queue_offset, action, False)

    assert _both(model, mmap, lambda b: end(b, TxnAction.COMMIT)) is ResponseCode.SYSTEM_ERROR  # the store's
    assert _both(model, mmap, lambda b: b.tick()) == []  # the due delayed copy is refused, kept for later
    pulled = _both(model, mmap, lambda b: b.pull("g", Q, 0, 32, "*"))
    assert pulled.status is PullStatus.FOUND and len(pulled.messages) == 1  # reads take no put lock
    assert _count(model, mmap) == before  # nothing stored while busy
    clock.advance(4_000)  # the slow put completed
    _both(model, mmap, lambda b: b.tick())
    assert _both(model, mmap, lambda b: b.pull("g", Q, 0, 32, "*")).messages[-1].body == b"d"
    assert _both(model, mmap, lambda b: end(b, TxnAction.COMMIT)) is ResponseCode.SUCCESS
    mmap.close()


def test_a_rollback_while_busy_is_answered_but_writes_no_op(tmp_path: Path) -> None:
    """deletePrepareMessage's result is dropped: SUCCESS, no op; the half stays to be checked (fidelity WR3)."""
    clock, model, mmap = _pair(tmp_path)
    half = _both(model, mmap, lambda b: b.send_half(Message("T", b"h"), 0, "pg"))
    before = _count(model, mmap)
    _both(model, mmap, lambda b: b.hold_put_lock(60_000))
    clock.advance(1_001)
    assert _both(model, mmap, lambda b: b.end_transaction(
        "pg", half.commitlog_offset, half.queue_offset, TxnAction.ROLLBACK, False)) is ResponseCode.SUCCESS
    assert _count(model, mmap) == before


@pytest.mark.parametrize("restart", ["close", "kill"])
def test_a_restart_ends_the_hold(tmp_path: Path, restart: str) -> None:
    clock, model, mmap = _pair(tmp_path)
    _both(model, mmap, lambda b: b.hold_put_lock(60_000))
    clock.advance(2_000)
    if restart == "close":
        _both(model, mmap, lambda b: b.close())
        _both(model, mmap, lambda b: b.reopen())
    else:
        _both(model, mmap, lambda b: b.crash("kill"))
        mmap.recover()
        model.recover(survivors=mmap.commitlog_record_count())
    assert _both(model, mmap, lambda b: b.send(Message("T", b"x"), 0)).queue_offset == 0
    mmap.close()


# -- drawn programs: holds between every other operation, both brokers step by step --------------------------

class LockPair(Pair):
    """``Pair`` with ``("hold", ms, past)``: a slow put of ``ms`` then ``past`` ms without a tick (no put waits:
    the driver never acts in the hold's first timeout ms). ``busy`` counts answers given while busy."""

    busy = 0

    def both(self, fn: Any) -> Any:
        result = super().both(fn)
        if result in (("refused", ResponseCode.SYSTEM_BUSY), ResponseCode.SYSTEM_BUSY):
            LockPair.busy += 1
        return result

    def step(self, op: tuple) -> None:
        if op[0] != "hold":
            super().step(op)
            return
        _, ms, past = op
        if self.model.store.put_lock.state(self.clock.now(), 1_000) is LockState.FREE:
            self.both(lambda b: b.hold_put_lock(ms))
            self.clock.advance(1_001 + past)


holds = st.tuples(st.just("hold"), st.sampled_from([1_500, 5_000, 30_000]), st.sampled_from([0, 500, 10_000]))


def test_brokers_with_slow_puts_match_step_by_step() -> None:
    LockPair.busy = 0

    @settings(max_examples=16, deadline=None)
    @given(program=st.lists(st.one_of(ops, holds, holds), min_size=15, max_size=40),
           flush=st.sampled_from(["SYNC", "ASYNC"]),
           version=st.sampled_from(["rocketmq-4.9", "rocketmq-5.1"]))  # 5.1: the op batch service's writes
    def run(program: list[tuple], flush: str, version: str) -> None:
        config = BrokerConfig(version=version, flush=flush, commitlog_file_size=2048, transaction_check_max=2)
        run_pair(program, config, pair_class=LockPair)

    run()
    assert LockPair.busy >= 5  # busy answers are reached, not only drawn


# -- broken brokers: each is caught in lockstep against the mmap broker --------------------------------------

class _NeverBusy(PutLock):
    def state(self, now: int, timeout_ms: int) -> LockState:  # the CHECK guard removed
        state = super().state(now, timeout_ms)
        return LockState.FREE if state is LockState.BUSY else state


class _BusyAtTheTimeout(PutLock):
    def state(self, now: int, timeout_ms: int) -> LockState:  # `>=` for isOSPageCacheBusy's `>`
        return super().state(now, timeout_ms - 1)


class AnswersOkWhileBusy(ModelBroker):
    """Stores what a busy store refuses (its puts neither rejected nor refused past the timeout)."""

    def hold_put_lock(self, ms: int) -> None:
        self.store.put_lock = _NeverBusy()
        super().hold_put_lock(ms)


class BusyAtTheTimeout(ModelBroker):
    """Busy once the hold reaches the timeout rather than passes it."""

    def hold_put_lock(self, ms: int) -> None:
        self.store.put_lock = _BusyAtTheTimeout()
        super().hold_put_lock(ms)


@pytest.mark.parametrize("broken", [AnswersOkWhileBusy, BusyAtTheTimeout])
def test_broken_brokers_are_caught_in_lockstep(tmp_path: Path, broken: type[ModelBroker]) -> None:
    clock, model, mmap = _pair(tmp_path, broker=broken)
    with pytest.raises(AssertionError):
        _both(model, mmap, lambda b: b.hold_put_lock(5_000))
        clock.advance(1_000)
        _both(model, mmap, lambda b: b.send(Message("T", b"x"), 0))
        clock.advance(1)
        _both(model, mmap, lambda b: b.send(Message("T", b"x"), 0))
    mmap.close()
