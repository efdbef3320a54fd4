"""``rmqspec conform``: run the conformance state machine against a broker factory."""

from __future__ import annotations

import argparse

from rmqspec.cli.common import EXIT_FINDINGS, EXIT_OK, UsageError
from rmqspec.properties.adapters import FactoryError, builtin_names, load_factory
from rmqspec.properties.conformance import PROFILES
from rmqspec.properties.runner import budget_settings, check_conformance

NAME = "conform"
HELP = "check a broker (package.module:factory) against the RocketMQ 4.9 semantics"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--broker", required=True, metavar="MODULE:FACTORY",
                        help=f"factory (clock, config, workdir) -> Broker, or rocketmq://HOST:PORT (the name "
                             f"server of a running RocketMQ 4.9 broker); built in: {', '.join(builtin_names())}")
    parser.add_argument("--crash-cmd", default=None, metavar="SHELL",
                        help="rocketmq:// only: shell command that kills the broker (e.g. kill -9 PID); with "
                             "--restart-cmd it gives the remote broker the kill-crash capability")
    parser.add_argument("--restart-cmd", default=None, metavar="SHELL",
                        help="rocketmq:// only: shell command that starts the killed broker again on its store")
    parser.add_argument("--profile", default="rocketmq-4.9", choices=sorted(PROFILES),
                        help="rocketmq-4.9 (faithful) or strict (observations are violations)")
    parser.add_argument("--examples", type=int, default=None, help="examples (default: profile budget)")
    parser.add_argument("--steps", type=int, default=None, help="steps per example")
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: derandomized)")
    parser.add_argument("--no-lockstep", action="store_true",
                        help="judge by the invariants only (no model beside the broker)")
    parser.add_argument("--trace-out", default=None, metavar="DIR",
                        help="write each example's SPEC §8 trace as DIR/example-NNNN.jsonl")


def run(args: argparse.Namespace) -> int:
    for name in ("examples", "steps"):
        value = getattr(args, name)
        if value is not None and value <= 0:
            raise UsageError(f"--{name} must be positive, got {value}")
    try:
        factory = load_factory(args.broker, crash_cmd=args.crash_cmd, restart_cmd=args.restart_cmd)
    except FactoryError as exc:
        raise UsageError(str(exc)) from None
    result = check_conformance(
        factory,
        lockstep=not args.no_lockstep,
        profile=args.profile,
        settings=budget_settings(args.examples, args.steps, seed=args.seed),
        seed=args.seed,
        trace_dir=args.trace_out,
    )
    print(result.render())
    return EXIT_OK if result.passed else EXIT_FINDINGS
