"""Send modes and batches on real RocketMQ 4.9.8, with its own Java client (``make interop``; root + Java).

The scenario program's ``e`` (``interop/java/v4/RealScenarios.java``): a batch of three
(``send(Collection)``), an async send and a oneway send to queue 0 of a fresh topic, every message pulled
back and each batch item read back as stored. Measured here and held to the model:

- a batch is one append: consecutive queue offsets and commitlog positions, one born and one store
  timestamp, each item with its own UNIQ_KEY and the properties the model stores (its own, then the
  batch's CLUSTER and WAIT: ``model/sendpath.batch_item_properties``), at the commitlog positions the
  model gives the same messages;
- the async callback gets SEND_OK; the oneway message is stored, unanswered;
- two BROADCASTING push consumers of one group (CONSUME_FROM_LAST_OFFSET, no offsets file): "early",
  started before the sends, consumes all five messages; "late", started after the batch, starts at the
  queue's max offset and consumes only the async and the oneway message. Each keeps its offsets in a file
  of its own (``<localOffsetStoreDir>/<clientId>/<group>/offsets.json`` and its ``.bak``): offset 5 of
  queue 0, written by fastjson with the MessageQueue object as the key (not JSON): the model's
  ``model/offsets_file.py`` reads it and writes the same bytes;
- a client-side trace of the run (the batch items and the async send acknowledged, the oneway send of
  status ONEWAY, every message delivered and consumed, both broadcasting clients' deliveries, consumes
  and file offsets, a drain) audits with no violation and no observation: a oneway message delivered is
  not RECOVERED, and the late broadcasting client's missing batch is no loss (it started past it); a
  broadcasting client that passed a message it was owed without consuming it is LOST, per client.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rmqspec.model import offsets_file
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


BROADCAST = json.dumps({"message_model": "BROADCASTING"})


def _stored_offsets(text: str) -> dict[tuple[str, int], int]:
    """A 4.9.8 ``offsets.json`` read by the model's parser (``model/offsets_file.py``): (topic, queue) -> offset."""
    return {(mq.topic, mq.queue_id): offset for mq, offset in offsets_file.parse(text).items()}


def _clients(modes: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The broadcasting clients of the run by instance name, what each consumed in queue order."""
    return {c["instance"]: dict(c, consumed=sorted(c["consumed"], key=lambda m: m["queue_offset"]))
            for c in modes["e_broadcast"]["clients"]}


def _client_trace(modes: dict[str, Any]) -> list[dict[str, Any]]:
    topic = modes["e_batch"]["topic"]
    rows: list[dict[str, Any]] = []

    def row(event: str, ts: int, **fields: Any) -> None:
        rows.append({"ts": ts, "event": event, "topic": topic, **fields})

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
    row("commit_offset", modes["e_pulled"]["messages"][-1]["recv_ts"], group="G_MODES", queue_id=0,
        queue_offset=len(by_key))
    for name, client in _clients(modes).items():  # each broadcasting client: its own deliveries and offsets
        mine = {"group": "GB_MODES", "client_id": name, "detail": BROADCAST}
        for m in client["consumed"]:
            where = {**mine, "queue_id": m["queue_id"], "queue_offset": m["queue_offset"], "msg_key": m["msg_id"],
                     "reconsume_times": m["reconsume_times"]}
            row("deliver", m["recv_ts"], **where)
            row("consume", m["recv_ts"], status="SUCCESS", **where)
        row("commit_offset", client["persisted_ts"], queue_id=0,
            queue_offset=_stored_offsets(client["offsets_json"])[(topic, 0)], **mine)
    rows.sort(key=lambda r: r["ts"])  # stable: a deliver stays before its consume
    row("drain", rows[-1]["ts"] + 1)
    return [{"seq": seq, **r} for seq, r in enumerate(rows)]


def test_broadcasting_clients_consume_from_where_they_started(modes: dict[str, Any]) -> None:
    broadcast, clients = modes["e_broadcast"], _clients(modes)
    batch, async_key, oneway_key = modes["e_batch"]["item_keys"], modes["e_async"]["key"], modes["e_oneway"]["key"]
    assert broadcast["offset_store_dir"] == broadcast["offset_store_dir_set"]  # the property was read after it was set
    assert list(clients) == ["scnEb1", "scnEb2"]
    for name, client in clients.items():
        assert client["client_id"].endswith("@" + name) and client["ready"]
        assert (client["message_model"], client["consume_from_where"]) == ("BROADCASTING", "CONSUME_FROM_LAST_OFFSET")
    early, late = clients["scnEb1"]["consumed"], clients["scnEb2"]["consumed"]
    # early (a process queue before the first send) started at offset 0 of the fresh queue: all five
    assert [(m["msg_id"], m["queue_offset"]) for m in early] == [*zip([*batch, async_key, oneway_key], range(5))]
    # late, without an offsets file, started at the queue's max offset (3, after the batch): never the batch
    assert [(m["msg_id"], m["queue_offset"]) for m in late] == [(async_key, 3), (oneway_key, 4)]
    assert {m["reconsume_times"] for m in early + late} == {0}


def test_each_broadcasting_client_keeps_its_offsets_in_a_file_of_its_own(modes: dict[str, Any]) -> None:
    topic, group = modes["e_batch"]["topic"], modes["e_broadcast"]["group"]
    for client in modes["e_broadcast"]["clients"]:
        assert client["offsets_dir"] == "/".join([modes["e_broadcast"]["offset_store_dir"], client["client_id"], group])
        assert client["files"] == ["offsets.json", "offsets.json.bak"]
        with pytest.raises(json.JSONDecodeError):  # fastjson's object keys: not JSON
            json.loads(client["offsets_json"])
        assert _stored_offsets(client["offsets_json"]) == {(topic, 0): 5}
        # the model's client writes the same bytes for the same table
        assert offsets_file.render({MessageQueue(topic, 0): 5}) == client["offsets_json"]
        # MixAll.string2File copies the file it replaces to .bak: the explicit persistConsumerOffset() and then
        # shutdown's persist both wrote offset 5, so the .bak (the write before the last) holds the same text
        assert client["offsets_json_bak"] == client["offsets_json"]


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


def _without(rows: list[dict[str, Any]], event: str, client: str, key: str) -> list[dict[str, Any]]:
    """``rows`` without ``client``'s ``event`` row of ``key`` (renumbered; its other rows kept)."""
    kept = [r for r in rows if not (r["event"] == event and r.get("client_id") == client and r["msg_key"] == key)]
    assert len(kept) == len(rows) - 1
    return [dict(r, seq=seq) for seq, r in enumerate(kept)]


def test_broadcasting_clients_are_audited_per_client(modes: dict[str, Any]) -> None:
    rows = _client_trace(modes)
    async_key, batch = modes["e_async"]["key"], modes["e_batch"]["item_keys"]
    late = {r["msg_key"] for r in rows if r["event"] == "consume" and r.get("client_id") == "scnEb2"}
    assert late.isdisjoint(batch) and async_key in late
    # the late client never saw the batch and committed offset 5 past it: no LOST, it started at offset 3
    # (its lowest delivery): a group-wide reading of its rows could not say what it was owed
    assert check(rows).violations == ()
    # the late client passed the async message (offset 3, delivered) without consuming it: its own loss. Its
    # deliver row is kept, so its commit of 5 also passes an offset it got and never acknowledged: OFFSET_OVERRUN
    # on its own queue (a real client's offset cannot pass a message still in its process queue)
    late_lost = check(_without(rows, "consume", "scnEb2", async_key)).violations
    assert _lost(late_lost) == [("scnEb2", async_key)]
    assert sorted(f.code for f in late_lost) == ["LOST", "OFFSET_OVERRUN"]
    # the early client passed a batch item the same way; the late client was never owed it
    early_lost = check(_without(rows, "consume", "scnEb1", batch[1])).violations
    assert _lost(early_lost) == [("scnEb1", batch[1])]
    assert sorted(f.code for f in early_lost) == ["LOST", "OFFSET_OVERRUN"]
    # read group-wide (the message_model markers dropped), the two clients' copies of the async and the oneway
    # message are duplicates, and the late client's missing async consume hides behind the early client's: no
    # LOST (at most an OFFSET_OVERRUN, when its delivery happened to come after the early client's consume)
    unmarked = [{k: v for k, v in r.items() if not (k == "detail" and r.get("group") == "GB_MODES")} for r in rows]
    report = check(unmarked)
    assert report.violations == ()
    assert sorted((f.code, f.keys.get("msg_key")) for f in report.observations) == sorted(
        [("DUPLICATED", async_key), ("DUPLICATED", modes["e_oneway"]["key"])])
    assert _lost(check(_without(unmarked, "consume", "scnEb2", async_key)).violations) == []


def _lost(findings: Any) -> list[tuple[Any, Any]]:
    return [(f.keys.get("client_id"), f.keys.get("msg_key")) for f in findings if f.code == "LOST"]
