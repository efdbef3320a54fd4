"""The message family's vectorised judge (``spark/rules_message.py``), in-process, against the checker.

The Spark tests run the judge inside Spark's Python workers (``mapInArrow``);
here the same judge runs on Arrow tables in this process, over many small
Hypothesis-drawn traces whose keys collide often, and must give exactly the
reference checker's findings of its codes: code, seqs, keys and reason. The
judge includes the retry limits' rules (``spark/rules_retry.py``). Some consumes timed out
(``detail.return_type``: DUPLICATED's reason names it), and some consumer rows are a
broadcasting client's (DUPLICATED per client; the group-wide LOST leaves their groups out, and LOST per
client is ``spark/rules_broadcast.py``'s, held to the checker in ``test_broadcast.py``).
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from rmqspec.spark.arrow_judge import running, segment_min
from rmqspec.spark.rules import _MSG_EVENTS
from rmqspec.spark.rules_message import _COLUMNS, _Judge
from rmqspec.traces.checker_cases import PARAMS
from rmqspec.traces.checks_common import BROADCASTING, at_risk_keys, broadcasting_row
from rmqspec.traces.checks_delivery import _timed_out
from tests.spark.judge_runs import checked_rows, drawn_rows, judged_rows

# The codes the judge owns.
CODES = {
    "UNEXPECTED", "RECOVERED", "DUPLICATED", "RETRY_EARLY", "TXN_VISIBLE_BEFORE_COMMIT",
    "TXN_ROLLBACK_VISIBLE", "DELAY_EARLY", "LOST", "DLQ_EARLY", "DLQ_MISSED", "DLQ_DELAYED", "SCHEDULE_DUPLICATED",
    "TIMER_EARLY", "TIMER_DUPLICATED", "TIMER_UNFIRED",
}  # fmt: skip
_STATUS = {
    "send": ("SEND_OK", None, "FAILED", "SUCCESS", "FLUSH_DISK_TIMEOUT"),
    "consume": ("SUCCESS", "SUCCESS", "RECONSUME_LATER"),
    "send_back": ("RETRY", "RETRY", "DLQ"),
    "txn_end": ("COMMIT", "ROLLBACK", "UNKNOWN", None),
    "crash": ("kill", "power"),
}
_EVENTS = (*_MSG_EVENTS, "deliver", "consume", "store", "send", "crash", "commit_offset")
BROADCAST_EVENTS = ("deliver", "consume", "commit_offset")  # the rows of a broadcasting group (``Trace.broadcasting``)


@st.composite
def _trace(draw: Any) -> list[dict[str, Any]]:
    fields = {
        "group": ("G", "G", "H", None),
        "topic": ("T", "T", "U", "SCHEDULE_TOPIC_XXXX", "%DLQ%G", "rmq_sys_wheel_timer", None),
        "msg_key": ("K1", "K2", None),
        "msg_id": ("M1", "M2", None),
        "reconsume_times": (0, 0, 1, 1, 2, None),
        "deliver_ts": (None, 0, 1000, 10_000, 60_000),  # a delay after the row's ts
        "delay_level": (None, -1, 0, 1, 1, 3),
        "client_id": ("C1", "C2", None),
    }
    gaps = (0, 1, 999, 1000, 5000, 60_000)
    rows = drawn_rows(draw, events=_EVENTS, gaps=gaps, statuses=_STATUS, fields=fields, most=30)
    for row in rows:
        if row["deliver_ts"] is not None:
            row["deliver_ts"] += row["ts"]
        if row["event"] == "send_back" and draw(st.booleans()):
            row["detail"] = {"max": draw(st.sampled_from((0, 1, 2, True, "1")))}
        if row["event"] == "crash":
            row["detail"] = {"at_risk": draw(st.lists(st.sampled_from(("K1", "K2")), max_size=1))}
        if row["event"] == "timer_fire" and draw(st.booleans()):
            row["detail"] = {"from_commitlog_offset": draw(st.sampled_from((0, 1, "1")))}
        if row["event"] in BROADCAST_EVENTS and draw(st.integers(0, 2)) == 0:
            row["detail"] = {"message_model": BROADCASTING}
        if row["event"] == "consume" and draw(st.integers(0, 3)) == 0:
            row["detail"] = {**(row.get("detail") or {}), "return_type": draw(st.sampled_from(("TIME_OUT", "FAILED")))}
    if draw(st.booleans()):
        rows.append({"seq": len(rows), "ts": rows[-1]["ts"] + 1, "event": "drain"})
    return rows


def _sb_max(row: dict[str, Any]) -> int | None:
    """``inputs.send_back_max``'s reading of a row: a send_back's integral ``detail.max``."""
    value = (row.get("detail") or {}).get("max")
    return value if row["event"] == "send_back" and type(value) is int else None


def _client(row: dict[str, Any]) -> str | None:
    """``rules_message._narrowed``'s client: a broadcasting client's consume's, else null."""
    return row.get("client_id") if row["event"] == "consume" and broadcasting_row(row) else None


def _from_clo(row: dict[str, Any]) -> int | None:
    """``inputs.from_commitlog_offset``'s reading of a row: a timer_fire's integral ``detail.from_commitlog_offset``."""
    value = (row.get("detail") or {}).get("from_commitlog_offset")
    return value if row["event"] == "timer_fire" and type(value) is int else None


def _judged(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """The judge's findings of one trace (trace id "")."""
    drains = [(r["seq"], r["ts"]) for r in rows if r["event"] == "drain"]
    drain, drain_ts = max(drains) if drains else (None, None)
    risky: dict[str, set[str]] = {}
    for r in rows:
        for key in at_risk_keys(r):
            risky.setdefault(key, set()).add("")
    groups: dict[tuple[str, str], list[str]] = {}
    broadcast = {r["group"] for r in rows if r["event"] in BROADCAST_EVENTS and broadcasting_row(r)}
    for r in rows:
        if r["event"] in ("deliver", "consume") and r["group"] is not None and r["topic"] is not None:
            groups.setdefault(("", r["topic"]), []).append(r["group"])
    groups = {k: sorted(set(v) - broadcast) for k, v in groups.items()}  # ``rules_message.message_findings``
    family, crashes = [], 0
    for r in rows:
        crashes += r["event"] == "crash"
        if r["event"] in _MSG_EVENTS and (r.get("msg_key") is not None or r["event"] in ("send_back", "deliver")):
            family.append({**{c: r.get(c) for c in _COLUMNS}, "trace": "", "drain": drain, "sb_max": _sb_max(r),
                           "crashes": crashes, "from_commitlog_offset": _from_clo(r),
                           "client_id": _client(r), "timed_out": 1 if _timed_out(r) else None})  # fmt: skip
    strings = ("trace", "event", "group", "topic", "msg_key", "msg_id", "status", "client_id")  # the others int64
    drain_ts = {} if drain is None else {"": drain_ts}
    found = judged_rows(_Judge(PARAMS, risky, groups, drain is not None, drain_ts), family, _COLUMNS, strings)
    return sorted((f["code"], tuple(f["seqs"]), f["group"], f["topic"], f["msg_key"], f["client_id"], f["reason"])
                  for f in found)


def _checked(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """The checker's findings of the judge's codes (LOST only without crashes: its crash
    exemptions are joins after the judge; and not a broadcasting client's, ``rules_broadcast.py``'s)."""
    crashed = any(r["event"] == "crash" for r in rows)
    return sorted(
        (f.code, tuple(f.seqs), *(f.keys.get(k) for k in ("group", "topic", "msg_key", "client_id")), f.reason)
        for f in checked_rows(rows, CODES)
        if not (f.code == "LOST" and (crashed or "client_id" in f.keys))
    )


@given(_trace())
def test_the_judge_finds_what_the_checker_finds(rows):
    judged = _judged(rows)
    crashed = any(r["event"] == "crash" for r in rows)
    if crashed:
        judged = [f for f in judged if f[0] != "LOST"]
    assert judged == _checked(rows)


def test_a_trace_of_every_message_code():
    """One hand-made trace in which each of the judge's codes is found once at least."""
    rows = [
        {"seq": 0, "ts": 0, "event": "deliver", "group": "G", "topic": "T", "msg_key": "KU"},
        {"seq": 1, "ts": 0, "event": "store", "topic": "T", "msg_key": "KR"},
        {"seq": 2, "ts": 1, "event": "deliver", "group": "G", "topic": "T", "msg_key": "KR"},
        {"seq": 3, "ts": 1, "event": "send", "topic": "T", "msg_key": "KD", "status": "SEND_OK"},
        {"seq": 4, "ts": 2, "event": "consume", "group": "G", "topic": "T", "msg_key": "KD", "status": "SUCCESS"},
        {"seq": 5, "ts": 3, "event": "consume", "group": "G", "topic": "T", "msg_key": "KD", "status": "SUCCESS"},
        {
            "seq": 6,
            "ts": 3,
            "event": "send_back",
            "group": "G",
            "topic": "T",
            "msg_key": "KD",
            "status": "RETRY",
            "reconsume_times": 1,
            "deliver_ts": 10_000,
        },
        {"seq": 7, "ts": 4, "event": "deliver", "group": "G", "topic": "T", "msg_key": "KD", "reconsume_times": 1},
        {"seq": 8, "ts": 4, "event": "txn_half", "topic": "T", "msg_key": "KT"},
        {"seq": 9, "ts": 5, "event": "deliver", "group": "G", "topic": "T", "msg_key": "KT"},
        {"seq": 10, "ts": 5, "event": "txn_end", "topic": "T", "msg_key": "KT", "status": "ROLLBACK"},
        {"seq": 11, "ts": 6, "event": "deliver", "group": "G", "topic": "T", "msg_key": "KT"},
        {"seq": 12, "ts": 6, "event": "send", "topic": "T", "msg_key": "KS", "status": "SEND_OK"},
        {"seq": 13, "ts": 6, "event": "store", "topic": "SCHEDULE_TOPIC_XXXX", "msg_key": "KS", "deliver_ts": 9000},
        {"seq": 14, "ts": 7, "event": "schedule_fire", "topic": "T", "msg_key": "KS"},
        {"seq": 15, "ts": 8, "event": "send", "topic": "T", "msg_key": "KL", "status": "SEND_OK"},
        {"seq": 16, "ts": 9, "event": "send_back", "group": "G", "topic": "T", "msg_key": "KD", "status": "DLQ",
         "reconsume_times": 2},
        {"seq": 17, "ts": 9, "event": "deliver", "group": "H", "topic": "T", "reconsume_times": 99},
        {"seq": 18, "ts": 9000, "event": "store", "topic": "%DLQ%G", "msg_key": "KD"},
        {"seq": 19, "ts": 9000, "event": "schedule_fire", "topic": "T", "msg_key": "KS"},
        {"seq": 20, "ts": 9000, "event": "store", "topic": "rmq_sys_wheel_timer", "msg_key": "KM",
         "deliver_ts": 9000},
        {"seq": 21, "ts": 9000, "event": "send", "topic": "T", "msg_key": "KM", "status": "SEND_OK",
         "deliver_ts": 9000},
        {"seq": 22, "ts": 9000, "event": "store", "topic": "rmq_sys_wheel_timer", "msg_key": "KN",
         "deliver_ts": 9000},
        {"seq": 23, "ts": 9000, "event": "send", "topic": "T", "msg_key": "KN", "status": "SEND_OK",
         "deliver_ts": 9000},
        {"seq": 24, "ts": 9000, "event": "timer_fire", "topic": "T", "msg_key": "KN", "deliver_ts": 9001,
         "detail": {"from_commitlog_offset": 3}},
        {"seq": 25, "ts": 9002, "event": "timer_fire", "topic": "T", "msg_key": "KN", "deliver_ts": 9001,
         "detail": {"from_commitlog_offset": 3}},
        {"seq": 26, "ts": 9003, "event": "drain"},
    ]
    rows = [{"group": None, "topic": None, "msg_key": None, "status": None, "reconsume_times": None,
             "deliver_ts": None, "msg_id": None, "delay_level": None, **r} for r in rows]  # fmt: skip
    judged = _judged(rows)
    assert {f[0] for f in judged} == CODES
    assert judged == _checked(rows)


@given(st.lists(st.tuples(st.booleans(), st.integers(0, 9)), max_size=40), st.booleans())
def test_running_min_and_max_stay_in_their_segment(cells, largest):
    n = len(cells)
    new = np.array([c[0] for c in cells], dtype=bool)
    if n:
        new[0] = True
    values = np.array([min(c[1], n) for c in cells], dtype=np.int64)
    got = running(values, new, largest=largest).tolist()
    want, seen = [], []
    for i in range(n):
        if new[i]:
            seen = []
        kept = [v for v in seen if v < n] if largest else seen
        want.append((max(kept) if kept else n) if largest else (min(kept) if kept else n))
        seen.append(int(values[i]))
    assert got == want
    if n:
        mins = segment_min(values, new).tolist()
        starts = [i for i in range(n) if new[i]] + [n]
        assert mins == [min(values[a:b]) for a, b in itertools.pairwise(starts) for _ in range(a, b)]
