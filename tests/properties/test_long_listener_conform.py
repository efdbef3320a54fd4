"""The conformance machine's long orderly listener (issue 42, seed 001, B12).

The orderly ladder of the keyed and props families ends with a batch whose listener outlives its broker
lock (``composite._long_listener``, ``conform_orderly._outlive``): the clock passes the holder's grant
unclamped, another client is granted the queue and starts a batch inside the first, and both end. 4.9.8
permits it (the lock is checked before a batch only), so nothing fires — not in lockstep, not the
invariants, not the audit of the recorded trace, which states it as the observation ORDERLY_LOCK_OUTLIVED
with its cause — while the strict profile, which allows no duplicate, never runs it.
"""

from __future__ import annotations

import pytest

from rmqspec.model.events import ListRecorder
from rmqspec.model.model_factory import factory as model_factory
from rmqspec.properties.adapters import load_factory
from rmqspec.properties.program import Op, replay
from rmqspec.traces.checker import check

PROGRAM = [
    Op.of("init", flush="SYNC", orderly_max=0, queues=1, retry_max=0, swarm=0),
    Op.of("orderly_ladder", client=0, family="keyed", queue=0),
]


@pytest.mark.parametrize("factory", [model_factory, load_factory("rmqspec.impl:factory")], ids=["model", "mmap"])
def test_a_listener_outliving_its_lock_is_a_lawful_takeover(factory) -> None:
    recorder = ListRecorder()
    m = replay(PROGRAM, factory, recorder=recorder)
    assert m.coverage["orderly_lock_outlived"] == 1
    rows = [e.as_row() for e in recorder.events]
    starts = [r for r in rows if r["event"] == "orderly_start"]
    first, second = starts[-2:]
    assert first["client_id"] != second["client_id"] and first["queue_offset"] == second["queue_offset"]
    ends = [r for r in rows if r["event"] == "orderly_end" and r["seq"] > second["seq"]]
    assert [r["client_id"] for r in ends] == [first["client_id"], second["client_id"]]  # the second began inside
    grant = max(r["ts"] for r in rows if r["event"] == "lock" and r["status"] == "GRANTED"
                and r["client_id"] == first["client_id"] and r["seq"] < first["seq"])
    assert second["ts"] - grant > m.config.broker_lock_max_live_ms  # after the first's grant lapsed
    report = check(rows)
    assert report.violations == ()
    outlived = [f for f in report.observations if f.code == "ORDERLY_LOCK_OUTLIVED"]
    assert [f.seqs[-1] for f in outlived] == [second["seq"]]
    assert any(f.code == "DUPLICATED" for f in report.observations)  # what it costs


def test_the_strict_profile_never_runs_it() -> None:
    m = replay(PROGRAM, model_factory, lockstep=False, profile="strict")
    assert m.coverage["orderly_lock_outlived"] == 0
