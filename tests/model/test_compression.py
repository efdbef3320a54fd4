"""Body compression (seed 004, G12): the producer compresses a body of 4096 bytes or more, the brokers keep
body and sysFlag through every copy they make, the consumer's decoder uncompresses (``model/compression.py``).
Against the model broker and the mmap broker (``rmqspec serve``: ``tests/remoting/test_server_produce.py``)."""

from __future__ import annotations

import zlib

import pytest

from rmqspec.impl import factory as mmap_factory
from rmqspec.model.broker import ModelBroker
from rmqspec.model.client_timers import Driver
from rmqspec.model.clock import ManualClock
from rmqspec.model.compression import ZLIB_FLAG, UnsupportedCompression, compress, uncompress
from rmqspec.model.config import default_config
from rmqspec.model.consumer import ConsumeFromWhere, ConsumerConfig
from rmqspec.model.consumer_concurrent import ConcurrentConsumer, ConsumeConcurrentlyStatus
from rmqspec.model.directory import Directory
from rmqspec.model.message import (
    COMPRESSED_FLAG,
    TRANSACTION_COMMIT_TYPE,
    InvalidMessage,
    Message,
    MessageQueue,
)
from rmqspec.model.producer import Producer, TransactionProducer
from rmqspec.model.results import TxnAction

BIG = b"order line; " * 500  # 6000 bytes, compressible
COMPRESSED = COMPRESSED_FLAG | ZLIB_FLAG  # 0x301, what the 4.9.8 client's ZLIB compressor sets


def test_compress_at_the_threshold_and_uncompress_by_the_type_bits():
    assert compress(b"x" * 4095, 0) == (b"x" * 4095, 0)
    body, flag = compress(b"x" * 4096, 0)
    assert flag == COMPRESSED and body == zlib.compress(b"x" * 4096, 5)
    assert uncompress(body, flag) == b"x" * 4096
    assert uncompress(body, COMPRESSED_FLAG) == b"x" * 4096  # no type bits: an older client's ZLIB
    assert uncompress(b"plain", 0) == b"plain"
    with pytest.raises(UnsupportedCompression, match="LZ4"):
        uncompress(body, COMPRESSED_FLAG | 0x100)
    with pytest.raises(UnsupportedCompression, match="not a zlib body"):
        uncompress(b"plain", COMPRESSED)
    with pytest.raises(InvalidMessage, match="sys_flag"):
        Message("T", b"x", sys_flag=0x4)  # a transaction type is not a body's


@pytest.fixture(params=["model", "mmap"])
def world(request, tmp_path):
    clock = ManualClock(1_700_000_000_000)
    if request.param == "model":
        broker = ModelBroker(clock)
    else:
        broker = mmap_factory(clock, default_config(), str(tmp_path))
    d = Directory()
    d.create_topic(broker, "T", 1)
    d.create_group(broker, "G")
    yield clock, broker, d
    broker.close()


def _stored(broker, topic: str = "T") -> list:
    return list(broker.pull("G0", MessageQueue(topic, 0), 0, 32).messages)


def test_a_large_body_is_stored_compressed_and_consumed_whole_through_a_retry(world):
    clock, broker, d = world
    seen: list[tuple[bytes, int, int]] = []

    def listener(msgs, ctx):
        m = msgs[0]
        seen.append((m.body, m.sys_flag, m.reconsume_times))
        if m.body == BIG and m.reconsume_times == 0:
            return ConsumeConcurrentlyStatus.RECONSUME_LATER
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    c = ConcurrentConsumer(broker, clock, d, "G", "c1", listener,
                           config=ConsumerConfig(consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET))
    c.subscribe("T")
    p = Producer(broker, clock, d, "P")
    driver = Driver(clock, broker, max_step_ms=1000)
    driver.add(c)
    c.start()
    p.send(Message("T", BIG))
    p.send(Message("T", b"small"))
    driver.run_for(30_000)
    big, small = _stored(broker)
    assert (big.sys_flag, big.body) == (COMPRESSED, zlib.compress(BIG, 5))  # as sent: the broker keeps both
    assert (small.sys_flag, small.body) == (0, b"small")
    # the retry copy (via the schedule topic) keeps the compressed body and its flag; the listener sees BIG
    [retry] = _stored(broker, "%RETRY%G")
    assert (retry.sys_flag, retry.body) == (COMPRESSED, big.body)
    assert [(b, f, r) for b, f, r in seen if b != b"small"] == [(BIG, COMPRESSED, 0), (BIG, COMPRESSED, 1)]


def test_a_delayed_and_a_transactional_body_keep_the_flag_and_a_batch_is_never_compressed(world):
    clock, broker, d = world
    p = Producer(broker, clock, d, "P")
    p.send(Message("T", BIG, delay_level=1))
    txp = TransactionProducer(broker, clock, d, "PT", check_listener=lambda m: TxnAction.COMMIT)
    txp.send_in_transaction(Message("T", BIG), lambda m: TxnAction.COMMIT)
    p.send_batch([Message("T", BIG), Message("T", b"b")])
    clock.advance(1500)
    broker.tick()
    stored = _stored(broker)
    by_flag = sorted((m.sys_flag, len(m.body)) for m in stored)
    packed = len(zlib.compress(BIG, 5))
    # the fired delay copy and the committed half (its type COMMIT): compressed; the batch's items: as they were
    committed = COMPRESSED | TRANSACTION_COMMIT_TYPE
    assert by_flag == sorted([(COMPRESSED, packed), (committed, packed), (0, len(BIG)), (0, 1)])



def test_the_check_workload_stores_its_receipt_compressed_and_consumes_it(tmp_path):
    """``rmqspec check``'s workload (and the differential tier's store, which real 4.9.8 reads back)."""
    from rmqspec.cli.workload import RECEIPT, T0, run_workload
    from rmqspec.impl.broker import MmapBroker
    from rmqspec.model.events import ListRecorder

    clock = ManualClock(T0)
    rec = ListRecorder()
    broker = MmapBroker.open(tmp_path, clock, default_config(), rec)
    try:
        run_workload(broker, clock, rec)
        stored = list(broker.pull("G0", MessageQueue("Payments", 0), 0, 32).messages)
    finally:
        broker.close()
    [receipt] = [m for m in stored if m.sys_flag & COMPRESSED_FLAG and m.sys_flag == COMPRESSED]
    assert uncompress(receipt.body, receipt.sys_flag) == RECEIPT and len(receipt.body) < len(RECEIPT) // 10
    consumed = [e for e in rec.of("consume") if e.msg_key == receipt.uniq_key]
    assert [(e.group, e.status) for e in consumed] == [("G-payments", "SUCCESS")]
