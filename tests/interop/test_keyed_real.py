"""Ordered sends by sharding key on real RocketMQ 4.9.8, with its own Java client (``make interop``).

The scenario program's ``k`` (``interop/java/v4/RealScenarios.java``): three accounts' entries sent with
``send(msg, SelectMessageQueueByHash, key)`` to a topic of 4 queues, then to the same topic grown to 6
(a new route), and one account's entries sent by another producer through ``SelectMessageQueueByRandom``;
an orderly push consumer consumes them all. Measured here and held to the model:

- the 4.9.8 client's hash selector picks the queue ``model/selectors.by_hash`` picks for every key and
  route size (Java's ``String.hashCode``, ``Math.abs``, ``%``);
- a client-side trace of the run (the sends with ``sharding_key`` and ``detail.route_queues``, the orderly
  consumption, a drain) audits with no violation for the hash producer — the key moved once, with the
  route — and ORDER_KEY_SPLIT for the random one, and the invariant ``KeyRoutedOnceProperty`` agrees;
- the orderly consumer consumed each hash key's entries of one route in the order they were sent.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from rmqspec.model.selectors import by_hash
from rmqspec.properties.codes import AuditParams
from rmqspec.properties.history import History
from rmqspec.properties.inv_keys import check_key_split
from rmqspec.traces.checker import check
from tests.interop.realrmq import RealRocketMQ, shared_scenarios


@pytest.fixture(scope="module")
def keyed(realrmq: RealRocketMQ, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    rows = shared_scenarios(realrmq, tmp_path_factory, "keyed-timeout", "k", "t")  # t: test_consume_timeout_real
    assert "k_keyed" in rows, rows
    yield rows["k_keyed"]


def _rows(run: dict[str, Any], random_too: bool) -> list[dict[str, Any]]:
    """The run as a client-side trace: sends, then the orderly consumption in its order, then a drain."""
    out: list[dict[str, Any]] = []
    for s in run["sends"]:
        if s["producer_group"].startswith("PG_KEYED_RANDOM") and not random_too:
            continue
        out.append({"ts": s["ts"], "event": "send", "group": s["producer_group"], "topic": run["topic"],
                    "queue_id": s["queue_id"], "queue_offset": s["queue_offset"], "msg_key": s["msg_id"],
                    "status": s["status"], "sharding_key": s["sharding_key"],
                    "detail": {"route_queues": s["route_queues"], "send_mode": "SYNC"}})
    keys = {r["msg_key"] for r in out}
    for m in run["consumed"]:
        if m["properties"]["UNIQ_KEY"] in keys:
            out.append({"ts": m["recv_ts"], "event": "consume", "group": run["group"], "topic": run["topic"],
                        "queue_id": m["queue_id"], "queue_offset": m["queue_offset"],
                        "msg_key": m["properties"]["UNIQ_KEY"], "client_id": run["client_id"], "status": "SUCCESS"})
    out.sort(key=lambda r: (r["ts"], r["event"] != "send"))
    out.append({"ts": out[-1]["ts"] + 1, "event": "drain"})
    return [{"seq": i, **r} for i, r in enumerate(out)]


def test_the_java_hash_selector_picks_the_model_s_queue(keyed: dict[str, Any]) -> None:
    hashed = [s for s in keyed["sends"] if not s["producer_group"].startswith("PG_KEYED_RANDOM")]
    assert {s["route_queues"] for s in hashed} == {4, 6} and all(s["status"] == "SEND_OK" for s in hashed)
    assert [s["queue_id"] for s in hashed] == [by_hash(s["sharding_key"], s["route_queues"]) for s in hashed]


def test_a_trace_of_the_hash_producer_audits_clean(keyed: dict[str, Any]) -> None:
    rows = _rows(keyed, random_too=False)
    assert sum(r["event"] == "consume" for r in rows) == sum(r["event"] == "send" for r in rows) == 18, json.dumps(
        keyed)[-3000:]
    report = check(rows, AuditParams())
    assert not report.violations, [f.as_dict() for f in report.violations]
    # the orderly consumer consumed each key's entries of one route in their send order
    sent = {(r["sharding_key"], r["detail"]["route_queues"]): [] for r in rows if r["event"] == "send"}
    route_of = {}
    for r in rows:
        if r["event"] == "send":
            sent[(r["sharding_key"], r["detail"]["route_queues"])].append(r["msg_key"])
            route_of[r["msg_key"]] = (r["sharding_key"], r["detail"]["route_queues"])
    consumed = {k: [] for k in sent}
    for r in rows:
        if r["event"] == "consume":
            consumed[route_of[r["msg_key"]]].append(r["msg_key"])
    assert consumed == sent


def test_the_random_selector_is_caught_by_key_split(keyed: dict[str, Any]) -> None:
    rows = _rows(keyed, random_too=True)
    queues = {r["queue_id"] for r in rows if r["event"] == "send" and r["sharding_key"] == "acct-r"}
    assert len(queues) > 1, queues  # 8 draws over 6 queues: one queue for all has odds 6 x 6^-8
    report = check(rows, AuditParams())
    assert {f.code for f in report.violations} == {"ORDER_KEY_SPLIT"}
    assert {f.keys["group"] for f in report.violations} == {keyed["sends"][-1]["producer_group"]}
    history = History(params=AuditParams())
    for r in rows:
        history.emit(r["event"], r["ts"], **{k: v for k, v in r.items() if k not in ("seq", "ts", "event")})
    assert {v.seq for v in check_key_split(history)} == {f.seqs[-1] for f in report.violations}
