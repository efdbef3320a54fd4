"""Run the conformance machine programmatically with a budget and collect a result.

``check_conformance(factory, ...)`` runs ``conformance_machine(factory)`` under
``hypothesis.stateful.run_state_machine_as_test`` with explicit settings and
returns a ``ConformanceResult`` (data, not an exception): whether it passed,
every distinct failure found (each with its violated invariant or lockstep
mismatch and its own shrunk, replayable program), how many examples ran, the
"sometimes" coverage counts, the observations and the time spent generating
and shrinking. ``replay_program`` runs one program once the same way
(``rmqspec conform --replay``). ``ConformanceTestCase`` is a ``unittest.TestCase`` helper for a
pytest suite. ``jsonl_recorder_factory(dir)`` writes each example's SPEC §8
trace as ``example-NNNN.jsonl``.

Two phases, timed apart:

- **generation**: Hypothesis draws programs until the first one fails
  (Hypothesis's own shrinking is off: it stops at a wall-clock cap and, with
  several bugs, keeps generating for "10 seconds after the first" — both make a
  run depend on the machine's load). With ``--seed`` the draws are a function
  of the seed and of the constants Hypothesis mixes in from loaded modules;
  ``constant_pool.pin`` pins that pool to the ``rmqspec`` modules' literals
  (as tests/conftest.py does), so two processes draw the same programs.
- **shrinking** (``properties/shrink.py``): each failure is shrunk by replaying
  programs, within a budget counted in replays; a replay that fails *another*
  way is a further distinct failure, recorded and shrunk in turn.
"""

from __future__ import annotations

import json
import os
import time
import unittest
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
import hypothesis
from hypothesis import HealthCheck, Phase
from hypothesis import settings as Settings
from hypothesis.stateful import run_state_machine_as_test

from rmqspec.model.config import BrokerConfig
from rmqspec.model.events import TraceEvent
from rmqspec.model.selectors import Selector, by_hash
from rmqspec.properties import constant_pool
from rmqspec.properties.conform_orderly import CLIENT_4_9_8, OrderlyClient
from rmqspec.properties.conform_timeout import clean_timeout_ms
from rmqspec.properties.conformance import MachineFailure, conformance_machine
from rmqspec.properties.coverage import CoverageReport
from rmqspec.properties.program import Op, render
from rmqspec.properties.shrink import DEFAULT_BUDGET, Outcome, shrink, signature_of
from rmqspec.properties.wallclock import WALL_BUDGET, WallOptions

# Budgets per Hypothesis profile (tests/conftest.py): (max_examples, stateful_step_count)
BUDGETS = {"ci": (40, 30), "dev": (20, 30), "thorough": (400, 80)}
# examples a run on the manual clock may start, in max_examples (MachineCore.run_cap): Hypothesis's
# targeting pass is otherwise bounded by its 1000-call limit only
RUN_CAP_FACTOR = 3
# At most this many distinct failures are shrunk (the rest are reported as found).
MAX_SHRUNK_FAILURES = 4


@attrs.frozen
class FailureReport:
    """One distinct failure: what broke, and the (shrunk) program that shows it."""

    signature: str
    message: str
    program: tuple[Op, ...]
    replays: int = 0  # replays spent shrinking it
    seconds: float = 0.0
    shrunk: bool = False

    @property
    def program_text(self) -> str:
        return render(self.program)

    def as_dict(self) -> dict[str, Any]:
        return {"signature": self.signature, "message": self.message, "program": self.program_text,
                "ops": len(self.program), "shrink_replays": self.replays,
                "shrink_seconds": round(self.seconds, 3), "shrunk": self.shrunk}


@attrs.frozen
class ConformanceResult:
    passed: bool
    examples: int
    seconds: float
    failure: str | None = None  # the first failure's message
    program: tuple[Op, ...] = ()  # the first failure's (shrunk) program
    coverage: dict[str, int] = attrs.field(factory=dict)
    observations: dict[str, int] = attrs.field(factory=dict)
    # wall-clock runs: the tolerance used and the worst lateness seen per kind
    wall: dict[str, Any] | None = None
    failures: tuple[FailureReport, ...] = ()
    generate_seconds: float = 0.0
    shrink_seconds: float = 0.0
    seed: int | None = None
    coverage_report: CoverageReport | None = None

    @property
    def program_text(self) -> str:
        return render(self.program)

    def render(self) -> str:
        head = "PASS" if self.passed else "FAIL"
        text = f"{head}: {self.examples} examples in {self.seconds:.1f} s"
        if self.shrink_seconds or self.failures:
            text += f" (generation {self.generate_seconds:.1f} s, shrinking {self.shrink_seconds:.1f} s)"
        if self.seed is not None:
            text += f"; seed {self.seed}"
        if self.observations:
            text += "; observations " + ", ".join(f"{k}={v}" for k, v in sorted(self.observations.items()))
        if self.wall is not None:
            text += "\n" + wall_line(self.wall)
        if self.coverage_report is not None:
            text += "\n" + self.coverage_report.render()
        if not self.passed:
            reports = self.failures or (FailureReport(signature_of(self.failure or ""), self.failure or "",
                                                      self.program),)
            if len(reports) > 1:
                text += f"\n{len(reports)} distinct failures"
            for i, f in enumerate(reports, 1):
                title = f"\n\nfailure {i} of {len(reports)} ({f.signature})" if len(reports) > 1 else ""
                how = (f"shrunk to {len(f.program)} ops in {f.replays} replays, {f.seconds:.1f} s"
                       if f.shrunk else f"{len(f.program)} ops, not shrunk")
                text += f"{title}\n{f.message}\n\nreplayable program ({how}):\n{f.program_text}"
        return text


def wall_line(wall: dict[str, Any]) -> str:
    """The line a wall-clock run ends with: the tolerance and the worst lateness seen per kind."""
    worst = wall["worst_lateness_ms"]
    return (f"wall clock: tolerance {wall['tolerance_ms']} ms; worst lateness "
            + (", ".join(f"{k} {v} ms ({wall['judged'][k]} judged)" for k, v in worst.items()) or "none judged"))


def budget_settings(
    max_examples: int | None = None,
    steps: int | None = None,
    *,
    seed: int | None = None,
    profile: str | None = None,
    shrink: bool = True,
    wall: bool = False,
) -> Settings:
    """Explicit settings derived from the active Hypothesis profile's budget (``wall``: the
    wall-clock budget, every step of which may sleep)."""
    name = profile or os.environ.get("HYPOTHESIS_PROFILE", "ci")
    default_examples, default_steps = WALL_BUDGET if wall else BUDGETS.get(name, BUDGETS["ci"])
    return Settings(
        max_examples=max_examples or default_examples,
        stateful_step_count=steps or default_steps,
        deadline=None,
        derandomize=seed is None,
        database=None,
        print_blob=False,
        suppress_health_check=list(HealthCheck),
        # Phase.shrink marks "shrink the failures" (check_conformance does it, deterministically);
        # a wall-clock run does not replay the same way twice: no shrinking. Phase.target:
        # hypothesis.target pushes towards deep examples (properties/composite.depth_targets); not on
        # the wall clock, where its mutations re-ran one example (half a minute each) a dozen times
        phases=(Phase.explicit, Phase.reuse, Phase.generate) if wall
        else tuple(Phase) if shrink else (Phase.explicit, Phase.reuse, Phase.generate, Phase.target),
    )


class JsonlTraceRecorder:
    """A recorder that writes one JSON object per event to ``path``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._seq = 0
        self._fh = path.open("w", encoding="utf-8")

    def emit(self, event: str, ts: int, **fields: Any) -> TraceEvent:
        ev = TraceEvent(seq=self._seq, ts=ts, event=event, **fields)
        self._seq += 1
        row = ev.as_row()
        row["detail"] = dict(row["detail"]) if row["detail"] is not None else None
        self._fh.write(json.dumps(row, sort_keys=True) + "\n")
        if event == "drain":
            self._fh.flush()
        return ev

    def close(self) -> None:
        self._fh.close()


def jsonl_recorder_factory(directory: str | Path) -> Callable[[], JsonlTraceRecorder]:
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    counter = iter(range(1, 1 << 30))
    opened: list[JsonlTraceRecorder] = []

    def make() -> JsonlTraceRecorder:
        for rec in opened:
            rec.close()
        opened.clear()
        rec = JsonlTraceRecorder(out / f"example-{next(counter):04d}.jsonl")
        opened.append(rec)
        return rec

    make.opened = opened  # type: ignore[attr-defined]
    return make


def _message(exc: BaseException) -> str:
    text = str(exc)
    if isinstance(exc, MachineFailure):
        return text.split("\n\nreplayable program")[0]
    return f"candidate raised {type(exc).__name__}: {exc!r}"


def replay_outcome(program: Sequence[Op], factory: Callable[..., Any], **kwargs: Any) -> Outcome:
    """Run ``program`` like ``program.replay`` and say how it failed (signature None: it passed).
    A failure neither judged by the machine nor raised by a broker is the program's own
    (``Outcome.genuine`` False)."""
    return _outcome_on(conformance_machine(factory, **kwargs), program)


def _outcome_on(cls: type[Any], program: Sequence[Op]) -> Outcome:
    machine = cls()
    executed = 0
    failure: BaseException | None = None
    try:
        for op in program:
            getattr(machine, op.rule)(**op.kwargs())
            machine.check_always()
            executed += 1
    except Exception as exc:  # the failure being shrunk, or another one
        failure = exc
    try:
        machine.teardown()
    except Exception as exc:
        failure = failure or exc
    if failure is None:
        return Outcome(None)
    message = _message(failure)
    genuine = isinstance(failure, MachineFailure) or any(
        type(failure).__name__ in m for m, _ in cls.failures.values())
    return Outcome(signature_of(message), message, executed + 1 if executed < len(program) else None,
                   genuine)


@attrs.frozen
class ReplayResult:
    """One replay of a program (``rmqspec conform --replay``): how it ended and what the run saw."""

    outcome: Outcome
    program: tuple[Op, ...]
    seconds: float
    observations: dict[str, int] = attrs.field(factory=dict)
    wall: dict[str, Any] | None = None  # as ``ConformanceResult.wall``

    @property
    def passed(self) -> bool:
        return self.outcome.signature is None

    def render(self, lines: Sequence[int] = ()) -> str:
        """``PASS: replayed N ops in S s`` or ``FAIL: …`` with the failing op (and its line when
        ``lines`` gives each op's line in the program's file) and the failure's message."""
        n, out = len(self.program), self.outcome
        text = f"{'PASS' if self.passed else 'FAIL'}: replayed {n} ops in {self.seconds:.1f} s"
        if not self.passed:
            if out.failed_at is None:
                text += f"; the teardown's drain after the last op failed: {out.signature}"
            else:
                line = f", line {lines[out.failed_at - 1]}" if len(lines) >= out.failed_at else ""
                rule = self.program[out.failed_at - 1].rule
                text += f"; op {out.failed_at} ({rule}{line}) failed: {out.signature}"
        if self.observations:
            text += "; observations " + ", ".join(f"{k}={v}" for k, v in sorted(self.observations.items()))
        if not self.passed:
            text += f"\n{out.message}"
        if self.wall is not None:
            text += "\n" + wall_line(self.wall)
        return text


def replay_program(
    program: Sequence[Op],
    factory: Callable[..., Any],
    *,
    lockstep: bool = True,
    profile: str = "rocketmq-4.9",
    config: BrokerConfig | None = None,
    wall: WallOptions | None = None,
    trace_dir: str | Path | None = None,
) -> ReplayResult:
    """Run ``program`` once through a fresh machine for ``factory``, as a run of ``check_conformance``
    with the same arguments would run it (``replay_outcome``); never raises on a finding. On the wall
    clock the example's names are fresh (``WallOptions.run_tag``) and the broker's queues rebased
    (``properties/session.py``), so a long-running broker replays it as it ran the first time."""
    recorder_factory = jsonl_recorder_factory(trace_dir) if trace_dir is not None else None
    cls = conformance_machine(factory, lockstep=lockstep, profile=profile, config=config, wall=wall,
                              recorder_factory=recorder_factory)
    started = time.monotonic()
    try:
        outcome = _outcome_on(cls, program)
    finally:
        for rec in getattr(recorder_factory, "opened", ()):
            rec.close()
    return ReplayResult(outcome, tuple(program), time.monotonic() - started,
                        observations=dict(Counter(cls.observations)),
                        wall=cls.lateness.as_dict() if cls.lateness is not None else None)


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in _leaves(sub)]
    return [exc]


def check_conformance(
    factory: Callable[..., Any],
    *,
    lockstep: bool = True,
    profile: str = "rocketmq-4.9",
    settings: Settings | None = None,
    seed: int | None = None,
    trace_dir: str | Path | None = None,
    recorder_factory: Callable[[], Any] | None = None,
    config: BrokerConfig | None = None,
    wall: WallOptions | None = None,
    shrink_budget: int = DEFAULT_BUDGET,
    key_selector: Callable[[], Selector] = lambda: by_hash,
    orderly_client: OrderlyClient = CLIENT_4_9_8,
    clean_timeout: Callable[[int], int] = clean_timeout_ms,
) -> ConformanceResult:
    """Run the conformance machine against ``factory``; never raises on a finding.

    ``config``: the broker's configuration (the model follows it); ``wall``: wall-clock mode.
    ``shrink_budget``: replays per failure when ``settings`` has ``Phase.shrink``.
    ``key_selector``: the ordered sends' selector, made per example (``conformance_machine``).
    ``orderly_client``: the orderly consumer the machine plays (``conformance_machine``; 4.9.8's by default).
    ``clean_timeout``: the concurrent client's clean task's ms from consumeTimeout's minutes
    (``conformance_machine``; 4.9.8's by default).
    """
    if trace_dir is not None and recorder_factory is None:
        recorder_factory = jsonl_recorder_factory(trace_dir)
    constant_pool.pin()
    machine = conformance_machine(factory, lockstep=lockstep, profile=profile,
                                  recorder_factory=recorder_factory, config=config, wall=wall,
                                  key_selector=key_selector, orderly_client=orderly_client,
                                  clean_timeout=clean_timeout)
    settings = settings or budget_settings(seed=seed, wall=wall is not None)
    if seed is not None:
        settings = Settings(settings, derandomize=False)
    do_shrink = Phase.shrink in settings.phases and wall is None
    settings = Settings(settings, phases=tuple(p for p in settings.phases if p is not Phase.shrink),
                        report_multiple_bugs=False)
    machine.run_cap = (2 if wall is not None else RUN_CAP_FACTOR) * settings.max_examples
    if seed is not None:  # on the machine class: get_state_machine_test copies it from there
        hypothesis.seed(seed)(machine)
    test = lambda: run_state_machine_as_test(machine, settings=settings)  # noqa: E731
    started = time.monotonic()
    raised: list[BaseException] = []
    try:
        test()
    except Exception as exc:  # a finding (the machine's, or the candidate raised)
        raised = _leaves(exc)
    finally:
        for rec in getattr(recorder_factory, "opened", ()):
            rec.close()
    generated = time.monotonic() - started
    found: dict[str, tuple[str, list[Op]]] = dict(machine.failures)
    if wall is not None and machine.first_failure:
        # on the wall clock a failing run need not fail again when Hypothesis replays it:
        # the failure seen first is the finding, not Hypothesis's Flaky report
        first = machine.first_failure[0]
        found = {signature_of(first): (first, list(machine.failed_program)), **found}
    for exc in raised:
        message = _message(exc)
        if signature_of(message) not in found and not isinstance(exc, hypothesis.errors.Flaky):
            found[signature_of(message)] = (message, list(machine.last_program))
    if raised and not found:
        message = _message(raised[0])
        found[signature_of(message)] = (message, list(machine.last_program))
    reports = _shrink_all(found, factory, dict(lockstep=lockstep, profile=profile, config=config),
                          shrink_budget) if do_shrink else \
        [FailureReport(sig, msg, tuple(prog)) for sig, (msg, prog) in found.items()]
    shrink_seconds = sum(r.seconds for r in reports)
    first = reports[0] if reports else None
    return ConformanceResult(
        passed=not reports,
        examples=len(machine.examples),
        seconds=time.monotonic() - started,
        failure=first.message if first else None,
        program=first.program if first else (),
        coverage=dict(machine.coverage),
        observations=dict(Counter(machine.observations)),
        wall=machine.lateness.as_dict() if machine.lateness is not None else None,
        failures=tuple(reports),
        generate_seconds=generated,
        shrink_seconds=shrink_seconds,
        seed=seed,
        coverage_report=CoverageReport.of(machine.lifecycle, machine.coverage, machine.rules_run,
                                          timer=machine.profile_has_timer(), pop=machine.pop_applies[0]),
    )


def _shrink_all(found: dict[str, tuple[str, list[Op]]], factory: Callable[..., Any], kwargs: dict[str, Any],
                budget: int) -> list[FailureReport]:
    """Shrink each failure; replays that fail another way join the queue (at most
    ``MAX_SHRUNK_FAILURES`` are shrunk; later ones are reported as found)."""
    queue = dict(found)
    done: dict[str, FailureReport] = {}

    def run(program: Sequence[Op]) -> Outcome:
        out = replay_outcome(program, factory, **kwargs)
        if out.genuine and out.signature is not None and out.signature not in queue:
            queue[out.signature] = (out.message, list(program))
        return out

    while len(done) < len(queue):
        sig = next(s for s in queue if s not in done)
        message, program = queue[sig]
        if len(done) >= MAX_SHRUNK_FAILURES:
            done[sig] = FailureReport(sig, message, tuple(program))
            continue
        shrunk = shrink(program, run, sig, budget)
        replayed = bool(shrunk.message)
        done[sig] = FailureReport(sig, shrunk.message if replayed else message, shrunk.program,
                                  shrunk.replays, shrunk.seconds, replayed)
    return list(done.values())


class ConformanceTestCase(unittest.TestCase):
    """Subclass and set ``factory`` (and optionally ``lockstep``, ``profile``, budget)."""

    factory: Callable[..., Any] | None = None
    lockstep = True
    profile = "rocketmq-4.9"
    max_examples: int | None = None
    steps: int | None = None

    def test_conformance(self) -> None:
        if type(self).factory is None:
            return  # the abstract base itself has nothing to run
        result = check_conformance(
            type(self).factory, lockstep=self.lockstep, profile=self.profile,
            settings=budget_settings(self.max_examples, self.steps),
        )
        self.assertTrue(result.passed, result.render())
