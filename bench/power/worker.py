"""One mutant's run, in its own process: ``python -m bench.power.worker SPEC.json``.

Theory of operation
-------------------
The spec names the mutated file and its text (none: the pristine candidate), the modes to run and
where to append results (one JSON object per line, flushed as soon as known, so a parent that kills
this process at its timeout still reads every mode finished before). Steps:

1. build the private copy (``candidate.build``) and import it — an import error is a ``crash``;
2. prove the isolation (``candidate.isolation_problems``) — a problem is an ``isolation`` line and
   exit code 3: no result of a shared candidate may count;
3. build one broker on a fresh directory and close it — an exception is a ``crash``;
4. run ``conform`` per mode at the default budget: ``check_conformance`` with
   ``budget_settings(profile="ci", shrink=False)`` (the settings of ``rmqspec conform`` without
   ``--examples``/``--steps``; a killed mutant needs no shrunk program), lockstep or not, under each
   of the spec's ``profiles`` in turn (the version profiles whose pristine run executed the mutated
   statement: ``harness.run_mutants``); a mode killed under one profile is not run under the next.

The lockstep shortcut (``replay``): the conformance machine judges the invariants after every
step in both modes, and what it draws depends only on the candidate's answers (lockstep compares
them with the model's, it never replaces them), so a lockstep run draws the same programs as an
invariants-only run, judges them by the same invariants and more, and fails at the same program or
earlier. With both modes asked, lockstep runs first:

- it passes: no invariant failed on any program of the run, so the invariants-only run would pass
  too — the invariants' verdict is ``survived`` ``via: inferred`` without a second run (a survivor
  costs one run, not two);
- it fails on program P: P is replayed once without lockstep (``runner.replay_outcome``); a failure
  there is the invariants' kill (``via: replay``); only when the replay passes is the full
  invariants-only run made (the invariants may still fail on a later program).

Measured on the two full-set runs in ``bench/results/power-2026-11-27*.json`` (660 mutant verdicts):
no mutant survived lockstep and was killed by the invariants alone.

With ``reach`` the run records which lines of the copy executed (``coverage``), the harness's
pre-pass over the pristine candidate.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from bench.power import candidate
from rmqspec.properties.oracles import ORACLE_PREFIX

MODES = ("invariants", "lockstep")
DEFAULT_PROFILE = "rocketmq-4.9"
EXIT_ISOLATION = 3
START_MS = 1_700_000_000_000  # the machine's clock start (2023-11-14)


def kill_reason(message: str) -> str:
    """What kind of failure killed a mutant, from the machine's message."""
    if message.startswith("invariant "):
        return "invariant"
    if "lockstep mismatch" in message:
        return "lockstep"
    if message.startswith(ORACLE_PREFIX):
        return "oracle"
    if message.startswith(("candidate raised", "candidate failed")):
        return "raised"
    if "not well-formed" in message:
        return "model"
    return "other"


class _Out:
    def __init__(self, path: Path) -> None:
        self.fh = path.open("a", encoding="utf-8")

    def write(self, **row: Any) -> None:
        self.fh.write(json.dumps(row, sort_keys=True) + "\n")
        self.fh.flush()


def _run_mode(factory: Any, mode: str, shortcut: tuple[Any, ...] | None, out: _Out,
              profile: str = DEFAULT_PROFILE, examples: int | None = None) -> tuple[bool, tuple[Any, ...] | None]:
    """Run one mode; (passed, the failing program when a run failed)."""
    from rmqspec.properties.runner import budget_settings, check_conformance, replay_outcome

    started = time.monotonic()
    out.write(stage="start", mode=mode, profile=profile)
    if shortcut:
        replayed = replay_outcome(shortcut, factory, lockstep=mode == "lockstep", profile=profile)
        if replayed.signature is not None and replayed.genuine:
            out.write(stage="mode", mode=mode, profile=profile, passed=False, via="replay", examples=0,
                      seconds=round(time.monotonic() - started, 3), failure=replayed.message[:3000],
                      reason=kill_reason(replayed.message))
            return False, None
    result = check_conformance(factory, lockstep=mode == "lockstep", profile=profile,
                               settings=budget_settings(examples, profile="ci", shrink=False), shrink_budget=0)
    message = result.failure or ""
    out.write(stage="mode", mode=mode, profile=profile, passed=result.passed, via="run", examples=result.examples,
              seconds=round(time.monotonic() - started, 3), failure=message[:3000] or None,
              reason=None if result.passed else kill_reason(message))
    return result.passed, None if result.passed else result.program


def _run_modes(factory: Any, modes: list[str], replay: bool, out: _Out,
               profiles: list[str] | None = None, examples: int | None = None) -> None:
    """Every mode asked, under each profile in turn until it is killed (module docstring); with both
    modes and ``replay``, lockstep first under each. ``examples``: fewer than conform's default (the
    harness's own tests)."""
    alive = list(modes)
    for profile in profiles or [DEFAULT_PROFILE]:
        if not alive:
            return
        passed = _run_profile(factory, alive, replay, out, profile, examples)
        alive = [m for m in alive if passed.get(m, True)]


def _run_profile(factory: Any, modes: list[str], replay: bool, out: _Out, profile: str,
                 examples: int | None = None) -> dict[str, bool]:
    """The modes under one profile; each mode's verdict (True: it passed)."""
    if not (replay and set(modes) == set(MODES)):
        return {mode: _run_mode(factory, mode, None, out, profile, examples)[0] for mode in modes}
    passed, program = _run_mode(factory, "lockstep", None, out, profile, examples)
    if passed:
        out.write(stage="mode", mode="invariants", profile=profile, passed=True, via="inferred", examples=0,
                  seconds=0.0, failure=None, reason=None)
        return {"lockstep": True, "invariants": True}
    return {"lockstep": False, "invariants": _run_mode(factory, "invariants", program, out, profile, examples)[0]}


def run(spec: dict[str, Any]) -> int:
    out = _Out(Path(spec["out"]))
    work = Path(tempfile.mkdtemp(prefix="power-", dir=spec.get("workdir")))
    try:
        files = candidate.candidate_files()
        mutated = (spec["module"], spec["text"]) if spec.get("module") else None
        site = candidate.build(work, files, mutated)
        cov = None
        if spec.get("reach"):
            import coverage

            cov = coverage.Coverage(data_file=None, config_file=False, source=[str(site / candidate.PACKAGE)])
            cov.start()
        from rmqspec.properties import constant_pool

        constant_pool.pin()  # the pinned pool first (a mutant adds no literal), as check_conformance does
        try:
            factory = candidate.load(site)
        except Exception as exc:
            out.write(stage="crash", where="import", error=_short(exc))
            return 0
        problems = candidate.isolation_problems(site, files, mutated)
        out.write(stage="isolation", problems=problems)
        if problems:
            return EXIT_ISOLATION
        from rmqspec.model.clock import ManualClock
        from rmqspec.model.config import BrokerConfig

        try:
            smoke = work / "smoke"
            smoke.mkdir()
            factory(ManualClock(START_MS), BrokerConfig(), smoke).close()
        except Exception as exc:
            out.write(stage="crash", where="construct", error=_short(exc))
            return 0
        out.write(stage="ready")  # the parent's per-mode timeout starts now
        _run_modes(factory, list(spec["modes"]), spec.get("replay", True), out, spec.get("profiles"),
                   spec.get("examples"))
        if cov is not None:
            cov.stop()
            data = cov.get_data()
            root = site / candidate.PACKAGE
            lines = {}
            for name in data.measured_files():
                if not candidate._under(name, root):
                    continue
                rel = Path(name).resolve().relative_to(root.resolve()).as_posix()
                lines[rel] = sorted(data.lines(name) or ())
            out.write(stage="reach", lines=lines)
        out.write(stage="done")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _short(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
    return f"{type(exc).__name__}: {exc}"[:500] + where


def main(argv: list[str]) -> int:
    spec = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    return run(spec)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
