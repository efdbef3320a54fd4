"""Replayable programs: the conformance machine's rule calls as data.

A program is the list of ``Op(rule, args)`` the machine executed, in order —
the same calls Hypothesis prints, as plain data. ``replay(program, factory)``
builds a fresh machine for ``factory`` and runs the ops through it (the
model *and* the candidate in lockstep), checking the ``always`` invariants
after every op and draining at the end, exactly as the state machine did;
a counterexample therefore reproduces outside Hypothesis. ``render`` prints a
program as Python source that ``parse`` reads back.
"""

from __future__ import annotations

import ast
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


def parse(text: str) -> list[Op]:
    """Read back what ``render`` printed."""
    tree = ast.parse(text)
    ops: list[Op] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "of":
            rule = ast.literal_eval(node.args[0])
            args = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords}
            ops.append(Op.of(rule, **args))
    return ops


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
