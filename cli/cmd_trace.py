"""``rmqspec trace``: generate, import, validate and convert traces (SPEC §8)."""

from __future__ import annotations

import argparse
import sys
import time

from rmqspec.cli.common import EXIT_FINDINGS, EXIT_OK, InputError, UsageError
from rmqspec.cli.progress import Progress
from rmqspec.traces.errors import Rejected, TraceReadError
from rmqspec.traces.generator import GenConfig, generate
from rmqspec.traces.io import FORMATS, convert, open_trace, open_writer, rows_to_table
from rmqspec.traces.msgtrace import read_msgtrace
from rmqspec.traces.scenarios import VIOLATION_CODES, parse_codes

NAME = "trace"
HELP = "generate, import, validate and convert event traces"

_SHOW = 20


def _positive_int(text: str) -> int:
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be positive")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="trace_command", metavar="SUBCOMMAND", parser_class=type(parser))

    gen = sub.add_parser(
        "gen",
        help="generate a realistic trace (optionally with injected violations)",
        description=(
            "Generate a trace of about N events by simulating RocketMQ 4.9 semantics. OUT ending "
            "in .jsonl → JSONL, .parquet → one Parquet file, anything else → a directory of "
            "part-NNNNN.parquet files. With --inject the ground truth is written to "
            "OUT.truth.json (OUT/_truth.json for a directory). Violation codes: "
            + ", ".join(VIOLATION_CODES)
        ),
    )
    gen.add_argument("--events", type=_positive_int, default=1_000_000, help="about this many events")
    gen.add_argument("--out", required=True, help="output path")
    gen.add_argument("--seed", type=int, default=0)
    gen.add_argument("--format", choices=FORMATS, help="force the output format")
    gen.add_argument("--inject", default="", help="CODE[,CODE…] or 'all': violations to inject")
    gen.add_argument("--inject-count", type=_positive_int, default=1, help="instances per code")
    gen.add_argument("--crashes", type=int, default=0, help="broker crashes (kill) to simulate")
    gen.add_argument("--part-rows", type=_positive_int, default=1_000_000, help="rows per Parquet part")
    gen.add_argument("--producers", type=_positive_int, default=8)
    gen.add_argument("--topics", type=_positive_int, default=6)
    gen.add_argument("--queues", type=_positive_int, default=4)
    gen.add_argument("--groups", type=_positive_int, default=4)
    gen.add_argument("--quiet", action="store_true", help="no progress on stderr")
    gen.set_defaults(func=run_gen)

    imp = sub.add_parser(
        "import",
        help="convert RocketMQ message-trace records into a trace",
        description=(
            "Convert RocketMQ 4.9 message-trace records (bodies of RMQ_SYS_TRACE_TOPIC messages) "
            "into the trace schema. FILE holds one trace-message body per line: either the raw "
            "body (records ended by char 2, fields separated by char 1) or a JSON object "
            '{"body": "..."}; both may be mixed. Pub → send (Trans_Msg_Half → txn_half), '
            "SubBefore → deliver, SubAfter → consume, EndTransaction → txn_end."
        ),
    )
    imp.add_argument("--from", dest="source", required=True, choices=["rocketmq-msgtrace"])
    imp.add_argument("file", metavar="FILE")
    imp.add_argument("--out", required=True)
    imp.add_argument("--format", choices=FORMATS)
    imp.set_defaults(func=run_import)

    val = sub.add_parser(
        "validate",
        help="report rows with missing fields, wrong types or unknown events",
        description="Exit 0 if every row is valid, 1 if some rows are rejected, 2 if unreadable.",
    )
    val.add_argument("path", metavar="PATH")
    val.set_defaults(func=run_validate)

    conv = sub.add_parser(
        "convert",
        help="convert between JSONL and Parquet (rejected rows are reported and skipped)",
    )
    conv.add_argument("src", metavar="IN")
    conv.add_argument("dst", metavar="OUT")
    conv.add_argument("--format", choices=FORMATS)
    conv.add_argument("--part-rows", type=_positive_int, default=1_000_000)
    conv.set_defaults(func=run_convert)


def _report(rejected: list[Rejected], what: str = "rejected") -> None:
    for r in rejected[:_SHOW]:
        print(f"{what}: {r}", file=sys.stderr)
    if len(rejected) > _SHOW:
        print(f"… and {len(rejected) - _SHOW} more {what} rows", file=sys.stderr)


def run_gen(args: argparse.Namespace) -> int:
    try:
        codes = parse_codes(args.inject) if args.inject else ()
        cfg = GenConfig(
            events=args.events,
            seed=args.seed,
            inject=codes,
            inject_count=args.inject_count,
            crashes=max(0, args.crashes),
            producers=args.producers,
            topics=args.topics,
            queues=args.queues,
            groups=args.groups,
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    progress = Progress("trace gen", args.events, unit="ev", enabled=not args.quiet)
    start = time.monotonic()
    try:
        result = generate(
            args.out, cfg, format=args.format, part_rows=args.part_rows, on_progress=progress.update
        )
    except OSError as exc:
        raise InputError(f"cannot write {args.out}: {exc.strerror or exc}") from exc
    progress.update(result.events)
    progress.close()
    elapsed = max(time.monotonic() - start, 1e-9)
    print(
        f"wrote {result.events} events to {args.out} ({len(result.parts)} file(s)) in "
        f"{elapsed:.1f}s, {result.events / elapsed:,.0f} events/s; simulated "
        f"{result.sim_ms / 1000:,.0f}s"
    )
    if result.truth_path:
        print(f"ground truth: {len(result.truth)} violation(s) in {result.truth_path}")
    return EXIT_OK


def run_import(args: argparse.Namespace) -> int:
    try:
        result = read_msgtrace(args.file)
    except TraceReadError as exc:
        raise InputError(str(exc)) from exc
    try:
        with open_writer(args.out, args.format) as w:
            w.write_batch(rows_to_table(result.rows))
    except OSError as exc:
        raise InputError(f"cannot write {args.out}: {exc.strerror or exc}") from exc
    _report(result.skipped, "skipped")
    _report(result.rejected)
    print(
        f"imported {len(result.rows)} events from {result.records} records in {result.bodies} "
        f"bodies to {args.out}; {len(result.skipped)} skipped, {len(result.rejected)} rejected; "
        "queue ids, offsets and broker-side events are not in message traces (left null)"
    )
    return EXIT_FINDINGS if result.rejected else EXIT_OK


def run_validate(args: argparse.Namespace) -> int:
    try:
        source = open_trace(args.path)
        rows = sum(b.num_rows for b in source.iter_batches())
    except TraceReadError as exc:
        raise InputError(str(exc)) from exc
    _report(source.rejected)
    print(
        f"{args.path}: {rows} valid rows, {len(source.rejected)} rejected "
        f"({source.format}, {len(source.files)} file(s))"
    )
    return EXIT_FINDINGS if source.rejected else EXIT_OK


def run_convert(args: argparse.Namespace) -> int:
    try:
        n, rejected = convert(args.src, args.dst, args.format, part_rows=args.part_rows)
    except TraceReadError as exc:
        raise InputError(str(exc)) from exc
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    except OSError as exc:
        raise InputError(f"cannot write {args.dst}: {exc.strerror or exc}") from exc
    _report(rejected)
    print(f"converted {n} rows from {args.src} to {args.dst}; {len(rejected)} rejected")
    return EXIT_FINDINGS if rejected else EXIT_OK
