"""Seed C11 judged over the wire: the broker keeps the subscription with the greatest subVersion, not the last
heartbeat's, ``rmqspec serve`` against the model.

The property is ``tests/wire_programs.py``'s ``subscriptions_as_the_model`` on a served MmapBroker and a
ModelBroker (``tests/remoting/wire_pair.py``): up to three clients of one group heartbeat topic S with drawn tag
expressions and subVersions, drop S, unregister; pulls without the subscription flag show which subscription
filters (or SUBSCRIPTION_NOT_EXIST / SUBSCRIPTION_NOT_LATEST). The budget must reach an older subscription
kept, a newer one replacing it, a topic dropped by a heartbeat without it, and both refusals. The same program
runs against real 4.9.8 in ``tests/interop/test_wire_programs_real.py``.

``test_a_broken_subscription_table_is_caught``: the served broker's heartbeat is wrapped (that test only) so
that the last heartbeat wins, or so that a heartbeat without S does not drop it; the property must fail.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from rmqspec.model.config import BrokerConfig
from tests.remoting.wire_pair import served_pair
from tests.wire_programs import SETTINGS, subscriptions_as_the_model


def _run(reached: set[str], mutate: Callable[[Any], None] | None = None, **options: Any) -> None:
    def one(data: st.DataObject) -> None:
        with served_pair(BrokerConfig(), mutate) as target:
            subscriptions_as_the_model(target, data, reached)

    settings(**{**SETTINGS, **options})(given(st.data())(one))()


def test_the_greatest_sub_version_wins_over_the_wire() -> None:
    reached: set[str] = set()
    _run(reached, max_examples=40, derandomize=True)  # a reach assertion: the same draws under any profile
    assert {"older_kept", "newer_replaced", "topic_dropped", "SUBSCRIPTION_NOT_EXIST",
            "SUBSCRIPTION_NOT_LATEST", "FOUND"} <= reached


def _last_heartbeat_wins(broker: Any) -> None:
    heartbeat, arrivals = broker.heartbeat, itertools.count(1 << 40)
    broker.heartbeat = lambda group, client, subs: heartbeat(
        group, client, {t: (e, k, next(arrivals)) for t, (e, k, _v) in subs.items()})


def _dropped_topic_kept(broker: Any) -> None:
    heartbeat, known = broker.heartbeat, {}

    def keep(group: str, client: str, subs: Any) -> None:
        merged = {**known.get(group, {}), **subs}
        known[group] = merged
        heartbeat(group, client, merged)

    broker.heartbeat = keep


BROKEN = {"last_heartbeat_wins": _last_heartbeat_wins, "dropped_topic_kept": _dropped_topic_kept}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_a_broken_subscription_table_is_caught(name: str) -> None:
    with pytest.raises(AssertionError, match="pull with subVersion"):
        _run(set(), BROKEN[name], max_examples=60, database=None, derandomize=True, phases=[Phase.generate])
