"""The figures the interop probes report (``timer_probe.py``, ``pop_probe.py``): a list of milliseconds
as min / median / max, that summary as one line of a report, and a result published (JSON and report)."""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping
from typing import Any


def summary(values: list[int]) -> dict[str, Any] | None:
    """``{"n", "min", "median", "max"}`` of ``values`` (None when there are none)."""
    if not values:
        return None
    return {"n": len(values), "min": min(values), "median": statistics.median(values), "max": max(values)}


def fmt_ms(s: Mapping[str, Any] | None) -> str:
    """A ``summary`` as ``min … / median … / max … ms (n=…)``, or ``n/a``."""
    return "n/a" if s is None else f"min {s['min']} / median {s['median']} / max {s['max']} ms (n={s['n']})"


def publish(result: Mapping[str, Any], json_path: str | None, report: str) -> None:
    """A probe's result: the JSON to ``json_path`` (when given), the readable ``report`` to stdout."""
    if json_path:
        with open(json_path, "w", encoding="utf-8") as fh:
            json.dump(result, fh, indent=1, sort_keys=True)
    print(report)
