"""Audit throughput: the Spark audit vs a bare Spark scan, and the reference checker.

``python -m bench audit -- [--sizes 1M,10M,100M] [--master local[2]] [--work DIR] [--profile] [--e2e N]``

For each size a clean trace is generated once with ``rmqspec trace gen``
(kept in ``--work`` as ``trace-<size>`` and reused; a symlink to an existing
trace directory works too), then in one Spark session:

- baseline: a bare scan of the same Parquet files that decodes every column
  the audit reads (a sum of ``xxhash64`` over them; a plain ``count()`` reads
  only the footers), events/s;
- audit: ``run_audit`` over the files, events/s and the ratio audit/scan;
- on the smallest size, the reference checker (``traces.checker.check``)
  over the rows already in memory, events/s;
- peak memory: the JVM driver's VmHWM and the Python driver's VmHWM, both
  from ``/proc`` (peaks since the session started, so cumulative over sizes).
- ``--profile``: for each size, ``spark.profile.profile_audit`` — the facts
  pass, the Python plan building and every rules pass alone (key family),
  each with its Spark stages' totals (tasks, run/CPU time, shuffle bytes and
  write time, spill), with the plan the audit chooses; with ``--plans``
  ``small,scale`` both plans are profiled.
- ``--e2e N``: ``rmqspec audit`` of the smallest trace converted to JSONL,
  end to end in a fresh process (JVM start included), N rounds alternating
  ``--plan auto`` with the baseline ``--e2e-baseline`` (default ``small``:
  the SQL plan ``auto`` chose for small inputs before the reference plan;
  ``scale`` is the plan every input had before that); the machine load is
  printed with each figure.
- ``--plans reference`` in a profile: the reference plan is one job (the
  reference checker in Spark's Python workers), so it is timed whole.
- ``--master spark://HOST:PORT``: the cluster against ``--baseline`` (``local[2]``) instead, on a trace
  with every code injected, the full audit and an incremental day, findings compared
  (``bench/audit_cluster.py``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from rmqspec.cli.main import main as rmqspec
from rmqspec.spark.inputs import AUDIT_COLUMNS
from rmqspec.spark.job import run_audit
from rmqspec.spark.profile import profile_audit, render_profile
from rmqspec.spark.session import audit_session
from rmqspec.traces.checker import check
from rmqspec.traces.io import open_trace

_UNITS = {"K": 1_000, "M": 1_000_000, "G": 1_000_000_000}
# What the audit reads of a trace: the rules' columns, and ``detail`` of crashes.
SCANNED = (*(c for c in AUDIT_COLUMNS if c not in ("actor", "commitlog_offset", "sharding_key")), "detail")


def _size(text: str) -> int:
    text = text.strip().upper()
    if text and text[-1] in _UNITS:
        return int(float(text[:-1]) * _UNITS[text[-1]])
    return int(text)


def _label(n: int) -> str:
    return f"{n // 1_000_000}M" if n % 1_000_000 == 0 else f"{n // 1000}K"


def _hwm_mb(pid: int) -> float | None:
    """Peak resident set size (VmHWM) of process ``pid`` in MB, from /proc."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _jvm_hwm_mb(spark: SparkSession) -> float | None:
    try:
        pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    except AttributeError:
        return None
    return _hwm_mb(int(pid))


def _python_peak_mb() -> float:
    return _hwm_mb(os.getpid()) or float("nan")


def _trace(work: Path, n: int) -> Path:
    path = work / f"trace-{_label(n)}"
    if not (path / "part-00000.parquet").exists():
        shutil.rmtree(path, ignore_errors=True)
        code = rmqspec(["trace", "gen", "--events", str(n), "--out", str(path), "--seed", "1"])
        if code != 0:
            raise SystemExit(f"trace gen failed with exit code {code}")
    return path


def _scan(spark: SparkSession, path: Path) -> tuple[int, float]:
    """(rows, seconds) of a bare scan decoding every column the audit reads."""
    start = time.monotonic()
    df = spark.read.parquet(str(path))
    cols = [c for c in SCANNED if c in df.columns]
    row = df.select(F.count(F.lit(1)).alias("n"), F.sum(F.xxhash64(*cols)).alias("h")).first()
    return int(row["n"]), time.monotonic() - start


def _reference(path: Path) -> tuple[int, float]:
    rows = list(open_trace(path).iter_rows())
    start = time.monotonic()
    report = check(rows)
    elapsed = time.monotonic() - start
    if report.violations:
        raise SystemExit(f"reference checker found violations in a clean trace: {report.violations[:3]}")
    return len(rows), elapsed


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _e2e(work: Path, trace: Path, rounds: int, baseline: str = "small") -> None:
    """``rmqspec audit`` of ``trace`` as JSONL in fresh processes: ``--plan auto`` vs ``--plan baseline``."""
    jsonl = work / f"{trace.name}.jsonl"
    if not jsonl.exists():
        code = rmqspec(["trace", "convert", str(trace), str(jsonl)])
        if code != 0:
            raise SystemExit(f"trace convert failed with exit code {code}")
    times: dict[str, list[float]] = {"auto": [], baseline: []}
    for i in range(rounds):
        for plan in ("auto", baseline) if i % 2 == 0 else (baseline, "auto"):
            load = _load()
            start = time.monotonic()
            done = subprocess.run(
                [sys.executable, "-m", "rmqspec.cli", "audit", str(jsonl), "--out", str(work / f"e2e-{plan}"),
                 "--master", "local[2]", "--quiet", "--plan", plan],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            elapsed = time.monotonic() - start
            if done.returncode not in (0, 1):
                raise SystemExit(f"rmqspec audit failed: {done.stderr.strip()[-500:]}")
            times[plan].append(elapsed)
            print(f"e2e {jsonl.name} --plan {plan:<5} {elapsed:6.1f}s  (load {load})", flush=True)
    best = {plan: min(ts) for plan, ts in times.items()}
    median = {plan: sorted(ts)[len(ts) // 2] for plan, ts in times.items()}
    print(
        f"e2e best: auto {best['auto']:.1f}s, {baseline} {best[baseline]:.1f}s "
        f"(ratio {best['auto'] / best[baseline]:.2f}); median: auto {median['auto']:.1f}s, "
        f"{baseline} {median[baseline]:.1f}s (ratio {median['auto'] / median[baseline]:.2f})",
        flush=True,
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench audit", description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1M", help="comma-separated event counts (1M,10M,100M)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="4g")
    parser.add_argument("--work", default="/tmp/rmqspec-bench-audit", help="where traces are kept")
    parser.add_argument("--no-reference", action="store_true", help="skip the reference checker")
    parser.add_argument("--profile", action="store_true", help="per-pass and per-stage breakdown for each size")
    parser.add_argument("--plans", default="auto",
                        help="plans to profile: auto (the SQL plan by size), small, scale, reference (comma-separated)")
    parser.add_argument("--e2e-baseline", default="small", choices=("small", "scale"),
                        help="the plan --e2e compares --plan auto with (default small)")
    parser.add_argument("--e2e", type=int, default=0, metavar="N",
                        help="N rounds of rmqspec audit end to end on the smallest size as JSONL")  # fmt: skip
    parser.add_argument("--baseline", default="local[2]",
                        help="with a spark:// --master: the master it is timed against")
    parser.add_argument("--inject-count", type=int, default=3, help="with a spark:// --master: instances of each code")
    args = parser.parse_args(argv)
    sizes = [_size(s) for s in args.sizes.split(",") if s.strip()]
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    if args.master.startswith("spark://"):
        from bench.audit_cluster import compare

        return compare(args.master, sizes, work, args.baseline, args.inject_count, label=_label)
    traces = {n: _trace(work, n) for n in sizes}

    spark = audit_session(
        args.master,
        {"spark.driver.memory": args.driver_memory, "spark.sql.shuffle.partitions": "8"},
        app_name="rmqspec-bench-audit",
    )
    _scan(spark, traces[sizes[0]])  # warm up the JVM and the Parquet reader
    print(f"{'size':>6} {'events':>11} {'scan ev/s':>12} {'audit ev/s':>12} {'ratio':>7} "
          f"{'audit s':>8} {'jvm MB':>8} {'py MB':>7}  load")  # fmt: skip
    for n in sizes:
        rows, scan_s = _scan(spark, traces[n])
        summary = run_audit(spark, [str(traces[n])], str(work / f"out-{_label(n)}"))
        if summary.exit_code != 0:
            print(f"warning: the clean {_label(n)} trace has violations: {dict(summary.violations)}")
        scan_rate = rows / scan_s
        audit_rate = summary.events_per_s
        jvm = _jvm_hwm_mb(spark)
        print(
            f"{_label(n):>6} {rows:>11,} {scan_rate:>12,.0f} {audit_rate:>12,.0f} "
            f"{audit_rate / scan_rate:>7.3f} {summary.wall_time_s:>8.1f} "
            f"{jvm if jvm is not None else float('nan'):>8.0f} {_python_peak_mb():>7.0f}  {_load()}",
            flush=True,
        )
    if args.profile:
        for n in sizes:
            for plan in [p.strip() for p in args.plans.split(",") if p.strip()]:
                if plan == "reference":
                    summary = run_audit(spark, [str(traces[n])], str(work / f"out-{_label(n)}"), plan="reference")
                    print(f"profile {_label(n)} --plan reference: one job, {summary.wall_time_s:.2f}s "
                          f"(load {_load()})", flush=True)  # fmt: skip
                    continue
                small = {"auto": None, "small": True, "scale": False}[plan]
                print(f"profile {_label(n)} --plan {plan} (load {_load()})", flush=True)
                profiles = profile_audit(spark, [str(traces[n])], str(work / f"out-{_label(n)}"), small=small)
                print(render_profile(profiles), flush=True)
    if args.e2e:
        _e2e(work, traces[min(sizes)], args.e2e, args.e2e_baseline)
    if not args.no_reference:
        n = min(sizes)
        count, ref_s = _reference(traces[n])
        print(
            f"reference checker on {_label(n)}: {count / ref_s:,.0f} events/s ({ref_s:.1f}s), "
            f"python peak RSS {_python_peak_mb():.0f} MB"
        )
    return 0
