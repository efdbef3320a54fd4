"""Discrete-event scheduling for the reference client.

Theory of operation
-------------------
The Java client runs on threads: a pull service, a consume thread pool and
several ``ScheduledExecutorService``s (ConsumeMessageConcurrentlyService's
5 s re-consume, ConsumeMessageOrderlyService's lock-all every
``lockInterval`` and its retry-lock/suspend delays, MQClientInstance's offset
persistence, the RebalanceService). The model replaces all of them with one
``TimerQueue`` per client: every unit of work — a pull, a consume request, a
periodic task — is a ``Timer`` due at a millisecond of the injected clock.

Rules:

- Nothing happens by itself. ``step()`` runs the timers due at
  ``clock.now()`` in ``(due, seq)`` order, which is deterministic; a
  driver that wants to choose the interleaving (a Hypothesis state machine)
  lists ``due()`` timers and runs one with ``run(timer)``.
- A timer runs at most once; periodic tasks re-arm themselves.
- Work that Java submits to a thread pool "now" is a timer due now, so a
  driver can interleave it with other clients.
- A listener may advance a ``ManualClock`` while it runs: that models a slow
  consumer or a GC pause, during which no other timer of the client runs
  (the model's client is one thread; see the orderly consumer's notes).

``Driver`` runs a whole world (one broker, several clients) forward in time:
it moves a manual clock to the next due timer (or by at most
``max_step_ms``), calls ``broker.tick()`` there, hands the returned
transaction CheckRequests to the transactional producers of their group, and
steps every participant; ``after_step`` (if given) runs after each round,
which is where a test checks its invariants.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterable
from typing import Any, Protocol

import attrs

from rmqspec.model.clock import Clock
from rmqspec.model.results import CheckRequest


@attrs.define(eq=False)
class Timer:
    """One scheduled unit of work. ``kind`` names the task (``pull``, ``consume``, …)."""

    due: int
    seq: int
    kind: str
    action: Callable[[], Any] = attrs.field(repr=False)
    key: Any = None
    cancelled: bool = False

    def sort_key(self) -> tuple[int, int]:
        return (self.due, self.seq)


class TimerQueue:
    """A deterministic timer heap over an injected clock."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._heap: list[tuple[int, int, Timer]] = []
        self._seq = itertools.count()

    def schedule(
        self, delay_ms: int, kind: str, action: Callable[[], Any], key: Any = None
    ) -> Timer:
        """Arm ``action`` to run ``delay_ms`` (≥ 0) after now."""
        if delay_ms < 0:
            raise ValueError(f"timer {kind!r}: delay must be ≥ 0, got {delay_ms}")
        timer = Timer(self._clock.now() + int(delay_ms), next(self._seq), kind, action, key)
        heapq.heappush(self._heap, (timer.due, timer.seq, timer))
        return timer

    def cancel(self, timer: Timer) -> None:
        timer.cancelled = True

    def cancel_all(self) -> None:
        for _, _, timer in self._heap:
            timer.cancelled = True
        self._heap.clear()

    def _prune(self) -> None:
        while self._heap and self._heap[0][2].cancelled:
            heapq.heappop(self._heap)

    def next_due(self) -> int | None:
        """When the earliest live timer is due, or ``None`` when idle."""
        self._prune()
        return self._heap[0][0] if self._heap else None

    def pending(self) -> list[Timer]:
        """Every live timer in run order."""
        return sorted((t for _, _, t in self._heap if not t.cancelled), key=Timer.sort_key)

    def due(self, now: int | None = None) -> list[Timer]:
        """Live timers due at ``now`` (default: the clock), in run order."""
        now = self._clock.now() if now is None else now
        return [t for t in self.pending() if t.due <= now]

    def pop(self, timer: Timer) -> bool:
        """Remove ``timer`` before running it; False if it is not live."""
        if timer.cancelled:
            return False
        for i, (_, _, t) in enumerate(self._heap):
            if t is timer:
                self._heap.pop(i)
                heapq.heapify(self._heap)
                timer.cancelled = True
                return True
        return False

    def __len__(self) -> int:
        return len(self.pending())


class Participant(Protocol):
    """Anything a ``Driver`` steps: consumers and producers."""

    def next_due(self) -> int | None: ...

    def step(self) -> int: ...


class _SettableClock(Protocol):
    def now(self) -> int: ...

    def set(self, ms: int) -> int: ...


class Driver:
    """Moves a manual clock forward and steps a broker and its clients.

    ``participants`` are consumers and producers; a participant with an
    ``answer_checks(requests)`` method and a ``group`` receives the
    CheckRequests ``broker.tick()`` returns for its producer group (the
    broker calls back one producer of the group, as RocketMQ's
    ``Broker2Client.checkProducerTransactionState`` does). Check requests for
    a group without a participant are kept in ``unanswered``.
    """

    def __init__(
        self,
        clock: _SettableClock,
        broker: Any,
        participants: Iterable[Any] = (),
        *,
        max_step_ms: int = 100,
        after_step: Callable[[], Any] | None = None,
    ) -> None:
        if max_step_ms <= 0:
            raise ValueError(f"max_step_ms must be positive, got {max_step_ms}")
        self.clock = clock
        self.broker = broker
        self.participants: list[Any] = list(participants)
        self.max_step_ms = max_step_ms
        self.unanswered: list[CheckRequest] = []
        self.after_step = after_step

    def add(self, participant: Any) -> None:
        self.participants.append(participant)

    def _dispatch_checks(self, requests: list[CheckRequest]) -> None:
        for req in requests:
            owners = [
                p
                for p in self.participants
                if hasattr(p, "answer_checks") and getattr(p, "group", None) == req.producer_group
            ]
            owner = owners[0] if owners else None
            if owner is None:
                self.unanswered.append(req)
            else:
                owner.answer_checks([req])

    def step(self) -> int:
        """Tick the broker and step every participant at the current time."""
        self._dispatch_checks(list(self.broker.tick()))
        ran = 0
        # Stepping one client may make work due now for another (a rebalance
        # notification); loop until quiet at this instant.
        while True:
            ran_now = sum(p.step() for p in list(self.participants))
            ran += ran_now
            if self.after_step is not None:
                self.after_step()
            if not ran_now:
                return ran

    def run_until(self, t: int) -> int:
        """Advance to ``t`` (inclusive), running everything that falls due on the way."""
        ran = self.step()
        while self.clock.now() < t:
            dues = [d for p in self.participants if (d := p.next_due()) is not None]
            target = min([t, self.clock.now() + self.max_step_ms, *dues])
            self.clock.set(max(target, self.clock.now()))
            ran += self.step()
        return ran

    def run_for(self, ms: int) -> int:
        return self.run_until(self.clock.now() + ms)
