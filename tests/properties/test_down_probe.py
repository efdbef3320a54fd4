"""The conformance machine's request while the broker is down (``conform_time._probe_down``)."""

from __future__ import annotations

from typing import Any

import pytest

from rmqspec.impl.broker import MmapBroker
from rmqspec.properties.runner import budget_settings, check_conformance


class LocksWhileDown(MmapBroker):
    """Grants orderly locks while crashed: its lock table outlives the crash that should have taken it."""

    def lock_batch(self, group: str, client_id: str, mqs: Any) -> frozenset:
        now = self.clock.now()
        return frozenset(mq for mq, ok in self.locks.lock_batch(group, client_id, mqs, now,
                                                                 self.config.broker_lock_max_live_ms) if ok)


def _factory(clock: Any, config: Any = None, workdir: Any = None, recorder: Any = None) -> LocksWhileDown:
    return LocksWhileDown.open(workdir, clock, config, recorder)


@pytest.mark.parametrize("lockstep", [True, False])
def test_a_broker_that_answers_while_down_is_caught_in_both_modes(lockstep: bool) -> None:
    result = check_conformance(_factory, lockstep=lockstep, settings=budget_settings(shrink=False), shrink_budget=0)
    assert not result.passed
    assert "lock_batch" in (result.failure or "") and "while down" in (result.failure or ""), result.failure

