"""Durability and recovery: random histories of appends, flushes and crashes.

After every crash and reopen the CommitLog must be a prefix of what was
appended that contains every record acknowledged under SYNC (every record
appended before the last flush under ASYNC); the consume queues must index
exactly that prefix; appends continue at the right offsets; and the
directory passes ``store verify``.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqspec.impl.checkpoint import read_checkpoint
from rmqspec.impl.codec import SCHEDULE_TOPIC, DecodedRecord, MessageRecord
from rmqspec.impl.commitlog import ScanStop
from rmqspec.impl.mappedfile import StoreError
from rmqspec.impl.store import MessageStore, StoreConfig
from rmqspec.impl.verify import verify_store
from rmqspec.model.javahash import java_string_hash
from rmqspec.model.message import TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE

TOPICS = ("TopicA", "TopicB")
QUEUES = 2


@attrs.frozen
class Sent:
    topic: str
    queue_id: int
    body: bytes
    store_ts: int
    sys_flag: int


put_op = st.tuples(
    st.just("put"),
    st.sampled_from(TOPICS),
    st.integers(0, QUEUES - 1),
    st.binary(max_size=120),
    st.sampled_from([0, 0, 0, TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE, 0x8]),
)
crash_op = st.tuples(st.just("crash"), st.sampled_from(["kill", "power"]), st.booleans())
ops = st.lists(
    st.one_of(put_op, put_op, put_op, st.just(("flush",)), crash_op, st.just(("reopen",))),
    min_size=3,
    max_size=40,
)


def _all_records(store: MessageStore) -> list[DecodedRecord]:
    out = []
    for item in store.commitlog.scan(store.commitlog_min_offset, limit=store.commitlog_max_offset):
        if isinstance(item, ScanStop):
            assert item.error is None, item.error
            break
        out.append(item)
    return out


def _check_consistent(store: MessageStore, expected: list[Sent]) -> None:
    records = _all_records(store)
    assert [Sent(r.topic, r.queue_id, r.body, r.store_ts, r.sys_flag) for r in records] == expected
    by_queue: dict[tuple[str, int], list[DecodedRecord]] = {}
    for r in records:
        if r.sys_flag & 0xC in (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE):
            assert r.queue_offset == 0
            continue
        by_queue.setdefault((r.topic, r.queue_id), []).append(r)
    for topic in TOPICS:
        for qid in range(QUEUES):
            want = by_queue.get((topic, qid), [])
            assert [r.queue_offset for r in want] == list(range(len(want)))
            units = store.queue_units(topic, qid, 0, 10_000)
            assert [(u.queue_offset, u.commitlog_offset, u.size) for u in units] == [
                (r.queue_offset, r.commitlog_offset, r.size) for r in want
            ]
            assert store.max_offset(topic, qid) == len(want)


def _run_history(flush: str, history: list[tuple]) -> None:
    cfg = StoreConfig(commitlog_file_size=700, cq_file_size=60, flush=flush)
    with tempfile.TemporaryDirectory() as tmp:
        store = MessageStore.open(tmp, config=cfg)
        appended: list[Sent] = []  # what the store holds (model)
        durable = 0  # how many of ``appended`` must survive any crash
        ts = 1_000_000
        for op in history:
            if op[0] == "put":
                _, topic, qid, body, sys_flag = op
                ts += 1500
                hidden = sys_flag in (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE)
                expected_qoff = 0 if hidden else store.max_offset(topic, qid)
                res = store.put(MessageRecord(topic, qid, body, {"TAGS": "t"}, sys_flag=sys_flag, store_ts=ts))
                assert res.queue_offset == expected_qoff
                assert res.commitlog_offset >= store.commitlog_min_offset
                assert store.read(res.commitlog_offset).body == body
                appended.append(Sent(topic, qid, body, ts, sys_flag))
                if flush == "SYNC":
                    durable = len(appended)
            elif op[0] == "flush":
                store.flush()
                durable = len(appended)
            elif op[0] == "crash":
                _, kind, torn = op
                store.crash(kind, torn=torn)
                store = MessageStore.open(tmp, config=cfg)
                assert store.recovery is not None and store.recovery.kind in ("abnormal", "new")
                survived = _all_records(store)
                n = len(survived)
                if kind == "kill":
                    assert n == len(appended)
                assert durable <= n <= len(appended)
                appended = appended[:n]
                durable = n if flush == "SYNC" else min(durable, n)
                _check_consistent(store, appended)
            else:  # clean close and reopen
                store.close()
                store = MessageStore.open(tmp, config=cfg)
                assert store.recovery is not None and store.recovery.kind in ("normal", "new")
                durable = len(appended)
            _check_consistent(store, appended)
        store.close()
        report = verify_store(tmp)
        assert report.ok, report.findings
        assert report.stats["records"] == len(appended)


@given(history=ops)
@settings(max_examples=100)
def test_random_histories_sync(history: list[tuple]) -> None:
    _run_history("SYNC", history)


@given(history=ops)
@settings(max_examples=100)
def test_random_histories_async(history: list[tuple]) -> None:
    _run_history("ASYNC", history)


def _cfg(**kw: object) -> StoreConfig:
    return StoreConfig(commitlog_file_size=kw.pop("size", 1024), cq_file_size=60, **kw)  # type: ignore[arg-type]


def test_async_power_loss_loses_exactly_the_unflushed_tail(tmp_path: Path) -> None:
    store = MessageStore.open(tmp_path, config=_cfg(flush="ASYNC"))
    for i in range(5):
        store.put(MessageRecord("T", 0, b"%d" % i, store_ts=10_000 + i))
    store.flush()
    for i in range(5, 9):
        store.put(MessageRecord("T", 0, b"%d" % i, store_ts=10_000 + i))
    store.crash("power", torn=True)
    store = MessageStore.open(tmp_path, config=_cfg(flush="ASYNC"))
    report = store.recovery
    assert report is not None and report.kind == "abnormal"
    # a torn half record remains past the flushed bytes; recovery stops at it
    assert report.corrupt is not None
    n = store.max_offset("T", 0)
    assert 5 <= n < 9
    nxt = store.put(MessageRecord("T", 0, b"next", store_ts=20_000))
    assert nxt.queue_offset == n
    assert nxt.commitlog_offset == report.end_offset
    store.close()
    assert verify_store(tmp_path).ok


def test_a_torn_tail_keeps_the_unflushed_records_but_the_last(tmp_path: Path) -> None:
    """``torn_tail``: a power loss after the page cache wrote back the unflushed records but tore the
    last: recovery keeps the whole ones, drops the torn one, and rebuilds their consume queue units
    (lost with the queue's unflushed bytes) from the CommitLog."""
    store = MessageStore.open(tmp_path, config=_cfg(flush="ASYNC"))
    assert store.torn_tail() == 0, "nothing unflushed, nothing to tear"
    for i in range(3):
        store.put(MessageRecord("T", 0, b"%d" % i, store_ts=10_000 + i))
    store.flush()
    assert store.torn_tail() == 0
    puts = [store.put(MessageRecord("T", 0, b"x%d" % i, store_ts=10_010 + i)) for i in range(4)]
    keep = store.torn_tail()
    last = puts[-1].commitlog_offset
    assert last - puts[0].commitlog_offset < keep < store.commitlog.max_offset - puts[0].commitlog_offset
    store.crash("power", torn=keep)
    store = MessageStore.open(tmp_path, config=_cfg(flush="ASYNC"))
    assert store.recovery is not None and store.recovery.corrupt is not None
    assert store.max_offset("T", 0) == 6, "the three flushed and the three whole unflushed records"
    assert store.recovery.end_offset == last
    store.close()
    assert verify_store(tmp_path).ok


def test_kill_keeps_everything_and_leaves_abort(tmp_path: Path) -> None:
    store = MessageStore.open(tmp_path, config=_cfg(flush="ASYNC"))
    for i in range(30):
        store.put(MessageRecord("T", i % 3, b"x" * i, store_ts=10_000 + i * 1000))
    assert (tmp_path / "abort").exists()
    store.crash("kill")
    assert (tmp_path / "abort").exists()
    store = MessageStore.open(tmp_path, config=_cfg(flush="ASYNC"))
    assert store.recovery is not None and store.recovery.kind == "abnormal"
    assert [store.max_offset("T", q) for q in range(3)] == [10, 10, 10]
    store.close()
    assert not (tmp_path / "abort").exists()


def test_abnormal_recovery_rebuilds_lost_units_from_the_checkpoint(tmp_path: Path) -> None:
    """SYNC: the CommitLog is durable per put, the consume queues only at flush."""
    cfg = _cfg(flush="SYNC", size=400)
    store = MessageStore.open(tmp_path, config=cfg)
    for i in range(6):
        store.put(MessageRecord("T", 0, b"a" * 50, store_ts=100_000 + i * 10_000))
    store.flush()
    cp = read_checkpoint(tmp_path / "checkpoint")
    assert cp.physic_msg_timestamp == cp.logics_msg_timestamp == 150_000
    for i in range(6, 12):
        store.put(MessageRecord("T", 0, b"a" * 50, store_ts=100_000 + i * 10_000))
    store.crash("power")
    store = MessageStore.open(tmp_path, config=cfg)
    report = store.recovery
    assert report is not None and report.kind == "abnormal"
    assert report.scan_start > 0  # started at a later file, not from the beginning
    assert report.redispatched + report.reput == 6
    assert store.max_offset("T", 0) == 12
    store.close()
    assert verify_store(tmp_path).ok


def test_clock_going_backwards_lowers_the_checkpoint(tmp_path: Path) -> None:
    cfg = _cfg(flush="SYNC", size=300)
    store = MessageStore.open(tmp_path, config=cfg)
    for i in range(4):
        store.put(MessageRecord("T", 0, b"a" * 50, store_ts=1_000_000 + i))
    store.flush()
    for _ in range(4):  # clock went back: these open new files with old timestamps
        store.put(MessageRecord("T", 0, b"a" * 50, store_ts=5_000))
    assert read_checkpoint(tmp_path / "checkpoint").min_timestamp() < 5_000
    store.crash("power")
    store = MessageStore.open(tmp_path, config=cfg)
    assert store.max_offset("T", 0) == 8
    store.close()
    assert verify_store(tmp_path).ok


def test_transaction_types_and_schedule_tags_code(tmp_path: Path) -> None:
    with MessageStore.open(tmp_path, config=_cfg()) as store:
        half = store.put(MessageRecord("T", 0, b"h", sys_flag=TRANSACTION_PREPARED_TYPE))
        assert half.queue_offset == 0 and store.max_offset("T", 0) == 0
        a = store.put(MessageRecord("T", 0, b"a", {"TAGS": "x"}))
        rb = store.put(MessageRecord("T", 0, b"r", sys_flag=TRANSACTION_ROLLBACK_TYPE))
        c = store.put(MessageRecord("T", 0, b"c", sys_flag=0x8, prepared_txn_offset=half.commitlog_offset))
        assert (a.queue_offset, rb.queue_offset, c.queue_offset) == (0, 0, 1)
        units = store.queue_units("T", 0, 0, 10)
        assert [u.commitlog_offset for u in units] == [a.commitlog_offset, c.commitlog_offset]
        assert units[0].tags_code == java_string_hash("x")
        s = store.put(MessageRecord(SCHEDULE_TOPIC, 2, b"d", {"DELAY": "3", "TAGS": "x"}, store_ts=500))
        (unit,) = store.queue_units(SCHEDULE_TOPIC, 2, 0, 10)
        assert unit.tags_code == 500 + 10_000 and unit.commitlog_offset == s.commitlog_offset
        assert store.queues() == [(SCHEDULE_TOPIC, 2), ("T", 0)]
        assert store.min_offset("T", 0) == 0 and store.max_offset("none", 0) == 0
        assert store.read_queue("T", 0, 1, 5)[0].body == b"c"
        assert store.queue_units("T", 0, 5, 10) == []


def test_store_errors(tmp_path: Path) -> None:
    store = MessageStore.open(tmp_path, config=_cfg())
    store.put(MessageRecord("T", 0, b"x"))
    with pytest.raises(StoreError, match="locked"):
        MessageStore.open(tmp_path, config=_cfg())
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.put(MessageRecord("T", 0, b""))
    # files of another size
    with pytest.raises(StoreError, match="file size"):
        MessageStore.open(tmp_path, config=_cfg(size=2048)).close()
    (tmp_path / "commitlog" / "junk.txt").write_text("x")
    with pytest.raises(StoreError, match=r"junk\.txt"):
        MessageStore.open(tmp_path, config=_cfg())
    os.unlink(tmp_path / "commitlog" / "junk.txt")
    s2 = MessageStore.open(tmp_path, config=_cfg())
    with pytest.raises(ValueError, match="kind"):
        s2.crash("meteor")
    s2.close()
    with pytest.raises(ValueError, match="multiple of 20"):
        StoreConfig(cq_file_size=30)


@pytest.mark.parametrize("flush", ["SYNC", "ASYNC"])
def test_a_power_loss_of_every_consume_queue_file_rebuilds_the_queue_from_its_first_unit(
    tmp_path: Path, flush: str
) -> None:
    """31 units in 200-byte files (4 files), none flushed: RocketMQ reads only the last three and
    keeps offsets 0–9 as zero units (docs/fidelity.md, "RocketMQ trusts the consume-queue files before
    the last three"); rmqspec reads from the first. Under SYNC every record survives and every unit is
    rebuilt at its own offset; under ASYNC nothing survives and the queue starts again at 0."""
    cfg = StoreConfig(commitlog_file_size=4096, cq_file_size=200, flush=flush)
    store = MessageStore.open(tmp_path, config=cfg)
    put = [store.put(MessageRecord(topic="T", queue_id=0, body=b"m%d" % i, store_ts=1_700_000_000_000 + i))
           for i in range(31)]
    assert len(list((tmp_path / "consumequeue" / "T" / "0").iterdir())) == 4
    store.crash("power")
    store = MessageStore.open(tmp_path, config=cfg)
    units = store.queue_units("T", 0, 0, 40)
    if flush == "SYNC":
        assert [(u.commitlog_offset, u.size) for u in units] == [(p.commitlog_offset, p.size) for p in put]
    else:
        assert units == [] and store.max_offset("T", 0) == 0
        again = MessageRecord(topic="T", queue_id=0, body=b"again", store_ts=1_700_000_001_000)
        assert store.put(again).queue_offset == 0
    assert verify_store(tmp_path).ok
    store.close()
