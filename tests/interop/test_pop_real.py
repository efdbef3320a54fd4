"""Pop consumption (RocketMQ 5.x, issue 40) against real RocketMQ 5.3.3 and 5.5.1: the facts the model is held to.

Each broker is started once per module (``scripts/real-rocketmq start``, SYNC_FLUSH, the pop settings at
their defaults: reviveInterval 1000 ms, reviveQueueNum 8, enableRetryTopicV2 false, popFromRetryProbability
20, buffer merge off) and measured by ``interop/pop_probe.py`` (rmqspec's own wire client,
``remoting/pop_ops.py``) run inside the fixture's network namespace, invisible time 3000 ms, the crash
check last (kill -9, restart on the store). The tests assert what both versions do; the figures (revive
lateness, poll times, the crash's redeliveries) are in the report beside the JSON in the test's tmp dir and
in docs/pop-facts.md.

Run time about 3-5 minutes (two brokers' start-ups and restarts on a loaded machine, ~30 s of probing each).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.interop.realrmq import Started, resolved

REPO = Path(__file__).resolve().parents[2]
CONF = ["flushDiskType=SYNC_FLUSH"]
INVISIBLE_MS = 3000
CHECKS = "revive,ack,change,orderly,empty,retry_share,no_dlq,crash"
LATE_MS = 10_000  # the latest acceptable revive after popTime + invisibleTime (measured 2.1-3.3 s)

TIER_5X = True  # the 5.x tier (INTEROP=5x; tests/interop/conftest.py)



def _on_real(tmp: Path, version: str, conf: list[str], checks: str) -> dict[str, Any]:
    real = resolved(version)
    try:
        started: Started = real.start(tmp, *conf)
        crash: list[str] = []
        if "crash" in checks:
            kill, restart = real.crash_commands(started)
            crash = ["--crash-cmd", kill, "--restart-cmd", restart]
        out = tmp / "pop-probe.json"
        cmd = started.in_netns(sys.executable, "-m", "interop.pop_probe", "--broker",
                               f"rocketmq://{started.env['RMQ_NAMESRV']}", "--checks", checks, "--invisible-ms",
                               str(INVISIBLE_MS), *crash, "--json", str(out))
        done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600, check=False)
        assert done.returncode == 0, f"pop probe failed ({done.returncode}):\n{done.stdout}\n{done.stderr[-4000:]}"
        (tmp / "pop-probe.report.txt").write_text(done.stdout)
        print(f"--- {version}\n{done.stdout}")
        result = json.loads(out.read_text())
        result["version"] = version
        return result
    finally:
        subprocess.run(real.cmd("kill", "--dir", str(tmp)), capture_output=True, timeout=60, check=False)
        real.stop(tmp)


@pytest.fixture(scope="module", params=["5.3.3", "5.5.1"])
def real(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _on_real(tmp_path_factory.mktemp(f"pop-real-{request.param}"), request.param, CONF, CHECKS)


@pytest.fixture(scope="module", params=["5.3.3", "5.5.1"])
def real_v2(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The same broker with enableRetryTopicV2=true (revive only)."""
    return _on_real(tmp_path_factory.mktemp(f"pop-real-v2-{request.param}"), request.param,
                    [*CONF, "enableRetryTopicV2=true"], "revive")


def _check(result: dict[str, Any], name: str) -> dict[str, Any]:
    x = result["checks"][name]
    assert "error" not in x, x
    return x


def test_defaults(real: dict[str, Any]) -> None:
    assert real["config"]["enableRetryTopicV2"] == "false" and real["config"]["popFromRetryProbability"] == "20"
    assert real["config"]["reviveQueueNum"] == "8" and real["config"]["popResponseReturnActualRetryTopic"] == "false"


def test_unacked_message_is_invisible_then_revived_into_the_retry_topic(real: dict[str, Any]) -> None:
    x = _check(real, "revive")
    topic, group = x["topic"], x["group"]
    assert len(x["popped"]) == 6 and x["before_due"] == []  # nothing again before popTime + invisibleTime
    assert sorted(a["body"] for a in x["again"]) == sorted(p["body"] for p in x["popped"])
    # revived into %RETRY%group_topic (v1: enableRetryTopicV2 false) queue 0, reconsumeTimes 1, 1ST_POP_TIME
    assert x["retry_topics"] == [f"%RETRY%{group}_{topic}"]
    assert {r["reconsume"] for r in x["retry_records"]} == {1} and len(x["retry_records"]) == 6
    assert {r["first_pop_time"] for r in x["retry_records"]} == {str(x["first_answer"]["pop_time"])}
    # popped again under the original topic name, with a POP_CK the broker wrote (topic type 1)
    for a in x["again"]:
        assert a["topic"] == topic and a["reconsume"] == 1 and a["broker_made_ck"], a
        assert a["handle"].split(" ")[4] == "1" and a["first_pop_time"] == str(x["first_answer"]["pop_time"]), a
    late = x["lateness_ms"]
    assert late is not None and late["min"] >= 0 and late["max"] <= LATE_MS, late


def test_first_answer_header(real: dict[str, Any]) -> None:
    a = _check(real, "revive")["first_answer"]
    assert a["invisible_time"] == INVISIBLE_MS and 0 <= a["revive_qid"] < 8 and a["rest_num"] == 0
    assert a["start_offset_info"] == "0 0 0" and a["msg_offset_info"] == "0 0 0,1,2,3,4,5"
    for p in _check(real, "revive")["popped"]:  # the client-built handle: ck offset = the run's start
        assert p["handle"].split(" ")[0] == "0" and not p["broker_made_ck"] and p["reconsume"] == 0


def test_acked_messages_never_come_back(real: dict[str, Any]) -> None:
    x = _check(real, "ack")
    assert x["waited_ms"] >= 2 * INVISIBLE_MS
    for name in ("single", "batch"):
        assert x[name]["popped"] == 4 and set(x[name]["codes"]) == {0} and x[name]["again"] == [], x[name]


def test_change_invisible_time_postpones_the_redelivery(real: dict[str, Any]) -> None:
    x = _check(real, "change")
    assert x["change_code"] == 0 and x["change_ext"]["invisibleTime"] == str(x["new_invisible_ms"])
    old, new = x["old_handle"].split(" "), x["new_handle"].split(" ")
    # the new handle: ck offset = the message's offset, the answer's popTime and invisibleTime, same revive qid
    assert new[0] == old[7] and new[1] == x["change_ext"]["popTime"] and new[2] == str(x["new_invisible_ms"])
    assert new[3] == old[3] == x["change_ext"]["reviveQid"] and new[4:] == old[4:]
    assert len(x["again"]) == 1 and x["again_after_new_due_ms"][0] >= 0  # not at the old due: after the new one
    assert x["again"][0]["reconsume"] == 1 and x["ack_new_handle_code"] == 0


def test_orderly_pop_blocks_the_queue(real: dict[str, Any]) -> None:
    x = _check(real, "orderly")
    assert [r["body"] for r in x["first"]] == ["orderly-0"] and x["first_answer_revive_qid"] == 999
    # the same attemptId passes the block: the same message again, no order count
    same = [(r["body"], r["reconsume"], r["order_count_info"]) for r in x["same_attempt"]]
    assert same == [("orderly-0", 0, "0 0 0")], same
    # an ack with the first (stale) handle is answered 0 but releases nothing (commitAndNext: popTime differs)
    assert x["stale_ack_codes"] == [0]
    assert x["blocked_pops"] == [] and x["ack_codes"] == [0]  # nothing else while the first is in flight
    assert [r["body"] for r in x["second"]] == ["orderly-1"]
    # the expired one comes again from the queue itself, its order count as reconsume times
    assert [(r["body"], r["reconsume"], r["topic"]) for r in x["second_again"]] == [("orderly-1", 1, r["topic"])
                                                                                   for r in x["second"]]
    assert x["second_again"][0]["order_count_info"] == "0 qo0%1 1;0 0 1" and not x["second_again"][0]["broker_made_ck"]
    assert x["second_again_after_due_ms"][0] >= 0 and x["ack2_codes"] == [0]
    assert [r["body"] for r in x["third"]] == ["orderly-2"]


def test_empty_pop_answers(real: dict[str, Any]) -> None:
    x = _check(real, "empty")
    for row in x["rows"]:
        assert (row["code"], row["remark"]) == (210, "NO_MESSAGE_IN_QUEUE"), row  # POLLING_TIMEOUT
        assert row["ext"]["startOffsetInfo"] == "" and row["ext"]["restNum"] == "0", row
    short, polled = x["rows"][0], x["rows"][1]
    assert short["elapsed_ms"] < 1000 and 1000 <= polled["elapsed_ms"] <= 3000, x["rows"]
    assert x["unknown_topic"][0] == 17 and x["max_nums_33"] == [
        29, "the broker[127.0.0.1] pop message's num is greater than 32"]


def test_crash_loses_no_unacked_message(real: dict[str, Any]) -> None:
    x = _check(real, "crash")
    assert len(x["popped"]) == 6 and len(x["acked"]) == 3 and x["lost"] == []
    unacked = sorted(set(x["popped"]) - set(x["acked"]))
    assert set(unacked) <= set(x["again_revived"]), x  # every unacked one is revived after the restart


def test_retry_topic_v2_name(real_v2: dict[str, Any]) -> None:
    """enableRetryTopicV2=true: revived into %RETRY%group+topic, the handle's topic type 2."""
    assert real_v2["config"]["enableRetryTopicV2"] == "true"
    x = _check(real_v2, "revive")
    assert x["retry_topics"] == [f"%RETRY%{x['group']}+{x['topic']}"] and len(x["again"]) == 6
    assert {a["handle"].split(" ")[4] for a in x["again"]} == {"2"} and {a["reconsume"] for a in x["again"]} == {1}
    late = x["lateness_ms"]
    assert late is not None and late["min"] >= 0 and late["max"] <= LATE_MS, late


def test_retry_topic_share(real: dict[str, Any]) -> None:
    """popFromRetryProbability 20: a one-message pop reads the retry topic first with probability 1/5, else
    the normal topic (full: the retry topic is not read); once the normal topic is empty, the retry topic.
    Judged loosely (a binomial of ~50 pops): some but at most half of the pops while both hold messages."""
    x = _check(real, "retry_share")
    assert len(x["order"]) == x["popped_first"] + x["normal_sent"] == 60, x["order"]
    both = x["while_both"]
    assert both["pops"] >= x["normal_sent"] and 0 < both["retry"] <= both["pops"] // 2, both
    tail = x["order"][both["pops"]:]
    assert set(tail) == {"retry"}, x["order"]  # after the last normal one only the retry topic had any


def test_no_dlq_on_the_broker_side(real: dict[str, Any]) -> None:
    """The revive service ignores the group's retryMaxTimes (1 here): revived again and again, no %DLQ%."""
    x = _check(real, "no_dlq")
    assert x["reconsume_times"] == [0, 1, 2, 3] and x["dlq"] == [], x
