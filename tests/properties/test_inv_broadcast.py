"""NoLossPerClientProperty (issue 42): a broadcasting client owes every message from where it started.

Judged on hand-written ghost histories (it fires on a client that committed past a message it never
consumed, and stays quiet for a late joiner, a client behind at the drain, a failed consume, a restart's
new start and the power-loss exemptions), against the reference checker's ``detect_lost_per_client`` on
the same rows (every broadcasting case of ``traces/checker_cases_broadcast.py``), and on the reference
client's own broadcasting run (``model/consumer.py``) against an honest broker and a broken one. The
group-wide rules read broadcasting rows per client: OFFSET_OVERRUN, DUPLICATED, and NoLossProperty
leaves a broadcasting group alone.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from rmqspec.model.broker import ModelBroker
from rmqspec.model.clock import ManualClock
from rmqspec.model.config import BrokerConfig
from rmqspec.model.consumer import ConsumeFromWhere, MessageModel
from rmqspec.properties import invariants as inv
from rmqspec.properties.history import History
from rmqspec.traces.checker import check
from rmqspec.traces.checker_cases_broadcast import BROADCAST_CASES
from rmqspec.traces.notation import parse
from tests.broken_brokers import PullsExclusivePerGroup
from tests.scenarios.test_client_scenarios import LATER, OK, World

_B = 'detail={"message_model":"BROADCASTING"}'
_START = 'detail={"message_model":"BROADCASTING","from_where":"CONSUME_FROM_LAST_OFFSET"}'


def _history(text: str) -> tuple[History, list[dict[str, Any]]]:
    """The ghost history of a trace in the notation (``traces/notation.py``), and its rows."""
    rows = parse(text)
    h = History.for_config(BrokerConfig())
    for row in rows:
        fields = {k: v for k, v in row.items() if k not in ("seq", "ts", "event") and v is not None}
        if isinstance(fields.get("detail"), str):
            fields["detail"] = json.loads(fields["detail"])
        h.emit(row["event"], row["ts"], **fields)
    return h, rows


def _lost(h: History) -> list[tuple[str | None, int | None]]:
    return [(v.code, v.seq) for v in inv.check_lost_per_client(h)]


def _audit_lost(rows: list[dict[str, Any]]) -> list[tuple[str, int]]:
    """The reference checker's LOST findings: (code, the commit that passed the key)."""
    return [(f.code, f.seqs[-1]) for f in check(rows).violations if f.code == "LOST"]


# two clients: C1 from the start, C2 joins after K1 (its start is offset 1); each owes what follows
_TWO_CLIENTS = f"""
0 commit_offset t=900 g=B topic=T q=0 off=0 c=C1 {_START}
1 send t=1000 topic=T q=0 off=0 key=K1 st=SEND_OK
2 commit_offset t=1005 g=B topic=T q=0 off=1 c=C2 {_START}
3 send t=1006 topic=T q=0 off=1 key=K2 st=SEND_OK
4 deliver t=1010 g=B topic=T q=0 off=0 key=K1 c=C1 {_B}
5 deliver t=1010 g=B topic=T q=0 off=1 key=K2 c=C1 {_B}
6 consume t=1020 g=B topic=T q=0 off=0 key=K1 c=C1 st=SUCCESS {_B}
7 consume t=1020 g=B topic=T q=0 off=1 key=K2 c=C1 st=RECONSUME_LATER {_B}
8 commit_offset t=1030 g=B topic=T q=0 off=2 c=C1 {_B}
"""


def test_each_client_consumed_what_it_owes_a_failed_one_is_dropped_not_lost() -> None:
    h, rows = _history(_TWO_CLIENTS + f"""
9 deliver t=1040 g=B topic=T q=0 off=1 key=K2 c=C2 {_B}
10 consume t=1050 g=B topic=T q=0 off=1 key=K2 c=C2 st=SUCCESS {_B}
11 commit_offset t=1060 g=B topic=T q=0 off=2 c=C2 {_B}
12 drain t=9000
""")
    assert _lost(h) == [] == _audit_lost(rows)
    assert inv.evaluate(h, ("always", "eventually")) == []


def test_a_client_that_committed_past_a_message_it_never_consumed_lost_it() -> None:
    # C2 was given nothing (the broker served it past K2) and committed past K2
    h, rows = _history(_TWO_CLIENTS + f"""
9 commit_offset t=1040 g=B topic=T q=0 off=2 c=C2 {_B}
10 drain t=9000
""")
    assert _lost(h) == [("LOST", 9)] == _audit_lost(rows)
    (v,) = inv.check_lost_per_client(h)
    assert "C2" in v.reason and "K2" in v.reason and "C1" not in v.reason
    # the failure names the invariant that found it (NoLossProperty shares the code)
    assert [i.name for i, _ in inv.evaluate_named(h, ("eventually",))] == ["NoLossPerClientProperty"]


def test_eventually_only_and_a_client_behind_at_the_drain_is_not_judged() -> None:
    h, rows = _history(_TWO_CLIENTS + "9 commit_offset t=1040 g=B topic=T q=0 off=2 c=C2 " + _B + "\n")
    assert _lost(h) == []  # no drain yet
    behind, rows = _history(_TWO_CLIENTS + "9 drain t=9000\n")  # C2 never committed past K2
    assert _lost(behind) == [] == _audit_lost(rows)


def test_a_consume_after_the_commit_past_does_not_excuse_it() -> None:
    h, rows = _history(_TWO_CLIENTS + f"""
9 commit_offset t=1040 g=B topic=T q=0 off=2 c=C2 {_B}
10 consume t=1050 g=B topic=T q=0 off=1 key=K2 c=C2 st=SUCCESS {_B}
11 drain t=9000
""")
    assert _lost(h) == [("LOST", 9)] == _audit_lost(rows)


@pytest.mark.parametrize(("send", "extra"), [
    ("st=SEND_OK", 'crash t=1070 st=power detail={"at_risk":["K2"]}'),  # K2 may be gone
    ("st=SEND_OK", "store t=1070 topic=SCHEDULE_TOPIC_XXXX q=1 off=0 key=K2"),  # a key with a delayed copy
    ("st=SEND_OK lvl=2", "recover t=1070 st=REOPEN"),  # a delayed send's offset is its schedule copy's
    ("st=NO_RESPONSE", "recover t=1070 st=REOPEN"),  # only what the producer saw acknowledged
], ids=["at_risk", "delayed_copy", "delayed_send", "unacknowledged"])
def test_what_lost_exempts_it_exempts_per_client(send: str, extra: str) -> None:
    """NoLossProperty's exemptions hold per client: C2 committed past K2 without it, and is not judged."""
    text = _TWO_CLIENTS.replace("key=K2 st=SEND_OK", "key=K2 " + send)
    h, rows = _history(text + f"""
9 commit_offset t=1040 g=B topic=T q=0 off=2 c=C2 {_B}
10 {extra}
11 drain t=9000
""")
    assert _lost(h) == [] == _audit_lost(rows)


def test_positions_a_power_loss_freed_below_a_clients_offset_are_not_its_loss() -> None:
    """C1 committed 2 before an ASYNC power loss took K2 (at risk); K3 then reuses offset 1: C1's offsets
    file passes it (``skipped_by_saved_offsets``, per group) — as the broker's offset table would."""
    h, rows = _history(f"""
0 commit_offset t=900 g=B topic=T q=0 off=0 c=C1 {_START}
1 send t=1000 topic=T q=0 off=0 key=K1 st=SEND_OK
2 send t=1001 topic=T q=0 off=1 key=K2 st=SEND_OK
3 consume t=1020 g=B topic=T q=0 off=0 key=K1 c=C1 st=SUCCESS {_B}
4 consume t=1020 g=B topic=T q=0 off=1 key=K2 c=C1 st=SUCCESS {_B}
5 commit_offset t=1030 g=B topic=T q=0 off=2 c=C1 {_B}
6 crash t=2000 st=power detail={{"at_risk":["K2"]}}
7 recover t=2000 st=power
8 send t=2001 topic=T q=0 off=1 key=K3 st=SEND_OK
9 send t=2002 topic=T q=0 off=2 key=K4 st=SEND_OK
10 consume t=2020 g=B topic=T q=0 off=2 key=K4 c=C1 st=SUCCESS {_B}
11 commit_offset t=2030 g=B topic=T q=0 off=3 c=C1 {_B}
12 drain t=9000
""")
    assert _lost(h) == [] == _audit_lost(rows)
    assert ("B", "K3") in inv.skipped_by_saved_offsets(h.events)


def test_a_restart_without_the_offsets_file_starts_a_new_run() -> None:
    """What a client skipped below its new start is not its loss; a skip inside the new run is."""
    h, rows = _history(f"""
0 send t=1000 topic=T q=0 off=0 key=K1 st=SEND_OK
1 consume t=1020 g=B topic=T q=0 off=0 key=K1 c=C1 st=SUCCESS {_B}
2 commit_offset t=1030 g=B topic=T q=0 off=1 c=C1 {_B}
3 send t=2000 topic=T q=0 off=1 key=K2 st=SEND_OK
4 commit_offset t=3000 g=B topic=T q=0 off=2 c=C1 {_START}
5 send t=3001 topic=T q=0 off=2 key=K3 st=SEND_OK
6 send t=3002 topic=T q=0 off=3 key=K4 st=SEND_OK
7 consume t=3020 g=B topic=T q=0 off=3 key=K4 c=C1 st=SUCCESS {_B}
8 commit_offset t=3030 g=B topic=T q=0 off=4 c=C1 {_B}
9 drain t=9000
""")
    assert _lost(h) == [("LOST", 8)] == _audit_lost(rows)  # K3, not K2


@pytest.mark.parametrize("name", [name for name, _, expected in BROADCAST_CASES
                                  if not any(code.startswith("ORDERLY") for code, _ in expected)])
def test_the_invariant_agrees_with_the_reference_checker_on_every_broadcasting_case(name: str) -> None:
    _, text, expected = next(case for case in BROADCAST_CASES if case[0] == name)
    h, _ = _history(text)
    assert _lost(h) == [(code, seqs[-1]) for code, seqs in expected if code == "LOST"]


def test_the_group_wide_rules_read_a_broadcasting_clients_rows_per_client() -> None:
    """NoLossProperty leaves a broadcasting group alone even when it is subscribed; OFFSET_OVERRUN keeps
    one queue per client (any consume acknowledges) and still sees a client's own overrun; DUPLICATED
    counts per client."""
    h, _ = _history(_TWO_CLIENTS + f"""
9 deliver t=1040 g=B topic=T q=0 off=1 key=K2 c=C2 {_B}
10 consume t=1050 g=B topic=T q=0 off=1 key=K2 c=C2 st=SUCCESS {_B}
11 commit_offset t=1060 g=B topic=T q=0 off=2 c=C2 {_B}
12 drain t=9000
""")
    h.subscriptions["B"] = {"T"}
    assert inv.check_no_loss(h) == [] and inv.check_offset_overrun(h) == []
    assert inv.observe_duplicated(h) == []  # K2 consumed once by each client
    h.emit("consume", 9100, group="B", topic="T", queue_id=0, queue_offset=1, msg_key="K2", client_id="C2",
           status="SUCCESS", detail={"message_model": "BROADCASTING"})
    assert [v.seq for v in inv.observe_duplicated(h)] == [13]
    overrun, _ = _history(f"""
0 deliver t=1010 g=B topic=T q=0 off=0 key=K1 c=C1 {_B}
1 deliver t=1010 g=B topic=T q=0 off=0 key=K1 c=C2 {_B}
2 consume t=1020 g=B topic=T q=0 off=0 key=K1 c=C1 st=RECONSUME_LATER {_B}
3 commit_offset t=1030 g=B topic=T q=0 off=1 c=C1 {_B}
4 commit_offset t=1030 g=B topic=T q=0 off=1 c=C2 {_B}
""")
    assert [(v.code, v.seq) for v in inv.check_offset_overrun(overrun)] == [("OFFSET_OVERRUN", 4)]


def _reference_run(broker: Any, clock: ManualClock, heartbeat: bool) -> History:
    """Two reference broadcasting clients (``model/consumer.py``): ``early`` from the start, ``late`` after
    three messages; then two more, one failed by both listeners. ``heartbeat``: the clients register with
    the broker (the Java client heartbeats every 30 s; the model's reference client does not)."""
    w = World(broker, clock, topic_queues=2)
    config = {"message_model": MessageModel.BROADCASTING,
              "consume_from_where": ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET}
    listener = lambda msgs, ctx: LATER if msgs[0].body == b"fails" else OK  # noqa: E731
    early = w.consumer(listener, cid="early", **config)
    early.start()
    w.run_until(1_000)
    for body in (b"a", b"b", b"c"):
        w.send(body)
    w.run_until(5_000)
    late = w.consumer(listener, cid="late", **config)
    if heartbeat:
        for cid in ("early", "late"):
            broker.heartbeat("G", cid, {"T": ("*", "TAG", 0)})
    late.start()
    w.run_until(6_000)
    for body in (b"d", b"fails"):
        w.send(body)
    w.run_until(20_000)
    w.recorder.emit("drain", clock.now(), actor="test")
    h = History.for_config(BrokerConfig())
    for e in w.recorder.events:
        h.emit(e.event, e.ts, **{k: v for k, v in e.as_row().items() if k not in ("seq", "ts", "event")})
    return h


def test_the_reference_clients_broadcasting_run_is_clean_and_a_broken_broker_is_found_as_the_audit_finds_it() -> None:
    clock = ManualClock(1_000_000)
    honest = _reference_run(ModelBroker(clock), clock, heartbeat=True)
    assert any(inv.broadcasting(e) for e in honest.events)
    assert inv.evaluate(honest, ("always", "eventually")) == []
    rows = [e.as_row() for e in honest.events]
    assert _audit_lost(rows) == []
    clock = ManualClock(1_000_000)
    broken = _reference_run(PullsExclusivePerGroup(clock, BrokerConfig()), clock, heartbeat=True)
    found = inv.check_lost_per_client(broken)
    assert found and {v.code for v in found} == {"LOST"}
    assert all(("late" in v.reason) != ("early" in v.reason) for v in found)  # one client, not the other
    assert sorted(v.seq for v in found) == sorted(seq for _, seq in _audit_lost([e.as_row() for e in broken.events]))
