"""Pop consumption (RocketMQ 5.x) measured over the wire against a real broker: what the model is held to.

    python -m interop.pop_probe --broker rocketmq://127.0.0.1:9876 [--invisible-ms 3000]
        [--checks revive,ack,change,orderly,empty,crash] [--crash-cmd CMD --restart-cmd CMD] [--json FILE]

(inside a ``scripts/real-rocketmq`` fixture: ``ip netns exec NS .venv/bin/python -m interop.pop_probe ...``).
``tests/interop/test_pop_real.py`` runs it against real 5.3.3 and 5.5.1 and asserts the facts; the
figures and their sources are in docs/pop-facts.md (issue 40).

Theory of operation
-------------------
rmqspec's own wire client: ``RemoteBroker`` for topics, groups, sends and plain pulls (the retry topic's
store times), and, per check, a ``RemotingClient`` of its own speaking pop (``remoting/pop_ops.py``). Each
check uses a topic and a consumer group of its own, so no check sees another's messages. The checks
other than ``crash`` send first (main thread), then run at once, each on a thread with its own connection:
their waits (a few invisible times each) overlap. ``crash`` runs last (it kills the broker).

- ``revive``: N messages popped (invisibleTime ``--invisible-ms``), never acked: popping again before the
  invisible time ends gives nothing; after it each comes back, from the retry topic, with reconsumeTimes + 1
  and a broker-made POP_CK; the revived copies are read from the retry topic (v1 and v2 names tried) and
  their store time gives the lateness = store time − (popTime + invisibleTime);
- ``ack``: popped and acked one by one (ACK_MESSAGE), and popped and acked by one BATCH_ACK_MESSAGE; popped
  again for ≥ 2 × invisible time: nothing comes back;
- ``change``: popped, then CHANGE_MESSAGE_INVISIBLETIME to a longer time at once: the answer (the new
  handle), when it comes back (not before the new time), then acked with the new handle;
- ``orderly``: one queue, three messages, pops with order=true and maxMsgNums 1: a second pop with the
  same attemptId gets the first again; an ack with the first answer's (now stale) handle releases
  nothing; while the first is neither acked nor expired the queue gives nothing; after its ack (the latest
  handle) the second; the second left to expire is popped again with its order count as
  reconsume times;
- ``empty``: pops of an empty topic with pollTime 0 and 1500 ms: code, remark, time to answer;
- ``retry_share``: revived messages in the retry topic and new ones in the topic, popped one at a time:
  where each came from (``popFromRetryProbability``);
- ``no_dlq``: a group with retryMaxTimes 1, one message never acked: revived again and again past the
  maximum, nothing in %DLQ%group (the broker's revive has no DLQ);
- ``crash``: messages popped, half acked, the broker killed (-9) and restarted: what comes back.

The probe only observes and reports; the test decides.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from interop.figures import fmt_ms, publish, summary
from rmqspec.model.clock import WallClock
from rmqspec.model.message import Message, MessageQueue, StoredMessage
from rmqspec.model.results import BrokerError
from rmqspec.remoting import pop_ops as po
from rmqspec.remoting.adapter import RemoteBroker, parse_url
from rmqspec.remoting.client import RemotingClient
from rmqspec.remoting.codes import RequestCode
from rmqspec.remoting.command import RemotingCommand

CHECKS = ("revive", "ack", "change", "orderly", "empty", "retry_share", "no_dlq", "crash")
PULL_GROUP = "rmqspec_pop_probe_reader"


def now_ms() -> int:
    return time.time_ns() // 1_000_000



class Probe:
    """The broker under test, its settings, and one pop connection per check."""

    def __init__(self, namesrv: str, invisible_ms: int, crash_cmd: str | None = None,
                 restart_cmd: str | None = None) -> None:
        self.broker = RemoteBroker(namesrv, WallClock(), crash_cmd=crash_cmd, restart_cmd=restart_cmd,
                                   heartbeat_consumers=False, recover_timeout_ms=300_000)
        self.invisible_ms = invisible_ms
        self.stamp = now_ms() % 10**8
        self.config = self._config()
        self.lock = threading.Lock()

    def _config(self) -> dict[str, str]:
        resp = self.broker._ask(self.broker._conn(), RemotingCommand(code=RequestCode.GET_BROKER_CONFIG))
        text = resp.body.decode("utf-8", "replace") if resp.code == 0 else ""
        return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)

    def setup(self, name: str, count: int, queues: int = 1) -> tuple[str, str]:
        """A topic and a group of the check's own; ``count`` messages on queue 0, bodies ``name-i``."""
        topic, group = f"Pop{name.capitalize()}{self.stamp}", f"pop_{name}_{self.stamp}"
        self.broker.create_topic(topic, queues)
        self.broker.create_group(group)
        for i in range(count):
            self.broker.send(Message(topic, f"{name}-{i}".encode()), 0)
        return topic, group

    def conn(self) -> RemotingClient:
        return RemotingClient.connect(self.broker.broker_addr, timeout_ms=30_000)

    def pop(self, conn: RemotingClient, group: str, topic: str, *, poll_ms: int = 0, max_nums: int = 32,
            order: bool = False, invisible_ms: int | None = None,
            attempt_id: str | None = None) -> tuple[po.PopAnswer, int, int]:
        """One POP_MESSAGE: (answer, sent at, answered at)."""
        t0 = now_ms()
        cmd = po.pop_request(group, topic, max_nums=max_nums, poll_ms=poll_ms, born_ms=t0, order=order,
                             invisible_ms=self.invisible_ms if invisible_ms is None else invisible_ms,
                             attempt_id=attempt_id)
        resp = self.broker._ask(conn, cmd)
        return po.parse_pop(resp, self.broker.broker_name), t0, now_ms()

    def pop_until(self, conn: RemotingClient, group: str, topic: str, until_ms: int, *, want: int = 0,
                  order: bool = False, max_nums: int = 32, ack: bool = False) -> list[dict[str, Any]]:
        """Pop (pollTime ≤ 500 ms) until ``until_ms`` or ``want`` messages were seen; each message with the
        answer's popTime and when it was answered; ``ack`` acks each at once."""
        seen: list[dict[str, Any]] = []
        while now_ms() < until_ms and (not want or len(seen) < want):
            answer, _t0, t1 = self.pop(conn, group, topic, poll_ms=min(500, max(0, until_ms - now_ms())),
                                       order=order, max_nums=max_nums)
            for p in answer.popped:
                row = row_of(p, answer, t1)
                if ack:
                    row["ack"] = self.broker._ask(conn, po.ack_request(group, topic, p.handle)).code
                seen.append(row)
        return seen

    def retry_copies(self, group: str, topic: str) -> dict[str, list[StoredMessage]]:
        """The retry topic's records (v1 and v2 names) by topic name."""
        out: dict[str, list[StoredMessage]] = {}
        for name in (po.retry_topic_v1(topic, group), po.retry_topic_v2(topic, group)):
            msgs: list[StoredMessage] = []
            offset = 0
            while True:
                try:
                    res = self.broker.pull(PULL_GROUP, MessageQueue(name, 0), offset, 32)
                except BrokerError:
                    break
                if not res.messages:
                    break
                msgs += res.messages
                offset = res.next_begin_offset
            if msgs:
                out[name] = msgs
        return out


def row_of(p: po.Popped, answer: po.PopAnswer, t1: int) -> dict[str, Any]:
    m = p.message
    return {"body": m.body.decode(), "topic": m.topic, "queue_id": m.queue_id, "queue_offset": m.queue_offset,
            "reconsume": m.reconsume_times, "pop_time": answer.pop_time, "answered": t1,
            "handle": p.handle.join(), "broker_made_ck": p.broker_made_ck,
            "first_pop_time": m.properties.get(po.PROPERTY_FIRST_POP_TIME), "revive_qid": answer.revive_qid,
            "order_count_info": answer.order_count_info}


# ------------------------------------------------------------------------------------------------
# checks: each prepares in the main thread and returns the part that waits


def check_revive(p: Probe, count: int = 6) -> Callable[[], dict[str, Any]]:
    topic, group = p.setup("revive", count)

    def run() -> dict[str, Any]:
        conn = p.conn()
        inv = p.invisible_ms
        first, _t0, _t1 = p.pop(conn, group, topic)
        due = first.pop_time + inv
        early = p.pop_until(conn, group, topic, due - 300)  # before the invisible time ends: nothing
        again = p.pop_until(conn, group, topic, due + 30_000, want=len(first.popped), ack=True)
        conn.close()
        return {"topic": topic, "group": group, "popped": [row_of(x, first, _t1) for x in first.popped],
                "first_answer": {"pop_time": first.pop_time, "invisible_time": first.invisible_time,
                                 "revive_qid": first.revive_qid, "rest_num": first.rest_num,
                                 "start_offset_info": first.start_offset_info,
                                 "msg_offset_info": first.msg_offset_info},
                "before_due": early, "again": again, "due": due}
    return run


def finish_revive(p: Probe, r: dict[str, Any]) -> dict[str, Any]:
    copies = p.retry_copies(r["group"], r["topic"])
    r["retry_topics"] = sorted(copies)
    first_copy = {}
    for msgs in copies.values():
        for m in msgs:
            if m.reconsume_times == 1:
                first_copy.setdefault(m.body.decode(), m)
    r["retry_records"] = [{"body": b, "store_ts": m.store_ts, "reconsume": m.reconsume_times,
                           "queue_id": m.queue_id, "first_pop_time": m.properties.get(po.PROPERTY_FIRST_POP_TIME)}
                          for b, m in sorted(first_copy.items())]
    r["lateness_ms"] = summary([m.store_ts - r["due"] for m in first_copy.values()])
    r["repop_after_due_ms"] = summary([a["answered"] - r["due"] for a in r["again"]])
    return r


def check_ack(p: Probe, count: int = 4) -> Callable[[], dict[str, Any]]:
    single = p.setup("ack", count)
    batch = p.setup("batchack", count)

    def run() -> dict[str, Any]:
        conn = p.conn()
        out: dict[str, Any] = {}
        for name, (topic, group) in (("single", single), ("batch", batch)):
            answer, _t0, _t1 = p.pop(conn, group, topic)
            handles = [x.handle for x in answer.popped]
            if name == "single":
                codes = [p.broker._ask(conn, po.ack_request(group, topic, h)).code for h in handles]
                remarks: list[Any] = []
            else:
                resp = p.broker._ask(conn, po.batch_ack_request(group, topic, handles))
                codes, remarks = [resp.code], [resp.remark]
            out[name] = {"popped": len(handles), "codes": codes, "remarks": remarks, "pop_time": answer.pop_time,
                         "topic": topic, "group": group}
        until = max(o["pop_time"] for o in out.values()) + 2 * p.invisible_ms + 3000
        for name, (topic, group) in (("single", single), ("batch", batch)):
            out[name]["again"] = p.pop_until(conn, group, topic, until)
        out["waited_ms"] = until - min(o["pop_time"] for o in out.values() if isinstance(o, dict) and "pop_time" in o)
        conn.close()
        return out
    return run


def check_change(p: Probe) -> Callable[[], dict[str, Any]]:
    topic, group = p.setup("change", 1)

    def run() -> dict[str, Any]:
        conn = p.conn()
        answer, _t0, _t1 = p.pop(conn, group, topic)
        old = answer.popped[0].handle
        new_inv = 3 * p.invisible_ms
        t_change = now_ms()
        resp = p.broker._ask(conn, po.change_invisible_request(group, topic, old, new_inv))
        changed = po.parse_change_invisible(resp, old)
        again = p.pop_until(conn, group, topic, t_change + new_inv + 30_000, want=1)
        ack_new = None
        if changed.handle is not None:  # the new handle acks the message (after its re-pop it is stale)
            ack_new = p.broker._ask(conn, po.ack_request(group, topic, changed.handle)).code
        conn.close()
        return {"old_handle": old.join(), "change_code": resp.code, "change_remark": resp.remark,
                "change_ext": dict(resp.ext_fields), "change_sent": t_change,
                "new_handle": changed.handle.join() if changed.handle else None, "new_invisible_ms": new_inv,
                "old_due": answer.pop_time + p.invisible_ms, "again": again,
                "again_after_new_due_ms": [a["answered"] - (int(resp.ext("popTime") or 0) + new_inv)
                                           for a in again],
                "ack_new_handle_code": ack_new}
    return run


def check_orderly(p: Probe) -> Callable[[], dict[str, Any]]:
    topic, group = p.setup("orderly", 3)

    def run() -> dict[str, Any]:
        conn = p.conn()
        a1, _t0, t1 = p.pop(conn, group, topic, order=True, max_nums=1, attempt_id="attempt-1")
        first = [row_of(x, a1, t1) for x in a1.popped]
        # the same attemptId is let through the block (a client's retry of a lost answer): the same message
        same, _t0, ts = p.pop(conn, group, topic, order=True, max_nums=1, attempt_id="attempt-1")
        same_attempt = [row_of(x, same, ts) for x in same.popped]
        # an ack with the first answer's handle (its popTime no longer the queue's): answered, releases nothing
        stale = [p.broker._ask(conn, po.ack_request(group, topic, x.handle)).code for x in a1.popped]
        blocked = p.pop_until(conn, group, topic, same.pop_time + p.invisible_ms - 500, order=True, max_nums=1)
        acks = [p.broker._ask(conn, po.ack_request(group, topic, x.handle)).code for x in same.popped]
        a2, _t0, t2 = p.pop(conn, group, topic, order=True, max_nums=1)
        second = [row_of(x, a2, t2) for x in a2.popped]
        # the second is left to expire: popped again, and nothing else in between
        again = p.pop_until(conn, group, topic, a2.pop_time + p.invisible_ms + 15_000, want=1, order=True,
                            max_nums=1)
        acks2 = [p.broker._ask(conn, po.ack_request(group, topic, po.ExtraInfo.split(x["handle"]))).code
                 for x in again]
        a3, _t0, t3 = p.pop(conn, group, topic, order=True, max_nums=1)
        third = [row_of(x, a3, t3) for x in a3.popped]
        conn.close()
        return {"first": first, "same_attempt": same_attempt, "stale_ack_codes": stale,
                "first_answer_revive_qid": a1.revive_qid,
                "first_order_count_info": a1.order_count_info, "blocked_pops": blocked, "ack_codes": acks,
                "second": second,
                "second_again": again, "second_again_after_due_ms": [x["answered"] - (a2.pop_time + p.invisible_ms)
                                                                     for x in again],
                "ack2_codes": acks2, "third": third}
    return run


def check_empty(p: Probe) -> Callable[[], dict[str, Any]]:
    topic, group = p.setup("empty", 0)

    def run() -> dict[str, Any]:
        conn = p.conn()
        rows = []
        for poll in (0, 1500, 0):
            t0 = now_ms()
            resp = p.broker._ask(conn, po.pop_request(group, topic, poll_ms=poll, born_ms=t0,
                                                      invisible_ms=p.invisible_ms))
            rows.append({"poll_ms": poll, "code": resp.code, "remark": resp.remark, "elapsed_ms": now_ms() - t0,
                         "ext": dict(resp.ext_fields)})
        unknown = p.broker._ask(conn, po.pop_request(group, f"NoSuchTopic{p.stamp}", born_ms=now_ms()))
        too_many = p.broker._ask(conn, po.pop_request(group, topic, max_nums=33, born_ms=now_ms()))
        conn.close()
        return {"rows": rows, "unknown_topic": [unknown.code, unknown.remark],
                "max_nums_33": [too_many.code, too_many.remark]}
    return run


def check_retry_share(p: Probe, revived: int = 20, normal: int = 40) -> Callable[[], dict[str, Any]]:
    """``popFromRetryProbability``: ``revived`` messages popped and left to revive into the retry topic, then
    ``normal`` more sent; pops of one message each (acked) say where each came from while both hold some."""
    topic, group = p.setup("share", revived)

    def run() -> dict[str, Any]:
        conn = p.conn()
        first, _t0, _t1 = p.pop(conn, group, topic)
        with p.lock:  # the main thread has done with the broker's own connection: it waits for the checks
            for i in range(normal):
                p.broker.send(Message(topic, f"share-n{i}".encode()), 0)
        # wait until every first pop is in the retry topic (their re-pop is due), without popping them
        time.sleep(max(0.0, (first.pop_time + p.invisible_ms + 6000 - now_ms()) / 1000))
        order = []
        until = now_ms() + 30_000
        while now_ms() < until and len(order) < len(first.popped) + normal:
            answer, _t0, _t1 = p.pop(conn, group, topic, max_nums=1, poll_ms=200)
            for x in answer.popped:
                order.append("retry" if x.message.reconsume_times else "normal")
                p.broker._ask(conn, po.ack_request(group, topic, x.handle))
        conn.close()
        both = order[:_while_both(order)]
        return {"popped_first": len(first.popped), "normal_sent": normal, "order": order,
                "while_both": {"pops": len(both), "retry": both.count("retry")}}
    return run


def _while_both(order: list[str]) -> int:
    """How many pops came while both topics still held messages: up to the earlier of the last normal and
    the last retry pop."""
    last = {kind: max((i for i, o in enumerate(order) if o == kind), default=-1) for kind in ("normal", "retry")}
    return min(last.values()) + 1


def check_no_dlq(p: Probe, cycles: int = 3) -> Callable[[], dict[str, Any]]:
    """A group with retryMaxTimes 1: one message popped and never acked, ``cycles`` times; the broker keeps
    reviving it past the maximum (reconsume times 1, 2, 3 …) and puts nothing into %DLQ%group."""
    topic, group = f"PopNodlq{p.stamp}", f"pop_nodlq_{p.stamp}"
    p.broker.create_topic(topic, 1)
    p.broker.create_group(group, retry_max_times=1)
    p.broker.send(Message(topic, b"nodlq-0"), 0)

    def run() -> dict[str, Any]:
        conn = p.conn()
        seen: list[int] = []
        last: list[po.Popped] = []
        until = now_ms() + cycles * (p.invisible_ms + 8000)
        while now_ms() < until and len(seen) <= cycles:
            answer, _t0, _t1 = p.pop(conn, group, topic, poll_ms=500)
            seen += [x.message.reconsume_times for x in answer.popped]
            last = list(answer.popped) or last
        for x in last:  # the last one is acked: it stops coming back
            p.broker._ask(conn, po.ack_request(group, topic, x.handle))
        conn.close()
        return {"group": group, "topic": topic, "reconsume_times": seen}
    return run


def finish_no_dlq(p: Probe, r: dict[str, Any]) -> dict[str, Any]:
    try:
        res = p.broker.pull(PULL_GROUP, MessageQueue(f"%DLQ%{r['group']}", 0), 0, 32)
        r["dlq"] = [m.body.decode() for m in res.messages]
    except BrokerError as exc:
        r["dlq"] = []
        r["dlq_refused"] = [int(exc.code), exc.remark]
    return r


def check_crash(p: Probe, count: int = 6) -> dict[str, Any]:
    topic, group = p.setup("crash", count)
    conn = p.conn()
    answer, _t0, _t1 = p.pop(conn, group, topic)
    popped = [x.message.body.decode() for x in answer.popped]
    acked = []
    for x in answer.popped[: len(answer.popped) // 2]:
        if p.broker._ask(conn, po.ack_request(group, topic, x.handle)).code == 0:
            acked.append(x.message.body.decode())
    conn.close()
    time.sleep(0.5)
    t_kill = now_ms()
    p.broker.crash("kill")
    p.broker.recover()
    t_back = now_ms()
    conn = p.conn()
    # everything the group gets within the revive window after the restart (each acked at once)
    again = p.pop_until(conn, group, topic, max(t_back + 2 * p.invisible_ms, answer.pop_time + p.invisible_ms
                                                + 15_000), ack=True)
    conn.close()
    return {"sent": count, "popped": popped, "acked": acked, "kill_ms": t_kill, "back_ms": t_back,
            "down_ms": t_back - t_kill, "pop_time": answer.pop_time,
            "again": again, "again_bodies": sorted(a["body"] for a in again),
            "again_from_topic": sorted(a["body"] for a in again if a["reconsume"] == 0),
            "again_revived": sorted(a["body"] for a in again if a["reconsume"] > 0),
            "lost": sorted(set(popped) - set(acked) - {a["body"] for a in again}),
            "acked_redelivered": sorted({a["body"] for a in again} & set(acked))}


PREPARE: dict[str, Callable[[Probe], Callable[[], dict[str, Any]]]] = {
    "revive": check_revive, "ack": check_ack, "change": check_change, "orderly": check_orderly,
    "empty": check_empty, "retry_share": check_retry_share, "no_dlq": check_no_dlq}


def run(p: Probe, checks: list[str]) -> dict[str, Any]:
    keys = ("reviveInterval", "reviveScanTime", "reviveQueueNum", "enablePopBufferMerge",
            "popCkStayBufferTime", "popFromRetryProbability", "enableRetryTopicV2",
            "retrieveMessageFromPopRetryTopicV1", "popConsumerKVServiceEnable", "popResponseReturnActualRetryTopic",
            "timerWheelEnable", "flushConsumerOffsetInterval", "persistConsumerOffsetIncrementally",
            "popReviveSkipIfGroupAbsent", "reviveAckWaitMs")
    out: dict[str, Any] = {"broker": p.broker.broker_addr, "invisible_ms": p.invisible_ms,
                           "config": {k: p.config.get(k) for k in keys}, "checks": {}}
    started = time.monotonic()
    waiting = {name: PREPARE[name](p) for name in checks if name != "crash"}
    results: dict[str, Any] = {}

    def go(name: str, fn: Callable[[], dict[str, Any]]) -> None:
        try:
            results[name] = fn()
        except Exception as exc:  # reported, the test fails on it
            results[name] = {"error": f"{type(exc).__name__}: {exc}"}

    threads = [threading.Thread(target=go, args=item, daemon=True) for item in waiting.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=240)
    if "revive" in results and "error" not in results["revive"]:
        results["revive"] = finish_revive(p, results["revive"])
    if "no_dlq" in results and "error" not in results["no_dlq"]:
        results["no_dlq"] = finish_no_dlq(p, results["no_dlq"])
    out["checks"] = {name: results.get(name, {"error": "did not finish"}) for name in waiting}
    if "crash" in checks:
        out["checks"]["crash"] = check_crash(p)
    out["elapsed_s"] = round(time.monotonic() - started, 2)
    return out


def report(result: dict[str, Any]) -> str:
    c = result["checks"]
    lines = [f"pop probe: {result['broker']}, invisible {result['invisible_ms']} ms; config {result['config']}"]
    if "revive" in c and "error" not in c["revive"]:
        x = c["revive"]
        lines.append(f"  revive: popped {len(x['popped'])}, before due {len(x['before_due'])}, again "
                     f"{len(x['again'])} (reconsume {sorted({a['reconsume'] for a in x['again']})}, broker POP_CK "
                     f"{sorted({a['broker_made_ck'] for a in x['again']})}); retry topics {x['retry_topics']}")
        lines.append(f"    lateness (retry store time - due): {fmt_ms(x['lateness_ms'])}; re-pop after due "
                     f"{fmt_ms(x['repop_after_due_ms'])}")
    if "ack" in c and "error" not in c["ack"]:
        for name in ("single", "batch"):
            x = c["ack"][name]
            lines.append(f"  ack {name}: popped {x['popped']}, codes {x['codes']}, again {len(x['again'])} in "
                         f"{c['ack']['waited_ms']} ms")
    if "change" in c and "error" not in c["change"]:
        x = c["change"]
        lines.append(f"  change: code {x['change_code']} {x['change_ext']}, old {x['old_handle']!r} -> new "
                     f"{x['new_handle']!r}; again {len(x['again'])} at {x['again_after_new_due_ms']} ms after the "
                     f"new due; ack with the new handle {x['ack_new_handle_code']}")
    if "orderly" in c and "error" not in c["orderly"]:
        x = c["orderly"]
        lines.append(f"  orderly: first {[r['body'] for r in x['first']]}, same attemptId "
                     f"{[r['body'] for r in x['same_attempt']]}, blocked pops {len(x['blocked_pops'])}, "
                     f"after ack {[r['body'] for r in x['second']]}, expired one again "
                     f"{[(r['body'], r['reconsume'], r['order_count_info']) for r in x['second_again']]}, then "
                     f"{[r['body'] for r in x['third']]}")
    if "empty" in c and "error" not in c["empty"]:
        for row in c["empty"]["rows"]:
            lines.append(f"  empty poll {row['poll_ms']}: {row['code']} {row['remark']} in {row['elapsed_ms']} ms")
        lines.append(f"  unknown topic {c['empty']['unknown_topic']}; maxMsgNums 33 {c['empty']['max_nums_33']}")
    if "retry_share" in c and "error" not in c["retry_share"]:
        x = c["retry_share"]
        lines.append(f"  retry share: {x['while_both']['retry']} of {x['while_both']['pops']} one-message pops from "
                     f"the retry topic while both held messages; order {''.join(o[0] for o in x['order'])}")
    if "no_dlq" in c and "error" not in c["no_dlq"]:
        x = c["no_dlq"]
        lines.append(f"  no DLQ (retryMaxTimes 1): reconsume times seen {x['reconsume_times']}, DLQ {x['dlq']}")
    if "crash" in c:
        x = c["crash"]
        lines.append(f"  crash: popped {x['popped']}, acked {x['acked']}, down {x['down_ms']} ms, again from the "
                     f"topic {x['again_from_topic']}, revived {x['again_revived']}, lost {x['lost']}, "
                     f"acked redelivered {x['acked_redelivered']}")
    for name, x in c.items():
        if "error" in x:
            lines.append(f"  {name}: ERROR {x['error']}")
    lines.append(f"elapsed {result['elapsed_s']} s")
    return "\n".join(lines)



def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m interop.pop_probe", description=__doc__.split("\n")[0])
    parser.add_argument("--broker", required=True, help="rocketmq://NAMESRV_HOST:PORT")
    parser.add_argument("--checks", default=",".join(c for c in CHECKS if c != "crash"))
    parser.add_argument("--invisible-ms", type=int, default=3000)
    parser.add_argument("--crash-cmd", default=None)
    parser.add_argument("--restart-cmd", default=None)
    parser.add_argument("--json", default=None, metavar="FILE")
    args = parser.parse_args(argv)
    checks = [c.strip() for c in args.checks.split(",") if c.strip()]
    if set(checks) - set(CHECKS):
        parser.error(f"unknown check(s) {sorted(set(checks) - set(CHECKS))}; choose from {list(CHECKS)}")
    if "crash" in checks and not (args.crash_cmd and args.restart_cmd):
        parser.error("the crash check needs --crash-cmd and --restart-cmd")
    probe = Probe(parse_url(args.broker), args.invisible_ms, args.crash_cmd, args.restart_cmd)
    try:
        result = run(probe, checks)
    finally:
        probe.broker.close()
    publish(result, args.json, report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
