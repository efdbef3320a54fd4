"""MmapBroker on disk: what the records and config files hold, read back independently.

One scripted scenario (``full_scenario``: sends, filters, the retry ladder into
the DLQ, delayed delivery, transactions committed / rolled back / checked /
discarded / committed twice, locks, offsets) runs on a ``ModelBroker`` and on a
``MmapBroker`` sharing one clock. The tests then

- compare every observation and every SPEC §8 trace event of the two brokers;
- decode the mmap store with ``IndependentReader`` — a struct-based reader
  written here from the format facts of SPEC §5 (no ``impl`` code) — and
  check it record by record against the model's commitlog, and every
  consume-queue unit against the model's queues and tagsCodes;
- pin the RocketMQ facts the issue names through the store's own API: the
  retry copy waits in SCHEDULE_TOPIC_XXXX with DELAY and REAL_TOPIC=%RETRY%g
  and a tagsCode equal to its deliver time; an op body is the half's queue
  offset; a committed record is of type COMMIT with prepared_txn_offset = the
  half's commitlog offset; the config files have RocketMQ's shapes.
"""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path
from typing import Any

import attrs
import pytest

from rmqspec.impl.broker import MmapBroker
from rmqspec.impl.configfiles import parse_fastjson
from rmqspec.impl.store import MessageStore
from rmqspec.impl.verify import verify_store
from rmqspec.model import BrokerConfig, ListRecorder, ManualClock, Message, MessageQueue, ModelBroker
from rmqspec.model.javahash import java_string_hash
from rmqspec.model.results import BrokerError, ResponseCode, TxnAction

START_MS = 1_700_000_000_000
# Small files so the scenario rolls the commitlog; 2 checks before a half is discarded.
SCENARIO_CONFIG = BrokerConfig(commitlog_file_size=4096, transaction_check_max=2)
T0, T1 = MessageQueue("T", 0), MessageQueue("T", 1)
RETRY, DLQ = MessageQueue("%RETRY%g", 0), MessageQueue("%DLQ%g", 0)
SCHEDULE = "SCHEDULE_TOPIC_XXXX"


def attempt(fn: Any) -> Any:
    try:
        return fn()
    except BrokerError as e:
        return ("refused", e.code)


def full_scenario(b: Any, clock: ManualClock) -> list[Any]:
    """Drive ``b`` through every operation; returns the observations in order."""
    out: list[Any] = []
    b.create_topic("T", 2)
    b.create_group("g", retry_max_times=2)
    out.append(b.send(Message("T", b"plain", tags="A", keys=("k1", "k2"), properties={"u": "1"}), 0))
    out.append(b.send(Message("T", b"other", tags="B"), 1))
    out.append(b.send(Message("T", b"delayed", tags="A", delay_level=2), 0))
    out.append(attempt(lambda: b.send(Message(SCHEDULE, b"x"), 0)))
    first = b.pull("g", T0, 0)
    out.append(first)
    out.append(b.pull("g", T1, 0, subscription="A || C"))
    msg = first.messages[0]
    for _ in range(3):  # level 3, level 4, then the DLQ (retry_max_times = 2)
        out.append(b.send_back("g", msg.commitlog_offset, 0, msg.msg_id, None))
        clock.advance(30_000)
        out.append(b.tick())
        got = b.pull("g", RETRY, 0)
        out.append(got)
        if got.messages:
            msg = got.messages[-1]
    out.append(b.send_back("g", first.messages[0].commitlog_offset, -1, None, None))
    out.append(b.pull("g", DLQ, 0))
    out.append(b.pull("g", T0, 0))  # the delayed copy fired meanwhile
    halves = [b.send_half(Message("T", f"tx{i}".encode(), tags="X"), i % 2, "pg") for i in range(4)]
    out += halves
    h0, h1, h2 = halves[:3]
    commit, rollback = TxnAction.COMMIT, TxnAction.ROLLBACK
    out.append(b.end_transaction("pg", h0.commitlog_offset, h0.queue_offset, commit, False))
    out.append(b.end_transaction("pg", h0.commitlog_offset, h0.queue_offset, commit, False))
    out.append(b.end_transaction("pg", h1.commitlog_offset, h1.queue_offset, rollback, False))
    out.append(b.end_transaction("pg", h2.commitlog_offset, h2.queue_offset, TxnAction.UNKNOWN, False))
    out.append(b.end_transaction("zz", h2.commitlog_offset, h2.queue_offset, commit, False))
    for _ in range(4):
        clock.advance(60_000)
        requests = b.tick()
        out.append(requests)
        for r in requests:
            if r.message.body == b"tx2":
                out.append(
                    b.end_transaction(
                        r.producer_group, r.commitlog_offset, r.tran_state_table_offset, commit, True
                    )
                )
    out.append(b.pull("g", T0, 0))
    out.append(b.pull("g", T1, 0))
    out.append(attempt(lambda: b.pull("g", MessageQueue("TRANS_CHECK_MAX_TIME_TOPIC", 0), 0)))
    out.append(b.lock_batch("og", "c1", [T0, T1]))
    out.append(b.lock_batch("og", "c2", [T0]))
    b.unlock_batch("og", "c1", [T0])
    out.append(b.lock_batch("og", "c2", [T0]))
    b.update_offset("g", T0, 2)
    clock.advance(10_000)
    out.append(b.tick())
    out.append(b.query_offset("g", T0))
    out.append(b.query_offset("g", T1))
    b.flush()
    return out


@pytest.fixture
def ran(tmp_path: Path) -> tuple[ModelBroker, MmapBroker, list[Any], list[Any]]:
    clock = ManualClock(START_MS)
    model = ModelBroker(clock, SCENARIO_CONFIG, ListRecorder())
    mmap = MmapBroker.open(tmp_path, clock, SCENARIO_CONFIG, ListRecorder())
    expected = full_scenario(model, clock)
    clock.set(START_MS)  # replay the same timeline on the mmap broker
    actual = full_scenario(mmap, clock)
    return model, mmap, expected, actual


# -- the independent reader (SPEC §5 format facts, struct only) -------------------------------

MAGIC = 0xDAA320A7
BLANK = 0xCBD43194


@attrs.frozen
class RawRecord:
    commitlog_offset: int
    size: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    physical_offset: int
    sys_flag: int
    born_ts: int
    born_host: bytes
    store_ts: int
    store_host: bytes
    reconsume_times: int
    prepared_txn_offset: int
    body: bytes
    topic: str
    props: tuple[tuple[str, str], ...]


def _segments(directory: Path) -> list[tuple[int, bytes]]:
    names = sorted(os.listdir(directory))
    assert all(len(n) == 20 and n.isdigit() for n in names), names
    return [(int(n), (directory / n).read_bytes()) for n in names]


def read_commitlog(root: Path) -> list[RawRecord]:
    """Every record of ``root/commitlog``, file by file, blank markers checked."""
    records: list[RawRecord] = []
    files = _segments(root / "commitlog")
    for index, (start, data) in enumerate(files):
        assert index == 0 or start == files[index - 1][0] + len(files[index - 1][1])
        pos = 0
        while pos + 8 <= len(data):
            total, magic = struct.unpack_from(">iI", data, pos)
            if magic == BLANK:
                assert total == len(data) - pos, "a blank marker covers the rest of the file"
                break
            if total == 0 and magic == 0:
                assert index == len(files) - 1, "only the last file ends in zeros"
                assert not any(data[pos:]), "nothing after the end"
                break
            assert magic == MAGIC, f"bad magic at {start + pos}"
            records.append(_decode(data, pos, start))
            assert records[-1].size == total
            pos += total
    return records


def _decode(data: bytes, pos: int, base: int) -> RawRecord:
    (size, _magic, crc, qid, flag, qoff, phys, sysflag, born_ts) = struct.unpack_from(
        ">iIiiiqqiq", data, pos
    )
    p = pos + 48
    born_len = 20 if sysflag & 0x10 else 8
    born_host = data[p : p + born_len]
    p += born_len
    (store_ts,) = struct.unpack_from(">q", data, p)
    p += 8
    store_len = 20 if sysflag & 0x20 else 8
    store_host = data[p : p + store_len]
    p += store_len
    reconsume, prepared, body_len = struct.unpack_from(">iqi", data, p)
    p += 16
    body = data[p : p + body_len]
    p += body_len
    topic_len = data[p]
    topic = data[p + 1 : p + 1 + topic_len].decode()
    p += 1 + topic_len
    (props_len,) = struct.unpack_from(">h", data, p)
    p += 2
    text = data[p : p + props_len].decode()
    assert p + props_len - pos == size, "totalSize = the sum of the fields"
    assert crc == zlib.crc32(body) & 0x7FFFFFFF
    pairs = tuple(tuple(item.split("\x01", 1)) for item in text.split("\x02")) if text else ()
    return RawRecord(
        base + pos, size, crc, qid, flag, qoff, phys, sysflag, born_ts, born_host, store_ts,
        store_host, reconsume, prepared, body, topic, pairs,  # type: ignore[arg-type]
    )


def read_consume_queue(root: Path, topic: str, queue_id: int) -> list[tuple[int, int, int]]:
    """The units (commitlog offset, size, tagsCode) of one consume queue, up to the first zero unit."""
    units = []
    for _start, data in _segments(root / "consumequeue" / topic / str(queue_id)):
        for pos in range(0, len(data) - 19, 20):
            unit = struct.unpack_from(">qiq", data, pos)
            if unit == (0, 0, 0):
                return units
            units.append(unit)
    return units


# -- tests ----------------------------------------------------------------------------------


def test_every_observation_and_every_trace_event_matches_the_model(ran):
    model, mmap, expected, actual = ran
    assert actual == expected
    assert mmap.recorder.events == model.recorder.events
    kinds = {e.event for e in model.recorder.events}
    assert {"send", "store", "deliver", "send_back", "schedule_fire", "txn_half", "txn_end",
            "txn_check", "txn_discard", "lock", "unlock", "commit_offset"} <= kinds


def test_independent_reader_decodes_the_store_record_by_record(ran):
    model, mmap, _expected, _actual = ran
    root = mmap.root
    raw = read_commitlog(root)
    want = model.records()
    assert len(raw) == len(want) >= 25
    assert len(os.listdir(root / "commitlog")) >= 2  # the scenario rolled the commitlog
    for got, rec in zip(raw, want, strict=True):
        assert got.commitlog_offset == got.physical_offset == rec.commitlog_offset
        assert (got.size, got.topic, got.queue_id, got.queue_offset) == (
            rec.size, rec.topic, rec.queue_id, rec.queue_offset,
        )
        assert (got.body, got.flag, got.props, got.sys_flag) == (rec.body, rec.flag, rec.props, rec.sys_flag)
        assert (got.born_ts, got.store_ts, got.reconsume_times, got.prepared_txn_offset) == (
            rec.born_ts, rec.store_ts, rec.reconsume_times, rec.prepared_txn_offset,
        )
        assert got.store_host == bytes([127, 0, 0, 1]) + struct.pack(">i", 10911)
    queues = {(r.topic, r.queue_id) for r in want if r.sys_flag & 0xC in (0, 0x8)}
    for topic, queue_id in sorted(queues):
        units = read_consume_queue(root, topic, queue_id)
        entries = model.queue_messages(MessageQueue(topic, queue_id))
        assert [(u[0], u[1], u[2]) for u in units] == [
            (r.commitlog_offset, r.size, r.tags_code) for r in entries
        ], (topic, queue_id)


def test_the_retry_copy_waits_in_the_schedule_topic_with_its_deliver_time_as_tags_code(tmp_path):
    clock = ManualClock(START_MS)
    broker = MmapBroker.open(tmp_path, clock)
    broker.create_topic("T", 1)
    broker.create_group("g")
    broker.send(Message("T", b"x", tags="A"), 0)
    original = broker.pull("g", T0, 0).messages[0]
    clock.advance(500)
    assert broker.send_back("g", original.commitlog_offset, 0, original.msg_id, None) == 0
    broker.close()
    with MessageStore.open(tmp_path) as store:
        (unit,) = store.queue_units(SCHEDULE, 2, 0, 10)  # level 3 → queue 2
        copy = store.read(unit.commitlog_offset)
        assert copy.topic == SCHEDULE and copy.queue_id == 2
        assert copy.properties["DELAY"] == "3"
        assert copy.properties["REAL_TOPIC"] == "%RETRY%g"
        assert copy.properties["REAL_QID"] == "0"
        assert copy.properties["RETRY_TOPIC"] == "T"
        assert copy.properties["ORIGIN_MESSAGE_ID"] == original.msg_id
        assert copy.reconsume_times == 1
        assert unit.tags_code == copy.store_ts + 10_000 == START_MS + 500 + 10_000
    offsets = parse_fastjson((tmp_path / "config" / "delayOffset.json").read_text())
    assert offsets == {"offsetTable": {}}


def test_op_body_is_the_half_queue_offset_and_the_commit_points_at_the_half(tmp_path):
    clock = ManualClock(START_MS)
    broker = MmapBroker.open(tmp_path, clock)
    broker.create_topic("T", 1)
    halves = [broker.send_half(Message("T", b"h%d" % i, tags="X"), 0, "pg") for i in range(3)]
    h = halves[2]
    assert broker.end_transaction("pg", h.commitlog_offset, h.queue_offset, TxnAction.COMMIT, False) == 0
    broker.close()
    with MessageStore.open(tmp_path) as store:
        (half_unit,) = store.queue_units("RMQ_SYS_TRANS_HALF_TOPIC", 0, 2, 1)
        half = store.read(half_unit.commitlog_offset)
        assert half.commitlog_offset == h.commitlog_offset and half.queue_offset == 2
        assert half.properties["TRAN_MSG"] == "true" and half.properties["PGROUP"] == "pg"
        assert half.properties["REAL_TOPIC"] == "T" and half.sys_flag & 0xC == 0
        (op_unit,) = store.queue_units("RMQ_SYS_TRANS_OP_HALF_TOPIC", 0, 0, 10)
        op = store.read(op_unit.commitlog_offset)
        assert op.body == b"2" and op.properties["TAGS"] == "d"
        assert op_unit.tags_code == java_string_hash("d")
        (unit,) = store.queue_units("T", 0, 0, 10)
        real = store.read(unit.commitlog_offset)
        assert real.sys_flag & 0xC == 0x8  # TRANSACTION_COMMIT_TYPE
        assert real.prepared_txn_offset == h.commitlog_offset
        assert real.uniq_key == h.uniq_key and real.body == b"h2"
        assert unit.tags_code == java_string_hash("X")


def test_config_files_have_rocketmq_shapes(ran):
    _model, mmap, _expected, _actual = ran
    mmap.close()
    config = mmap.root / "config"
    topics = parse_fastjson((config / "topics.json").read_text())["topicConfigTable"]
    assert topics["T"]["readQueueNums"] == topics["T"]["writeQueueNums"] == 2
    assert topics["T"]["topicName"] == "T" and topics["T"]["perm"] == 6
    assert topics[SCHEDULE]["readQueueNums"] == 18
    assert {"%RETRY%g", "%DLQ%g", "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC",
            "TRANS_CHECK_MAX_TIME_TOPIC"} <= set(topics)
    groups = parse_fastjson((config / "subscriptionGroup.json").read_text())["subscriptionGroupTable"]
    assert groups["g"]["groupName"] == "g"
    assert (groups["g"]["retryMaxTimes"], groups["g"]["retryQueueNums"]) == (2, 1)
    offsets = parse_fastjson((config / "consumerOffset.json").read_text())["offsetTable"]
    assert offsets["T@g"] == {0: 2}
    assert offsets["RMQ_SYS_TRANS_HALF_TOPIC@CID_RMQ_SYS_TRANS"][0] >= 1
    assert "RMQ_SYS_TRANS_OP_HALF_TOPIC@CID_RMQ_SYS_TRANS" in offsets
    delay = parse_fastjson((config / "delayOffset.json").read_text())["offsetTable"]
    assert delay == {2: 1, 3: 1, 4: 1}
    assert not (mmap.root / "abort").exists()
    assert verify_store(mmap.root).ok


def test_reopen_reads_every_table_back(ran):
    model, mmap, _expected, _actual = ran
    for b in (model, mmap):
        b.close()
        b.reopen()
    assert mmap.recorder.events == model.recorder.events
    assert mmap.query_offset("g", T0) == model.query_offset("g", T0) == 2
    for mq in (T0, T1, RETRY, DLQ):
        assert mmap.pull("g", mq, 0) == model.pull("g", mq, 0)
    assert mmap.send_back("g", 0, 0, None, None) == model.send_back("g", 0, 0, None, None)
    assert mmap.commitlog_record_count() == len(model.records())


def test_refusals_match_the_model(tmp_path):
    clock = ManualClock(START_MS)
    config = BrokerConfig(commitlog_file_size=2048)
    model = ModelBroker(clock, config)
    mmap = MmapBroker.open(tmp_path, clock, config)
    for b in (model, mmap):
        b.create_topic("T", 1)
    big = Message("T", b"z" * 3000)
    # fits the producer's 32767-byte limit, not once the broker adds the half's properties
    near_limit = Message("T", b"p", properties={"k": "v" * 32_700}, uniq_key="A" * 32)
    # 2-byte characters: under 32767 Java chars, over 32767 UTF-8 bytes once the half's are added
    wide = Message("T", b"p", properties={"k": "é" * 16_330}, uniq_key="B" * 32)
    for fn in (
        lambda b: b.send(big, 0),
        lambda b: b.send_half(near_limit, 0, "pg"),
        lambda b: b.send_half(wide, 0, "pg"),
        lambda b: b.send(Message("%RETRY%nobody", b"r"), 0),
        lambda b: b.pull("g", T0, 0, subscription="||"),
        lambda b: b.end_transaction("pg", 0, 0, TxnAction.COMMIT, False),
    ):
        refused = attempt(lambda fn=fn: fn(mmap))
        assert refused == attempt(lambda fn=fn: fn(model))
        assert refused == 1 or refused[0] == "refused"  # SYSTEM_ERROR as a code, or refused
    # DefaultMessageStore.checkMessage counts Java chars first (MESSAGE_ILLEGAL); the encoder's
    # UTF-8 byte limit gives PROPERTIES_SIZE_EXCEEDED (both verified with oracle.sh write)
    assert attempt(lambda: mmap.send_half(near_limit, 0, "pg"))[1] == ResponseCode.MESSAGE_ILLEGAL
    assert attempt(lambda: mmap.send_half(wide, 0, "pg"))[1] == ResponseCode.PROPERTIES_SIZE_EXCEEDED
    mmap.close()
    with pytest.raises(BrokerError):
        mmap.send(Message("T", b"closed"), 0)
    with pytest.raises(RuntimeError):
        mmap.recover()
