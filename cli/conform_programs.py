"""``rmqspec conform --replay FILE`` and ``--programs-out DIR``: failures kept as files, and replayed.

A program file is what ``properties/program.render`` prints (``PROGRAM = [Op.of('init', ...), ...]``),
optionally headed by ``#`` comment lines and an ``import`` (Python ignores the one, ``program.parse`` the
other). ``--programs-out DIR`` writes each distinct failure of a run as ``DIR/failure-N.prog`` (N from 1,
in the order the run reports them; a file of an earlier run with the same name is replaced), headed by
the failure's signature, the first lines of its message, the broker, profile and configuration, and the
command line that replays it. ``--replay FILE`` reads such a file, refuses one the machine cannot run
(``InputError``: the file, the line and the reason), and runs it once through
``properties/runner.replay_program``.

Keep short string literals out of this module (messages in f-strings or longer strings): every literal
of 20 characters or fewer enters Hypothesis's constant pool (``properties/constant_pool.py``) and moves
what the seeded runs draw.
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from rmqspec.cli.common import InputError
from rmqspec.properties.conformance import ConformanceBase
from rmqspec.properties.program import Op, ProgramError, check_ops, parse_lines, render
from rmqspec.properties.runner import ConformanceResult, FailureReport
from rmqspec.properties.shrink import signature_of
from rmqspec.properties.wallclock import DEFAULT_TOLERANCE_MS

# a failure's message is kept in its file's header up to this many lines
HEADER_MESSAGE_LINES = 8


def read_program(path: str) -> tuple[list[Op], list[int]]:
    """The ops of the program file ``path`` and the line each is written on; ``InputError`` naming
    the file (and the line) when it cannot be read or the conformance machine cannot run it."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, not a program file") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text (byte offset {exc.start})") from None
    except OSError as exc:
        raise InputError(f"{path}: {exc.strerror or exc}") from None
    try:
        numbered = parse_lines(text)
        check_ops(numbered, ConformanceBase)
    except ProgramError as exc:
        raise InputError(f"{path}:{exc.line}: {exc.reason}" if exc.line else f"{path}: {exc.reason}") from None
    return [op for _, op in numbered], [line for line, _ in numbered]


def replay_argv(args: argparse.Namespace, path: str) -> list[str]:
    """The command line that replays ``path`` against the broker, profile and configuration of ``args``."""
    argv = ["rmqspec", "conform", "--replay", path, "--broker", args.broker, "--profile", args.profile]
    if args.config is not None:
        argv += ["--config", args.config]
    if args.no_lockstep:
        argv.append("--no-lockstep")
    if getattr(args, "without", ""):
        argv += ["--without", args.without]
    if args.broker.startswith("rocketmq://") and args.tolerance != DEFAULT_TOLERANCE_MS:
        argv += ["--tolerance", str(args.tolerance)]
    if args.crash_cmd and args.restart_cmd:
        argv += ["--crash-cmd", args.crash_cmd, "--restart-cmd", args.restart_cmd]
    return argv


def prepare_directory(directory: str) -> Path:
    """``directory``, created if need be (before a run that may take minutes); ``InputError`` when it
    cannot be."""
    out = Path(directory)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"{directory}: cannot create the programs directory: {exc.strerror or exc}") from None
    if not out.is_dir():
        raise InputError(f"{directory}: not a directory")
    return out


def _reports(result: ConformanceResult) -> tuple[FailureReport, ...]:
    if result.passed:
        return ()
    return result.failures or (FailureReport(signature_of(result.failure or ""), result.failure or "",
                                             result.program),)


def program_file_text(report: FailureReport, number: int, total: int, args: argparse.Namespace,
                      path: str, seed: int | None) -> str:
    """A failure's program with its header (``#`` lines), as ``--programs-out`` writes it."""
    message = report.message.strip().splitlines() or [report.signature]
    more = len(message) - HEADER_MESSAGE_LINES
    how = (f"shrunk to {len(report.program)} ops in {report.replays} replays" if report.shrunk
           else f"{len(report.program)} ops, not shrunk")
    header = [
        f"rmqspec conform: failure {number} of {total}, {report.signature} ({how})",
        f"broker {args.broker}; profile {args.profile}; config {args.config or 'none (defaults)'}; "
        f"{'invariants only (--no-lockstep)' if args.no_lockstep else 'lockstep with the model'}"
        + (f"; found with --seed {seed}" if seed is not None else ""),
        f"replay: {shlex.join(replay_argv(args, path))}",
        "",
        *message[:HEADER_MESSAGE_LINES],
        *([f"... ({more} more lines)"] if more > 0 else []),
    ]
    comments = "\n".join(f"# {line}".rstrip() for line in header)
    return f"{comments}\nfrom rmqspec.properties.program import Op\n\n{render(report.program)}\n"


def write_programs(result: ConformanceResult, out: Path, directory: str, args: argparse.Namespace) -> list[str]:
    """Write each distinct failure of ``result`` as ``failure-N.prog`` in ``out`` (``directory`` as the
    user wrote it names the files in their replay lines); returns those names."""
    reports = _reports(result)
    written: list[str] = []
    for number, report in enumerate(reports, 1):
        name = f"failure-{number}.prog"
        path = str(Path(directory) / name)
        text = program_file_text(report, number, len(reports), args, path, result.seed)
        try:
            (out / name).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise InputError(f"{path}: cannot write the program: {exc.strerror or exc}") from None
        written.append(path)
    return written
