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
from tests.untraced import budget_run

sys.path.insert(0, str(Path(__file__).resolve().parent))
BROKEN = importlib.import_module("broken_brokers").BROKEN  # a helper module beside this test

# Lockstep mode: the candidate's first observable difference from the model is the catch
# ("lockstep mismatch in <operation>"); which operation shows it first depends on the
# program Hypothesis draws. name -> (examples, steps): the budget, generous because a
# run stops at its first failure.
LOCKSTEP = {name: (150, 50) for name in (
    "dlq_one_retry_early", "delay_one_second_early", "lock_stolen_before_expiry",
    "lock_never_expires", "rollback_commits", "commit_ignored", "offset_plus_one",
    "sync_send_lost_on_power", "one_check_too_many", "retry_level_off_by_one",
    "tag_filter_ignored", "queue_offset_skips", "dlq_wrong_reconsume_times",
    "duplicate_delivery", "check_before_timeout", "sql_filter_ignored", "sql_null_is_true",
    # issue 41: locks that look expired after half their lifetime (to another client's lock; only
    # when never renewed; to another client's unlock) — caught by the lock probes at the deadline
    # walks' instants (properties/edges.py)
    "lock_half_life", "lock_half_life_unrenewed", "unlock_frees_half_expired",
    # 5.x timer messages (judged under rocketmq-5.2: PROFILES)
    "timer_fires_early", "timer_lost_after_crash", "timer_rounds_up", "timer_ignores_delay_level",
    # issue 42: a group's clients served as sharers of its queues — only a broadcasting group shows it
    "pulls_exclusive_per_group",
    # issue 42: retention that never consults fileReservedTime — only a pass with young files shows it
    "retention_ignores_reserve",
    # issue 42: an ASYNC flush service that never flushes — only a power loss after one of its passes shows it
    "flush_service_idle",
    # issue 42: a SYNC group commit that leaves what did not wait — only a power loss after its pass shows it
    "group_commit_waits_for_a_request",
    # issue 42: a hung disk — SEND_OK for a flush that timed out; a group commit parked after the stall
    "stalled_flush_answered_ok", "group_commit_parked_after_stall",
    # issue 40: 5.x pop (judged under rocketmq-5.2: PROFILES) — the pop ladder of every example's prelude
    "pop_revive_early", "pop_acked_revived", "pop_ack_lost_on_restart", "pop_orderly_not_blocked",
    "pop_reconsume_kept",
)}
# Dead-lettering one retry early needs a message failed up to its group's max: longer programs.
LOCKSTEP["dlq_one_retry_early"] = (300, 80)
LOCKSTEP_NEEDLE = "lockstep mismatch in "
# The profile a broken broker is judged under (the default: rocketmq-4.9). The timer brokers break a 5.x
# rule; under 4.9 the TIMER_* properties are user properties and they behave as the model.
PROFILES = {name: "rocketmq-5.2" for name in ("timer_fires_early", "timer_lost_after_crash", "timer_rounds_up",
                                              "timer_ignores_delay_level", "pop_revive_early", "pop_acked_revived",
                                              "pop_ack_lost_on_restart", "pop_orderly_not_blocked",
                                              "pop_reconsume_kept")}

# invariants alone (no model beside the broker): name -> (examples, steps, code that catches it)
INVARIANTS_ONLY = {
    "lock_stolen_before_expiry": (150, 50, "LOCK_OVERLAP"),
    "rollback_commits": (150, 50, "TXN_"),
    "commit_ignored": (150, 50, "LOST"),
    "one_check_too_many": (150, 50, "TXN_CHECK_EXCEEDED"),
    "tag_filter_ignored": (150, 50, "UNEXPECTED"),
    "dlq_wrong_reconsume_times": (150, 50, "DLQ_"),
    "duplicate_delivery": (150, 50, "ORDER_QUEUE_GAP"),
    "check_before_timeout": (150, 50, "TXN_CHECK_EARLY"),
    "sql_filter_ignored": (150, 50, "FILTER_MISMATCH"),
    "sql_null_is_true": (150, 50, "FILTER_MISMATCH"),
    "lock_half_life": (150, 50, "LOCK_OVERLAP"),
    "lock_half_life_unrenewed": (150, 50, "LOCK_OVERLAP"),
    "unlock_frees_half_expired": (150, 50, "LOCK_OVERLAP"),
    "timer_fires_early": (150, 50, "TIMER_EARLY"),
    "timer_lost_after_crash": (150, 50, "TIMER_UNFIRED"),
    "timer_rounds_up": (150, 50, "TIMER_EARLY"),
    "timer_ignores_delay_level": (150, 50, "MESSAGE_LIFECYCLE"),
    # LOST is two invariants' code: the per-client one names the broadcasting client that passed a message
    "pulls_exclusive_per_group": (150, 50, "NoLossPerClientProperty"),
    # issue 42's retention and flush brokers are judged without the model at the default budget
    # (INVARIANTS_AT_THE_DEFAULT_BUDGET below), a smaller budget than this table's
}


def _run(name: str, lockstep: bool, examples: int | None = None, steps: int | None = None):
    """``examples`` / ``steps`` None: the default budget (``rmqspec conform``'s)."""
    return check_conformance(BROKEN[name], lockstep=lockstep, profile=PROFILES.get(name, "rocketmq-4.9"),
                             settings=budget_settings(examples, steps, shrink=False))


def test_every_broken_broker_has_a_lockstep_test() -> None:
    assert set(LOCKSTEP) == set(BROKEN) and len(BROKEN) >= 12


@budget_run
def test_the_timer_brokers_pass_under_4_9() -> None:
    """The timer and pop brokers break only 5.x rules: under rocketmq-4.9 the same draws (user properties;
    nobody pops) pass, so their catch under 5.2 is the 5.x rule, not a side effect."""
    for name in sorted(PROFILES):
        result = check_conformance(BROKEN[name], settings=budget_settings(8, 20, shrink=False))
        assert result.passed, f"{name}: {result.render()}"


def _ids(table: dict) -> list[str]:
    """Test ids name the broken rule and what catches it, e.g. ``commit_ignored-by-LOST``."""
    return [f"{name}-by-{table[name][2] if len(table[name]) > 2 else 'lockstep'}" for name in sorted(table)]


@pytest.mark.parametrize("name", sorted(LOCKSTEP), ids=_ids(LOCKSTEP))
def test_caught_in_lockstep(name: str) -> None:
    examples, steps = LOCKSTEP[name]
    result = _run(name, True, examples, steps)
    assert not result.passed, f"{name} was not caught: {result.render()}"
    assert LOCKSTEP_NEEDLE in result.failure, result.failure
    assert result.program, "a failure carries its replayable program"


@pytest.mark.parametrize("name", sorted(INVARIANTS_ONLY), ids=_ids(INVARIANTS_ONLY))
def test_caught_by_invariants_alone(name: str) -> None:
    examples, steps, code = INVARIANTS_ONLY[name]
    result = _run(name, False, examples, steps)
    assert not result.passed, f"{name} was not caught without lockstep: {result.render()}"
    assert code in result.failure, result.failure


@budget_run
@pytest.mark.parametrize("name", sorted(LOCKSTEP))
def test_caught_in_lockstep_at_the_default_budget(name: str) -> None:
    """Issue 14: the deep rules reach every broken rule within ``rmqspec conform``'s default
    budget (40 examples × 30 steps), not only at the generous budgets above."""
    result = _run(name, True)
    assert not result.passed, f"{name} was not caught at the default budget: {result.render()}"
    assert LOCKSTEP_NEEDLE in result.failure, result.failure


# Issue 41: the lock-lifetime escapes are caught by the invariants alone at the default budget too
# (the deadline tour of every example's prelude probes the lock table at the client and broker
# lock expiries ± 1 ms: properties/edges.py).
INVARIANTS_AT_THE_DEFAULT_BUDGET = {
    "lock_half_life": "LOCK_OVERLAP",
    "lock_half_life_unrenewed": "LOCK_OVERLAP",
    "unlock_frees_half_expired": "LOCK_OVERLAP",
    # 5.x timer messages (rocketmq-5.2): the timer ladder of every example's prelude walks each due time
    # at d − 1, d, d + 1 ms, kills the broker with a copy in the wheel, sends a level with a timer
    "timer_fires_early": "TIMER_EARLY",  # fired at d − 1 (one precision early)
    "timer_lost_after_crash": "TIMER_UNFIRED",  # due before the drain, never fired (and LOST)
    "timer_rounds_up": "TIMER_EARLY",  # T = k·p + 1 fired at k·p (and MESSAGE_LIFECYCLE: the slot)
    "timer_ignores_delay_level": "MESSAGE_LIFECYCLE",  # timer: SENT --put[level]--> SCHEDULED broken
    # issue 42: the prelude's broadcasting clients each pull a message the other got first; at the drain the
    # second has committed past what it was never given
    "pulls_exclusive_per_group": "NoLossPerClientProperty",
    # issue 42: a young file deleted takes copies no group consumed, with no disk pressure to excuse it
    "retention_ignores_reserve": "LOST",
    # a message sent before a thorough pass's tick, lost in a power loss after it
    "flush_service_idle": "LOST",
    # a WAIT=false send answered before a group commit's pass, lost in a power loss after it
    "group_commit_waits_for_a_request": "LOST",
    # a send answered SEND_OK on a hung disk, lost in a power loss during the stall
    "stalled_flush_answered_ok": "LOST",
    # a FLUSH_DISK_TIMEOUT answer, lost in a power loss after the group commit's first pass past the stall
    "group_commit_parked_after_stall": "LOST",
    # issue 40: 5.x pop — the prelude's pop ladder pops a millisecond before the invisible time ends, acks, kills
    # and restarts, and takes an orderly queue with a second attempt; its rows replayed through the pop tables
    "pop_revive_early": "PopLifecycleProperty",  # a revived copy handed out before pop time + invisible time
    "pop_acked_revived": "PopLifecycleProperty",  # a revive after an ack that met its checkpoint
    "pop_ack_lost_on_restart": "PopLifecycleProperty",  # the same, across a restart
    "pop_orderly_not_blocked": "PopOrderLifecycleProperty",  # attempt A2 takes a queue A1's batch holds
    "pop_reconsume_kept": "PopLifecycleProperty",  # a revived copy whose reconsume times did not grow
}


@budget_run
@pytest.mark.parametrize("name", sorted(INVARIANTS_AT_THE_DEFAULT_BUDGET),
                         ids=[f"{n}-by-{INVARIANTS_AT_THE_DEFAULT_BUDGET[n]}"
                              for n in sorted(INVARIANTS_AT_THE_DEFAULT_BUDGET)])
def test_caught_by_invariants_alone_at_the_default_budget(name: str) -> None:
    result = _run(name, False)
    assert not result.passed, f"{name} was not caught without lockstep at the default budget: {result.render()}"
    assert INVARIANTS_AT_THE_DEFAULT_BUDGET[name] in result.failure, result.failure
