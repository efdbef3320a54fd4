"""Facts measured on a running real RocketMQ 4.9.8 broker, held by both brokers (docs/fidelity.md).

Source: ``../shared/rocketmq-notes/results/scenarios.jsonl`` (RealScenarios.java, the real Java client) and
the 4.9.8 source it confirms. Each test is named after the ledger item it holds.
"""

from __future__ import annotations

import pytest

from rmqspec.model import BrokerConfig, Message, MessageQueue, PullStatus, ResponseCode, TxnAction
from rmqspec.model.message import InvalidMessage
from rmqspec.model.results import BrokerError

CLUSTER = {"CLUSTER": "DefaultCluster"}
FAST = BrokerConfig(
    message_delay_level=" ".join(f"{i}s" for i in range(1, 19)),
    transaction_timeout_ms=2000,
    transaction_check_interval_ms=3000,
    transaction_check_max=3,
)


def _only(broker, topic, queue_id=0):
    got = broker.pull("g", MessageQueue(topic, queue_id), 0)
    assert got.status is PullStatus.FOUND and len(got.messages) == 1
    return got.messages[0]


def test_send_path_adds_cluster_and_does_not_store_wait(make_broker):
    broker = make_broker(BrokerConfig(broker_cluster_name="C9"))
    broker.create_topic("T", 1)
    broker.send(Message("T", b"x", tags="tagA", keys=("k1",), properties={"scn": "a"}, uniq_key="A" * 32), 0)
    stored = _only(broker, "T")
    assert dict(stored.properties) == {"CLUSTER": "C9", "KEYS": "k1", "TAGS": "tagA", "UNIQ_KEY": "A" * 32, "scn": "a"}


def test_delayed_copy_keeps_wait_true(make_broker, clock):
    # results b_delay: stored_properties {CLUSTER, DELAY, KEYS, REAL_QID, REAL_TOPIC, TAGS, UNIQ_KEY, WAIT=true}
    broker = make_broker(FAST)
    broker.create_topic("T", 1)
    broker.send(Message("T", b"d0", tags="d", keys=("d0",), delay_level=2, uniq_key="B" * 32), 0)
    scheduled = _only(broker, "SCHEDULE_TOPIC_XXXX", 1)
    assert dict(scheduled.properties) == {
        **CLUSTER,
        "DELAY": "2",
        "KEYS": "d0",
        "REAL_QID": "0",
        "REAL_TOPIC": "T",
        "TAGS": "d",
        "UNIQ_KEY": "B" * 32,
        "WAIT": "true",
    }
    clock.advance(2000)
    broker.tick()
    assert dict(_only(broker, "T").properties) == dict(scheduled.properties)  # delivered keeps them all


def test_a_client_that_sends_no_wait_gets_none_stored(make_broker, clock):
    # B15, measured with the Go client v2 (it never sends WAIT) against real 4.9.8: the delayed copy, the
    # half, its commit, its checks' re-put copies and its discard carry no WAIT; a check still says false
    broker = make_broker(FAST)
    broker.create_topic("T", 1)
    broker.send(Message("T", b"p", uniq_key="1" * 32, wait=None), 0)
    broker.send(Message("T", b"d", delay_level=1, uniq_key="2" * 32, wait=None), 0)
    assert "WAIT" not in _only(broker, "SCHEDULE_TOPIC_XXXX", 0).properties
    start = clock.now()
    unknown = broker.send_half(Message("T", b"u", uniq_key="3" * 32, wait=None), 0, "PG")
    commit = broker.send_half(Message("T", b"c", uniq_key="4" * 32, wait=None), 0, "PG")
    broker.end_transaction("PG", commit.commitlog_offset, commit.queue_offset, TxnAction.COMMIT, False)
    checks = []
    for run in range(1, 12):
        clock.set(start + run * FAST.transaction_check_interval_ms)
        checks.extend(broker.tick())
    assert [c.transaction_id for c in checks] == [unknown.uniq_key] * 3
    assert all(c.message.get_property("WAIT") == "false" for c in checks)
    stored = [m for topic in ("T", "RMQ_SYS_TRANS_HALF_TOPIC", "TRANS_CHECK_MAX_TIME_TOPIC")
              for m in broker.pull("g", MessageQueue(topic, 0), 0, 32).messages]
    assert len(stored) == 1 + 1 + 1 + 2 + 3 + 1  # plain, delivered delay, commit, two halves, 3 re-puts, discard
    assert [m for m in stored if "WAIT" in m.properties] == []


def test_a_wait_value_is_refused_when_it_holds_a_separator():
    with pytest.raises(InvalidMessage, match="wait"):
        Message("T", b"x", wait="a\x01b")


def test_empty_property_values_are_dropped_by_the_broker(broker):
    # SendMessageProcessor decodes the client's string with string2messageProperties
    broker.create_topic("T", 1)
    broker.send(Message("T", b"x", tags="", properties={"e": "", "v": "1"}, uniq_key="C" * 32), 0)
    stored = _only(broker, "T")
    assert dict(stored.properties) == {**CLUSTER, "UNIQ_KEY": "C" * 32, "v": "1"}
    assert stored.tags is None


def test_retry_levels_client_max_and_dlq_copy(make_broker, clock):
    # results a_retry_dlq: client maxReconsumeTimes 3 wins over the group's 16; levels 3, 4, 5;
    # the DLQ copy: reconsume_times 4, DELAY=0, REAL_TOPIC=%RETRY%G, RETRY_TOPIC, ORIGIN_MESSAGE_ID, WAIT=false
    broker = make_broker(FAST)
    broker.create_topic("T", 1)
    broker.create_group("G", retry_max_times=16)
    sent = broker.send(Message("T", b"m3", tags="tagA", keys=("m3",), uniq_key="D" * 32), 0)
    offset, levels = sent.commitlog_offset, []
    for attempt in range(4):
        assert broker.send_back("G", offset, 0, "D" * 32, 3) == ResponseCode.SUCCESS
        if attempt == 3:
            break
        copy = _only(broker, "SCHEDULE_TOPIC_XXXX", 2 + attempt)
        levels.append(int(copy.properties["DELAY"]))
        clock.advance(1000 * levels[-1])
        broker.tick()
        retry = broker.pull("g", MessageQueue("%RETRY%G", 0), attempt).messages[0]
        assert retry.reconsume_times == attempt + 1
        offset = retry.commitlog_offset
    assert levels == [3, 4, 5]
    dlq = _only(broker, "%DLQ%G")
    assert dlq.reconsume_times == 4
    assert dict(dlq.properties) == {
        **CLUSTER,
        "DELAY": "0",
        "KEYS": "m3",
        "ORIGIN_MESSAGE_ID": dlq.properties["ORIGIN_MESSAGE_ID"],
        "REAL_QID": "0",
        "REAL_TOPIC": "%RETRY%G",
        "RETRY_TOPIC": "T",
        "TAGS": "tagA",
        "UNIQ_KEY": "D" * 32,
        "WAIT": "false",
    }
    assert dlq.properties["ORIGIN_MESSAGE_ID"] == sent.msg_id


def test_half_commit_check_and_discard_properties(make_broker, clock):
    # results c_transaction: halves keep WAIT=true and CLUSTER; a check's message says WAIT=false;
    # transactionCheckMax=3 gives exactly 3 checks, then the copy in TRANS_CHECK_MAX_TIME_TOPIC
    broker = make_broker(FAST)
    broker.create_topic("T", 1)
    start = clock.now()
    unknown = broker.send_half(Message("T", b"u", tags="unknown", keys=("tx-unknown",), uniq_key="E" * 32), 0, "PG")
    commit = broker.send_half(Message("T", b"c", tags="commit", keys=("tx-commit",), uniq_key="F" * 32), 0, "PG")
    half = broker.pull("g", MessageQueue("RMQ_SYS_TRANS_HALF_TOPIC", 0), 0).messages[0]
    assert dict(half.properties) == {
        **CLUSTER,
        "KEYS": "tx-unknown",
        "PGROUP": "PG",
        "REAL_QID": "0",
        "REAL_TOPIC": "T",
        "TAGS": "unknown",
        "TRAN_MSG": "true",
        "UNIQ_KEY": "E" * 32,
        "WAIT": "true",
    }
    code = broker.end_transaction("PG", commit.commitlog_offset, commit.queue_offset, TxnAction.COMMIT, False)
    assert code == ResponseCode.SUCCESS
    visible = _only(broker, "T")
    assert visible.transaction_type == 0x8 and visible.prepared_txn_offset == commit.commitlog_offset
    assert dict(visible.properties) == {
        **CLUSTER,
        "KEYS": "tx-commit",
        "PGROUP": "PG",
        "REAL_QID": "0",
        "REAL_TOPIC": "T",
        "TAGS": "commit",
        "TRAN_MSG": "true",
        "UNIQ_KEY": "F" * 32,
        "WAIT": "true",
    }
    checks = []
    for run in range(1, 12):
        clock.set(start + run * FAST.transaction_check_interval_ms)
        checks.extend(broker.tick())
    assert [c.message.get_property("TRANSACTION_CHECK_TIMES") for c in checks] == ["1", "2", "3"]
    assert all(c.transaction_id == unknown.uniq_key for c in checks)
    assert all(c.message.get_property("WAIT") == "false" for c in checks)
    discarded = _only(broker, "TRANS_CHECK_MAX_TIME_TOPIC")
    assert discarded.properties["TRANSACTION_CHECK_TIMES"] == "3"
    assert discarded.properties["WAIT"] == "true" and discarded.properties["CLUSTER"] == "DefaultCluster"


def test_unknown_end_transaction_changes_nothing(broker):
    # the Java client sends END_TRANSACTION oneway with commitOrRollback 0 for UNKNOWN; the broker ignores it
    broker.create_topic("T", 1)
    half = broker.send_half(Message("T", b"u", uniq_key="9" * 32), 0, "PG")
    before = len(broker.records())
    assert broker.end_transaction("PG", half.commitlog_offset, half.queue_offset, TxnAction.UNKNOWN, False) == 0
    assert len(broker.records()) == before


def test_topic_validation_is_on_the_send_path(broker):
    # TopicValidator.validateTopic in AbstractSendMessageProcessor.msgCheck answers SYSTEM_ERROR
    broker.create_topic("T", 1)
    msg = Message("T", b"x")
    object.__setattr__(msg, "topic", "tö")  # a client that skips the producer's check
    with pytest.raises(BrokerError, match="illegal characters") as info:
        broker.send(msg, 0)
    assert info.value.code == ResponseCode.SYSTEM_ERROR


@pytest.mark.parametrize("name", ["CLUSTER", "INSTANCE_ID", "TTL", "MSG_TYPE", "INNER_MULTI_QUEUE_OFFSET"])
def test_names_reserved_by_4_9_8_are_refused(name):
    # MessageConst.STRING_HASH_SET (Message.putUserProperty refuses these names)
    with pytest.raises(ValueError, match="system property name"):
        Message("T", b"x", properties={name: "v"})


@pytest.mark.parametrize("name", ["TRANSACTION_CHECK_TIMES", "CHECK_IMMUNITY_TIME_IN_SECONDS",
                                  "TRAN_PREPARED_QUEUE_OFFSET"])
def test_names_spec_reserves_beyond_4_9_8_are_refused(name):
    # B10: a deliberate deviation — SPEC §3.1 reserves them although 4.9.8's STRING_HASH_SET does not
    with pytest.raises(ValueError, match="system property name"):
        Message("T", b"x", properties={name: "v"})


def test_a_pull_answered_offset_moved_stores_an_offset_moved_event(broker):
    """B13: PullMessageProcessor.generateOffsetMovedEvent on a master. The real store's record after a
    pull at 2**40 by ``rmqspec_observer_4a67000`` is 347 bytes (body {"consumerGroup":…,"messageQueue":
    {…},"offsetNew":0,"offsetRequest":1099511627776}, KEYS/DELAY=0/TAGS = the group)."""
    broker.create_topic("T", 1)
    a = broker.send(Message("T", b"x", uniq_key="C" * 32), 0)
    b = broker.send(Message("T", b"x", uniq_key="D" * 32), 0)
    moved = broker.pull("rmqspec_observer_4a67000", MessageQueue("SCHEDULE_TOPIC_XXXX", 0), 1 << 40)
    assert moved.status is PullStatus.OFFSET_ILLEGAL
    c = broker.send(Message("T", b"x", uniq_key="E" * 32), 0)
    assert c.commitlog_offset - b.commitlog_offset == (b.commitlog_offset - a.commitlog_offset) + 347
    assert broker.pull("g", MessageQueue("T", 0), 1).status is PullStatus.FOUND  # a found pull writes nothing
    d = broker.send(Message("T", b"x", uniq_key="F" * 32), 0)
    assert d.commitlog_offset - c.commitlog_offset == b.commitlog_offset - a.commitlog_offset
