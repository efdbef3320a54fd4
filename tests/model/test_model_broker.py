"""ModelBroker specifics: RocketMQ property facts, events, ghost history, forks, crashes."""

from __future__ import annotations

import ast
import copy
from pathlib import Path

import pytest

from rmqspec.model import (
    BrokerConfig,
    ListRecorder,
    ManualClock,
    Message,
    MessageQueue,
    ModelBroker,
    PullStatus,
    ResponseCode,
    TxnAction,
    wellformed,
)
from rmqspec.model.events import EVENT_NAMES
from rmqspec.model.queues import OP_TOPIC, SCHEDULE_TOPIC

T = MessageQueue("T", 0)
START = 1_700_000_000_000


@pytest.fixture
def clock():
    return ManualClock(START)


@pytest.fixture
def rec():
    return ListRecorder()


@pytest.fixture
def broker(clock, rec):
    b = ModelBroker(clock, BrokerConfig(), rec)
    b.create_topic("T", 1)
    b.create_group("g")
    return b


def test_delayed_send_is_stored_in_the_schedule_topic_with_real_topic(broker, clock):
    result = broker.send(Message("T", b"x", delay_level=2), 0)
    (record,) = broker.records()
    assert (record.topic, record.queue_id, record.queue_offset) == (SCHEDULE_TOPIC, 1, 0)
    assert record.prop("REAL_TOPIC") == "T" and record.prop("REAL_QID") == "0"
    assert record.tags_code == START + 5_000
    assert result.queue_offset == 0


def test_fired_copy_keeps_delay_and_real_properties_as_rocketmq_4_9(broker, clock):
    broker.send(Message("T", b"x", tags="A", delay_level=1), 0)
    clock.advance(1_000)
    broker.tick()
    (msg,) = broker.pull("g", T, 0).messages
    assert msg.get_property("DELAY") == "1"
    assert msg.get_property("REAL_TOPIC") == "T"
    assert broker.records()[-1].tags_code != 0  # hash("A"), not the deliver time


def test_retry_and_dlq_copies_carry_rocketmq_properties(broker, clock):
    broker.send(Message("T", b"x", tags="A"), 0)
    original = broker.pull("g", T, 0).messages[0]
    broker.send_back("g", original.commitlog_offset, 0, None, None)
    retry = broker.records()[-1]
    assert retry.topic == SCHEDULE_TOPIC and retry.queue_id == 2
    props = retry.properties
    assert props["WAIT"] == "false" and props["DELAY"] == "3" and props["RETRY_TOPIC"] == "T"
    assert props["ORIGIN_MESSAGE_ID"] == original.msg_id
    assert props["REAL_TOPIC"] == "%RETRY%g" and retry.reconsume_times == 1
    assert retry.born_ts == original.born_ts
    broker.send_back("g", original.commitlog_offset, -1, None, None)
    dead = broker.records()[-1]
    assert dead.topic == "%DLQ%g" and dead.prop("DELAY") == "0"


def test_commit_and_op_records_match_rocketmq_facts(broker):
    half = broker.send_half(Message("T", b"tx", tags="A", delay_level=3), 0, "pg")
    record = broker.records()[-1]
    assert record.topic == "RMQ_SYS_TRANS_HALF_TOPIC" and record.sys_flag == 0
    assert "DELAY" not in record.properties and record.prop("TRAN_MSG") == "true"
    broker.end_transaction("pg", half.commitlog_offset, half.queue_offset, TxnAction.COMMIT, False)
    real, op = broker.records()[-2:]
    assert (real.topic, real.sys_flag, real.prepared_txn_offset) == (
        "T",
        0x8,
        half.commitlog_offset,
    )
    assert real.prop("TRAN_MSG") == "true" and real.prop("REAL_TOPIC") == "T"  # string built first
    assert op.topic == OP_TOPIC and op.body == b"0"
    assert op.properties == {"TAGS": "d", "WAIT": "true"}


def test_broker_assigns_uniq_key_deterministically(clock):
    keys = []
    for _ in range(2):
        b = ModelBroker(clock)
        b.create_topic("T", 1)
        keys.append([b.send(Message("T", b"x"), 0).uniq_key for _ in range(3)])
    assert keys[0] == keys[1] and len(set(keys[0])) == 3


def test_every_event_name_is_a_spec_event_and_sends_are_traced(broker, rec, clock):
    r = broker.send(Message("T", b"x"), 0)
    broker.pull("g", T, 0)
    broker.send_back("g", r.commitlog_offset, 1, None, None)
    clock.advance(1_000)
    broker.tick()
    broker.update_offset("g", T, 1)
    broker.lock_batch("g", "c1", [T])
    broker.unlock_batch("g", "c1", [T])
    half = broker.send_half(Message("T", b"t"), 0, "pg")
    broker.end_transaction(
        "pg", half.commitlog_offset, half.queue_offset, TxnAction.ROLLBACK, False
    )
    broker.crash("kill")
    broker.recover()
    names = [e.event for e in rec.events]
    assert set(names) <= EVENT_NAMES
    for name in (
        "store",
        "send",
        "deliver",
        "send_back",
        "schedule_fire",
        "commit_offset",
        "lock",
        "unlock",
        "txn_half",
        "txn_end",
        "crash",
        "recover",
    ):
        assert name in names, name
    (back,) = rec.of("send_back")
    assert (back.status, back.topic, back.queue_offset, back.reconsume_times) == (
        "RETRY",
        "T",
        0,
        1,
    )
    assert back.deliver_ts == START + 1_000 and back.msg_key == r.uniq_key
    scheduled = [e for e in rec.of("store") if e.topic == SCHEDULE_TOPIC]
    assert scheduled and all(e.deliver_ts is not None for e in scheduled)
    (end,) = rec.of("txn_end")
    assert end.detail == {"from_check": False} and end.txn_id == half.uniq_key
    assert [e.seq for e in rec.events] == list(range(len(rec.events)))


def test_ghost_history_records_what_happened(broker, clock):
    r = broker.send(Message("T", b"x"), 0)
    broker.pull("g", T, 0)
    broker.send_back("g", r.commitlog_offset, -1, None, None)
    ghost = broker.ghost
    assert [a.msg_key for a in ghost.acked] == [r.uniq_key]
    assert ghost.deliveries_of("g", r.uniq_key)[0].queue_offset == 0
    assert [s.route for s in ghost.sent_back] == ["DLQ"]


def test_broker_logic_never_reads_the_ghost_history():
    """The fence: model modules only call ``ghost.note_*`` (and create the history)."""
    model_dir = Path(__file__).resolve().parents[2] / "model"
    for path in model_dir.glob("*.py"):
        if path.name == "ghost.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Attribute)
                and node.value.attr == "ghost"
            ):
                assert node.attr.startswith("note_"), f"{path.name}:{node.lineno} reads ghost"


def test_fork_is_independent_and_shares_the_clock(broker, clock):
    broker.send(Message("T", b"x"), 0)
    twin = copy.deepcopy(broker)
    assert twin.clock is clock and twin.recorder is broker.recorder
    twin.send(Message("T", b"y"), 0)
    assert len(broker.records()) == 1 and len(twin.records()) == 2
    assert twin.records()[0] is broker.records()[0]  # immutable records are shared
    quiet = broker.fork()
    quiet.send(Message("T", b"z"), 0)
    assert len(broker.records()) == 1


def test_recovery_choices_by_flush_mode_and_crash_kind(clock):
    for flush, kind, expected in (
        ("SYNC", "power", range(4, 5)),
        ("ASYNC", "power", range(2, 5)),
        ("ASYNC", "kill", range(4, 5)),
    ):
        b = ModelBroker(clock, BrokerConfig(flush=flush))
        b.create_topic("T", 1)
        for i in range(2):
            b.send(Message("T", bytes([i])), 0)
        b.flush()
        for i in range(2):
            b.send(Message("T", bytes([i])), 0)
        b.crash(kind)
        assert b.recovery_choices() == expected
        forks = []
        for survivors in b.recovery_choices():
            f = b.fork()
            f.recover(survivors)
            assert wellformed.check(f) == []
            forks.append(f.pull("g", T, 0).max_offset)
        assert forks == list(expected)
    with pytest.raises(ValueError):
        b.recover(1)


def test_power_loss_truncates_and_the_next_record_continues_at_the_surviving_end(clock):
    b = ModelBroker(clock, BrokerConfig(flush="ASYNC"))
    b.create_topic("T", 1)
    first = b.send(Message("T", b"a"), 0)
    b.flush()
    b.send(Message("T", b"b"), 0)
    b.crash("power")
    b.recover(1)
    again = b.send(Message("T", b"c"), 0)
    assert again.commitlog_offset == b.records()[0].end
    assert again.queue_offset == 1 and first.queue_offset == 0
    assert b.ghost.crashes[0].lost != ()


def test_retry_queue_choice_is_recorded_and_can_be_forced(clock):
    b = ModelBroker(clock)
    b.create_topic("T", 1)
    b.create_group("g", retry_queue_nums=3)
    r = b.send(Message("T", b"x"), 0)
    assert b.retry_queue_choices("g") == range(3)
    b.force_retry_queue(2)
    assert b.send_back("g", r.commitlog_offset, 1, None, None) == ResponseCode.SUCCESS
    assert b.choices[-1].allowed == range(3) and b.choices[-1].taken == 2
    clock.advance(1_000)
    b.tick()
    assert b.pull("g", MessageQueue("%RETRY%g", 2), 0).status is PullStatus.FOUND


def test_wellformed_checks_can_fail(broker):
    """Prove the checks bite: corrupt copies of a good state are reported."""
    import attrs

    broker.send(Message("T", b"x"), 0)
    broker.send(Message("T", b"y"), 0)
    assert wellformed.check(broker) == []
    shifted = copy.deepcopy(broker)
    shifted.store.records[1] = attrs.evolve(shifted.store.records[1], commitlog_offset=7)
    assert any("commitlog_layout" in p for p in wellformed.check(shifted))
    gap = copy.deepcopy(broker)
    gap.store.queues[("T", 0)] = [1]
    assert any("dense_queues" in p for p in wellformed.check(gap))
    twice = copy.deepcopy(broker)
    twice.store.queues[("U", 0)] = [0]
    assert any("one_place" in p for p in wellformed.check(twice))
    assert wellformed.time_high_water(broker, broker.high_water_ts + 1)


def test_retry_queue_nums_zero_drops_the_send_back(clock):
    b = ModelBroker(clock)
    b.create_topic("T", 1)
    b.create_group("g", retry_queue_nums=0)
    r = b.send(Message("T", b"x"), 0)
    assert b.send_back("g", r.commitlog_offset, 0, None, None) == ResponseCode.SUCCESS
    assert len(b.records()) == 1
