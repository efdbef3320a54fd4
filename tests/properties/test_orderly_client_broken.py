"""A broken orderly client of our own (issue 42, the orderly bullet; seed 001, B9 and B12).

The conformance machine plays RocketMQ 4.9.8's orderly consumer unless told otherwise
(``conform_orderly.OrderlyClient``). The broken one has no local MessageQueueLock
(``local_queue_lock=False``): while the orderly ladder's long listener runs (``_outlive``) another consume
request of the same client takes the queue's next message, and its batch starts and ends inside the
window. No broker is at fault: lockstep sees nothing of its own; the invariants catch it, ORDERLY_CONCURRENT
(a client's second batch while its own window is open) with OFFSET_OVERRUN beside it (the shared
ProcessQueue's commit covers the first batch's message, still in flight), and so does the audit of the
recorded trace. The 4.9.8 client passes at the same budget, where a rebalance kept the queue of a running
batch (its consume lock is busy) and the lawful takeover of the long listener stays an observation.
"""

from __future__ import annotations

from typing import Any

import pytest

from rmqspec.model.broker import ModelBroker
from rmqspec.model.events import ListRecorder
from rmqspec.model.model_factory import factory as model_factory
from rmqspec.properties.adapters import load_factory
from rmqspec.properties.conform_orderly import OrderlyClient
from rmqspec.properties.program import Op, replay
from rmqspec.properties.runner import budget_settings, check_conformance
from rmqspec.traces.checker import check
from tests.untraced import budget_run

BROKEN = OrderlyClient(local_queue_lock=False)

# the long listener of tests/properties/test_long_listener_conform.py
PROGRAM = [
    Op.of("init", flush="SYNC", orderly_max=0, queues=1, retry_max=0, swarm=0),
    Op.of("orderly_ladder", client=0, family="keyed", queue=0),
]


def _model(clock: Any, config: Any, workdir: Any = None) -> ModelBroker:
    return ModelBroker(clock, config)


@budget_run
@pytest.mark.parametrize("lockstep", [True, False], ids=["lockstep", "no-lockstep"])
def test_a_client_without_the_queue_lock_is_caught(lockstep: bool) -> None:
    result = check_conformance(_model, lockstep=lockstep, settings=budget_settings(None, None, shrink=False),
                               orderly_client=BROKEN)
    assert not result.passed, "an orderly client without its MessageQueueLock passed"
    assert result.coverage.get("orderly_second_batch", 0) > 0
    failure = result.failure or ""
    assert "ORDERLY_CONCURRENT" in failure, failure[:2000]


@budget_run
def test_the_4_9_8_client_passes_and_keeps_a_queue_whose_batch_runs() -> None:
    result = check_conformance(_model, lockstep=False, settings=budget_settings(None, None, shrink=False))
    assert result.passed, (result.failure or "")[:2000]
    assert result.coverage.get("rebalance_kept_in_batch", 0) > 0  # a rebalance found the consume lock busy
    assert result.coverage.get("orderly_lock_outlived", 0) > 0
    assert result.coverage.get("orderly_second_batch", 0) == 0


@pytest.mark.parametrize("factory", [model_factory, load_factory("rmqspec.impl:factory")], ids=["model", "mmap"])
def test_the_recorded_trace_of_the_broken_client_is_a_violation(factory: Any) -> None:
    recorder = ListRecorder()
    with pytest.raises(AssertionError, match="ORDERLY_CONCURRENT"):
        replay(PROGRAM, factory, recorder=recorder, orderly_client=BROKEN)
    rows = [e.as_row() for e in recorder.events]
    opened: dict[str, dict] = {}  # client -> the start of its open window
    inside = []  # (the window's start, a start of the same client inside it)
    for r in rows:
        if r["event"] == "orderly_start":
            if r["client_id"] in opened:
                inside.append((opened[r["client_id"]], r))
            opened.setdefault(r["client_id"], r)
        elif r["event"] == "orderly_end":
            opened.pop(r["client_id"], None)
    assert len(inside) == 1
    first, second = inside[0]
    assert second["queue_offset"] > first["queue_offset"]  # the queue's next message
    report = check(rows)
    concurrent = [f for f in report.violations if f.code == "ORDERLY_CONCURRENT"]
    assert [f.seqs for f in concurrent] == [(first["seq"], second["seq"])]
    assert {f.code for f in report.violations} <= {"ORDERLY_CONCURRENT", "OFFSET_OVERRUN"}
