"""UNIQ_KEY is an opaque string to the broker (docs/fidelity.md B14), on every broker in ``BROKERS``.

RocketMQ 4.9.8's broker never parses a UNIQ_KEY: SendMessageProcessor, CommitLog (the index),
EndTransactionProcessor and the transaction check read it as a string. Clients write different
formats — the Java client's ``MessageClientIDSetter`` 32 upper-case hex chars from an IPv4 host
and 56 from an IPv6 one, the Go client an upper-case prefix with a lower-case suffix, 5.x clients
34 chars — so a key of any of them is stored, delivered, retried, scheduled and checked as sent.
Only a key the properties string cannot carry (``\\x01``/``\\x02``) is refused; an empty key is no key.
The mmap broker's stores are verified after every test (conftest ``_verify_mmap_stores``).
"""

from __future__ import annotations

import pytest

from rmqspec.model import Message, MessageQueue, PullStatus, TxnAction
from rmqspec.model.ids import UniqKeyFactory
from rmqspec.model.message import InvalidMessage
from tests.scenarios.test_real_4_9_8_facts import FAST
from tests.uniq_keys import IPV6_JAVA, KEYS, SEPARATOR_KEYS


def _all(broker, topic, queue_id=0):
    got = broker.pull("g", MessageQueue(topic, queue_id), 0, 32)
    return got.messages if got.status is PullStatus.FOUND else ()


@pytest.mark.parametrize("name", sorted(KEYS))
def test_a_key_in_any_client_format_is_stored_and_delivered_as_sent(broker, name):
    key = KEYS[name]
    broker.create_topic("T", 1)
    sent = broker.send(Message("T", b"x", tags="a", uniq_key=key), 0)
    assert sent.uniq_key == key
    [stored] = _all(broker, "T")
    assert stored.uniq_key == key and stored.properties["UNIQ_KEY"] == key
    assert stored.msg_id == sent.msg_id  # the offset msgId is the broker's, whatever the key


def test_every_format_side_by_side_keeps_its_own_key(broker):
    broker.create_topic("T", 2)
    sent = [broker.send(Message("T", name.encode(), uniq_key=key), i % 2) for i, (name, key) in
            enumerate(sorted(KEYS.items()))]
    stored = {m.body.decode(): m.uniq_key for q in (0, 1) for m in _all(broker, "T", q)}
    assert stored == KEYS
    assert [r.uniq_key for r in sent] == [KEYS[n] for n in sorted(KEYS)]


def test_delayed_and_retried_copies_keep_the_key(make_broker, clock):
    broker = make_broker(FAST)
    broker.create_topic("T", 1)
    broker.create_group("G", retry_max_times=1)
    broker.send(Message("T", b"later", delay_level=1, uniq_key=IPV6_JAVA), 0)
    [scheduled] = _all(broker, "SCHEDULE_TOPIC_XXXX", 0)
    assert scheduled.uniq_key == IPV6_JAVA
    clock.advance(1000)
    broker.tick()
    [delivered] = _all(broker, "T")
    assert delivered.uniq_key == IPV6_JAVA

    for attempt in range(2):  # retry once, then the DLQ (retry max 1)
        broker.send_back("G", delivered.commitlog_offset, 0, delivered.msg_id, None)
        if attempt == 0:
            [copy] = _all(broker, "SCHEDULE_TOPIC_XXXX", 2)
            assert copy.uniq_key == IPV6_JAVA
            clock.advance(3000)
            broker.tick()
            [delivered] = _all(broker, "%RETRY%G")
            assert delivered.uniq_key == IPV6_JAVA and delivered.reconsume_times == 1
    [dead] = _all(broker, "%DLQ%G")
    assert dead.uniq_key == IPV6_JAVA


def test_a_transaction_is_checked_and_committed_under_its_key(make_broker, clock):
    broker = make_broker(FAST)
    broker.create_topic("T", 1)
    start = clock.now()
    go_key, ipv6_key = KEYS["go-client"], IPV6_JAVA
    unknown = broker.send_half(Message("T", b"u", uniq_key=go_key), 0, "PG")
    commit = broker.send_half(Message("T", b"c", uniq_key=ipv6_key), 0, "PG")
    assert (unknown.uniq_key, commit.uniq_key) == (go_key, ipv6_key)
    broker.end_transaction("PG", commit.commitlog_offset, commit.queue_offset, TxnAction.COMMIT, False)
    [visible] = _all(broker, "T")
    assert visible.uniq_key == ipv6_key and visible.body == b"c"
    checks = []
    for run in range(1, 6):
        clock.set(start + run * FAST.transaction_check_interval_ms)
        checks.extend(broker.tick())
    assert len(checks) == 3
    assert all(c.transaction_id == go_key and c.message.uniq_key == go_key for c in checks)
    [discarded] = _all(broker, "TRANS_CHECK_MAX_TIME_TOPIC")
    assert discarded.uniq_key == go_key


def test_an_empty_key_is_no_key(broker):
    """string2messageProperties drops an empty value: ``UNIQ_KEY=""`` is a message without a key, to which
    rmqspec's brokers assign one (model/README.md)."""
    assert Message("T", b"x", uniq_key="") == Message("T", b"x")
    broker.create_topic("T", 1)
    sent = broker.send(Message("T", b"x", uniq_key=""), 0)
    [stored] = _all(broker, "T")
    assert sent.uniq_key and stored.uniq_key == sent.uniq_key


@pytest.mark.parametrize("key", SEPARATOR_KEYS)
def test_a_key_with_a_property_separator_is_refused_naming_uniq_key(key):
    with pytest.raises(InvalidMessage, match=r"uniq_key .*property separators") as info:
        Message("T", b"x", uniq_key=key)
    assert info.value.field == "uniq_key" and info.value.value == key


def test_a_key_that_is_not_a_string_is_refused():
    with pytest.raises(InvalidMessage, match="must be a string") as info:
        Message("T", b"x", uniq_key=12)  # type: ignore[arg-type]
    assert info.value.field == "uniq_key"


def test_generated_keys_follow_the_java_layout_for_both_address_families():
    """MessageClientIDSetter: LEN = ip.length + 2 + 4 + 4 + 2 bytes, upper-case hex."""
    t = 1_700_000_000_000
    v4 = UniqKeyFactory("10.0.0.7", pid=0x4304, loader_hash=0x4E0E2F2A).next(t)
    v6 = UniqKeyFactory("fd00::2", pid=0x4304, loader_hash=0x4E0E2F2A).next(t)
    assert len(v4) == 32 and v4.startswith("0A00000743044E0E2F2A")
    assert len(v6) == 56 and v6.startswith(IPV6_JAVA[:40]) and v6 == v6.upper()
