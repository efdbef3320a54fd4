"""RemoteBroker's pop against a real 5.x broker: one program, run inside the fixture's network namespace.

    python -m tests.interop.pop_adapter_scenario NAMESRV INVISIBLE_MS  # prints one JSON line

Theory of operation
-------------------
``tests/interop/test_pop_adapter_real.py`` cannot enter the namespace, so this program drives
``RemoteBroker`` (profile rocketmq-5.2, a ``ListRecorder``) and prints what it got; the test judges.
Steps, each on a topic and group of its own: (1) pop 3 of 3 (maxMsgNums 3), ack the first, change the
second's invisible time to 3 × the invisible time, leave the third; a pop while they are invisible;
then pops until the third comes back revived (from the retry topic) and is batch-acked with whatever else
comes; (2) a batch ack of a fresh pop of 2; (3) refusals: maxMsgNums 33, an unknown topic, an ack and a
change outside the queue; (4) an orderly pop of one queue (maxMsgNums 1): the second pop blocked, the ack,
the next message; (5) force_pop_random, recorded and not applied; (6) each pop request's raw answer
(code, remark, ext field names and offset infos), for ``rmqspec serve`` to answer alike.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from typing import Any

import attrs

from rmqspec.model.clock import WallClock
from rmqspec.model.config import default_config
from rmqspec.model.events import ListRecorder
from rmqspec.model.message import Message
from rmqspec.model.pop import PopHandle, PopResult
from rmqspec.model.protocol import Capability
from rmqspec.model.results import BrokerError
from rmqspec.remoting import pop_ops as po
from rmqspec.remoting.adapter import RemoteBroker
from rmqspec.remoting.command import RemotingCommand


def _result(r: PopResult) -> dict[str, Any]:
    return {"status": r.status.value, "pop_time": r.pop_time, "invisible_time": r.invisible_time,
            "revive_qid": r.revive_qid,
            "messages": [{"body": p.message.body.decode(), "topic": p.message.topic, "queue_id": p.message.queue_id,
                          "queue_offset": p.message.queue_offset, "reconsume": p.message.reconsume_times,
                          "pop_ck": p.message.properties.get("POP_CK"), "handle": p.handle.extra_info(),
                          "handle_type": type(p.handle).__name__, "order_count": p.order_count}
                         for p in r.messages]}


def _refused(call: Any) -> list[Any]:
    try:
        out = call()
    except BrokerError as e:
        return [e.code.value, e.remark]
    return ["not refused", repr(out)]


def _raw(resp: RemotingCommand) -> list[Any]:
    return [resp.code, resp.remark, sorted(resp.ext_fields), {k: v for k, v in resp.ext_fields.items()
                                                              if k in ("startOffsetInfo", "msgOffsetInfo",
                                                                       "orderCountInfo", "restNum")}]


def raw_answers(b: RemoteBroker, topic: str, group: str, invisible: int) -> dict[str, Any]:
    """Each pop request's answer as the wire carries it (RemoteBroker's own connection)."""
    b.create_topic(topic, 1)
    b.create_group(group)
    for i in range(3):
        b.send(Message(topic, f"w-{i}".encode()), 0)
    out: dict[str, Any] = {"topic": topic}
    found = b._invoke(po.pop_request(group, topic, max_nums=1, invisible_ms=invisible))
    out["pop_found"] = _raw(found)
    h = po.parse_pop(found, b.broker_name).popped[0].handle
    out["ack"] = _raw(b._invoke(po.ack_request(group, topic, h)))
    found2 = b._invoke(po.pop_request(group, topic, max_nums=1, invisible_ms=invisible))
    h2 = po.parse_pop(found2, b.broker_name).popped[0].handle
    out["change"] = _raw(b._invoke(po.change_invisible_request(group, topic, h2, invisible)))
    out["batch_ack"] = _raw(b._invoke(po.batch_ack_request(group, topic, [h2])))
    out["batch_empty"] = _raw(b._invoke(po.batch_ack_request(group, topic, [])))
    out["ack_far"] = _raw(b._invoke(po.ack_request(group, topic, attrs.evolve(h, queue_offset=1000))))
    out["pop_orderly"] = _raw(b._invoke(po.pop_request(group + "o", topic, queue_id=0, max_nums=1,
                                                       invisible_ms=invisible, order=True, attempt_id="R1")))
    out["pop_orderly_empty"] = _raw(b._invoke(po.pop_request(group + "o", topic, queue_id=0, max_nums=1,
                                                             invisible_ms=invisible, order=True,
                                                             attempt_id="R2")))
    b._invoke(po.pop_request(group, topic, max_nums=32, invisible_ms=invisible))  # the rest
    out["pop_empty"] = _raw(b._invoke(po.pop_request(group, topic, max_nums=1, invisible_ms=invisible)))
    return out


def run(namesrv: str, invisible: int) -> dict[str, Any]:
    rec = ListRecorder()
    b = RemoteBroker(namesrv, WallClock(), default_config("rocketmq-5.2"), recorder=rec, heartbeat_consumers=False)
    out: dict[str, Any] = {"capabilities": sorted(c.value for c in b.capabilities)}
    stamp = time.time_ns() // 1_000_000 % 10**8
    try:
        topic, group = f"PopA{stamp}", f"pop_a_{stamp}"
        b.create_topic(topic, 1)
        b.create_group(group)
        for i in range(3):
            b.send(Message(topic, f"m-{i}".encode()), 0)
        first = b.pop(group, topic, -1, 3, invisible)
        out["first"] = _result(first)
        hs = [p.handle for p in first.messages]
        out["ack"] = b.ack(group, topic, hs[0]).value
        new = b.change_invisible_time(group, topic, hs[1], 3 * invisible)
        out["changed"] = {"old": hs[1].extra_info(), "new": new.extra_info(), "type": type(new).__name__}
        out["hidden"] = _result(b.pop(group, topic, -1, 3, invisible))
        deadline = first.pop_time + invisible + 20_000
        again: list[dict[str, Any]] = []
        while time.time_ns() // 1_000_000 < deadline and not again:
            r = b.pop(group, topic, -1, 3, invisible)
            if r.messages:
                again = _result(r)["messages"]
                out["again_batch_ack"] = b.batch_ack(group, topic, [p.handle for p in r.messages]).value
            else:
                time.sleep(0.2)
        out["again"] = again
        out["again_at"] = time.time_ns() // 1_000_000 - (first.pop_time + invisible)
        # the changed one: acked with its new handle (its new time is not up yet)
        out["ack_new"] = b.ack(group, topic, new).value
        # (2) batch ack of a fresh pop
        t2, g2 = f"PopB{stamp}", f"pop_b_{stamp}"
        b.create_topic(t2, 2)
        b.create_group(g2)
        for i in range(2):
            b.send(Message(t2, f"b-{i}".encode()), i)
        popped = b.pop(g2, t2, -1, 32, invisible)
        out["batch_popped"] = len(popped.messages)
        out["batch_ack"] = b.batch_ack(g2, t2, [p.handle for p in popped.messages]).value
        out["batch_empty"] = b.batch_ack(g2, t2, []).value
        out["after_batch"] = _result(b.pop(g2, t2, -1, 32, invisible))["status"]
        # (3) refusals
        out["refuse_33"] = _refused(lambda: b.pop(g2, t2, -1, 33, invisible))
        out["refuse_topic"] = _refused(lambda: b.pop(g2, f"NoSuch{stamp}", -1, 1, invisible))
        far = attrs.evolve(popped.messages[0].handle, queue_offset=1000) if popped.messages else None
        if far is not None:
            out["ack_far"] = b.ack(g2, t2, far).value
            out["change_far"] = _refused(lambda: b.change_invisible_time(g2, t2, far, invisible))
        # (4) orderly
        t3, g3 = f"PopO{stamp}", f"pop_o_{stamp}"
        b.create_topic(t3, 1)
        b.create_group(g3)
        for i in range(2):
            b.send(Message(t3, f"o-{i}".encode()), 0)
        o1 = b.pop(g3, t3, 0, 1, invisible, order=True, attempt_id="A1")
        out["orderly_first"] = _result(o1)
        out["orderly_blocked"] = _result(b.pop(g3, t3, 0, 1, invisible, order=True, attempt_id="A2"))
        out["orderly_ack"] = b.ack(g3, t3, o1.messages[0].handle).value if o1.messages else None
        out["orderly_next"] = _result(b.pop(g3, t3, 0, 1, invisible, order=True, attempt_id="A2"))
        # (6) the raw answers (code, remark, ext field names), for rmqspec serve to answer alike
        out["raw"] = raw_answers(b, f"PopW{stamp}", f"pop_w_{stamp}", invisible)
        # (5) force_pop_random: recorded only
        b.force_pop_random(0)
        out["wishes"] = list(b.pop_random_wishes)
        out["is_pop_handle"] = all(isinstance(p.handle, PopHandle) for p in first.messages)
        out["capability_pop"] = Capability.POP in b.capabilities
    except Exception:
        out["crashed"] = traceback.format_exc()
    finally:
        b.close()
    out["rows"] = [{"event": e.event, "status": e.status, "topic": e.topic, "queue_offset": e.queue_offset,
                    "deliver_ts": e.deliver_ts, "detail": e.detail} for e in rec.events]
    return out


if __name__ == "__main__":
    print(json.dumps(run(sys.argv[1], int(sys.argv[2]))))
