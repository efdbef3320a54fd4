"""A broker on its own clock for wall-clock conformance tests: an MmapBroker (or ModelBroker) on the
wall clock with its background services run by a thread every ``period`` seconds, as ``rmqspec serve``
runs them, and every call serialized under one lock. The check requests its services produce wait in
a box for the next ``tick()``, like checks arriving on a remote producer's connection."""

from __future__ import annotations

import threading
from typing import Any

from rmqspec.model.clock import WallClock


class BackgroundBroker:
    def __init__(self, make: Any, config: Any, period: float = 0.05) -> None:
        self.clock = WallClock()
        self.broker = make(self.clock, config)
        self.capabilities = frozenset()
        self._lock = threading.Lock()
        self._checks: list[tuple[int, Any]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(period,), daemon=True)
        self._thread.start()

    def _run(self, period: float) -> None:
        while not self._stop.wait(period):
            with self._lock:
                now = self.clock.now()
                self._checks += [(now, req) for req in self.broker.tick()]

    def tick_timed(self) -> list[tuple[int, Any]]:
        """The checks sent since the last call, each with the time it was sent (ms)."""
        with self._lock:
            out, self._checks = self._checks, []
            return out

    def tick(self) -> list[Any]:
        return [req for _, req in self.tick_timed()]

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        with self._lock:
            self.broker.close()

    def __getattr__(self, name: str) -> Any:
        fn = getattr(self.broker, name)
        if not callable(fn):
            return fn

        def locked(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                return fn(*args, **kwargs)
        return locked


class Connection:
    """One example's connection to a shared ``BackgroundBroker``: ``close`` leaves the broker running,
    as closing a client connection leaves a remote broker running."""

    def __init__(self, broker: BackgroundBroker) -> None:
        self._broker = broker
        self.capabilities = broker.capabilities

    def close(self) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._broker, name)
