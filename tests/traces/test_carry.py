"""Incremental audits (``traces/carry.py``): auditing day by day with the carried state gives
exactly the findings of the reference checker over the whole concatenation, split anywhere —
including inside open transactions, pending retries, held locks and open orderly windows."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqspec.traces.carry import CarriedState, audit_since
from rmqspec.traces.checker import check
from rmqspec.traces.generator import GenConfig, generate
from rmqspec.traces.io import read_table
from rmqspec.traces.scenarios import SCENARIOS
from tests.ha_brokers import BROKEN_PAIRS
from tests.spark.judge_runs import drawn_rows
from tests.traces.carry_days import (
    PAIR_EVENTS,
    PAIR_STATUS,
    own_keys,
    pair_fields,
    pair_message_rows,
    schedule_reuse_days,
    touching_day,
    transaction_days,
)
from tests.traces.ha_runs import ha_pair_trace, seeded_program
from tests.untraced import budget_run

NO_FILTERS = tuple(c for c in SCENARIOS if "FILTER" not in c and "SUBSCRIPTION" not in c)


def _rows(tmp: Path, seed: int, inject: tuple[str, ...], events: int, p_timer: float = 0.0) -> list[dict]:
    out = tmp / f"t{seed}"
    generate(out, GenConfig(events=events, seed=seed, inject=inject, crashes=1, p_timer=p_timer))
    return sorted(read_table(out)[0].to_pylist(), key=lambda r: r["seq"])


def _full(rows: list[dict]) -> list[dict]:
    report = check(rows)
    found = [f.as_dict() for f in (*report.violations, *report.observations)]
    return sorted(found, key=lambda f: (f.get("trace_id") or "", f["seqs"][-1], f["code"], f["seqs"]))


def _inside(rows: list[dict], event: str, status: str | None) -> int:
    """The index just after the middle-most row of ``event`` (a cut inside what it opens)."""
    hits = [i for i, r in enumerate(rows) if r["event"] == event and (status is None or r["status"] == status)]
    assert hits, f"no {event} {status} in the trace"
    return hits[len(hits) // 2] + 1


def _days(rows: list[dict], cuts: list[int]) -> tuple[list[dict], CarriedState]:
    state = CarriedState()
    bounds = [0, *sorted(set(cuts)), len(rows)]
    merged: list[dict] = []
    for a, b in itertools.pairwise(bounds):
        merged, state = audit_since(state, rows[a:b])
    return merged, state


@budget_run
@pytest.mark.parametrize("seed", [1, 2])
def test_days_give_the_findings_of_the_whole_trace(tmp_path: Path, seed: int) -> None:
    """Seed 2 with 5.x timer messages (and a cut while one waits in the wheel)."""
    rows = _rows(tmp_path, seed, NO_FILTERS, 25_000, p_timer=0.1 if seed == 2 else 0.0)
    full = _full(rows)
    assert full, "the injected trace has findings"
    n = len(rows)
    splits = [
        [n // 2],
        [n // 7 * k for k in range(1, 7)],
        [_inside(rows, "txn_half", None)],  # an open transaction
        [_inside(rows, "send_back", "RETRY")],  # a retry not yet delivered
        [_inside(rows, "lock", "GRANTED")],  # a held lock
        [_inside(rows, "orderly_start", None)],  # an open orderly window
        [_inside(rows, "drain", None) - 1],  # the drain on the second day
    ]
    if seed == 2:
        waiting = [i for i, r in enumerate(rows) if r["event"] == "store" and r["topic"] == "rmq_sys_wheel_timer"]
        splits.append([waiting[len(waiting) // 2] + 1])  # a timer message not yet fired
    for cuts in splits:
        merged, state = _days(rows, cuts)
        assert merged == full, f"split at {cuts}"
    assert len(state.rows) < n / 4, "the carried rows are a small part of the history"


def test_filters_carry_the_whole_trace(tmp_path: Path) -> None:
    rows = _rows(tmp_path, 3, ("FILTER_MISMATCH", "FILTER_SKIPPED", "SUBSCRIPTION_INCONSISTENT", "LOST"), 8_000)
    merged, state = _days(rows, [len(rows) // 3, 2 * len(rows) // 3])
    assert merged == _full(rows)
    assert len(state.rows) == len(rows)


def test_a_day_that_does_not_follow_the_state_is_refused(tmp_path: Path) -> None:
    rows = _rows(tmp_path, 4, (), 3_000)
    _, state = audit_since(CarriedState(), rows[: len(rows) // 2])
    with pytest.raises(ValueError, match="not beyond the state's last seq"):
        audit_since(state, rows[len(rows) // 4 :])


def test_closed_keys_come_back_when_a_day_touches_them(tmp_path: Path) -> None:
    """A new consumer group of an old topic (LOST for every closed message of it), a duplicate
    SUCCESS of an old message (DUPLICATED with the first consume carried as a tombstone) and a
    second drain (LOST re-judged against it)."""
    day1 = _rows(tmp_path, 6, ("LOST",), 6_000)
    _, state = audit_since(CarriedState(), day1)
    closed_keys = {r["msg_key"] for r in state.closed}
    consume = next(r for r in reversed(day1)
                   if r["event"] == "consume" and r["status"] == "SUCCESS" and r["msg_key"] in closed_keys)
    day2 = touching_day(day1, consume)
    seq = day2[0]["seq"]
    merged, _ = audit_since(state, day2)
    full = _full([*day1, *day2])
    assert merged == full
    assert any(f["code"] == "LOST" and f["group"] == "CG_NEW" for f in full)
    # the duplicate is judged against the first consume, which only the tombstones held
    tombstones = {r["seq"] for r in state.closed}
    assert any(f["code"] == "DUPLICATED" and f["seqs"][-1] == seq + 1 and f["seqs"][0] in tombstones for f in full)


# Drawn traces: every event the rules read, over colliding keys, queues, groups, clients and
# positions, cut into two or three days anywhere.
_EVENTS = ("send", "send", "store", "store", "store", "deliver", "deliver", "consume", "consume", "send_back",
           "schedule_fire", "commit_offset", "lock", "unlock", "orderly_start", "orderly_end", "txn_half",
           "txn_end", "txn_check", "txn_discard", "crash", "recover", "drain")  # fmt: skip
_STATUS = {
    "send": (None, "SEND_OK", "FLUSH_DISK_TIMEOUT"),
    "consume": ("SUCCESS", "SUCCESS", "RECONSUME_LATER"),
    "lock": ("GRANTED", "DENIED"),
    "send_back": ("RETRY", "DLQ"),
    "txn_end": ("COMMIT", "ROLLBACK"),
    "crash": ("power", "kill"),
    "orderly_end": ("SUCCESS", "ROLLBACK"),
}
_FIELDS = {
    "group": ("G", "G", "H", None),
    "topic": ("T", "T", "U", "SCHEDULE_TOPIC_XXXX", "SCHEDULE_TOPIC_XXXX", "%DLQ%G", None),
    "queue_id": (0, 1, None),
    "queue_offset": (0, 1, 2, None),
    "msg_key": ("k1", "k2", "k3", None),
    "msg_id": ("m1", "m2", None),
    "client_id": ("C1", "C2", None),
    "txn_id": ("x1", "x2", None),
    "reconsume_times": (0, 0, 1, 2, None),
    "delay_level": (1, 3, None),
    "deliver_ts": (0, 1500, 10**6, None),
    # a crash's at-risk keys, a check's number (the other events ignore them)
    "detail": (None, None, '{"at_risk": ["k1"]}', '{"at_risk": ["k2", "k3"]}', '{"check_times": 1}',
               '{"check_times": 2}'),
}


@st.composite
def _drawn_days(draw: Any) -> tuple[list[dict], list[int]]:
    rows = drawn_rows(draw, events=_EVENTS, gaps=(0, 1, 1000), statuses=_STATUS, fields=_FIELDS, most=50)
    cuts = sorted(set(draw(st.lists(st.integers(1, max(1, len(rows) - 1)), min_size=1, max_size=2))))
    return rows, cuts


@budget_run
@settings(max_examples=max(300, settings().max_examples), deadline=None)
@given(_drawn_days())
def test_drawn_days_give_the_findings_of_the_whole_trace(drawn: tuple[list[dict], list[int]]) -> None:
    rows, cuts = drawn
    assert _days(rows, cuts)[0] == _full(rows)


# Drawn transactions on one topic and group: keys close often (a COMMIT, then a SUCCESS consume
# before the drain), so the closed transactions' rows go to the tombstones and a later day
# brings them back by txn_id, by msg_key or by a power crash's at-risk keys.
_TXN_EVENTS = ("txn_half", "txn_half", "txn_end", "txn_end", "txn_end", "txn_check", "txn_check", "txn_discard",
               "consume", "consume", "consume", "deliver", "deliver", "crash", "drain")  # fmt: skip
_TXN_STATUS = {"txn_end": ("COMMIT", "COMMIT", "ROLLBACK", "UNKNOWN"), "txn_check": (None, "COMMIT"),
               "consume": ("SUCCESS",), "crash": ("power", "kill")}
_TXN_FIELDS = {
    **{name: (values[0],) for name, values in _FIELDS.items()},
    "queue_offset": (0, 1, 2, None, None),
    "msg_key": ("k1", "k2", "k3", "k4", "k5", "k6"),
    "txn_id": ("x1", "x2", "x3", "x4", "x5", "x6"),
    "detail": _FIELDS["detail"],
}


@st.composite
def _drawn_txn_days(draw: Any) -> tuple[list[dict], list[int]]:
    rows = own_keys(draw, drawn_rows(draw, events=_TXN_EVENTS, gaps=(0, 1, 10**7), statuses=_TXN_STATUS,
                                     fields=_TXN_FIELDS, most=60))
    cuts = sorted(set(draw(st.lists(st.integers(1, max(1, len(rows) - 1)), min_size=1, max_size=3))))
    return rows, cuts


@budget_run
@settings(max_examples=max(300, settings().max_examples), deadline=None)
@given(_drawn_txn_days())
def test_drawn_transaction_days_give_the_findings_of_the_whole_trace(drawn: tuple[list[dict], list[int]]) -> None:
    rows, cuts = drawn
    assert _days(rows, cuts)[0] == _full(rows)


def test_the_highest_schedule_position_before_a_power_crash_is_carried() -> None:
    day1, day2 = schedule_reuse_days()
    full = _full([*day1, *day2])
    assert not any(f["code"] == "LOST" for f in full)  # k2 is exempt
    assert any(f["code"] == "LOST" for f in _full([*day1[:5], *day1[6:], *day2]))  # …only by k1's store
    _, state = audit_since(CarriedState(), day1)
    assert 5 in {r["seq"] for r in state.rows}
    assert audit_since(state, day2)[0] == full


@pytest.mark.parametrize(("case", "kept", "decides"), [
    ("top", {"x1"}, "x1"), ("txn_id", {"x9"}, "x1"), ("at_risk", {"x9"}, "x1"),
    ("window", {"x1", "x2", "x9"}, "x2"),
])
def test_closed_transactions_come_back_when_a_day_needs_them(case: str, kept: set[str], decides: str) -> None:
    """A transaction closed on day 1 leaves its rows as tombstones unless a rule reads it across
    transactions (``kept``), and day 2 gets the findings of the whole trace where a verdict depends
    on the transaction ``decides`` (``carry_days.transaction_days``)."""
    day1, day2, code = transaction_days(case)
    full = _full([*day1, *day2])
    _, state = audit_since(CarriedState(), day1)
    assert {r["txn_id"] for r in state.rows if r["txn_id"]} == kept
    assert {r["txn_id"] for r in state.closed if r["txn_id"]} == {r["txn_id"] for r in day1 if r["txn_id"]} - kept
    assert audit_since(state, day2)[0] == full
    without = _full([r for r in [*day1, *day2] if r["txn_id"] != decides])
    assert [f for f in full if f["code"] == code] != [f for f in without if f["code"] == code]


@pytest.mark.parametrize("broken", [False, True])
def test_retention_days_give_the_findings_of_the_whole_trace(broken: bool) -> None:
    """Retention's recorded 5.x runs (issue 42: halves and timer copies the ``expire`` rows kept or took,
    ``tests/traces/retention_runs.py``) split before, among and after the ``expire`` rows: the open halves,
    the unfired timer messages and the ``expire`` rows are carried, so every day's TXN_UNRESOLVED and
    TIMER_UNFIRED read what the whole history does."""
    from tests.traces.retention_runs import txn_timer_retention_trace

    rows = txn_timer_retention_trace(broken)  # seqs 0, 1, ...: a cut is an index
    full = _full(rows)
    assert {f["code"] for f in full} >= ({"TXN_UNRESOLVED", "TIMER_UNFIRED"} if broken else {"TXN_UNRESOLVED"})
    expire = [i for i, r in enumerate(rows) if r["event"] == "expire"]
    n = len(rows)
    for cuts in ([n // 3, 2 * n // 3], [expire[0]], [expire[1]], [expire[-1] + 1], [n - 1]):
        merged, _ = _days(rows, cuts)
        assert merged == full, f"split at {cuts}"


# A master/slave pair's rows (issue 43; ``traces/carry_ha.py``): the pair replay's state — the slave's end and
# records, the epoch's master records and acknowledged sends, what rows naming no pair left unknown — is
# carried, so a day judges a pair as the whole history does wherever it is cut.
@pytest.mark.parametrize("broken", [None, *BROKEN_PAIRS])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pair_days_give_the_findings_of_the_whole_trace_cut_anywhere(broken: str | None, seed: int) -> None:
    """A recorded pair run (``tests/traces/ha_runs.py``, honest or broken) cut at every position into two days,
    and into three at every third: the merged findings are the whole trace's."""
    rows = ha_pair_trace(seeded_program(seed, 60), broken)
    full = _full(rows)
    n = len(rows)
    for cut in range(1, n):
        assert _days(rows, [cut])[0] == full, f"split at {cut}"
    for cut in range(1, n - 1, 3):
        assert _days(rows, [cut, cut + 1 + (n - cut) // 2])[0] == full, f"split at {cut}"


def test_pair_runs_find_what_their_breakage_breaks() -> None:
    """The runs the test above cuts hold HA findings (each broken pair's, on some seed) and carry less than the
    whole run."""
    codes: set[str] = set()
    for broken in BROKEN_PAIRS:
        for seed in (0, 1, 2):
            rows = ha_pair_trace(seeded_program(seed, 60), broken)
            codes |= {f["code"] for f in _full(rows) if f["code"].startswith("HA_")}
            _, state = _days(rows, [len(rows) // 2])
            assert len(state.rows) < len(rows), broken
    assert {"HA_SYNC_ACK_UNREPLICATED", "HA_SLAVE_WROTE", "HA_SLAVE_BEYOND_REPLICATED"} <= codes


@st.composite
def _drawn_pair_days(draw: Any) -> tuple[list[dict], list[int]]:
    rows = drawn_rows(draw, events=PAIR_EVENTS, gaps=(0, 1), statuses=PAIR_STATUS, fields=pair_fields(_FIELDS), most=50)
    cuts = sorted(set(draw(st.lists(st.integers(1, max(1, len(rows) - 1)), min_size=1, max_size=3))))
    return rows, cuts


@budget_run
@settings(max_examples=max(300, settings().max_examples), deadline=None)
@given(_drawn_pair_days())
def test_drawn_pair_days_give_the_findings_of_the_whole_trace(drawn: tuple[list[dict], list[int]]) -> None:
    rows, cuts = drawn
    assert _days(rows, cuts)[0] == _full(rows)


@st.composite
def _drawn_pair_message_days(draw: Any) -> tuple[list[dict], list[int]]:
    rows = pair_message_rows(draw)
    cuts = sorted(set(draw(st.lists(st.integers(1, max(1, len(rows) - 1)), min_size=1, max_size=3))))
    return rows, cuts


@budget_run
@settings(max_examples=max(300, settings().max_examples), deadline=None)
@given(_drawn_pair_message_days())
def test_drawn_pair_days_of_closed_messages_give_the_findings_of_the_whole_trace(
    drawn: tuple[list[dict], list[int]],
) -> None:
    """A pair's messages close at once (their rows are tombstones): what the pair replay reads of them — the
    master's records, the acknowledged sends, the transfers — is carried for the pair."""
    rows, cuts = drawn
    assert _days(rows, cuts)[0] == _full(rows)
