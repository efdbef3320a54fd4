"""Batch messages (SEND_BATCH_MESSAGE) stored as one append, as real 4.9.8 stores them (issue 42).

The facts, measured with the Java 4.9.8 client's ``send(Collection)`` on the real broker
(``interop/java/v4/RealScenarios.java`` scenario e, ``tests/interop/test_send_modes_real.py``): the items
take consecutive queue offsets and commitlog positions, share one born and one store timestamp, keep their
own UNIQ_KEY, and each stores its own properties string followed by the batch's — ``CLUSTER`` and ``WAIT``
— so WAIT appears twice (``…\\x02CLUSTER\\x01DefaultCluster\\x02WAIT\\x01true``). The model and the mmap
broker agree byte for byte, a batch never spans two commitlog files, and the client's rules refuse a batch
of two topics, a delayed item or a retry topic.
"""

from __future__ import annotations

import attrs
import pytest

from rmqspec.impl import factory as mmap_factory
from rmqspec.model.broker import ModelBroker
from rmqspec.model.clock import ManualClock
from rmqspec.model.config import default_config
from rmqspec.model.directory import Directory
from rmqspec.model.link import Link
from rmqspec.model.message import InvalidMessage, Message, MessageQueue, record_size
from rmqspec.model.producer import Producer
from rmqspec.model.protocol import BatchBroker
from rmqspec.model.results import BrokerError, ResponseCode

BORN = 1_796_383_809_079
# real 4.9.8: topic RS_MODES_807975, three items "batch N" with TAGS b, KEYS batchN and a 32-char UNIQ_KEY
REAL_ITEM_SIZE = 216
REAL_SUFFIX = "\x02CLUSTER\x01DefaultCluster\x02WAIT\x01true"


def _brokers(tmp_path, config=None):
    config = config or default_config()
    clock = ManualClock(BORN)
    return clock, [ModelBroker(clock, config), mmap_factory(clock, config, str(tmp_path))]


def _items(topic: str, n: int = 3) -> list[Message]:
    return [Message(topic, b"batch %d" % i, tags="b", keys=(f"batch{i}",),
                    uniq_key=f"7F0000017C0A4E0E2F2A11EAEE1B000{i}") for i in range(n)]


def test_a_batch_is_one_append_with_the_batch_properties_after_each_item(tmp_path) -> None:
    clock, brokers = _brokers(tmp_path)
    seen = []
    for b in brokers:
        assert isinstance(b, BatchBroker)
        b.create_topic("RS_MODES_807975", 1)
        clock.advance(25)
        now = clock.now()
        res = b.send_batch(_items("RS_MODES_807975"), 0)
        assert (res.queue_offset, res.commitlog_offset) == (0, 0)
        assert res.uniq_key.split(",") == [m.uniq_key for m in _items("RS_MODES_807975")]
        msgs = b.pull("G", MessageQueue("RS_MODES_807975", 0), 0).messages
        assert [m.commitlog_offset for m in msgs] == [0, REAL_ITEM_SIZE, 2 * REAL_ITEM_SIZE]
        assert [m.queue_offset for m in msgs] == [0, 1, 2]
        assert {(m.born_ts, m.store_ts) for m in msgs} == {(now, now)}
        assert res.msg_id.split(",") == [m.msg_id for m in msgs]
        assert all(m.properties["WAIT"] == "true" and m.properties["CLUSTER"] == "DefaultCluster" for m in msgs)
        seen.append([(m.commitlog_offset, m.properties) for m in msgs])
        b.close()
    assert seen[0] == seen[1]
    # the mmap store's bytes: the item's string, then the batch's
    data = (tmp_path / "commitlog" / "00000000000000000000").read_bytes()[REAL_ITEM_SIZE:2 * REAL_ITEM_SIZE]
    assert data.endswith(REAL_SUFFIX.encode()) and data.count(b"WAIT\x01true") == 2


def test_a_batch_that_does_not_fit_moves_whole_to_the_next_file(tmp_path) -> None:
    config = default_config()
    item = record_size(len(b"batch 0"), "T", _pairs(), 0)
    config = attrs.evolve(config, commitlog_file_size=4 * item + 8 + item // 2)
    _clock, brokers = _brokers(tmp_path, config)
    for b in brokers:
        b.create_topic("T", 1)
        b.send(Message("T", b"x" * 10), 0)
        res = b.send_batch(_items("T", 4), 0)  # fits no longer after the first message: next file
        assert res.commitlog_offset == config.commitlog_file_size
        offsets = [m.commitlog_offset for m in b.pull("G", MessageQueue("T", 0), 0).messages]
        assert offsets[1:] == [config.commitlog_file_size + i * item for i in range(4)]
        with pytest.raises(BrokerError) as info:
            b.send_batch(_items("T", 5), 0)  # larger than a file
        assert info.value.code is ResponseCode.MESSAGE_ILLEGAL
        b.close()


def _pairs():
    m = _items("T")[0]
    return (*m.wire_properties().items(), ("CLUSTER", "DefaultCluster"), ("WAIT", "true"))


def test_what_the_client_refuses_and_the_broker_refuses(tmp_path) -> None:
    _clock, brokers = _brokers(tmp_path)
    for b in brokers:
        b.create_topic("T", 2)
        b.create_topic("U", 1)
        for bad in ([], [*_items("T", 1), *_items("U", 1)], [Message("T", b"d", delay_level=2)],
                    [Message("%RETRY%G", b"r")]):
            with pytest.raises(InvalidMessage):
                b.send_batch(bad, 0)
        with pytest.raises(BrokerError) as info:
            b.send_batch(_items("T"), 5)  # the queue past the topic's last, as a send
        assert info.value.code is ResponseCode.SYSTEM_ERROR
        big = [Message("T", b"x" * (1024 * 1024)) for _ in range(4)]
        with pytest.raises(BrokerError) as info:
            b.send_batch(big, 0)  # the batch body past 4 MiB
        assert info.value.code is ResponseCode.MESSAGE_ILLEGAL
        assert b.pull("G", MessageQueue("T", 0), 0).messages == ()
        b.close()


def test_the_producer_sends_a_batch_as_one_request_and_retries_it_whole(tmp_path) -> None:
    clock, brokers = _brokers(tmp_path)
    model = brokers[0]
    directory = Directory()
    directory.create_topic(model, "T", 2)
    link = Link(model)
    p = Producer(link, clock, directory, "P")
    link.lose_response("send_batch", times=1)
    res = p.send_batch([Message("T", b"a"), Message("T", b"b")])
    q0 = [m.queue_offset for m in model.pull("G", MessageQueue("T", 0), 0).messages]
    q1 = [m.uniq_key for m in model.pull("G", MessageQueue("T", 1), 0).messages]
    assert q0 == [0, 1] and q1 == res.uniq_key.split(",")  # stored on queue 0, answer lost; again on queue 1
    with pytest.raises(TypeError, match="takes no batches"):
        Producer(object(), clock, directory, "P").send_batch([Message("T", b"a")])
    for b in brokers:
        b.close()
