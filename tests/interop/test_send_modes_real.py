"""Send modes and batches on real RocketMQ 4.9.8, with its own Java client (``make interop``; root + Java).

The scenario program's ``e`` (``interop/java/v4/RealScenarios.java``): a batch of three
(``send(Collection)``), an async send and a oneway send to queue 0 of a fresh topic, every message pulled
back and each batch item read back as stored. Measured here and held to the model:

- a batch is one append: consecutive queue offsets and commitlog positions, one born and one store
  timestamp, each item with its own UNIQ_KEY and the properties the model stores (its own, then the
  batch's CLUSTER and WAIT: ``model/sendpath.batch_item_properties``), at the commitlog positions the
  model gives the same messages;
- the async callback gets SEND_OK; the oneway message is stored, unanswered;
- a client-side trace of the run (the batch items and the async send acknowledged, the oneway send of
  status ONEWAY, every message delivered and consumed, a drain) audits with no violation and no
  observation: a oneway message delivered is not RECOVERED.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rmqspec.model.broker import ModelBroker
from rmqspec.model.clock import ManualClock
from rmqspec.model.message import Message, MessageQueue
from rmqspec.traces.checker import check
from tests.interop.realrmq import RealRocketMQ, run_scenarios


@pytest.fixture(scope="module")
def modes(realrmq: RealRocketMQ, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    yield run_scenarios(realrmq, tmp_path_factory.mktemp(f"real-modes-{realrmq.version}"), "modes", "e")


def test_a_batch_is_stored_as_the_model_stores_it(modes: dict[str, Any]) -> None:
    batch = modes["e_batch"]
    stored = batch["stored"]
    assert batch["status"] == "SEND_OK" and [s["queue_offset"] for s in stored] == [0, 1, 2]
    assert len({(s["born_ts"], s["store_ts"]) for s in stored}) == 1  # one request, one append
    assert [s["properties"]["UNIQ_KEY"] for s in stored] == batch["item_keys"] == batch["msg_id"].split(",")
    # the same messages through the model: the same positions and properties
    clock = ManualClock(stored[0]["born_ts"])
    model = ModelBroker(clock)
    model.create_topic(batch["topic"], 1)
    msgs = [Message(batch["topic"], f"batch {i}".encode(), tags="b", keys=(f"batch{i}",), uniq_key=key)
            for i, key in enumerate(batch["item_keys"])]
    res = model.send_batch(msgs, 0)
    mine = model.pull("G", MessageQueue(batch["topic"], 0), 0).messages
    assert [m.commitlog_offset for m in mine] == [s["commitlog_offset"] for s in stored]
    assert [dict(m.properties) for m in mine] == [s["properties"] for s in stored]
    assert res.uniq_key == batch["msg_id"]


def test_async_and_oneway_sends_are_stored(modes: dict[str, Any]) -> None:
    [callback] = modes["e_async"]["callback"]
    assert callback["status"] == "SEND_OK" and callback["msg_id"] == modes["e_async"]["key"]
    pulled = [m["msg_id"] for m in modes["e_pulled"]["messages"]]
    assert pulled == [*modes["e_batch"]["item_keys"], modes["e_async"]["key"], modes["e_oneway"]["key"]]


def _client_trace(modes: dict[str, Any]) -> list[dict[str, Any]]:
    topic = modes["e_batch"]["topic"]
    rows: list[dict[str, Any]] = []

    def row(event: str, ts: int, **fields: Any) -> None:
        rows.append({"seq": len(rows), "ts": ts, "event": event, "topic": topic, **fields})

    first = modes["e_pulled"]["messages"][0]
    for i, key in enumerate(modes["e_batch"]["item_keys"]):
        row("send", first["store_ts"], queue_id=0, queue_offset=i, msg_key=key, status="SEND_OK",
            detail=json.dumps({"send_mode": "SYNC", "batch_index": i, "batch_size": 3}))
    by_key = {m["msg_id"]: m for m in modes["e_pulled"]["messages"]}
    key = modes["e_async"]["key"]
    row("send", by_key[key]["store_ts"], queue_id=0, queue_offset=by_key[key]["queue_offset"], msg_key=key,
        status="SEND_OK", detail=json.dumps({"send_mode": "ASYNC"}))
    key = modes["e_oneway"]["key"]
    row("send", by_key[key]["born_ts"], queue_id=0, msg_key=key, status="ONEWAY",
        detail=json.dumps({"send_mode": "ONEWAY"}))
    for m in modes["e_pulled"]["messages"]:
        where = {"group": "G_MODES", "queue_id": 0, "queue_offset": m["queue_offset"], "msg_key": m["msg_id"],
                 "client_id": "scnE", "reconsume_times": 0}
        row("deliver", m["recv_ts"], **where)
        row("consume", m["recv_ts"], status="SUCCESS", **where)
    row("commit_offset", rows[-1]["ts"], group="G_MODES", queue_id=0, queue_offset=len(by_key))
    row("drain", rows[-1]["ts"] + 1)
    return rows


def test_a_client_trace_of_the_run_audits_clean(modes: dict[str, Any], tmp_path: Path) -> None:
    rows = _client_trace(modes)
    report = check(rows)
    assert (report.violations, report.observations, report.rows_rejected) == ((), (), 0)
    (tmp_path / "modes-trace.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    # the same trace with the oneway send read as acknowledged would be judged: its delivery is then no
    # recovery, and a oneway message nobody consumed would be LOST — which the ONEWAY status rules out
    unconsumed = [r for r in rows if r["event"] != "commit_offset"
                  and not (r["event"] == "consume" and r["msg_key"] == modes["e_oneway"]["key"])]
    assert check(unconsumed).violations == ()
    acked = [dict(r, status="SEND_OK") if r.get("status") == "ONEWAY" else r for r in unconsumed]
    assert [f.code for f in check(acked).violations] == ["LOST"]
