"""``rmqspec conform``: run the conformance state machine against a broker factory.

``--replay FILE`` runs one program instead of a campaign, ``--programs-out DIR`` keeps a campaign's
failures as program files (``cli/conform_programs.py``)."""

from __future__ import annotations

import argparse
import sys

from rmqspec.cli.common import EXIT_FINDINGS, EXIT_OK, InputError, UsageError
from rmqspec.cli.conform_programs import prepare_directory, read_program, write_programs
from rmqspec.model.config import default_config
from rmqspec.model.versions import VERSIONS
from rmqspec.properties.adapters import FactoryError, builtin_names, load_factory, without_capabilities
from rmqspec.properties.brokerconf import ConfigError, broker_config_from_file
from rmqspec.properties.conformance import PROFILES
from rmqspec.properties.runner import budget_settings, check_conformance, replay_program
from rmqspec.properties.shrink import DEFAULT_BUDGET
from rmqspec.properties.wallclock import DEFAULT_TOLERANCE_MS, WALL_BUDGET, WallOptions, untested_timing_note

NAME = "conform"
HELP = "check a broker (package.module:factory) against the RocketMQ 4.9 semantics"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--broker", required=True, metavar="MODULE:FACTORY|rocketmq://HOST:PORT",
                        help=f"factory (clock, config, workdir) -> Broker, or a running broker's name "
                             f"server address (rocketmq://127.0.0.1:9876: wall-clock mode); built in: "
                             f"{', '.join(builtin_names())}")
    parser.add_argument("--config", default=None, metavar="broker.conf",
                        help="the broker's configuration (Java properties); the model follows it "
                             "(delay levels, transaction timeout/interval/max, lock lifetime, flush)")
    parser.add_argument("--tolerance", type=int, default=DEFAULT_TOLERANCE_MS, metavar="MS",
                        help=f"rocketmq:// (wall clock): how late a timed action may be (default "
                             f"{DEFAULT_TOLERANCE_MS} ms); default budget there {WALL_BUDGET[0]} examples × "
                             f"{WALL_BUDGET[1]} steps")
    parser.add_argument("--crash-cmd", default=None, metavar="SHELL",
                        help="rocketmq://: a shell command that kills the broker (enables kill crashes)")
    parser.add_argument("--restart-cmd", default=None, metavar="SHELL",
                        help="rocketmq://: a shell command that restarts it on the same store")
    parser.add_argument("--profile", default="rocketmq-4.9", choices=sorted(PROFILES),
                        help="the RocketMQ version to hold the broker to (model/versions.py): "
                             + ", ".join(f"{v.name} ({v.releases})" for v in VERSIONS.values())
                             + "; default rocketmq-4.9; or strict (4.9, observations are violations)")
    parser.add_argument("--examples", type=int, default=None, help="examples (default: profile budget)")
    parser.add_argument("--steps", type=int, default=None, help="steps per example")
    parser.add_argument("--seed", type=int, default=None,
                        help="random seed (default: derandomized); the same seed gives the same result")
    parser.add_argument("--shrink-budget", type=int, default=None, metavar="REPLAYS",
                        help=f"replays spent shrinking each distinct failure (default {DEFAULT_BUDGET}; "
                             "0: report the failing program as found)")
    parser.add_argument("--without", default="", metavar="CAPABILITY[,CAPABILITY]",
                        help="judge the broker as if it did not declare these capabilities (model/protocol.py "
                             "Capability values: e.g. pop leaves a 5.x broker's pop consumption out of the run)")
    parser.add_argument("--no-lockstep", action="store_true",
                        help="judge by the invariants only (no model beside the broker)")
    parser.add_argument("--trace-out", default=None, metavar="DIR",
                        help="write each example's SPEC §8 trace as DIR/example-NNNN.jsonl")
    parser.add_argument("--replay", default=None, metavar="FILE",
                        help="run the program in FILE once (PROGRAM = [Op.of(...), ...] as a failure prints "
                             "it, or a file --programs-out wrote) instead of a campaign; exit 0 it passes, "
                             "1 it fails; not with --examples, --steps, --seed, --shrink-budget")
    parser.add_argument("--programs-out", default=None, metavar="DIR",
                        help="write each distinct failure's (shrunk) program as DIR/failure-N.prog, headed by "
                             "its message and the command line that replays it")


def run(args: argparse.Namespace) -> int:
    if args.replay is not None:
        given = [flag for flag, value in (("--examples", args.examples), ("--steps", args.steps),
                                          ("--seed", args.seed), ("--shrink-budget", args.shrink_budget),
                                          ("--programs-out", args.programs_out)) if value is not None]
        if given:
            raise UsageError(f"--replay runs one program; it takes no {', '.join(given)}")
    for name in ("examples", "steps"):
        value = getattr(args, name)
        if value is not None and value <= 0:
            raise UsageError(f"--{name} must be positive, got {value}")
    shrink_budget = DEFAULT_BUDGET if args.shrink_budget is None else args.shrink_budget
    if shrink_budget < 0:
        raise UsageError(f"--shrink-budget must be ≥ 0, got {shrink_budget}")
    remote = args.broker.startswith("rocketmq://")
    if (args.crash_cmd or args.restart_cmd) and not (remote and args.crash_cmd and args.restart_cmd):
        raise UsageError("--crash-cmd and --restart-cmd go together, with --broker rocketmq://HOST:PORT")
    if args.tolerance < 0:
        raise UsageError(f"--tolerance must be ≥ 0 ms, got {args.tolerance}")
    # the program is read before the broker is reached: a bad file costs no connection
    program, lines = read_program(args.replay) if args.replay is not None else ([], [])
    out = prepare_directory(args.programs_out) if args.programs_out is not None else None
    config = None
    if args.config is not None:
        try:
            config = broker_config_from_file(args.config, PROFILES[args.profile].version)
        except ConfigError as exc:
            raise InputError(str(exc)) from None
        except OSError as exc:
            raise InputError(f"{args.config}: {exc.strerror or exc}") from None
    # a remote broker runs on its own clock: wall-clock mode (default budget WALL_BUDGET)
    wall = WallOptions(tolerance_ms=args.tolerance) if remote else None
    note = untested_timing_note(config or default_config(PROFILES[args.profile].version)) if remote else None
    if note is not None:
        print(f"rmqspec conform: {note}", file=sys.stderr)
    try:
        factory = load_factory(args.broker, crash_cmd=args.crash_cmd, restart_cmd=args.restart_cmd,
                               broker_name=config.broker_name if config is not None else None)
        factory = without_capabilities(factory, [n for n in args.without.split(",") if n.strip()])
    except FactoryError as exc:
        raise UsageError(str(exc)) from None
    if args.replay is not None:
        replayed = replay_program(program, factory, lockstep=not args.no_lockstep, profile=args.profile,
                                  config=config, wall=wall, trace_dir=args.trace_out)
        if not replayed.passed and not replayed.outcome.genuine:
            at = replayed.outcome.failed_at
            where = f"{args.replay}:{lines[at - 1]}: op {at} ({program[at - 1].rule})" if at is not None \
                else f"{args.replay}: the teardown after the last op"
            raise InputError(f"{where} failed inside the conformance machine, not in the broker "
                             f"(the program does not fit the machine): {replayed.outcome.message.split(': ', 1)[-1]}")
        print(replayed.render(lines))
        return EXIT_OK if replayed.passed else EXIT_FINDINGS
    result = check_conformance(
        factory,
        lockstep=not args.no_lockstep,
        profile=args.profile,
        settings=budget_settings(args.examples, args.steps, seed=args.seed, wall=wall is not None,
                                 shrink=shrink_budget > 0),
        seed=args.seed,
        shrink_budget=shrink_budget,
        trace_dir=args.trace_out,
        config=config,
        wall=wall,
    )
    print(result.render())
    if out is not None and args.programs_out is not None:
        written = write_programs(result, out, args.programs_out, args)
        if written:
            print(f"\nprograms: {', '.join(written)} (rmqspec conform --replay FILE --broker ... replays one)")
    return EXIT_OK if result.passed else EXIT_FINDINGS
