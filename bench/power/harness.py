"""Run the selected mutants: a baseline, the reach pre-pass, one worker process per mutant in parallel.

Theory of operation
-------------------
1. **Baseline** (``baseline``): the pristine candidate, built through the same copy, runs each mode
   under each version profile in its own worker with ``reach`` on (in parallel). It must pass them
   all — a candidate that fails ``conform`` on its own has no mutation score — and gives the
   per-mode time the default timeout is scaled from, and the lines of the copy the runs executed.
2. **Reach**: ``conform`` is deterministic (derandomized, ``PYTHONHASHSEED=0``, the copy not mined
   for constants), and a mutant's run is the pristine run until the mutated code first executes. A
   mutant whose statement no baseline run executed therefore behaves as the pristine candidate and
   survives: it is reported ``not_reached`` (a survivor, listed) without a run, as PIT reports "no
   coverage". The lockstep and the invariants-only runs reach the same lines (both modes draw the
   same programs: ``worker``), which the baseline checks. Reach is per version profile: a mutant
   runs under the profiles whose pristine run executed its statement (4.9.8 first, then 5.x: code
   only 5.x runs, such as op batches and timer messages, is measured under 5.x), in turn, and a
   mode killed under one is not run under the next; none reaching it, it is ``not_reached``.
3. **Mutants**: at most ``jobs`` workers at a time (``python -m bench.power.worker``, its own
   process group). A worker that writes nothing new for ``timeout`` seconds, or holds more than
   ``MAX_RSS_BYTES``, is killed: the mode it was in (its last ``start`` row) is ``timeout`` (killed),
   and so are the modes it had not run (the same programs lead to the same hang). A worker killed by a
   signal while running a mode crashed in it (``crash``, e.g. SIGBUS from a truncated mapping).

Statuses per mode: ``killed`` (reason ``invariant`` / ``lockstep`` / ``raised`` / ``model`` /
``other``), ``timeout``, ``crash`` (``import`` / ``construct`` / ``signal N`` / ``exit N``),
``survived``, ``not_reached``, ``equivalent``. The first three are kills.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

from bench.power.candidate import PROJECT
from bench.power.mutants import Mutant
from bench.power.worker import DEFAULT_PROFILE, EXIT_ISOLATION, MODES
from rmqspec.impl.scratch import scratch_base

KILLS = ("killed", "timeout", "crash")
MAX_RSS_BYTES = 3 << 30
STARTUP_S = 30.0  # building the copy and importing rmqspec, before the first mode's timeout starts
POLL_S = 0.2
FAILURE_CHARS = 400  # of a failure message kept in the JSON


class HarnessError(RuntimeError):
    """The measurement cannot be made (the pristine candidate fails, or isolation broke)."""


@attrs.frozen
class ModeResult:
    status: str
    reason: str | None = None
    via: str | None = None  # run | replay | inferred
    seconds: float = 0.0
    failure: str | None = None
    profile: str | None = None  # the version profile of the run that decided it

    @property
    def killed(self) -> bool:
        return self.status in KILLS

    def as_dict(self) -> dict[str, Any]:
        row = attrs.asdict(self)
        if self.failure is not None and len(self.failure) > FAILURE_CHARS:
            row["failure"] = self.failure[:FAILURE_CHARS] + "…"
        return row


@attrs.frozen
class MutantResult:
    mutant: Mutant
    modes: dict[str, ModeResult]
    reached: bool | None = None  # None: no reach pre-pass
    equivalent: str | None = None  # the reason, when listed in equivalent.toml
    seconds: float = 0.0
    stderr: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {**self.mutant.as_dict(), "reached": self.reached, "equivalent": self.equivalent,
                "seconds": round(self.seconds, 3), "modes": {k: v.as_dict() for k, v in self.modes.items()}}


@attrs.frozen
class Baseline:
    seconds: dict[str, float]  # per mode, the slowest profile's
    reach: dict[str, dict[str, frozenset[int]]] | None  # per profile: executed lines per module of the copy


def scratch_root() -> Path:
    """Where workers keep the copy and the brokers' stores: ``impl/scratch.py``'s choice (``$TMPDIR``,
    else memory when there is some), so a run's time is the checker's and the broker's, not the disk's."""
    return scratch_base()


def _env(scratch: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONHASHSEED"] = "0"
    env["TMPDIR"] = str(scratch)  # the conformance machine's per-example store directories
    env["PYTHONPATH"] = os.pathsep.join([str(PROJECT), *filter(None, [env.get("PYTHONPATH")])])
    env.pop("COVERAGE_PROCESS_START", None)
    return env


@attrs.define
class _Job:
    key: int
    spec: dict[str, Any]
    out: Path
    proc: subprocess.Popen[bytes]
    stderr: Any
    started: float
    last_change: float
    lines_seen: int = 0
    killed_for: str | None = None

    def rows(self) -> list[dict[str, Any]]:
        if not self.out.exists():
            return []
        rows = []
        for line in self.out.read_text(encoding="utf-8").splitlines():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:  # a line cut by the kill
                break
        return rows


def _rss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


def _kill(job: _Job) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(job.proc.pid, signal.SIGKILL)  # the worker's own group (start_new_session)
    job.proc.wait()


def run_specs(specs: Sequence[dict[str, Any]], *, jobs: int, timeout: float, workdir: Path,
              on_done: Callable[[int, list[dict[str, Any]], int, str | None, str], None]) -> None:
    """Run each spec in a worker; ``on_done(index, rows, returncode, killed_for, stderr)``."""
    pending = list(enumerate(specs))
    running: list[_Job] = []
    try:
        while pending or running:
            while pending and len(running) < jobs:
                key, spec = pending.pop(0)
                out = workdir / f"result-{key:04d}.jsonl"
                out.unlink(missing_ok=True)
                spec = {**spec, "out": str(out), "workdir": str(workdir)}
                spec_path = workdir / f"spec-{key:04d}.json"
                spec_path.write_text(json.dumps(spec), encoding="utf-8")
                err = (workdir / f"stderr-{key:04d}.txt").open("w+b")
                proc = subprocess.Popen([sys.executable, "-m", "bench.power.worker", str(spec_path)],
                                        cwd=PROJECT, env=_env(workdir), stdout=subprocess.DEVNULL, stderr=err,
                                        start_new_session=True)
                now = time.monotonic()
                running.append(_Job(key, spec, out, proc, err, now, now + STARTUP_S))
            time.sleep(POLL_S)
            for job in list(running):
                now = time.monotonic()
                seen = len(job.rows())
                if seen != job.lines_seen:
                    job.lines_seen, job.last_change = seen, now
                if job.proc.poll() is None:
                    if now - job.last_change > timeout:
                        job.killed_for = "timeout"
                    elif _rss(job.proc.pid) > MAX_RSS_BYTES:
                        job.killed_for = "memory"
                    if job.killed_for is None:
                        continue
                    _kill(job)
                running.remove(job)
                job.stderr.seek(0)
                tail = job.stderr.read().decode(errors="replace")[-2000:]
                job.stderr.close()
                on_done(job.key, job.rows(), job.proc.returncode, job.killed_for, tail)
    finally:
        for job in running:
            _kill(job)
            job.stderr.close()


def interpret(rows: list[dict[str, Any]], modes: Sequence[str], returncode: int, killed_for: str | None,
              stderr: str) -> dict[str, ModeResult]:
    """One worker's rows as a result per mode."""
    if returncode == EXIT_ISOLATION or any(r.get("stage") == "isolation" and r["problems"] for r in rows):
        problems = next((r["problems"] for r in rows if r.get("stage") == "isolation"), [stderr])
        raise HarnessError("the candidate is not isolated from the reference: " + "; ".join(problems))
    crash = next((r for r in rows if r.get("stage") == "crash"), None)
    if crash is not None:
        return {m: ModeResult("crash", crash["where"], "run", 0.0, crash["error"]) for m in modes}
    out: dict[str, ModeResult] = {}
    ended: set[tuple[str, str | None]] = set()
    for r in rows:
        if r.get("stage") == "mode":
            ended.add((r["mode"], r.get("profile")))
            if r["mode"] in out and out[r["mode"]].killed:
                continue  # killed under an earlier profile: that verdict stands
            status = "survived" if r["passed"] else "killed"
            out[r["mode"]] = ModeResult(status, r["reason"], r["via"], r["seconds"], r["failure"],
                                        r.get("profile"))
    # the worker died in the mode it started and did not end (under the profile it was in); the modes
    # still alive that it had not run under that profile are inferred from it (the same programs)
    died = next(((r["mode"], r.get("profile")) for r in rows
                 if r.get("stage") == "start" and (r["mode"], r.get("profile")) not in ended), None)
    started = [died[0]] if died is not None else []
    missing = started + [m for m in modes if m not in started and not (m in out and out[m].killed)
                         and (m not in out or (died is not None and (m, died[1]) not in ended))]
    if missing:
        if killed_for is not None:
            first = ModeResult("timeout", killed_for, "run", 0.0, None)
            later = ModeResult("timeout", killed_for, "inferred", 0.0, None)
        elif returncode < 0:
            first = ModeResult("crash", f"signal {-returncode}", "run", 0.0, stderr[-500:] or None)
            later = attrs.evolve(first, via="inferred")
        else:
            first = ModeResult("crash", f"exit {returncode}", "run", 0.0, stderr[-500:] or None)
            later = attrs.evolve(first, via="inferred")
        where = died[1] if died is not None else None
        for i, m in enumerate(missing):
            out[m] = attrs.evolve(first if i == 0 else later, profile=where)
    return {m: out[m] for m in modes}


def baseline(*, modes: Sequence[str] = MODES, jobs: int, reach: bool, timeout: float = 600.0,
             workdir: Path | None = None, profiles: Sequence[str] = (DEFAULT_PROFILE,),
             examples: int | None = None) -> Baseline:
    """The pristine candidate through the copy, each mode under each profile in its own worker; it
    must pass them all. ``examples``: fewer than conform's default budget (the harness's own tests:
    its times are then no timeout's base)."""
    results: dict[int, tuple[list[dict[str, Any]], int, str | None, str]] = {}
    runs = [(profile, mode) for profile in profiles for mode in modes]
    specs = [{"module": None, "text": None, "modes": [mode], "reach": reach, "profiles": [profile],
              **({"examples": examples} if examples else {})} for profile, mode in runs]
    with tempfile.TemporaryDirectory(prefix="power-", dir=workdir or scratch_root()) as tmp:
        run_specs(specs, jobs=jobs, timeout=timeout, workdir=Path(tmp),
                  on_done=lambda k, rows, rc, why, err: results.__setitem__(k, (rows, rc, why, err)))
    seconds: dict[str, float] = {}
    reached: dict[str, list[dict[str, frozenset[int]]]] = {}
    for i, (profile, mode) in enumerate(runs):
        rows, rc, why, err = results[i]
        result = interpret(rows, [mode], rc, why, err)[mode]
        if result.status != "survived":
            raise HarnessError(f"the pristine candidate does not pass conform ({mode}, {profile}): {result.status} "
                               f"{result.reason or ''} {result.failure or err[-1000:]}")
        seconds[mode] = max(seconds.get(mode, 0.0), result.seconds)
        for r in rows:
            if r.get("stage") == "reach":
                reached.setdefault(profile, []).append({k: frozenset(v) for k, v in r["lines"].items()})
    for profile, lines in reached.items():
        if len(lines) > 1 and any(r != lines[0] for r in lines):
            raise HarnessError(f"the lockstep and the invariants-only runs of the pristine candidate ({profile}) "
                               "reached different lines: the reach pre-pass cannot stand for both modes "
                               "(use --no-reach)")
    return Baseline(seconds, {p: lines[0] for p, lines in reached.items()} if reach else None)


def is_reached(mutant: Mutant, lines: dict[str, frozenset[int]] | None) -> bool | None:
    if lines is None:
        return None
    executed = lines.get(mutant.module, frozenset())
    first, last = mutant.stmt_lines
    return any(first <= n <= last for n in executed)


def reaching_profiles(mutant: Mutant, reach: dict[str, dict[str, frozenset[int]]] | None,
                      profiles: Sequence[str]) -> list[str]:
    """The profiles (in the order given) whose pristine run executed the mutant's statement; every
    profile without a reach pre-pass."""
    if reach is None:
        return list(profiles)
    return [p for p in profiles if is_reached(mutant, reach.get(p)) is True]


def run_mutants(mutants: Sequence[Mutant], texts: dict[str, str], *, modes: Sequence[str], jobs: int,
                timeout: float, replay: bool, reach: dict[str, dict[str, frozenset[int]]] | None,
                equivalents: dict[str, str], run_unreached: bool = False,
                progress: Callable[[MutantResult], None] | None = None,
                workdir: Path | None = None, profiles: Sequence[str] = (DEFAULT_PROFILE,)) -> list[MutantResult]:
    """Every mutant's result, in the order given. A mutant runs under the profiles that reach it
    (``reaching_profiles``), in the order given, until each mode is killed."""
    results: dict[int, MutantResult] = {}
    specs: list[dict[str, Any]] = []
    keys: list[int] = []
    reached_by: dict[int, bool | None] = {}
    for i, m in enumerate(mutants):
        runs = reaching_profiles(m, reach, profiles)
        reached_by[i] = None if reach is None else bool(runs)
        if m.id in equivalents:
            results[i] = MutantResult(m, {mode: ModeResult("equivalent") for mode in modes}, reached_by[i],
                                      equivalents[m.id])
        elif reached_by[i] is False and not run_unreached:
            results[i] = MutantResult(m, {mode: ModeResult("not_reached") for mode in modes}, False)
        else:
            specs.append({"module": m.module, "text": m.apply(texts[m.module]), "modes": list(modes),
                          "replay": replay, "profiles": runs or list(profiles)})
            keys.append(i)
        if i in results and progress is not None:
            progress(results[i])

    def done(k: int, rows: list[dict[str, Any]], rc: int, why: str | None, err: str) -> None:
        i = keys[k]
        per_mode = interpret(rows, modes, rc, why, err)
        seconds = sum(r.get("seconds", 0.0) for r in rows if r.get("stage") == "mode")
        results[i] = MutantResult(mutants[i], per_mode, reached_by[i], None, seconds,
                                  err[-1000:] if rc else "")
        if progress is not None:
            progress(results[i])

    with tempfile.TemporaryDirectory(prefix="power-", dir=workdir or scratch_root()) as tmp:
        run_specs(specs, jobs=jobs, timeout=timeout, workdir=Path(tmp), on_done=done)
    return [results[i] for i in range(len(mutants))]
