"""The ``rmqspec`` command: discovers sub-commands from ``cli/cmd_*.py``.

A command module defines ``NAME``, ``HELP``, ``add_arguments(parser)`` and
``run(args) -> int`` (or sets ``func`` on its own sub-sub-parsers with
``parser.set_defaults(func=...)``). ``main`` turns ``UsageError`` /
``InputError`` into one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence

from rmqspec.cli.common import EXIT_USAGE, InputError, UsageError


def _command_modules() -> list:
    import rmqspec.cli as pkg

    names = sorted(m.name for m in pkgutil.iter_modules(pkg.__path__) if m.name.startswith("cmd_"))
    return [importlib.import_module(f"rmqspec.cli.{name}") for name in names]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # exit 2 with one line, as argparse does, plus a hint
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="rmqspec",
        description="An executable, formally tested reference model of RocketMQ's message semantics.",
        epilog="Exit codes: 0 ok, 1 violations or failed proofs found, 2 usage or unreadable input.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for module in _command_modules():
        p = sub.add_parser(module.NAME, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
        if hasattr(module, "run"):
            p.set_defaults(func=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return int(func(args))
    except (UsageError, InputError) as exc:
        print(f"rmqspec {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("rmqspec: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
