"""Pull status / next-offset table, batch limits and tag filtering (SPEC §4.1)."""

from __future__ import annotations

import pytest

from rmqspec.model import BrokerConfig, Message, MessageQueue, PullStatus, ResponseCode
from rmqspec.model.ids import offset_msg_id
from rmqspec.model.message import record_size
from rmqspec.model.results import BrokerError

T = MessageQueue("T", 0)


def _fill(broker, n, tags=None, body=b"m"):
    broker.create_topic("T", 2)
    return [broker.send(Message("T", body, tags=tags), 0) for _ in range(n)]


@pytest.mark.parametrize(
    ("sent", "offset", "status", "next_offset"),
    [
        (0, 0, PullStatus.NO_NEW_MSG, 0),
        (0, 5, PullStatus.OFFSET_ILLEGAL, 0),
        (3, 3, PullStatus.NO_NEW_MSG, 3),
        (3, 7, PullStatus.OFFSET_ILLEGAL, 3),
        (3, -1, PullStatus.OFFSET_ILLEGAL, 0),
        (3, 1, PullStatus.FOUND, 3),
    ],
)
def test_pull_status_and_next_offset_table(broker, sent, offset, status, next_offset):
    _fill(broker, sent)
    result = broker.pull("g", T, offset)
    assert (result.status, result.next_begin_offset) == (status, next_offset)
    assert (result.min_offset, result.max_offset) == (0, sent)


def test_queue_offsets_are_dense_in_store_order(broker):
    results = _fill(broker, 5)
    assert [r.queue_offset for r in results] == [0, 1, 2, 3, 4]
    got = broker.pull("g", T, 0)
    assert [m.queue_offset for m in got.messages] == [0, 1, 2, 3, 4]
    assert [m.msg_id for m in got.messages] == [r.msg_id for r in results]


def test_max_nums_and_the_32_message_cap(broker):
    _fill(broker, 40)
    two = broker.pull("g", T, 0, max_nums=2)
    assert (len(two.messages), two.next_begin_offset) == (2, 2)
    many = broker.pull("g", T, 0, max_nums=64)
    assert (len(many.messages), many.next_begin_offset) == (32, 32)


def test_256_kib_transfer_limit_stops_the_batch(broker):
    _fill(broker, 4, body=b"x" * 100_000)
    got = broker.pull("g", T, 0)
    assert (len(got.messages), got.next_begin_offset) == (2, 2)


def test_commitlog_offsets_follow_record_sizes(broker):
    broker.create_topic("T", 1)
    first = broker.send(Message("T", b"abc", tags="A"), 0)
    second = broker.send(Message("T", b"defg"), 0)
    stored = broker.pull("g", T, 0).messages[0]
    assert first.commitlog_offset == 0
    size = record_size(3, "T", stored.properties, stored.sys_flag)
    assert second.commitlog_offset == size
    assert first.msg_id == offset_msg_id("127.0.0.1", 10911, 0)


def test_commitlog_rolls_to_the_next_file_when_a_record_does_not_fit(make_broker):
    broker = make_broker(BrokerConfig(commitlog_file_size=1024))
    broker.create_topic("T", 1)
    offsets = [
        # 333-byte records (the broker adds CLUSTER=DefaultCluster, drops WAIT): 3 fit, the 4th rolls
        broker.send(Message("T", b"y" * 177, uniq_key="A" * 32), 0).commitlog_offset
        for _ in range(4)
    ]
    size = offsets[1] - offsets[0]
    assert size == 333
    assert offsets[:3] == [0, size, 2 * size]
    assert 3 * size + size + 8 > 1024
    assert offsets[3] == 1024


def test_tag_filtering_by_hash_code(broker):
    broker.create_topic("T", 1)
    for tags in ("A", "B", None, "A"):
        broker.send(Message("T", b"t", tags=tags), 0)
    only_a = broker.pull("g", T, 0, subscription="A")
    assert ([m.queue_offset for m in only_a.messages], only_a.next_begin_offset) == ([0, 3], 4)
    both = broker.pull("g", T, 0, subscription="A || B")
    assert [m.tags for m in both.messages] == ["A", "B", "A"]
    none = broker.pull("g", T, 0, subscription="C")
    assert (none.status, none.next_begin_offset) == (PullStatus.NO_MATCHED_MSG, 4)
    assert len(broker.pull("g", T, 0, subscription="*").messages) == 4


def test_pull_refusals(broker):
    broker.create_topic("T", 1)
    with pytest.raises(BrokerError) as unknown:
        broker.pull("g", MessageQueue("nope", 0), 0)
    assert unknown.value.code == ResponseCode.TOPIC_NOT_EXIST
    with pytest.raises(BrokerError) as bad_queue:
        broker.pull("g", MessageQueue("T", 1), 0)
    assert bad_queue.value.code == ResponseCode.SYSTEM_ERROR


def test_send_refusals(broker):
    broker.create_topic("T", 1)
    with pytest.raises(BrokerError) as unknown:
        broker.send(Message("nope", b"x"), 0)
    assert unknown.value.code == ResponseCode.TOPIC_NOT_EXIST
    with pytest.raises(BrokerError) as bad_queue:
        broker.send(Message("T", b"x"), 1)
    assert bad_queue.value.code == ResponseCode.SYSTEM_ERROR
    with pytest.raises(BrokerError) as system:
        broker.send(Message("SCHEDULE_TOPIC_XXXX", b"x"), 0)
    assert system.value.code == ResponseCode.NO_PERMISSION


def test_consumer_offsets_update_and_query(broker):
    """Never committed: 0, as real 4.9.8 answers while the queue's min offset is 0
    (ConsumerManageProcessor.queryConsumerOffset; measured: results/probe_remoting.jsonl)."""
    assert broker.query_offset("g", T) == 0
    broker.update_offset("g", T, 7)
    assert broker.query_offset("g", T) == 7
    assert broker.query_offset("h", T) == 0
