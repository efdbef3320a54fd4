"""The honest brokers across seeds: ``rmqspec conform`` at a large budget, one run per seed.

Theory of operation
-------------------
The mutation score (``bench_power.py``) says how much the machine catches; this says it raises no
false alarm on brokers that keep RocketMQ's rules, far beyond the default budget: the model and the
mmap broker (``rmqspec.model:factory``, ``rmqspec.impl:factory``), each under the chosen profiles,
``rmqspec conform --seed S --examples E --steps N`` for every seed S in ``1..--seeds``. Each run is
its own process (``python -m rmqspec.cli conform …``, exactly what a user types), ``--jobs`` at a time;
a run that fails keeps its report (the shrunk program, replayable) in the output. Exit status 0 when
every run passed, 1 when one failed.

``python -m bench seeds -- [--seeds 20] [--examples 300] [--steps 80] [--brokers model,impl]
[--profiles rocketmq-4.9] [--jobs 2] [--out FILE]``. Run by name only (``__main__.BY_NAME_ONLY``):
20 seeds × 300 × 80 of both brokers take hours on two cores. The figures printed are each run's
verdict and wall time, and each broker's time relative to the model's (same seeds, same budget).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import attrs

from rmqspec.cli.progress import Progress
from rmqspec.properties.conformance import PROFILES

BROKERS = {"model": "rmqspec.model:factory", "impl": "rmqspec.impl:factory"}


@attrs.frozen
class Run:
    broker: str
    profile: str
    seed: int
    passed: bool
    seconds: float
    head: str  # the report's first line (PASS: … / FAIL: …)
    report: str  # the whole output when the run failed, else ""


def _conform(broker: str, profile: str, seed: int, examples: int, steps: int) -> Run:
    cmd = [sys.executable, "-m", "rmqspec.cli", "conform", "--broker", BROKERS[broker], "--profile", profile,
           "--seed", str(seed), "--examples", str(examples), "--steps", str(steps)]
    start = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - start
    out = proc.stdout + proc.stderr
    head = next((line for line in out.splitlines() if line.startswith(("PASS", "FAIL"))), out.strip()[:200])
    passed = proc.returncode == 0
    return Run(broker, profile, seed, passed, seconds, head, "" if passed else out)


def render(runs: list[Run], args: argparse.Namespace, wall: float) -> str:
    lines = [
        "rmqspec conform across seeds — the honest brokers",
        f"budget: {args.examples} examples × {args.steps} steps, seeds 1–{args.seeds}; jobs {args.jobs}; "
        f"wall {wall:.0f} s; {time.strftime('%Y-%m-%d %H:%M')}",
        "",
        f"{'broker':<8}{'profile':<15}{'passed':>10}{'mean s':>9}{'max s':>8}{'vs model':>10}",
    ]
    groups = {(b, p): [r for r in runs if (r.broker, r.profile) == (b, p)] for b in args.brokers for p in args.profiles}
    mean = {key: sum(r.seconds for r in mine) / len(mine) for key, mine in groups.items() if mine}
    for (broker, profile), mine in groups.items():
        if mine:
            base = mean.get(("model", profile))
            ratio = f"{mean[(broker, profile)] / base:.2f}×" if base else "—"
            passed = sum(r.passed for r in mine)
            lines.append(f"{broker:<8}{profile:<15}{passed:>5}/{len(mine):<4}{mean[(broker, profile)]:>9.1f}"
                         f"{max(r.seconds for r in mine):>8.1f}{ratio:>10}")
    lines += ["", "every run:"]
    for r in sorted(runs, key=lambda r: (r.broker, r.profile, r.seed)):
        lines.append(f"  {r.broker:<6} {r.profile:<13} seed {r.seed:>3}  {r.seconds:7.1f} s  {r.head}")
    for r in runs:
        if not r.passed:
            lines += ["", f"== {r.broker} {r.profile} seed {r.seed} failed", r.report.rstrip()]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench seeds", description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20, help="seeds 1..N (default 20)")
    parser.add_argument("--examples", type=int, default=300)
    parser.add_argument("--steps", type=int, default=80)
    parser.add_argument("--brokers", default="model,impl", help=f"comma-separated, of {sorted(BROKERS)}")
    parser.add_argument("--profiles", default="rocketmq-4.9", help="comma-separated conform profiles")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--out", type=Path, help="also write the report here")
    args = parser.parse_args(argv)
    args.brokers = [b for b in args.brokers.split(",") if b]
    args.profiles = [p for p in args.profiles.split(",") if p]
    unknown = [b for b in args.brokers if b not in BROKERS] + [p for p in args.profiles if p not in PROFILES]
    if unknown or not args.brokers or not args.profiles or args.seeds < 1 or args.jobs < 1:
        parser.error(f"unknown broker(s) or profile(s) {unknown} (brokers {sorted(BROKERS)}, profiles "
                     f"{sorted(PROFILES)})" if unknown else "no broker or profile, or --seeds/--jobs below 1")
    work = [(b, p, s) for s in range(1, args.seeds + 1) for p in args.profiles for b in args.brokers]
    progress = Progress("seeds", len(work), unit="runs", interval=5.0)
    runs: list[Run] = []
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(_conform, b, p, s, args.examples, args.steps) for b, p, s in work]
        for future in as_completed(futures):
            run = future.result()
            runs.append(run)
            if not run.passed:
                print(f"seeds: {run.broker} {run.profile} seed {run.seed} FAILED: {run.head}", file=sys.stderr)
            progress.advance()
    progress.close()
    text = render(runs, args, time.monotonic() - start)
    print(text, end="")
    if args.out is not None:
        args.out.write_text(text)
        print(f"seeds: wrote {args.out}", file=sys.stderr)
    return 0 if all(r.passed for r in runs) else 1
