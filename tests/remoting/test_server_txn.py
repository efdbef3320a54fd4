"""rmqspec serve: transactions — half sends, END_TRANSACTION 37 (request and oneway),
CHECK_TRANSACTION_STATE 39 on the producer's own connection."""

from __future__ import annotations

import attrs
import pytest

from rmqspec.remoting.bodies import decode_messages
from rmqspec.remoting.context import NOT_SET
from tests.remoting.conftest import TEST_CONFIG, create_topic_ext, heartbeat, props, pull_ext, send_ext, uniq_key
from tests.uniq_keys import IPV6_JAVA, KEYS

COMMIT, ROLLBACK, UNKNOWN = "8", "12", "0"
FAST_CHECKS = attrs.evolve(TEST_CONFIG, transaction_timeout_ms=300, transaction_check_interval_ms=200,
                           transaction_check_max=2)


def _half(b, topic: str = "TT", group: str = "PGT", key: str | None = None):
    key = key or uniq_key()
    r = b.call(310, send_ext(topic, group=group, sys_flag=4,
                             properties=props(UNIQ_KEY=key, TRAN_MSG="true", PGROUP=group, TAGS="t")), b"half")
    assert r.code == 0
    return key, int(r.ext_fields["msgId"][16:], 16), int(r.ext_fields["queueOffset"])


def _end(b, group: str, offset: int, tsto: int, kind: str, key: str, *, oneway: bool = False,
         from_check: bool = False, timeout: float | None = None):
    ext = {"producerGroup": group, "tranStateTableOffset": str(tsto), "commitLogOffset": str(offset),
           "commitOrRollback": kind, "fromTransactionCheck": "true" if from_check else "false", "msgId": key}
    return b.request(37, ext, oneway=oneway, timeout=timeout)


def _visible(b, topic: str = "TT") -> list[bytes]:
    b.call(34, body=heartbeat("127.0.0.1@reader", {"GR": [topic]}))
    r = b.call(11, pull_ext("GR", topic))
    return [m.body for m in decode_messages(r.body)] if r.code == 0 else []


def test_a_half_is_invisible_until_committed(serve) -> None:
    s = serve()
    b = s.client()
    b.call(17, create_topic_ext("TT", 1))
    key, offset, tsto = _half(b)
    assert _visible(b) == []
    r = _end(b, "PGT", offset, tsto, COMMIT, key)
    assert (r.code, r.remark) == (0, None)
    assert _visible(b) == [b"half"]
    committed = decode_messages(b.call(11, pull_ext("GR", "TT")).body)[0]
    assert committed.sys_flag == 8 and committed.prepared_txn_offset == offset


def test_rollback_answers_not_set_and_never_shows_the_message(serve) -> None:
    s = serve()
    b = s.client()
    b.call(17, create_topic_ext("TT", 1))
    key, offset, tsto = _half(b)
    r = _end(b, "PGT", offset, tsto, ROLLBACK, key)
    assert (r.code, r.remark) == (0, NOT_SET)
    assert _visible(b) == []


def test_oneway_commit_applies_without_an_answer(serve) -> None:
    s = serve()
    b = s.client()
    b.call(17, create_topic_ext("TT", 1))
    key, offset, tsto = _half(b)
    assert _end(b, "PGT", offset, tsto, COMMIT, key, oneway=True) is None
    assert _visible(b) == [b"half"]


def test_unknown_and_odd_types_get_no_response(serve) -> None:
    s = serve()
    b = s.client()
    b.call(17, create_topic_ext("TT", 1))
    key, offset, tsto = _half(b)
    for kind in (UNKNOWN, "5"):
        with pytest.raises(TimeoutError):
            _end(b, "PGT", offset, tsto, kind, key, timeout=0.3)
    assert _visible(b) == []


@pytest.mark.parametrize(("group", "delta_tsto", "remark"), [
    ("Other", 0, "The producer group wrong"),
    ("PGT", 1, "The transaction state table offset wrong"),
])
def test_end_transaction_refusals_name_the_mismatch(serve, group, delta_tsto, remark) -> None:
    s = serve()
    b = s.client()
    key, offset, tsto = _half(b)
    r = _end(b, group, offset, tsto + delta_tsto, COMMIT, key)
    assert (r.code, r.remark) == (1, remark)
    r = _end(b, "PGT", offset + 1, tsto, ROLLBACK, key)
    assert (r.code, r.remark) == (1, "Find prepared transaction message failed")


def test_checks_arrive_on_the_producers_connection_and_a_check_answer_commits(serve) -> None:
    s = serve(FAST_CHECKS)
    producer, other = s.client(), s.client()
    other.call(34, body=heartbeat("127.0.0.1@other", producers=("SomeoneElse",)))
    producer.call(34, body=heartbeat("127.0.0.1@p", producers=("PGT",)))
    producer.call(17, create_topic_ext("TT", 1))
    key, offset, tsto = _half(producer)
    check = producer.wait_pushed(39, timeout=10)
    assert check.flag == 2 and not check.is_response
    ext = check.ext_fields
    assert ext["msgId"] == ext["transactionId"] == key
    body = decode_messages(check.body)
    assert len(body) == 1
    seen = body[0]
    assert (seen.topic, seen.queue_id, seen.body) == ("TT", 0, b"half")
    assert seen.properties["TRANSACTION_CHECK_TIMES"] == "1" and seen.properties["PGROUP"] == "PGT"
    assert int(ext["commitLogOffset"]) == seen.commitlog_offset > offset
    assert int(ext["tranStateTableOffset"]) == seen.queue_offset > tsto
    assert ext["offsetMsgId"].endswith(f"{seen.commitlog_offset:016X}")
    assert [c for c in other.pushed if c.code == 39] == []
    r = _end(producer, "PGT", int(ext["commitLogOffset"]), int(ext["tranStateTableOffset"]), COMMIT, key,
             from_check=True)
    assert r.code == 0
    assert _visible(producer) == [b"half"]


@pytest.mark.parametrize("key", [IPV6_JAVA, KEYS["go-client"], KEYS["other-chars"]])
def test_a_half_is_checked_and_committed_under_its_key_in_any_format(serve, key) -> None:
    """docs/fidelity.md B14: the check names the half's UNIQ_KEY as sent (msgId = transactionId)."""
    s = serve(FAST_CHECKS)
    producer = s.client()
    producer.call(34, body=heartbeat("127.0.0.1@p", producers=("PGT",)))
    producer.call(17, create_topic_ext("TT", 1))
    _half(producer, key=key)
    check = producer.wait_pushed(39, timeout=10)
    ext = check.ext_fields
    assert ext["msgId"] == ext["transactionId"] == key
    assert decode_messages(check.body)[0].uniq_key == key
    r = _end(producer, "PGT", int(ext["commitLogOffset"]), int(ext["tranStateTableOffset"]), COMMIT, key,
             from_check=True)
    assert r.code == 0
    committed = decode_messages(producer.call(11, pull_ext("GR", "TT")).body) if _visible(producer) else []
    assert [m.uniq_key for m in committed] == [key]


def test_unanswered_checks_stop_at_check_max(serve) -> None:
    s = serve(FAST_CHECKS)
    producer = s.client()
    producer.call(34, body=heartbeat("127.0.0.1@p", producers=("PGT",)))
    _half(producer)
    times = [producer.wait_pushed(39, timeout=10).body for _ in range(2)]
    assert [decode_messages(t)[0].properties["TRANSACTION_CHECK_TIMES"] for t in times] == ["1", "2"]
    with pytest.raises(TimeoutError):
        producer.wait_pushed(39, timeout=1.5)
    discarded = producer.call(30, {"topic": "TRANS_CHECK_MAX_TIME_TOPIC", "queueId": "0"})
    assert discarded.ext_fields == {"offset": "1"}
