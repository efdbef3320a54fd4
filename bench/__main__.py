"""Run the benchmarks: ``python -m bench [NAME ...] [-- ARGS]``.

Each ``bench/bench_<name>.py`` defines ``main(argv: list[str]) -> int`` and
prints its figures as ratios against a baseline measured in the same run.
``BY_NAME_ONLY`` benchmarks run only when named (``power``: about an hour; ``seeds``: hours).
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path

BY_NAME_ONLY = frozenset({"power", "seeds"})


def main(argv: list[str]) -> int:
    here = Path(__file__).parent
    available = sorted(
        m.name.removeprefix("bench_") for m in pkgutil.iter_modules([str(here)]) if m.name.startswith("bench_")
    )
    extra: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1 :]
    names = argv or [n for n in available if n not in BY_NAME_ONLY]
    unknown = [n for n in names if n not in available]
    if unknown:
        print(f"unknown benchmark(s) {unknown}; available: {available}", file=sys.stderr)
        return 2
    status = 0
    for name in names:
        print(f"== bench {name}", flush=True)
        module = importlib.import_module(f"bench.bench_{name}")
        status |= module.main(extra)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
