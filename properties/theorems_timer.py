"""Theorems about 5.x timer messages (``model/timer.py``), proved with z3 for all parameters.

Theory of operation
-------------------
The timer's guarantees are arithmetic, not a lifecycle table: a requested deliver time ``T``
is rounded to a slot ``out`` (HookUtils.transformTimerMessage) and the slot is read once
the wheel's write time, the clock rounded down to the precision, has passed it
(TimerMessageStore.dequeue). So these theorems are of kind ``valid``: a formula over
unbounded integers (``now``, ``T``, the dequeue time ``d``, ``timerMaxDelaySec``) and the
four precisions RocketMQ accepts holds for every value — z3 finds the negation
unsatisfiable — or the prover shows the values that break it. ``Reachable`` theorems of the
same kind are satisfiable witnesses (the bound is tight, not vacuous).

``encode_out`` is the z3 twin of ``model.timer.out_ms`` and ``encode_floor`` of the write
time; ``tests/properties/test_theorems_timer.py`` evaluates both twins on the same values
so the proof is about the code that runs. The theorems apply to the profiles whose
``Version.timer_wheel`` is set (``applies``).
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
import z3

from rmqspec.model.timer import PRECISIONS_MS
from rmqspec.model.versions import Version

VALID = "valid"  # the formula holds for all values (negation unsatisfiable)
SATISFIABLE = "satisfiable"  # a witness exists


@attrs.frozen
class TimerVars:
    """The symbols every timer theorem ranges over."""

    now: z3.ArithRef  # the broker's clock when the put hook runs
    t: z3.ArithRef  # the requested deliver time
    p: z3.ArithRef  # timerPrecisionMs (normalized)
    d: z3.ArithRef  # a time at which the dequeue service runs
    max_sec: z3.ArithRef  # timerMaxDelaySec

    @staticmethod
    def fresh() -> TimerVars:
        return TimerVars(*z3.Ints("now T p d max_sec"))

    def domain(self) -> z3.BoolRef:
        """Times are non-negative milliseconds (a Java long from the epoch); p is one of
        MessageStoreConfig's candidates; timerMaxDelaySec is positive."""
        return z3.And(self.now >= 0, self.t >= 0, self.d >= 0, self.max_sec >= 1,
                      z3.Or(*(self.p == c for c in PRECISIONS_MS)))

    def names(self) -> dict[str, z3.ArithRef]:
        return {"now": self.now, "T": self.t, "p": self.p, "d": self.d, "max_sec": self.max_sec}


def encode_out(t: z3.ArithRef, p: z3.ArithRef) -> z3.ArithRef:
    """``out_ms``: T − p when T is a multiple of p, else T rounded down to a multiple of p."""
    return z3.If(t % p == 0, t - p, (t / p) * p)


def encode_floor(x: z3.ArithRef, p: z3.ArithRef) -> z3.ArithRef:
    """The wheel's write time at clock ``x`` (formatTimeMs: rounded down to the precision)."""
    return (x / p) * p


def _accepted(v: TimerVars) -> z3.BoolRef:
    """The put hook stores the message in the wheel: later than now, within the max delay."""
    return z3.And(v.t > v.now, v.t - v.now <= v.max_sec * 1000)


def _read(v: TimerVars) -> z3.BoolRef:
    """The dequeue service running at ``d`` has read the copy's slot: write time past ``out``."""
    return encode_floor(v.d, v.p) > encode_out(v.t, v.p)


@attrs.frozen
class TimerTheorem:
    name: str
    code: str | None
    kind: str
    statement: str
    source: str
    formula: Callable[[TimerVars], z3.BoolRef]
    lifecycle: str = "timer"

    @staticmethod
    def applies(version: Version) -> bool:
        return version.timer_wheel


TIMER_THEOREMS: tuple[TimerTheorem, ...] = (
    TimerTheorem(
        name="TimerNeverEarlyProperty",
        code="TIMER_EARLY",
        kind=VALID,
        statement="A timer message's slot is read only at or after the deliver time it asked for.",
        source="B/util/HookUtils.transformTimerMessage; S/timer/TimerMessageStore.dequeue (currReadTimeMs "
        "< currWriteTimeMs)",
        formula=lambda v: z3.Implies(z3.And(_accepted(v), _read(v)), v.d >= v.t),
    ),
    TimerTheorem(
        name="TimerDueWithinPrecisionProperty",
        code="TIMER_UNFIRED",
        kind=VALID,
        statement="The slot of an accepted timer message is read by the time its deliver time plus one "
        "precision has come: the rounding delays it by less than timerPrecisionMs.",
        source="B/util/HookUtils.transformTimerMessage; S/timer/TimerMessageStore.dequeue",
        formula=lambda v: z3.Implies(z3.And(_accepted(v), v.d >= v.t + v.p - 1), _read(v)),
    ),
    TimerTheorem(
        name="TimerMaxDelayBoundProperty",
        code="TIMER_UNFIRED",
        kind=VALID,
        statement="An accepted timer message is due after its store time and within timerMaxDelaySec "
        "plus one precision of it.",
        source="B/util/HookUtils.transformTimerMessage (timerMaxDelaySec, timerPrecisionMs)",
        formula=lambda v: z3.Implies(
            _accepted(v),
            z3.And(encode_out(v.t, v.p) + v.p > v.now,
                   encode_out(v.t, v.p) + v.p < v.now + v.max_sec * 1000 + v.p),
        ),
    ),
    TimerTheorem(
        name="TimerLatenessTightReachable",
        code=None,
        kind=SATISFIABLE,
        statement="The bound is tight: with 1 s precision a message asking for 1 ms past a second is "
        "first readable 999 ms late.",
        source="B/util/HookUtils.transformTimerMessage",
        formula=lambda v: z3.And(_accepted(v), v.p == 1000, v.t % 1000 == 1,
                                 encode_out(v.t, v.p) + v.p - v.t == 999),
    ),
)


def check(theorem: TimerTheorem, timeout_ms: int) -> tuple[str, dict[str, int] | None]:
    """(``holds`` / ``fails`` / ``unknown``, the values of a counterexample or witness)."""
    v = TimerVars.fresh()
    solver = z3.Solver()
    solver.set("timeout", timeout_ms)
    solver.add(v.domain())
    formula = theorem.formula(v)
    solver.add(z3.Not(formula) if theorem.kind == VALID else formula)
    answer = solver.check()
    if answer == z3.unknown:
        return "unknown", None
    model = solver.model() if answer == z3.sat else None
    values = None if model is None else {
        k: model.eval(x, model_completion=True).as_long() for k, x in v.names().items()}
    holds = (answer == z3.unsat) if theorem.kind == VALID else (answer == z3.sat)
    return ("holds" if holds else "fails"), values
