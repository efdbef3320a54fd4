"""A listener that outlives the broker lock (4.9.8 checks the lock only before a batch).

The reference client ``z`` consumes Ledger/0 orderly; its listener takes 61 s (the broker lock lives
60 s, REBALANCE_LOCK_MAX_LIVE_TIME). While it runs, ``b`` joins the group and is allocated the
queue: ``z``'s rebalance finds the consume lock busy and keeps the queue (neither unlocked nor
dropped, ``try_unlock_times`` 1), and the broker grants ``b`` the expired lock. ``b`` consumes the
queue while ``z``'s window is open: two clients at once, which RocketMQ 4.9 permits here (each began
its batch under its own valid lock; no lock was granted twice).
"""

from __future__ import annotations

from rmqspec.model.broker import ModelBroker
from rmqspec.model.clock import ManualClock
from rmqspec.model.config import default_config
from rmqspec.model.consumer import ConsumeFromWhere, ConsumerConfig
from rmqspec.model.consumer_orderly import ConsumeOrderlyStatus, OrderlyConsumer
from rmqspec.model.directory import Directory
from rmqspec.model.message import Message, MessageQueue
from rmqspec.model.producer import Producer
from rmqspec.properties.history import History
from rmqspec.properties.inv_locks import check_lock_overlap, check_orderly_without_lock

MQ = MessageQueue("Ledger", 0)


def test_a_listener_outliving_the_broker_lock_lets_a_second_client_consume():
    clock = ManualClock(1_700_000_000_000)
    history = History.for_config(default_config())
    broker = ModelBroker(clock, default_config(), recorder=history)  # lock / unlock events
    d = Directory()
    d.create_topic(broker, "Ledger", 1)
    d.create_group(broker, "G")
    producer = Producer(broker, clock, d, "P", recorder=history)
    for i in range(2):
        producer.send(Message("Ledger", b"e%d" % i))
    cfg = ConsumerConfig(consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    b = OrderlyConsumer(broker, clock, d, "G", "b", lambda m, x: ConsumeOrderlyStatus.SUCCESS, config=cfg,
                        recorder=history)
    b.subscribe("Ledger")
    seen = []

    def slow(msgs, ctx):
        if not seen:
            clock.advance(61_000)  # the listener outlives the broker lock
            b.start()  # joins the group
            z.do_rebalance()  # z's rebalance thread runs while this listener holds the consume lock
            b.run_until(clock.now() + 1000)
            pq = z.process_queues.get(MQ)
            seen.append((pq is not None and pq.dropped, pq.try_unlock_times if pq else None))
        return ConsumeOrderlyStatus.SUCCESS

    z = OrderlyConsumer(broker, clock, d, "G", "z", slow, config=cfg, recorder=history)
    z.subscribe("Ledger")
    z.start()
    z.run_until(clock.now() + 5000)
    assert seen == [(True, 1)]  # z kept the queue (dropped, consume lock busy)
    windows = [(e.event, e.client_id) for e in history.events if e.event in ("orderly_start", "orderly_end")]
    assert windows[:2] == [("orderly_start", "z"), ("orderly_start", "b")]  # b starts inside z's window
    assert check_lock_overlap(history) == []  # no lock was granted twice
    assert check_orderly_without_lock(history) == []  # each began its batch under its own valid lock
