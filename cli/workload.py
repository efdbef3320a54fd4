"""A realistic client workload against any broker, for ``rmqspec check``'s trace and plots.

The conformance machine explores short random programs; this workload runs the
reference client (``rmqspec.model`` consumers and producers) for simulated
minutes against the broker under test, so the recorded trace shows whole
lifecycles a person can read in the report's plots:

- concurrent consumers that fail and retry (``flaky-N`` fails N times), one
  group (``G-analytics``) with a retry max of ``ANALYTICS_MAX`` so it
  dead-letters;
- delayed sends at several levels; under a 5.x profile, timer messages too (``TIMER_DELAY_MS`` of
  1.5 s to 61 s, an absolute ``TIMER_DELIVER_MS``, and one with a delay level as well: the level wins);
- two orderly consumers: an unlock on rebalance when the second joins, then
  the first dies holding a lock and the second is DENIED until the broker
  lock expires and it takes over;
- a transactional producer: commit, rollback, lost END_TRANSACTIONs answered
  by checks, an UNKNOWN half checked until it is discarded, and a duplicate
  commit (RocketMQ 4.9 writes the message twice: an observation);
- a slow listener: ``G-payments`` (consumeTimeout 1 min) spends 150 s on the first
  delivery of each committed payment; cleanExpiredMsg sends it back with level 3
  while the listener runs, the retry copy is consumed, then the original's
  late SUCCESS (TIME_OUT): a DUPLICATED observation, never a violation;
- a 6000-byte receipt to Payments each round: the producer compresses it
  (sysFlag COMPRESSED | ZLIB), the store keeps it so, G-payments reads it whole.
- a broadcasting group (``G-audit-log``, two clients on Orders) that drops what its
  listener fails (``flaky-N``): ``audit-1`` from the start, ``audit-2`` joining late, so it starts
  at the queues' max offsets and owes nothing sent before; each client consumes every later
  message once (LOST and DUPLICATED per client).

``G-analytics``'s max is the client's (a request max): the brokers record it in
each ``send_back`` event's ``detail.max``, so the audit needs no configuration.
"""

from __future__ import annotations

from typing import Any

from rmqspec.model.client_timers import Driver
from rmqspec.model.clock import ManualClock
from rmqspec.model.consumer import ConsumeFromWhere, ConsumerConfig, MessageModel
from rmqspec.model.consumer_concurrent import ConcurrentConsumer, ConsumeConcurrentlyStatus
from rmqspec.model.consumer_orderly import ConsumeOrderlyStatus, OrderlyConsumer
from rmqspec.model.directory import Directory
from rmqspec.model.events import Recorder
from rmqspec.model.ids import UniqKeyFactory
from rmqspec.model.message import Message
from rmqspec.model.producer import Producer, TransactionProducer
from rmqspec.model.protocol import Broker
from rmqspec.model.results import TxnAction

T0 = 1_700_000_000_000
ANALYTICS_MAX = 3
OK = ConsumeConcurrentlyStatus.CONSUME_SUCCESS
LATER = ConsumeConcurrentlyStatus.RECONSUME_LATER


def _orders(msgs: list[Any], ctx: Any) -> ConsumeConcurrentlyStatus:
    """``flaky-N`` fails N times, then succeeds."""
    m = msgs[0]
    fails = int(m.body.split(b"-")[1]) if m.body.startswith(b"flaky-") else 0
    return LATER if m.reconsume_times < fails else OK


def _analytics(msgs: list[Any], ctx: Any) -> ConsumeConcurrentlyStatus:
    """Never accepts a flaky message: it reaches the DLQ after ANALYTICS_MAX retries."""
    return LATER if msgs[0].body.startswith(b"flaky-") else OK


SLOW_PAYMENT_MS = 150_000
RECEIPT = b"receipt line; " * 429  # 6006 bytes: over compressMsgBodyOverHowmuch, sent compressed


def _payments(msgs: list[Any], ctx: Any) -> ConsumeConcurrentlyStatus:
    """A committed payment's first delivery outlives G-payments' consumeTimeout (1 min)."""
    if msgs[0].body == b"txn-commit" and msgs[0].reconsume_times == 0:
        ctx.runs_for_ms = SLOW_PAYMENT_MS
    return OK


def _audit_log(msgs: list[Any], ctx: Any) -> ConsumeConcurrentlyStatus:
    """A broadcasting listener that fails a flaky message once: RocketMQ drops it, never retries."""
    return LATER if msgs[0].body.startswith(b"flaky-1") else OK


def _ledger(msgs: list[Any], ctx: Any) -> ConsumeOrderlyStatus:
    return ConsumeOrderlyStatus.SUCCESS


def _config(**kw: Any) -> ConsumerConfig:
    return ConsumerConfig(consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, **kw)


def run_workload(broker: Broker, clock: ManualClock, recorder: Recorder, *, rounds: int = 1,
                 timers: bool = False) -> int:
    """Drive ``broker`` with the reference client; events go to ``recorder``.

    ``rounds`` repeats the send phases (more retries, delays and lock hand-overs); ``timers``: the
    broker has 5.x timer messages (``Version.timer_wheel``), so the workload sends some.
    Ends with a ``drain`` event; returns the simulated duration in ms.
    """
    start = clock.now()
    d = Directory()
    d.create_topic(broker, "Orders", 2)
    d.create_topic(broker, "Ledger", 2)
    d.create_topic(broker, "Payments", 1)
    for group in ("G-orders", "G-analytics", "G-ledger", "G-payments", "G-audit-log"):
        d.create_group(broker, group)
    driver = Driver(clock, broker, max_step_ms=500)

    c_orders = ConcurrentConsumer(broker, clock, d, "G-orders", "orders-1", _orders, config=_config(),
                                  recorder=recorder)
    c_orders.subscribe("Orders")
    c_analytics = ConcurrentConsumer(broker, clock, d, "G-analytics", "analytics-1", _analytics,
                                     config=_config(max_reconsume_times=ANALYTICS_MAX), recorder=recorder)
    c_analytics.subscribe("Orders")
    c_pay = ConcurrentConsumer(broker, clock, d, "G-payments", "pay-1", _payments,
                               config=_config(consume_timeout_min=1), recorder=recorder)
    c_pay.subscribe("Payments")
    ledger_a = OrderlyConsumer(broker, clock, d, "G-ledger", "ledger-a", _ledger, config=_config(),
                               recorder=recorder)
    ledger_a.subscribe("Ledger")
    ledger_b = OrderlyConsumer(broker, clock, d, "G-ledger", "ledger-b", _ledger, config=_config(),
                               recorder=recorder)
    ledger_b.subscribe("Ledger")
    audits = [ConcurrentConsumer(broker, clock, d, "G-audit-log", f"audit-{n}", _audit_log, recorder=recorder,
                                 config=ConsumerConfig(message_model=MessageModel.BROADCASTING)) for n in (1, 2)]
    for audit in audits:
        audit.subscribe("Orders")
    producer = Producer(broker, clock, d, "P-orders", recorder=recorder,
                        uniq_keys=UniqKeyFactory("10.0.0.5", pid=101))
    answers = {b"txn-lost": TxnAction.COMMIT, b"txn-lost-rb": TxnAction.ROLLBACK}
    txp = TransactionProducer(
        broker, clock, d, "P-payments", recorder=recorder, uniq_keys=UniqKeyFactory("10.0.0.6", pid=202),
        check_listener=lambda m: answers.get(bytes(m.body), TxnAction.UNKNOWN),
    )
    for participant in (c_orders, c_analytics, c_pay, ledger_a, audits[0], producer, txp):
        driver.add(participant)
    for consumer in (c_orders, c_analytics, c_pay, ledger_a, audits[0]):
        consumer.start()
    driver.step()

    committed = None
    for r in range(rounds):
        for n in range(1, 7):
            producer.send(Message("Orders", b"flaky-%d" % n))
        for level in (1, 2, 3, 4, 5, 6, 7, 9):
            producer.send(Message("Orders", b"later-%d" % level, delay_level=level))
        if timers:
            for delay in (1500, 3000, 12_500, 61_000):
                producer.send(Message("Orders", b"timer-%d" % delay, properties={"TIMER_DELAY_MS": str(delay)}))
            at = str(clock.now() + 7_250)
            producer.send(Message("Orders", b"timer-at", properties={"TIMER_DELIVER_MS": at}))
            producer.send(Message("Orders", b"timer-and-level", delay_level=2, properties={"TIMER_DELAY_SEC": "90"}))
        for i in range(6):
            producer.send(Message("Ledger", b"entry-%d-%d" % (r, i)), sharding_key=f"acct-{i % 3}")
        producer.send(Message("Payments", RECEIPT))
        ok = txp.send_in_transaction(Message("Payments", b"txn-commit"), lambda m: TxnAction.COMMIT)
        committed = committed or ok
        txp.send_in_transaction(Message("Payments", b"txn-rollback"), lambda m: TxnAction.ROLLBACK)
        txp.send_in_transaction(Message("Payments", b"txn-lost"), lambda m: TxnAction.COMMIT, lose_end=True)
        txp.send_in_transaction(Message("Payments", b"txn-lost-rb"), lambda m: None)
        driver.run_for(120_000)

    driver.add(ledger_b)  # joins: ledger-a unlocks one Ledger queue, ledger-b locks it
    ledger_b.start()
    driver.add(audits[1])  # a broadcasting client without an offsets file: starts at the max offsets
    audits[1].start()
    driver.step()  # its rebalance: the max offsets it starts at
    for n in range(1, 3):
        producer.send(Message("Orders", b"flaky-%d" % n))
    for i in range(6):
        producer.send(Message("Ledger", b"entry-join-%d" % i), sharding_key=f"acct-{i % 3}")
    txp.send_in_transaction(Message("Payments", b"txn-pending"), lambda m: None)  # UNKNOWN until discarded
    driver.run_for(240_000)

    if committed is not None:  # a second END_TRANSACTION COMMIT: RocketMQ 4.9 writes the message again
        txp.end_transaction(committed.send_result.commitlog_offset, committed.send_result.queue_offset,
                            TxnAction.COMMIT, msg_key=committed.transaction_id, txn_id=committed.transaction_id)
    ledger_a.kill()  # dies holding a Ledger queue: ledger-b is DENIED until the broker lock expires
    for i in range(6):
        producer.send(Message("Ledger", b"entry-late-%d" % i), sharding_key=f"acct-{i % 3}")
    driver.run_for(20 * 60_000)  # the pending half is checked 15 times, then discarded
    for participant in (c_orders, c_analytics, c_pay, ledger_b, *audits):
        participant.shutdown()
    recorder.emit("drain", clock.now(), actor="workload")
    return clock.now() - start
