"""Issue 42's families of seed mechanisms, each held the four ways its Done-when names.

For every family (a Build bullet of issue 42): the conformance rules reach it at ``rmqspec conform``'s
default budget (the coverage labels below, in the default run's coverage table); a broken broker or client
of our own, caught at the default budget both in lockstep and by the invariants alone, is judged by the
named test; and the interop test where the wire (or the real store) shows it exists. ``docs/seeds.md``
("The families, and what holds each") is this table in prose; keep both in step.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import attrs
import pytest

from tests.untraced import budget_run

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
BROKEN = importlib.import_module("test_broken_brokers")  # LOCKSTEP, INVARIANTS_ONLY


@attrs.frozen
class Family:
    """``reach``: coverage labels, each a tuple of alternatives (one of them > 0 at the default budget).
    ``caught``: ``module::test`` of the broken broker or client tests (both modes in each), or
    ``broken:<name>`` for a broker of ``tests/broken_brokers.py`` (``tests/test_broken_brokers.py`` runs it at the
    default budget in lockstep, for every broker, and without the model: ``INVARIANTS_AT_THE_DEFAULT_BUDGET``).
    ``interop``: test files under ``tests/interop``."""

    reach: tuple[tuple[str, ...], ...]
    caught: tuple[str, ...]
    interop: tuple[str, ...]


FAMILIES = {
    "producer: async and oneway sends, lost answers and the retry, batches as one append": Family(
        reach=(("send_unanswered:ASYNC",), ("send_unanswered:SYNC",), ("send_oneway", "family:oneway"),
               ("send_batch:atomic",)),
        caught=("tests/properties/test_send_modes_conform.py::test_a_broken_send_mode_is_caught",),
        interop=("test_send_modes_real.py", "test_retention_real.py"),
    ),
    "orderly: batches that span time, the consume lock, the local queue lock, listeners outliving the lock": Family(
        reach=(("orderly_lock_outlived",), ("rebalance_kept_in_batch",), ("orderly_suspend",), ("orderly_dlq",)),
        caught=("tests/properties/test_orderly_client_broken.py::test_a_client_without_the_queue_lock_is_caught",),
        interop=("test_client_differential.py", "test_remote_adapter_real.py", "test_conform_real.py"),
    ),
    "consumeTimeout and cleanExpiredMsg: a running message sent back, told apart from a broker fault": Family(
        reach=(("consume_timeout:clean_sent_back",), ("consume_timeout:time_out",),
               ("consume_timeout:retry_consumed",)),
        caught=("tests/properties/test_consume_timeout_conform.py::test_the_broken_client_is_caught_at_the_default_budget",),
        interop=("test_consume_timeout_real.py",),
    ),
    "broadcasting: two clients, their own offsets, judged per client": Family(
        reach=(("broadcast:both_consumed",), ("broadcast:late_join",), ("broadcast:dropped",)),
        caught=("broken:pulls_exclusive_per_group",),
        interop=("test_send_modes_real.py",),
    ),
    "per-key order: one queue per key and route": Family(
        reach=(("send_keyed", "family:keyed"),),
        caught=("tests/properties/test_key_order.py::test_a_random_selector_is_caught_by_key_split_alone",),
        interop=("test_keyed_real.py",),
    ),
    "retention: expired files, disk ratios, min offsets, OFFSET_TOO_SMALL and correction": Family(
        reach=(("retention:deleted",), ("retention:age",), ("retention:refused",), ("retention:observed:min",),
               ("pull:OFFSET_ILLEGAL",)),
        caught=("broken:retention_ignores_reserve",),
        interop=("test_retention_real.py", "test_retention_power_real.py"),
    ),
    "flush and commit: the flush services, WAIT=false, FLUSH_DISK_TIMEOUT, the TransientStorePool": Family(
        reach=(("flush:thorough",), ("send_unwaited:SYNC",), ("send_unwaited:ASYNC",), ("send:flush_disk_timeout",),
               ("crash:unwaited_at_risk",), ("crash:after_group_commit",)),
        caught=("broken:flush_service_idle", "broken:group_commit_waits_for_a_request",
                "broken:stalled_flush_answered_ok", "broken:group_commit_parked_after_stall",
                "tests/properties/test_transient_store_pool_conform.py"
                "::test_a_kill_that_takes_committed_records_is_caught_at_the_default_budget"),
        interop=("test_crash_states_real.py", "test_store_pool_real.py"),
    ),
}


def _test_function(ref: str) -> object:
    path, name = ref.split("::")
    module = importlib.import_module(path.removesuffix(".py").replace("/", "."))
    return getattr(module, name, None)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_each_family_names_its_broken_brokers_and_interop_tests(family: str) -> None:
    spec = FAMILIES[family]
    assert spec.caught and spec.interop and spec.reach
    for ref in spec.caught:
        if ref.startswith("broken:"):
            name = ref.removeprefix("broken:")
            assert name in BROKEN.LOCKSTEP, f"{name}: no lockstep test"
            assert name in BROKEN.INVARIANTS_AT_THE_DEFAULT_BUDGET, f"{name}: no invariants-only test"
        else:
            test = _test_function(ref)
            assert callable(test), f"{ref}: no such test"
            modes = [m for mark in getattr(test, "pytestmark", ()) if mark.name == "parametrize"
                     and mark.args[0] == "lockstep" for m in mark.args[1]]
            assert set(modes) == {True, False}, f"{ref}: not run both in lockstep and by the invariants alone"
    for name in spec.interop:
        assert (ROOT / "tests" / "interop" / name).is_file(), name


@budget_run
@pytest.mark.xdist_group("default-run")  # the run tests/test_conformance.py and test_coverage.py judge too
def test_the_default_budget_reaches_every_family() -> None:
    from tests.default_runs import mmap_default_run

    coverage = mmap_default_run().coverage
    unseen = {family: [alts for alts in spec.reach if not any(coverage.get(label, 0) for label in alts)]
              for family, spec in FAMILIES.items()}
    assert not any(unseen.values()), f"unseen at the default budget: {unseen}"
