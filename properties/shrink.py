"""Deterministic shrinking of a failing conformance program, within a replay budget.

Theory of operation
-------------------
Hypothesis finds failures; this module makes each one small. A failure is
identified by its *signature* (``signature_of``): the violated invariant's code,
the operation whose lockstep comparison broke, or the exception the candidate
raised. ``shrink(program, run, signature, budget)`` replays candidate programs
(``run`` is ``properties.program.replay`` bound to the broker factory) and keeps
a candidate when it fails with the same signature. Passes, repeated until a
whole round changes nothing or the budget of replays is spent:

1. cut the program after the op that failed (the replay tells which);
2. delete chunks of ops, halving the chunk size down to single ops (ddmin;
   ``init`` stays first);
3. simplify arguments: an integer towards the smallest value the machine draws for it
   (``FLOORS``; 0 by default), a boolean to False.

Every step is a pure function of the program and the replay outcomes, so the
same failing program always shrinks to the same result — unlike Hypothesis's
shrinker, whose phase stops at a wall-clock cap (``MAX_SHRINKING_SECONDS``) and
so depends on the machine's load. The budget is counted in replays, not
seconds; the time spent is measured and reported separately from generation.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from rmqspec.properties.program import Op

_INVARIANT = re.compile(r"invariant (\w+) violated: (\w+)")
_LOCKSTEP = re.compile(r"lockstep mismatch in ([A-Za-z_]+(?: round)?)")
_RAISED = re.compile(r"candidate raised (\w+)")
_WALL = re.compile(r"wall-clock window violated: (\w+)")

DEFAULT_BUDGET = 300  # replays per failure


def signature_of(message: str) -> str:
    """What kind of failure ``message`` reports, e.g. ``invariant:RETRY_EARLY`` or ``lockstep:pull``."""
    if m := _INVARIANT.search(message):
        return f"invariant:{m.group(2)}"
    if m := _LOCKSTEP.search(message):
        return f"lockstep:{m.group(1).strip()}"
    if m := _WALL.search(message):
        return f"wall:{m.group(1)}"
    if m := _RAISED.search(message):
        return f"raised:{m.group(1)}"
    first = message.strip().splitlines()[0] if message.strip() else "failure"
    return "other:" + first[:60]


@attrs.frozen
class Outcome:
    """One replay: the signature it failed with (None: it passed) and the message.

    ``genuine`` is False when the program itself was unusable (a shrunk program asking for a
    queue that does not exist): the machine failed, not a broker; such an outcome never counts
    as the failure being shrunk nor as a new one."""

    signature: str | None
    message: str = ""
    failed_at: int | None = None  # ops executed when it failed (None: at teardown or passed)
    genuine: bool = True


@attrs.frozen
class Shrunk:
    program: tuple[Op, ...]
    message: str
    replays: int
    seconds: float
    exhausted: bool  # the budget ran out before a round changed nothing


Runner = Callable[[Sequence[Op]], Outcome]


# The smallest value the machine draws for an argument (default 0): shrinking stays in the domain.
FLOORS = {"queues": 1, "n": 1, "max_nums": 1, "mask": 1, "ms": 1, "ack_index": -1, "level": -1,
          "delta": -1000, "retry_queue_nums": 1}


def _simpler_ints(name: str, value: int) -> list[int]:
    """Values closer to 0 (or to the argument's floor when that is above 0), nearest last."""
    target = max(FLOORS.get(name, 0), 0)
    if value > target:
        out = [target, target + 1, (value + target) // 2]
        return [v for v in dict.fromkeys(out) if v < value]
    if value < target and value > FLOORS.get(name, 0) - 1:
        return [v for v in dict.fromkeys([target, -((-value) // 2)]) if v > value]
    return []


class _Budget:
    def __init__(self, run: Runner, signature: str, replays: int) -> None:
        self.run, self.signature, self.left, self.used = run, signature, replays, 0

    def fails(self, program: Sequence[Op]) -> Outcome | None:
        """The outcome if ``program`` fails the same way (None otherwise, or when out of budget)."""
        if self.left <= 0:
            return None
        self.left -= 1
        self.used += 1
        out = self.run(program)
        return out if out.genuine and out.signature == self.signature else None


def shrink(program: Sequence[Op], run: Runner, signature: str, budget: int = DEFAULT_BUDGET) -> Shrunk:
    """The smallest program found that still fails with ``signature`` (see the module docstring).

    ``program`` must fail with ``signature`` when run; if it does not (a failure that does not
    replay), it comes back unchanged with the message of the replay.
    """
    started = time.monotonic()
    b = _Budget(run, signature, budget)
    first = b.fails(program)
    if first is None:
        again = run(program) if b.used == 0 else None
        return Shrunk(tuple(program), again.message if again else "", b.used, time.monotonic() - started, False)
    best, message = list(program), first.message
    if first.failed_at is not None:
        best = best[:first.failed_at]
    changed = True
    while changed and b.left > 0:
        changed = False
        # 2. delete chunks (init stays)
        size = max(1, (len(best) - 1) // 2)
        while size >= 1 and b.left > 0:
            i = 1
            while i < len(best) and b.left > 0:
                trial = best[:i] + best[i + size:]
                out = b.fails(trial)
                if out is not None:
                    best, message, changed = trial, out.message, True
                    if out.failed_at is not None:
                        best = best[:out.failed_at]
                else:
                    i += size
            size //= 2
        # 3. simplify arguments
        for index in range(len(best)):
            op = best[index] if index < len(best) else None
            if op is None:
                break
            for name, value in op.args:
                candidates: list[Any] = []
                if isinstance(value, bool):
                    candidates = [False] if value else []
                elif isinstance(value, int):
                    candidates = _simpler_ints(name, value)
                for simpler in candidates:
                    if b.left <= 0:
                        break
                    trial = list(best)
                    trial[index] = Op.of(op.rule, **{**op.kwargs(), name: simpler})
                    out = b.fails(trial)
                    if out is not None:
                        best, message, changed = trial, out.message, True
                        op = best[index]
                        break
    return Shrunk(tuple(best), message, b.used, time.monotonic() - started, b.left <= 0 and changed)
