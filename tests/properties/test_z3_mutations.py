"""Each theorem can fail: weaken one guard (or effect, or add a row) in both the
Python table and its z3 twin, and the prover must return FAILED with a
counterexample run that replays through the mutated Python table."""

from __future__ import annotations

from collections.abc import Callable

import attrs
import pytest
import z3

from rmqspec.model import lifecycle as lc
from rmqspec.properties.prover import FAILED, PROVED, prove
from rmqspec.properties.theorems import BY_NAME
from rmqspec.properties.z3_encode import (
    ENCODINGS,
    LOCK_TWINS,
    MESSAGE_TWINS,
    TRANSACTION_TWINS,
    Encoding,
    z_lock_expired,
)

# -- mutants (Python guard/effect + z3 twin, changed together) ---------------


def route_gt() -> Encoding:
    """route_send_back compares ``r > m`` instead of ``r >= m``."""

    def dlq(v, a):
        return v.r > v.m or a["level"] < 0

    def z_dlq(v, a):
        return z3.Or(v["r"] > v["m"], a["level"] < 0)

    table = attrs.evolve(
        lc.MESSAGE, guards={**lc.MESSAGE.guards, "dlq": dlq, "retry": lambda v, a: not dlq(v, a)}
    )
    twins = attrs.evolve(
        MESSAGE_TWINS,
        guards={**MESSAGE_TWINS.guards, "dlq": z_dlq, "retry": lambda v, a: z3.Not(z_dlq(v, a))},
    )
    return attrs.evolve(ENCODINGS["message"], lifecycle=table, twins=twins)


def fire_unguarded() -> Encoding:
    """The schedule service fires without checking ``is_due``."""
    rows = tuple(
        attrs.evolve(t, guard="") if t.action == "fire" else t for t in lc.MESSAGE.transitions
    )
    return attrs.evolve(ENCODINGS["message"], lifecycle=attrs.evolve(lc.MESSAGE, transitions=rows))


def retry_without_delay() -> Encoding:
    """The retry effect ignores the level's delay (deliver_ts = now)."""
    table = attrs.evolve(
        lc.MESSAGE,
        effects={
            **lc.MESSAGE.effects,
            "retry": lambda v, a: attrs.evolve(v, r=v.r + 1, deliver_ts=a["now"]),
        },
    )
    twins = attrs.evolve(
        MESSAGE_TWINS,
        effects={
            **MESSAGE_TWINS.effects,
            "retry": lambda v, a: {"r": v["r"] + 1, "deliver_ts": a["now"]},
        },
    )
    return attrs.evolve(ENCODINGS["message"], lifecycle=table, twins=twins)


def lock_expired_ge() -> Encoding:
    """lock_expired uses ``>=`` instead of ``>``."""

    def grant(v, a):
        return v.holder == a["client"] or a["now"] - v.last_update >= v.max_live

    def z_grant(v, a):
        return z3.Or(v["holder"] == a["client"], a["now"] - v["last_update"] >= v["max_live"])

    table = attrs.evolve(
        lc.LOCK, guards={**lc.LOCK.guards, "grant": grant, "deny": lambda v, a: not grant(v, a)}
    )
    twins = attrs.evolve(
        LOCK_TWINS,
        guards={**LOCK_TWINS.guards, "grant": z_grant, "deny": lambda v, a: z3.Not(z_grant(v, a))},
    )
    return attrs.evolve(ENCODINGS["lock"], lifecycle=table, twins=twins)


def unlock_by_anyone() -> Encoding:
    """unlock_batch frees the entry even when the caller is not the holder."""
    rows = tuple(
        attrs.evolve(t, target="FREE", effect="release") if t.guard == "not_holder" else t
        for t in lc.LOCK.transitions
    )
    return attrs.evolve(ENCODINGS["lock"], lifecycle=attrs.evolve(lc.LOCK, transitions=rows))


def lock_twin_lock_expired_ok() -> Encoding:
    """Control: the unmutated twin rebuilt through the same helpers still proves."""
    twins = attrs.evolve(
        LOCK_TWINS,
        guards={
            **LOCK_TWINS.guards,
            "grant": lambda v, a: z3.Or(
                v["holder"] == a["client"],
                z_lock_expired(v["last_update"], a["now"], v["max_live"]),
            ),
        },
    )
    return attrs.evolve(ENCODINGS["lock"], twins=twins)


def _txn(decide: Callable[..., str], z_decide: Callable[..., dict]) -> Encoding:
    def py(outcome):
        return lambda v, a: decide(v, a) == outcome

    def tw(outcome):
        return lambda v, a: z_decide(v, a)[outcome]

    table = attrs.evolve(
        lc.TRANSACTION,
        guards={"check": py(lc.CHECK), "young": py(lc.SKIP_YOUNG), "discard": py(lc.DISCARD)},
    )
    twins = attrs.evolve(
        TRANSACTION_TWINS,
        guards={"check": tw(lc.CHECK), "young": tw(lc.SKIP_YOUNG), "discard": tw(lc.DISCARD)},
    )
    return attrs.evolve(ENCODINGS["transaction"], lifecycle=table, twins=twins)


def young_from_one() -> Encoding:
    """A half of age 0 is not 'young' (``0 < age`` instead of ``0 <= age``): checked at once."""

    def decide(v, a):
        age = a["now"] - v.born
        if v.checks >= v.check_max or age > v.reserved:
            return lc.DISCARD
        return lc.SKIP_YOUNG if 0 < age < v.immunity else lc.CHECK

    def z_decide(v, a):
        age = a["now"] - v["born"]
        discard = z3.Or(v["checks"] >= v["check_max"], age > v["reserved"])
        young = z3.And(z3.Not(discard), age > 0, age < v["immunity"])
        return {
            lc.DISCARD: discard,
            lc.SKIP_YOUNG: young,
            lc.CHECK: z3.And(z3.Not(discard), z3.Not(young)),
        }

    return _txn(decide, z_decide)


def discard_after_max() -> Encoding:
    """needDiscard compares ``checks > check_max``: one check too many."""

    def decide(v, a):
        age = a["now"] - v.born
        if v.checks > v.check_max or age > v.reserved:
            return lc.DISCARD
        return lc.SKIP_YOUNG if 0 <= age < v.immunity else lc.CHECK

    def z_decide(v, a):
        age = a["now"] - v["born"]
        discard = z3.Or(v["checks"] > v["check_max"], age > v["reserved"])
        young = z3.And(z3.Not(discard), age >= 0, age < v["immunity"])
        return {
            lc.DISCARD: discard,
            lc.SKIP_YOUNG: young,
            lc.CHECK: z3.And(z3.Not(discard), z3.Not(young)),
        }

    return _txn(decide, z_decide)


def discard_one_early() -> Encoding:
    """needDiscard compares ``checks >= check_max - 1``: one check too few."""

    def decide(v, a):
        age = a["now"] - v.born
        if v.checks >= v.check_max - 1 or age > v.reserved:
            return lc.DISCARD
        return lc.SKIP_YOUNG if 0 <= age < v.immunity else lc.CHECK

    def z_decide(v, a):
        age = a["now"] - v["born"]
        discard = z3.Or(v["checks"] >= v["check_max"] - 1, age > v["reserved"])
        young = z3.And(z3.Not(discard), age >= 0, age < v["immunity"])
        return {
            lc.DISCARD: discard,
            lc.SKIP_YOUNG: young,
            lc.CHECK: z3.And(z3.Not(discard), z3.Not(young)),
        }

    return _txn(decide, z_decide)


def dlq_scheduled() -> Encoding:
    """A DLQ-routed send-back goes through the schedule topic (SCHEDULED, then a fire) instead of
    straight to DEAD."""
    rows = tuple(
        attrs.evolve(t, target="SCHEDULED", effect="retry") if t.guard == "dlq" else t
        for t in lc.MESSAGE.transitions
    )
    return attrs.evolve(ENCODINGS["message"], lifecycle=attrs.evolve(lc.MESSAGE, transitions=rows))


def _txn_row(row: lc.Transition) -> Encoding:
    table = attrs.evolve(lc.TRANSACTION, transitions=(*lc.TRANSACTION.transitions, row))
    return attrs.evolve(ENCODINGS["transaction"], lifecycle=table)


MUTANTS: list[tuple[str, Callable[[], Encoding], tuple[str, ...]]] = [
    (
        "route_send_back r > m",
        route_gt,
        ("DlqExactlyAtThresholdProperty", "NoRetryPastMaxProperty", "DeliveriesBoundedProperty"),
    ),
    (
        "fire without is_due",
        fire_unguarded,
        ("ScheduledNotFiredEarlyProperty", "RetryNotBeforeLevelDelayProperty"),
    ),
    ("retry ignores the delay", retry_without_delay, ("RetryNotBeforeLevelDelayProperty",)),
    ("lock_expired >=", lock_expired_ge, ("LockExclusiveProperty",)),
    ("unlock by a non-holder frees", unlock_by_anyone, ("LockExclusiveProperty",)),
    ("young only from age 1", young_from_one, ("TxnCheckNotBeforeTimeoutProperty",)),
    ("needDiscard checks > max", discard_after_max, ("TxnChecksBoundedProperty",)),
    (
        "rollback after commit",
        lambda: _txn_row(lc.Transition("COMMITTED", "rollback", "", "ROLLED_BACK", "")),
        ("TxnResolvedOnceProperty",),
    ),
    ("needDiscard checks >= max - 1", discard_one_early, ("TxnDiscardOnlyAfterCheckMaxProperty",)),
    ("DLQ copy scheduled", dlq_scheduled, ("DlqNeverScheduledProperty",)),
    (
        "check after commit",
        lambda: _txn_row(lc.Transition("COMMITTED", "check", "check", "COMMITTED", "checked")),
        ("TxnNoCheckAfterResolutionProperty",),
    ),
    (
        "commit after discard",
        lambda: _txn_row(lc.Transition("DISCARDED", "commit", "", "COMMITTED", "")),
        ("TxnResolvedOnceProperty",),
    ),
]


def replay(trace, table: lc.Lifecycle) -> None:
    enc = ENCODINGS[trace.lifecycle]
    state, vars_ = trace.steps[0].state, enc.vars_cls(**trace.steps[0].vars)
    for step in trace.steps[1:]:
        state, vars_ = table.step(state, vars_, step.action, dict(step.args))
        assert (state, attrs.asdict(vars_)) == (step.state, dict(step.vars))


@pytest.mark.parametrize(("label", "mutant", "theorems"), MUTANTS, ids=[m[0] for m in MUTANTS])
def test_mutant_is_caught_with_a_counterexample(label, mutant, theorems) -> None:
    enc = mutant()
    for name in theorems:
        result = prove(BY_NAME[name], {enc.name: enc})
        assert result.status == FAILED, (label, name, result.status, result.detail)
        trace = result.counterexample
        assert trace is not None and trace.kind == "run" and len(trace.steps) >= 2
        assert trace.broken == (name,)
        replay(trace, enc.lifecycle)  # the counterexample is a real run of the mutated table
        assert any(line.startswith("  ") for line in trace.render())


def test_route_mutant_violation_is_at_the_threshold() -> None:
    result = prove(BY_NAME["NoRetryPastMaxProperty"], {"message": route_gt()})
    last = result.counterexample.steps[-1]
    assert last.state == "SCHEDULED" and last.vars["r"] == last.vars["m"] + 1


def test_lock_mutant_takes_over_at_exactly_max_live() -> None:
    result = prove(BY_NAME["LockExclusiveProperty"], {"lock": lock_expired_ge()})
    steps = result.counterexample.steps
    grants = [s for s in steps[1:] if s.action == "lock"]
    first, second = grants[0], grants[-1]
    assert first.args["client"] != second.args["client"]
    assert second.args["now"] - first.args["now"] == steps[0].vars["max_live"]


def test_unmutated_control_still_proves() -> None:
    enc = lock_twin_lock_expired_ok()
    assert prove(BY_NAME["LockExclusiveProperty"], {"lock": enc}).status == PROVED


def test_every_always_theorem_has_a_mutant() -> None:
    covered = {name for _, _, names in MUTANTS for name in names}
    always = {t.name for t in BY_NAME.values() if t.kind == "always"}
    assert always <= covered, always - covered


def test_reachability_witness_disappears_under_the_route_mutant() -> None:
    # With DLQ only at r > m, m = 2 needs 4 deliveries: 3 are no longer enough.
    result = prove(BY_NAME["DeadAfterMaxPlusOneDeliveriesReachable"], {"message": route_gt()})
    assert result.status == FAILED and result.witness is None
    assert "unreachable within 8 steps" in result.detail
