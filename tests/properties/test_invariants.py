"""Each invariant on hand-written histories: it fires on the anomaly and stays quiet otherwise."""

from __future__ import annotations

from rmqspec.model.config import BrokerConfig
from rmqspec.properties import invariants as inv
from rmqspec.properties.history import History

K = "A" * 32


def _h() -> History:
    h = History.for_config(BrokerConfig())
    h.subscriptions["G"] = {"T"}
    h.set_group_max("G", 1)
    return h


def _codes(h: History, kinds=("always", "eventually")) -> set[str]:
    return {v.code for v in inv.evaluate(h, kinds)}


def test_table_is_complete_and_documented() -> None:
    names = [i.name for i in inv.INVARIANTS]
    assert len(names) == len(set(names)) >= 17
    for i in inv.INVARIANTS:
        assert i.doc.endswith(".") and i.source and i.kind in ("always", "eventually", "observation")
    required = {"ORDER_QUEUE_GAP", "LOST", "OFFSET_OVERRUN", "RETRY_EARLY", "DLQ_EARLY",
                "DLQ_MISSED", "DELAY_EARLY", "LOCK_OVERLAP", "ORDERLY_WITHOUT_LOCK",
                "ORDERLY_CONCURRENT", "TXN_VISIBLE_BEFORE_COMMIT", "TXN_CHECK_EARLY",
                "TXN_CHECK_EXCEEDED", "TXN_UNRESOLVED", "TXN_DOUBLE_RESOLVED", "DUPLICATED",
                "DUPLICATE_COMMIT", "RECOVERED"}
    assert required <= {str(i.code) for i in inv.INVARIANTS}


def test_queue_gap_and_density() -> None:
    h = _h()
    h.emit("store", 0, topic="T", queue_id=0, queue_offset=0, msg_key=K, msg_id="m0")
    h.emit("store", 0, topic="T", queue_id=0, queue_offset=1, msg_key=K, msg_id="m1")
    assert "ORDER_QUEUE_GAP" not in _codes(h)
    h.emit("store", 0, topic="T", queue_id=0, queue_offset=3, msg_key=K, msg_id="m3")
    (v,) = [v for v in inv.check_queue_order(h)]
    assert v.code == "ORDER_QUEUE_GAP" and v.expected == "queue offset 2" and v.seq == 2


def test_gap_is_judged_per_epoch() -> None:
    h = _h()
    h.emit("store", 0, topic="T", queue_id=0, queue_offset=5, msg_key=K)
    h.emit("crash", 1, status="power")
    h.emit("store", 2, topic="T", queue_id=0, queue_offset=2, msg_key=K)
    assert inv.check_queue_order(h) == []


def test_lost_only_after_drain_and_dlq_counts_as_done() -> None:
    h = _h()
    h.emit("send", 0, topic="T", queue_id=0, queue_offset=0, msg_key=K, status="SEND_OK")
    assert inv.check_no_loss(h) == []
    h.emit("drain", 10)
    assert [v.code for v in inv.check_no_loss(h)] == ["LOST"]
    h2 = _h()
    h2.emit("send", 0, topic="T", queue_id=0, msg_key=K, status="SEND_OK")
    h2.emit("store", 5, topic="%DLQ%G", queue_id=0, queue_offset=0, msg_key=K, reconsume_times=2)
    h2.emit("drain", 10)
    assert inv.check_no_loss(h2) == []


def test_offset_overrun() -> None:
    h = _h()
    for off in (0, 1):
        h.emit("deliver", 0, group="G", topic="T", queue_id=0, queue_offset=off, msg_key=K)
    h.emit("consume", 1, group="G", topic="T", queue_id=0, queue_offset=1, msg_key=K, status="SUCCESS")
    h.emit("commit_offset", 1, group="G", topic="T", queue_id=0, queue_offset=0)
    assert inv.check_offset_overrun(h) == []
    h.emit("commit_offset", 2, group="G", topic="T", queue_id=0, queue_offset=2)
    assert [v.code for v in inv.check_offset_overrun(h)] == ["OFFSET_OVERRUN"]


def test_retry_early_and_dlq_thresholds() -> None:
    h = _h()
    h.emit("send_back", 0, group="G", topic="T", queue_id=0, queue_offset=0, msg_key=K,
           reconsume_times=1, delay_level=3, deliver_ts=10_000, status="RETRY",
           detail={"code": "SUCCESS", "requested_level": 0, "max": 1})
    h.emit("store", 9_999, topic="%RETRY%G", queue_id=0, queue_offset=0, msg_key=K, reconsume_times=1)
    assert [v.code for v in inv.check_retry_early(h)] == ["RETRY_EARLY"]
    h.emit("send_back", 20_000, group="G", topic="%RETRY%G", queue_id=0, queue_offset=0, msg_key=K,
           reconsume_times=2, delay_level=0, status="DLQ",
           detail={"code": "SUCCESS", "requested_level": 0, "max": 1})
    h.emit("store", 20_000, topic="%DLQ%G", queue_id=0, queue_offset=0, msg_key=K, reconsume_times=2)
    assert inv.check_dlq_early(h) == []
    h.emit("store", 20_000, topic="%DLQ%G", queue_id=0, queue_offset=1, msg_key=K, reconsume_times=1)
    assert [v.code for v in inv.check_dlq_early(h)] == ["DLQ_EARLY"]
    h.emit("deliver", 30_000, group="G", topic="T", queue_id=0, queue_offset=0, msg_key=K,
           reconsume_times=2)
    assert [v.code for v in inv.check_dlq_missed(h)] == ["DLQ_MISSED"]


def test_delay_early() -> None:
    h = _h()
    h.emit("send", 0, topic="T", queue_id=0, msg_key=K, delay_level=1, status="SEND_OK")
    h.emit("store", 999, topic="T", queue_id=0, queue_offset=0, msg_key=K)
    assert [v.code for v in inv.check_delay_early(h)] == ["DELAY_EARLY"]


def test_locks_and_orderly_windows() -> None:
    h = _h()
    key = dict(group="OG", topic="T", queue_id=0)
    h.emit("lock", 0, client_id="c1", status="GRANTED", **key)
    h.emit("lock", 60_000, client_id="c2", status="GRANTED", **key)
    assert [v.code for v in inv.check_lock_overlap(h)] == ["LOCK_OVERLAP"]
    h2 = _h()
    h2.emit("lock", 0, client_id="c1", status="GRANTED", **key)
    h2.emit("lock", 60_001, client_id="c2", status="GRANTED", **key)
    h2.emit("orderly_start", 60_002, client_id="c1", **key)
    h2.emit("orderly_start", 60_003, client_id="c2", **key)
    assert inv.check_lock_overlap(h2) == []
    assert [v.code for v in inv.check_orderly_without_lock(h2)] == ["ORDERLY_WITHOUT_LOCK"]
    assert [v.code for v in inv.check_orderly_concurrent(h2)] == ["ORDERLY_CONCURRENT"]
    h3 = _h()  # one client, two batches at once: its MessageQueueLock forbids it; one after the other is fine
    h3.emit("lock", 0, client_id="c1", status="GRANTED", **key)
    h3.emit("orderly_start", 1, client_id="c1", **key)
    h3.emit("orderly_end", 2, client_id="c1", **key)
    h3.emit("orderly_start", 3, client_id="c1", **key)
    assert inv.check_orderly_concurrent(h3) == []
    h3.emit("orderly_start", 4, client_id="c1", **key)
    found = inv.check_orderly_concurrent(h3)
    assert [v.code for v in found] == ["ORDERLY_CONCURRENT"] and "second batch" in found[0].reason


def test_transactions() -> None:
    h = _h()
    h.emit("txn_half", 0, topic="T", msg_key=K, txn_id=K)
    h.emit("txn_check", 5_999, msg_key=K)
    assert [v.code for v in inv.check_txn_check_early(h)] == ["TXN_CHECK_EARLY"]
    h.emit("store", 6_000, topic="T", queue_id=0, queue_offset=0, msg_key=K)
    assert [v.code for v in inv.check_txn_visibility(h)] == ["TXN_VISIBLE_BEFORE_COMMIT"]
    h.emit("txn_end", 7_000, msg_key=K, status="ROLLBACK")
    h.emit("deliver", 7_001, group="G", topic="T", queue_id=0, queue_offset=0, msg_key=K)
    assert "TXN_ROLLBACK_VISIBLE" in {v.code for v in inv.check_txn_visibility(h)}
    h.emit("txn_end", 8_000, msg_key=K, status="COMMIT")
    assert [v.code for v in inv.check_txn_double_resolved(h)] == ["TXN_DOUBLE_RESOLVED"]
    for i in range(15):
        h.emit("txn_check", 10_000 + i, msg_key=K)
    assert [v.code for v in inv.check_txn_check_exceeded(h)] == ["TXN_CHECK_EXCEEDED"]


def test_unresolved_after_drain_and_observations() -> None:
    h = _h()
    h.emit("txn_half", 0, topic="T", msg_key=K)
    h.emit("drain", 1)
    assert _codes(h, ("eventually",)) >= {"TXN_UNRESOLVED"}
    h.emit("consume", 2, group="G", msg_key=K, status="SUCCESS")
    h.emit("consume", 3, group="G", msg_key=K, status="SUCCESS")
    assert [v.code for v in inv.observe_duplicated(h)] == ["DUPLICATED"]
    assert inv.name_of("TXN_ROLLBACK_VISIBLE") == "TxnInvisibleProperty"
    assert "expected" in inv.observe_duplicated(h)[0].render()
