"""Retry ladder and DLQ routing of CONSUMER_SEND_MSG_BACK (SPEC §4.2–§4.4)."""

from __future__ import annotations

from rmqspec.model import BrokerConfig, Message, MessageQueue, PullStatus, ResponseCode

T = MessageQueue("T", 0)
RETRY = MessageQueue("%RETRY%g", 0)
DLQ = MessageQueue("%DLQ%g", 0)
LEVELS = BrokerConfig().delay_levels_ms


def _setup(broker):
    broker.create_topic("T", 1)
    broker.create_group("g")
    broker.send(Message("T", b"payload", tags="A"), 0)
    return broker.pull("g", T, 0).messages[0]


def test_full_retry_ladder_seventeen_deliveries_then_dlq_then_nothing(broker, clock):
    msg = _setup(broker)
    deliveries = [msg]
    retry_offset = 0
    for r in range(16):
        assert (
            broker.send_back("g", msg.commitlog_offset, 0, msg.msg_id, None) == ResponseCode.SUCCESS
        )
        delay = LEVELS[2 + r]  # level 3 + r: 10s 30s 1m … 2h
        clock.advance(delay - 1)
        broker.tick()
        early = broker.pull("g", RETRY, retry_offset)
        assert early.status is not PullStatus.FOUND, f"retry {r} delivered 1 ms early"
        clock.advance(1)
        broker.tick()
        got = broker.pull("g", RETRY, retry_offset)
        assert got.status is PullStatus.FOUND and len(got.messages) == 1
        msg = got.messages[0]
        assert msg.reconsume_times == r + 1
        assert msg.uniq_key == deliveries[0].uniq_key
        assert msg.get_property("RETRY_TOPIC") == "T"
        assert msg.origin_message_id == deliveries[0].msg_id
        deliveries.append(msg)
        retry_offset = got.next_begin_offset
    assert len(deliveries) == 17
    assert broker.send_back("g", msg.commitlog_offset, 0, msg.msg_id, None) == ResponseCode.SUCCESS
    dead = broker.pull("g", DLQ, 0)
    assert dead.status is PullStatus.FOUND
    assert [m.reconsume_times for m in dead.messages] == [17]
    assert dead.messages[0].body == b"payload"
    assert dead.messages[0].uniq_key == deliveries[0].uniq_key
    clock.advance(10 * 3_600_000)
    broker.tick()
    assert broker.pull("g", RETRY, retry_offset).status is PullStatus.NO_NEW_MSG
    assert broker.pull("g", DLQ, 1).status is PullStatus.NO_NEW_MSG


def test_negative_delay_level_goes_straight_to_dlq(broker, clock):
    msg = _setup(broker)
    assert broker.send_back("g", msg.commitlog_offset, -1, None, None) == ResponseCode.SUCCESS
    dead = broker.pull("g", DLQ, 0)
    assert dead.status is PullStatus.FOUND and dead.messages[0].reconsume_times == 1
    clock.advance(3 * 3_600_000)
    broker.tick()
    assert broker.pull("g", RETRY, 0).status is not PullStatus.FOUND


def test_per_request_max_reconsume_times_routes_to_dlq(broker):
    msg = _setup(broker)
    assert broker.send_back("g", msg.commitlog_offset, 0, None, 0) == ResponseCode.SUCCESS
    assert broker.pull("g", DLQ, 0).messages[0].reconsume_times == 1


def test_group_retry_max_times_zero_routes_first_failure_to_dlq(broker):
    broker.create_topic("T", 1)
    broker.create_group("g", retry_max_times=0)
    broker.send(Message("T", b"x"), 0)
    msg = broker.pull("g", T, 0).messages[0]
    assert broker.send_back("g", msg.commitlog_offset, 0, None, None) == ResponseCode.SUCCESS
    assert broker.pull("g", DLQ, 0).status is PullStatus.FOUND


def test_client_minus_one_max_means_sixteen(broker):
    msg = _setup(broker)
    assert broker.send_back("g", msg.commitlog_offset, 0, None, -1) == ResponseCode.SUCCESS
    assert broker.pull("g", RETRY, 0).status is PullStatus.NO_NEW_MSG  # scheduled, not dead


def test_delay_level_twenty_is_clamped_to_two_hours(broker, clock):
    msg = _setup(broker)
    assert broker.send_back("g", msg.commitlog_offset, 20, None, None) == ResponseCode.SUCCESS
    clock.advance(2 * 3_600_000 - 1)
    broker.tick()
    assert broker.pull("g", RETRY, 0).status is not PullStatus.FOUND
    clock.advance(1)
    broker.tick()
    got = broker.pull("g", RETRY, 0)
    assert got.status is PullStatus.FOUND
    assert got.messages[0].get_property("DELAY") == "18"


def test_delayed_send_with_level_twenty_is_clamped_to_two_hours(broker, clock):
    broker.create_topic("T", 1)
    broker.send(Message("T", b"later", delay_level=20), 0)
    clock.advance(2 * 3_600_000 - 1)
    broker.tick()
    assert broker.pull("g", T, 0).status is PullStatus.NO_NEW_MSG
    clock.advance(1)
    broker.tick()
    assert broker.pull("g", T, 0).messages[0].body == b"later"


def test_send_back_unknown_group_and_unknown_offset(broker):
    msg = _setup(broker)
    assert broker.send_back("nope", msg.commitlog_offset, 0, None, None) == (
        ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
    )
    assert (
        broker.send_back("g", msg.commitlog_offset + 1, 0, None, None) == ResponseCode.SYSTEM_ERROR
    )
