"""``rmqspec conform``'s default run of the mmap broker (4.9 profile, lockstep), once per pytest process.

Several tests judge the same run — that it passes, and what its coverage reaches; they share the
``default-run`` xdist group, so one worker makes it once. The conformance machine draws what the
candidate's answers lead to, and the honest mmap broker answers as the model does, so the run reaches
what a run of the model itself reaches."""

from __future__ import annotations

from typing import Any

_RUNS: dict[str, Any] = {}


def mmap_default_run() -> Any:
    if "mmap" not in _RUNS:
        from rmqspec.properties.adapters import load_factory
        from rmqspec.properties.runner import budget_settings, check_conformance

        _RUNS["mmap"] = check_conformance(load_factory("rmqspec.impl:factory"), settings=budget_settings())
    return _RUNS["mmap"]
