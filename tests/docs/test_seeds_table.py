"""docs/seeds.md's summary counts what its rows say.

The page has one table per seed (``## Seed NNN: …``), one row per mechanism, the status in the fourth
cell; the summary table near the top counts them per seed and in total, and the ``### Missing (N)``
heading lists every missing row with its reason. Changing a row's status without its counts fails here.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

SEEDS = Path(__file__).resolve().parents[2] / "docs" / "seeds.md"
STATUSES = ("modelled and checked", "modelled, not checked", "partly", "deviation", "missing")
_SECTION = re.compile(r"^## Seed (\d{3}):")
_ROW = re.compile(r"^\| ([A-Z]\d+) \|")


def _cells(line: str) -> list[str]:
    """The cells of a table row; a ``|`` inside a code span (``TagA||TagB``) splits nothing."""
    line = re.sub(r"`[^`]*`", lambda m: m.group(0).replace("|", "/"), line)
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _status(cell: str, row: str) -> str:
    found = [s for s in STATUSES if cell.startswith(s)]
    assert found, f"row {row}: status {cell!r} is none of {STATUSES}"
    return found[0]


def _rows() -> dict[str, dict[str, str]]:
    """seed → {row id: status}, from the per-seed tables."""
    out: dict[str, dict[str, str]] = {}
    seed = None
    for line in SEEDS.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            m = _SECTION.match(line)
            seed = m.group(1) if m else None
        elif seed is not None and _ROW.match(line):
            cells = _cells(line)
            out.setdefault(seed, {})[cells[0]] = _status(cells[3], cells[0])
    return out


def _summary() -> dict[str, list[int]]:
    """The summary table: seed (or ``total``) → the five counts and the total."""
    text = SEEDS.read_text(encoding="utf-8")
    table = text.split("## Summary", 1)[1].split("\n\n", 2)[1]
    out = {}
    for line in table.splitlines()[2:]:
        cells = _cells(line)
        key = "total" if "total" in cells[0] else cells[0].split(":")[0]
        out[key] = [int(c.strip("*")) for c in cells[1:]]
    return out


def test_the_summary_counts_the_rows() -> None:
    rows, summary = _rows(), _summary()
    assert sorted(rows) == sorted(k for k in summary if k != "total")
    total = Counter[str]()
    for seed, statuses in rows.items():
        counts = Counter(statuses.values())
        total.update(counts)
        want = [counts[s] for s in STATUSES] + [len(statuses)]
        assert summary[seed] == want, f"seed {seed}: the summary says {summary[seed]}, its rows {want}"
    assert summary["total"] == [total[s] for s in STATUSES] + [sum(total.values())]


def test_every_missing_row_is_listed_with_its_reason() -> None:
    missing = sorted(r for statuses in _rows().values() for r, s in statuses.items() if s == "missing")
    text = SEEDS.read_text(encoding="utf-8")
    section = text.split("### Missing (", 1)[1]
    assert section.startswith(f"{len(missing)})"), f"the heading counts {section[:3]}, the rows {len(missing)}"
    listed = re.findall(r"^- \*\*([A-Z]\d+)", section.split("\n## ", 1)[0], flags=re.M)
    assert sorted(listed) == missing
