"""One Hypothesis constant pool per rmqspec version, whatever else a process has imported.

Hypothesis mixes literals of the *local* modules loaded in the process into what it draws
(``hypothesis.internal.conjecture.providers._get_local_constants``: about one draw in twenty picks
a constant). Which modules are loaded depends on the process: a test file that imports ``bench``
or ``interop``, the ``__main__`` of ``python -m rmqspec.cli``, a broker module under test, a
mutant's copy in the power bench. A derandomized run — the ci profile, ``conform --seed`` — would
then draw other programs in a full ``make test`` than in the same test run alone (it did: a replica
caught alone escaped in the full suite).

``pin()`` imports every ``rmqspec`` module and fixes the pool to exactly their literals, read in
module-name order, for the rest of the process: later imports add nothing. There is no public
Hypothesis setting for this, so it replaces the one private function the provider calls; if a
Hypothesis release moves it, ``pin()`` falls back to importing the modules (the pool is then
Hypothesis's own, as stable as the imports) and says so in ``PINNED``.
"""

from __future__ import annotations

import contextlib
import importlib
import pkgutil
import sys
from typing import Any

FOLDERS = ("model", "impl", "properties", "traces", "spark", "cli", "remoting")

PINNED: dict[str, object] = {"pinned": False, "modules": 0}


def import_all() -> list[str]:
    """Import every ``rmqspec`` module (``__main__`` modules aside); return their names, sorted."""
    names: list[str] = []
    for folder in FOLDERS:
        try:
            package = importlib.import_module(f"rmqspec.{folder}")
        except ImportError:
            continue
        names.append(package.__name__)
        for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            if not info.name.endswith("__main__"):
                with contextlib.suppress(ImportError):
                    importlib.import_module(info.name)
                    names.append(info.name)
    return sorted(names)


def pin() -> None:
    """Fix Hypothesis's local constant pool to the ``rmqspec`` modules' literals (idempotent)."""
    names = import_all()
    if PINNED["pinned"]:
        return
    try:
        from hypothesis.internal.conjecture import providers
        from hypothesis.internal.constants_ast import Constants, constants_from_module
        from hypothesis.internal.floats import float_to_int
        from sortedcontainers import SortedSet

        providers._get_local_constants  # noqa: B018 (the function replaced below must exist)
        cache = providers.CONSTANTS_CACHE
    except (ImportError, AttributeError):
        return
    modules = [sys.modules[name] for name in names]
    pinned: list[Any] = []

    def pinned_local_constants() -> Any:
        # read on first use, not at import (Hypothesis warns against reading its storage then)
        if not pinned:
            pool = Constants(integers=SortedSet(), floats=SortedSet(key=float_to_int), bytes=SortedSet(),
                             strings=SortedSet())
            for module in modules:
                pool |= constants_from_module(module)
            pinned.append(pool)
        return pinned[0]

    providers._get_local_constants = pinned_local_constants
    cache.cache.clear()
    PINNED.update(pinned=True, modules=len(names))
