"""The Hypothesis constant pool is pinned to the rmqspec modules: what a process imports later (a
test file's helpers, ``bench``, a broker under test) adds no literal, so a derandomized run draws
the same programs in a full ``make test`` as alone."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

from hypothesis.internal.conjecture import providers

from rmqspec.properties import constant_pool


def test_the_pool_is_pinned_and_later_imports_add_nothing(tmp_path: Path) -> None:
    constant_pool.pin()
    assert constant_pool.PINNED["pinned"], "this Hypothesis release moved _get_local_constants"
    assert constant_pool.PINNED["modules"] > 50
    before = providers._get_local_constants()
    assert "DefaultCluster" in before.strings or "rmq_sys_wheel_timer" in before.strings
    literal = "a literal only the late module has 7d1f"
    (tmp_path / "late_local_module_7d1f.py").write_text(f"VALUE = {literal!r}\nNUMBER = 918273645\n")
    sys.path.insert(0, str(tmp_path))
    try:
        importlib.import_module("late_local_module_7d1f")
    finally:
        sys.path.remove(str(tmp_path))
    after = providers._get_local_constants()
    assert after is before
    assert literal not in after.strings and 918273645 not in after.integers


def test_pin_is_idempotent() -> None:
    constant_pool.pin()
    pool = providers._get_local_constants()
    constant_pool.pin()
    assert providers._get_local_constants() is pool
