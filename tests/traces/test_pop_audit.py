"""Pop rows audited by the reference checker (``traces/checks_table.py`` runs ``inv_tables.replay``, the pop
tables' replay among them) on the model broker's own recorded pop traces (``tests/traces/pop_runs.py``):
what the honest model did breaks no rule, what each broken pop broker did breaks its row of the pop tables.
The Spark audit's agreement on the same traces is in ``tests/spark/conftest.py``'s batch."""

from __future__ import annotations

from collections import Counter

import pytest
from pop_runs import model_pop_trace

from rmqspec.traces.checker import check
from tests.pop_brokers import POP_BROKEN

SEEDS = range(8)


def test_the_models_pop_traces_audit_clean():
    seen: Counter[str] = Counter()
    for seed in SEEDS:
        rows = model_pop_trace(seed)
        report = check(rows)
        assert report.violations == () and report.not_judged == {}, (seed, report.violations[:3])
        seen.update(r["event"] if r["event"] != "ack" else f"ack:{r['status']}" for r in rows)
    # what makes the audit mean something: hand-outs, revives, acks that met their checkpoint, late ones,
    # second ones, changes, orderly commits, kills
    assert seen["pop"] > 200 and seen["revive"] > 50 and seen["change_invisible"] > 5 and seen["crash"] > 5
    assert seen["ack:ACKED"] > 20 and seen["ack:LATE"] > 5 and seen["ack:COMMITTED"] > 5, seen


# broken broker -> (the code, the start of the reason: the table row it broke)
BROKEN_FOUND = {
    "pop_revive_early": ("MESSAGE_LIFECYCLE", "pop: POPPED --revive[expired]--> READY: revived at"),
    "pop_acked_revived": ("MESSAGE_LIFECYCLE", "pop: POPPED --revive[expired]--> READY: revived at"),
    "pop_orderly_not_blocked": ("LOCK_LIFECYCLE", "pop_order: INFLIGHT --pop[free]--> INFLIGHT"),
    "pop_reconsume_kept": ("MESSAGE_LIFECYCLE", "pop: POPPED --revive[expired]--> READY / revived"),
    "pop_ack_lost_on_restart": ("MESSAGE_LIFECYCLE", "pop: POPPED --revive[expired]--> READY: revived at"),
}


@pytest.mark.parametrize("name", sorted(POP_BROKEN))
def test_each_broken_pop_broker_is_found_in_its_own_trace(name):
    code, reason = BROKEN_FOUND[name]
    found = [f for seed in SEEDS for f in check(model_pop_trace(seed, name)).violations]
    assert found, name
    assert {f.code for f in found} == {code}, found[:3]
    assert any(f.reason.startswith(reason) for f in found), [f.reason for f in found[:3]]
