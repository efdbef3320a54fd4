"""Clocks: every time in rmqspec is milliseconds read from an injected clock.

Tests and the conformance machine use ``ManualClock`` so time only moves when a
rule moves it; adapters for real brokers use ``WallClock``. ``set`` may move a
manual clock backwards on purpose (the schedule service's correction rule,
SPEC §4.3, exists for exactly that case).
"""

from __future__ import annotations

import time
from typing import Protocol, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    """Anything with ``now() -> int`` milliseconds."""

    def now(self) -> int: ...


class ManualClock:
    """A clock that moves only when told to."""

    __slots__ = ("_now",)

    def __init__(self, start_ms: int = 0) -> None:
        self._now = int(start_ms)

    def now(self) -> int:
        return self._now

    def advance(self, ms: int) -> int:
        """Move forward by ``ms`` (≥ 0) and return the new time."""
        if ms < 0:
            raise ValueError(f"advance takes a non-negative duration, got {ms} ms; use set()")
        self._now += int(ms)
        return self._now

    def set(self, ms: int) -> int:
        """Jump to ``ms``; may go backwards (models a clock step)."""
        self._now = int(ms)
        return self._now

    def __repr__(self) -> str:
        return f"ManualClock(now={self._now})"


class WallClock:
    """System time in milliseconds, for adapters talking to real brokers."""

    def now(self) -> int:
        return time.time_ns() // 1_000_000
