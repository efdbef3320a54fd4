"""``spark/carry_arrow.py`` against ``traces.carry.carry_trace``, in-process.

Hypothesis draws small traces of every event the carry reads, over two topics (and the schedule
and dead-letter topics), two groups, two queues, three msg_keys and three clients, with crashes,
recovers and drains between them, sometimes with configured subscriptions, and orderly traces
(locks, unlocks and consumes of one group's queues in epochs: the owner's last consume); the
columns must give exactly the seqs to carry, the tombstones and the open keys the row loop gives.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqspec.spark.carry import _carry_one
from rmqspec.spark.carry_arrow import carry_columns
from rmqspec.traces.carry import carry_trace
from rmqspec.traces.checker import validate
from rmqspec.traces.schema import SCHEMA
from tests.spark.judge_runs import drawn_rows
from tests.traces.carry_days import (
    PAIR_EVENTS,
    PAIR_STATUS,
    own_keys,
    pair_fields,
    schedule_reuse_days,
    transaction_days,
)
from tests.untraced import budget_run

_EVENTS = ("send", "send", "store", "store", "deliver", "deliver", "consume", "consume", "consume", "send_back",
           "commit_offset", "lock", "lock", "unlock", "orderly_start", "orderly_end", "txn_half", "txn_end",
           "txn_check", "schedule_fire", "crash", "recover", "drain")  # fmt: skip
_STATUS = {
    "send": (None, "SEND_OK", "SUCCESS", "FLUSH_DISK_TIMEOUT", "SYSTEM_ERROR"),
    "consume": ("SUCCESS", "SUCCESS", "RECONSUME_LATER"),
    "lock": ("GRANTED", "GRANTED", "DENIED"),
    "send_back": ("RETRY", "DLQ"),
    "txn_end": ("COMMIT", "COMMIT", "ROLLBACK"),
    "crash": ("power", None),
    "orderly_end": ("SUCCESS", "ROLLBACK"),
}
_FIELDS = {
    "group": ("G", "G", "H", None),
    "topic": ("T", "T", "U", "SCHEDULE_TOPIC_XXXX", "%DLQ%G", None),
    "queue_id": (0, 1, None),
    "queue_offset": (0, 1, 2, None),
    "msg_key": ("k1", "k2", "k3", None),
    "client_id": ("C1", "C2", "C3", None),
}
_SUBSCRIPTIONS = ({}, {"G": ["T"]}, {"J": ["T", "V"]}, {"H": ["U"], "J": ["T"]})
# Orderly consumption: locks, unlocks and consumes of one group's queues in epochs, consumes
# mostly without a msg_key (a key's rows may be carried for the key itself).
_ORDERLY = ("lock", "lock", "unlock", "consume", "consume", "consume", "commit_offset", "orderly_end", "crash",
            "recover")
_ORDERLY_FIELDS = {
    **_FIELDS,
    "group": ("G",),
    "topic": ("T",),
    "queue_id": (0, 0, 1),
    "client_id": ("C1", "C2", "C2", None),
    "msg_key": ("k1", None, None, None),
}
# Transactions: halves, ends, checks and discards of a few txn_ids on mostly their own msg_keys,
# consumed on one topic (keys close), with power crashes listing at-risk keys and drains.
_TXN = ("txn_half", "txn_half", "txn_end", "txn_end", "txn_end", "txn_check", "txn_check", "txn_discard", "consume",
        "consume", "consume", "deliver", "crash", "drain")  # fmt: skip
_TXN_FIELDS = {
    **{name: (values[0],) for name, values in _FIELDS.items()},
    "queue_offset": (0, 1, 2, None, None),
    "msg_key": ("k1", "k2", "k3", "k4", "k5", "k6"),
    "txn_id": ("x1", "x2", "x3", "x4", "x5", "x6", None),
    "detail": (None, None, '{"at_risk": ["k1"]}', '{"at_risk": ["k2", "k3"]}', '{"check_times": 1}'),
}
# 5.x timer messages: timer sends (deliver_ts, no delay level), their copies in rmq_sys_wheel_timer, fires,
# consumes and drains (an unfired timer message keeps its key open: TIMER_UNFIRED).
_TIMER = ("send", "send", "store", "store", "timer_fire", "timer_fire", "deliver", "consume", "consume", "crash",
          "drain")  # fmt: skip
_TIMER_FIELDS = {
    **_FIELDS,
    "topic": ("T", "U", "rmq_sys_wheel_timer", "rmq_sys_wheel_timer", None),
    "deliver_ts": (None, 0, 2000, 10**9),  # 10**9: not due at any drain
    "delay_level": (None, None, 0, 2),
}
_EXAMPLES = max(500, settings().max_examples)  # ~10 ms each


@st.composite
def _trace(draw: Any, events: tuple[str, ...] = _EVENTS, fields: dict[str, Any] = _FIELDS) -> tuple[list, dict]:
    rows = drawn_rows(draw, events=events, gaps=(0, 1, 1000), statuses=_STATUS, fields=fields, most=60)
    good, _ = validate(rows)
    return good, draw(st.sampled_from(_SUBSCRIPTIONS))


def _columns(rows: list[dict[str, Any]], subscriptions: dict[str, list[str]]) -> tuple[set, set, set]:
    table = pa.Table.from_pylist(rows, schema=SCHEMA)
    keep, closed, open_keys = carry_columns(table, subscriptions)
    seq = table.column("seq").to_numpy()
    assert keep.dtype == closed.dtype == np.bool_ and not (keep & closed).any()
    return set(seq[keep].tolist()), set(seq[closed].tolist()), set(open_keys)


@budget_run
@settings(max_examples=_EXAMPLES)
@given(_trace())
def test_the_columns_carry_what_the_row_loop_carries(drawn):
    rows, subscriptions = drawn
    assert _columns(rows, subscriptions) == carry_trace(rows, subscriptions)


@budget_run
@settings(max_examples=_EXAMPLES)
@given(_trace(_ORDERLY, _ORDERLY_FIELDS))
def test_the_columns_carry_what_the_row_loop_carries_in_orderly_traces(drawn):
    rows, subscriptions = drawn
    assert _columns(rows, subscriptions) == carry_trace(rows, subscriptions)


@budget_run
@settings(max_examples=_EXAMPLES)
@given(_trace(_TIMER, _TIMER_FIELDS))
def test_the_columns_carry_what_the_row_loop_carries_in_timer_traces(drawn):
    rows, subscriptions = drawn
    assert _columns(rows, subscriptions) == carry_trace(rows, subscriptions)


@st.composite
def _transactions(draw: Any) -> tuple[list, dict]:
    statuses = {**_STATUS, "consume": ("SUCCESS",), "txn_check": (None, "COMMIT")}
    rows = own_keys(draw, drawn_rows(draw, events=_TXN, gaps=(0, 1, 10**7), statuses=statuses, fields=_TXN_FIELDS,
                                     most=60))
    good, _ = validate(rows)
    return good, {}


@budget_run
@settings(max_examples=_EXAMPLES)
@given(_transactions())
def test_the_columns_carry_what_the_row_loop_carries_in_transactional_traces(drawn):
    rows, subscriptions = drawn
    assert _columns(rows, subscriptions) == carry_trace(rows, subscriptions)


@pytest.mark.parametrize("case", ["top", "txn_id", "at_risk", "window"])
def test_the_columns_close_the_transactions_the_row_loop_closes(case):
    day1, day2, _code = transaction_days(case)
    for rows in (day1, [*day1, *day2]):
        assert _columns(rows, {}) == carry_trace(rows)


@budget_run
@settings(max_examples=_EXAMPLES)
@given(_trace(), st.lists(st.booleans(), max_size=60))
def test_the_rows_carried_are_those_of_the_seqs_carry_trace_keeps(drawn, shared):
    """``carry._carry_one`` (both ways of running it per trace: on the driver, in a Spark task) takes
    every row of a kept seq and every row of a closed seq kept by no row, as ``carry_trace``'s seq
    sets choose them — also when rows share a seq (``shared[i]``: row i has row i-1's seq; nothing
    in the row validation refuses that)."""
    rows, subscriptions = drawn
    seq, renumbered = 0, []
    for i, r in enumerate(rows):
        seq += 0 if i == 0 or (i < len(shared) and shared[i]) else 1
        renumbered.append({**r, "seq": seq})
    rows = renumbered
    table = pa.Table.from_pylist(rows, schema=SCHEMA)
    keep_t, tomb_t, open_keys = _carry_one(table, subscriptions)
    keep, closed, opened = carry_trace(rows, subscriptions)
    assert keep_t.to_pylist() == [r for r in table.to_pylist() if r["seq"] in keep]
    assert tomb_t.to_pylist() == [r for r in table.to_pylist() if r["seq"] in closed]
    assert set(open_keys) == opened


def test_an_orderly_owner_keeps_its_last_consume_of_each_epoch():
    """The stateful reason spelled out: C1's ownership of queue 0 (re-granted, so not a new
    ownership) holds its last SUCCESS consume (its first, 2, is kept as the group's first consume,
    for LOST); C2's, ended by its unlock, holds none; a crash starts an epoch and C1's consume
    before it stays. (C2's consume names its message, sent and consumed, so nothing else keeps it: a
    SUCCESS consume without its msg_key leaves its group's LOST unjudged and is carried for good,
    ``traces/unjudged.py``.)"""
    q = {"group": "G", "topic": "T", "queue_id": 0}
    rows = [
        {"seq": 0, "event": "send", "status": "SEND_OK", "msg_key": "k7", "queue_offset": 2, **q},
        {"seq": 1, "event": "lock", "status": "GRANTED", "client_id": "C1", **q},
        {"seq": 2, "event": "consume", "status": "SUCCESS", "client_id": "C1", "queue_offset": 0, **q},
        {"seq": 3, "event": "lock", "status": "GRANTED", "client_id": "C1", **q},
        {"seq": 4, "event": "consume", "status": "SUCCESS", "client_id": "C1", "queue_offset": 1, **q},
        {"seq": 5, "event": "crash", "status": "power"},
        {"seq": 6, "event": "lock", "status": "GRANTED", "client_id": "C2", **q},
        {"seq": 7, "event": "consume", "status": "SUCCESS", "client_id": "C2", "queue_offset": 2, "msg_key": "k7",
         **q},
        {"seq": 8, "event": "unlock", "client_id": "C2", **q},
    ]
    good, rejected = validate([{"ts": r["seq"], **r} for r in rows])
    assert not rejected
    keep, closed, open_keys = _columns(good, {})
    assert keep == {1, 2, 3, 4, 5, 6, 8} and (keep, closed, open_keys) == carry_trace(good)


def test_a_trace_with_filter_details_is_carried_whole():
    rows = [
        {"seq": 1, "ts": 1, "event": "send", "topic": "T", "msg_key": "k", "detail": '{"tags": "a"}'},
        {"seq": 2, "ts": 2, "event": "store", "topic": "T", "queue_id": 0, "queue_offset": 0, "msg_key": "k"},
    ]
    good, _ = validate(rows)
    assert _columns(good, {}) == ({1, 2}, set(), {"k"}) == carry_trace(good)


@pytest.mark.parametrize(
    ("detail", "whole"),
    [('{"message_model": "BROADCASTING"}', True), ('{"message_model": "CLUSTERING"}', False),
     ('{"note": "BROADCASTING"}', False), ('{"message_model": "BROADCASTING"', False)],
)
def test_a_trace_with_a_broadcasting_clients_row_is_carried_whole(detail, whole):
    """Any row whose ``detail.message_model`` is BROADCASTING (``broadcasting_row``: its text parsed only
    when it names BROADCASTING) makes the trace carried whole; a detail that only names the word, or is
    not JSON, does not."""
    rows = [
        {"seq": 1, "ts": 1, "event": "send", "topic": "T", "queue_id": 0, "queue_offset": 0, "msg_key": "k",
         "status": "SEND_OK"},
        {"seq": 2, "ts": 2, "event": "consume", "group": "G", "topic": "T", "queue_id": 0, "queue_offset": 0,
         "msg_key": "k", "status": "SUCCESS", "client_id": "C1", "detail": detail},
        {"seq": 3, "ts": 3, "event": "drain"},
    ]
    good, _ = validate(rows)
    got = _columns(good, {})
    assert got == carry_trace(good) and (got == ({1, 2, 3}, set(), {"k"})) == whole


def test_a_commit_without_a_topic_takes_its_first_halfs():
    """k's COMMIT names no topic: LOST owes it to the consumers of its first half's topic T (G,
    which consumed it), not of U (H, which did not): k is closed."""
    rows = [
        {"seq": 1, "event": "txn_half", "topic": "T", "msg_key": "k", "txn_id": "x"},
        {"seq": 2, "event": "txn_half", "topic": "U", "msg_key": "k", "txn_id": "x"},
        {"seq": 3, "event": "txn_end", "status": "COMMIT", "msg_key": "k", "txn_id": "x"},
        {"seq": 4, "event": "consume", "status": "SUCCESS", "group": "G", "topic": "T", "msg_key": "k"},
        {"seq": 5, "event": "consume", "status": "SUCCESS", "group": "H", "topic": "U", "msg_key": "j"},
    ]
    good, rejected = validate([{"ts": r["seq"], **r} for r in rows])
    assert not rejected
    keep, closed, open_keys = _columns(good, {})
    assert "k" not in open_keys and (keep, closed, open_keys) == carry_trace(good)


def test_a_closed_keys_highest_schedule_position_is_carried():
    """LOST's delay-progress exemption reads the highest SCHEDULE_TOPIC_XXXX position of each queue
    before a power crash: k1's store at 5 stays although k1 is closed and the queue's last store is
    k3's at 2 (``tests/traces/carry_days.py``)."""
    day1, _ = schedule_reuse_days()
    good, rejected = validate(day1)
    assert not rejected
    keep, closed, open_keys = _columns(good, {})
    assert {5, 6} <= keep and (keep, closed, open_keys) == carry_trace(good)


@st.composite
def _pairs(draw: Any) -> tuple[list, dict]:
    rows = drawn_rows(draw, events=PAIR_EVENTS, gaps=(0, 1), statuses=PAIR_STATUS, fields=pair_fields(_FIELDS),
                      most=60)
    good, _ = validate(rows)
    return good, {}


@budget_run
@settings(max_examples=_EXAMPLES)
@given(_pairs())
def test_the_columns_carry_what_the_row_loop_carries_in_pair_traces(drawn):
    """A master/slave pair's rows (issue 43: ``traces/carry_ha.py``), two pairs and rows naming none."""
    rows, subscriptions = drawn
    assert _columns(rows, subscriptions) == carry_trace(rows, subscriptions)
