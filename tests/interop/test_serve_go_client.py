"""The Apache RocketMQ Go client against ``rmqspec serve`` and against real RocketMQ (``make interop``; root + Go).

``interop/goclient`` is the scenario program of RealScenarios.java written with the independent Go client
``github.com/apache/rocketmq-client-go/v2`` (the version pinned in its go.mod): retry ladder + DLQ, delayed
delivery, transaction checks, queue locks as an orderly push consumer sees them. It is built once
(``go build`` into ``build/goclient``), run against ``rmqspec serve --config`` with the scenario timing
(delay levels 1s..18s, transactionTimeOut=2000, transactionCheckInterval=3000, transactionCheckMax=3,
SYNC_FLUSH, broker lock lifetime 5000 ms) inside a network namespace this module creates (only ``lo`` up),
and every figure is judged against the rule's window (``TOL_MS``); then serve gets SIGTERM, ``rmqspec store
verify`` must accept its store and ``rmqspec audit`` its trace. The same program then runs against a real
broker started with the same timing (``scripts/real-rocketmq start``), and serve's figures and outcomes
must match the real broker's (tests/interop/scenario_compare.py). The module runs twice (``ALSO_ON_5X``;
``INTEROP=quick`` leaves the second run out): serve as ``rocketmq-4.9`` against real 4.9.8, and serve
``--profile rocketmq-5.2`` (broker.conf plus ``transactionOpBatchInterval=1000``) against real 5.3.3.

What the Go client shows differs from the Java client in places (interop/goclient/*.go say why): the
program creates ``%RETRY%group`` itself (the Go client polls routes every 30 s), measures (b) and (c) from
the born time (a delayed or half message's store time is only in a system topic), and takes locks through
orderly push consumers (no public lockBatchMQ).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.interop import goclient
from tests.interop.realrmq import (
    DELAYS,
    RealRocketMQ,
    run_program,
)
from tests.interop.reports import report_table
from tests.interop.scenario_compare import TOL_MS, check_sleep_ms, comparison_table, go_event, go_measures
from tests.interop.served import Served, assert_stopped_cleanly_and_store_verifies, audit_served, served_in_namespace

REPO = Path(__file__).resolve().parents[2]
ALSO_ON_5X = True  # serve --profile rocketmq-5.2 against real 5.3.3 as well (tests/interop/conftest.py)
# (d) as the Go program reports it: (who, op, got); the phase row has no "got"
LOCK_EVENTS = [
    ("lockA", "lock (orderly consumer start, renewal every 1 s)", True),
    ("lockB", "lock (orderly consumer start + rebalance)", False),
    (None, None, None),
    ("lockA", "unsubscribe + rebalance right after a renewal", None),
    ("lockB", "lock (poll 100ms)", True),
    ("lockA", "lock after B took it", False),
    ("lockA", "unlock by B (owner, at its shutdown), then lock", True),
    ("lockA", "lock same queue in another group", True),
]


@pytest.fixture(scope="module")
def served(realrmq: RealRocketMQ, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """serve as the profile of the real broker it is compared with (``realrmq.version``)."""
    v = realrmq.version
    with served_in_namespace(tmp_path_factory.mktemp(f"serve-go-{v}"), f"rmqspec-go-{os.getpid()}-{v}",
                             version=v) as s:
        yield s


@pytest.fixture(scope="module")
def on_serve(go_scenarios: Path, served: Served) -> dict[str, dict[str, Any]]:
    """The Go program's rows against serve (about 70 s)."""
    started = time.monotonic()
    code, out, err = run_program(["ip", "netns", "exec", served.netns,
                                  *goclient.program(go_scenarios, "127.0.0.1:9876", served.root / "go-client.log")])
    (served.root / "go-scenarios.jsonl").write_text(out)
    (served.root / "go-scenarios.stderr").write_text(err)
    rows = goclient.checked(code, out, err)
    rows["done"]["wall_s"] = time.monotonic() - started
    return rows


@pytest.fixture(scope="module")
def go_scenarios() -> Path:
    return goclient.build()


@pytest.fixture(scope="module")
def on_real(go_scenarios_on_real, realrmq: RealRocketMQ) -> dict[str, dict[str, Any]]:
    """The Go program's rows against a real broker of the version under test, started with the same timing."""
    return go_scenarios_on_real(realrmq.version)


# --- serve alone: the rules ----------------------------------------------------------------------------------

def test_setup_reports_the_shortened_timing(on_serve) -> None:
    setup = on_serve["setup"]
    assert setup["client"].startswith("rocketmq-client-go/v2 v2.")
    assert {k: setup[k] for k in ("messageDelayLevel", "flushDiskType", "transactionTimeOut",
                                  "transactionCheckInterval", "transactionCheckMax")} == {
        "messageDelayLevel": DELAYS, "flushDiskType": "SYNC_FLUSH", "transactionTimeOut": "2000",
        "transactionCheckInterval": "3000", "transactionCheckMax": "3"}
    assert on_serve["done"]["wall_s"] < 150


def test_every_timing_within_the_rule_window(on_serve, realrmq: RealRocketMQ) -> None:
    measures = go_measures(on_serve, check_sleep_ms=check_sleep_ms(realrmq.version))
    assert [m.row() for m in measures if not m.in_window] == []


def test_retry_ladder_then_dlq(on_serve) -> None:
    a = on_serve["a_retry_dlq"]
    assert a["deliveries_of_poison"] == 4
    assert a["other_messages_consumed_once"] == {f"m{i}": 1 for i in range(10) if i != 3}
    attempts = a["attempts"]
    assert [x["reconsume_times"] for x in attempts] == [0, 1, 2, 3]
    assert [x["level_delay_ms"] for x in attempts[1:]] == [3000, 4000, 5000]
    original = attempts[0]
    retry_topic = "%RETRY%" + a["group"]
    for x, level in zip(attempts[1:], (3, 4, 5)):
        assert x["topic_seen_by_listener"] == a["topic"]
        p = x["properties"]
        assert (p["REAL_TOPIC"], p["REAL_QID"], p["RETRY_TOPIC"], p["DELAY"], p["WAIT"]) == (
            retry_topic, "0", a["topic"], str(level), "false")
        assert p["ORIGIN_MESSAGE_ID"] == original["offset_msg_id"]
        assert p["UNIQ_KEY"] == x["msg_id"] == original["msg_id"]
    assert [x["queue_offset"] for x in attempts[1:]] == [0, 1, 2]  # %RETRY%group queue 0
    dlq = a["dlq"]
    assert dlq["route_queues"] == 1
    (copy,) = dlq["pulled_messages"]
    assert (copy["topic"], copy["queue_offset"], copy["reconsume_times"]) == ("%DLQ%" + a["group"], 0, 4)
    assert (copy["properties"]["REAL_TOPIC"], copy["properties"]["DELAY"]) == (retry_topic, "0")
    assert copy["msg_id"] == original["msg_id"] and copy["born_ts"] == original["born_ts"]


def test_delayed_messages_wait_in_the_schedule_topic(on_serve) -> None:
    b = on_serve["b_delay"]
    # the send result's queue offset is the one in SCHEDULE_TOPIC_XXXX queue level-1; the level-3 queue
    # already holds the first retry copy of (a)
    assert [(m["key"], m["level"], m["queue_offset_in_result"]) for m in b["messages"]] == [
        ("d0", 2, 0), ("d1", 2, 1), ("d2", 2, 2), ("d3", 1, 0), ("d4", 3, 1)]
    for m in b["messages"]:
        p = m["delivered"]["properties"]
        assert (p["DELAY"], p["REAL_TOPIC"], p["REAL_QID"]) == (str(m["level"]), b["topic"], "0")
        assert m["delivered"]["msg_id"] == m["msg_id"]


def test_transaction_checks_then_discard(on_serve) -> None:
    c = on_serve["c_transaction"]
    sends = c["sends"]
    assert [(k, v["local_state"], v["half_queue_offset"]) for k, v in sends.items()] == [
        ("unknown", "UNKNOW", 0), ("commit", "COMMIT_MESSAGE", 1), ("rollback", "ROLLBACK_MESSAGE", 2)]
    checks = c["checks_of_unknown"]
    assert c["check_count"] == 3
    assert [x["TRANSACTION_CHECK_TIMES"] for x in checks] == ["1", "2", "3"]
    assert [x["queue_offset_in_half_queue"] for x in checks] == [3, 4, 5]
    assert {x["properties"]["WAIT"] for x in checks} == {"false"}
    assert {x["transaction_id"] for x in checks} == {sends["unknown"]["msg_id"]}
    (discarded,) = c["discarded_in_TRANS_CHECK_MAX_TIME_TOPIC"]
    assert discarded["properties"]["TRANSACTION_CHECK_TIMES"] == "3"
    assert discarded["msg_id"] == sends["unknown"]["msg_id"]
    visible = c["visible_to_consumer"]
    assert [(v["tags"], v["sys_flag"]) for v in visible] == [("commit", 8)]  # COMMIT visible, ROLLBACK never
    assert visible[0]["prepared_txn_offset"] == sends["commit"]["half_commitlog_offset"]


def test_queue_locks(on_serve) -> None:
    d = on_serve["d_lock"]
    assert [(e.get("who"), e.get("op"), e.get("got")) for e in d["events"]] == LOCK_EVENTS
    assert d["events"][2]["B_ever_got_it"] is False
    stop = go_event(d, "unsubscribe + rebalance right after a renewal")
    assert stop["renewal_seen"] is True and stop["queue_dropped"] is True
    oc = d["orderly_consumer"]
    assert oc["consumed_offsets"] == list(range(10)) and oc["in_order"] is True
    assert oc["foreign_lock_right_after_consuming_got"] is False


def test_store_verifies_after_sigterm(on_serve, served: Served) -> None:
    assert_stopped_cleanly_and_store_verifies(served)


def test_trace_audits_clean_but_for_the_deliberate_system_topic_read(on_serve, served: Served) -> None:
    """The only findings: the program reads TRANS_CHECK_MAX_TIME_TOPIC, which hands the discarded half to a
    consumer (SPEC §8.1's TXN_VISIBLE_BEFORE_COMMIT counts any deliver of the key) — once by PullFrom, and
    possibly once more by the Go pull consumer's own rebalance, which starts pulling the queue it subscribed."""
    violations, rows, summary = audit_served(served)
    offending = {(rows[v["seqs"][-1]]["event"], rows[v["seqs"][-1]]["topic"], rows[v["seqs"][-1]]["msg_key"])
                 for v in violations}
    assert {v["code"] for v in violations} == {"TXN_VISIBLE_BEFORE_COMMIT"}
    assert 1 <= len(violations) <= 2
    assert offending == {("deliver", "TRANS_CHECK_MAX_TIME_TOPIC", on_serve["c_transaction"]["sends"]["unknown"][
        "msg_id"])}
    assert set(summary["not_judged"]) >= {"LOST", "TXN_UNRESOLVED"}


# --- serve against the real broker ---------------------------------------------------------------------------

def test_every_timing_near_the_real_broker(on_serve, on_real, served: Served, realrmq: RealRocketMQ) -> None:
    """Writes comparison-go.md beside serve's store (make interop prints it at the end: conftest)."""
    measures = go_measures(on_serve, on_real, check_sleep_ms=check_sleep_ms(realrmq.version))
    table = comparison_table(measures, f"real {realrmq.version}", subject=f"rmqspec serve --profile {served.profile}")
    text = f"Go client ({on_serve['setup']['client']}), serve against real {realrmq.version}, tolerance {TOL_MS} ms" \
        f"\n{table}\n"
    (served.root / "comparison-go.md").write_text(text)
    report_table(f"serve-go-{realrmq.version}", text)
    assert [m.row() for m in measures if not m.ok] == []


def test_same_outcomes_as_the_real_broker(on_serve, on_real) -> None:
    def outcome(rows: dict[str, dict[str, Any]]) -> dict[str, Any]:
        a, b, c, d = (rows[k] for k in ("a_retry_dlq", "b_delay", "c_transaction", "d_lock"))
        return {
            "a": (a["deliveries_of_poison"], sorted(a["other_messages_consumed_once"].items()),
                  [(x["reconsume_times"], x["queue_offset"], sorted(x["properties"])) for x in a["attempts"]],
                  [(m["queue_offset"], m["reconsume_times"], sorted(m["properties"]))
                   for m in a["dlq"]["pulled_messages"]], a["dlq"]["route_queues"]),
            # (not the delivered copies' queue offsets: d3, level 1, falls due only 100 ms before d0; their
            # properties: test_stored_properties_of_delayed_and_transactional_records_as_the_real_broker)
            "b": [(m["key"], m["level"], m["queue_id_in_result"], m["queue_offset_in_result"]) for m in b["messages"]],
            "c": ([(k, v["local_state"], v["half_queue_offset"]) for k, v in c["sends"].items()],
                  [(x["TRANSACTION_CHECK_TIMES"], x["queue_offset_in_half_queue"], sorted(x["properties"]))
                   for x in c["checks_of_unknown"]],
                  [(m["queue_offset"], m["properties"]["TRANSACTION_CHECK_TIMES"])
                   for m in c["discarded_in_TRANS_CHECK_MAX_TIME_TOPIC"]],
                  [(v["tags"], v["sys_flag"], v["queue_offset"]) for v in c["visible_to_consumer"]]),
            "d": ([(e.get("who"), e.get("op"), e.get("got"), e.get("B_ever_got_it")) for e in d["events"]],
                  {k: d["orderly_consumer"][k] for k in ("consumed_offsets", "in_order",
                                                         "foreign_lock_right_after_consuming_got")}),
        }

    assert outcome(on_serve) == outcome(on_real)


def test_records_of_the_retry_ladder_have_the_real_sizes(on_serve, on_real) -> None:
    """(a) runs first on both fresh brokers, and topic and group names have the same length in every run:
    the commitlog offsets of the retry copies and of the DLQ copy are the sum of the sizes of every record
    stored before them (the ten sends, the schedule and %RETRY% copies), so they match byte for byte."""
    def offsets(rows: dict[str, dict[str, Any]]) -> list[Any]:
        a = rows["a_retry_dlq"]
        return [x["offset_msg_id"] for x in a["attempts"]] + [m["commitlog_offset"] for m in
                                                               a["dlq"]["pulled_messages"]]

    assert offsets(on_serve) == offsets(on_real)


def test_stored_properties_of_delayed_and_transactional_records_as_the_real_broker(on_serve, on_real) -> None:
    """The Go client sends no WAIT; real 4.9.8 then stores none in the records it rebuilds from the map of
    what the client sent — delayed copies, halves and what comes of them (fidelity B15)."""
    def keys(rows: dict[str, dict[str, Any]]) -> dict[str, Any]:
        b, c = rows["b_delay"], rows["c_transaction"]
        return {
            "delivered delayed copies": [sorted(m["delivered"]["properties"]) for m in b["messages"]],
            "committed message": [sorted(v["properties"]) for v in c["visible_to_consumer"]],
            "discarded half": [sorted(m["properties"]) for m in c["discarded_in_TRANS_CHECK_MAX_TIME_TOPIC"]],
        }

    assert keys(on_serve) == keys(on_real)
