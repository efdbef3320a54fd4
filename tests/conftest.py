"""Shared test set-up: Hypothesis profiles, and a fixed Hypothesis constant pool.

- ``ci`` (default, used by ``make test``): fixed budgets, derandomized, no deadline.
- ``thorough``: many more examples and steps, for local and nightly runs
  (``HYPOTHESIS_PROFILE=thorough make test``).
- ``dev``: quick randomized runs while editing.

Hypothesis mixes literals found in the project's loaded modules into what it
generates (``hypothesis.internal.conjecture.providers._get_local_constants``),
so a derandomized run depends on which local modules happen to be imported
when it starts. ``constant_pool.pin()`` fixes the pool to the ``rmqspec``
modules' literals first, so every run — one file, a ``-k`` subset or the whole
suite, whatever test files import — draws from the same pool, and a result seen
once is seen again.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from rmqspec.properties import constant_pool

constant_pool.pin()

settings.register_profile(
    "ci",
    max_examples=60,
    derandomize=True,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "thorough",
    max_examples=1000,
    stateful_step_count=80,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("dev", max_examples=20, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the xdist_group marks into the node ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist (``make test`` runs ``-n auto --dist loadgroup``): the tests that use the
    local[2] SparkSession (``tests/spark/conftest.py``) go to two groups, those of the batch audit
    (the ``batch`` fixture, built once per worker) and the rest, so each runs on one worker with one
    JVM and neither is a twenty-minute run on one worker while the other idles; tests sharing other
    work say so with their own ``xdist_group`` mark. Groups are handed out in the order of their first
    test, so the Spark tests come first, then the ``slow`` ones (over a minute each), then the rest as
    collected: the longest work starts early instead of ending the run on one worker. Without xdist
    the marks do nothing, and the order is the run's order."""
    spark = {item.nodeid for item in items if "spark" in getattr(item, "fixturenames", ())}
    for item in items:
        if item.nodeid in spark:
            batch = "batch" in getattr(item, "fixturenames", ())
            item.add_marker(pytest.mark.xdist_group("spark" if batch else "spark-jobs"))
    items.sort(key=lambda item: 0 if item.nodeid in spark else 1 if item.get_closest_marker("slow") else 2)


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """``@pytest.mark.no_cover`` that holds under pytest-xdist too (``tests/untraced.py``)."""
    if item.get_closest_marker("no_cover") is None:
        yield
        return
    from tests.untraced import untraced

    with untraced():
        yield
