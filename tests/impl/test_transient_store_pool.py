"""TransientStorePool (seed D10, ``model/committing.py``): the mmap broker's real write buffers against the model.

- a drawn program (``test_broker_lockstep``'s operations) with ``transient_store_pool`` on runs on both brokers
  step for step: every result and trace event equal, a kill's survivors one the model allows;
- a kill loses an acknowledged record still in the write buffer, and keeps a committed one, in both brokers;
- an uncommitted record is neither pullable nor found by offset (END_TRANSACTION of an uncommitted half);
- the files are 4.9.8's format byte for byte (``store verify`` after every program; the committed bytes are the
  bytes a broker without the pool writes).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqspec.impl.broker import MmapBroker
from rmqspec.impl.verify import verify_store
from rmqspec.model import BrokerConfig, ListRecorder, ManualClock, Message, MessageQueue, ModelBroker
from rmqspec.model.results import PullStatus, ResponseCode, TxnAction
from tests.impl.test_broker_lockstep import START_MS, Pair, ops, run_pair

TSP = BrokerConfig(flush="ASYNC", transient_store_pool=True, commitlog_file_size=2048, transaction_check_max=2)
MQ = MessageQueue("T", 0)


@settings(max_examples=15, deadline=None)
@given(program=st.lists(ops, min_size=15, max_size=40))
def test_a_pooled_broker_matches_the_model_step_by_step(program):
    run_pair(program, TSP, commit_first=True)


@settings(max_examples=8, deadline=None)
@given(program=st.lists(ops, min_size=15, max_size=40))
def test_a_pooled_broker_with_large_files_matches_the_model(program):
    """Files larger than the four pages a least-pages commit needs: commits by pages and by the 200 ms rule."""
    run_pair(program, BrokerConfig(flush="ASYNC", transient_store_pool=True, commitlog_file_size=64 * 1024,
                                   transaction_check_max=2), commit_first=True)


def _send(b, body: bytes = b"m"):
    return b.send(Message("T", body), 0)


@pytest.fixture
def pair():
    with tempfile.TemporaryDirectory() as tmp:
        p = Pair(Path(tmp), TSP)
        p.both(lambda b: b.create_topic("T", 1))
        yield p
        if p.mmap.state == "RUNNING":
            p.mmap.close()


def test_an_uncommitted_record_is_acknowledged_but_not_consumable(pair):
    r = pair.both(_send)
    assert r.status.name == "SEND_OK"
    got = pair.both(lambda b: b.pull("g", MQ, 0, 32))
    assert got.status is PullStatus.NO_NEW_MSG and got.max_offset == 0
    pair.clock.advance(1)
    pair.both(lambda b: b.tick())  # the service's first pass is thorough: committed
    got = pair.both(lambda b: b.pull("g", MQ, 0, 32))
    assert [m.queue_offset for m in got.messages] == [0]


def test_a_kill_loses_an_acknowledged_uncommitted_record_and_keeps_a_committed_one(pair):
    committed = pair.both(_send)
    pair.clock.advance(1)
    pair.both(lambda b: b.tick())  # commits the first
    pair.clock.advance(50)
    pair.both(lambda b: b.tick())  # 50 ms later: not thorough, under four pages: nothing committed
    lost = pair.both(_send)
    assert lost.status.name == "SEND_OK" and lost.queue_offset == 1
    pair.both(lambda b: b.crash("kill"))
    crash = pair.model.recorder.events[-1]
    assert crash.event == "crash" and crash.detail["at_risk"] == [lost.uniq_key]
    assert pair.model.recovery_choices() == range(1, 2)
    pair.mmap.recover()
    assert pair.mmap.commitlog_record_count() == 1  # the write buffer went with the process
    pair.model.recover(survivors=1)
    got = pair.both(lambda b: b.pull("g", MQ, 0, 32))
    assert [m.uniq_key for m in got.messages] == [committed.uniq_key]


def test_without_the_pool_a_kill_keeps_everything():
    with tempfile.TemporaryDirectory() as tmp:
        p = Pair(Path(tmp), BrokerConfig(flush="ASYNC", commitlog_file_size=2048))
        p.both(lambda b: b.create_topic("T", 1))
        p.both(_send)
        p.both(lambda b: b.crash("kill"))
        assert p.model.recovery_choices() == range(1, 2)
        p.mmap.recover()
        assert p.mmap.commitlog_record_count() == 1
        p.mmap.close()


def test_end_transaction_of_an_uncommitted_half_finds_nothing(pair):
    """lookMessageByOffset reads through selectMappedBuffer, bounded by the read position."""
    half = pair.both(lambda b: b.send_half(Message("T", b"h"), 0, "pg"))
    code = pair.both(lambda b: b.end_transaction("pg", half.commitlog_offset, half.queue_offset,
                                                 TxnAction.COMMIT, False))
    assert code == ResponseCode.SYSTEM_ERROR
    pair.clock.advance(1)
    pair.both(lambda b: b.tick())
    code = pair.both(lambda b: b.end_transaction("pg", half.commitlog_offset, half.queue_offset,
                                                 TxnAction.COMMIT, False))
    assert code == ResponseCode.SUCCESS


def test_a_full_file_commits_and_the_files_match_a_broker_without_the_pool():
    """Rolling: a full file (its blank) commits at any pass; the bytes on disk are those an unpooled broker
    writes for the same puts."""
    roots = []
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        for root, cfg in ((a, TSP), (b, BrokerConfig(flush="ASYNC", commitlog_file_size=2048))):
            clock = ManualClock(START_MS)
            broker = MmapBroker.open(Path(root), clock, cfg, ListRecorder())
            broker.create_topic("T", 1)
            for i in range(20):
                broker.send(Message("T", bytes([65 + i]) * 100), 0)
            broker.close()
            assert verify_store(root).ok
            roots.append(Path(root))
        for f in sorted((roots[0] / "commitlog").iterdir()):
            assert f.read_bytes() == (roots[1] / "commitlog" / f.name).read_bytes()


def test_the_model_commits_a_full_file_at_a_pass_that_is_not_thorough():
    clock = ManualClock(START_MS)
    model = ModelBroker(clock, TSP, ListRecorder())
    model.create_topic("T", 1)
    clock.advance(1)
    model.tick()  # thorough: nothing to commit, the time noted
    sent = [_send(model, b"x" * 300) for _ in range(6)]  # rolls: the first file ends in a blank
    assert sent[-1].commitlog_offset >= 2048
    clock.advance(1)
    model.tick()
    first_file = [s for s in sent if s.commitlog_offset < 2048]
    assert model.pull("g", MQ, 0, 32).max_offset == len(first_file)


def test_the_flag_is_refused_under_sync():
    with pytest.raises(ValueError, match="ASYNC"):
        BrokerConfig(flush="SYNC", transient_store_pool=True)


def test_the_page_cache_never_holds_uncommitted_bytes(tmp_path):
    """The durable-effects recorder and the crash file system (``impl/crashfs.py``): a buffered append writes
    nothing to the file; the commit is the write. So every crash state the exploration derives from a pooled
    store lacks the uncommitted records, and a kill (the page cache kept) loses exactly them."""
    from rmqspec.impl import crashfs, effects
    from rmqspec.impl.codec import MessageRecord
    from rmqspec.impl.store import MessageStore, StoreConfig

    cfg = StoreConfig(commitlog_file_size=4096, cq_file_size=200, flush="ASYNC", transient_store_pool=True)
    root = tmp_path / "s"
    with effects.recording(root) as log:
        store = MessageStore.open(root, config=cfg)
        kept = store.put(MessageRecord("T", 0, b"kept", store_ts=1))
        store.commit_real_time(1)  # the first pass is thorough
        lost = store.put(MessageRecord("T", 0, b"lost", store_ts=2))
        store.crash("kill")
    _points, fs = crashfs.replay(log.effects)
    cl = fs.volatile_files()["commitlog/00000000000000000000"]
    assert cl[kept.commitlog_offset:kept.commitlog_offset + kept.size].count(0) < kept.size
    assert cl[lost.commitlog_offset:lost.commitlog_offset + lost.size] == bytes(lost.size)
    with MessageStore.open(root, config=cfg) as again:
        assert again.max_offset("T", 0) == 1 and again.commitlog_max_offset == kept.commitlog_offset + kept.size
