"""5.x timer messages on the mmap broker (``impl/timer_service.py``), in lockstep with the model.

Every scenario runs ``MmapBroker`` and ``ModelBroker`` on one clock: results, refusals
and the SPEC §8 events (``send`` / ``store`` with ``deliver_ts``, ``timer_fire``) must be
equal after every step, and the fired copies are compared as stored (properties string
included). Besides: the put hook's cases (fire at out + precision, DELAY wins, the max
delay, the disabled wheel, the 4.9 profile), ``config/timercheck`` byte for byte in
TimerCheckpoint's layout, the enqueue-times file, and a 4.9 store that this work left
byte for byte as it was. Restarts and crashes: ``tests/impl/test_timer_restart.py``.
"""

from __future__ import annotations

import hashlib
import importlib
import struct
import sys
from pathlib import Path

import attrs
import pytest

from rmqspec.impl.broker import MmapBroker
from rmqspec.impl.configfiles import parse_fastjson
from rmqspec.impl.timer_service import (
    ENQUEUE_TIMES_FILE,
    TIMER_CHECK_FILE,
    TIMER_CHECK_SIZE,
    TimerCheck,
    decode_enqueue_times,
    encode_enqueue_times,
    read_timer_check,
)
from rmqspec.impl.verify import verify_store
from rmqspec.model import ManualClock, Message, MessageQueue
from rmqspec.model.config import default_config
from rmqspec.model.message import encode_properties
from rmqspec.model.results import ResponseCode, TxnAction
from rmqspec.model.timer import ILLEGAL_REMARK, LONG_MAX, TIMER_TOPIC

sys.path.insert(0, str(Path(__file__).resolve().parent))
_pair = importlib.import_module("timer_pair")  # a helper module beside this test
Pair, config, START_MS, T0, T1, WHEEL = _pair.Pair, _pair.config, _pair.START_MS, _pair.T0, _pair.T1, _pair.WHEEL


# -- the put hook and the wheel ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("precision", "props", "requested"),
    [
        (1000, {"TIMER_DELAY_SEC": "3"}, START_MS + 3000),
        (1000, {"TIMER_DELAY_MS": "1877"}, START_MS + 1877),  # START + 1877 = ...2000: on a boundary
        (200, {"TIMER_DELAY_MS": "950"}, START_MS + 950),
        (500, {"TIMER_DELIVER_MS": str(START_MS + 4321)}, START_MS + 4321),
    ],
)
def test_a_timer_message_fires_at_out_plus_precision(tmp_path: Path, precision: int, props: dict, requested: int):
    pair = Pair(tmp_path, config(timer_precision_ms=precision))
    result = pair.send(1, **props)
    out = (requested - 1) // precision * precision  # the largest multiple strictly below
    due = out + precision
    assert result.queue_offset == 0
    (store,) = pair.events("store")
    assert (store.topic, store.queue_id, store.deliver_ts) == (TIMER_TOPIC, 0, due)
    (send,) = pair.events("send")
    assert (send.topic, send.queue_id, send.deliver_ts, send.delay_level) == ("T", 1, due, None)
    first_tick = START_MS + 1
    pair.tick_at(first_tick)  # enqueued into the wheel at this write time
    pair.tick_at(due - 1)
    assert pair.events("timer_fire") == []
    pair.tick_at(due)
    (fire,) = pair.events("timer_fire")
    assert (fire.ts, fire.deliver_ts, fire.topic, fire.queue_id) == (due, due, "T", 1)
    assert fire.detail == {"from_queue_offset": 0, "from_commitlog_offset": store.commitlog_offset}
    assert due >= requested
    (msg,) = pair.pull(T1).messages
    enqueue_ms = first_tick // precision * precision
    assert {k: msg.properties[k] for k in ("TIMER_OUT_MS", "REAL_TOPIC", "REAL_QID")} == {
        "TIMER_OUT_MS": str(out), "REAL_TOPIC": "T", "REAL_QID": "1"}
    assert (msg.properties["TIMER_ENQUEUE_MS"], msg.properties["TIMER_DEQUEUE_MS"]) == (str(enqueue_ms), str(due))
    pair.tick_at(due + 10 * precision)
    assert len(pair.events("timer_fire")) == 1


def test_a_copy_already_due_when_enqueued_carries_long_max(tmp_path: Path):
    pair = Pair(tmp_path, config())
    pair.send(0, TIMER_DELAY_MS="500")
    pair.tick_at(START_MS + 5000)  # enqueued and delivered by the same tick
    (msg,) = pair.pull(T0).messages
    assert msg.properties["TIMER_ENQUEUE_MS"] == str(LONG_MAX)


def test_the_delay_level_wins_over_timer_properties(tmp_path: Path):
    pair = Pair(tmp_path, config())
    pair.send(0, delay_level=2, TIMER_DELAY_SEC="60", TIMER_DELIVER_MS="1")
    (store,) = pair.events("store")
    assert (store.topic, store.queue_id, store.delay_level) == ("SCHEDULE_TOPIC_XXXX", 1, 2)
    pair.tick_at(START_MS + 5000)
    (msg,) = pair.pull(T0).messages
    assert not any(k.startswith("TIMER_") for k in msg.properties)
    assert pair.events("timer_fire") == [] and pair.mmap.queue_range(TIMER_TOPIC, 0) == (0, 0)


@pytest.mark.parametrize(
    "props",
    [{"TIMER_DELAY_SEC": "259201"}, {"TIMER_DELAY_MS": "abc"}, {"TIMER_DELIVER_MS": "1.5e12"},
     {"TIMER_DELAY_SEC": "99999999999999999999"}],
)
def test_an_illegal_timer_message_is_refused_and_nothing_is_written(tmp_path: Path, props: dict):
    pair = Pair(tmp_path, config())
    refused = pair.send(0, **props)
    assert refused == ("refused", ResponseCode.MESSAGE_ILLEGAL, ILLEGAL_REMARK.format(max_ms=259_200_000))
    assert pair.mmap.commitlog_record_count() == 0 and pair.events("store") == []


def test_the_max_delay_itself_is_accepted_and_a_past_time_is_stored_as_is(tmp_path: Path):
    pair = Pair(tmp_path, config(timer_max_delay_sec=60))
    assert pair.send(0, TIMER_DELAY_SEC="61")[1] is ResponseCode.MESSAGE_ILLEGAL
    pair.send(0, TIMER_DELAY_SEC="60")
    pair.send(1, TIMER_DELAY_MS="-5")
    pair.send(1, TIMER_DELIVER_MS=str(START_MS))
    assert [e.topic for e in pair.events("store")] == [TIMER_TOPIC, "T", "T"]
    assert len(pair.pull(T1).messages) == 2


def test_a_disabled_wheel_refuses_timer_messages(tmp_path: Path):
    pair = Pair(tmp_path, config(timer_wheel_enable=False))
    refused = pair.send(0, TIMER_DELAY_SEC="3")
    assert refused[:2] == ("refused", ResponseCode.SYSTEM_ERROR) and "timerWheelEnable is false" in refused[2]
    pair.send(0, delay_level=1, TIMER_DELAY_SEC="3")  # DELAY wins before the wheel is asked
    pair.send(0)
    assert pair.mmap.commitlog_record_count() == 2


def test_the_4_9_profile_ignores_timer_properties(tmp_path: Path):
    pair = Pair(tmp_path, config("rocketmq-4.9"))
    pair.send(0, TIMER_DELAY_SEC="3", TIMER_DELAY_MS="abc")
    (msg,) = pair.pull(T0).messages
    assert msg.properties["TIMER_DELAY_SEC"] == "3" and "TIMER_OUT_MS" not in msg.properties
    assert not pair.mmap.topic_exists(TIMER_TOPIC) and not pair.model.topic_exists(TIMER_TOPIC)
    pair.both(lambda b: b.close())
    assert not (tmp_path / "config" / TIMER_CHECK_FILE).exists()
    assert not (tmp_path / "config" / ENQUEUE_TIMES_FILE).exists()


def test_the_timer_topic_exists_from_start_like_the_schedule_topic(tmp_path: Path):
    pair = Pair(tmp_path, config())
    assert pair.mmap.topic_queue_nums()[TIMER_TOPIC] == 1 and pair.model.topic_exists(TIMER_TOPIC)
    topics = parse_fastjson((tmp_path / "config" / "topics.json").read_text())["topicConfigTable"]
    assert topics[TIMER_TOPIC]["readQueueNums"] == topics[TIMER_TOPIC]["writeQueueNums"] == 1
    assert pair.pull(WHEEL) == pair.pull(WHEEL)
    pair.send(0, TIMER_DELAY_SEC="2")
    (copy,) = pair.pull(WHEEL).messages
    assert copy.properties["REAL_TOPIC"] == "T"


def test_fired_copies_sent_back_or_to_the_dlq_are_not_timed_again(tmp_path: Path):
    pair = Pair(tmp_path, config())
    pair.send(0, TIMER_DELAY_SEC="2")
    pair.tick_at(START_MS + 1)
    pair.tick_at(START_MS + 3000)
    (fired,) = pair.pull(T0).messages
    assert pair.both(lambda b: b.send_back("g", fired.commitlog_offset, 0, fired.msg_id, None)) is ResponseCode.SUCCESS
    (retry_store,) = [e for e in pair.events("store") if e.topic == "SCHEDULE_TOPIC_XXXX"]
    pair.tick_at(retry_store.deliver_ts)
    (retry,) = pair.pull(MessageQueue("%RETRY%g", 0)).messages
    assert "TIMER_DELAY_SEC" not in retry.properties and retry.properties["TIMER_OUT_MS"]
    pair.both(lambda b: b.send_back("g", retry.commitlog_offset, 0, retry.msg_id, None))  # max 1: to the DLQ
    (dead,) = pair.pull(MessageQueue("%DLQ%g", 0)).messages
    assert dead.properties["TIMER_OUT_MS"] == fired.properties["TIMER_OUT_MS"]
    assert len(pair.events("timer_fire")) == 1 and pair.mmap.queue_range(TIMER_TOPIC, 0) == (0, 1)


def test_a_timer_half_is_timed_itself(tmp_path: Path):
    """5.x: parseHalfMessageInner makes the half of transaction type NOT, so the put hook times it
    with REAL_TOPIC = the half topic; it fires into the half topic (the model's reading)."""
    pair = Pair(tmp_path, config())
    msg = Message("T", b"half", properties={"TIMER_DELAY_SEC": "4"})
    half = pair.both(lambda b: b.send_half(msg, 1, "pg"))
    (copy,) = pair.pull(WHEEL).messages
    assert copy.commitlog_offset == half.commitlog_offset
    assert (copy.properties["REAL_TOPIC"], copy.properties["REAL_QID"]) == ("RMQ_SYS_TRANS_HALF_TOPIC", "0")
    pair.both(lambda b: b.end_transaction("pg", half.commitlog_offset, half.queue_offset, TxnAction.COMMIT, False))
    pair.tick_at(START_MS + 100)
    pair.tick_at(START_MS + 5000)
    (fire,) = pair.events("timer_fire")
    assert (fire.topic, fire.queue_id, fire.deliver_ts) == ("RMQ_SYS_TRANS_HALF_TOPIC", 0, 1_700_000_005_000)
    pair.tick_at(START_MS + 65_000)  # the check service meets the fired half


def test_a_refused_fire_waits_for_the_next_tick(tmp_path: Path):
    pair = Pair(tmp_path, config(version="rocketmq-5.0", commitlog_file_size=128 * 1024))
    pair.send(0, TIMER_DELAY_SEC="2")
    # a properties string that fits in the timer topic but not once TIMER_ENQUEUE_MS / _DEQUEUE_MS
    # (62 characters) are added: the real topic's put refuses it (checkMessage, 32767 characters)
    probe = pair.model.store.entry(TIMER_TOPIC, 0, 0)
    room = 32_767 - len(encode_properties(dict(probe.props))) - len("BIG") - 2
    assert pair.send(1, TIMER_DELAY_SEC="2", BIG="x" * (room - 40)).queue_offset == 1
    pair.send(0, TIMER_DELAY_SEC="2")
    pair.tick_at(START_MS + 1)
    pair.tick_at(START_MS + 3000)
    pair.tick_at(START_MS + 4000)
    assert [e.queue_id for e in pair.events("timer_fire")] == [0]  # the second blocks the slot
    assert pair.mmap.queue_range(TIMER_TOPIC, 0) == (0, 3)


# -- the files ------------------------------------------------------------------------------------


def _check_bytes(root: Path) -> bytes:
    return (root / "config" / TIMER_CHECK_FILE).read_bytes()


def test_timercheck_has_timercheckpoints_layout(tmp_path: Path):
    pair = Pair(tmp_path, config(timer_flush_interval_ms=1000))
    assert _check_bytes(tmp_path) == bytes(TIMER_CHECK_SIZE)  # created at start, like mapping it
    pair.send(0, TIMER_DELAY_SEC="5")
    pair.send(1, TIMER_DELAY_SEC="9")
    pair.tick_at(START_MS + 1000)  # enqueue both, persist (1 s since the start)
    data = _check_bytes(tmp_path)
    assert len(data) == TIMER_CHECK_SIZE and data[56:] == bytes(TIMER_CHECK_SIZE - 56)
    fields = struct.unpack(">7q", data[:56])
    queue_offset, read_ms = pair.model.timer.persisted
    assert (queue_offset, read_ms) == (2, 1_700_000_001_000)
    # lastReadTimeMs, lastTimerLogFlushPos, lastTimerQueueOffset, masterTimerQueueOffset, DataVersion
    assert fields == (read_ms, 0, queue_offset, queue_offset, 0, START_MS + 1000, 1)
    assert read_timer_check(tmp_path / "config" / TIMER_CHECK_FILE) == TimerCheck(*fields)
    pair.tick_at(START_MS + 1500)  # no persist: the interval has not elapsed
    assert _check_bytes(tmp_path) == data
    pair.tick_at(START_MS + 2000)  # persisted: the read time moved, the version too
    fields2 = struct.unpack(">7q", _check_bytes(tmp_path)[:56])
    assert fields2 == (1_700_000_002_000, 0, 2, 2, 0, START_MS + 2000, 2)
    pair.both(lambda b: b.close())
    assert struct.unpack(">7q", _check_bytes(tmp_path)[:56]) == fields2  # nothing moved: same version
    pair.clock.advance(500)
    pair.both(lambda b: b.reopen())
    pair.tick_at(pair.clock.now() + 1000)
    # prepareTimerCheckPoint commits anew after each start (its last committed values start at 0)
    fields3 = struct.unpack(">7q", _check_bytes(tmp_path)[:56])
    assert fields3[1:5] == (0, 2, 2, 0) and fields3[6] == 3 and fields3[5] == pair.clock.now()
    assert (fields3[2], fields3[0]) == pair.model.timer.persisted


def test_a_short_or_missing_timercheck_reads_as_zeros(tmp_path: Path):
    path = tmp_path / TIMER_CHECK_FILE
    assert read_timer_check(path) is None
    path.write_bytes(struct.pack(">q", 77))
    assert read_timer_check(path) == TimerCheck(last_read_time_ms=77)
    assert TimerCheck.decode(TimerCheck(1, 2, 3, 4, 5, 6, 7).encode()) == TimerCheck(1, 2, 3, 4, 5, 6, 7)


def test_the_enqueue_times_file_holds_the_times_a_restart_needs(tmp_path: Path):
    pair = Pair(tmp_path, config(timer_flush_interval_ms=1000))
    pair.send(0, TIMER_DELAY_MS="1500")  # due at ...2000
    pair.send(1, TIMER_DELAY_SEC="30")
    pair.tick_at(START_MS + 1000)
    path = tmp_path / "config" / ENQUEUE_TIMES_FILE
    table = decode_enqueue_times(parse_fastjson(path.read_text()))
    assert table == {0: 1_700_000_001_000, 1: 1_700_000_001_000} == pair.model.timer.enqueue_times
    fastjson = '{\n\t"enqueueTimeTable":{\n\t\t0:1700000001000,\n\t\t1:1700000001000\n\t}\n}'
    assert path.read_text() == encode_enqueue_times(table) == fastjson
    pair.tick_at(START_MS + 2500)  # offset 0 fired; persisted: its slot is below the read time now
    pair.tick_at(START_MS + 3500)  # the next persist writes the table without it
    assert decode_enqueue_times(parse_fastjson(path.read_text())) == {1: 1_700_000_001_000}
    assert verify_store(tmp_path).ok


def test_a_4_9_store_is_byte_for_byte_what_it_was_before_timers(tmp_path: Path):
    """The digest was taken with the mmap broker of commit 96d6265 (before impl/timer_service.py)."""
    clock = ManualClock(1_700_000_000_000)
    broker = MmapBroker.open(tmp_path, clock, attrs.evolve(default_config("rocketmq-4.9"), commitlog_file_size=4096))
    broker.create_topic("T", 2)
    broker.create_group("g")
    for i in range(12):
        props = ({"TIMER_DELAY_SEC": "3"}, {"TIMER_DELIVER_MS": str(clock.now() + 5000)}, {"TIMER_DELAY_MS": "abc"})
        broker.send(Message("T", f"b{i}".encode(), tags="A", properties=props[i % 3], delay_level=int(i % 4 == 0)),
                    i % 2)
        clock.advance(700)
        broker.tick()
    pulled = broker.pull("g", MessageQueue("T", 0), 0, 32)
    for m in pulled.messages[:2]:
        broker.send_back("g", m.commitlog_offset, 0, m.msg_id, None)
    broker.update_offset("g", MessageQueue("T", 0), pulled.next_begin_offset)
    for _ in range(20):
        clock.advance(1000)
        broker.tick()
    broker.close()
    digest = hashlib.sha256()
    for p in sorted(tmp_path.rglob("*")):
        if p.is_file() and p.name != "lock":
            digest.update(str(p.relative_to(tmp_path)).encode() + b"\0" + p.read_bytes())
    assert digest.hexdigest() == "22590f9cb04ad8b3982657f7fed29ce7902a546ef8f8c9a9650d5e0b36100908"
