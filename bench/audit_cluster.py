"""The audit on a Spark cluster against ``local[2]``: the same findings, and the time ratio.

``python -m bench audit -- --master spark://HOST:PORT [--sizes 1M] [--work DIR] [--baseline local[2]]``
(``bench_audit.py`` hands a ``spark://`` master here; ``scripts/spark-standalone start`` starts one on
127.0.0.1.)

For each size a trace with every violation code the generator can plant (``traces/scenarios.py``
``SCENARIOS``, ``--inject-count`` instances each) and a crash is generated once into ``--work``
(``cluster-trace-<size>``), with its first and second half as two days. Then, in fresh processes
(``rmqspec audit … --json --quiet``, JVM start included), on the cluster and on ``--baseline``,
alternating which goes first:

- the full audit of the trace (``--plan auto``: the scale plan at 1 M events);
- an incremental day: ``day1 --state-out S1``, then ``day2 --since S1 --state-out S2``;

every run with ``--conf spark.sql.shuffle.partitions=8`` (``SHUFFLE_PARTITIONS``).

Each pair of outputs is compared — violations, observations and rejected rows (every column of every
row), ``summary.json`` but the wall time, the master and the paths — and a difference is printed and
makes the exit code 1. Printed per run: the process's wall seconds and the audit's own ``wall_time_s``
(without the JVM start), and the ratio cluster / baseline of both. The executors' Python is
``PYSPARK_PYTHON`` (default: this interpreter); ``SPARK_LOCAL_IP`` defaults to 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import pyarrow.parquet as pq

# Both masters get the shuffle partitions a local audit takes by default (``session.local_settings``);
# a cluster's default is Spark's 200, and each pass's judge then runs 200 Python tasks on a small input.
SHUFFLE_PARTITIONS = 8
VOLATILE = ("wall_time_s", "events_per_s", "out", "master", "inputs", "rejected_sample")
OUTPUTS = ("violations", "observations", "rejected")


@attrs.frozen
class Run:
    """One ``rmqspec audit`` process: its exit code, wall seconds and output directory."""

    code: int
    seconds: float
    out: Path

    @property
    def summary(self) -> dict[str, Any]:
        return json.loads((self.out / "summary.json").read_text())


def difference(got: Path, want: Path) -> str | None:
    """The first difference between two audits' outputs (None: the same findings)."""
    for name in OUTPUTS:
        a, b = pq.read_table(got / name), pq.read_table(want / name)
        if not a.schema.equals(b.schema):
            return f"{name}: schema {a.schema} != {b.schema}"
        rows_a, rows_b = sorted(map(repr, a.to_pylist())), sorted(map(repr, b.to_pylist()))
        if rows_a != rows_b:
            extra, missing = sorted(set(rows_a) - set(rows_b))[:3], sorted(set(rows_b) - set(rows_a))[:3]
            return (f"{name}: {len(rows_a)} rows vs {len(rows_b)}; only in the first {extra}; "
                    f"only in the second {missing}")
    summaries = []
    for path in (got, want):
        summary = json.loads((path / "summary.json").read_text())
        for key in VOLATILE:
            summary.pop(key, None)
        for key in ("since", "state_out"):
            summary.get("incremental", {}).pop(key, None)
        summaries.append(summary)
    a, b = summaries
    if a != b:
        keys = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
        return f"summary.json differs in {keys}: {[a.get(k) for k in keys]} vs {[b.get(k) for k in keys]}"
    return None


def _env() -> dict[str, str]:
    env = {**os.environ}
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    for inherited in ("PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET"):
        env.pop(inherited, None)
    return env


def audit(master: str, args: Sequence[str], out: Path) -> Run:
    """``rmqspec audit ARGS --out OUT --master MASTER --json --quiet`` in a fresh process."""
    shutil.rmtree(out, ignore_errors=True)
    argv = [sys.executable, "-m", "rmqspec.cli", "audit", *args, "--out", str(out), "--master", master, "--json",
            "--quiet", "--conf", f"spark.sql.shuffle.partitions={SHUFFLE_PARTITIONS}"]  # fmt: skip
    start = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, env=_env(), check=False)
    seconds = time.monotonic() - start
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip()[-2000:]}")
    return Run(done.returncode, seconds, out)


def _trace(work: Path, events: int, label: str, inject_count: int) -> tuple[Path, Path, Path]:
    """(whole trace, day 1, day 2), generated once with every code injected and a crash."""
    import pyarrow as pa

    from rmqspec.traces.generator import GenConfig, generate
    from rmqspec.traces.scenarios import SCENARIOS

    whole = work / f"cluster-trace-{label}"
    days = (work / f"cluster-trace-{label}-day1", work / f"cluster-trace-{label}-day2")
    if not all((d / "part-00000.parquet").exists() for d in (whole, *days)):
        for d in (whole, *days):
            shutil.rmtree(d, ignore_errors=True)
        generate(whole, GenConfig(events=events, seed=46, inject=tuple(SCENARIOS), inject_count=inject_count,
                                  crashes=1))  # fmt: skip
        table = pq.read_table(whole).sort_by("seq")
        half = table.num_rows // 2
        for d, part in zip(days, (table.slice(0, half), table.slice(half)), strict=True):
            d.mkdir(parents=True)
            pq.write_table(pa.Table.from_batches(part.to_batches(), part.schema), d / "part-00000.parquet")
    return whole, *days  # type: ignore[return-value]


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _pair(name: str, cluster: str, baseline: str, work: Path, steps: list[list[str]], first: str) -> bool:
    """Run ``steps`` (one audit each; ``{where}`` in an argument is the master's label) on both masters,
    ``first`` first; print the times and the comparison; True when every step's findings agree."""
    runs: dict[str, list[Run]] = {}
    order = ("cluster", "baseline") if first == "cluster" else ("baseline", "cluster")
    for where in order:
        master = cluster if where == "cluster" else baseline
        runs[where] = []
        for i, step in enumerate(steps):
            args = [a.replace("{where}", str(work / f"{name}-{where}")) for a in step]
            load = _load()
            run = audit(master, args, work / f"{name}-{where}" / f"out{i + 1}")
            runs[where].append(run)
            print(f"{name} step {i + 1} on {master:<24} {run.seconds:7.1f} s process, "
                  f"{run.summary['wall_time_s']:7.1f} s audit, exit {run.code}, "
                  f"{run.summary['events_read']:,} events (load before {load})", flush=True)  # fmt: skip
    same = True
    for i, (got, want) in enumerate(zip(runs["cluster"], runs["baseline"], strict=True)):
        diff = difference(got.out, want.out)
        counts = {**got.summary["violations"], **got.summary["observations"]}
        found = sum(1 for n in counts.values() if n)
        print(f"{name} step {i + 1}: findings {'identical' if diff is None and got.code == want.code else 'DIFFER'}"
              f" ({sum(counts.values()):,} findings of {found} codes, {got.summary['rows_rejected']} rejected,"
              f" {len(got.summary['not_judged'])} codes not judged)", flush=True)  # fmt: skip
        if diff is not None or got.code != want.code:
            print(f"  {diff or f'exit {got.code} vs {want.code}'}", flush=True)
            same = False
    mine, theirs = runs["cluster"], runs["baseline"]
    process = sum(r.seconds for r in mine) / sum(r.seconds for r in theirs)
    own = sum(r.summary["wall_time_s"] for r in mine) / sum(r.summary["wall_time_s"] for r in theirs)
    print(f"{name}: cluster / {baseline} = {process:.2f} (process), {own:.2f} (audit without JVM start)", flush=True)
    return same


def compare(cluster: str, sizes: Sequence[int], work: Path, baseline: str = "local[2]", inject_count: int = 3,
            label: Any = str) -> int:
    """Per size: the full audit and an incremental day on ``cluster`` and ``baseline``; 0 when every
    pair of outputs is the same, else 1."""
    same = True
    for n in sizes:
        name = label(n)
        start = time.monotonic()
        whole, day1, day2 = _trace(work, n, name, inject_count)
        print(f"{name}: trace {whole} ({time.monotonic() - start:.0f} s to make or find; every code injected "
              f"x{inject_count}, a crash)", flush=True)  # fmt: skip
        same &= _pair(f"full-{name}", cluster, baseline, work, [[str(whole)]], first="cluster")
        same &= _pair(f"incremental-{name}", cluster, baseline, work,
                      [[str(day1), "--state-out", "{where}/state1"],
                       [str(day2), "--since", "{where}/state1", "--state-out", "{where}/state2"]],
                      first="baseline")  # fmt: skip
    print("cluster and baseline findings: " + ("identical on every run" if same else "DIFFER"), flush=True)
    return 0 if same else 1
