"""The conformance machine with a TransientStorePool (``model/committing.py``, seed D10).

- the mmap broker, whose write buffers are real, in lockstep with the model on drawn programs with
  ``transient_store_pool`` on: every result, event and kill's survivors equal, the invariants hold; a kill that
  found acknowledged records still uncommitted is reached;
- a broker that serves its write buffers before the commit (``tests/pool_brokers.py``) is caught in lockstep;
- a broker whose kill takes committed records, as a power loss would, is caught in lockstep and by the invariants
  alone: a position served before the kill holds another message after it (``QueueOrderProperty``: reads end at
  the committed position and a kill keeps what was committed, so only a power loss truncates below a served
  entry).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from rmqspec.model.config import BrokerConfig
from rmqspec.properties.adapters import load_factory
from rmqspec.properties.runner import budget_settings, check_conformance
from tests.untraced import budget_run

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
POOL_BROKEN = importlib.import_module("pool_brokers").POOL_BROKEN  # a helper module beside tests/

POOLED = BrokerConfig(flush="ASYNC", transient_store_pool=True)


def test_the_mmap_broker_with_a_pool_conforms_in_lockstep() -> None:
    result = check_conformance(load_factory("rmqspec.impl:factory"), config=POOLED,
                               settings=budget_settings(20, 40, shrink=False))
    assert result.passed, result.render()
    assert result.coverage["crash_recover:kill"] > 0
    assert result.coverage["crash:kill_uncommitted_at_risk"] > 0


def test_a_broker_serving_before_the_commit_is_caught_in_lockstep() -> None:
    result = check_conformance(POOL_BROKEN["serves_before_commit"], config=POOLED,
                               settings=budget_settings(20, 40, shrink=False))
    assert not result.passed
    assert "lockstep mismatch in pull(" in result.render()  # the model answers NO_NEW_MSG: not committed yet


@budget_run
@pytest.mark.parametrize("lockstep", [True, False], ids=["lockstep", "no-lockstep"])
def test_a_kill_that_takes_committed_records_is_caught_at_the_default_budget(lockstep: bool) -> None:
    result = check_conformance(POOL_BROKEN["kill_takes_committed"], config=POOLED, lockstep=lockstep,
                               settings=budget_settings(None, None, shrink=False))
    assert not result.passed, f"kill_takes_committed passed conform{'' if lockstep else ' --no-lockstep'}"
    failure = result.failure or ""
    if lockstep:
        assert "lockstep mismatch in " in failure, failure[:2000]
    else:
        assert "ORDER_QUEUE_GAP" in failure and "served before a kill, changed" in failure, failure[:2000]
