"""Lockstep: apply one operation to the candidate and to the model, compare.

Theory of operation
-------------------
``Lockstep`` holds the candidate broker and a list of *forks* of the model —
deep copies of one ``ModelBroker`` sharing the machine's clock. Every
operation goes through ``call(op, fn)``: ``fn`` runs on the candidate first;
its outcome (a value, or a refused request: ``BrokerError`` code /
``InvalidMessage`` field) is the observation. Then ``fn`` runs on every fork
and the forks whose outcome equals the candidate's survive. When none
survives the candidate disagrees with every behaviour the model allows:
``LockstepMismatch`` names the operation and shows expected (model) versus
actual (candidate), field by field.

Nondeterminism is resolved by the candidate's observations: where the model
has several allowed futures (``recovery_choices()`` after a power loss: which
prefix survives; the retry queue among ``retry_queue_nums``), the fork is
split into one deep copy per choice and the later comparisons prune the
copies that disagree. ``MAX_FORKS`` bounds the set (the earliest choices are
kept; a warning counter records truncation).

Model well-formedness (``rmqspec.model.wellformed``, when present) is checked
on every surviving fork after each operation: a malformed model is a model
bug, reported as such, never blamed on the candidate.
"""

from __future__ import annotations

import copy
import importlib
from collections.abc import Callable
from typing import Any

import attrs

from rmqspec.model.message import InvalidMessage
from rmqspec.model.results import BrokerError

MAX_FORKS = 32


class LockstepMismatch(AssertionError):
    """The candidate's observation is not one the model allows."""


class ModelMalformed(AssertionError):
    """The model broker broke its own well-formedness conditions (a model bug)."""


@attrs.frozen
class Outcome:
    """What an operation returned, or how it was refused."""

    value: Any = None
    error: tuple[str, str] | None = None

    def render(self) -> str:
        if self.error is not None:
            return f"raised {self.error[0]}({self.error[1]})"
        return repr(self.value)


def observe(fn: Callable[[Any], Any], broker: Any) -> Outcome:
    try:
        return Outcome(value=fn(broker))
    except BrokerError as exc:
        return Outcome(error=("BrokerError", exc.code.name))
    except InvalidMessage as exc:
        return Outcome(error=("InvalidMessage", exc.field))


def _fields(value: Any) -> dict[str, Any] | None:
    if attrs.has(type(value)):
        return {a.name: getattr(value, a.name) for a in attrs.fields(type(value))
                if not a.name.startswith("_")}
    return None


def diff(expected: Any, actual: Any, path: str = "") -> list[str]:
    """Human-readable differences between two observations (first few)."""
    if expected == actual:
        return []
    ef, af = _fields(expected), _fields(actual)
    if ef is not None and af is not None and type(expected) is type(actual):
        out = []
        for name in ef:
            a, b = ef[name], af[name]
            if name == "properties":
                a, b = dict(a), dict(b)
            out.extend(diff(a, b, f"{path}.{name}" if path else name))
        return out or [f"{path or 'value'}: {expected!r} != {actual!r}"]
    if isinstance(expected, (list, tuple)) and isinstance(actual, (list, tuple)):
        if len(expected) != len(actual):
            return [f"{path or 'value'}: {len(expected)} items != {len(actual)} items"]
        out = []
        for i, (a, b) in enumerate(zip(expected, actual, strict=True)):
            out.extend(diff(a, b, f"{path}[{i}]"))
        return out
    return [f"{path or 'value'}: expected {expected!r}, actual {actual!r}"]


def _wellformed_checker() -> Callable[[Any], Any] | None:
    try:
        mod = importlib.import_module("rmqspec.model.wellformed")
    except ImportError:
        return None
    for name in ("check", "check_broker", "wellformed", "assert_wellformed"):
        fn = getattr(mod, name, None)
        if callable(fn):
            return fn
    return None


class Lockstep:
    """The candidate plus the model forks that still agree with it."""

    def __init__(self, candidate: Any, model: Any | None, clock: Any,
                 normalize: Callable[[Any], Any] | None = None) -> None:
        self.candidate = candidate
        self.forks: list[Any] = [] if model is None else [model]
        self.clock = clock
        self.truncated = 0
        # Wall-clock mode compares observations with what is judged by time windows masked out.
        self.normalize = normalize or (lambda value: value)
        self._wellformed = _wellformed_checker() if model is not None else None

    @property
    def enabled(self) -> bool:
        return bool(self.forks)

    @property
    def model(self) -> Any | None:
        return self.forks[0] if self.forks else None

    def _copy(self, broker: Any) -> Any:
        return copy.deepcopy(broker, memo={id(self.clock): self.clock})

    def _same(self, a: Outcome, b: Outcome) -> bool:
        return a.error == b.error and self.normalize(a.value) == self.normalize(b.value)

    def call(self, op: str, fn: Callable[[Any], Any], candidate_fn: Callable[[Any], Any] | None = None) -> Outcome:
        """Apply ``fn`` to the candidate and every fork; keep the agreeing forks.

        ``candidate_fn`` (default ``fn``) is what the candidate is asked: wall-clock mode passes
        what the candidate was *seen* to do on its own (its check rounds) for the forks to match.
        """
        actual = observe(candidate_fn or fn, self.candidate)
        if not self.forks:
            return actual
        outcomes = [observe(fn, fork) for fork in self.forks]
        keep = [fork for fork, out in zip(self.forks, outcomes, strict=True) if self._same(out, actual)]
        if not keep:
            expected = outcomes[0]
            lines = diff(self.normalize(expected.value), self.normalize(actual.value)) \
                if expected.error is None and actual.error is None else []
            detail = "; ".join(lines[:6]) if lines else f"expected {expected.render()}, actual {actual.render()}"
            alt = f" ({len(outcomes)} allowed model behaviours, none matches)" if len(outcomes) > 1 else ""
            raise LockstepMismatch(
                f"lockstep mismatch in {op}{alt}: {detail}\n"
                f"  expected (model):    {expected.render()[:1500]}\n"
                f"  actual (candidate):  {actual.render()[:1500]}"
            )
        self.forks = keep
        self._check_wellformed(op)
        return actual

    def on_forks(self, fn: Callable[[Any], Any]) -> None:
        """Apply ``fn`` to every fork, comparing nothing (the model catching up on background work
        the candidate did unobserved; the next observations judge it)."""
        for fork in self.forks:
            fn(fork)

    def split(self, choices_of: Callable[[Any], list[Any]], apply: Callable[[Any, Any], None]) -> int:
        """Replace each fork by one copy per allowed choice; returns the new fork count."""
        forks: list[Any] = []
        for fork in self.forks:
            choices = list(choices_of(fork)) or [None]
            for choice in choices:
                twin = self._copy(fork) if len(choices) > 1 else fork
                apply(twin, choice)
                forks.append(twin)
        if len(forks) > MAX_FORKS:
            self.truncated += len(forks) - MAX_FORKS
            forks = forks[:MAX_FORKS]
        self.forks = forks
        return len(forks)

    def _check_wellformed(self, op: str) -> None:
        if self._wellformed is None:
            return
        for fork in self.forks:
            try:
                result = self._wellformed(fork)
            except AssertionError as exc:
                raise ModelMalformed(f"model not well-formed after {op}: {exc}") from exc
            if result:  # a list of problems
                raise ModelMalformed(f"model not well-formed after {op}: {result}")
