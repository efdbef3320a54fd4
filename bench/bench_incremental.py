"""Incremental audit: the next day with the carried state vs a full audit of the whole history.

``python -m bench incremental -- [--events 1M] [--days 2] [--rounds 1] [--plan auto] [--work DIR]``

One trace of ``--events`` (generated once with injected violations of every non-filter code and
one crash, kept in ``--work``) is cut into ``--days`` equal days (Parquet directories). In one
Spark session (``local[2]``, warm):

- the state of days 1..K-1 is built with ``--state-out`` day by day (not timed);
- baseline: ``run_audit`` over all K days (the full audit of the history), seconds;
- incremental: ``spark.incremental.run`` of day K with ``--since`` the state of day K-1 and
  ``--state-out`` (the daily job: audit, merge and the next state), seconds, split into its
  steps;
- for scale: ``run_audit`` of day K alone (what any incremental scheme running this audit over
  the day costs at least; not the same findings);
- the two findings are compared (exit 1 if they differ) and the ratio incremental / full printed
  with the machine load; with ``--rounds N`` both are timed N times, alternated, and the median
  ratio is printed too. The carried state's size (rows, tombstones) is printed against the
  history's.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import time
from pathlib import Path

import pyarrow.parquet as pq

from bench.bench_audit import _label, _load, _size
from rmqspec.spark.config import AuditConfig
from rmqspec.spark.incremental import run as run_incremental
from rmqspec.spark.job import run_audit
from rmqspec.spark.session import audit_session
from rmqspec.traces.generator import GenConfig, generate
from rmqspec.traces.io import read_table
from rmqspec.traces.scenarios import SCENARIOS

NO_FILTERS = tuple(c for c in SCENARIOS if "FILTER" not in c and "SUBSCRIPTION" not in c)


def _days(work: Path, events: int, days: int) -> tuple[list[str], int]:
    root = work / f"incr-{_label(events)}-{days}d"
    paths = [root / f"day{i + 1}" for i in range(days)]
    if not all((p / "part-00000.parquet").exists() for p in paths):
        shutil.rmtree(root, ignore_errors=True)
        whole = root / "whole"
        generate(whole, GenConfig(events=events, seed=1, inject=NO_FILTERS, inject_count=2, crashes=1))
        table = read_table(whole)[0].sort_by("seq")
        n = table.num_rows
        for i, p in enumerate(paths):
            p.mkdir(parents=True)
            a, b = n * i // days, n * (i + 1) // days
            pq.write_table(table.slice(a, b - a), p / "part-00000.parquet", row_group_size=131_072)
        shutil.rmtree(whole)
    rows = sum(pq.ParquetFile(p / "part-00000.parquet").metadata.num_rows for p in paths)
    return [str(p) for p in paths], rows


def _found(out: Path) -> list[tuple]:
    got = []
    for name in ("violations", "observations"):
        for r in pq.read_table(out / name).to_pylist():
            got.append((r["code"], tuple(r["seqs"]), r["group"], r["msg_key"], r["txn_id"], r["queue_id"]))
    return sorted(got)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench incremental", description=__doc__.splitlines()[0])
    parser.add_argument("--events", default="1M", help="events of the whole history (e.g. 1M, 2M)")
    parser.add_argument("--days", type=int, default=2, help="equal days; the last one is audited incrementally")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--plan", choices=("auto", "reference", "small", "scale"), default="auto",
                        help="the plan of both audits (auto: each picks by its input size)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="4g")
    parser.add_argument("--work", default="/tmp/rmqspec-bench-audit")
    args = parser.parse_args(argv)
    if args.days < 2:
        parser.error("--days must be at least 2")
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    events = _size(args.events)
    days, rows = _days(work, events, args.days)
    plan = args.plan
    spark = audit_session(args.master, {"spark.driver.memory": args.driver_memory})
    config = AuditConfig()
    quiet = lambda _s: None  # noqa: E731
    run_dir = work / "incr-run"
    shutil.rmtree(run_dir, ignore_errors=True)
    state = None
    for i, day in enumerate(days[:-1]):
        out = str(run_dir / f"state{i + 1}")
        run_incremental(spark, [day], str(run_dir / f"out{i + 1}"), config, state, out, on_stage=quiet, plan=plan)
        state = out
    print(f"history: {rows:,} events in {args.days} days; plan {args.plan}; master {args.master}")
    print(f"state after day {args.days - 1} (rows of a {rows // args.days:,}-event day): "
          + ", ".join(f"{k} {v:,}" for k, v in _state_counts(Path(state)).items()))
    ratios = []
    for r in range(args.rounds):
        timings = {}
        for which in (("full", "incr", "day") if r % 2 == 0 else ("day", "incr", "full")):
            load = _load()
            start = time.monotonic()
            marks: dict[str, float] = {}
            if which == "full":
                run_audit(spark, days, str(run_dir / "full"), config, plan=plan)
            elif which == "day":
                run_audit(spark, [days[-1]], str(run_dir / "day"), config, plan=plan)
            else:
                run_incremental(spark, [days[-1]], str(run_dir / "incr"), config, state,
                                str(run_dir / f"state-next{r}"), on_stage=lambda name, m=marks: m.setdefault(
                                    name, time.monotonic()), plan=plan)
            end = time.monotonic()
            timings[which] = end - start
            note = ""
            if marks:
                at = [start, marks["audit"], marks["merge findings"], marks["carry state"], end]
                parts = ("check + pull", "audit", "merge", "carry")
                note = " = " + ", ".join(f"{p} {b - a:.1f}" for p, a, b in zip(parts, at[:-1], at[1:], strict=True))
            label = {"full": "full audit of all days", "incr": "incremental (--since, --state-out)",
                     "day": "audit of the last day alone"}[which]
            print(f"round {r + 1} {label:>36}: {timings[which]:7.1f} s (load {load}){note}", flush=True)
        same = _found(run_dir / "full") == _found(run_dir / "incr")
        ratio = timings["incr"] / timings["full"]
        ratios.append(ratio)
        print(f"round {r + 1}: incremental / full = {ratio:.2f} (the day alone / full = "
              f"{timings['day'] / timings['full']:.2f}); findings identical: {'yes' if same else 'NO'} "
              f"({len(_found(run_dir / 'full'))} findings)", flush=True)
        if not same:
            return 1
    print(f"median incremental / full over {len(ratios)} round(s): {statistics.median(ratios):.2f}")
    return 0


def _state_counts(state: Path) -> dict[str, int]:
    out = {}
    for name in ("rows", "closed", "findings"):
        out[name] = sum(pq.ParquetFile(f).metadata.num_rows for f in (state / name).glob("*.parquet"))
    return out
