"""``rmqspec audit PATH... --out DIR``: the Spark audit of traces (SPEC §8.1).

Exit 0 when no violation is found, 1 when some are, 2 when an input or the
configuration cannot be read (one line on stderr, never a traceback).
"""

from __future__ import annotations

import argparse

from rmqspec.cli.common import InputError, UsageError

NAME = "audit"
HELP = "audit traces for SPEC §8.1 violations with Spark (local[*] or --master)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from rmqspec.spark.args import add_arguments as job_arguments

    job_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from rmqspec.spark.config import ConfigError
    from rmqspec.spark.errors import StateError
    from rmqspec.spark.job import AuditUsageError
    from rmqspec.spark.job import run as run_job
    from rmqspec.traces.errors import TraceReadError

    try:
        return run_job(args)
    except (TraceReadError, ConfigError, StateError) as exc:
        raise InputError(str(exc)) from None
    except AuditUsageError as exc:
        raise UsageError(str(exc)) from None
