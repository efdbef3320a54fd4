"""What every invariant module shares: ``Violation``, ``Invariant`` and the history helpers.

Theory of operation
-------------------
An invariant (``properties/invariants.py`` lists them all) is a named predicate
over the ghost history (``properties/history.py``) that returns ``Violation``
values — data, never exceptions. The helpers here read the history the same
way for every module: ``_restart`` (a crash, or a clean shutdown + reopen),
``_epochs`` (the restarts before each event), ``_detail`` (an extra of an
event), ``_until_last_drain`` (what an ``eventually`` invariant judges) and
``_at_risk`` (keys a power loss may legitimately lose). The invariants are
split by family into ``invariants.py`` (ordering, loss, retries, delays,
offsets, observations), ``inv_locks.py``, ``inv_txn.py`` and
``inv_tables.py`` (the lifecycle tables replayed); ``invariants.py``
re-exports every name, so ``invariants.check_…`` keeps working.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import attrs

from rmqspec.model.events import TraceEvent
from rmqspec.properties.history import History

__all__ = ["Invariant", "Violation"]


@attrs.frozen
class Violation:
    """One broken guarantee: where (machine ``step``, event ``seq``), why, expected vs actual."""

    code: str
    step: int
    reason: str
    expected: str = ""
    actual: str = ""
    seq: int | None = None

    def render(self) -> str:
        text = f"{self.code} at step {self.step}"
        if self.seq is not None:
            text += f" (event {self.seq})"
        text += f": {self.reason}"
        if self.expected or self.actual:
            text += f"; expected {self.expected}, actual {self.actual}"
        return text


@attrs.frozen
class Invariant:
    name: str
    code: str
    kind: str = attrs.field(validator=attrs.validators.in_(("always", "eventually", "observation")))
    doc: str
    source: str
    check: Callable[[History], list[Violation]] = attrs.field(repr=False)


# the send statuses that acknowledge a stored message: SEND_OK, and FLUSH_DISK_TIMEOUT (SYNC_FLUSH, a waiting put
# whose flush did not finish in syncFlushTimeout: SendMessageProcessor answers code 10 with the message stored;
# a power loss before the next group commit may take it, the crash row then lists it at risk)
ACKED_SEND = ("SEND_OK", "FLUSH_DISK_TIMEOUT")


def _v(h: History, code: str, ev: TraceEvent, reason: str, expected: object = "", actual: object = "") -> Violation:
    return Violation(
        code=str(code), step=h.step_of[ev.seq], reason=reason,
        expected=str(expected), actual=str(actual), seq=ev.seq,
    )


def _restart(ev: TraceEvent) -> bool:
    """A broker restart: a crash, or a clean shutdown + reopen (``recover`` REOPEN without a
    crash). Locks, a client's process queues and its locks do not survive either."""
    return ev.event == "crash" or (ev.event == "recover" and ev.status == "REOPEN")


def _epochs(events: Iterable[TraceEvent]) -> Iterable[tuple[int, TraceEvent]]:
    epoch = 0
    for ev in events:
        if _restart(ev):
            epoch += 1
        yield epoch, ev


def _detail(ev: TraceEvent, key: str, default: object = None) -> object:
    return (ev.detail or {}).get(key, default)


def _until_last_drain(h: History) -> list[TraceEvent]:
    """The events an ``eventually`` invariant judges: everything before the last drain."""
    last = max((e.seq for e in h.events if e.event == "drain"), default=-1)
    return h.events[:last + 1]


def _at_risk(events: Iterable[TraceEvent]) -> set[str]:
    """Keys a power loss on an ASYNC broker may legitimately lose (written after the last flush)."""
    out: set[str] = set()
    for ev in events:
        if ev.event == "crash":
            out.update(_detail(ev, "at_risk", ()) or ())
    return out
