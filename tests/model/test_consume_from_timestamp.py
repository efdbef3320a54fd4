"""Seed E6's CONSUME_FROM_TIMESTAMP in the reference client (``model/consumer.py``, ``model/timesearch.py``), on
the model broker: 4.9.8's ``RebalancePushImpl.computePullFromWhereWithException`` read with ``javap -c``.

A queue with no stored offset (a broadcasting consumer's local store; a clustering consumer's broker answers
0 for a queue never committed while its min offset is 0, fidelity B12, and the timestamp is not read) starts
where SEARCH_OFFSET_BY_TIMESTAMP puts ``consumeTimestamp`` (default: 30 minutes before the consumer was
built, to the second); a ``%RETRY%`` queue starts at its max offset (under FIRST and LAST it starts at 0); a
stored offset wins; a lookup that fails (the request lost on the link, an unparsable timestamp) leaves the
queue out until a later rebalance, as ``updateProcessQueueTableInRebalance`` catches the exception and skips
the queue.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rmqspec.model import ManualClock, ModelBroker
from rmqspec.model.consumer import ConsumeFromWhere, ConsumerConfig, MessageModel
from rmqspec.model.consumer_concurrent import ConcurrentConsumer, ConsumeConcurrentlyStatus
from rmqspec.model.directory import Directory
from rmqspec.model.link import Link
from rmqspec.model.message import Message, MessageQueue
from rmqspec.model.timesearch import format_consume_timestamp, parse_consume_timestamp

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
TIMESTAMP = ConsumeFromWhere.CONSUME_FROM_TIMESTAMP
MQ = MessageQueue("T", 0)
RETRY = MessageQueue("%RETRY%G", 0)


def _world(gaps: list[int]) -> tuple[ManualClock, ModelBroker, Directory]:
    """Messages to T:0, one after each gap (ms), and three to %RETRY%G:0; the clock then 31 minutes on."""
    clock = ManualClock(T0)
    broker = ModelBroker(clock)
    broker.create_topic("T", 1)
    broker.create_topic("%RETRY%G", 1)
    broker.create_group("G")
    for i, gap in enumerate(gaps):
        clock.advance(gap)
        broker.send(Message(topic="T", body=b"%d" % i), 0)
    for i in range(3):
        broker.send(Message(topic="%RETRY%G", body=b"r%d" % i), 0)
    directory = Directory()
    directory.add_route("T", 1)
    directory.add_route("%RETRY%G", 1)
    return clock, broker, directory


def _consumer(broker: object, clock: ManualClock, directory: Directory, **cfg: object) -> ConcurrentConsumer:
    seen: list[int] = []

    def listener(msgs: list, _ctx: object) -> ConsumeConcurrentlyStatus:
        seen.extend(m.queue_offset for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    cfg.setdefault("message_model", MessageModel.BROADCASTING)  # its local store has no offset: −1
    c = ConcurrentConsumer(broker, clock, directory, "G", "c1", listener,
                           config=ConsumerConfig(consume_from_where=TIMESTAMP, **cfg))
    c.seen = seen  # type: ignore[attr-defined]
    c.subscribe("T")
    return c


@settings(max_examples=60, deadline=None)
@given(gaps=st.lists(st.sampled_from((0, 400, 1000, 1500)), min_size=1, max_size=8),
       at=st.integers(-2000, 12_000))
def test_a_new_queue_starts_where_the_broker_puts_the_timestamp(gaps: list[int], at: int) -> None:
    clock, broker, directory = _world(gaps)
    text = format_consume_timestamp(T0 + at)
    c = _consumer(broker, clock, directory, consume_timestamp=text)
    start = broker.search_offset("T", 0, parse_consume_timestamp(text))
    assert c.compute_pull_from_where(MQ) == start
    assert c.compute_pull_from_where(RETRY) == 3  # the retry queue's max offset, not 0
    c.start()
    c.run_until(clock.now() + 1000)
    assert c.seen == list(range(start, len(gaps)))  # type: ignore[attr-defined]


def test_the_default_timestamp_is_half_an_hour_before_the_consumer_was_built() -> None:
    clock, broker, directory = _world([0, 1000])
    clock.set(T0 + 30 * 60_000 + 1_999)  # 30 min after the second message (T0 + 1000), to the second
    c = _consumer(broker, clock, directory)
    assert c.consume_timestamp == format_consume_timestamp(T0 + 1_999) == "20260101000001"
    assert c.compute_pull_from_where(MQ) == 1  # 1000 is the nearer of 0 and 1000 to 1000


def test_a_stored_offset_wins_and_first_and_last_start_a_retry_queue_at_zero() -> None:
    clock, broker, directory = _world([0, 1000, 1000])
    stamp = format_consume_timestamp(T0 + 2000)
    clustering = _consumer(broker, clock, directory, consume_timestamp=stamp, message_model=MessageModel.CLUSTERING)
    assert clustering.compute_pull_from_where(MQ) == 0  # 4.9.8 answers 0 for a queue never committed (B12)
    broker.update_offset("G", MQ, 1)
    assert clustering.compute_pull_from_where(MQ) == 1
    for where in (ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET):
        other = ConcurrentConsumer(broker, clock, directory, "G", "c2", lambda *_: None,
                                   config=ConsumerConfig(consume_from_where=where))
        assert other.compute_pull_from_where(RETRY) == 0


def test_a_failed_lookup_skips_the_queue_until_a_later_rebalance() -> None:
    clock, broker, directory = _world([0, 1000, 1000])
    link = Link(broker)
    link.fail("search_offset", times=1)
    c = _consumer(link, clock, directory, consume_timestamp=format_consume_timestamp(T0 + 1000))
    c.start()
    c.run_until(clock.now() + 1000)
    assert MQ not in c.process_queues and link.lost["search_offset"] == 1
    c.run_until(clock.now() + 20_000)  # the next rebalance asks again
    assert MQ in c.process_queues and c.seen == [1, 2]  # type: ignore[attr-defined]


def test_an_unparsable_timestamp_skips_the_queue() -> None:
    clock, broker, directory = _world([0])
    c = _consumer(broker, clock, directory, consume_timestamp="2026010100")
    assert c.compute_pull_from_where(MQ) == -1
    assert c.compute_pull_from_where(RETRY) == 3  # the retry queue reads no timestamp
