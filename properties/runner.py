"""Run the conformance machine programmatically with a budget and collect a result.

``check_conformance(factory, ...)`` runs ``conformance_machine(factory)`` under
``hypothesis.stateful.run_state_machine_as_test`` with explicit settings and
returns a ``ConformanceResult`` (data, not an exception): whether it passed,
the shrunk counterexample (the violated invariant or lockstep mismatch and the
replayable program), how many examples ran, the "sometimes" coverage counts
and the observations. ``ConformanceTestCase`` is a ``unittest.TestCase``
helper for a pytest suite. ``jsonl_recorder_factory(dir)`` writes each
example's SPEC §8 trace as ``example-NNNN.jsonl``.
"""

from __future__ import annotations

import json
import os
import time
import unittest
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import hypothesis
from hypothesis import HealthCheck, Phase
from hypothesis import settings as Settings
from hypothesis.stateful import run_state_machine_as_test

from rmqspec.model.config import BrokerConfig
from rmqspec.model.events import TraceEvent
from rmqspec.properties.conformance import conformance_machine
from rmqspec.properties.program import Op, render
from rmqspec.properties.wallclock import WALL_BUDGET, WallOptions

# Budgets per Hypothesis profile (tests/conftest.py): (max_examples, stateful_step_count)
BUDGETS = {"ci": (40, 30), "dev": (20, 30), "thorough": (400, 80)}


@attrs.frozen
class ConformanceResult:
    passed: bool
    examples: int
    seconds: float
    failure: str | None = None
    program: tuple[Op, ...] = ()
    coverage: dict[str, int] = attrs.field(factory=dict)
    observations: dict[str, int] = attrs.field(factory=dict)
    # wall-clock runs: the tolerance used and the worst lateness seen per kind
    wall: dict[str, Any] | None = None

    @property
    def program_text(self) -> str:
        return render(self.program)

    def render(self) -> str:
        head = "PASS" if self.passed else "FAIL"
        text = f"{head}: {self.examples} examples in {self.seconds:.1f} s"
        if self.observations:
            text += "; observations " + ", ".join(f"{k}={v}" for k, v in sorted(self.observations.items()))
        if self.wall is not None:
            worst = self.wall["worst_lateness_ms"]
            text += (f"\nwall clock: tolerance {self.wall['tolerance_ms']} ms; worst lateness "
                     + (", ".join(f"{k} {v} ms ({self.wall['judged'][k]} judged)" for k, v in worst.items())
                        or "none judged"))
        if not self.passed:
            text += f"\n{self.failure}\n\nreplayable program:\n{self.program_text}"
        return text


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
        # a wall-clock run does not replay the same way twice: no shrinking
        phases=tuple(Phase) if shrink and not wall else (Phase.explicit, Phase.reuse, Phase.generate),
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
) -> ConformanceResult:
    """Run the conformance machine against ``factory``; never raises on a finding.

    ``config``: the broker's configuration (the model follows it); ``wall``: wall-clock mode.
    """
    if trace_dir is not None and recorder_factory is None:
        recorder_factory = jsonl_recorder_factory(trace_dir)
    machine = conformance_machine(factory, lockstep=lockstep, profile=profile,
                                  recorder_factory=recorder_factory, config=config, wall=wall)
    settings = settings or budget_settings(seed=seed, wall=wall is not None)
    if seed is not None:
        settings = Settings(settings, derandomize=False)
    test = lambda: run_state_machine_as_test(machine, settings=settings)  # noqa: E731
    if seed is not None:
        test = hypothesis.seed(seed)(test)
    started = time.monotonic()
    failure: str | None = None
    try:
        test()
    except AssertionError as exc:
        # manual clock: Hypothesis replays the shrunk example last, so the last failure is the
        # minimal one; wall clock: no shrinking, and a replay need not fail again — the first counts
        recorded = machine.first_failure if wall is not None else machine.last_failure
        failure = recorded[0] if recorded else repr(exc)
    except Exception as exc:  # the candidate raised: that is the finding
        # (on the wall clock a failing run need not fail again when Hypothesis replays it:
        # the failure seen first is the finding, not Hypothesis's Flaky report)
        failure = machine.first_failure[0] if wall is not None and machine.first_failure else \
            f"candidate raised {type(exc).__name__}: {exc!r}"
    finally:
        for rec in getattr(recorder_factory, "opened", ()):
            rec.close()
    program = machine.failed_program if wall is not None and machine.failed_program else machine.last_program
    return ConformanceResult(
        passed=failure is None,
        examples=len(machine.examples),
        seconds=time.monotonic() - started,
        failure=failure,
        program=tuple(program) if failure else (),
        coverage=dict(machine.coverage),
        observations=dict(Counter(machine.observations)),
        wall=machine.lateness.as_dict() if machine.lateness is not None else None,
    )


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
