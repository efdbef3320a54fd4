"""The conformance machine's broadcasting clients (issue 42, ``properties/conform_broadcast.py``).

Group ``GB``'s clients ``b1`` and ``b2`` each pull every queue from their own offsets (a client starts at
the broker's max offset), drop what their listener fails and commit in their own offsets file: the rows
say so, the broker's offset table never hears of them, a power loss under them passes, and the recorded
trace audits clean. The default budget reaches them in every example (the prelude, the beat, the drain);
``pulls_exclusive_per_group`` (``tests/broken_brokers.py``: what one client of a group got is not returned
to another) is caught there in lockstep and by NoLossPerClientProperty alone (``test_broken_brokers.py``)
— and only because of them: the machine without its broadcasting clients passes it.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis.stateful import run_state_machine_as_test

from rmqspec.model.events import ListRecorder
from rmqspec.model.model_factory import factory as model_factory
from rmqspec.properties import constant_pool
from rmqspec.properties.adapters import load_factory
from rmqspec.properties.conformance import conformance_machine
from rmqspec.properties.program import Op, replay
from rmqspec.properties.runner import budget_settings, check_conformance
from rmqspec.traces.checker import check
from tests.broken_brokers import BROKEN
from tests.untraced import budget_run

GB = "GB"


def _rows(machine: Any, *events: str) -> list[Any]:
    return [e for e in machine.history.events if e.group == GB and (not events or e.event in events)]


def test_the_prelude_drives_two_clients_from_their_own_offsets() -> None:
    cls = conformance_machine(model_factory)
    m = cls()
    m.init(queues=2, retry_max=1, orderly_max=1, flush="SYNC")
    m.broadcast_prelude(1, 3)  # b2 joins, K1 sent, b1 joins after it, K2 sent, b2 then b1 consume
    starts = {(e.client_id, e.queue_id): e.queue_offset for e in _rows(m, "commit_offset")
              if "from_where" in e.detail}
    assert starts == {("b2", 0): 0, ("b2", 1): 0, ("b1", 0): 0, ("b1", 1): 1}  # b1 starts past K1
    consumed = {(e.client_id, e.queue_offset) for e in _rows(m, "consume")}
    assert consumed == {("b2", 0), ("b2", 1), ("b1", 1)}  # K2 by both, K1 by b2 only
    assert all(e.detail["message_model"] == "BROADCASTING" and e.client_id in ("b1", "b2") for e in _rows(m))
    broker = m.ls.candidate
    assert not [k for k in broker.offsets.table if k[0] == GB]  # offsets stay with the clients
    assert {"broadcast:late_join", "broadcast:both_consumed"} <= set(cls.coverage)
    m.teardown()  # drains: judged by every invariant


def test_a_failed_message_is_dropped_never_sent_back() -> None:
    program = [
        Op.of("init", flush="SYNC", orderly_max=1, queues=1, retry_max=1, swarm=0),
        Op.of("broadcast", client=0, which=0, n=1, result="SUCCESS"),
        Op.of("send_plain", keys=(), props=False, queue=0, tags="TagA", topic=0),
        Op.of("broadcast", client=0, which=0, n=4, result="RECONSUME_LATER"),
    ]
    m = replay(program, model_factory)
    (consume,) = _rows(m, "consume")
    assert consume.status == "RECONSUME_LATER" and consume.detail["dropped"] is True
    assert not _rows(m, "send_back")
    assert [e.queue_offset for e in _rows(m, "commit_offset")] == [0, 1]  # start, then past the dropped one


@pytest.mark.parametrize("lockstep", [True, False], ids=["lockstep", "no-lockstep"])
def test_a_power_loss_under_the_clients_is_no_loss(lockstep: bool) -> None:
    """ASYNC mmap broker: b1 consumes three unflushed messages and commits 3, the power fails (they go),
    two more land at the freed positions: b1's offset is past the queue's end (OFFSET_ILLEGAL: its
    offsets file is fixed to the broker's answer) and the reused positions are not its loss
    (``skipped_by_saved_offsets``); b2, behind, consumes them. No invariant fires, the trace audits clean."""
    program = [
        Op.of("init", flush="ASYNC", orderly_max=1, queues=1, retry_max=1, swarm=0),
        Op.of("broadcast", client=0, which=0, n=1, result="SUCCESS"),
        Op.of("broadcast", client=1, which=0, n=1, result="SUCCESS"),
        *[Op.of("send_plain", keys=(), props=False, queue=0, tags="TagA", topic=0)] * 3,
        Op.of("broadcast", client=0, which=0, n=8, result="SUCCESS"),
        Op.of("crash_recover", kind="power"),
        *[Op.of("send_plain", keys=(), props=False, queue=0, tags="TagB", topic=0)] * 2,
        Op.of("broadcast", client=0, which=0, n=8, result="SUCCESS"),
        Op.of("broadcast", client=1, which=0, n=8, result="SUCCESS"),
    ]
    recorder = ListRecorder()
    m = replay(program, load_factory("rmqspec.impl:factory"), lockstep=lockstep, recorder=recorder)
    (crash,) = m.history.of("crash")
    assert len(crash.detail["at_risk"]) >= 3
    assert [e.queue_offset for e in _rows(m, "commit_offset") if e.detail.get("fixed")] == [2]
    report = check([e.as_row() for e in recorder.events])
    assert report.violations == ()


def test_the_recorded_trace_of_the_clients_audits_clean() -> None:
    recorder = ListRecorder()
    program = [
        Op.of("init", flush="SYNC", orderly_max=1, queues=2, retry_max=1, swarm=0),
        Op.of("broadcast", client=0, which=0, n=1, result="SUCCESS"),
        Op.of("send_plain", keys=(), props=False, queue=1, tags="TagA", topic=0),
        Op.of("broadcast", client=1, which=0, n=1, result="SUCCESS"),
        *[Op.of("send_plain", keys=(), props=False, queue=q, tags="TagB", topic=0) for q in (0, 1, 1)],
        Op.of("broadcast", client=0, which=1, n=2, result="RECONSUME_LATER"),
        Op.of("broadcast", client=1, which=0, n=8, result="SUCCESS"),
    ]
    replay(program, model_factory, recorder=recorder)
    rows = [e.as_row() for e in recorder.events]
    assert {r["client_id"] for r in rows if r["group"] == GB} == {"b1", "b2"}
    report = check(rows)
    assert report.violations == () and not [f for f in report.observations if f.keys.get("group") == GB]


@budget_run
def test_the_default_budget_reaches_the_broadcasting_clients() -> None:
    """``rmqspec conform``'s default budget (the model in lockstep): every example's prelude runs them."""
    result = check_conformance(model_factory, settings=budget_settings(shrink=False))
    assert result.passed, (result.failure or "")[:2000]
    for what in ("broadcast", "broadcast:joined", "broadcast:late_join", "broadcast:FOUND", "broadcast:dropped",
                 "broadcast:both_consumed"):
        assert result.coverage.get(what, 0) >= result.examples // 2, (what, result.coverage.get(what))


@budget_run
def test_the_broken_broker_is_caught_in_lockstep_at_a_broadcasting_clients_pull() -> None:
    result = check_conformance(BROKEN["pulls_exclusive_per_group"], settings=budget_settings(shrink=False))
    assert not result.passed
    assert f"lockstep mismatch in pull({GB!r}" in (result.failure or ""), (result.failure or "")[:2000]


@budget_run
@pytest.mark.parametrize("lockstep", [True, False], ids=["lockstep", "no-lockstep"])
def test_the_machine_without_its_broadcasting_clients_passes_the_broken_broker(lockstep: bool) -> None:
    """Only the broadcasting rule reaches ``pulls_exclusive_per_group``: with the clients idle (the same
    draws; the ``broadcast`` action and the drain's broadcasting part do nothing) the default budget passes."""
    cls = conformance_machine(BROKEN["pulls_exclusive_per_group"], lockstep=lockstep)

    class WithoutBroadcasting(cls):  # type: ignore[misc, valid-type]
        def broadcast(self, client: int, which: int, n: int, result: str) -> None:
            self._idle("broadcast")

        def _broadcast_all(self) -> bool:
            return False

    constant_pool.pin()
    run_state_machine_as_test(WithoutBroadcasting, settings=budget_settings(shrink=False))
    assert WithoutBroadcasting.coverage["idle:broadcast"] > 0 and len(WithoutBroadcasting.examples) >= 40
