"""Every theorem proves, the witnesses replay through the Python tables, and
the encoding refuses tables whose guards or effects have no z3 twin."""

from __future__ import annotations

import attrs
import pytest

from rmqspec.model import lifecycle as lc
from rmqspec.properties.codes import VIOLATION_CODES
from rmqspec.properties.prover import FAILED, PROVED, ProofResult, Trace, prove, prove_all
from rmqspec.properties.theorems import ALWAYS, SOMETIMES, THEOREMS, Theorem
from rmqspec.properties.theorems_pop import POP_THEOREMS
from rmqspec.properties.z3_encode import ENCODINGS, MESSAGE_ENC, MESSAGE_TWINS, MissingTwin


def replay(trace: Trace, lifecycle: lc.Lifecycle) -> None:
    """Run a z3 trace through the Python table; each step must land where z3 said."""
    enc = ENCODINGS[trace.lifecycle]
    first = trace.steps[0]
    state, vars_ = first.state, enc.vars_cls(**first.vars)
    for step in trace.steps[1:]:
        state, vars_ = lifecycle.step(state, vars_, step.action, dict(step.args))
        assert (state, attrs.asdict(vars_)) == (step.state, dict(step.vars)), step


@pytest.fixture(scope="module")
def results() -> dict[str, ProofResult]:
    return {r.name: r for r in prove_all()}


def test_every_theorem_is_proved(results: dict[str, ProofResult]) -> None:
    failed = {n: (r.status, r.detail) for n, r in results.items() if r.status != PROVED}
    assert failed == {}
    assert set(results) == {t.name for t in THEOREMS}
    assert all(r.seconds >= 0 and r.counterexample is None for r in results.values())


def test_theorem_list_covers_the_required_codes() -> None:
    codes = {t.code for t in THEOREMS if t.kind == ALWAYS}
    assert codes >= {
        "DLQ_EARLY",
        "DLQ_MISSED",
        "RETRY_EARLY",
        "DELAY_EARLY",
        "LOCK_OVERLAP",
        "TXN_CHECK_EARLY",
        "TXN_CHECK_EXCEEDED",
        "TXN_DOUBLE_RESOLVED",
    }
    assert all(t.code is None or t.code in VIOLATION_CODES for t in THEOREMS)
    every = THEOREMS + POP_THEOREMS  # the pop table's theorems are the 5.x profiles' (prover.theorems_for)
    for lifecycle in ENCODINGS:
        assert any(t.kind == SOMETIMES and t.lifecycle == lifecycle for t in every), lifecycle
    for t in THEOREMS:
        assert t.statement.endswith(".") and t.source, t.name
        suffix = {"always": "Property", "sometimes": "Reachable", "wellformed": "Deterministic"}
        assert t.name.endswith(suffix[t.kind]), t.name


def test_witnesses_replay_through_the_python_tables(results: dict[str, ProofResult]) -> None:
    witnessed = [r for r in results.values() if r.kind == SOMETIMES]
    assert witnessed
    for r in witnessed:
        assert r.witness is not None and r.witness.kind == "run"
        replay(r.witness, ENCODINGS[r.witness.lifecycle].lifecycle)


def test_dead_witness_has_max_plus_one_deliveries(results: dict[str, ProofResult]) -> None:
    witness = results["DeadAfterMaxPlusOneDeliveriesReachable"].witness
    assert witness is not None
    actions = [s.action for s in witness.steps[1:]]
    assert actions.count("deliver") == 3 and actions.count("send_back") == 3
    assert witness.steps[-1].state == "DEAD" and witness.steps[-1].vars["r"] == 3


def test_results_serialise(results: dict[str, ProofResult]) -> None:
    d = results["LockTakeoverAfterExpiryReachable"].to_dict()
    assert d["status"] == PROVED and d["code"] == "LOCK_OVERLAP"
    assert d["witness"]["steps"][-1]["state"] == "HELD"


def test_missing_twin_is_an_error() -> None:
    twins = attrs.evolve(
        MESSAGE_TWINS, guards={k: v for k, v in MESSAGE_TWINS.guards.items() if k != "due"}
    )
    with pytest.raises(MissingTwin, match="guard 'due'"):
        attrs.evolve(MESSAGE_ENC, twins=twins)


def test_new_row_without_twin_is_an_error() -> None:
    row = lc.Transition("DEAD", "redrive", "from_dlq", "STORED", "")
    table = attrs.evolve(
        lc.MESSAGE,
        transitions=(*lc.MESSAGE.transitions, row),
        guards={**lc.MESSAGE.guards, "from_dlq": lambda v, a: True},
    )
    with pytest.raises(MissingTwin, match="from_dlq"):
        attrs.evolve(MESSAGE_ENC, lifecycle=table)


def test_ambiguous_table_fails_determinism() -> None:
    # A second send_back row with no guard overlaps both retry and dlq.
    row = lc.Transition("DELIVERED", "send_back", "", "CONSUMED", "")
    table = attrs.evolve(lc.MESSAGE, transitions=(*lc.MESSAGE.transitions, row))
    det = next(t for t in THEOREMS if t.name == "MessageTableDeterministic")
    result = prove(det, {"message": attrs.evolve(MESSAGE_ENC, lifecycle=table)})
    assert result.status == FAILED
    assert result.counterexample is not None and "both enabled" in result.counterexample.note


def test_weak_auxiliary_invariant_is_unknown_not_proved() -> None:
    theorem: Theorem = next(t for t in THEOREMS if t.name == "LockExclusiveProperty")
    weakened = attrs.evolve(theorem, aux=())
    result = prove(weakened)
    assert result.status == "UNKNOWN"
    assert result.counterexample is not None and result.counterexample.kind == "cti"
    assert result.counterexample.broken  # the conjuncts the step breaks are named
    assert "not inductive" in result.detail
