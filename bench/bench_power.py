"""The mutation score of ``rmqspec conform``: how many broken brokers it catches, and which it misses.

``python -m bench power -- [--sample N] [--kinds K,..] [--modules M,..] [--jobs J] [--seed S]
[--timeout S] [--profiles P,..] [--no-lockstep-only] [--list] [--out FILE]``

Mutants of the candidate broker (``rmqspec.impl:factory`` and the model rule modules it imports)
are built one file at a time in a private copy of its source (``bench/power/candidate.py``), and
``conform`` runs each at its default budget in lockstep and by the invariants alone, in its own
process, ``--jobs`` at a time, under each version profile (``--profiles``) whose pristine run
executes the mutated statement, in turn, until it is killed. The reference model in lockstep is
the pristine ``rmqspec`` package; the run proves it (``candidate.isolation_problems``) before a
result counts. The report gives the kill rate per module and per kind in both modes and lists
every survivor with its diff; equivalent mutants (``bench/power/equivalent.toml``) are excluded
with their reason. Theory of operation:
``bench/power/*.py`` and bench/README.md.

Why no mutation library: mutmut 3 copies the source tree under the *same* package name and
replaces every function with a trampoline that dispatches on an environment variable, and drives
pytest — the reference model would import the trampolined (mutated) ``model/lifecycle.py`` too;
cosmic-ray 8 writes each mutation into the source file in place and runs a test command, so the
reference would read the mutated file as well, and neither knows our kinds (a time read off by 1 ms
or in the wrong unit, a skipped state write). A small ``ast`` mutator (``bench/power/mutants.py``)
splices one node's text, proves the splice by re-parsing, and keeps the copy-based isolation.

Exit codes: 0 measured (and above ``--min-*``), 1 a score below ``--min-lockstep`` /
``--min-invariants``, 2 usage error or the measurement cannot be made (the pristine candidate
fails ``conform``, or the isolation proof failed).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from bench.power import selection
from bench.power.candidate import PROJECT, SHARED
from bench.power.harness import Baseline, HarnessError, ModeResult, MutantResult, baseline, run_mutants
from bench.power.mutants import KINDS
from bench.power.report import LABEL, Report
from bench.power.worker import MODES
from rmqspec.cli.progress import Progress
from rmqspec.model.versions import VERSIONS
from rmqspec.properties.runner import BUDGETS

MIN_TIMEOUT_S = 45.0
# 4.9.8 first (what most mutants are reached by), then the newest 5.x: the code only 5.x runs (op
# batches, timer messages, 5.x routing) is measured too
DEFAULT_PROFILES = ("rocketmq-4.9", "rocketmq-5.5")
TIMEOUT_FACTOR = 2.5


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\n")


def _csv(text: str) -> list[str]:
    return [p.strip() for p in text.split(",") if p.strip()]


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m bench power --", description=__doc__.split("\n\n")[0])
    p.add_argument("--sample", type=int, default=selection.DEFAULT_SIZE, metavar="N",
                   help=f"mutants to draw (default {selection.DEFAULT_SIZE}: the full set)")
    p.add_argument("--kinds", type=_csv, default=list(KINDS), metavar="K,..",
                   help=f"mutation kinds (default all: {','.join(KINDS)})")
    p.add_argument("--modules", type=_csv, default=list(selection.DEFAULT_MODULES), metavar="M,..",
                   help="modules to mutate (impl/broker.py, or impl/broker, or broker); default the broker's "
                        "request path, store and recovery, and the model rule modules it imports")
    p.add_argument("--ids", type=_csv, default=None, metavar="ID,..", help="exactly these mutants (from --list)")
    p.add_argument("--seed", type=int, default=selection.DEFAULT_SEED, help="selection seed (default 0)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="parallel workers (default: cores)")
    p.add_argument("--timeout", type=float, default=None, metavar="S",
                   help=f"seconds a mode may run without finishing (default {TIMEOUT_FACTOR:g}× the pristine "
                        f"run's, at least {MIN_TIMEOUT_S:g})")
    p.add_argument("--profiles", type=_csv, default=list(DEFAULT_PROFILES), metavar="P,..",
                   help="version profiles of conform, in order (default " + ",".join(DEFAULT_PROFILES) + "): a "
                        "mutant runs under each whose pristine run reached it, until killed")
    p.add_argument("--no-lockstep-only", action="store_true", help="run the invariants-only mode only")
    p.add_argument("--no-replay", action="store_true",
                   help="run both modes in full (default: lockstep first; its pass stands for the invariants' "
                        "run, its counterexample is replayed without the model)")
    p.add_argument("--no-reach", action="store_true",
                   help="run every mutant (default: a mutant no pristine run reaches is reported not reached)")
    p.add_argument("--list", action="store_true", help="list the selected mutants and exit")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--out", type=Path, default=None, metavar="FILE",
                   help="also write the text report to FILE and the JSON beside it (FILE with .json)")
    p.add_argument("--equivalent", type=Path, default=selection.EQUIVALENT_FILE, metavar="TOML",
                   help="equivalent mutants (default bench/power/equivalent.toml)")
    p.add_argument("--source", default=None, metavar="TEXT",
                   help="what was measured, for the report (default: the project's git revision)")
    p.add_argument("--rescore", type=Path, default=None, metavar="JSON",
                   help="no runs: the report of an earlier run's JSON (--out), with today's equivalent mutants")
    p.add_argument("--min-lockstep", type=float, default=None, metavar="PCT", help="exit 1 below this score")
    p.add_argument("--min-invariants", type=float, default=None, metavar="PCT", help="exit 1 below this score")
    return p


def _resolve_modules(names: list[str], known: list[str]) -> list[str]:
    out = []
    for name in names:
        matches = [k for k in known if name in (k, k.removesuffix(".py"), Path(k).stem)]
        if len(matches) != 1:
            raise selection.SelectionError(
                f"module {name!r} {'is ambiguous' if matches else 'is not part of the candidate'}; "
                f"modules: {', '.join(known)}")
        out.append(matches[0])
    return out


def _choose(args: argparse.Namespace) -> tuple[selection.Pool, list]:
    modules = _resolve_modules(args.modules, sorted([*selection.candidate_modules(), *SHARED]))
    pool = selection.build_pool(modules, args.kinds)
    if args.ids is not None:
        by_id = pool.by_id()
        unknown = [i for i in args.ids if i not in by_id]
        if unknown:
            raise selection.SelectionError(f"unknown mutant id(s) {', '.join(unknown)} (see --list)")
        return pool, [by_id[i] for i in args.ids]
    return pool, selection.select(pool, args.sample, args.seed)


def _list(pool: selection.Pool, chosen: list) -> str:
    lines = [f"{len(chosen)} of {len(pool.mutants)} mutants; by kind: "
             + ", ".join(f"{k} {n}" for k, n in sorted(Counter(m.kind for m in chosen).items()))]
    for m in chosen:
        old = " ".join(m.original.split())
        lines.append(f"{m.id}  {m.module}:{m.line}  {old[:70]!r} -> {m.replacement[:70]!r}")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    if args.sample <= 0 or args.jobs <= 0 or (args.timeout is not None and args.timeout <= 0):
        build_parser().error("--sample, --jobs and --timeout must be positive")
    unknown = [p for p in args.profiles if p not in VERSIONS]
    if unknown or not args.profiles:
        build_parser().error(f"--profiles: unknown {', '.join(unknown) or '(none given)'}; "
                             f"known: {', '.join(VERSIONS)}")
    try:
        equivalents = {k: v.reason for k, v in selection.load_equivalents(args.equivalent).items()}
    except (selection.SelectionError, OSError, ValueError) as exc:
        print(f"bench power: error: {args.equivalent}: {exc}", file=sys.stderr)
        return 2
    if args.rescore is not None:
        try:
            report = _rescore(args.rescore, equivalents)
        except (OSError, ValueError, KeyError) as exc:
            print(f"bench power: error: cannot rescore {args.rescore}: {exc}", file=sys.stderr)
            return 2
        return _emit(args, report)
    try:
        pool, chosen = _choose(args)
    except selection.SelectionError as exc:
        print(f"bench power: error: {exc}", file=sys.stderr)
        return 2
    if args.list:
        sys.stdout.write(_list(pool, chosen))
        return 0
    modes = ("invariants",) if args.no_lockstep_only else MODES
    started = time.monotonic()
    try:
        print(f"power: baseline (the pristine candidate, {', '.join(modes)})", file=sys.stderr)
        base = baseline(modes=modes, jobs=args.jobs, reach=not args.no_reach, profiles=args.profiles)
        timeout = args.timeout or max(MIN_TIMEOUT_S, TIMEOUT_FACTOR * max(base.seconds.values()))
        progress = Progress("power", len(chosen), unit="mutants")
        tally: Counter[str] = Counter()

        def note(result: MutantResult) -> None:
            first = result.modes[modes[-1]]
            tally["killed" if first.killed else first.status] += 1
            progress.label = "power (" + ", ".join(f"{k} {v}" for k, v in sorted(tally.items())) + ")"
            progress.advance()

        results = run_mutants(chosen, pool.texts, modes=modes, jobs=args.jobs, timeout=timeout,
                              replay=not args.no_replay, reach=base.reach, equivalents=equivalents,
                              progress=note, profiles=args.profiles)
        progress.close()
    except HarnessError as exc:
        print(f"bench power: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # the workers are killed on the way out (harness.run_specs)
        print("bench power: interrupted", file=sys.stderr)
        return 130
    elapsed = time.monotonic() - started
    report = Report(tuple(results), modes, pool.texts, _meta(args, pool, chosen, base, timeout, elapsed,
                                                                equivalents))
    return _emit(args, report)


def _emit(args: argparse.Namespace, report: Report) -> int:
    text = json.dumps(report.as_dict(), indent=1) if args.json else report.render()
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(report.render(), encoding="utf-8")
        args.out.with_suffix(".json").write_text(json.dumps(report.as_dict(), indent=1) + "\n", encoding="utf-8")
        print(f"power: wrote {args.out} and {args.out.with_suffix('.json')}", file=sys.stderr)
    thresholds = {m: v for m, v in (("lockstep", args.min_lockstep), ("invariants", args.min_invariants))
                  if v is not None}
    failed = report.below(thresholds)
    for line in failed:
        print(f"power: {line}", file=sys.stderr)
    return 1 if failed else 0


def _rescore(path: Path, equivalents: dict[str, str]) -> Report:
    """An earlier run's results (its JSON) with the equivalent mutants known today."""
    data = json.loads(path.read_text(encoding="utf-8"))
    rows = data["mutants"]
    pool = selection.build_pool(sorted({r["module"] for r in rows}), KINDS)
    by_id = pool.by_id()
    missing = [r["id"] for r in rows if r["id"] not in by_id]
    if missing:
        raise ValueError(f"{len(missing)} mutant(s) no longer in the source (e.g. {missing[0]}): run again")
    results = tuple(MutantResult(by_id[r["id"]], {m: ModeResult(**v) for m, v in r["modes"].items()},
                                 r["reached"], equivalents.get(r["id"]), r["seconds"]) for r in rows)
    modes = tuple(m for m in MODES if m in rows[0]["modes"]) if rows else MODES
    ids = {m.id for m in pool.mutants}
    meta = {**data["meta"], "stale_equivalents": sorted(i for i in equivalents if i not in ids),
            "rescored": f"{path.name} with {len(equivalents)} equivalent mutants listed, "
                        + datetime.datetime.now().strftime("%Y-%m-%d %H:%M")}
    return Report(results, modes, pool.texts, meta)


def _revision() -> str:
    try:
        rev = subprocess.run(["git", "-C", str(PROJECT), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(PROJECT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        rev, dirty = "", ""
    return f"{PROJECT} at {rev}{' with uncommitted changes' if dirty else ''}" if rev else str(PROJECT)


def _meta(args: argparse.Namespace, pool: selection.Pool, chosen: list, base: Baseline, timeout: float,
          elapsed: float, equivalents: dict[str, str]) -> dict[str, object]:
    examples, steps = BUDGETS["ci"]
    ids = {m.id for m in pool.mutants}
    return {
        "source": args.source or _revision(),
        "candidate": "rmqspec.impl:factory, a private copy (package rmqspec_candidate), one file mutated",
        "reference": "rmqspec.model.broker.ModelBroker from the pristine package (isolation proved per run)",
        "budget": f"rmqspec conform's default: {examples} examples × {steps} steps, derandomized, no shrinking; "
                  "modes: " + ", ".join(LABEL[m] for m in (("invariants",) if args.no_lockstep_only else MODES))
                  + "; profiles " + ", ".join(args.profiles) + " (each reaching the mutant, in turn, until killed)",
        "selection": (f"{len(chosen)} of {len(pool.mutants)} sites, seed {args.seed}"
                      + (f", ids {len(args.ids)}" if args.ids else "")
                      + f"; {len(set(m.module for m in chosen))} modules; kinds {','.join(sorted(set(args.kinds)))}"),
        "timing": (f"{elapsed:.0f} s wall, {args.jobs} jobs; pristine run "
                   + ", ".join(f"{LABEL[m]} {s:.1f} s" for m, s in base.seconds.items())
                   + f" (coverage on: {not args.no_reach}); timeout {timeout:.0f} s per mode; "
                   + datetime.datetime.now().strftime("%Y-%m-%d %H:%M")),
        "stale_equivalents": sorted(i for i in equivalents if i not in ids),
    }


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
