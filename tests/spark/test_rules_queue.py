"""The queue judge (``spark/rules_queue.py`` with ``rules_lock.py``), in-process, against the checker.

Hypothesis draws small traces of stores, deliveries, acknowledgements,
commits, locks, unlocks, orderly windows and consumes over two queues and
three clients, with crashes between them; the judge gets every row (it picks
each family's rows itself) and must give exactly the checker's findings of
its six codes (code, seqs, keys, reason). Some consumer and orderly rows are a
broadcasting client's (``detail.message_model``: OFFSET_OVERRUN per client, no lock rules for its
orderly rows). ``stabbing_min`` is held to a brute force.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from rmqspec.spark.arrow_judge import NONE, judge, stabbing_min
from rmqspec.spark.rules_lock import LOCK_COLUMNS
from rmqspec.spark.rules_queue import _Judge
from rmqspec.traces.checker_cases import PARAMS
from rmqspec.traces.checks_common import BROADCASTING, broadcasting_row
from tests.spark.judge_runs import checked_rows, drawn_rows, judged_rows

LOCK_CODES = {"ORDER_KEY_REORDERED", "LOCK_OVERLAP", "ORDERLY_WITHOUT_LOCK", "ORDERLY_CONCURRENT",
              "ORDERLY_LOCK_OUTLIVED"}
CODES = {*LOCK_CODES, "ORDER_QUEUE_GAP", "OFFSET_OVERRUN", "OFFSET_LOST"}
_EVENTS = ("lock", "lock", "unlock", "orderly_start", "orderly_end", "consume", "consume", "consume", "crash",
           "store", "store", "deliver", "deliver", "send_back", "commit_offset", "commit_offset")  # fmt: skip
_STATUS = {
    "lock": ("GRANTED", "GRANTED", "DENIED"),
    "consume": ("SUCCESS", "SUCCESS", "RECONSUME_LATER"),
    "send_back": ("RETRY", "DLQ"),
    "commit_offset": (None, None, "RESTORED"),
    "orderly_end": ("SUCCESS", None, "ROLLBACK"),
}
_STRINGS = {"trace", "event", "group", "topic", "client_id", "status"}
_BROADCAST = ("deliver", "consume", "send_back", "commit_offset", "orderly_start", "orderly_end", "lock", "unlock")


@st.composite
def _trace(draw: Any) -> list[dict[str, Any]]:
    fields = {
        "group": ("G", "G", "H", None),
        "topic": ("T",),
        "queue_id": (0, 1),
        "client_id": ("C1", "C2", "C3", None),
        "queue_offset": (0, 1, 2, 3, None),
    }
    gaps = (0, 1, 10_000, 30_000, 30_001, 60_000, 60_001)
    return _broadcasting(draw, drawn_rows(draw, events=_EVENTS, gaps=gaps, statuses=_STATUS, fields=fields, most=40))


def _broadcasting(draw: Any, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` with a third of the consumer and orderly rows a broadcasting client's."""
    for row in rows:
        if row["event"] in _BROADCAST and draw(st.integers(0, 2)) == 0:
            row["detail"] = {"message_model": BROADCASTING}
    return rows


def _judged(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    epoch, crashes, family = 0, 0, []
    for r in rows:
        if r["event"] in ("crash", "recover"):
            epoch += 1
            crashes += r["event"] == "crash"
        else:
            family.append({**{c: r.get(c) for c in LOCK_COLUMNS}, "trace": "", "epoch": epoch, "crashes": crashes,
                           "broadcasting": 1 if broadcasting_row(r) else None})  # ``rules_queue._narrowed``
    found = judged_rows(_Judge(PARAMS), family, (*LOCK_COLUMNS, "crashes"), _STRINGS)
    return sorted(
        (f["code"], tuple(f["seqs"]), f["group"], f["topic"], f["queue_id"], f["client_id"], f["reason"])
        for f in found
    )


def _checked(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted(
        (f.code, tuple(f.seqs), *(f.keys.get(k) for k in ("group", "topic", "queue_id", "client_id")), f.reason)
        for f in checked_rows(rows, CODES)
    )


@given(_trace())
def test_the_judge_finds_what_the_checker_finds(rows):
    assert _judged(rows) == _checked(rows)


_ORDERLY = ("lock", "lock", "unlock", "orderly_start", "orderly_start", "orderly_end", "crash")


@st.composite
def _orderly_trace(draw: Any) -> list[dict[str, Any]]:
    """Mostly orderly windows, opened and closed by three clients around their locks (ORDERLY_WITHOUT_LOCK and
    ORDERLY_CONCURRENT are numpy over these rows)."""
    fields = {"group": ("G", "G", None), "topic": ("T",), "queue_id": (0, 1), "client_id": ("C1", "C2", "C3", None)}
    rows = drawn_rows(draw, events=_ORDERLY, gaps=(0, 1, 30_000, 30_001), statuses=_STATUS, fields=fields, most=40)
    return _broadcasting(draw, rows)


@given(_orderly_trace())
def test_the_judge_finds_what_the_checker_finds_in_orderly_windows(rows):
    assert _judged(rows) == _checked(rows)


def _rows(raw: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
    return [
        {"seq": i, "ts": ts, "event": ev, "group": "G", "topic": "T", "queue_id": 0, "client_id": c,
         "status": status, "queue_offset": offset}
        for i, (ev, ts, c, status, offset) in enumerate(raw)
    ]  # fmt: skip


def test_a_trace_of_every_lock_code():
    """C1 owns queue 0 and consumes out of order; C2 is granted it while C1's lock is fresh and starts
    under that grant while C1's window is open (the observation: C1's listener outlived its lock); C3
    starts without a lock while both windows are open."""
    rows = _rows([
        ("lock", 0, "C1", "GRANTED", None),
        ("orderly_start", 0, "C1", None, None),
        ("consume", 1, "C1", "SUCCESS", 5),
        ("consume", 2, "C1", "SUCCESS", 4),
        ("lock", 3, "C2", "GRANTED", None),
        ("orderly_start", 4, "C2", None, None),
        ("orderly_start", 5, "C3", None, None),
    ])  # fmt: skip
    judged = _judged(rows)
    assert {f[0] for f in judged} == LOCK_CODES
    assert judged == _checked(rows)


def test_a_gap_and_an_overrun():
    """Offset 2 is skipped by the stores; offset 0 is redelivered (the later deliver is the one
    reported) and never acknowledged, so the commit of 2 passes it; once it is acknowledged the
    commit of 3 is fine."""
    rows = _rows([
        ("store", 0, None, None, 0),
        ("store", 0, None, None, 1),
        ("store", 0, None, None, 3),
        ("deliver", 1, "C1", None, 0),
        ("deliver", 1, "C1", None, 1),
        ("consume", 2, "C1", "SUCCESS", 1),
        ("deliver", 3, "C1", None, 0),
        ("commit_offset", 4, "C1", None, 2),
        ("send_back", 5, "C1", "RETRY", 0),
        ("commit_offset", 6, "C1", None, 3),
    ])  # fmt: skip
    judged = _judged(rows)
    assert [(f[0], f[1]) for f in judged] == [("OFFSET_OVERRUN", (6, 7)), ("ORDER_QUEUE_GAP", (1, 2))]
    assert judged == _checked(rows)


def test_a_broadcasting_clients_queue_is_its_own():
    """Broadcasting clients C1 and C2 each got offset 0: C1's failed consume drops it (acknowledged), so its
    commit of 1 is fine; C2's commit of 1 passes its own pending 0. Their orderly starts need no lock and
    overlap no one; the clustering C3's start has no lock."""
    rows = _rows([
        ("deliver", 0, "C1", None, 0),
        ("deliver", 0, "C2", None, 0),
        ("consume", 1, "C1", "RECONSUME_LATER", 0),
        ("commit_offset", 2, "C1", None, 1),
        ("commit_offset", 2, "C2", None, 1),
        ("orderly_start", 3, "C1", None, None),
        ("orderly_start", 3, "C2", None, None),
        ("orderly_start", 4, "C3", None, None),
    ])  # fmt: skip
    for row in rows[:-1]:
        row["detail"] = {"message_model": BROADCASTING}
    judged = _judged(rows)
    assert [(f[0], f[1]) for f in judged] == [("OFFSET_OVERRUN", (1, 4)), ("ORDERLY_WITHOUT_LOCK", (7,))]
    assert judged == _checked(rows)


def test_a_restart_that_lost_an_offset():
    """A clean restart reports offset 3 where 5 was committed; after a crash a RESTORED 3 is no finding."""
    rows = _rows([
        ("commit_offset", 0, None, None, 5),
        ("commit_offset", 1, None, "RESTORED", 3),
        ("crash", 2, None, None, None),
        ("commit_offset", 3, None, "RESTORED", 2),
    ])  # fmt: skip
    judged = _judged(rows)
    assert [(f[0], f[1]) for f in judged] == [("OFFSET_LOST", (0, 1))]
    assert judged == _checked(rows)


def test_an_empty_partition_gives_nothing():
    assert list(judge(_Judge(PARAMS))(iter([]))) == []


@given(st.integers(1, 70).flatmap(lambda n: st.tuples(
    st.just(n),
    st.lists(st.tuples(st.integers(0, n), st.integers(0, n), st.integers(0, 99)), max_size=30),
    st.lists(st.integers(0, n - 1), max_size=20),
)))  # fmt: skip
def test_stabbing_min_is_the_min_over_the_intervals_holding_each_point(case):
    n, intervals, points = case
    lo = np.array([a for a, _, _ in intervals], dtype=np.int64)
    hi = np.array([b for _, b, _ in intervals], dtype=np.int64)
    values = np.array([v for _, _, v in intervals], dtype=np.int64)
    got = stabbing_min(lo, hi, values, np.array(points, dtype=np.int64), n).tolist()
    want = [min((v for a, b, v in intervals if a <= p < b), default=NONE) for p in points]
    assert got == want
