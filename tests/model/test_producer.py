"""The reference producer against the real ModelBroker: keys, selection, retries, transactions."""

from __future__ import annotations

import re

import pytest

from rmqspec.model.broker import ModelBroker
from rmqspec.model.client_timers import Driver
from rmqspec.model.clock import ManualClock
from rmqspec.model.config import BrokerConfig
from rmqspec.model.directory import Directory
from rmqspec.model.events import ListRecorder
from rmqspec.model.ids import UniqKeyFactory
from rmqspec.model.javahash import java_string_hash, select_queue_by_hash
from rmqspec.model.link import Link, RequestLost
from rmqspec.model.message import Message, MessageQueue
from rmqspec.model.producer import RETRY_RESPONSE_CODES, Producer, SendFailed, TransactionProducer, _retryable
from rmqspec.model.results import BrokerError, PullStatus, ResponseCode, TxnAction


@pytest.fixture
def world():
    clock = ManualClock(1_700_000_000_000)
    recorder = ListRecorder()
    broker = ModelBroker(clock, recorder=recorder)
    directory = Directory()
    directory.create_topic(broker, "T", 4)
    return clock, broker, directory, recorder


def visible(broker, topic="T", queues=4):
    out = []
    for q in range(queues):
        r = broker.pull("probe", MessageQueue(topic, q), 0, 32)
        if r.status is PullStatus.FOUND:
            out.extend(r.messages)
    return out


def test_uniq_key_is_assigned_once_and_kept_across_a_retry(world):
    clock, broker, directory, _ = world
    link = Link(broker)
    p = Producer(link, clock, directory, "P", uniq_keys=UniqKeyFactory(pid=7))
    link.fail("send", times=1)
    result = p.send(Message("T", b"x"))
    assert re.fullmatch(r"[0-9A-F]{32}", result.uniq_key)
    assert link.lost["send"] == 1
    [stored] = visible(broker)
    assert stored.uniq_key == result.uniq_key
    assert stored.queue_id == 1  # the lost attempt used queue 0, the retry the next one
    again = Producer(Link(broker), clock, directory, "P", uniq_keys=UniqKeyFactory(pid=7))
    assert again.stamp(Message("T", b"y")).uniq_key == result.uniq_key  # deterministic


def test_round_robin_per_topic(world):
    clock, broker, directory, _ = world
    p = Producer(broker, clock, directory, "P")
    assert [p.send(Message("T", b"%d" % i)).queue_offset for i in range(5)] == [0, 0, 0, 0, 1]
    assert sorted(m.queue_id for m in visible(broker)) == [0, 0, 1, 2, 3]


def test_hash_selector_uses_java_string_hash(world):
    clock, broker, directory, _ = world
    p = Producer(broker, clock, directory, "P")
    key = "order-42"
    expected = abs(java_string_hash(key)) % 4
    assert p.select_queue("T", key) == expected == select_queue_by_hash(key, 4)
    for i in range(3):
        p.send(Message("T", b"%d" % i), sharding_key=key)
    assert {m.queue_id for m in visible(broker)} == {expected}


def test_explicit_queue_is_tried_once(world):
    clock, broker, directory, _ = world
    link = Link(broker)
    p = Producer(link, clock, directory, "P")
    assert p.send(Message("T", b"a"), queue_id=3).queue_offset == 0
    link.fail("send", times=1)
    with pytest.raises(RequestLost):
        p.send(Message("T", b"b"), queue_id=3)


def test_send_fails_after_one_plus_retry_times_attempts(world):
    clock, broker, directory, _ = world
    link = Link(broker)
    p = Producer(link, clock, directory, "P", retry_times_when_send_failed=2)
    link.fail("send")
    with pytest.raises(SendFailed) as info:
        p.send(Message("T", b"x"))
    assert len(info.value.errors) == 3
    assert visible(broker) == []


def test_create_mapped_file_failed_is_retried_and_system_busy_is_not():
    """4.9.8 DefaultMQProducer.retryResponseCodes (17, 14, 1, 16, 204, 205; javap): SYSTEM_ERROR, which a
    commitlog file that cannot be created answers (model/filefault.py), is sent again on the next queue;
    SYSTEM_BUSY (2) is not (sendDefaultImpl throws it at once; only 5.3.3 retries it)."""
    clock = ManualClock(1_700_000_000_000)
    broker = ModelBroker(clock, BrokerConfig(commitlog_file_size=16_384))
    directory = Directory()
    directory.create_topic(broker, "T", 4)
    p = Producer(broker, clock, directory, "P", retry_times_when_send_failed=2)
    broker.block_next_file()
    failed = None
    for _ in range(8):  # three 4 KiB records fit the first file; the fourth needs the uncreatable one
        try:
            p.send(Message("T", b"x" * 4000))
        except SendFailed as exc:
            failed = exc
            break
    assert failed is not None
    assert [e.code for e in failed.errors] == [ResponseCode.SYSTEM_ERROR] * 3  # one try and two retries
    broker.unblock_next_file()
    assert p.send(Message("T", b"y")).commitlog_offset == 16_384
    assert _retryable(BrokerError(ResponseCode.SYSTEM_ERROR, "create mapped file failed, server is busy or broken."))
    assert not _retryable(BrokerError(ResponseCode.SYSTEM_BUSY, "[REJECTREQUEST]system busy"))
    assert {c.value for c in RETRY_RESPONSE_CODES} == {17, 14, 1, 16}


def test_send_events_are_recorded_once(world):
    clock, broker, directory, recorder = world
    Producer(broker, clock, directory, "P").send(Message("T", b"x"))
    assert len(recorder.of("send")) == 1  # the ModelBroker's; the producer defers to it
    silent = ListRecorder()
    own = Producer(broker, clock, directory, "P", recorder=silent, broker_records_events=False)
    result = own.send(Message("T", b"y"), sharding_key="k")
    [ev] = silent.of("send")
    assert (ev.msg_key, ev.queue_offset, ev.sharding_key, ev.status) == (
        result.uniq_key, result.queue_offset, "k", "SEND_OK"
    )


@pytest.mark.parametrize(
    ("local", "visible_after"),
    [(TxnAction.COMMIT, [b"t"]), (TxnAction.ROLLBACK, []), (TxnAction.UNKNOWN, [])],
)
def test_local_transaction_outcome_decides_visibility(world, local, visible_after):
    clock, broker, directory, recorder = world
    tp = TransactionProducer(broker, clock, directory, "TXP")
    result = tp.send_in_transaction(Message("T", b"t", delay_level=3), lambda m: local)
    assert result.local_state is local and result.end_code is ResponseCode.SUCCESS
    assert [m.body for m in visible(broker)] == visible_after
    [end] = recorder.of("txn_end")
    assert (end.status, end.detail["from_check"], end.txn_id) == (
        local.value, False, result.transaction_id
    )


def test_a_failing_local_transaction_is_unknown_and_resolved_by_the_check(world):
    clock, broker, directory, _ = world
    tp = TransactionProducer(broker, clock, directory, "TXP",
                             check_listener=lambda msg: TxnAction.ROLLBACK)

    def local(msg):
        raise RuntimeError("database down")

    result = tp.send_in_transaction(Message("T", b"t"), local)
    assert result.local_state is TxnAction.UNKNOWN
    driver = Driver(clock, broker, [tp], max_step_ms=1000)
    driver.run_for(61_000)
    assert [(req.transaction_id, state) for req, state, _ in tp.checks_answered] == [
        (result.transaction_id, TxnAction.ROLLBACK)
    ]
    assert visible(broker) == []


def test_checks_of_other_groups_are_not_answered(world):
    clock, broker, directory, _ = world
    tp = TransactionProducer(broker, clock, directory, "TXP",
                             check_listener=lambda msg: TxnAction.COMMIT)
    other = TransactionProducer(broker, clock, directory, "OTHER")
    other.send_in_transaction(Message("T", b"o"), lambda m: TxnAction.UNKNOWN)
    clock.advance(61_000)
    requests = broker.tick()
    assert [r.producer_group for r in requests] == ["OTHER"]
    assert tp.answer_checks(requests) == []
