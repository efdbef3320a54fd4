"""The reference checker on a master/slave pair's recorded rows (issue 43): on Hypothesis-drawn programs
(``tests/traces/ha_runs.py``), honest and broken, the checker's HA findings are the pair's invariants'
(``properties/inv_ha.py``) — one replay — an honest run has none, and dropping any value of a run's rows never
adds one (SPEC §8). The Spark audit's agreement on the same runs is in ``tests/spark/test_audit.py``."""

from __future__ import annotations

import copy

from hypothesis import given, settings
from hypothesis import strategies as st

from rmqspec.model.events import TraceEvent
from rmqspec.properties.codes import AuditParams
from rmqspec.properties.inv_ha import check_pair, observations
from rmqspec.traces.checker import check
from tests.ha_brokers import BROKEN_PAIRS
from tests.traces.ha_runs import ha_pair_trace, ha_program

HA = ("HA_",)


def _checker(rows: list[dict]) -> list[tuple[str, int]]:
    report = check(copy.deepcopy(rows), AuditParams())
    return sorted((f.code, f.seqs[-1]) for f in (*report.violations, *report.observations) if f.code.startswith(HA))


def _invariants(rows: list[dict]) -> list[tuple[str, int]]:
    events = [TraceEvent(**r) for r in rows]
    return sorted((v.code, v.seq) for v in (*check_pair(events), *observations(events)))


@settings(max_examples=40, deadline=None)
@given(program=ha_program(), broken=st.sampled_from([None, *BROKEN_PAIRS]))
def test_checker_and_invariants_agree_on_drawn_pairs(program, broken) -> None:
    rows = ha_pair_trace(program, broken)
    found = _checker(rows)
    assert found == _invariants(rows)
    if broken is None:
        assert [c for c, _ in found if c != "HA_ASYNC_TAIL_LOST"] == []


@settings(max_examples=15, deadline=None)
@given(program=ha_program(max_ops=15), broken=st.sampled_from([None, *BROKEN_PAIRS]), data=st.data())
def test_dropping_a_value_never_adds_a_finding(program, broken, data) -> None:
    rows = ha_pair_trace(program, broken)
    if not rows:  # a program of refused operations only (a send to the slave) writes no row: nothing to drop
        return
    base = {(f.code, f.seqs) for f in _full(rows)}
    i = data.draw(st.integers(0, len(rows) - 1))
    names = [k for k, v in rows[i].items() if v is not None and k not in ("seq", "ts", "event", "detail")]
    names += [f"detail.{k}" for k in (rows[i].get("detail") or {})]
    if not names:
        return
    name = data.draw(st.sampled_from(names))
    dropped = copy.deepcopy(rows)
    if name.startswith("detail."):
        del dropped[i]["detail"][name[7:]]
    else:
        dropped[i][name] = None
    assert {(f.code, f.seqs) for f in _full(dropped)} <= base, (i, name)


def _full(rows: list[dict]) -> list:
    report = check(copy.deepcopy(rows), AuditParams())
    return [f for f in (*report.violations, *report.observations) if f.code.startswith(HA)]
