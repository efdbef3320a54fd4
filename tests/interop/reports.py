"""Tables a test measured (the serve/real comparisons), kept for the end of the run.

``make interop`` runs the modules in pytest-xdist workers; a worker's output is not shown for a
passing test, so each table is written to ``build/interop-reports/<name>.md`` and the controller
prints them all at the end (``conftest.pytest_terminal_summary``)."""

from __future__ import annotations

from pathlib import Path

REPORTS = Path(__file__).resolve().parents[2] / "build" / "interop-reports"


def report_table(name: str, text: str) -> None:
    """Keep ``text`` under ``name`` for the end-of-run summary (a later table of the name replaces it)."""
    REPORTS.mkdir(parents=True, exist_ok=True)
    (REPORTS / f"{name}.md").write_text(text)
