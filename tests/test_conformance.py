"""The conformance machine against the ModelBroker (vs itself, in lockstep) + sometimes checks."""

from __future__ import annotations

import pytest
from hypothesis import settings as hsettings

from rmqspec.model import ListRecorder
from rmqspec.model.model_factory import factory as model_factory
from rmqspec.properties.conformance import conformance_machine
from rmqspec.properties.program import parse, render, replay
from rmqspec.properties.runner import ConformanceTestCase, budget_settings, check_conformance
from tests.untraced import budget_run

# What must happen at least once within the ci budget (the "sometimes" properties).
SOMETIMES = (
    "send_plain", "send_keyed", "send_delayed", "send_batch", "pull", "pull_consume",
    "orderly_lock", "orderly_unlock", "orderly_rebalance", "orderly_takeover", "orderly_finish",
    "advance_small", "advance_large", "advance_to_deadline", "flush", "crash_recover",
    "txn_send_half", "txn_end", "probe_filtered", "send_back_failure",
    "pull:FOUND", "pull:NO_NEW_MSG", "pull:OFFSET_ILLEGAL", "send_back:RETRY", "send_back:DLQ",
    "retry_fired", "delay_fired", "dlq_landed", "lock:GRANTED", "lock:DENIED",
    "lock_takeover_after_expiry", "txn_check", "txn_discard", "check_answered",
    "crash_recover:kill", "crash_recover:power", "drained", "txn_end:COMMIT:SUCCESS",
    "txn_end:ROLLBACK:SUCCESS", "orderly_begin", "txn_half_before_check",
    # issue 15: SQL92 filters and an inconsistent group
    "send_with_properties", "probe_sql92", "inconsistent_group", "inconsistent_group:differs", "sql92:FOUND",
    "sql92:NO_MATCHED_MSG",
    "sql92:refused:SUBSCRIPTION_PARSE_FAILED",
    # issue 41: every deadline kind walked, the lock probe, the parameter probes, every message family
    "deadline:delay", "deadline:retry", "deadline:lock", "deadline:client_lock", "deadline:round",
    "deadline:half", "lock_probe", "pull_edge:below", "pull_edge:end", "pull_edge:past", "offset_reset:rewound",
    "end_tampered:SYSTEM_ERROR", "lock_edge:empty", "lock_edge:twice", "lock_edge:past", "send_edge:queue_past",
    "send_edge:level_past", "send_refused", "pull_edge:queue_past", "pull_error:SYSTEM_ERROR", "send_edge:room_fit",
    "send_edge:room_over", "send_edge:props_fit", "send_edge:props_over", "send_edge:props_delayed_fit",
    "send_edge:body_fit", "send_edge:props_delayed_over", "topic_edge:plain",
    "group_leave:rebalanced", "group_leave:last", "group_leave:stale_pull_refused", "group_leave:not_member",
    "down_probe",
    "family:plain", "family:keyed", "family:props", "family:delayed", "family:batch", "family:txn",
    "family:txn_checked",
    # issue 42: send modes, answers lost, batches as one append
    "send_oneway", "send_unanswered", "send_unanswered:SYNC", "send_unanswered:ASYNC", "family:oneway",
    "send_batch:atomic",
    # issue 42: a broadcasting group's two clients, each pulling from its own offsets
    "broadcast", "broadcast:joined", "broadcast:late_join", "broadcast:FOUND", "broadcast:dropped",
    "broadcast:both_consumed",
    # issue 42: retention — files deleted (aged past fileReservedTime, disk pressure), a full disk refusing
    # a send, the min offsets the machine sees move (answers' min, units gone, the commitlog's)
    "retention", "retention:age", "retention:deleted", "retention:refused", "retention:observed:min",
    "retention:observed:removed", "retention:observed:commitlog",
    # issue 42: WAIT=false sends; a SYNC power loss with puts answered before the group commit at risk
    "send_unwaited:SYNC", "send_unwaited:ASYNC", "crash:unwaited_at_risk",
    # issue 42: a SYNC power loss just after the group commit's pass; an ASYNC thorough flush pass
    "crash:after_group_commit", "flush:thorough",
    # issue 42: a hung disk under SYNC_FLUSH: sends answered FLUSH_DISK_TIMEOUT, a power loss during the stall,
    # the group commit's pass after it
    "disk_stall", "send:flush_disk_timeout", "crash:disk_stalled", "disk_stall:recovered",
    # issue 42: an orderly listener outlives its broker lock and another client starts inside its batch
    "orderly_lock_outlived",
)

_RESULT = {}


def _model_run():
    if "r" not in _RESULT:
        _RESULT["r"] = check_conformance(model_factory, settings=budget_settings(120, 40))
    return _RESULT["r"]


@budget_run
@pytest.mark.slow
@pytest.mark.xdist_group("model-run")  # with the test below: one _model_run per pytest-xdist worker
def test_model_broker_conforms_in_lockstep() -> None:
    result = _model_run()
    assert result.passed, result.render()
    assert result.examples >= 40


@budget_run
@pytest.mark.xdist_group("default-run")  # with tests/properties/test_coverage.py: one run per worker
def test_mmap_broker_conforms_in_lockstep() -> None:
    """SPEC §7: MmapBroker (real mmap files, real recovery) agrees with the model step by step."""
    from tests.default_runs import mmap_default_run

    result = mmap_default_run()
    assert result.passed, result.render()
    assert result.examples >= 40
    assert result.coverage.get("crash_recover:power", 0) > 0, "power loss was exercised"
    assert result.coverage.get("crash_recover:torn", 0) > 0, "and a power loss that tore the unflushed tail"


POP_LADDER = ("pop_prelude", "pop:found", "pop:before_the_end", "pop:changed", "pop:revived",
              "pop:orderly", "pop:orderly_blocked", "pop:orderly_again", "pop:across_kill")


@budget_run
def test_mmap_broker_pops_in_lockstep_under_a_5x_profile() -> None:
    """Issue 40: under 5.3.3's profile MmapBroker declares POP, so every example's prelude runs the pop ladder
    (properties/conform_pop.py) against the model in lockstep, a kill with handles out included."""
    from rmqspec.properties.adapters import load_factory

    result = check_conformance(load_factory("rmqspec.impl:factory"), profile="rocketmq-5.2",
                               settings=budget_settings())
    assert result.passed, result.render()
    missing = [name for name in POP_LADDER if result.coverage.get(name, 0) == 0]
    assert not missing, f"the pop ladder never reached {missing}; coverage {result.coverage}"


@budget_run
@pytest.mark.xdist_group("model-run")
def test_sometimes_every_interesting_outcome_happens() -> None:
    coverage = _model_run().coverage
    missing = [name for name in SOMETIMES if coverage.get(name, 0) == 0]
    assert not missing, f"never happened within the ci budget: {missing}; coverage {coverage}"


def test_strict_profile_passes_for_the_model_without_lockstep() -> None:
    result = check_conformance(model_factory, lockstep=False, profile="strict",
                               settings=budget_settings(10, 20))
    assert result.passed, result.render()


def test_recorded_trace_is_a_quiescent_spec_trace() -> None:
    traces: list[ListRecorder] = []

    def make() -> ListRecorder:
        traces.append(ListRecorder())
        return traces[-1]

    result = check_conformance(model_factory, settings=budget_settings(5, 20),
                               recorder_factory=make)
    assert result.passed, result.render()
    for rec in traces:
        names = [e.event for e in rec.events]
        assert names[-1] == "drain" and names.count("drain") >= 1
        assert [e.seq for e in rec.events] == list(range(len(rec.events)))
        assert all(e.ts >= 0 for e in rec.events)
    assert any(e.event == "store" for rec in traces for e in rec.events)


def test_program_replays_and_round_trips() -> None:
    cls = conformance_machine(model_factory)
    machine = cls()
    machine.init(queues=2, retry_max=1, orderly_max=1, flush="SYNC")
    machine.send_plain(0, 1, "TagA", (), False)
    machine.pull_consume(0, 1, "RECONSUME_LATER", -1, 0, "none")
    machine.advance_large(3_600_000)
    machine.teardown()
    text = render(machine.program)
    program = parse(text)
    assert program == machine.program
    again = replay(program, model_factory)
    assert again.coverage["send_back:RETRY"] >= 1


class TestModelAsCase(ConformanceTestCase):
    """The importable TestCase helper, on a small budget."""

    factory = staticmethod(model_factory)
    max_examples = 5
    steps = 15


def test_machine_class_runs_under_hypothesis_directly() -> None:
    from hypothesis.stateful import run_state_machine_as_test

    cls = conformance_machine(model_factory)
    run_state_machine_as_test(cls, settings=hsettings(budget_settings(3, 10)))
    assert len(cls.examples) >= 3
