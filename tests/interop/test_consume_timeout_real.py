"""consumeTimeout and cleanExpiredMsg on real RocketMQ 4.9.8, with its own Java client (``make interop``).

The scenario program's ``t`` (``interop/java/v4/RealScenarios.java``, on a thread beside ``k``): a concurrent
push consumer with consumeTimeout 1 min; its listener holds the first delivery of ``slow`` until 126 s after
the consumer started, ``fast`` is consumed at once. Measured here and held to the model
(``model/consumer_concurrent.py``):

- the listener saw CONSUME_START_TIME set to when it was called;
- the client's clean sent ``slow`` back while its listener still ran, at the first clean (every
  consumeTimeout from the consumer's start) after it had run for more than consumeTimeout — the tick
  ``ProcessQueue.expired_head`` names — with delay level 3: the retry copy (reconsume_times 1) was
  stored one level-3 delay after that tick and consumed before the original's answer;
- a client-side trace of the run (the sends, the consumes with ``detail.consume_start`` and
  ``detail.return_type``, a drain) audits with no violation and one DUPLICATED observation, for ``slow``.

The same thread sends a 6000-byte body (``t_compressed``): the 4.9.8 client compresses it, and the record
the broker stored (VIEW_MESSAGE_BY_ID's raw answer) holds sysFlag COMPRESSED | ZLIB and the bytes the
model's producer writes for the same body (``model/compression.py``; seed 004, G12).
"""

from __future__ import annotations

import base64
from typing import Any

import pytest

from rmqspec.impl.codec import decode_record
from rmqspec.model.compression import compress, uncompress
from rmqspec.model.consumer_concurrent import ConsumeConcurrentlyStatus, return_type
from rmqspec.model.message import PROPERTY_CONSUME_START_TIMESTAMP
from rmqspec.model.process_queue import ProcessQueue
from rmqspec.traces.checker import check
from tests.interop.realrmq import RealRocketMQ, shared_scenarios

MINUTE = 60_000
SLACK_MS = 1500  # the broker's schedule service polls every 100 ms; store timestamps and threads add the rest


@pytest.fixture(scope="module")
def run(realrmq: RealRocketMQ, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    rows = shared_scenarios(realrmq, tmp_path_factory, "keyed-timeout", "k", "t")
    assert "t_timeout" in rows, rows
    return rows["t_timeout"]


def _consumes(run: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(slow's first delivery, slow's retry copy, fast)."""
    by = {(m["body"], m["reconsume_times"]): m for m in run["consumed"]}
    assert set(by) == {("slow", 0), ("slow", 1), ("fast", 0)}, run["consumed"]
    return by[("slow", 0)], by[("slow", 1)], by[("fast", 0)]


def _clean_tick(started: int, consume_start: int, timeout_ms: int) -> int:
    """The first clean (every ``timeout_ms`` from ``started``) that finds the message expired, by the model's
    test: a ProcessQueue whose only message a listener got at ``consume_start``."""
    from tests.model.test_client_unit import stored

    pq = ProcessQueue()
    pq.put_messages([stored(0, properties={PROPERTY_CONSUME_START_TIMESTAMP: str(consume_start)})])
    tick = started + timeout_ms
    while pq.expired_head(tick, timeout_ms) is None:
        tick += timeout_ms
    return tick


def test_the_clean_sends_a_running_message_back_at_the_model_s_tick(run: dict[str, Any]) -> None:
    slow, retry, fast = _consumes(run)
    timeout = run["consume_timeout_min"] * MINUTE
    start = int(slow["properties"][PROPERTY_CONSUME_START_TIMESTAMP])
    assert abs(start - slow["recv_ts"]) <= 5  # set just before the listener was called
    tick = _clean_tick(run["started"], start, timeout)
    assert tick - run["started"] == 2 * timeout  # the first clean was too early: it ran for less than 1 min
    sent_back = retry["store_ts"] - run["level3_ms"]  # the retry copy is stored when its level-3 delay ends
    assert tick - SLACK_MS <= sent_back <= tick + SLACK_MS, (tick, sent_back)
    # read from %RETRY%<group>; the client gave the listener the original topic back (resetRetryAndNamespace)
    assert retry["topic"] == run["topic"] and retry["properties"]["RETRY_TOPIC"] == run["topic"]
    assert retry["properties"]["UNIQ_KEY"] == slow["properties"]["UNIQ_KEY"]
    assert retry["recv_ts"] < slow["answer_ts"]  # consumed while the original's listener still ran
    assert fast["answer_ts"] - fast["recv_ts"] < timeout


def _trace(run: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    keys: dict[str, str] = {}
    for s in run["sends"]:
        out.append({"ts": s["ts"], "event": "send", "group": "PG_TIMEOUT", "topic": run["topic"],
                    "queue_id": s["queue_id"], "queue_offset": s["queue_offset"], "msg_key": s["msg_id"],
                    "status": s["status"], "detail": {"send_mode": "SYNC"}})
        keys[s["body"]] = s["msg_id"]
    timeout = run["consume_timeout_min"] * MINUTE
    for m in run["consumed"]:
        queue_topic = f"%RETRY%{run['group']}" if "RETRY_TOPIC" in m["properties"] else m["topic"]
        start = int(m["properties"][PROPERTY_CONSUME_START_TIMESTAMP])
        kind = return_type(ConsumeConcurrentlyStatus.CONSUME_SUCCESS, None, m["answer_ts"] - start, timeout)
        out.append({"ts": m["answer_ts"], "event": "consume", "group": run["group"], "topic": queue_topic,
                    "queue_id": m["queue_id"], "queue_offset": m["queue_offset"],
                    "msg_key": m["properties"]["UNIQ_KEY"], "client_id": run["client_id"],
                    "reconsume_times": m["reconsume_times"], "status": "SUCCESS",
                    "detail": {"consume_start": start, "return_type": kind.value}})
    out.sort(key=lambda r: (r["ts"], r["event"] != "send"))
    out.append({"ts": out[-1]["ts"] + 1, "event": "drain"})
    return [{"seq": i, **r} for i, r in enumerate(out)]


def test_a_trace_of_the_timed_out_consumer_audits_clean(run: dict[str, Any]) -> None:
    rows = _trace(run)
    kinds = {(r["msg_key"], r["reconsume_times"]): r["detail"]["return_type"] for r in rows if r["event"] == "consume"}
    slow_key = next(s["msg_id"] for s in run["sends"] if s["body"] == "slow")
    assert kinds[(slow_key, 0)] == "TIME_OUT" and kinds[(slow_key, 1)] == "SUCCESS"
    report = check(rows)
    assert not report.violations, [f.as_dict() for f in report.violations]
    assert [(f.code, f.keys.get("msg_key")) for f in report.observations] == [("DUPLICATED", slow_key)]


def test_the_java_client_compresses_a_large_body_as_the_model_does(
    realrmq: RealRocketMQ, tmp_path_factory: pytest.TempPathFactory
) -> None:
    run = shared_scenarios(realrmq, tmp_path_factory, "keyed-timeout", "k", "t")["t_compressed"]
    assert (run["status"], run["code"]) == ("SEND_OK", 0)
    offset = int(run["offset_msg_id"][-16:], 16)  # the record's own physicalOffset field
    record = decode_record(base64.b64decode(run["record_b64"]), base_offset=offset)
    body = run["body"].encode()
    assert (record.topic, len(body)) == (run["topic"], 6000)
    assert (record.body, record.sys_flag) == compress(body, 0)  # byte for byte, and sysFlag 0x301
    assert uncompress(record.body, record.sys_flag) == body
