"""The timer theorems (properties/theorems_timer.py): proved, about the code that runs, and able to fail."""

from __future__ import annotations

import json

import attrs
import z3
from hypothesis import given
from hypothesis import strategies as st

from rmqspec.cli.main import main
from rmqspec.model.timer import PRECISIONS_MS, due_ms, out_ms
from rmqspec.properties.prover import FAILED, PROVED, prove
from rmqspec.properties.theorems_timer import (
    TIMER_THEOREMS,
    TimerVars,
    encode_floor,
    encode_out,
)


def test_every_timer_theorem_is_proved() -> None:
    results = {t.name: prove(t) for t in TIMER_THEOREMS}
    assert {n: r.status for n, r in results.items()} == {n: PROVED for n in results}
    witness = results["TimerLatenessTightReachable"].data["values"]
    assert witness["p"] == 1000 and witness["T"] % 1000 == 1


@given(t=st.integers(0, 10**15), p=st.sampled_from(PRECISIONS_MS), d=st.integers(0, 10**15))
def test_the_z3_twins_compute_what_model_timer_computes(t: int, p: int, d: int) -> None:
    v = TimerVars.fresh()
    subst = [(v.t, z3.IntVal(t)), (v.p, z3.IntVal(p)), (v.d, z3.IntVal(d))]
    out = z3.simplify(z3.substitute(encode_out(v.t, v.p), *subst)).as_long()
    floor = z3.simplify(z3.substitute(encode_floor(v.d, v.p), *subst)).as_long()
    assert out == out_ms(t, p)
    assert floor == d // p * p
    # the model's due time is the first clock value at which the slot is read
    assert (floor > out) == (d >= due_ms(out_ms(t, p), p))


def test_a_wrong_rounding_is_refuted_with_a_counterexample() -> None:
    """Rounding one precision further down (a broker that fires early) breaks TimerNeverEarly."""
    never_early = next(t for t in TIMER_THEOREMS if t.name == "TimerNeverEarlyProperty")

    def early(v: TimerVars) -> z3.BoolRef:
        read = encode_floor(v.d, v.p) > encode_out(v.t, v.p) - v.p
        return z3.Implies(z3.And(v.t > v.now, v.t - v.now <= v.max_sec * 1000, read), v.d >= v.t)

    result = prove(attrs.evolve(never_early, formula=early))
    assert result.status == FAILED
    values = result.data["values"]
    assert values["d"] < values["T"]  # a real early read: the counterexample is concrete


def test_prove_lists_the_timer_theorems_only_for_profiles_with_timers(capsys) -> None:
    assert main(["prove", "--json", "--profile", "rocketmq-5.2", "--theorem", "TimerNeverEarlyProperty"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert (row["name"], row["status"], row["profile"]) == ("TimerNeverEarlyProperty", PROVED, "rocketmq-5.2")
    assert main(["prove", "--profile", "rocketmq-4.9", "--theorem", "TimerNeverEarlyProperty"]) == 2
    assert "has no timer messages" in capsys.readouterr().err
