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
copies that disagree. ``MAX_FORKS`` bounds how many copies are *live*; a cap
never drops an allowed behaviour: the choices beyond it wait in a reserve
(the fork as it was at the split, plus the choice), and the operations since
are logged. Only when every live fork is refuted are reserved choices
materialized, replayed through the log against the candidate's recorded
outcomes, and kept if they still agree — so a mismatch means no allowed
behaviour matches, however many there were. Live choices are taken from both
ends of the choice list first (after a power loss: everything survived,
only the flushed prefix survived, then inwards), the common answers.

Trace events are an output too. When the candidate and the model both record
into an ``EventTap`` (the candidate's factory has a ``recorder`` parameter,
the model a ``recorder`` attribute; ``events_compared``), each operation's outcome
carries the SPEC §8 events the broker emitted since the previous one (its
crash and recovery included), and a fork survives only if its events equal
the candidate's, field for field (``seq`` aside: the tap numbers nothing).
An unlock that frees the lock but records no ``unlock``, a send-back whose
``send_back`` row names the wrong level: effects no reply shows, but a
trace audit of that broker would judge wrongly from them. Each copy of a
fork gets a copy of its tap (the model shares its recorder when copied).

Model well-formedness (``rmqspec.model.wellformed``, when present) is checked
on every surviving fork after each operation that can change state (not after
a pull or an offset query, ``READ_ONLY``): a malformed model is a model bug,
reported as such, never blamed on the candidate.
"""

from __future__ import annotations

import copy
import importlib
from collections.abc import Callable
from typing import Any

import attrs

from rmqspec.model.events import TraceEvent
from rmqspec.model.message import InvalidMessage
from rmqspec.model.results import BrokerError

MAX_FORKS = 32
# Requests that change no broker state (PULL_MESSAGE, QUERY_CONSUMER_OFFSET): the model's
# well-formedness, which reads every record, is not checked again after them.
READ_ONLY = ("pull(", "query_offset(")


class LockstepMismatch(AssertionError):
    """The candidate's observation is not one the model allows."""


class ModelMalformed(AssertionError):
    """The model broker broke its own well-formedness conditions (a model bug)."""


class EventTap:
    """A ``Recorder`` keeping the events emitted since the last ``drain`` (``seq`` 0: unnumbered)."""

    def __init__(self, pending: list[TraceEvent] | None = None) -> None:
        self.pending: list[TraceEvent] = list(pending or ())

    def emit(self, event: str, ts: int, **fields: Any) -> TraceEvent:
        ev = TraceEvent(seq=0, ts=ts, event=event, **fields)
        self.pending.append(ev)
        return ev

    def drain(self) -> tuple[TraceEvent, ...]:
        out, self.pending = tuple(self.pending), []
        return out

    def __deepcopy__(self, memo: dict[int, Any]) -> EventTap:
        return EventTap(self.pending)  # events are frozen; the list is the fork's own


def tap_of(broker: Any) -> EventTap | None:
    tap = getattr(broker, "recorder", None)
    return tap if isinstance(tap, EventTap) else None


@attrs.frozen
class Outcome:
    """What an operation returned, or how it was refused, and the trace events it emitted."""

    value: Any = None
    error: tuple[str, str] | None = None
    events: tuple[TraceEvent, ...] = ()

    def render(self) -> str:
        if self.error is not None:
            return f"raised {self.error[0]}({self.error[1]})"
        return repr(self.value)


def observe(fn: Callable[[Any], Any], broker: Any) -> Outcome:
    try:
        out = Outcome(value=fn(broker))
    except BrokerError as exc:
        out = Outcome(error=("BrokerError", exc.code.name))
    except InvalidMessage as exc:
        out = Outcome(error=("InvalidMessage", exc.field))
    tap = tap_of(broker)
    return out if tap is None else attrs.evolve(out, events=tap.drain())


def event_diff(expected: tuple[TraceEvent, ...], actual: tuple[TraceEvent, ...]) -> list[str]:
    """The first difference between two event lists, field by field."""
    for i, (a, b) in enumerate(zip(expected, actual)):
        if a != b:
            lines = diff(a, b, f"event[{i}]")
            return [f"event[{i}] {a.event}: " + "; ".join(lines[:4])]
    longer, which = (expected, "missing") if len(expected) > len(actual) else (actual, "unexpected")
    extra = longer[min(len(expected), len(actual)):]
    return [f"{which} event {e.event} ({_row(e)})" for e in extra[:3]]


def _row(ev: TraceEvent) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in ev.as_row().items() if v is not None and k != "seq")


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


def _ends_first(choices: list[Any]) -> list[Any]:
    """``[a, b, c, d, e]`` → ``[e, a, d, b, c]``: the extremes first."""
    out: list[Any] = []
    lo, hi = 0, len(choices) - 1
    while lo <= hi:
        out.append(choices[hi])
        if lo < hi:
            out.append(choices[lo])
        lo, hi = lo + 1, hi - 1
    return out


@attrs.frozen
class _Reserved:
    """A choice not yet materialized: the fork as it was at the split, and the log position."""

    base: Any
    choice: Any
    apply: Callable[[Any, Any], None]
    position: int


class Lockstep:
    """The candidate plus the model forks that still agree with it."""

    def __init__(self, candidate: Any, model: Any | None, clock: Any,
                 normalize: Callable[[Any], Any] | None = None) -> None:
        self.candidate = candidate
        self.forks: list[Any] = [] if model is None else [model]
        self.clock = clock
        self.truncated = 0  # choices ever put in the reserve
        self.reserve: list[_Reserved] = []
        # since the oldest reserved choice: ("call", fn, outcome) / ("on", fn) / ("split", choices_of, apply)
        self.log: list[tuple[Any, ...]] = []
        # Wall-clock mode compares observations with what is judged by time windows masked out.
        self.normalize = normalize or (lambda value: value)
        self._wellformed = _wellformed_checker() if model is not None else None
        # events are compared only when both sides record them (a model without a tap emits none)
        self.events_compared = tap_of(candidate) is not None and model is not None and tap_of(model) is not None

    @property
    def enabled(self) -> bool:
        return bool(self.forks)

    @property
    def model(self) -> Any | None:
        return self.forks[0] if self.forks else None

    def _copy(self, broker: Any) -> Any:
        tap = tap_of(broker)
        twin = copy.deepcopy(broker, memo={id(self.clock): self.clock})
        if tap is not None:
            twin.recorder = copy.deepcopy(tap)
        return twin

    def _same(self, a: Outcome, b: Outcome) -> bool:
        return a.error == b.error and self.normalize(a.value) == self.normalize(b.value) \
            and (a.events == b.events or not self.events_compared)

    def call(self, op: str, fn: Callable[[Any], Any], candidate_fn: Callable[[Any], Any] | None = None) -> Outcome:
        """Apply ``fn`` to the candidate and every fork; keep the agreeing forks.

        ``candidate_fn`` (default ``fn``) is what the candidate is asked: wall-clock mode passes
        what the candidate was *seen* to do on its own (its check rounds) for the forks to match.
        """
        actual = observe(candidate_fn or fn, self.candidate)
        if not self.forks:
            return actual
        if self.reserve:
            self.log.append(("call", fn, actual))
        outcomes = [observe(fn, fork) for fork in self.forks]
        keep = [fork for fork, out in zip(self.forks, outcomes, strict=True) if self._same(out, actual)]
        tried = len(outcomes)
        while not keep and self.reserve:  # every live fork refuted: try the reserved choices
            batch, self.reserve = self.reserve[:MAX_FORKS], self.reserve[MAX_FORKS:]
            tried += len(batch)
            keep = [f for r in batch for f in self._replay(r)]
        if not self.reserve:
            self.log.clear()
        if not keep:
            # the fork whose reply matched, if one did: then only its events differ
            expected = next((o for o in outcomes if o.error == actual.error
                             and self.normalize(o.value) == self.normalize(actual.value)), outcomes[0])
            if expected.error == actual.error and self.normalize(expected.value) == self.normalize(actual.value):
                lines = event_diff(expected.events, actual.events)
                what = "trace events"
            else:
                lines = diff(self.normalize(expected.value), self.normalize(actual.value)) \
                    if expected.error is None and actual.error is None else []
                what = ""
            detail = "; ".join(lines[:6]) if lines else f"expected {expected.render()}, actual {actual.render()}"
            alt = f" ({tried} allowed model behaviours, none matches)" if tried > 1 else ""
            shown = (lambda o: "; ".join(f"{e.event}({_row(e)})" for e in o.events) or "no events") \
                if what else Outcome.render
            raise LockstepMismatch(
                f"lockstep mismatch in {op}{alt}: {what + ': ' if what else ''}{detail}\n"
                f"  expected (model):    {shown(expected)[:1500]}\n"
                f"  actual (candidate):  {shown(actual)[:1500]}"
            )
        self.forks = keep
        if not op.startswith(READ_ONLY):
            self._check_wellformed(op)
        return actual

    def on_forks(self, fn: Callable[[Any], Any]) -> None:
        """Apply ``fn`` to every fork, comparing nothing (the model catching up on background work
        the candidate did unobserved; the next observations judge it)."""
        if self.reserve:
            self.log.append(("on", fn))
        for fork in self.forks:
            fn(fork)

    def split(self, choices_of: Callable[[Any], list[Any]], apply: Callable[[Any, Any], None]) -> int:
        """Replace each fork by one copy per allowed choice; returns the number of allowed
        behaviours (live forks plus reserved choices). Beyond ``MAX_FORKS`` live forks the
        choices wait in the reserve (see the module docstring)."""
        per_fork = [(fork, _ends_first(list(choices_of(fork)) or [None])) for fork in self.forks]
        total = sum(len(c) for _, c in per_fork)
        if self.reserve:
            self.log.append(("split", choices_of, apply))
        if total > MAX_FORKS:
            # live: round robin over the forks, extremes first; the rest is reserved
            order = [(i, c) for depth in range(max(len(c) for _, c in per_fork))
                     for i, (_, cs) in enumerate(per_fork) if depth < len(cs) for c in (cs[depth],)]
            live, later = order[:MAX_FORKS], order[MAX_FORKS:]
            bases = {i: self._copy(per_fork[i][0]) for i in {i for i, _ in later}}
            position = len(self.log)
            self.reserve += [_Reserved(bases[i], c, apply, position) for i, c in later]
            self.truncated += len(later)
        else:
            live = [(i, c) for i, (_, cs) in enumerate(per_fork) for c in cs]
        forks: list[Any] = []
        for i, choice in live:
            fork = per_fork[i][0]
            twin = self._copy(fork) if len(per_fork[i][1]) > 1 else fork
            apply(twin, choice)
            forks.append(twin)
        self.forks = forks
        return total

    def _replay(self, reserved: _Reserved) -> list[Any]:
        """Materialize one reserved choice and run it through the log; the copies that agree."""
        twin = self._copy(reserved.base)
        reserved.apply(twin, reserved.choice)
        alive = [twin]
        for entry in self.log[reserved.position:]:
            if entry[0] == "call":
                _, fn, actual = entry
                alive = [f for f in alive if self._same(observe(fn, f), actual)]
            elif entry[0] == "on":
                for f in alive:
                    entry[1](f)
            else:
                _, choices_of, apply = entry
                grown = []
                for f in alive:
                    choices = list(choices_of(f)) or [None]
                    for choice in choices:
                        copy_ = self._copy(f) if len(choices) > 1 else f
                        apply(copy_, choice)
                        grown.append(copy_)
                alive = grown
            if not alive:
                break
        return alive

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
