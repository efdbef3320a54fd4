"""Broadcasting consumers, judged per client (issue 42; seeds 000 and 002).

RocketMQ 4.9.8's broadcasting: every client of the group consumes every message, its offsets stay in its
own LocalFileOffsetStore, a client without one starts at the queue's max offset (CONSUME_FROM_LAST_OFFSET),
and a message its listener fails is dropped. The reference client marks its rows
``detail.message_model: BROADCASTING``; the audit judges LOST and DUPLICATED per client.
"""

from __future__ import annotations

import shutil

import pytest

from rmqspec.model import offsets_file
from rmqspec.model.broker import ModelBroker
from rmqspec.model.clock import ManualClock
from rmqspec.model.consumer import ConsumeFromWhere, MessageModel
from rmqspec.model.consumer_orderly import ConsumeOrderlyStatus, OrderlyConsumer
from rmqspec.model.events import ListRecorder
from rmqspec.model.message import MessageQueue
from rmqspec.traces.checker import check
from tests.scenarios.test_client_scenarios import LATER, OK, World

BROADCAST = {"message_model": MessageModel.BROADCASTING,
             "consume_from_where": ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET}


def _rows(w: World) -> list[dict]:
    w.recorder.emit("drain", w.clock.now(), actor="test")
    return [e.as_row() for e in w.recorder.events]


def test_a_late_client_starts_at_the_max_offset_and_the_trace_audits_clean():
    clock = ManualClock(1_000_000)
    w = World(ModelBroker(clock), clock, topic_queues=2)
    seen: dict[str, list[bytes]] = {"early": [], "late": []}

    def listener(cid):
        def consume(msgs, ctx):
            seen[cid].extend(m.body for m in msgs)
            return LATER if m_fails(msgs) else OK
        return consume

    def m_fails(msgs):
        return msgs[0].body == b"fails"

    early = w.consumer(listener("early"), cid="early", **BROADCAST)
    early.start()
    w.run_until(1_000)
    for body in (b"a", b"b", b"fails"):
        w.send(body)
    w.run_until(5_000)
    late = w.consumer(listener("late"), cid="late", **BROADCAST)
    late.start()
    w.run_until(6_000)
    for body in (b"c", b"d"):
        w.send(body)
    w.run_until(20_000)
    assert sorted(seen["early"]) == [b"a", b"b", b"c", b"d", b"fails"]
    assert sorted(seen["late"]) == [b"c", b"d"]  # started at the max offsets
    rows = _rows(w)
    marked = [r for r in rows if r["client_id"] in ("early", "late")]
    assert marked and all(r["detail"]["message_model"] == "BROADCASTING" for r in marked)
    report = check(rows)
    assert (report.violations, report.observations) == ((), ())
    # read as one clustering group, the late client's consumes would be duplicates
    unmarked = [{**r, "detail": None} if r["client_id"] in ("early", "late") else r for r in rows]
    assert {f.code for f in check(unmarked).observations} == {"DUPLICATED"}


def test_a_client_that_passes_a_message_without_consuming_it_is_lost_for_that_client_only():
    clock = ManualClock(1_000_000)
    w = World(ModelBroker(clock), clock)
    for cid in ("c1", "c2"):
        w.consumer(lambda msgs, ctx: OK, cid=cid, **BROADCAST).start()
    w.run_until(1_000)
    for body in (b"a", b"b"):
        w.send(body)
    w.run_until(10_000)
    rows = _rows(w)
    assert check(rows).violations == ()
    b_key = next(r["msg_key"] for r in rows if r["event"] == "send" and r["queue_offset"] == 1)
    # c2's consume of b removed: it committed past b without consuming it
    cut = [r for r in rows if not (r["event"] == "consume" and r["client_id"] == "c2" and r["msg_key"] == b_key)]
    [lost] = check(cut).violations
    assert (lost.code, lost.keys["client_id"], lost.keys["msg_key"]) == ("LOST", "c2", b_key)


@pytest.mark.parametrize("kind", ["model", "mmap"])
def test_the_check_workload_broadcasts_and_audits_clean(kind, tmp_path):
    """``rmqspec check``'s workload: G-audit-log's late client owes only what was sent after it joined; no
    violation, and no DUPLICATED for the group (each client consumes each message once)."""
    from rmqspec.cli.workload import T0, run_workload
    from rmqspec.impl.broker import MmapBroker
    from rmqspec.model.config import default_config

    clock = ManualClock(T0)
    rec = ListRecorder()
    broker = ModelBroker(clock, recorder=rec) if kind == "model" else MmapBroker.open(
        tmp_path, clock, default_config(), rec)
    try:
        run_workload(broker, clock, rec)
    finally:
        broker.close()
    rows = [e.as_row() for e in rec.events]
    audit = [r for r in rows if r["group"] == "G-audit-log" and r["event"] == "consume"]
    by_client = {c: {r["msg_key"] for r in audit if r["client_id"] == c} for c in ("audit-1", "audit-2")}
    assert by_client["audit-2"] and by_client["audit-2"] < by_client["audit-1"]
    assert any(r["status"] == "RECONSUME_LATER" and r["detail"].get("dropped") for r in audit)
    report = check(rows)
    assert report.violations == ()
    assert [f for f in report.observations if f.keys.get("group") == "G-audit-log"] == []


# ---------------------------------------------------------------- the offsets file (LocalFileOffsetStore)

# 4.9.8's client, OffsetSerializeWrapper.toJson(true) of RS_T queues 0 → 5 and 1 → 12 (measured with the
# release jars): fastjson writes each MessageQueue key as an object, in ConcurrentHashMap order
MEASURED = ('{\n\t"offsetTable":{{\n\t\t\t"brokerName":"broker-a",\n\t\t\t"queueId":1,\n\t\t\t"topic":"RS_T"\n'
            '\t\t}:12,{\n\t\t\t"brokerName":"broker-a",\n\t\t\t"queueId":0,\n\t\t\t"topic":"RS_T"\n\t\t}:5\n\t}\n}')


def test_the_offsets_file_text_is_the_java_clients():
    table = {MessageQueue("RS_T", 0): 5, MessageQueue("RS_T", 1): 12}
    assert offsets_file.render(table) == MEASURED
    assert offsets_file.parse(MEASURED) == table
    assert offsets_file.parse(MEASURED.replace("\n", "").replace("\t", "")) == table
    for damaged in ("", "{", MEASURED[:-3], MEASURED.replace('"queueId":1', '"queueId":"1"'), '{"x":1}'[:4]):
        with pytest.raises(offsets_file.OffsetsFileError, match=r"offsets\.json"):
            offsets_file.parse(damaged)


def test_a_write_keeps_the_previous_text_in_the_bak_and_a_read_falls_back_to_it(tmp_path):
    path = offsets_file.offsets_path(tmp_path, "10.0.0.1@c1", "GB")
    first, second = {MessageQueue("T", 0): 1}, {MessageQueue("T", 0): 2}
    offsets_file.write(path, offsets_file.render(first))
    assert not path.with_name("offsets.json.bak").exists()
    offsets_file.write(path, offsets_file.render(second))
    assert offsets_file.read(path) == second and not path.with_name("offsets.json.tmp").exists()
    assert offsets_file.parse(path.with_name("offsets.json.bak").read_text()) == first
    path.write_text("{damaged")  # or killed between the delete and the rename: no offsets.json
    assert offsets_file.read(path) == first
    path.unlink()
    assert offsets_file.read(path) == first
    path.with_name("offsets.json.bak").write_text("")
    assert offsets_file.read(path) is None  # neither: the client starts at the max offset
    path.with_name("offsets.json.bak").write_text("{damaged")
    with pytest.raises(offsets_file.OffsetsFileError, match=r"offsets\.json\.bak"):
        offsets_file.read(path)


def _restart_world(tmp_path):
    clock = ManualClock(1_000_000)
    w = World(ModelBroker(clock), clock)
    seen: list[bytes] = []
    cfg = {**BROADCAST, "offset_store_dir": str(tmp_path)}

    def start():
        c = w.consumer(lambda msgs, ctx: seen.extend(m.body for m in msgs) or OK, cid="c1", **cfg)
        c.start()
        return c

    return w, seen, start


def test_a_restarted_client_reads_its_file_and_goes_on(tmp_path):
    w, seen, start = _restart_world(tmp_path)
    c = start()
    w.run_until(1_000)
    for body in (b"a", b"b"):
        w.send(body)
    w.run_until(20_000)
    c.shutdown()  # persists: offsets.json says 2
    assert offsets_file.read(offsets_file.offsets_path(tmp_path, "c1", "G")) == {MessageQueue("T", 0): 2}
    w.send(b"c")
    start()
    w.run_until(40_000)
    assert seen == [b"a", b"b", b"c"]
    report = check(_rows(w))
    assert (report.violations, report.observations) == ((), ())


def test_a_kill_in_the_write_window_restarts_from_the_bak_and_consumes_again(tmp_path):
    w, seen, start = _restart_world(tmp_path)
    c = start()
    w.run_until(1_000)
    w.send(b"a")
    w.run_until(12_000)  # consumed and persisted (the first persist at 10 s): offsets.json says 1
    w.send(b"b")
    w.run_until(17_000)  # the next persist: offsets.json says 2, the .bak 1
    c.kill()
    path = offsets_file.offsets_path(tmp_path, "c1", "G")
    path.unlink()  # killed after the delete, before the rename
    start()
    w.run_until(40_000)
    assert seen == [b"a", b"b", b"b"]
    report = check(_rows(w))
    assert report.violations == ()
    assert [(f.code, f.keys["client_id"]) for f in report.observations] == [("DUPLICATED", "c1")]


def test_a_client_restarted_without_its_file_skips_what_came_meanwhile_and_that_is_no_loss(tmp_path):
    w, seen, start = _restart_world(tmp_path)
    c = start()
    w.run_until(1_000)
    w.send(b"a")
    w.run_until(20_000)
    c.shutdown()
    shutil.rmtree(tmp_path / "c1")
    w.send(b"b")  # sent while the client is down: it restarts at the max offset, after b
    start()
    w.run_until(30_000)
    w.send(b"c")
    w.run_until(50_000)
    assert seen == [b"a", b"c"]
    rows = _rows(w)
    starts = [r for r in rows if r["event"] == "commit_offset" and "from_where" in (r["detail"] or {})]
    assert [r["queue_offset"] for r in starts] == [0, 2]  # each run's start: the max offset then
    assert check(rows).violations == ()
    # without the second start row the restart is unknown: the skip reads as a loss
    assert [f.code for f in check([r for r in rows if r is not starts[1]]).violations] == ["LOST"]


def test_an_orderly_broadcasting_client_asks_for_the_lock_and_a_second_one_waits_for_it_to_expire():
    """Fidelity CL19 (4.9.8 client jar): ``updateProcessQueueTableInRebalance`` locks a new queue of an orderly
    consumer in both message models, and ``lockMQPeriodically`` renews in clustering only. The first orderly
    broadcasting client locks the queue and never renews it; a second client of the group is refused until the
    broker's lock expires (rebalanceLockMaxLiveTime, 60 s), then takes the queue at a rebalance and, without an
    offsets file, starts at its max offset."""
    clock = ManualClock(1_000_000)
    w = World(ModelBroker(clock), clock)
    seen: dict[str, list[bytes]] = {"first": [], "second": []}

    def listener(cid):
        def consume(msgs, ctx):
            seen[cid].extend(m.body for m in msgs)
            return ConsumeOrderlyStatus.SUCCESS
        return consume

    first = w.consumer(listener("first"), cls=OrderlyConsumer, cid="first", **BROADCAST)
    first.start()
    w.run_until(1_000)
    w.send(b"a")
    w.run_until(5_000)
    second = w.consumer(listener("second"), cls=OrderlyConsumer, cid="second", **BROADCAST)
    second.start()
    w.run_until(10_000)
    mq = MessageQueue("T", 0)
    assert mq in first.process_queues and mq not in second.process_queues  # refused: the first holds the lock
    w.send(b"b")
    w.run_until(50_000)
    assert seen == {"first": [b"a", b"b"], "second": []}
    w.run_until(100_000)  # past the first lock's 60 s and a rebalance after it
    assert mq in second.process_queues
    w.send(b"c")
    w.run_until(110_000)
    assert seen == {"first": [b"a", b"b", b"c"], "second": [b"c"]}
    report = check(_rows(w))
    assert (report.violations, report.observations) == ((), ())
