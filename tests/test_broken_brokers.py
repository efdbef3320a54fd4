"""The suite's power: every deliberately broken broker is caught, and by what.

Each test runs the conformance machine (ci budget, derandomized, no shrinking so
the catch is fast) against one broken broker from ``broken_brokers.py`` and
asserts WHICH invariant or lockstep comparison caught it. A few also run
without lockstep to show the invariants alone catch them.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from rmqspec.properties.runner import budget_settings, check_conformance

sys.path.insert(0, str(Path(__file__).resolve().parent))
BROKEN = importlib.import_module("broken_brokers").BROKEN  # a helper module beside this test

# name -> (examples, steps, text that must appear in the failure) — lockstep mode
LOCKSTEP = {
    "dlq_one_retry_early": (150, 50, "lockstep mismatch in pull("),
    "delay_one_second_early": (40, 30, "lockstep mismatch in pull("),
    "lock_stolen_before_expiry": (150, 50, "lockstep mismatch in lock_batch("),
    "lock_never_expires": (150, 50, "lockstep mismatch in lock_batch("),
    "rollback_commits": (40, 30, "lockstep mismatch in pull("),
    "commit_ignored": (40, 30, "lockstep mismatch in pull("),
    "offset_plus_one": (40, 30, "lockstep mismatch in query_offset("),
    "sync_send_lost_on_power": (40, 30, "lockstep mismatch in pull("),
    "one_check_too_many": (40, 30, "TRANS_CHECK_MAX_TIME_TOPIC"),
    "retry_level_off_by_one": (150, 50, "lockstep mismatch in pull("),
    "tag_filter_ignored": (150, 50, "lockstep mismatch in pull("),
    "queue_offset_skips": (40, 30, "lockstep mismatch in send("),
    "dlq_wrong_reconsume_times": (150, 50, "reconsume_times"),
    "duplicate_delivery": (40, 30, "next_begin_offset"),
    "check_before_timeout": (40, 30, "lockstep mismatch in tick("),
}

# invariants alone (no model beside the broker): name -> (examples, steps, code that catches it)
INVARIANTS_ONLY = {
    "lock_stolen_before_expiry": (150, 50, "LOCK_OVERLAP"),
    "rollback_commits": (40, 30, "TXN_"),
    "commit_ignored": (40, 30, "LOST"),
    "one_check_too_many": (40, 30, "TXN_CHECK_EXCEEDED"),
    "tag_filter_ignored": (150, 50, "UNEXPECTED"),
    "dlq_wrong_reconsume_times": (150, 50, "DLQ_"),
    "duplicate_delivery": (40, 30, "ORDER_QUEUE_GAP"),
    "check_before_timeout": (40, 30, "TXN_CHECK_EARLY"),
}


def _run(name: str, lockstep: bool, examples: int = 40, steps: int = 30):
    return check_conformance(BROKEN[name], lockstep=lockstep,
                             settings=budget_settings(examples, steps, shrink=False))


def test_every_broken_broker_has_a_lockstep_test() -> None:
    assert set(LOCKSTEP) == set(BROKEN) and len(BROKEN) >= 12


def _ids(table: dict) -> list[str]:
    """Test ids name the broken rule and what catches it, e.g. ``commit_ignored-by-LOST``."""
    out = []
    for name in sorted(table):
        needle = table[name][2]
        out.append(f"{name}-by-{needle.strip('(').replace(' ', '_')}")
    return out


@pytest.mark.parametrize("name", sorted(LOCKSTEP), ids=_ids(LOCKSTEP))
def test_caught_in_lockstep(name: str) -> None:
    examples, steps, needle = LOCKSTEP[name]
    result = _run(name, True, examples, steps)
    assert not result.passed, f"{name} was not caught: {result.render()}"
    assert needle in result.failure, result.failure
    assert result.program, "a failure carries its replayable program"


@pytest.mark.parametrize("name", sorted(INVARIANTS_ONLY), ids=_ids(INVARIANTS_ONLY))
def test_caught_by_invariants_alone(name: str) -> None:
    examples, steps, code = INVARIANTS_ONLY[name]
    result = _run(name, False, examples, steps)
    assert not result.passed, f"{name} was not caught without lockstep: {result.render()}"
    assert code in result.failure, result.failure
