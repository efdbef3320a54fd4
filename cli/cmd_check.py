"""``rmqspec check``: the whole campaign in one command.

Phases, each with a progress line on stderr:

1. **proofs** — every z3 theorem over the lifecycle tables (``rmqspec prove``),
   plus the configuration checks of ``--config broker.conf`` when given;
2. **conformance** — the conformance machine against ``--broker`` (default:
   the bundled ``MmapBroker`` in a temporary directory) in lockstep with the
   model, writing one SPEC §8 trace per example to ``OUT/traces``;
3. **workload** — the reference client against the same broker for simulated
   minutes (retries, DLQ, delays, lock hand-overs, transactions), recorded to
   ``OUT/traces/workload.jsonl`` (skipped for a factory without ``recorder`` and for a remote
   ``rocketmq://`` broker, which runs on its own clock: wall-clock conformance instead);
4. **audit** — the Spark audit of every trace in ``OUT/traces`` (``--master``,
   local by default), results in ``OUT/audit``;
5. **report** — ``OUT/report.html`` (self-contained, with plots) and
   ``OUT/summary.json``, and a final table on stdout (``--json``: the summary).

Exit 0 when every proof holds, the broker conforms and the audit finds no
violation; 1 otherwise; 2 for usage errors and unreadable inputs.
"""

from __future__ import annotations

import argparse
import datetime
import inspect
import json
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs

from rmqspec.cli.common import InputError, UsageError
from rmqspec.cli.progress import Progress
from rmqspec.properties.conformance import PROFILES

NAME = "check"
HELP = "run the whole campaign: z3 proofs, conformance with traces, Spark audit, HTML report"

# budget -> (conformance examples, steps per example, workload rounds)
BUDGETS: dict[str, tuple[int, int, int]] = {
    "quick": (10, 20, 1),
    "default": (40, 30, 1),
    "thorough": (300, 60, 3),
}
DEFAULT_BROKER = "rmqspec.impl:factory"
WORKLOAD_TRACE = "workload"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--broker", default=DEFAULT_BROKER, metavar="FACTORY",
                        help=f"broker factory package.module:factory (default {DEFAULT_BROKER}), or "
                             "rocketmq://HOST:PORT: a running broker's name server (wall-clock conformance)")
    parser.add_argument("--budget", choices=sorted(BUDGETS), default="default",
                        help="how hard to look: quick, default or thorough (default: default)")
    parser.add_argument("--out", default="rmqspec-out", metavar="DIR",
                        help="where traces, audit results, report.html and summary.json go")
    parser.add_argument("--master", default="local[*]", metavar="URL",
                        help="Spark master for the audit (default local[*])")
    parser.add_argument("--config", metavar="FILE",
                        help="a broker.conf: its guarantees are verified too and the model follows it")
    parser.add_argument("--crash-cmd", metavar="SHELL", help="rocketmq://: kills the broker (kill crashes)")
    parser.add_argument("--restart-cmd", metavar="SHELL", help="rocketmq://: restarts it on the same store")
    parser.add_argument("--tolerance", type=int, default=None, metavar="MS",
                        help="rocketmq://: how late a timed action may be (wall clock; default 500 ms)")
    parser.add_argument("--audit-config", metavar="FILE", help="the audit's JSON configuration (docs/configuration.md)")
    parser.add_argument("--profile", choices=sorted(PROFILES), default="rocketmq-4.9",
                        help="the RocketMQ version to hold the broker to (default rocketmq-4.9), faithfully: its "
                             "defaults fill what --config leaves out, the conformance machine follows it and the "
                             "audit allows for its behaviour (5.1+: op messages written in batches); strict: 4.9, "
                             "observations fail too. The proofs are stated for the 4.9 lifecycle")
    parser.add_argument("--seed", type=int, help="a random seed for the conformance machine (default derandomized)")
    parser.add_argument("--json", action="store_true", help="print summary.json instead of the table")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")


# ---------------------------------------------------------------------------
# phases


def _version(args: argparse.Namespace) -> str:
    """The RocketMQ version profile (``model/versions.py``) of the conformance ``--profile``."""
    return PROFILES[args.profile].version


def _prove(args: argparse.Namespace) -> list[Any]:
    from rmqspec.cli.cmd_prove import load_conf
    from rmqspec.cli.report_model import ProofRow
    from rmqspec.model.versions import VERSIONS
    from rmqspec.properties.brokerconf import ConfigError
    from rmqspec.properties.configcheck import verify_config
    from rmqspec.properties.prover import prove_all, theorems_for

    conf = None
    if args.config:
        try:
            conf = load_conf(args.config, _version(args))
        except ConfigError as exc:
            raise InputError(str(exc)) from None
    bar = Progress("proofs", unit="theorems", enabled=not args.quiet)
    results = prove_all(theorems_for(VERSIONS[_version(args)]), on_progress=bar.update)
    bar.close()
    if conf is not None:
        bar = Progress("config", unit="checks", enabled=not args.quiet)
        results += verify_config(conf, on_progress=bar.update)
        bar.close()
    return [ProofRow.from_result(r) for r in results]


def _example_recorders(traces: Path, bar: Progress) -> Callable[[], Any]:
    """One JSONL trace per conformance example, tagged with its ``trace_id``."""
    from rmqspec.traces.recorder import JsonlRecorder

    opened: list[Any] = []
    counter = iter(range(1, 1 << 30))

    def make() -> Any:
        for rec in opened:
            rec.close()
        opened.clear()
        name = f"example-{next(counter):05d}"
        rec = JsonlRecorder(traces / f"{name}.jsonl", extra={"trace_id": name})
        opened.append(rec)
        bar.advance()
        return rec

    make.opened = opened  # type: ignore[attr-defined]  # check_conformance closes the last one
    return make


def _conform(args: argparse.Namespace, factory: Callable[..., Any], traces: Path, budget: tuple[int, int, int],
             config: Any, wall: Any):
    from rmqspec.cli.report_model import ConformanceSection
    from rmqspec.properties.runner import budget_settings, check_conformance

    examples, steps, _ = budget
    bar = Progress("conformance", total=examples, unit="examples", enabled=not args.quiet)
    result = check_conformance(
        factory, profile=args.profile, settings=budget_settings(examples, steps, seed=args.seed),
        seed=args.seed, recorder_factory=_example_recorders(traces, bar), config=config, wall=wall,
    )
    bar.close()
    return result, ConformanceSection.from_result(result, steps=steps)


def _accepts_recorder(factory: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "recorder" or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


class _CountingRecorder:
    """Forwards to a recorder and moves a progress bar."""

    def __init__(self, inner: Any, bar: Progress) -> None:
        self.inner, self.bar = inner, bar

    def emit(self, event: str, ts: int, **fields: Any) -> Any:
        ev = self.inner.emit(event, ts, **fields)
        if ev.seq % 500 == 0:
            self.bar.update(ev.seq + 1)
        return ev


def _workload(args: argparse.Namespace, factory: Callable[..., Any], traces: Path, work: Path,
              rounds: int, broker_config: Any) -> tuple[int, int] | None:
    """Run the client workload on ``--config``'s broker (else the profile's defaults); returns (events,
    simulated ms) or None when the broker records nothing."""
    from rmqspec.cli.workload import T0, run_workload
    from rmqspec.model.clock import ManualClock
    from rmqspec.model.config import default_config
    from rmqspec.traces.recorder import JsonlRecorder

    if not _accepts_recorder(factory):
        return None
    clock = ManualClock(T0)
    workdir = work / "workload"
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    bar = Progress("workload", unit="events", enabled=not args.quiet)
    with JsonlRecorder(traces / f"{WORKLOAD_TRACE}.jsonl", extra={"trace_id": WORKLOAD_TRACE}) as rec:
        counting = _CountingRecorder(rec, bar)
        config = broker_config if broker_config is not None else default_config(_version(args))
        broker = factory(clock, config, workdir, recorder=counting)
        try:
            simulated = run_workload(broker, clock, counting, rounds=rounds, timers=config.behaviour.timer_wheel)
        finally:
            broker.close()
        events = rec.count
    bar.update(events)
    bar.close()
    return events, simulated


def _audit_config(args: argparse.Namespace, broker_config: Any) -> Any:
    """``--audit-config``; without it, the audit's timing follows ``--config`` (the broker's own).
    Either way under the profile's version: with 5.1+'s op batching, its op batch period is the
    audit config's ``transactionOpBatchInterval``, else ``--config``'s, else RocketMQ's default."""
    from rmqspec.properties.history import audit_params
    from rmqspec.spark.config import AuditConfig, ConfigError, load_config

    if args.audit_config is None and broker_config is not None:
        return AuditConfig(params=audit_params(broker_config))
    batch = broker_config.transaction_op_batch_interval_ms if broker_config is not None else None
    try:
        return load_config(args.audit_config, _version(args), op_batch_default_ms=batch)
    except ConfigError as exc:
        raise InputError(str(exc)) from None


def _broker_config(args: argparse.Namespace) -> Any:
    from rmqspec.properties.brokerconf import ConfigError, broker_config_from_file

    if args.config is None:
        return None
    try:
        return broker_config_from_file(args.config, _version(args))
    except ConfigError as exc:
        raise InputError(str(exc)) from None


def _audit(args: argparse.Namespace, traces: Path, out: Path, config: Any) -> Any:
    from rmqspec.spark.job import run_audit, start_audit

    started = time.monotonic()

    def stage(name: str) -> None:
        if not args.quiet:
            print(f"audit: {name} ({time.monotonic() - started:.1f}s)", file=sys.stderr, flush=True)

    conf = {"spark.driver.memory": "4g"} if args.master.startswith("local") else {}
    paths, target = [str(traces)], str(out / "audit")
    spark, prepared, plan = start_audit(paths, target, args.master, conf, on_stage=stage)
    return run_audit(spark, paths, target, config, on_stage=stage, plan=plan, prepared=prepared)


# ---------------------------------------------------------------------------
# reading back what the phases wrote, for the report


def _trace_rows(path: Path) -> list[dict[str, Any]]:
    rows = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if line:
                rows.append(json.loads(line))
    return rows


def _finding_rows(directory: Path) -> Iterator[dict[str, Any]]:
    import pyarrow.parquet as pq

    if directory.exists():
        yield from pq.read_table(directory).to_pylist()


def _audit_section(summary: Any, out: Path, traces: Path) -> Any:
    from rmqspec.cli.report_model import AuditExample, AuditSection

    section = AuditSection.from_summary(summary.as_json())
    examples: dict[str, list[AuditExample]] = {}
    cache: dict[str, dict[int, dict[str, Any]]] = {}
    for kind in ("violations", "observations"):
        for row in _finding_rows(out / "audit" / kind):
            bucket = examples.setdefault(str(row["code"]), [])
            if len(bucket) >= 3:
                continue
            trace_id = row.get("trace_id") or ""
            if trace_id not in cache:
                path = traces / f"{trace_id}.jsonl"
                cache[trace_id] = {r["seq"]: r for r in _trace_rows(path)} if path.exists() else {}
            bucket.append(AuditExample.from_row(row, cache[trace_id]))
    return attrs.evolve(section, examples=examples)


def _plot_data(traces: Path) -> Any:
    """Plots from the workload trace (whole lifecycles); else the richest conformance trace."""
    from rmqspec.cli.report_plots import extract_plot_data

    workload = traces / f"{WORKLOAD_TRACE}.jsonl"
    if workload.exists():
        return extract_plot_data(_trace_rows(workload))
    best: list[dict[str, Any]] = []
    for path in sorted(traces.glob("example-*.jsonl")):
        rows = _trace_rows(path)
        if len(rows) > len(best):
            best = rows
    return extract_plot_data(best)


# ---------------------------------------------------------------------------


def _prepare_out(out: Path) -> tuple[Path, Path]:
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} exists and is not a directory")
    traces, work = out / "traces", out / "work"
    for stale in (traces, work, out / "audit"):
        shutil.rmtree(stale, ignore_errors=True)
    traces.mkdir(parents=True)
    work.mkdir(parents=True)
    return traces, work


def run(args: argparse.Namespace) -> int:
    from rmqspec.cli.report_html import render_html, render_text
    from rmqspec.cli.report_model import CheckRun, RunMeta, collect_versions
    from rmqspec.properties.adapters import FactoryError, load_factory
    from rmqspec.properties.wallclock import DEFAULT_TOLERANCE_MS, WALL_BUDGET, WallOptions

    remote = args.broker.startswith("rocketmq://")
    if not remote and (args.crash_cmd or args.restart_cmd or args.tolerance is not None):
        raise UsageError("--crash-cmd, --restart-cmd and --tolerance apply to --broker rocketmq://HOST:PORT")
    if args.tolerance is not None and args.tolerance < 0:
        raise UsageError(f"--tolerance must be ≥ 0 ms, got {args.tolerance}")
    broker_config = _broker_config(args)
    try:
        factory = load_factory(args.broker, crash_cmd=args.crash_cmd, restart_cmd=args.restart_cmd,
                               broker_name=broker_config.broker_name if broker_config is not None else None)
    except FactoryError as exc:
        raise UsageError(str(exc)) from None
    audit_config = _audit_config(args, broker_config)  # read every input before hours of work, not after
    out = Path(args.out)
    traces, work = _prepare_out(out)
    budget = BUDGETS[args.budget]
    wall = None
    if remote:  # every step of a wall-clock example may sleep; the broker runs no client workload of ours
        wall = WallOptions(tolerance_ms=DEFAULT_TOLERANCE_MS if args.tolerance is None else args.tolerance)
        scale = {"quick": 0.5, "default": 1, "thorough": 3}[args.budget]
        budget = (max(1, int(WALL_BUDGET[0] * scale)), WALL_BUDGET[1], 0)
    started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    phases: dict[str, float] = {}

    def timed(name: str, fn: Callable[[], Any]) -> Any:
        t = time.monotonic()
        try:
            return fn()
        finally:
            phases[name] = time.monotonic() - t

    proofs = timed("proofs", lambda: _prove(args))
    _result, conformance = timed("conformance", lambda: _conform(args, factory, traces, budget, broker_config, wall))
    workload = None if remote else timed(
        "workload", lambda: _workload(args, factory, traces, work, budget[2], broker_config))
    summary = timed("audit", lambda: _audit(args, traces, out, audit_config))
    t = time.monotonic()
    audit = _audit_section(summary, out, traces)
    plots = _plot_data(traces)
    examples, steps, _ = budget
    workload_text = (
        f"; workload {workload[0]:,} events over {workload[1] / 60000:.0f} simulated min"
        if workload else ("; workload skipped (a remote broker runs on its own clock)" if remote
                          else "; workload skipped (the factory takes no recorder)")
    )
    phases["report"] = time.monotonic() - t
    meta = RunMeta(
        broker=args.broker,
        profile=args.profile,
        budget=f"{args.budget}: {examples} examples × {steps} steps{workload_text}",
        seeds=(args.seed,) if args.seed is not None else (),
        versions=collect_versions(),
        started_at=started,
        phase_seconds=phases,
    )
    run_ = CheckRun(meta, proofs, conformance, audit, plots)
    (out / "report.html").write_text(render_html(run_), encoding="utf-8")
    summary_json = run_.to_json()
    (out / "summary.json").write_text(json.dumps(summary_json, indent=2) + "\n", encoding="utf-8")
    if args.json:
        print(json.dumps(summary_json, indent=2))
    else:
        print(render_text(run_, color=sys.stdout.isatty()))
        print(f"\nreport: {out / 'report.html'}\nsummary: {out / 'summary.json'}")
    return run_.exit_code
