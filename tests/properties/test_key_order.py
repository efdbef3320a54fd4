"""Per-key order (issue 42, seed 001's producer half): one queue per sharding key and route.

A broken client of our own — ordered sends through ``SelectMessageQueueByRandom`` (``model/selectors.py``,
the selector a user picks by mistake) — scatters a key over the queues with no broker at fault. Only
ORDER_KEY_SPLIT sees it: in the conformance machine (lockstep and invariants alone, at the default
budget), in the reference client's own trace (the invariant ``KeyRoutedOnceProperty`` and the audit).
SelectMessageQueueByHash keeps a key on one queue per route; a topic that grew is a new route, and
the key may move once without a finding.
"""

from __future__ import annotations

from typing import Any

import pytest

from rmqspec.model.broker import ModelBroker
from rmqspec.model.clock import ManualClock
from rmqspec.model.config import default_config
from rmqspec.model.directory import Directory
from rmqspec.model.message import Message
from rmqspec.model.producer import Producer
from rmqspec.model.selectors import ByRandom, by_hash
from rmqspec.properties.history import History
from rmqspec.properties.inv_keys import check_key_split
from rmqspec.properties.runner import budget_settings, check_conformance
from rmqspec.traces.checker import check
from tests.untraced import budget_run


def _model(clock: Any, config: Any, workdir: Any = None) -> ModelBroker:
    return ModelBroker(clock, config)


@budget_run
@pytest.mark.parametrize("lockstep", [True, False], ids=["lockstep", "no-lockstep"])
def test_a_random_selector_is_caught_by_key_split_alone(lockstep: bool) -> None:
    result = check_conformance(_model, lockstep=lockstep, settings=budget_settings(None, None, shrink=False),
                               key_selector=lambda: ByRandom(seed=7))
    assert not result.passed, "ordered sends through ByRandom passed"
    failure = result.failure or ""
    assert "ORDER_KEY_SPLIT" in failure, failure[:2000]


@budget_run
def test_the_hash_selector_passes_and_ordered_sends_are_drawn() -> None:
    result = check_conformance(_model, lockstep=False, settings=budget_settings(None, None, shrink=False))
    assert result.passed, (result.failure or "")[:2000]
    assert result.coverage["send_keyed"] > 0


def _client_run(selector: Any) -> History:
    """The reference producer sends keyed messages (12 on a route of 4 queues, then 6 after the topic
    grew to 6) and records its own sends."""
    clock = ManualClock(1_700_000_000_000)
    broker = ModelBroker(clock, default_config())
    directory = Directory()
    directory.create_topic(broker, "Ledger", 4)
    history = History.for_config(default_config())
    producer = Producer(broker, clock, directory, "P-ledger", recorder=history, broker_records_events=False,
                        selector=selector)
    for i in range(12):
        producer.send(Message("Ledger", b"entry-%d" % i), sharding_key=f"acct-{i % 3}")
        clock.advance(5)
    directory.create_topic(broker, "Ledger", 6)  # the route grows: a key may move once
    for i in range(6):
        producer.send(Message("Ledger", b"later-%d" % i), sharding_key=f"acct-{i % 3}")
        clock.advance(5)
    return history


def test_the_reference_client_routes_a_key_to_one_queue_per_route() -> None:
    history = _client_run(by_hash)
    sends = history.of("send")
    assert {e.detail["route_queues"] for e in sends} == {4, 6}
    per_route = {(e.sharding_key, e.detail["route_queues"]): set() for e in sends}
    for e in sends:
        per_route[(e.sharding_key, e.detail["route_queues"])].add(e.queue_id)
    assert all(len(qs) == 1 for qs in per_route.values())
    assert check_key_split(history) == []
    assert not [f for f in check([e.as_row() for e in history.events]).violations if f.code == "ORDER_KEY_SPLIT"]


def test_a_random_selector_in_the_reference_client_is_caught_by_invariant_and_audit() -> None:
    history = _client_run(ByRandom(seed=3))
    found = check_key_split(history)
    assert found and {v.code for v in found} == {"ORDER_KEY_SPLIT"}
    report = check([e.as_row() for e in history.events])
    assert {f.code for f in report.violations} == {"ORDER_KEY_SPLIT"}
    assert {f.seqs[-1] for f in report.violations} == {v.seq for v in found}
