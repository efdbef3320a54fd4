"""RocketMQ 5.3.3 (official release jars) serves the 4.x remoting protocol: the 4.9.8 clients' scenarios.

``make interop`` (``INTEROP=full``, the default; ``quick`` leaves this module out) starts a real
5.3.3 name server and broker (``scripts/real-rocketmq start --version 5.3.3``) with the scenario
timing, runs the Java scenario program on the 4.9.8 client against it, and holds every figure to the
rule's window and to the figure the same program measures, in the same session, against real 4.9.8.
What 5.3.3 does differently is asserted as exactly that difference (docs/fidelity.md, "RocketMQ 5.3.3
under the 4.x clients"). This tier checks start-up, protocol and figures only; the model's 5.x
profile is a separate piece of work.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.interop import goclient
from tests.interop.realrmq import V5, RealRocketMQ, run_program, scenario_conf, scenario_rows
from tests.interop.scenario_compare import V5_CHECK_SLEEP_MS, comparison_table, go_measures, java_measures

# 5.x's SendMessageProcessor.processRequest always calls buildMsgContext, which puts the broker's region
# and trace switch into the message's properties; 4.9.8 calls it only when a send hook is registered.
V5_ADDED_PROPERTIES = {"MSG_REGION": "DefaultRegion", "TRACE_ON": "true"}

TIER_5X = True  # the 5.x tier (INTEROP=5x; tests/interop/conftest.py)


@pytest.fixture(scope="module")
def both(java_scenarios_on_real) -> tuple[dict[str, Any], dict[str, Any]]:
    """(5.3.3's scenario results, 4.9.8's), the Java 4.9.8 client against each."""
    return java_scenarios_on_real(V5), java_scenarios_on_real("4.9.8")


def test_every_timing_within_the_rule_and_near_4_9_8(both) -> None:
    rows = java_measures(*both, check_sleep_ms=V5_CHECK_SLEEP_MS)
    print("\nJava client 4.9.8\n" + comparison_table(rows, "real 4.9.8", subject=f"real {V5}"))
    assert [m for m in rows if not m.ok] == []


def test_retry_ladder_and_dlq_as_in_4_9_8(both) -> None:
    v5, v4 = both[0]["a_retry_dlq"], both[1]["a_retry_dlq"]
    assert v5["deliveries_of_poison"] == v4["deliveries_of_poison"] == 4
    assert [a["reconsume_times"] for a in v5["attempts"]] == [0, 1, 2, 3]
    assert [a["level_delay_ms"] for a in v5["attempts"][1:]] == [a["level_delay_ms"] for a in v4["attempts"][1:]]
    for a5, a4 in list(zip(v5["attempts"], v4["attempts"], strict=True))[1:]:
        assert set(a5["properties"]) == set(a4["properties"]) | set(V5_ADDED_PROPERTIES)
    (dlq,) = v5["dlq"]["pulled_messages"]
    assert (dlq["queue_offset"], dlq["reconsume_times"]) == (0, 4)
    assert v5["dlq"]["topic_config"] == v4["dlq"]["topic_config"] == {"perm": 6, "read_queues": 1,
                                                                      "write_queues": 1}


def test_delayed_messages_and_the_region_properties(both) -> None:
    v5, v4 = both[0]["b_delay"], both[1]["b_delay"]
    for m5, m4 in zip(v5["messages"], v4["messages"], strict=True):
        assert (m5["key"], m5["level"], m5["stored_topic"], m5["stored_queue_id"]) == (
            m4["key"], m4["level"], "SCHEDULE_TOPIC_XXXX", m4["level"] - 1)
        added = {k: v for k, v in m5["stored_properties"].items() if k not in m4["stored_properties"]}
        assert added == V5_ADDED_PROPERTIES
        assert set(m4["stored_properties"]) <= set(m5["stored_properties"])


def test_transaction_checks_discard_and_visibility(both) -> None:
    v5, v4 = both[0]["c_transaction"], both[1]["c_transaction"]
    assert v5["check_count"] == v4["check_count"] == 3
    assert [c["TRANSACTION_CHECK_TIMES"] for c in v5["checks_of_unknown"]] == ["1", "2", "3"]
    assert [c["queue_offset_in_half_queue"] for c in v5["checks_of_unknown"]] == [
        c["queue_offset_in_half_queue"] for c in v4["checks_of_unknown"]]
    (discarded,) = v5["discarded_in_TRANS_CHECK_MAX_TIME_TOPIC"]
    assert discarded["properties"]["TRANSACTION_CHECK_TIMES"] == "3"
    assert [(v["tags"], v["sys_flag"]) for v in v5["visible_to_consumer"]] == [("commit", 8)]


def test_queue_locks_as_in_4_9_8(both) -> None:
    v5, v4 = both[0]["d_lock"], both[1]["d_lock"]
    assert [e.get("got") for e in v5["events"]] == [e.get("got") for e in v4["events"]]
    oc = v5["orderly_consumer"]
    assert oc["consumed_offsets"] == list(range(10)) and oc["in_order"] is True


# --- the Go client v2 -----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def both_go(go_scenarios_on_real) -> tuple[dict[str, Any], dict[str, Any]]:
    """(5.3.3's scenario results, 4.9.8's), the Go client against each."""
    return go_scenarios_on_real(V5), go_scenarios_on_real("4.9.8")


def test_go_client_every_timing_within_the_rule_and_near_4_9_8(both_go) -> None:
    rows = go_measures(*both_go, check_sleep_ms=V5_CHECK_SLEEP_MS)
    print("\nGo client v2\n" + comparison_table(rows, "real 4.9.8", subject=f"real {V5}"))
    assert [m for m in rows if not m.ok] == []


def test_go_client_same_outcomes_as_on_4_9_8_but_the_region_properties(both_go) -> None:
    v5, v4 = both_go
    a5, a4 = v5["a_retry_dlq"], v4["a_retry_dlq"]
    assert a5["deliveries_of_poison"] == a4["deliveries_of_poison"] == 4
    for x5, x4 in zip(a5["attempts"], a4["attempts"], strict=True):
        assert x5["reconsume_times"] == x4["reconsume_times"]
        assert set(x5["properties"]) - set(x4["properties"]) <= set(V5_ADDED_PROPERTIES)
    assert [(m["queue_offset"], m["reconsume_times"]) for m in a5["dlq"]["pulled_messages"]] == [(0, 4)]
    c5, c4 = v5["c_transaction"], v4["c_transaction"]
    assert c5["check_count"] == c4["check_count"] == 3
    assert [(v["tags"], v["sys_flag"]) for v in c5["visible_to_consumer"]] == [("commit", 8)]
    d5, d4 = v5["d_lock"], v4["d_lock"]
    assert [(e.get("who"), e.get("op"), e.get("got")) for e in d5["events"]] == [
        (e.get("who"), e.get("op"), e.get("got")) for e in d4["events"]]
    assert d5["orderly_consumer"]["in_order"] is True


def test_finished_halves_are_checked_while_their_op_waits_in_a_batch(tmp_path: Path) -> None:
    """V7: from 5.1.0 the op message that marks a half COMMITTED or ROLLED BACK is written by
    TransactionalOpBatchService, up to ``transactionOpBatchInterval`` after the END_TRANSACTION. A check
    round that falls between ``transactionTimeOut`` and that write checks the finished half; its re-put
    copy never gets an op, so it is checked ``transactionCheckMax`` times and discarded — while the
    committed message stays visible. An interval far beyond the timeout makes the race certain (4.9.8
    writes the op at once: only the UNKNOWN half is ever checked). The Go program's (c), answering
    UNKNOWN to every check."""
    real = RealRocketMQ(V5)
    binary = goclient.build()
    conf = [c for c in scenario_conf(V5) if not c.startswith("transactionOpBatchInterval=")]
    try:
        started = real.start(tmp_path, *conf, "transactionOpBatchInterval=20000")
        code, out, err = run_program(started.in_netns(
            *goclient.program(binary, started.env["RMQ_NAMESRV"], tmp_path / "go-client.log"), "c"))
    finally:
        real.stop(tmp_path)
    rows = scenario_rows(out)
    assert code == 0 and "error" not in json.dumps(rows), out[-4000:] + err[-4000:]
    c = rows["c_transaction"]
    checked = sorted((x["tags"], x["TRANSACTION_CHECK_TIMES"]) for x in c["checks_of_unknown"])
    assert checked == sorted((tag, n) for tag in ("unknown", "commit", "rollback") for n in ("1", "2", "3"))
    assert sorted(m["properties"]["TAGS"] for m in c["discarded_in_TRANS_CHECK_MAX_TIME_TOPIC"]) == [
        "commit", "rollback", "unknown"]
    assert [v["tags"] for v in c["visible_to_consumer"]] == ["commit"]
