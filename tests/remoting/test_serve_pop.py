"""``rmqspec serve`` answers pop: RemoteBroker's pop against a served model broker (loopback sockets) gives
the same answers and the same handles as the model broker driven directly.

Both model brokers run under the rocketmq-5.2 profile on one ``ManualClock`` (the server's, the adapter's
and the direct model's), so pop times, handles and revives line up exactly; the served broker's revive
service runs on the server's background tick, the direct one's on ``tick()``. Each step is done on both
sides and the answers compared field by field (the messages by what a consumer reads: topic, queue,
offset, body, reconsume times, POP_CK and 1ST_POP_TIME; the ids and commitlog offsets are the server's
own). Then: a 4.9 profile's server answers REQUEST_CODE_NOT_SUPPORTED; a served broker that records no
trace gets the pop rows written by the server (``wire_events``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from rmqspec.model.broker import ModelBroker
from rmqspec.model.clock import Clock, ManualClock
from rmqspec.model.config import BrokerConfig, default_config
from rmqspec.model.message import Message
from rmqspec.model.model_factory import factory as model_factory
from rmqspec.model.pop import PopResult
from rmqspec.model.results import BrokerError, ResponseCode
from rmqspec.remoting import pop_ops as po
from rmqspec.remoting.adapter import RemoteBroker
from rmqspec.remoting.context import ServeSettings
from rmqspec.remoting.server import RmqServer, ServerThread
from tests.interop.pop_adapter_scenario import raw_answers
from tests.remoting.wire_client import WireClient

V5 = default_config("rocketmq-5.2")
V49 = default_config("rocketmq-4.9")
START = 1_800_000_000_000
INVISIBLE = 3000


@attrs.define
class Pair:
    """The served model (through RemoteBroker) and a model driven directly, on one manual clock."""

    clock: ManualClock
    thread: ServerThread
    remote: RemoteBroker
    direct: ModelBroker

    def both(self, call: Callable[[Any], Any]) -> tuple[Any, Any]:
        return _outcome(lambda: call(self.remote)), _outcome(lambda: call(self.direct))

    def advance(self, ms: int) -> None:
        """Move the clock; the direct model ticks, the server ticks on its own (every 100 ms of wall time)."""
        self.clock.advance(ms)
        self.direct.tick()
        time.sleep(0.35)


def _outcome(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except BrokerError as e:
        return ("refused", e.code, e.remark)


def _view(r: Any) -> Any:
    """What a consumer reads of a pop answer (both sides)."""
    if not isinstance(r, PopResult):
        return r
    return (r.status, r.pop_time, r.invisible_time, r.revive_qid, [
        (p.message.topic, p.message.queue_id, p.message.queue_offset, p.message.body, p.message.reconsume_times,
         p.message.properties.get(po.PROPERTY_POP_CK), p.message.properties.get(po.PROPERTY_FIRST_POP_TIME),
         p.handle, p.order_count) for p in r.messages])


def _start(tmp_path: Path, config: BrokerConfig, clock: ManualClock,
           factory: Callable[..., Any] = model_factory, trace: bool = False) -> ServerThread:
    server = RmqServer(factory, config, ServeSettings(namesrv_port=0, port=0), tmp_path / "store",
                       trace_dir=tmp_path / "trace" if trace else None, clock=clock)
    return ServerThread(server).start()


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[Pair]:
    clock = ManualClock(START)
    thread = _start(tmp_path, V5, clock)
    remote = RemoteBroker(thread.server.namesrv_addr, clock, V5, heartbeat_consumers=False)
    direct = ModelBroker(clock, attrs.evolve(V5, broker_name=thread.server.config.broker_name))
    yield Pair(clock, thread, remote, direct)
    remote.close()
    thread.stop()


def _setup(p: Pair, topic: str, queues: int, group: str, per_queue: int) -> None:
    for b in (p.remote, p.direct):
        b.create_topic(topic, queues)
        b.create_group(group)
        for q in range(queues):
            for i in range(per_queue):
                b.send(Message(topic, f"{topic}-{q}-{i}".encode()), q)


def test_concurrent_pop_ack_change_revive_batch_ack(pair: Pair) -> None:
    p = pair
    _setup(p, "T", 2, "G", 2)
    got, want = p.both(lambda b: b.pop("G", "T", -1, 3, INVISIBLE))
    assert _view(got) == _view(want) and len(want.messages) == 3
    assert Capability_pop(p.remote)
    first = got.messages
    assert p.both(lambda b: b.ack("G", "T", first[0].handle)) == (ResponseCode.SUCCESS,) * 2
    changed = p.both(lambda b: b.change_invisible_time("G", "T", first[1].handle, INVISIBLE + 2000))
    assert changed[0] == changed[1] and type(changed[0]) is type(changed[1])
    hidden = p.both(lambda b: b.pop("G", "T", -1, 3, INVISIBLE))
    assert _view(hidden[0]) == _view(hidden[1]) and len(hidden[0].messages) == 1  # the fourth; the rest invisible
    p.advance(INVISIBLE + 2500)  # past the revive time and the margin: the two left alone are revived
    revived = []
    for _ in range(3):
        again = p.both(lambda b: b.pop("G", "T", -1, 4, INVISIBLE))
        assert _view(again[0]) == _view(again[1])
        if again[1].messages:
            revived += again[0].messages
            handles = [m.handle for m in again[0].messages]
            assert p.both(lambda b, hs=handles: b.batch_ack("G", "T", hs)) == (ResponseCode.SUCCESS,) * 2
    # the third of the first pop and the hidden pop's one; not the acked, not the changed (due later)
    expected = {first[2].message.body, hidden[0].messages[0].message.body}
    assert {m.message.body for m in revived} == expected and len(revived) == 2
    assert {(m.handle.retry, m.message.reconsume_times, m.message.topic) for m in revived} == {("1", 1, "T")}
    assert p.both(lambda b: b.batch_ack("G", "T", [])) == (ResponseCode.NO_MESSAGE,) * 2


def Capability_pop(b: Any) -> bool:
    from rmqspec.model.protocol import Capability

    return Capability.POP in b.capabilities


def test_revived_copy_carries_the_broker_s_pop_ck(pair: Pair) -> None:
    p = pair
    _setup(p, "R", 1, "GR", 1)
    first = p.both(lambda b: b.pop("GR", "R", 0, 1, INVISIBLE))
    assert _view(first[0]) == _view(first[1])
    p.advance(INVISIBLE + 2500)
    again = p.both(lambda b: b.pop("GR", "R", -1, 1, INVISIBLE))
    assert _view(again[0]) == _view(again[1])
    (m,) = again[0].messages
    assert m.handle.retry == "1" and m.message.reconsume_times == 1
    assert m.message.properties[po.PROPERTY_POP_CK] == m.handle.extra_info()
    assert p.both(lambda b: b.ack("GR", "R", m.handle)) == (ResponseCode.SUCCESS,) * 2


def test_orderly_pop_blocks_and_counts(pair: Pair) -> None:
    p = pair
    _setup(p, "O", 1, "GO", 3)
    first = p.both(lambda b: b.pop("GO", "O", 0, 1, INVISIBLE, order=True, attempt_id="A1"))
    assert _view(first[0]) == _view(first[1]) and first[0].revive_qid == 999
    assert first[0].messages[0].order_count == 0
    blocked = p.both(lambda b: b.pop("GO", "O", 0, 1, INVISIBLE, order=True, attempt_id="A2"))
    assert _view(blocked[0]) == _view(blocked[1]) and not blocked[0].messages
    same = p.both(lambda b: b.pop("GO", "O", 0, 1, INVISIBLE, order=True, attempt_id="A1"))
    assert _view(same[0]) == _view(same[1]) and len(same[0].messages) == 1
    h = same[0].messages[0].handle
    assert p.both(lambda b: b.ack("GO", "O", h)) == (ResponseCode.SUCCESS,) * 2
    nxt = p.both(lambda b: b.pop("GO", "O", 0, 1, INVISIBLE, order=True, attempt_id="A2"))
    assert _view(nxt[0]) == _view(nxt[1]) and nxt[0].messages[0].message.body == b"O-0-1"
    p.advance(INVISIBLE + 100)  # expired: handed out again from the queue, its order count 1
    again = p.both(lambda b: b.pop("GO", "O", 0, 1, INVISIBLE, order=True, attempt_id="A3"))
    assert _view(again[0]) == _view(again[1]) and again[0].messages[0].order_count == 1
    # the orderly change of invisible time of the first message of a run (ck offset = its offset)
    moved = p.both(lambda b: b.change_invisible_time("GO", "O", again[0].messages[0].handle, 5000))
    assert moved[0] == moved[1]


def test_orderly_change_of_a_later_message_the_client_builds_the_handle(pair: Pair) -> None:
    """docs/fidelity.md POP-W1: the 5.x client builds a changed handle with ck offset = the message's offset
    (MQClientAPIImpl.changeInvisibleTimeAsync), and so does the model's orderly change: the same handle on
    both sides, though the run's ck offset was 0."""
    p = pair
    _setup(p, "O2", 1, "GO2", 3)
    run = p.both(lambda b: b.pop("GO2", "O2", 0, 2, INVISIBLE, order=True, attempt_id="A1"))
    assert _view(run[0]) == _view(run[1])
    p.clock.advance(10)
    wire, model = p.both(lambda b: b.change_invisible_time("GO2", "O2", run[0].messages[1].handle, 5000))
    assert run[0].messages[1].handle.ck_queue_offset == 0
    assert wire == model and model.ck_queue_offset == model.queue_offset == 1
    assert p.both(lambda b: b.ack("GO2", "O2", wire)) == (ResponseCode.SUCCESS,) * 2  # acks by offset, pop time


def test_refusals_keep_code_and_remark(pair: Pair) -> None:
    p = pair
    _setup(p, "X", 1, "GX", 1)
    for call in (lambda b: b.pop("GX", "X", -1, 33, INVISIBLE), lambda b: b.pop("GX", "Nope", -1, 1, INVISIBLE),
                 lambda b: b.pop("GX", "X", 5, 1, INVISIBLE)):
        got, want = p.both(call)
        assert got == want and got[0] == "refused", (got, want)
    popped = p.both(lambda b: b.pop("GX", "X", 0, 1, INVISIBLE))
    far = attrs.evolve(popped[0].messages[0].handle, queue_offset=1000)
    assert p.both(lambda b: b.ack("GX", "X", far)) == (ResponseCode.NO_MESSAGE,) * 2
    got, want = p.both(lambda b: b.change_invisible_time("GX", "X", far, INVISIBLE))
    assert got == want and got[1] is ResponseCode.NO_MESSAGE


def test_a_4_9_profile_does_not_pop(tmp_path: Path) -> None:
    clock = ManualClock(START)
    thread = _start(tmp_path, V49, clock)
    try:
        c = WireClient(thread.server.broker_addr)
        for code in (200050, 200051, 200151, 200053):
            r = c.call(code, {"consumerGroup": "G", "topic": "T", "queueId": "0"})
            assert (r.code, r.remark) == (3, f" request type {code} not supported")
        c.close()
    finally:
        thread.stop()


def test_bad_extra_info_is_a_system_error_naming_the_field(pair: Pair) -> None:
    c = WireClient(pair.thread.server.broker_addr)
    r = c.call(200051, {"consumerGroup": "G", "topic": "T", "queueId": "0", "extraInfo": "0 1 2", "offset": "0"})
    assert r.code == 1 and "extraInfo" in (r.remark or "")
    c.close()


def _plain_model(clock: Clock, config: BrokerConfig, workdir: str) -> ModelBroker:
    """A factory without ``recorder``: the server writes the pop rows itself."""
    return ModelBroker(clock, config)


def test_the_server_writes_pop_rows_for_a_broker_that_records_none(tmp_path: Path) -> None:
    clock = ManualClock(START)
    thread = _start(tmp_path, V5, clock, factory=_plain_model, trace=True)
    remote = RemoteBroker(thread.server.namesrv_addr, clock, V5, heartbeat_consumers=False)
    try:
        remote.create_topic("W", 1)
        remote.create_group("GW")
        remote.send(Message("W", b"w"), 0)
        (m,) = remote.pop("GW", "W", 0, 1, INVISIBLE).messages
        new = remote.change_invisible_time("GW", "W", m.handle, INVISIBLE)
        clock.advance(INVISIBLE + 2500)
        time.sleep(0.35)
        (r,) = remote.pop("GW", "W", -1, 1, INVISIBLE).messages
        assert remote.ack("GW", "W", r.handle) is ResponseCode.SUCCESS
        time.sleep(0.25)  # the trace is flushed at every tick
    finally:
        remote.close()
        thread.stop()
    rows = [json.loads(line) for line in (tmp_path / "trace" / "serve-000.jsonl").read_text().splitlines()]
    pops = [x for x in rows if x["event"] == "pop"]
    assert [x["detail"]["handle"] for x in pops] == [m.handle.extra_info(), r.handle.extra_info()]
    assert pops[0]["deliver_ts"] == m.handle.revive_time and pops[1]["topic"] == "%RETRY%GW_W"
    (change,) = [x for x in rows if x["event"] == "change_invisible"]
    assert change["detail"]["new_handle"] == new.extra_info()
    (revive,) = [x for x in rows if x["event"] == "revive"]
    assert revive["detail"]["observed"] and revive["detail"]["new_topic"] == "%RETRY%GW_W"
    (ack,) = [x for x in rows if x["event"] == "ack"]
    assert ack["status"] == "SUCCESS" and ack["topic"] == "%RETRY%GW_W"


FIXTURE = Path(__file__).resolve().parent / "fixtures" / "pop_answers_5.3.3.json"


def test_answers_are_worded_as_5_3_3_s(pair: Pair) -> None:
    """The same requests real 5.3.3 answered (``tests/interop/pop_adapter_scenario.raw_answers``; the
    fixture is its recording): code, remark and ext field names alike. ``restNum``'s value is not (POP-W3)."""
    recorded = json.loads(FIXTURE.read_text())
    raw = raw_answers(pair.remote, "PopW1", "pop_w_1", INVISIBLE)
    topic = raw.pop("topic")
    want = {k: [v[0], v[1].format(topic=topic) if v[1] else v[1], v[2]] for k, v in recorded.items()
            if not k.startswith("_")}
    assert {k: v[:3] for k, v in raw.items()} == want
    # the offset infos as 5.3.3 wrote them (restNum aside)
    for k in ("pop_found", "pop_orderly", "pop_orderly_empty", "pop_empty"):
        assert {n: v for n, v in raw[k][3].items() if n != "restNum"} == {
            n: v for n, v in recorded[k][3].items() if n != "restNum"}, k
