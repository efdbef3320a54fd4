"""RemoteBroker pops real RocketMQ 5.3.3 (issue 40): pop, ack, change of invisible time, revive, batch ack,
refusals and an orderly pop through the ``PopBroker`` methods, answered in the model's types, with the
SPEC §8 pop rows it records.

The fixture (``scripts/real-rocketmq start``, SYNC_FLUSH, pop settings at their defaults) runs the broker
in a network namespace; ``pop_adapter_scenario.py`` drives the adapter there and prints JSON; the
assertions are here (the facts: docs/pop-facts.md). Run time about 2-4 minutes (one broker start-up and
one revive, ~invisible time + 2-3 s).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.interop.realrmq import resolved

REPO = Path(__file__).resolve().parents[2]
INVISIBLE_MS = 3000
LATE_MS = 10_000  # the latest acceptable revive after popTime + invisibleTime (measured 2.1-3.3 s)

TIER_5X = True  # the 5.x tier (INTEROP=5x; tests/interop/conftest.py)


@pytest.fixture(scope="module")
def obs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    real = resolved("5.3.3")
    tmp = tmp_path_factory.mktemp("pop-adapter-5.3.3")
    try:
        started = real.start(tmp, "flushDiskType=SYNC_FLUSH")
        cmd = started.in_netns(sys.executable, "-m", "tests.interop.pop_adapter_scenario",
                               started.env["RMQ_NAMESRV"], str(INVISIBLE_MS))
        done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
        lines = done.stdout.strip().splitlines()
        assert done.returncode == 0 and lines, f"scenario failed ({done.returncode}): {done.stderr[-3000:]}"
        (tmp / "pop-adapter.json").write_text(lines[-1])
        out = json.loads(lines[-1])
        print(json.dumps({k: v for k, v in out.items() if k != "rows"}, indent=1))
        assert "crashed" not in out, out["crashed"]
        return out
    finally:
        real.stop(tmp)


def test_pop_declared_and_answered_in_the_model_s_types(obs: dict[str, Any]) -> None:
    assert "pop" in obs["capabilities"] and obs["capability_pop"] and obs["is_pop_handle"]
    first = obs["first"]
    assert first["status"] == "FOUND" and [m["body"] for m in first["messages"]] == ["m-0", "m-1", "m-2"]
    assert first["invisible_time"] == INVISIBLE_MS and 0 <= first["revive_qid"] < 8
    for i, m in enumerate(first["messages"]):
        assert m["handle_type"] == "PopHandle" and m["order_count"] is None and m["pop_ck"] is None
        assert m["handle"] == f"0 {first['pop_time']} {INVISIBLE_MS} {first['revive_qid']} 0 broker-a 0 {i}"


def test_ack_change_revive_and_batch_ack(obs: dict[str, Any]) -> None:
    assert obs["ack"] == 0 and obs["hidden"]["status"] == "POLLING_NOT_FOUND"
    old, new = obs["changed"]["old"].split(" "), obs["changed"]["new"].split(" ")
    assert obs["changed"]["type"] == "PopHandle" and new[0] == old[7] and new[2] == str(3 * INVISIBLE_MS)
    assert new[3:] == old[3:]
    # only the third (left alone) is revived: from the retry topic, reconsume 1, the broker's POP_CK
    again = obs["again"]
    assert [(m["body"], m["reconsume"]) for m in again] == [("m-2", 1)], again
    assert again[0]["pop_ck"] == again[0]["handle"] and again[0]["handle"].split(" ")[4] == "1"
    assert 0 <= obs["again_at"] <= LATE_MS and obs["again_batch_ack"] == 0 and obs["ack_new"] == 0
    assert obs["batch_popped"] == 2 and obs["batch_ack"] == 0 and obs["after_batch"] == "POLLING_NOT_FOUND"
    assert obs["batch_empty"] == 208  # NO_MESSAGE: an empty batch


def test_refusals_keep_the_broker_s_code_and_remark(obs: dict[str, Any]) -> None:
    assert obs["refuse_33"] == [29, "the broker[127.0.0.1] pop message's num is greater than 32"]
    assert obs["refuse_topic"][0] == 17 and obs["refuse_topic"][1].startswith("topic[")
    assert obs["ack_far"] == 208 and obs["change_far"][0] == 208


def test_orderly_pop(obs: dict[str, Any]) -> None:
    first, blocked, nxt = obs["orderly_first"], obs["orderly_blocked"], obs["orderly_next"]
    assert [m["body"] for m in first["messages"]] == ["o-0"] and first["revive_qid"] == 999
    assert first["messages"][0]["order_count"] == 0
    assert blocked["status"] == "POLLING_NOT_FOUND" and obs["orderly_ack"] == 0
    assert [m["body"] for m in nxt["messages"]] == ["o-1"]


def test_force_pop_random_is_recorded_not_applied(obs: dict[str, Any]) -> None:
    assert obs["wishes"] == [0]


def test_trace_rows(obs: dict[str, Any]) -> None:
    rows = obs["rows"]
    events = [r["event"] for r in rows]
    assert events.count("pop") == 3 + 1 + 2 + 2 and events.count("revive") == 1
    assert events.count("change_invisible") == 1 and events.count("ack") == 1 + 1 + 1 + 2 + 1 + 1
    revive = next(r for r in rows if r["event"] == "revive")
    assert revive["detail"]["observed"] and revive["detail"]["new_topic"].startswith("%RETRY%")
    assert {r["status"] for r in rows if r["event"] == "ack"} <= {"SUCCESS", "NO_MESSAGE"}


def test_raw_answers_as_recorded_for_serve(obs: dict[str, Any]) -> None:
    """The codes, remarks and header fields rmqspec serve answers with (tests/remoting/fixtures/
    pop_answers_5.3.3.json, compared by tests/remoting/test_serve_pop.py) are still what 5.3.3 writes."""
    recorded = json.loads((REPO / "tests" / "remoting" / "fixtures" / "pop_answers_5.3.3.json").read_text())
    raw = dict(obs["raw"])
    topic = raw.pop("topic")
    want = {k: [v[0], v[1].format(topic=topic) if v[1] else v[1], v[2]] for k, v in recorded.items()
            if not k.startswith("_")}
    assert {k: v[:3] for k, v in raw.items()} == want
