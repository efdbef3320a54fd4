"""Progress lines for long work, on stderr.

A ``Progress`` prints ``label: done/total (pct) rate/s`` at most every
``interval`` seconds, rewriting one line on a terminal and writing plain lines
otherwise; ``close()`` prints the final line (work that ends within the first
``interval`` prints only that). Library code takes a plain
``on_progress(done, total)`` callback; the CLI passes ``Progress.update``.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    def __init__(
        self,
        label: str,
        total: int | None = None,
        *,
        unit: str = "",
        stream: TextIO | None = None,
        interval: float = 0.5,
        enabled: bool = True,
    ) -> None:
        self.label = label
        self.total = total
        self.unit = unit
        self.stream = stream or sys.stderr
        self.interval = interval
        self.enabled = enabled
        self.done = 0
        self._start = time.monotonic()
        # The first line comes after ``interval`` (a rate over a few microseconds means
        # nothing); ``close`` always prints the final line.
        self._last = self._start
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._printed = False

    def update(self, done: int, total: int | None = None) -> None:
        self.done = done
        if total is not None:
            self.total = total
        now = time.monotonic()
        if now - self._last >= self.interval:
            self._last = now
            self._emit(final=False)

    def advance(self, n: int = 1) -> None:
        self.update(self.done + n)

    def close(self) -> None:
        self._emit(final=True)

    def line(self) -> str:
        elapsed = max(time.monotonic() - self._start, 1e-9)
        rate = self.done / elapsed
        unit = f" {self.unit}" if self.unit else ""
        if self.total:
            pct = 100.0 * self.done / self.total
            width = 24
            filled = int(width * min(self.done, self.total) / self.total)
            bar = "#" * filled + "." * (width - filled)
            return (
                f"{self.label}: [{bar}] {self.done}/{self.total}{unit} ({pct:5.1f}%)"
                f" {rate:,.0f}{unit}/s {elapsed:.1f}s"
            )
        return f"{self.label}: {self.done}{unit} {rate:,.0f}{unit}/s {elapsed:.1f}s"

    def _emit(self, *, final: bool) -> None:
        if not self.enabled:
            return
        text = self.line()
        if self._tty:
            self.stream.write("\r\033[K" + text + ("\n" if final else ""))
        else:
            self.stream.write(text + "\n")
        self.stream.flush()
        self._printed = True
