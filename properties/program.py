"""Replayable programs: the conformance machine's rule calls as data.

A program is the list of ``Op(rule, args)`` the machine executed, in order —
the same calls Hypothesis prints, as plain data. ``replay(program, factory)``
builds a fresh machine for ``factory`` and runs the ops through it (the
model *and* the candidate in lockstep), checking the ``always`` invariants
after every op and draining at the end, exactly as the state machine did;
a counterexample therefore reproduces outside Hypothesis. ``render`` prints a
program as Python source that ``parse`` reads back (``#`` comment lines and other
statements around the list are ignored: ``rmqspec conform --programs-out`` heads
each file with comments). ``parse_lines`` also says where each op was written and
``check_ops`` refuses, with that line, an op the machine cannot call: both raise
``ProgramError``, a bad program being the caller's mistake, not a broker's.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable, Sequence
from typing import Any

import attrs


@attrs.frozen
class Op:
    rule: str
    args: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def of(cls, rule: str, **args: Any) -> Op:
        return cls(rule, tuple(sorted(args.items())))

    def kwargs(self) -> dict[str, Any]:
        return dict(self.args)

    def render(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self.args)
        return f"Op.of({self.rule!r}{', ' if inner else ''}{inner})"


def render(program: Sequence[Op]) -> str:
    """Python source of the program (``PROGRAM = [...]``)."""
    lines = ["PROGRAM = ["]
    lines += [f"    {op.render()}," for op in program]
    lines.append("]")
    return "\n".join(lines)


class ProgramError(ValueError):
    """A program text that is not one: ``line`` (1-based; 0 when the whole text is meant) and why."""

    def __init__(self, line: int, reason: str) -> None:
        super().__init__(f"line {line}: {reason}" if line else reason)
        self.line = line
        self.reason = reason


def parse_lines(text: str) -> list[tuple[int, Op]]:
    """The ops of a program text with the line each starts on, in the order written.

    An op is a call ``<anything>.of('rule', name=literal, ...)``; raises ``ProgramError`` for text
    Python cannot parse and for an op whose rule or arguments are not literals."""
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        raise ProgramError(exc.lineno or 0, f"not Python source ({exc.msg})") from None
    except ValueError as exc:  # a NUL byte (Python 3.11)
        raise ProgramError(0, f"not Python source ({exc})") from None
    calls = [node for node in ast.walk(tree)
             if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "of"]
    ops: list[tuple[int, Op]] = []
    for node in sorted(calls, key=lambda n: (n.lineno, n.col_offset)):
        ops.append((node.lineno, _op_of(node)))
    return ops


def _op_of(node: ast.Call) -> Op:
    where = node.lineno
    if len(node.args) != 1 or any(kw.arg is None for kw in node.keywords):
        raise ProgramError(where, "an op is Op.of('rule', name=value, ...): one rule name, then "
                                  "arguments by name")
    try:
        rule = ast.literal_eval(node.args[0])
        args = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords if kw.arg is not None}
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise ProgramError(where, "an op's rule and arguments must be literals (numbers, strings, "
                                  "booleans, None, tuples)") from None
    if not isinstance(rule, str):
        raise ProgramError(where, f"an op's rule must be a string, got {rule!r}")
    return Op(rule, tuple(sorted(args.items())))  # not Op.of: an argument may be named ``rule``


def parse(text: str) -> list[Op]:
    """Read back what ``render`` printed (``ProgramError`` when it cannot)."""
    return [op for _, op in parse_lines(text)]


def _is_rule(machine_cls: type, name: str) -> bool:
    """``name`` is a public method of the machine that is not Hypothesis's machinery or an invariant."""
    from hypothesis.stateful import RuleBasedStateMachine

    if name.startswith("_") or hasattr(RuleBasedStateMachine, name):
        return False
    found = inspect.getattr_static(machine_cls, name, None)
    return inspect.isfunction(found) and not hasattr(found, "hypothesis_stateful_invariant")


def check_ops(ops: Sequence[tuple[int, Op]], machine_cls: type) -> None:
    """Refuse a program ``machine_cls`` cannot run as written: none at all, a first op other than
    ``init``, a rule the machine does not have, or arguments its rule does not take
    (``ProgramError`` with the op's line)."""
    if not ops:
        raise ProgramError(0, "no ops (a program is PROGRAM = [Op.of('init', ...), ...], as rmqspec "
                              "conform prints it)")
    line, first = ops[0]
    if first.rule != "init":
        raise ProgramError(line, f"the first op must be init (the machine's set-up), not {first.rule!r}")
    for line, op in ops:
        if not _is_rule(machine_cls, op.rule):
            raise ProgramError(line, f"the conformance machine has no rule {op.rule!r}")
        try:
            inspect.signature(getattr(machine_cls, op.rule)).bind(None, **op.kwargs())
        except TypeError as exc:
            raise ProgramError(line, f"rule {op.rule!r} does not take these arguments ({exc})") from None


def replay(
    program: Sequence[Op],
    broker_factory: Callable[..., Any],
    *,
    lockstep: bool = True,
    profile: str = "rocketmq-4.9",
    drain: bool = True,
    recorder: Any = None,
    config: Any = None,
    wall: Any = None,
    orderly_client: Any = None,
) -> Any:
    """Run ``program`` through a fresh conformance machine; returns the machine.

    ``orderly_client``: the orderly consumer the machine plays (``conformance_machine``; 4.9.8's when None).

    Raises the machine's AssertionError (violated invariant or lockstep
    mismatch) exactly as the Hypothesis run did.
    """
    from rmqspec.properties.conformance import conformance_machine

    kwargs: dict[str, Any] = {"lockstep": lockstep, "profile": profile, "config": config, "wall": wall}
    if recorder is not None:
        kwargs["recorder_factory"] = lambda: recorder
    if orderly_client is not None:
        kwargs["orderly_client"] = orderly_client
    cls = conformance_machine(broker_factory, **kwargs)
    machine = cls()
    machine.drain_on_teardown = drain
    try:
        for op in program:
            getattr(machine, op.rule)(**op.kwargs())
            machine.check_always()
    finally:
        machine.teardown()
    return machine
