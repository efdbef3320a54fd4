"""``rmqspec store verify|dump DIR`` and ``rmqspec store crashtest``.

- ``verify DIR [--json]``: exit 0 when clean, 1 with findings, 2 when DIR is
  not a store or cannot be read. ``--json`` prints
  ``{"ok", "findings": [{"code", "file", "offset", "reason"}], "stats"}``.
- ``dump DIR [--topic T] [--queue N] [--json]``: one record per line (JSON
  lines with ``--json``); damage met on the way goes to stderr and makes the
  exit code 1.

- ``crashtest [--workload NAME ...|--ops N] [--states N] [--seed S] [--json]``:
  record the workloads through ``MmapBroker``, explore ``N`` crash states
  (``impl/crashtest.py``) and print states tried, failures with the minimal
  failing state (which writes persisted) and the time; exit 1 on failures.
  ``--materialize STATE_ID DIR`` writes one state (an id from a report) to
  ``DIR`` for replay (``store verify``, or the real RocketMQ store);
  ``--recover`` then recovers it in place and prints what our store kept.

Progress goes to stderr for stores larger than 64 MiB and for crashtest.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

from rmqspec.cli.common import EXIT_FINDINGS, EXIT_OK, InputError, UsageError
from rmqspec.cli.progress import Progress
from rmqspec.impl import crashtest, crashwork
from rmqspec.impl.crashfs import ModelError
from rmqspec.impl.dump import DumpRow, dump_store
from rmqspec.impl.reader import Finding, NotAStore
from rmqspec.impl.verify import verify_store
from rmqspec.model.config import parse_delay_levels

NAME = "store"
HELP = "verify or dump a RocketMQ 4.9 store directory; explore crash states of the mmap store"
DEFAULT_CRASH_STATES = 2000
PROGRESS_THRESHOLD = 64 * 1024 * 1024


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(func=_no_action)
    sub = parser.add_subparsers(dest="store_command", metavar="ACTION", parser_class=type(parser))
    v = sub.add_parser("verify", help="check every record, consume-queue unit and config file")
    v.add_argument("dir", metavar="DIR", help="store root (holds commitlog/)")
    v.add_argument("--json", action="store_true", help="print one JSON document")
    v.add_argument(
        "--delay-levels",
        metavar="LEVELS",
        default=None,
        help="messageDelayLevel used for SCHEDULE_TOPIC_XXXX tagsCodes (default RocketMQ's)",
    )
    v.set_defaults(func=run_verify)
    d = sub.add_parser("dump", help="print every record in commitlog order")
    d.add_argument("dir", metavar="DIR", help="store root (holds commitlog/)")
    d.add_argument("--topic", default=None, help="only records of this topic")
    d.add_argument("--queue", type=int, default=None, metavar="N", help="only this queue id")
    d.add_argument("--json", action="store_true", help="one JSON object per line")
    d.set_defaults(func=run_dump)
    c = sub.add_parser(
        "crashtest",
        help="explore the crash states of recorded workloads and check what recovery keeps",
        description="Record workloads through MmapBroker, enumerate or sample the disk states a power cut "
        "can leave (torn 512-byte sectors, unflushed 4 KiB pages, renames done or not) and check that "
        "recovery keeps every promise. Exit 0 when every state passes, 1 with failures.",
    )
    which = c.add_mutually_exclusive_group()
    which.add_argument(
        "--workload",
        action="append",
        metavar="NAME",
        help=f"a recorded workload (repeatable; default all): {', '.join(crashwork.WORKLOADS)}",
    )
    which.add_argument("--ops", type=int, metavar="N", help="one random workload of N operations (uses --seed)")
    c.add_argument("--states", type=int, default=DEFAULT_CRASH_STATES, metavar="N", help="crash states to check")
    c.add_argument("--seed", type=int, default=0, metavar="S", help="seed of the sampling (and of --ops)")
    c.add_argument("--json", action="store_true", help="print one JSON document")
    c.add_argument("--workdir", metavar="DIR", help="where states are written (default: a tmpfs directory)")
    c.add_argument(
        "--materialize",
        nargs=2,
        metavar=("STATE_ID", "DIR"),
        help="write the crash state STATE_ID (as a report names it) into the empty or new directory DIR",
    )
    c.add_argument(
        "--recover",
        action="store_true",
        help="with --materialize: then recover DIR in place with our store and print what it kept",
    )
    c.add_argument("--list", action="store_true", help="list the workloads and exit")
    c.set_defaults(func=run_crashtest)


class _LazyProgress:
    """Starts a ``Progress`` once the total is known to be large."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.progress: Progress | None = None

    def __call__(self, done: int, total: int) -> None:
        if self.progress is None and total >= PROGRESS_THRESHOLD:
            self.progress = Progress(self.label, total, unit="B")
        if self.progress is not None:
            self.progress.update(done, total)

    def close(self) -> None:
        if self.progress is not None:
            self.progress.close()


def _no_action(_args: argparse.Namespace) -> int:
    raise UsageError("choose an action: rmqspec store verify DIR | rmqspec store dump DIR")


def _guard(action: Callable[[], int]) -> int:
    try:
        return action()
    except BrokenPipeError:
        # The reader went away (``| head``): stop quietly, as Unix tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except NotAStore as exc:
        raise InputError(str(exc)) from exc
    except OSError as exc:
        raise InputError(f"{exc.filename or ''}: {exc.strerror or exc}") from exc


def run_verify(args: argparse.Namespace) -> int:
    levels = None
    if args.delay_levels is not None:
        try:
            levels = parse_delay_levels(args.delay_levels)
        except ValueError as exc:
            raise UsageError(str(exc)) from exc

    def action() -> int:
        progress = _LazyProgress("verify")
        try:
            kwargs = {} if levels is None else {"delay_levels_ms": levels}
            report = verify_store(args.dir, on_progress=progress, **kwargs)
        finally:
            progress.close()
        if args.json:
            print(json.dumps(report.to_dict(), indent=2))
        else:
            for finding in report.findings:
                print(finding.line())
            s = report.stats
            verdict = "OK" if report.ok else f"{len(report.findings)} finding(s)"
            print(
                f"store verify {args.dir}: {verdict}; {s['records']} records in "
                f"{s['commitlog_files']} commitlog files [{s['commitlog_min_offset']}, "
                f"{s['commitlog_max_offset']}), {s['cq_units']} units in "
                f"{s['consume_queues']} consume queues" + (", abort file present" if s["abort"] else "")
            )
        return EXIT_OK if report.ok else EXIT_FINDINGS

    return _guard(action)


def run_dump(args: argparse.Namespace) -> int:
    def action() -> int:
        progress = _LazyProgress("dump")
        findings = 0
        rows = 0
        try:
            for item in dump_store(args.dir, topic=args.topic, queue_id=args.queue, on_progress=progress):
                if isinstance(item, DumpRow):
                    rows += 1
                    print(json.dumps(item.to_dict()) if args.json else item.line())
                elif isinstance(item, Finding):
                    findings += 1
                    print(f"store dump: {item.line()}", file=sys.stderr)
        finally:
            progress.close()
        if findings:
            print(f"store dump: {rows} records, {findings} problem(s)", file=sys.stderr)
        return EXIT_FINDINGS if findings else EXIT_OK

    return _guard(action)


def run_crashtest(args: argparse.Namespace) -> int:
    if args.list:
        for name, w in crashwork.WORKLOADS.items():
            print(f"{name:<16} {w.config.flush:<5} {w.about}")
        print(f"{'random-OPS-SEED':<16} {'':<5} OPS random operations (--ops OPS --seed SEED)")
        return EXIT_OK
    if args.materialize:
        return _materialize(*args.materialize, recover=args.recover)
    if args.recover:
        raise UsageError("--recover goes with --materialize STATE_ID DIR")
    if args.states <= 0:
        raise UsageError(f"--states must be positive, got {args.states}")
    if args.ops is not None:
        if args.ops <= 0:
            raise UsageError(f"--ops must be positive, got {args.ops}")
        workloads = [crashwork.random_workload(args.ops, args.seed)]
    else:
        try:
            workloads = crashtest.workloads_named(args.workload or list(crashwork.WORKLOADS))
        except KeyError as exc:
            raise UsageError(str(exc.args[0])) from exc
    workdir = None
    if args.workdir is not None:
        workdir = Path(args.workdir)
        if workdir.exists() and any(workdir.iterdir()):
            raise UsageError(f"--workdir {workdir}: not empty")
    progress = Progress("crashtest", args.states, unit="states")
    try:
        report = crashtest.explore(
            workloads, states=args.states, seed=args.seed, workdir=workdir, on_progress=progress.update
        )
    except ModelError as exc:
        raise InputError(f"the recorded effects are inconsistent: {exc}") from exc
    finally:
        progress.close()
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print("\n".join(report.lines()))
    return EXIT_OK if report.ok else EXIT_FINDINGS


def _materialize(state_id: str, directory: str, *, recover: bool) -> int:
    target = Path(directory)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise UsageError(f"{target}: not an empty directory")
    try:
        _state, lines = crashtest.materialize_state(state_id, target, recover=recover)
    except (KeyError, crashtest.StateIdError) as exc:
        raise UsageError(str(exc.args[0])) from exc
    print(f"crash state {state_id} written to {target}")
    for line in lines:
        print(f"  {line}")
    return EXIT_OK
