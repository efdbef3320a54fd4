"""``rmqspec prove``: z3 theorems over the lifecycle tables, and configuration verification.

Proves every theorem of ``rmqspec.properties.theorems`` (inductive
invariants, reachability witnesses, table well-formedness) and, with
``--config FILE``, verifies the concrete guarantees of a broker/client
properties file (``rmqspec.properties.configcheck``), printing a numbered
counterexample timeline for each that fails.

Output: a table (name, code, status, time) per part, details and
counterexamples below it; ``--json`` prints a list of result objects with the
same facts. Exit 0 when everything is proved, 1 when a theorem or check
FAILED (or stayed UNKNOWN), 2 for usage errors or an unreadable / malformed
configuration file.

``--profile`` (a RocketMQ version profile, ``model/versions.py``) is the version whose
defaults fill the keys ``--config`` leaves out (5.1+: transactionCheckInterval 30 s); the
output names it (the table's heading, ``profile`` in every ``--json`` result). The theorems
are stated for the 4.9 lifecycle tables whatever the profile: they do not model 5.1.0+'s
batched op messages, under which a check may still come after an END
(TxnNoCheckAfterResolutionProperty holds only once the op is written).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from rmqspec.cli.common import EXIT_FINDINGS, EXIT_OK, InputError, UsageError
from rmqspec.cli.progress import Progress
from rmqspec.model.versions import DEFAULT_VERSION, VERSIONS
from rmqspec.properties.brokerconf import BrokerConf, ConfigError, for_version, load_broker_conf
from rmqspec.properties.configcheck import CHECKS, verify_config
from rmqspec.properties.prover import FAILED, UNKNOWN, ProofResult, prove_all, theorems_for
from rmqspec.properties.theorems_pop import POP_THEOREMS
from rmqspec.properties.theorems_timer import TIMER_THEOREMS

NAME = "prove"
HELP = "prove the z3 theorems over the lifecycle tables; verify a broker.conf with --config"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="a Java properties file (broker.conf) whose concrete guarantees to verify",
    )
    parser.add_argument(
        "--profile",
        choices=sorted(VERSIONS),
        default=DEFAULT_VERSION,
        help=f"the RocketMQ version whose defaults fill the keys --config leaves out (default {DEFAULT_VERSION}; "
        "5.1+: transactionCheckInterval 30 s); the theorems are stated for the 4.9 lifecycle (op messages "
        "written at the END, not 5.1.0+'s batches)",
    )
    parser.add_argument("--json", action="store_true", help="print a JSON list of results")
    parser.add_argument(
        "--theorem",
        action="append",
        metavar="NAME",
        help="prove only this theorem (repeatable; default all)",
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="show statements and witnesses of every theorem",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress line on stderr")


def _table(results: Sequence[ProofResult]) -> list[str]:
    width = max([len(r.name) for r in results] + [4])
    lines = [f"  {'name':<{width}}  {'code':<20}  {'status':<8}  {'time':>8}"]
    for r in results:
        code = r.code or "-"
        lines.append(f"  {r.name:<{width}}  {code:<20}  {r.status:<8}  {r.seconds:>7.3f}s")
    return lines


def _details(results: Sequence[ProofResult], verbose: bool, always: bool) -> list[str]:
    lines: list[str] = []
    for r in results:
        show = always or verbose or r.status in (FAILED, UNKNOWN)
        if not show:
            continue
        lines.append("")
        lines.append(f"{r.name} [{r.status}]: {r.statement}")
        if r.detail:
            lines.append(f"  {r.detail}")
        if r.counterexample is not None:
            lines.extend("  " + line for line in r.counterexample.render())
        if verbose and r.witness is not None:
            lines.extend("  " + line for line in r.witness.render())
    return lines


def _summary(results: Sequence[ProofResult], elapsed: float) -> str:
    counts: dict[str, int] = {}
    for r in results:
        counts[r.status] = counts.get(r.status, 0) + 1
    parts = ", ".join(f"{n} {status.lower()}" for status, n in sorted(counts.items()))
    return f"{len(results)} results: {parts} in {elapsed:.2f} s"


def load_conf(path: str | Path, profile: str = DEFAULT_VERSION) -> BrokerConf:
    """``path`` read as a broker.conf of RocketMQ ``profile`` (``brokerconf.for_version``)."""
    return for_version(load_broker_conf(path), profile)


def run(args: argparse.Namespace) -> int:
    version = VERSIONS[args.profile]
    theorems = theorems_for(version)
    by_name = {t.name: t for t in theorems}
    if args.theorem:
        unknown = [n for n in args.theorem if n not in by_name]
        if unknown:
            timer = [n for n in args.theorem if n in {t.name for t in TIMER_THEOREMS}]
            pop = [n for n in args.theorem if n in {t.name for t in POP_THEOREMS}]
            hints = [f"{', '.join(names)}: not a theorem of {args.profile}, which has no {what}"
                     for names, what in ((timer, "timer messages"), (pop, "pop consumption")) if names]
            hint = f" ({'; '.join(hints)})" if hints else ""
            raise UsageError(f"unknown theorem {', '.join(unknown)}{hint}; known: {', '.join(by_name)}")
        theorems = tuple(by_name[n] for n in args.theorem)
    conf = None
    if args.config is not None:
        try:
            conf = load_conf(args.config, args.profile)
        except ConfigError as exc:
            raise InputError(str(exc)) from None

    show_progress = not args.quiet and not args.json
    start = time.perf_counter()
    progress = Progress("proving", len(theorems), unit="theorems", enabled=show_progress)
    results = prove_all(theorems, on_progress=progress.update)
    theorem_seconds = time.perf_counter() - start
    progress.close()
    config_results: list[ProofResult] = []
    if conf is not None:
        cprog = Progress("verifying", len(CHECKS), unit="checks", enabled=show_progress)
        config_results = verify_config(conf, on_progress=cprog.update)
        cprog.close()
    elapsed = time.perf_counter() - start
    everything = results + config_results

    if args.json:
        json.dump([{**r.to_dict(), "profile": args.profile} for r in everything], sys.stdout, indent=2,
                  ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        out = [f"profile {version.name} (RocketMQ {version.releases})"
               + ("; the theorems are stated for the 4.9 lifecycle: ops written at the END, not in batches"
                  if version.op_batch else ""),
               "theorems over model/lifecycle.py (message, lock, transaction)"
               + (" and model/timer.py" if version.timer_wheel else "") + ", all parameters:"]
        out += _table(results)
        out.append(f"  {len(results)} theorems in {theorem_seconds:.2f} s")
        out += _details(results, args.verbose, always=False)
        if conf is not None:
            out.append("")
            out.append(f"configuration {conf.path}:")
            out += _table(config_results)
            out += _details(config_results, args.verbose, always=True)
        out.append("")
        out.append(_summary(everything, elapsed))
        print("\n".join(out))
    failed = any(r.status in (FAILED, UNKNOWN) for r in everything)
    return EXIT_FINDINGS if failed else EXIT_OK
