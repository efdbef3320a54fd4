"""``untraced()``: run a block with coverage stopped, in any process of ``make test``.

pytest-cov pauses only its own Coverage object for a ``no_cover`` test, and a pytest-xdist worker
has two started (pytest-cov's and the one coverage's subprocess patch starts), the other of which
goes on tracing: the block ran 3-4× slower, traced. Every started Coverage is stopped for the block
and restarted after it, in order. Used by ``tests/conftest.py`` for ``@pytest.mark.no_cover`` and by
session fixtures whose budget runs repeat code the suite covers elsewhere."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

# a budget run of code the suite covers elsewhere: its body runs untraced (tests/README.md, "Coverage
# and budgets"); it still runs and asserts in full
budget_run = pytest.mark.no_cover


@contextlib.contextmanager
def untraced() -> Iterator[None]:
    import coverage

    stopped = []
    while (cov := coverage.Coverage.current()) is not None and len(stopped) < 8:
        cov.stop()
        stopped.append(cov)
    try:
        yield
    finally:
        for cov in reversed(stopped):
            cov.start()
