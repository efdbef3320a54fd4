"""Run the theorems of ``theorems`` with z3; results are data (``ProofResult``).

- ``always``: initiation (``init ∧ ¬Inv``) and consecution
  (``Inv ∧ Step ∧ ¬Inv′``) must both be unsatisfiable → PROVED. If
  consecution fails, bounded model checking from ``init`` (``BMC_DEPTH``
  steps) looks for a real run that breaks ``prop``: found → FAILED with that
  trace; not found → UNKNOWN with the counterexample to induction (the
  invariant is not inductive, but no violation exists within the bound).
- ``sometimes``: unrolling from ``init`` up to the theorem's depth finds a
  witness → PROVED (the witness is kept); none → FAILED.
- ``wellformed``: for each pair of rows with the same source and action,
  ``guard₁ ∧ guard₂`` is unsatisfiable → PROVED, else FAILED with the state.
- ``valid`` / ``satisfiable`` (``theorems_timer``: the 5.x timer's arithmetic, no lifecycle):
  the negation unsatisfiable / the formula satisfiable → PROVED, with the values of the
  counterexample or witness in ``data``.
- A solver answer ``unknown`` (timeout) → UNKNOWN.

Results render to text in ``rmqspec.cli.cmd_prove``; ``to_dict`` gives JSON.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs
import z3

from rmqspec.model.versions import Version
from rmqspec.properties.theorems import ALWAYS, SOMETIMES, THEOREMS, WELLFORMED, Theorem
from rmqspec.properties.theorems_pop import POP_THEOREMS
from rmqspec.properties.theorems_pop import applies as pop_applies
from rmqspec.properties.theorems_timer import TIMER_THEOREMS, VALID, TimerTheorem, check
from rmqspec.properties.z3_encode import ENCODINGS, Act, Encoding, Sym

PROVED = "PROVED"
FAILED = "FAILED"
UNKNOWN = "UNKNOWN"
WARNING = "WARNING"  # configuration checks only
INFO = "INFO"  # configuration checks only

BMC_DEPTH = 8  # steps searched for a real violation when induction fails
SOLVER_TIMEOUT_MS = 20_000  # per solver call


@attrs.frozen
class TraceStep:
    """One state of a trace; ``action``/``args`` led into it (``None`` for the initial state)."""

    state: str
    vars: Mapping[str, int]
    ghosts: Mapping[str, Any]
    action: str | None = None
    args: Mapping[str, int] = attrs.field(factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "args": dict(self.args),
            "state": self.state,
            "vars": dict(self.vars),
            "ghosts": dict(self.ghosts),
        }


@attrs.frozen
class Trace:
    """A counterexample or witness over one lifecycle.

    ``kind``: ``run`` (from the initial state), ``cti`` (a counterexample to
    induction: a pre-state satisfying the invariant and a step breaking it),
    ``state`` (well-formedness: one state and action with two enabled rows).
    ``broken`` names the conjuncts that fail in the last state."""

    kind: str
    lifecycle: str
    steps: tuple[TraceStep, ...]
    broken: tuple[str, ...] = ()
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "lifecycle": self.lifecycle,
            "steps": [s.to_dict() for s in self.steps],
            "broken": list(self.broken),
            "note": self.note,
        }

    def render(self) -> list[str]:
        lines = [f"{self.kind} over {self.lifecycle}" + (f": {self.note}" if self.note else "")]
        prev: TraceStep | None = None
        for i, st in enumerate(self.steps):
            if st.action is None:
                head = "init" if self.kind == "run" else "state"
            else:
                args = ", ".join(f"{k}={v}" for k, v in st.args.items())
                head = f"{st.action}({args})"
            vars_ = " ".join(f"{k}={v}" for k, v in st.vars.items())
            ghosts = {k: v for k, v in st.ghosts.items() if prev is None or prev.ghosts.get(k) != v}
            gtext = " ".join(f"{k}={v}" for k, v in ghosts.items())
            lines.append(
                f"  {i:>2}. {head:<40} → {st.state:<11} {vars_}" + (f" | {gtext}" if gtext else "")
            )
            prev = st
        if self.broken:
            lines.append(f"  broken: {', '.join(self.broken)}")
        return lines


@attrs.frozen
class ProofResult:
    """The outcome of one theorem or configuration check."""

    name: str
    code: str | None
    status: str
    seconds: float
    counterexample: Any = None  # Trace, or configcheck.Timeline
    kind: str = ""
    statement: str = ""
    detail: str = ""
    witness: Trace | None = None
    data: Mapping[str, Any] = attrs.field(factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "code": self.code,
            "status": self.status,
            "seconds": round(self.seconds, 4),
            "kind": self.kind,
            "statement": self.statement,
            "detail": self.detail,
            "counterexample": None
            if self.counterexample is None
            else self.counterexample.to_dict(),
            "witness": None if self.witness is None else self.witness.to_dict(),
            **({"data": dict(self.data)} if self.data else {}),
        }


# ---------------------------------------------------------------------------


def _value(model: z3.ModelRef, expr: z3.ExprRef) -> Any:
    val = model.eval(expr, model_completion=True)
    if z3.is_bool(val):
        return z3.is_true(val)
    return val.as_long()


def _state(enc: Encoding, model: z3.ModelRef, s: Sym, act: Act | None = None) -> TraceStep:
    action = None
    args: dict[str, int] = {}
    if act is not None:
        action = enc.actions[_value(model, act.act)]
        args = {x: _value(model, act.a[x]) for x in enc.args_of(action)}
    return TraceStep(
        state=enc.lifecycle.states[_value(model, s.pc)],
        vars={x: _value(model, s.v[x]) for x in enc.var_names},
        ghosts={g: _value(model, s.g[g]) for g in enc.ghost_sorts},
        action=action,
        args=args,
    )


def _solver() -> z3.Solver:
    solver = z3.Solver()
    solver.set("timeout", SOLVER_TIMEOUT_MS)
    return solver


def _conjuncts(th: Theorem, enc: Encoding) -> list[tuple[str, Callable[[Sym], z3.BoolRef]]]:
    assert th.prop is not None
    return [("domain", enc.well_sorted), (th.name, th.prop)] + [(c.name, c.formula) for c in th.aux]


def _inv(th: Theorem, enc: Encoding, s: Sym) -> z3.BoolRef:
    return z3.And([f(s) for _, f in _conjuncts(th, enc)])


def _broken(th: Theorem, enc: Encoding, model: z3.ModelRef, s: Sym) -> tuple[str, ...]:
    return tuple(
        n for n, f in _conjuncts(th, enc) if not z3.is_true(model.eval(f(s), model_completion=True))
    )


def _unroll(
    enc: Encoding,
    depth: int,
    goal: Callable[[Sym], z3.BoolRef],
    assume: Callable[[Sym], z3.BoolRef] | None,
) -> tuple[str, Trace | None]:
    """Search runs of 0..depth steps from init whose last state satisfies ``goal``."""
    solver = _solver()
    states = [enc.sym("0")]
    acts: list[Act] = []
    solver.add(enc.init(states[0]))
    if assume is not None:
        solver.add(assume(states[0]))
    saw_unknown = False
    for k in range(depth + 1):
        if k > 0:
            acts.append(enc.act(str(k)))
            states.append(enc.sym(str(k)))
            solver.add(enc.step(states[k - 1], acts[k - 1], states[k]))
        solver.push()
        solver.add(goal(states[k]))
        answer = solver.check()
        if answer == z3.sat:
            # Readability only: prefer a run whose clock starts at 0 when one exists.
            if solver.check(states[0].g["t"] == 0) != z3.sat:
                solver.check()
            model = solver.model()
            steps = [_state(enc, model, states[0])] + [
                _state(enc, model, states[i + 1], acts[i]) for i in range(k)
            ]
            return "sat", Trace("run", enc.name, tuple(steps))
        saw_unknown = saw_unknown or answer == z3.unknown
        solver.pop()
    return ("unknown" if saw_unknown else "unsat"), None


def _prove_always(th: Theorem, enc: Encoding) -> tuple[str, Trace | None, str]:
    assert th.prop is not None
    s0 = enc.sym("i")
    solver = _solver()
    solver.add(enc.init(s0), z3.Not(_inv(th, enc, s0)))
    answer = solver.check()
    if answer == z3.sat:
        model = solver.model()
        broken = _broken(th, enc, model, s0)
        trace = Trace(
            "run", enc.name, (_state(enc, model, s0),), broken, "initial state breaks the invariant"
        )
        return (FAILED if th.name in broken else UNKNOWN), trace, "initiation fails"
    if answer == z3.unknown:
        return UNKNOWN, None, f"initiation: solver unknown ({solver.reason_unknown()})"

    pre, act, post = enc.sym("p"), enc.act("a"), enc.sym("q")
    solver = _solver()
    solver.add(_inv(th, enc, pre), enc.step(pre, act, post), z3.Not(_inv(th, enc, post)))
    answer = solver.check()
    if answer == z3.unsat:
        aux = ", ".join(c.name for c in th.aux)
        return PROVED, None, "inductive" + (f" with {aux}" if aux else "")
    cti: Trace | None = None
    if answer == z3.sat:
        model = solver.model()
        cti = Trace(
            "cti",
            enc.name,
            (_state(enc, model, pre), _state(enc, model, post, act)),
            _broken(th, enc, model, post),
            "a state satisfying the invariant and a step that breaks it",
        )
    bmc, run = _unroll(enc, BMC_DEPTH, lambda s: z3.Not(th.prop(s)), None)
    if run is not None:
        run = attrs.evolve(
            run, broken=(th.name,), note=f"violates {th.name} after {len(run.steps) - 1} steps"
        )
        return FAILED, run, "a run from the initial state violates the property"
    why = "solver unknown" if answer == z3.unknown or bmc == "unknown" else "not inductive"
    return UNKNOWN, cti, f"{why}; no violation within {BMC_DEPTH} steps"


def _prove_sometimes(th: Theorem, enc: Encoding) -> tuple[str, Trace | None, str]:
    assert th.goal is not None
    answer, run = _unroll(enc, th.depth, th.goal, th.assume)
    if run is not None:
        return PROVED, run, f"witness of {len(run.steps) - 1} steps"
    if answer == "unknown":
        return UNKNOWN, None, "solver unknown"
    return FAILED, None, f"unreachable within {th.depth} steps"


def _prove_wellformed(enc: Encoding) -> tuple[str, Trace | None, str]:
    rows = enc.lifecycle.transitions
    pre, act = enc.sym("w"), enc.act("w")
    post1, post2 = enc.sym("w1"), enc.sym("w2")
    pairs = 0
    for i in range(len(rows)):
        for j in range(i + 1, len(rows)):
            if (rows[i].source, rows[i].action) != (rows[j].source, rows[j].action):
                continue
            pairs += 1
            solver = _solver()
            solver.add(
                enc.well_sorted(pre), enc.row(i, pre, act, post1), enc.row(j, pre, act, post2)
            )
            answer = solver.check()
            if answer == z3.sat:
                model = solver.model()
                st = _state(enc, model, pre)
                step = attrs.evolve(
                    _state(enc, model, post1, act), state=f"{rows[i].target}|{rows[j].target}"
                )
                note = f"rows {i} and {j} ({rows[i].source} --{rows[i].action}-->) both enabled"
                return FAILED, Trace("state", enc.name, (st, step), (), note), note
            if answer == z3.unknown:
                return UNKNOWN, None, "solver unknown"
    return PROVED, None, f"{pairs} row pairs exclusive"


def _prove_timer(theorem: TimerTheorem) -> ProofResult:
    start = time.perf_counter()
    verdict, values = check(theorem, SOLVER_TIMEOUT_MS)
    status = {"holds": PROVED, "fails": FAILED}.get(verdict, UNKNOWN)
    shown = "" if values is None else ", ".join(f"{k}={v}" for k, v in values.items())
    if status == UNKNOWN:
        detail = "solver unknown"
    elif theorem.kind == VALID:
        detail = "for every now, T, d ≥ 0, max_sec ≥ 1, p ∈ {100, 200, 500, 1000}" if status == PROVED \
            else f"counterexample: {shown}"
    else:
        detail = f"witness: {shown}" if status == PROVED else "no witness exists"
    return ProofResult(
        name=theorem.name,
        code=None if theorem.code is None else str(theorem.code),
        status=status,
        seconds=time.perf_counter() - start,
        kind=theorem.kind,
        statement=theorem.statement,
        detail=detail,
        data={} if values is None else {"values": values},
    )


def prove(theorem: Theorem | TimerTheorem, encodings: Mapping[str, Encoding] | None = None) -> ProofResult:
    """Prove one theorem; ``encodings`` overrides the lifecycle encodings (mutation tests)."""
    if isinstance(theorem, TimerTheorem):
        return _prove_timer(theorem)
    enc = (encodings or {}).get(theorem.lifecycle) or ENCODINGS[theorem.lifecycle]
    start = time.perf_counter()
    witness = None
    if theorem.kind == ALWAYS:
        status, cex, detail = _prove_always(theorem, enc)
    elif theorem.kind == SOMETIMES:
        status, witness, detail = _prove_sometimes(theorem, enc)
        cex = None
    elif theorem.kind == WELLFORMED:
        status, cex, detail = _prove_wellformed(enc)
    else:  # pragma: no cover - theorems are data written in this package
        raise ValueError(f"unknown theorem kind {theorem.kind!r}")
    return ProofResult(
        name=theorem.name,
        code=None if theorem.code is None else str(theorem.code),
        status=status,
        seconds=time.perf_counter() - start,
        counterexample=cex,
        kind=theorem.kind,
        statement=theorem.statement,
        detail=detail,
        witness=witness,
    )


def theorems_for(version: Version) -> tuple[Theorem | TimerTheorem, ...]:
    """A profile's theorems: the lifecycle tables', and the timer's where the profile has timer messages."""
    pop = POP_THEOREMS if pop_applies(version) else ()
    return THEOREMS + pop + tuple(t for t in TIMER_THEOREMS if t.applies(version))


def prove_all(
    theorems: Iterable[Theorem | TimerTheorem] = THEOREMS,
    *,
    encodings: Mapping[str, Encoding] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> list[ProofResult]:
    todo = list(theorems)
    results = []
    for i, th in enumerate(todo):
        results.append(prove(th, encodings))
        if on_progress is not None:
            on_progress(i + 1, len(todo))
    return results
