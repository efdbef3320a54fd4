"""The pop theorems (properties/theorems_pop.py): proved, with witnesses that replay through the
Python table, for the 5.x profiles only, and each able to fail — a mutant of the table (Python row
and z3 twin changed together) is FAILED with a counterexample run of the mutated table."""

from __future__ import annotations

from collections.abc import Callable

import attrs
import pytest
import z3

from rmqspec.model import lifecycle as lc
from rmqspec.model.versions import version_named
from rmqspec.properties.prover import FAILED, PROVED, prove, theorems_for
from rmqspec.properties.theorems import SOMETIMES
from rmqspec.properties.theorems_pop import POP_THEOREMS
from rmqspec.properties.z3_encode import (
    ENCODINGS,
    POP_ENC,
    POP_ORDER_ENC,
    POP_ORDER_TWINS,
    POP_TWINS,
    Encoding,
    MissingTwin,
)

BY_NAME = {t.name: t for t in POP_THEOREMS}


def replay(trace, table: lc.Lifecycle) -> None:
    state, vars_ = trace.steps[0].state, ENCODINGS[trace.lifecycle].vars_cls(**trace.steps[0].vars)
    for step in trace.steps[1:]:
        state, vars_ = table.step(state, vars_, step.action, dict(step.args))
        assert (state, attrs.asdict(vars_)) == (step.state, dict(step.vars)), step


def test_every_pop_theorem_is_proved_and_every_witness_replays() -> None:
    results = {t.name: prove(t) for t in POP_THEOREMS}
    assert {n: r.status for n, r in results.items()} == dict.fromkeys(results, PROVED)
    witnessed = [r for r in results.values() if r.kind == SOMETIMES]
    assert len(witnessed) == 4
    for r in witnessed:
        assert r.witness is not None
        replay(r.witness, ENCODINGS[r.witness.lifecycle].lifecycle)
    again = results["PopRevivedAndPoppedAgainReachable"].witness
    assert [s.action for s in again.steps[1:]] == ["pop", "revive", "pop"]
    revive = again.steps[2]
    popped = again.steps[1]
    assert revive.args["now"] >= popped.vars["pop_ts"] + popped.vars["inv"]  # not before the invisible time


def test_pop_theorems_are_the_5x_profiles_only() -> None:
    assert not set(POP_THEOREMS) & set(theorems_for(version_named("rocketmq-4.9")))
    assert set(POP_THEOREMS) <= set(theorems_for(version_named("rocketmq-5.2")))
    assert ENCODINGS["pop"] is POP_ENC and ENCODINGS["pop_order"] is POP_ORDER_ENC


def test_an_orderly_queue_is_handed_again_only_to_the_same_attempt_or_after_expiry() -> None:
    busy = lc.PopOrderVars(off=4, n=2, pop_ts=100, inv=30, att=1)
    with pytest.raises(lc.Refused):  # another attempt, before the invisible time ends: blocked
        lc.POP_ORDER.step("INFLIGHT", busy, "pop", {"attempt": 2, "batch": 1, "invisible": 30, "now": 129})
    same = lc.POP_ORDER.step("INFLIGHT", busy, "pop", {"attempt": 1, "batch": 2, "invisible": 30, "now": 110})
    later = lc.POP_ORDER.step("INFLIGHT", busy, "pop", {"attempt": 2, "batch": 2, "invisible": 30, "now": 130})
    assert same[1].off == later[1].off == 4  # from the consume offset: nothing skipped
    part = lc.POP_ORDER.step("INFLIGHT", busy, "commit", {"now": 120, "count": 1})
    assert part == ("INFLIGHT", lc.PopOrderVars(off=5, n=1, pop_ts=100, inv=30, att=1))  # the rest still blocks
    with pytest.raises(lc.Refused):
        lc.POP_ORDER.step(*part, "pop", {"attempt": 2, "batch": 1, "invisible": 30, "now": 129})
    assert lc.POP_ORDER.step(*part, "commit", {"now": 121, "count": 1}) == (
        "IDLE", lc.PopOrderVars(off=6, pop_ts=100, inv=30, att=1))
    with pytest.raises(lc.Refused):  # more than the batch holds
        lc.POP_ORDER.step("INFLIGHT", busy, "commit", {"now": 120, "count": 3})


def test_an_arg_named_like_a_var_is_refused() -> None:
    """z3 names an action's args and a state's vars alike (``pop.h@1``): one name for both would make
    every proof about a different system; the encoding refuses it."""
    with pytest.raises(MissingTwin, match=r"args \['h'\] share a name"):
        attrs.evolve(POP_ENC, args=("h", "invisible", "now", "handle"))


# -- mutants -------------------------------------------------------------------------------------


def revive_unguarded() -> Encoding:
    """The revive service revives a checkpoint without waiting for its revive time."""
    rows = tuple(attrs.evolve(t, guard="") if t.action == "revive" else t for t in lc.POP.transitions)
    return attrs.evolve(POP_ENC, lifecycle=attrs.evolve(lc.POP, transitions=rows))


def revive_one_early() -> Encoding:
    """``now + 1 >= pop_ts + inv``: revived a millisecond before the invisible time ends."""
    table = attrs.evolve(lc.POP, guards={**lc.POP.guards,
                                         "expired": lambda v, a: a["now"] + 1 >= v.pop_ts + v.inv})
    twins = attrs.evolve(POP_TWINS, guards={**POP_TWINS.guards,
                                            "expired": lambda v, a: a["now"] + 1 >= v["pop_ts"] + v["inv"]})
    return attrs.evolve(POP_ENC, lifecycle=table, twins=twins)


def acked_revived() -> Encoding:
    """An acked message is revived all the same (the ack lost on its way to the checkpoint)."""
    row = lc.Transition("ACKED", "revive", "", "READY", "revived")
    return attrs.evolve(POP_ENC, lifecycle=attrs.evolve(lc.POP, transitions=(*lc.POP.transitions, row)))


def reconsume_kept() -> Encoding:
    """The revived copy keeps the reconsume times of the one popped."""
    table = attrs.evolve(lc.POP, effects={**lc.POP.effects, "revived": lambda v, a: v})
    twins = attrs.evolve(POP_TWINS, effects={**POP_TWINS.effects, "revived": lambda v, a: {}})
    return attrs.evolve(POP_ENC, lifecycle=table, twins=twins)


def popped_again_while_invisible() -> Encoding:
    """The broker hands a popped message out again (a second checkpoint) while it is invisible."""
    row = lc.Transition("POPPED", "pop", "", "POPPED", "handle")
    return attrs.evolve(POP_ENC, lifecycle=attrs.evolve(lc.POP, transitions=(*lc.POP.transitions, row)))


def orderly_never_blocks() -> Encoding:
    """needBlock always false: a second attempt takes a queue whose batch is in flight."""
    rows = tuple(attrs.evolve(t, guard="") if t.guard == "free" else t for t in lc.POP_ORDER.transitions)
    return attrs.evolve(POP_ORDER_ENC, lifecycle=attrs.evolve(lc.POP_ORDER, transitions=rows))


def orderly_skips_expired() -> Encoding:
    """An expired batch is given up: the next pop starts after it (the offset moves without acks)."""
    def skip(v, a):
        return attrs.evolve(v, off=v.off + v.n, n=a["batch"], pop_ts=a["now"], inv=a["invisible"], att=a["attempt"])

    def z_skip(v, a):
        return {"off": v["off"] + v["n"], "n": a["batch"], "pop_ts": a["now"], "inv": a["invisible"],
                "att": a["attempt"]}

    rows = tuple(attrs.evolve(t, effect="skip") if t.guard == "free" else t for t in lc.POP_ORDER.transitions)
    table = attrs.evolve(lc.POP_ORDER, transitions=rows, effects={**lc.POP_ORDER.effects, "skip": skip})
    twins = attrs.evolve(POP_ORDER_TWINS, effects={**POP_ORDER_TWINS.effects, "skip": z_skip})
    return attrs.evolve(POP_ORDER_ENC, lifecycle=table, twins=twins)


MUTANTS: list[tuple[str, Callable[[], Encoding], str]] = [
    ("orderly queue not blocked", orderly_never_blocks, "PopOrderlyOneBatchInFlightProperty"),
    ("orderly expired batch skipped", orderly_skips_expired, "PopOrderlyNoSkipProperty"),
    ("revive without its revive time", revive_unguarded, "PopInvisibleUntilDeadlineProperty"),
    ("revive 1 ms early", revive_one_early, "PopInvisibleUntilDeadlineProperty"),
    ("popped again while invisible", popped_again_while_invisible, "PopInvisibleUntilDeadlineProperty"),
    ("acked message revived", acked_revived, "PopAckedNeverRevivedProperty"),
    ("reconsume times not incremented", reconsume_kept, "PopReconsumeTimesCountRevivesProperty"),
]


@pytest.mark.parametrize(("label", "mutant", "theorem"), MUTANTS, ids=[m[0] for m in MUTANTS])
def test_mutant_is_caught_with_a_counterexample_run(label: str, mutant: Callable[[], Encoding],
                                                     theorem: str) -> None:
    enc = mutant()
    result = prove(BY_NAME[theorem], {enc.name: enc})
    assert result.status == FAILED, (label, result.status, result.detail)
    trace = result.counterexample
    assert trace is not None and trace.kind == "run" and trace.broken == (theorem,)
    replay(trace, enc.lifecycle)  # a real run of the mutated table


def test_a_second_row_for_one_action_fails_determinism() -> None:
    row = lc.Transition("POPPED", "ack", "", "ACKED", "")
    table = attrs.evolve(lc.POP, transitions=(*lc.POP.transitions, row))
    result = prove(BY_NAME["PopTableDeterministic"], {"pop": attrs.evolve(POP_ENC, lifecycle=table)})
    assert result.status == FAILED and result.counterexample is not None


def test_the_z3_twin_of_the_revive_guard_is_the_python_one_at_the_boundary() -> None:
    v = lc.PopVars(pop_ts=100, inv=30, h=1)
    assert lc.POP.step("POPPED", v, "revive", {"now": 130})[0] == "READY"
    assert POP_ENC.successor("POPPED", v, "revive", {"now": 129, "handle": 0, "invisible": 1}) == []
    with pytest.raises(lc.Refused):
        lc.POP.step("POPPED", v, "revive", {"now": 129})
    assert z3.is_true(z3.simplify(POP_TWINS.guards["expired"](
        {"pop_ts": z3.IntVal(100), "inv": z3.IntVal(30)}, {"now": z3.IntVal(130)})))
