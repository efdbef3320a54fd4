"""UNIQ_KEYs in the formats real clients send, for the tests that hold docs/fidelity.md B14.

4.9.8's broker stores any UNIQ_KEY as an opaque string; these are the formats seen in practice
(sources in the comments) plus keys no client writes but the properties string can carry.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

# The 4.9.8 Java client on the IPv6 host fd00::2 (MessageClientIDSetter: 16-byte IP, pid 2, class-loader
# hash 4, ms in the month 4, counter 2 = 28 bytes, 56 upper-case hex chars). Found refused by rmqspec serve.
IPV6_JAVA = "FD00000000000000000000000000000243044E0E2F2A88E10CEC0000"

KEYS: dict[str, str] = {
    "java-ipv6": IPV6_JAVA,
    "lower-case": "0a0000070f8c4e0e2f2a00e10cec0001",
    # rocketmq-client-go primitive.CreateUniqID: strings.ToUpper(hex(prefix)) + hex.EncodeToString(suffix)
    "go-client": "0A0000071F9000000000" + "0d4e4a2c0002",
    # rocketmq-clients (5.x) MessageIdCodec v1: version "01" + 32 upper-case hex chars
    "v5-client": "01" + "56F7E71C361B21BC024CCDBE00000000",
    "other-chars": 'order 42/é:ü#{"x"}=~',
    "long": "K" * 300,
}

# Keys a Message refuses: the properties string cannot carry its separators.
SEPARATOR_KEYS = ("A\x01B", "A\x02B", "\x02", "FD00\x01\x02")


def record_trace(broker_factory: Any, workdir: Path, start_ms: int = 1_700_000_000_000) -> list[dict[str, Any]]:
    """SPEC §8 rows of the reference client's whole lifecycles over ``KEYS`` on a broker from
    ``broker_factory(clock, config, workdir, recorder=...)``: sends, a retry, a delayed send, a
    transaction committed at once and one committed from a check, consumption, then ``drain``."""
    from rmqspec.model import BrokerConfig, ListRecorder, ManualClock, Message, TxnAction
    from rmqspec.model.client_timers import Driver
    from rmqspec.model.consumer import ConsumeFromWhere, ConsumerConfig
    from rmqspec.model.consumer_concurrent import ConcurrentConsumer, ConsumeConcurrentlyStatus
    from rmqspec.model.directory import Directory
    from rmqspec.model.producer import Producer, TransactionProducer
    from rmqspec.traces.io import event_to_row

    clock, rec = ManualClock(start_ms), ListRecorder()
    broker = broker_factory(clock, BrokerConfig(), workdir, recorder=rec)
    d = Directory()
    d.create_topic(broker, "TK", 2)
    d.create_group(broker, "GK")

    def listener(msgs: list[Any], ctx: Any) -> ConsumeConcurrentlyStatus:
        first_try = msgs[0].uniq_key == IPV6_JAVA and msgs[0].reconsume_times == 0
        return ConsumeConcurrentlyStatus.RECONSUME_LATER if first_try else ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = ConcurrentConsumer(broker, clock, d, "GK", "ck-1", listener, recorder=rec,
                                  config=ConsumerConfig(consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET))
    consumer.subscribe("TK")
    producer = Producer(broker, clock, d, "PK", recorder=rec)
    txp = TransactionProducer(broker, clock, d, "PKT", recorder=rec, check_listener=lambda m: TxnAction.COMMIT)
    driver = Driver(clock, broker, max_step_ms=500)
    for participant in (consumer, producer, txp):
        driver.add(participant)
    consumer.start()
    driver.step()
    for name, key in sorted(KEYS.items()):
        producer.send(Message("TK", name.encode(), uniq_key=key))
    producer.send(Message("TK", b"delayed", delay_level=2, uniq_key=KEYS["go-client"] + "-d"))
    txp.send_in_transaction(Message("TK", b"txn", uniq_key=KEYS["lower-case"] + "-t"), lambda m: TxnAction.COMMIT)
    txp.send_in_transaction(Message("TK", b"txn-checked", uniq_key=IPV6_JAVA + "-t"), lambda m: TxnAction.COMMIT,
                            lose_end=True)
    driver.run_for(180_000)
    consumer.shutdown()
    rec.emit("drain", clock.now(), actor="test")
    broker.close()
    return [event_to_row(e) for e in rec.events]
