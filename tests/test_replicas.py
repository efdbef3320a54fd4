"""Replicas of real, reported RocketMQ bugs (``broken_brokers.REPLICAS``): each is caught at the
default budget of ``rmqspec conform`` (the ci profile: 40 examples × 30 steps), in lockstep, and
— for at least 80 % of them — by the invariants alone (all a user has auditing a trace).

Generation stops at the first failing example, so a catch costs seconds; no shrinking here.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from rmqspec.properties.runner import budget_settings, check_conformance
from tests.untraced import budget_run

sys.path.insert(0, str(Path(__file__).resolve().parent))
_bb = importlib.import_module("broken_brokers")
REPLICAS, ISSUES = _bb.REPLICAS, _bb.ISSUES

# replica -> the invariant code that catches it without the model beside the broker (a tuple: any of
# those codes, when the bug shows as either, whichever the drawn examples meet first)
INVARIANTS_ONLY: dict[str, str | tuple[str, ...]] = {
    "dlq_through_schedule": "DLQ_DELAYED",
    # a copy scheduled for a send-back that routed to the DLQ: the table-derived rule sees it at the
    # send-back's copy, before DLQ_MISSED sees the retry copy it fires
    "orderly_dlq_retried_forever": "MESSAGE_LIFECYCLE",
    "check_after_resolution": "TXN_CHECK_AFTER_RESOLVED",
    "discard_before_check_max": "TXN_DISCARD_EARLY",
    "delay_progress_not_persisted_on_shutdown": "SCHEDULE_DUPLICATED",
    "delay_replayed_after_restart": "SCHEDULE_DUPLICATED",
    "offsets_lost_on_restart": "OFFSET_LOST",
    "delay_offset_not_corrected": "LOST",
    # from its 3rd record the disk stops persisting: a power loss takes acknowledged sends (LOST) and
    # the ops of resolved halves alike (the check service then checks a COMMITted half again)
    "flush_failure_acked": ("LOST", "TXN_CHECK_AFTER_RESOLVED"),
    "lock_renewal_not_recorded": "LOCK_OVERLAP",
}


def _codes(name: str) -> tuple[str, ...]:
    codes = INVARIANTS_ONLY[name]
    return (codes,) if isinstance(codes, str) else codes


def _run(name: str, lockstep: bool):
    return check_conformance(REPLICAS[name], lockstep=lockstep, settings=budget_settings(shrink=False))


def test_every_replica_cites_its_issue_and_most_are_caught_by_invariants() -> None:
    assert set(ISSUES) == set(REPLICAS) and len(REPLICAS) >= 8
    assert all("#" in ISSUES[n] and "rocketmq" in ISSUES[n] for n in REPLICAS)
    assert set(INVARIANTS_ONLY) <= set(REPLICAS)
    assert len(INVARIANTS_ONLY) >= 0.8 * len(REPLICAS)


@budget_run
@pytest.mark.parametrize("name", sorted(REPLICAS))
def test_replica_caught_in_lockstep_at_the_default_budget(name: str) -> None:
    result = _run(name, True)
    assert not result.passed, f"{name} ({ISSUES[name]}) was not caught: {result.render()}"
    assert "lockstep mismatch in " in result.failure or "invariant " in result.failure, result.failure
    assert result.program


@budget_run
@pytest.mark.parametrize("name", sorted(INVARIANTS_ONLY),
                         ids=[f"{n}-by-{'|'.join(_codes(n))}" for n in sorted(INVARIANTS_ONLY)])
def test_replica_caught_by_invariants_alone_at_the_default_budget(name: str) -> None:
    result = _run(name, False)
    assert not result.passed, f"{name} ({ISSUES[name]}) was not caught without lockstep: {result.render()}"
    assert any(code in result.failure for code in _codes(name)), result.failure
