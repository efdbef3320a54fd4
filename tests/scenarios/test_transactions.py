"""Half / op transactions and the check service (SPEC §4.6)."""

from __future__ import annotations

from rmqspec.model import BrokerConfig, Message, MessageQueue, PullStatus, ResponseCode, TxnAction

T = MessageQueue("T", 0)
DISCARDED = MessageQueue("TRANS_CHECK_MAX_TIME_TOPIC", 0)
INTERVAL = BrokerConfig().transaction_check_interval_ms


def _half(broker, body=b"tx"):
    broker.create_topic("T", 1)
    return broker.send_half(Message("T", body, tags="A"), 0, "pg")


def test_half_invisible_until_commit(broker, clock):
    half = _half(broker)
    assert broker.pull("g", T, 0).status is PullStatus.NO_NEW_MSG
    code = broker.end_transaction(
        "pg", half.commitlog_offset, half.queue_offset, TxnAction.COMMIT, False
    )
    assert code == ResponseCode.SUCCESS
    got = broker.pull("g", T, 0)
    assert got.status is PullStatus.FOUND
    assert got.messages[0].uniq_key == half.uniq_key
    assert got.messages[0].prepared_txn_offset == half.commitlog_offset
    assert got.messages[0].transaction_type == 0x8


def test_rollback_never_visible_and_never_checked(broker, clock):
    half = _half(broker)
    code = broker.end_transaction(
        "pg", half.commitlog_offset, half.queue_offset, TxnAction.ROLLBACK, False
    )
    assert code == ResponseCode.SUCCESS
    for _ in range(20):
        clock.advance(INTERVAL)
        assert broker.tick() == []
    assert broker.pull("g", T, 0).status is PullStatus.NO_NEW_MSG


def test_unknown_does_nothing(broker, clock):
    half = _half(broker)
    code = broker.end_transaction(
        "pg", half.commitlog_offset, half.queue_offset, TxnAction.UNKNOWN, False
    )
    assert code == ResponseCode.SUCCESS
    assert broker.pull("g", T, 0).status is PullStatus.NO_NEW_MSG


def test_end_transaction_checks_group_and_offsets(broker):
    half = _half(broker)
    assert (
        broker.end_transaction(
            "other", half.commitlog_offset, half.queue_offset, TxnAction.COMMIT, False
        )
        == ResponseCode.SYSTEM_ERROR
    )
    assert (
        broker.end_transaction(
            "pg", half.commitlog_offset, half.queue_offset + 1, TxnAction.COMMIT, False
        )
        == ResponseCode.SYSTEM_ERROR
    )
    assert (
        broker.end_transaction(
            "pg", half.commitlog_offset + 1, half.queue_offset, TxnAction.COMMIT, False
        )
        == ResponseCode.SYSTEM_ERROR
    )
    assert broker.pull("g", T, 0).status is PullStatus.NO_NEW_MSG


def test_pending_half_first_check_after_timeout_fifteen_checks_then_discard(broker, clock):
    start = clock.now()
    clock.set(start + INTERVAL - 2_000)  # 2 s before the first check run
    half = _half(broker)
    clock.set(start + INTERVAL)
    assert broker.tick() == []  # 2 s old < 6 s timeout
    checks = []
    for run in range(2, 40):
        clock.set(start + run * INTERVAL)
        requests = broker.tick()
        assert len(requests) <= 1
        checks.extend(requests)
    assert len(checks) == 15
    assert all(c.producer_group == "pg" and c.transaction_id == half.uniq_key for c in checks)
    times = [c.message.get_property("TRANSACTION_CHECK_TIMES") for c in checks]
    assert times == [str(n) for n in range(1, 16)]
    assert checks[0].message.topic == "T"
    discarded = broker.pull("g", DISCARDED, 0)
    assert discarded.status is PullStatus.FOUND and len(discarded.messages) == 1
    assert discarded.messages[0].uniq_key == half.uniq_key
    assert broker.pull("g", T, 0).status is PullStatus.NO_NEW_MSG


def test_check_answered_commit_makes_the_message_visible_with_the_half_uniq_key(broker, clock):
    half = _half(broker)
    clock.advance(INTERVAL)
    (request,) = broker.tick()
    code = broker.end_transaction(
        request.producer_group,
        request.commitlog_offset,
        request.tran_state_table_offset,
        TxnAction.COMMIT,
        True,
    )
    assert code == ResponseCode.SUCCESS
    got = broker.pull("g", T, 0)
    assert [m.uniq_key for m in got.messages] == [half.uniq_key]
    for _ in range(5):
        clock.advance(INTERVAL)
        assert broker.tick() == []


def test_check_answered_rollback_stops_checks(broker, clock):
    _half(broker)
    clock.advance(INTERVAL)
    (request,) = broker.tick()
    broker.end_transaction(
        "pg", request.commitlog_offset, request.tran_state_table_offset, TxnAction.ROLLBACK, True
    )
    for _ in range(5):
        clock.advance(INTERVAL)
        assert broker.tick() == []
    assert broker.pull("g", T, 0).status is PullStatus.NO_NEW_MSG


def test_duplicate_commit_yields_two_visible_copies(broker):
    half = _half(broker)
    for _ in range(2):
        code = broker.end_transaction(
            "pg", half.commitlog_offset, half.queue_offset, TxnAction.COMMIT, False
        )
        assert code == ResponseCode.SUCCESS
    got = broker.pull("g", T, 0)
    assert [m.uniq_key for m in got.messages] == [half.uniq_key, half.uniq_key]


def test_missing_half_is_a_system_error(broker):
    broker.create_topic("T", 1)
    assert (
        broker.end_transaction("pg", 12345, 0, TxnAction.COMMIT, False) == ResponseCode.SYSTEM_ERROR
    )
