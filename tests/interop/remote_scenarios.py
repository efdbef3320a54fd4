"""Scenarios of RemoteBroker against a real name server + broker (4.9.8, or 5.3.3 for the module's 5.x run),
run INSIDE the fixture's namespace.

The pytest process cannot enter the fixture's network namespace (Python 3.11 has no ``os.setns``), so
``test_remote_adapter_real.py`` runs each scenario here as a child process::

    ip netns exec $RMQ_NETNS .venv/bin/python -m tests.interop.remote_scenarios SCENARIO '{"storedir": ...}'

A scenario only *observes*: it drives ``RemoteBroker`` (and, for the replay, ``RemotingClient``), and
prints one JSON object of what it saw (results as data: attrs values as dicts, bytes as text, enums by
name, elapsed times in ms) as the last line of stdout. A failed operation is an observation too
(``{"error": type, "message": ...}``); an unexpected exception prints ``{"crashed": traceback}``. The
test process judges the observations against SPEC / the model and fails with the whole observation.
Where 5.3.3 needs a different step to show what it does differently, the test passes an argument
(``retry_dlq``: ``origin_topic``; ``transactions``: ``op_batch``); without one a scenario does what it
always did.
"""

from __future__ import annotations

import enum
import json
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from rmqspec.model.clock import WallClock
from rmqspec.model.message import Message, MessageQueue
from rmqspec.model.results import BrokerError, PullResult, TxnAction
from rmqspec.remoting import client_ops as ops
from rmqspec.remoting.adapter import RemoteBroker
from rmqspec.remoting.bodies import decode_messages
from rmqspec.remoting.client import RemotingClient, RemotingError
from rmqspec.remoting.codes import RequestCode
from rmqspec.remoting.command import RemotingCommand, SerializeType, request

NAMESRV = "127.0.0.1:9876"
PORTS = {9876: "127.0.0.1:9876", 10911: "127.0.0.1:10911"}


def jsonable(value: Any) -> Any:
    if attrs.has(type(value)):
        return {f.name: jsonable(getattr(value, f.name)) for f in attrs.fields(type(value))
                if not f.name.startswith("_")}
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "backslashreplace")
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [jsonable(v) for v in value]
        return sorted(items, key=json.dumps) if isinstance(value, (set, frozenset)) else items
    return value


def attempt(fn: Callable[[], Any]) -> Any:
    """The result, or the refusal / wire failure as data."""
    try:
        return jsonable(fn())
    except (BrokerError, RemotingError, ops.ResponseMalformed) as exc:
        out = {"error": type(exc).__name__, "message": str(exc)}
        if isinstance(exc, BrokerError):
            out["code"] = exc.code.name
        return out


def ms_since(t0: float) -> int:
    return round((time.monotonic() - t0) * 1000)


def poll_pull(b: RemoteBroker, group: str, mq: MessageQueue, offset: int, timeout_s: float,
              want: int = 1) -> tuple[PullResult, int]:
    """Pull (non-suspended) every 20 ms until ``want`` messages are visible; (result, ms waited).

    The real broker answers a send once the commitlog has the record; the consume queue a pull reads is
    built a moment later by its ReputMessageService, so "sent" and "pullable" are not the same instant.
    """
    t0 = time.monotonic()
    while True:
        res = b.pull(group, mq, offset)
        if len(res.messages) >= want or time.monotonic() - t0 > timeout_s:
            return res, ms_since(t0)
        time.sleep(0.02)


def pulled(b: RemoteBroker, group: str, mq: MessageQueue, offset: int, obs: dict, key: str, want: int = 1,
           timeout_s: float = 5) -> PullResult:
    res, waited = poll_pull(b, group, mq, offset, timeout_s, want)
    obs[key] = jsonable(res)
    obs.setdefault("visible_after_ms", {})[key] = waited
    return res


def consumer_ids(group: str) -> list[str]:
    with RemotingClient.connect(PORTS[10911]) as c:
        resp = c.invoke(request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group}))
    if resp.code != 0:
        return [f"code {resp.code}: {resp.remark}"]
    return sorted(ops._json_body(resp, "GET_CONSUMER_LIST_BY_GROUP").get("consumerIdList") or [])


# ---------------------------------------------------------------------------------------------- scenarios


def basic(args: dict) -> dict:
    b = RemoteBroker(NAMESRV, WallClock())
    obs: dict[str, Any] = {"broker": [b.broker_name, b.broker_addr], "capabilities": jsonable(b.capabilities)}
    t0 = time.monotonic()
    b.create_topic("RT_BASIC", 4)
    obs["create_topic_ms"] = ms_since(t0)
    b.create_group("RG_BASIC", 16, 1)
    mq = MessageQueue("RT_BASIC", 2)
    msgs = [Message("RT_BASIC", f"body{i}".encode(), tags="ab"[i % 2], keys=(f"k{i}", "kk"),
                    properties={"user": str(i)}) for i in range(3)]
    obs["wire_properties"] = []
    obs["sent"] = []
    for m in msgs:
        before = b.clock.now()
        r = b.send(m, 2)
        obs["sent"].append(jsonable(r) | {"born_min": before, "born_max": b.clock.now()})
        obs["wire_properties"].append(m.wire_properties() | {"UNIQ_KEY": r.uniq_key})
    pulled(b, "RG_BASIC", mq, 0, obs, "pull_all", want=3)
    obs["pull_one"] = jsonable(b.pull("RG_BASIC", mq, 1, max_nums=1))
    obs["pull_tag_a"] = jsonable(b.pull("RG_BASIC", mq, 0, subscription="a"))
    obs["pull_tag_none"] = jsonable(b.pull("RG_BASIC", mq, 0, subscription="zzz"))
    obs["pull_at_max"] = jsonable(b.pull("RG_BASIC", mq, 3))
    obs["pull_beyond"] = jsonable(b.pull("RG_BASIC", mq, 10))
    obs["pull_empty_queue"] = jsonable(b.pull("RG_BASIC", MessageQueue("RT_BASIC", 0), 0))
    obs["query_before_commit"] = b.query_offset("RG_BASIC", mq)
    obs["query_empty_queue"] = b.query_offset("RG_BASIC", MessageQueue("RT_BASIC", 1))
    b.update_offset("RG_BASIC", mq, 2)
    obs["query_after_commit"] = b.query_offset("RG_BASIC", mq)
    obs["query_other_group"] = b.query_offset("RG_OTHER", mq)
    obs["pull_unknown_topic"] = attempt(lambda: b.pull("RG_BASIC", MessageQueue("RT_NOPE", 0), 0))
    obs["pull_bad_queue"] = attempt(lambda: b.pull("RG_BASIC", MessageQueue("RT_BASIC", 9), 0))
    obs["send_bad_queue"] = attempt(lambda: b.send(Message("RT_BASIC", b"x"), 9))
    obs["send_uncreated_topic"] = attempt(lambda: b.send(Message("RT_AUTO", b"x"), 0))
    obs["pull_uncreated_group"] = attempt(lambda: b.pull("RG_NEVER_CREATED", mq, 0))
    # a consumer heartbeat makes the broker create %RETRY%<group>; without one it does not exist yet
    obs["retry_topic_heartbeated"] = attempt(lambda: b.pull("RG_BASIC", MessageQueue("%RETRY%RG_BASIC", 0), 0))
    quiet = RemoteBroker(NAMESRV, WallClock(), heartbeat_consumers=False)
    quiet.create_group("RG_QUIET")
    obs["retry_topic_not_heartbeated"] = attempt(
        lambda: quiet.pull("RG_QUIET", MessageQueue("%RETRY%RG_QUIET", 0), 0))
    quiet.close()
    b.flush()
    obs["consumers_before_close"] = consumer_ids("RG_BASIC")
    obs["client_id"] = b.client_id
    b.close()
    obs["consumers_after_close"] = consumer_ids("RG_BASIC")
    return obs


def delay(args: dict) -> dict:
    b = RemoteBroker(NAMESRV, WallClock())
    b.create_topic("RT_DELAY", 1)
    b.create_group("RG_DELAY")
    sent = b.send(Message("RT_DELAY", b"later", tags="t", delay_level=2), 0)
    obs: dict[str, Any] = {"sent": jsonable(sent)}
    pulled(b, "RG_DELAY", MessageQueue("SCHEDULE_TOPIC_XXXX", 1), sent.queue_offset, obs, "schedule_copy")
    obs["real_topic_at_once"] = jsonable(b.pull("RG_DELAY", MessageQueue("RT_DELAY", 0), 0))
    fired, waited = poll_pull(b, "RG_DELAY", MessageQueue("RT_DELAY", 0), 0, 10)
    obs["fired"] = jsonable(fired)
    obs["waited_ms"] = waited
    b.close()
    return obs


def send_back_raw(group: str, commitlog_offset: int, delay_level: int, origin_msg_id: str | None,
                  max_reconsume_times: int | None, origin_topic: str | None = None) -> dict:
    """The adapter's CONSUMER_SEND_MSG_BACK request on a connection of its own, with ``originTopic`` only
    when given (the Java client, and RemoteBroker for a message it pulled, set it to the message's topic):
    code and remark."""
    cmd = ops.send_back_request(group, commitlog_offset, delay_level, origin_msg_id, max_reconsume_times,
                                origin_topic)
    with RemotingClient.connect(PORTS[10911]) as c:
        resp = c.invoke(cmd)
    return {"code": ops.parse_code(resp).name, "remark": resp.remark}


def retry_dlq(args: dict) -> dict:
    """Send-back to the retry topic, then to the DLQ. With ``origin_topic`` (5.x), each send-back bound for
    the DLQ goes without ``originTopic`` (a raw request: RemoteBroker sends it, as the Java client does),
    then: the same request again on a connection of its own (its remark), a pull of where its DLQ copy
    would be, and the request with ``originTopic`` set as the Java client sets it."""
    origin_topic = args.get("origin_topic")
    b = RemoteBroker(NAMESRV, WallClock())
    b.create_topic("RT_RETRY", 1)
    b.create_group("RG_RETRY", 16, 1)
    b.create_group("RG_RETRY0", 0, 1)
    obs: dict[str, Any] = {}
    sent = b.send(Message("RT_RETRY", b"fails", tags="t"), 0)

    def to_dlq(key: str, group: str, offset: int, level: int, max_times: int | None, dlq_offset: int) -> None:
        if not origin_topic:
            obs[key] = b.send_back(group, offset, level, sent.uniq_key, max_times).name
        else:
            obs[key] = send_back_raw(group, offset, level, sent.uniq_key, max_times)["code"]
            obs[f"{key}_again"] = send_back_raw(group, offset, level, sent.uniq_key, max_times)
            obs[f"{key}_dlq_before"] = attempt(lambda: b.pull(group, MessageQueue(f"%DLQ%{group}", 0), dlq_offset))
            obs[f"{key}_with_origin_topic"] = send_back_raw(group, offset, level, sent.uniq_key, max_times,
                                                            origin_topic)["code"]

    orig = pulled(b, "RG_RETRY", MessageQueue("RT_RETRY", 0), 0, obs, "original_pull").messages[0]
    obs["original"] = jsonable(orig)
    retry_mq = MessageQueue("%RETRY%RG_RETRY", 0)
    copies = []
    current = orig
    for _ in range(2):  # two failures that retry (max 2): levels 3 and 4
        code = b.send_back("RG_RETRY", current.commitlog_offset, 0, sent.uniq_key, 2)
        t0 = time.monotonic()
        res, _ = poll_pull(b, "RG_RETRY", retry_mq, len(copies), 15)
        copies.append({"send_back": code.name, "waited_ms": ms_since(t0), "pull": jsonable(res)})
        current = res.messages[0] if res.messages else current
    obs["retries"] = copies
    to_dlq("third_failure", "RG_RETRY", current.commitlog_offset, 0, 2, 0)
    pulled(b, "RG_RETRY", MessageQueue("%DLQ%RG_RETRY", 0), 0, obs, "dlq")
    obs["retry_after_dlq"] = jsonable(b.pull("RG_RETRY", retry_mq, len(copies)))
    to_dlq("negative_level", "RG_RETRY", orig.commitlog_offset, -1, None, 1)
    pulled(b, "RG_RETRY", MessageQueue("%DLQ%RG_RETRY", 0), 1, obs, "dlq_after_negative")
    # retry_max_times 0 of the group (no max in the request): the first failure goes to the DLQ
    to_dlq("group_max_0", "RG_RETRY0", orig.commitlog_offset, 0, None, 0)
    pulled(b, "RG_RETRY0", MessageQueue("%DLQ%RG_RETRY0", 0), 0, obs, "dlq_group_max_0")
    obs["bad_offset"] = b.send_back("RG_RETRY", 987_654_321, 0, None, None).name
    obs["uncreated_group"] = b.send_back("RG_NEVER_CREATED_2", orig.commitlog_offset, 0, None, None).name
    b.close()
    return obs


def retry_send_raw(group: str, times: int, max_times: int, delay: str | None, body: bytes) -> dict:
    """SEND_MESSAGE_V2 to ``%RETRY%<group>`` as the Java consumer sends a retry itself when its
    CONSUMER_SEND_MSG_BACK failed (DefaultMQPushConsumerImpl.sendMessageBack: RECONSUME_TIME and
    MAX_RECONSUME_TIMES travel as the header's reconsumeTimes ``j`` and maxReconsumeTimes ``l``), with the
    DELAY it asks for (the client's is 3 + reconsume times): the answer, and the record the msgId names."""
    props = {"UNIQ_KEY": uuid.uuid4().hex.upper(), "WAIT": "true", **({"DELAY": delay} if delay is not None else {})}
    cmd = ops.send_request("PG_RETRY_SEND", Message(f"%RETRY%{group}", body), 0, props,
                           int(time.time() * 1000), "broker-a")
    cmd = attrs.evolve(cmd, ext_fields={**cmd.ext_fields, "j": times, "l": max_times})
    with RemotingClient.connect(PORTS[10911]) as c:
        resp = c.invoke(cmd)
        out: dict[str, Any] = {"code": ops.parse_code(resp).name, "remark": resp.remark}
        if resp.code == 0:
            offset = int(resp.ext_fields["msgId"][-16:], 16)
            view = c.invoke(request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": offset}))
            out["stored"] = jsonable(decode_messages(view.body)[0]) if view.code == 0 else view.remark
    return out


def retry_send(args: dict) -> dict:
    """A %RETRY% send past the max (reconsumeTimes 3, maxReconsumeTimes 2: the DLQ by 4.9.8's >= and 5.x's >),
    with DELAY 2 and without one: where each is stored, and when each is in the DLQ."""
    b = RemoteBroker(NAMESRV, WallClock())
    b.create_group("RG_RS", 16, 1)
    obs: dict[str, Any] = {}
    t0 = time.monotonic()
    obs["with_delay"] = retry_send_raw("RG_RS", 3, 2, "2", b"asks-level-2")
    obs["without_delay"] = retry_send_raw("RG_RS", 3, 2, None, b"asks-nothing")
    dlq = MessageQueue("%DLQ%RG_RS", 0)
    seen: dict[str, int] = {}
    while len(seen) < 2 and time.monotonic() - t0 < 10:
        res = attempt(lambda: b.pull("RG_RS", dlq, 0))
        for m in res.get("messages", []) if isinstance(res, dict) else []:
            seen.setdefault(m["body"], ms_since(t0))
        time.sleep(0.02)
    obs["dlq_visible_after_ms"] = seen
    obs["dlq"] = attempt(lambda: b.pull("RG_RS", dlq, 0))
    b.close()
    return obs


def locks(args: dict) -> dict:
    b = RemoteBroker(NAMESRV, WallClock())
    b.create_topic("RT_LOCK", 2)
    mq = MessageQueue("RT_LOCK", 0)
    obs: dict[str, Any] = {}
    obs["a_first"] = jsonable(b.lock_batch("RG_LOCK", "cA", [mq]))
    obs["b_denied"] = jsonable(b.lock_batch("RG_LOCK", "cB", [mq, MessageQueue("RT_LOCK", 1)]))
    time.sleep(2)
    obs["a_renew"] = jsonable(b.lock_batch("RG_LOCK", "cA", [mq]))
    renewed = time.monotonic()
    time.sleep(2)
    obs["b_after_renew"] = jsonable(b.lock_batch("RG_LOCK", "cB", [mq]))
    while True:
        got = b.lock_batch("RG_LOCK", "cB", [mq])
        if got or time.monotonic() - renewed > 15:
            break
        time.sleep(0.05)
    obs["b_granted_after_ms"] = ms_since(renewed)
    obs["b_granted"] = jsonable(got)
    obs["a_denied"] = jsonable(b.lock_batch("RG_LOCK", "cA", [mq]))
    b.unlock_batch("RG_LOCK", "cA", [mq])
    obs["a_after_own_unlock_attempt"] = jsonable(b.lock_batch("RG_LOCK", "cA", [mq]))
    b.unlock_batch("RG_LOCK", "cB", [mq])
    obs["a_after_b_unlock"] = jsonable(b.lock_batch("RG_LOCK", "cA", [mq]))
    obs["other_group"] = jsonable(b.lock_batch("RG_LOCK2", "cB", [mq]))
    b.close()
    return obs


OP_MQ = MessageQueue("RMQ_SYS_TRANS_OP_HALF_TOPIC", 0)


class OpWatch(threading.Thread):
    """Asks the broker for the max offset of the half queue's op queue (GET_MAX_OFFSET, which reads the
    store: 4.9.8 never registers the op topic, so a pull of it is TOPIC_NOT_EXIST there) every 20 ms on a
    connection of its own, until it holds a record: the wall-clock ms it was first seen, then a pull of it."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.done = threading.Event()
        self.seen_ms: int | None = None
        self.pull: Any = None

    def run(self) -> None:
        with RemotingClient.connect(PORTS[10911]) as c:
            while not self.done.is_set():
                resp = c.invoke(request(RequestCode.GET_MAX_OFFSET, {"topic": OP_MQ.topic, "queueId": 0}))
                if resp.code == 0 and int(resp.ext("offset") or 0) > 0:
                    self.seen_ms = WallClock().now()
                    break
                time.sleep(0.02)
        w = RemoteBroker(NAMESRV, WallClock(), heartbeat_consumers=False)
        self.pull = attempt(lambda: w.pull("RG_TXN_OPS", OP_MQ, 0))
        w.close()


def check_row(arrived_ms: int, c: Any, since_ms: int) -> dict:
    return {"transaction_id": c.transaction_id, "tran_state_table_offset": c.tran_state_table_offset,
            "check_times": c.message.properties.get("TRANSACTION_CHECK_TIMES"), "ms": arrived_ms - since_ms}


def transactions(args: dict) -> dict:
    """Halves committed, rolled back and left UNKNOWN, then the check. With ``op_batch`` (5.x): a probe half
    (producer group PG_TXN_PROBE, never answered) first, whose first check marks a check round; the halves
    follow at once, so they are all older than transactionTimeOut at the next round (3 s later) while the op
    records of the first COMMIT/ROLLBACK (the first ever on the broker: 5.x writes them in a batch at least
    transactionOpBatchInterval = 3 s later) are not written yet. An ``OpWatch`` times the op records; every
    check of the next round is kept (until quiet for 500 ms) and answered as the producer knows it (h1
    COMMIT, h2 ROLLBACK, h3 COMMIT)."""
    op_batch = bool(args.get("op_batch"))
    b = RemoteBroker(NAMESRV, WallClock())
    b.create_topic("RT_TXN", 1)
    b.create_group("RG_TXN")
    mq = MessageQueue("RT_TXN", 0)
    obs: dict[str, Any] = {}
    probe_key, probe_checks, watch, round_ms = None, [], OpWatch(), None
    if op_batch:
        probe = b.send_half(Message("RT_TXN", b"probe"), 0, "PG_TXN_PROBE")
        probe_key = probe.uniq_key
        b.end_transaction("PG_TXN_PROBE", probe.commitlog_offset, probe.queue_offset, TxnAction.UNKNOWN, False)
        t0 = WallClock().now()
        while not probe_checks and WallClock().now() - t0 < 15_000:
            probe_checks = [check_row(at, c, t0) for at, c in b.tick_timed()]
            time.sleep(0.02)
        obs["probe_checks"] = probe_checks  # a check round began just before the first one arrived
        round_ms = t0 + probe_checks[0]["ms"] if probe_checks else None
        watch.start()
    h1 = b.send_half(Message("RT_TXN", b"commit me", tags="c"), 0, "PG_TXN")
    obs["half1"] = jsonable(h1)
    pulled(b, "RG_TXN", MessageQueue("RMQ_SYS_TRANS_HALF_TOPIC", 0), h1.queue_offset, obs, "half_topic")
    obs["before_commit"] = jsonable(b.pull("RG_TXN", mq, 0))
    obs["wrong_table_offset"] = b.end_transaction("PG_TXN", h1.commitlog_offset, h1.queue_offset + 7,
                                                  TxnAction.COMMIT, False).name
    obs["wrong_group"] = b.end_transaction("PG_OTHER", h1.commitlog_offset, h1.queue_offset, TxnAction.COMMIT,
                                           False).name
    obs["unknown_offset"] = b.end_transaction("PG_TXN", 987_654_321, 0, TxnAction.COMMIT, False).name
    obs["commit"] = b.end_transaction("PG_TXN", h1.commitlog_offset, h1.queue_offset, TxnAction.COMMIT,
                                      False).name
    commit_ms = WallClock().now()
    pulled(b, "RG_TXN", mq, 0, obs, "after_commit")
    obs["commit_again"] = b.end_transaction("PG_TXN", h1.commitlog_offset, h1.queue_offset, TxnAction.COMMIT,
                                            False).name
    h2 = b.send_half(Message("RT_TXN", b"roll me back"), 0, "PG_TXN")
    obs["half2"] = jsonable(h2)
    obs["rollback"] = b.end_transaction("PG_TXN", h2.commitlog_offset, h2.queue_offset, TxnAction.ROLLBACK,
                                        False).name
    if op_batch:
        obs["op_at_once"] = attempt(lambda: b.pull("RG_TXN", OP_MQ, 0))
        obs["op_seen_at_once"] = watch.seen_ms is not None
    h3_born = WallClock().now()
    h3 = b.send_half(Message("RT_TXN", b"ask me"), 0, "PG_TXN")
    obs["half3"] = jsonable(h3)
    if op_batch:
        obs["half3_sent_after_round_ms"] = None if round_ms is None else h3_born - round_ms
    obs["unknown"] = b.end_transaction("PG_TXN", h3.commitlog_offset, h3.queue_offset, TxnAction.UNKNOWN,
                                       False).name
    t0 = time.monotonic()
    checks: list = []
    if not op_batch:
        while not checks and time.monotonic() - t0 < 15:
            checks = b.tick()
            time.sleep(0.05)
        obs["check_after_ms"] = ms_since(t0)
        obs["checks"] = jsonable(checks)
        if checks:
            c = checks[0]
            obs["check_answer"] = b.end_transaction(c.producer_group, c.commitlog_offset,
                                                    c.tran_state_table_offset, TxnAction.COMMIT, True).name
        pulled(b, "RG_TXN", mq, 0, obs, "final", want=3)
    else:
        unknown_ms, timed, last = WallClock().now(), [], time.monotonic()
        while time.monotonic() - t0 < 15 and not (
                any(c.transaction_id == h3.uniq_key for _, c in timed) and time.monotonic() - last > 0.5):
            for at, c in b.tick_timed():
                if c.transaction_id == probe_key:
                    probe_checks.append(check_row(at, c, unknown_ms))
                else:
                    timed.append((at, c))
                    last = time.monotonic()
            time.sleep(0.02)
        timed.sort(key=lambda x: x[1].tran_state_table_offset)  # the round's scan order
        checks = [c for _, c in timed]
        obs["checks"] = jsonable(checks)
        obs["check_rows"] = [check_row(at, c, commit_ms) for at, c in timed]
        obs["check_after_ms"] = next((at - unknown_ms for at, c in timed if c.transaction_id == h3.uniq_key), None)
        answer = {h1.uniq_key: TxnAction.COMMIT, h2.uniq_key: TxnAction.ROLLBACK, h3.uniq_key: TxnAction.COMMIT}
        obs["check_answers"] = [b.end_transaction(c.producer_group, c.commitlog_offset, c.tran_state_table_offset,
                                                  answer[c.transaction_id], True).name for c in checks]
        pulled(b, "RG_TXN", mq, 0, obs, "final", want=4)
    time.sleep(1)
    obs["final_later"] = jsonable(b.pull("RG_TXN", mq, 0))
    later = b.tick_timed()
    probe_checks += [check_row(at, c, commit_ms) for at, c in later if op_batch and c.transaction_id == probe_key]
    obs["later_checks"] = jsonable([c for _, c in later if not op_batch or c.transaction_id != probe_key])
    if op_batch:
        watch.join(12)
        watch.done.set()
        obs["op_batch"] = watch.pull
        obs["op_after_commit_ms"] = None if watch.seen_ms is None else watch.seen_ms - commit_ms
    b.close()
    return obs


def crash(args: dict) -> dict:
    b = RemoteBroker(NAMESRV, WallClock(), crash_cmd=args["crash_cmd"], restart_cmd=args["restart_cmd"])
    obs: dict[str, Any] = {"capabilities": jsonable(b.capabilities), "crash_kinds": list(b.crash_kinds)}
    b.create_topic("RT_CRASH", 1)
    mq = MessageQueue("RT_CRASH", 0)
    obs["sent"] = [jsonable(b.send(Message("RT_CRASH", f"m{i}".encode()), 0)) for i in range(5)]
    t0 = time.monotonic()
    b.crash("kill")
    obs["crash_ms"] = ms_since(t0)
    obs["while_down"] = attempt(lambda: b.send(Message("RT_CRASH", b"x"), 0))
    t0 = time.monotonic()
    b.recover()
    obs["recover_ms"] = ms_since(t0)
    pulled(b, "RG_CRASH", mq, 0, obs, "after_recover", want=5)
    obs["sent_after"] = jsonable(b.send(Message("RT_CRASH", b"after"), 0))
    b.close()
    return obs


def replay(args: dict) -> dict:
    """Every captured Java request, decoded by us and re-encoded, in its own header type and in the other."""
    from tests.remoting.capture_pairs import exchanges

    jobs = []
    for port in (9876, 10911):
        reqs = [e.request for e in exchanges() if e.server_port == port]
        for stype in (SerializeType.JSON, SerializeType.ROCKETMQ):
            jobs.append((port, stype, [attrs.evolve(r, serialize_type=stype) for r in reqs]))
    results: list[dict] = [{} for _ in jobs]

    def run(i: int, port: int, stype: SerializeType, reqs: list[RemotingCommand]) -> None:
        out = results[i]
        out.update(port=port, serialize_type=stype.name, sent=0, oneway=0, answers=[], problems=[], skipped=[])
        try:
            with RemotingClient.connect(PORTS[port], timeout_ms=5000) as c:
                pending = []
                for r in reqs:
                    if stype is SerializeType.ROCKETMQ and not -(1 << 15) <= r.code < (1 << 15):
                        out["skipped"].append(r.code)  # the binary header's code is an int16
                        continue
                    out["sent"] += 1
                    if r.is_oneway:
                        c.invoke_oneway(r)
                        out["oneway"] += 1
                    else:
                        pending.append((r, c.send(r)))
                deadline = time.monotonic() + 40  # long-polling pulls are held up to 15 s (+5 s)
                for r, slot in pending:
                    try:
                        resp = slot.wait(max(0, round((deadline - time.monotonic()) * 1000)))
                    except RemotingError as exc:
                        out["problems"].append({"code": r.code, "error": str(exc)})
                        continue
                    out["answers"].append({"code": r.code, "opaque": r.opaque, "sys_flag": r.ext("sysFlag"),
                                           "resp_code": resp.code,
                                           "remark": resp.remark, "resp_serialize_type": resp.serialize_type.name,
                                           "is_response": resp.is_response})
                alive = c.invoke(ops.cluster_info_request() if port == 9876 else
                                 request(RequestCode.GET_BROKER_RUNTIME_INFO))
                out["alive_after"] = alive.code
        except RemotingError as exc:
            out["problems"].append({"error": str(exc)})

    threads = [threading.Thread(target=run, args=(i, *job)) for i, job in enumerate(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"runs": results, "requests": len(exchanges())}


def dispatch(args: dict) -> dict:
    """Send, then pull the message's offset at once, ``n`` times: with the dispatch barrier and
    without it (``dispatch_wait_ms=0``), counting the pulls that did not see the message yet."""
    obs: dict[str, Any] = {}
    for label, wait_ms in (("barrier", 2000), ("no_barrier", 0)):
        b = RemoteBroker(NAMESRV, WallClock(), dispatch_wait_ms=wait_ms)
        topic = f"RT_DISPATCH_{label.upper()}"
        b.create_topic(topic, 1)
        b.create_group("RG_DISPATCH", 16, 1)
        misses, t0 = [], time.monotonic()
        for i in range(args.get("n", 200)):
            sent = b.send(Message(topic, f"b{i}".encode()), 0)
            got = b.pull("RG_DISPATCH", MessageQueue(topic, 0), sent.queue_offset, max_nums=1)
            if [m.msg_id for m in got.messages] != [sent.msg_id]:
                misses.append({"i": i, "status": got.status.name, "max_offset": got.max_offset})
        obs[label] = {"misses": misses, "waits": b.dispatch_waits, "ms": ms_since(t0),
                      "barrier_on": b.dispatch_wait_ms > 0}
        b.close()
    return obs


def retention_fill(args: dict) -> dict:
    """Retention, step 1: queue RT_U gets 3 messages, RT_N 12 (more than its first 10-unit consume-queue
    file), then RT_RET ``n`` of ~200 bytes (small commitlog files roll); what each send answered."""
    b = RemoteBroker(NAMESRV, WallClock())
    obs: dict[str, Any] = {"sent": {}}
    for topic, n, size in (("RT_U", 3, 10), ("RT_N", 12, 10), ("RT_RET", args.get("n", 60), 200)):
        b.create_topic(topic, 1)
        obs["sent"][topic] = [jsonable(b.send(Message(topic, b"r" * size), 0)) for _ in range(n)]
    b.create_group("RG_RET", 16, 1)
    b.flush()
    b.close()
    return obs


def retention_observe(args: dict) -> dict:
    """Retention, step 2: pull RT_RET at offset 0 until its min offset moves (at most ``timeout_s``); then
    the answers below, at and after the new min, RT_U's answer at 0, and a fresh group's offset."""
    b = RemoteBroker(NAMESRV, WallClock())
    mq, u = MessageQueue("RT_RET", 0), MessageQueue("RT_U", 0)
    t0 = time.monotonic()
    res = b.pull("RG_RET", mq, 0)
    while res.min_offset == 0 and time.monotonic() - t0 < args.get("timeout_s", 120):
        time.sleep(0.5)
        res = b.pull("RG_RET", mq, 0)
    obs: dict[str, Any] = {"waited_ms": ms_since(t0), "below": jsonable(res)}
    obs["at_min"] = jsonable(b.pull("RG_RET", mq, res.min_offset, max_nums=1))
    obs["u_at_0"] = attempt(lambda: b.pull("RG_RET", u, 0))
    obs["u_at_1"] = attempt(lambda: b.pull("RG_RET", u, 1))
    # the raw answers (code, remark = the store's GetMessageStatus): below RT_RET's min, RT_U past its gone
    # units, RT_N in its deleted first consume-queue file and past the gone units of its last
    n = MessageQueue("RT_N", 0)
    for name, queue, offset in (("raw_below", mq, 0), ("raw_u_at_1", u, 1), ("raw_n_at_0", n, 0),
                                ("raw_n_at_10", n, 10)):
        resp = b._invoke(ops.pull_request("RG_RET", queue, offset, 32, "*"))
        obs[name] = {"code": resp.code, "remark": resp.remark, "next": int(resp.ext_fields["nextBeginOffset"]),
                     "min": int(resp.ext_fields["minOffset"])}
    obs["query_fresh"] = attempt(lambda: b.query_offset("RG_RET_FRESH", mq))
    b.close()
    return obs


def retention_drain(args: dict) -> dict:
    """Retention, step 3: what is left of RT_RET, pulled by a fresh group from the min offset to the max (the
    other two topics kept no record: their units all point below the commitlog's min), each with when."""
    b = RemoteBroker(NAMESRV, WallClock())
    mq, got = MessageQueue("RT_RET", 0), []
    res = b.pull("RG_DRAIN", mq, 0)
    offset = res.min_offset
    while offset < res.max_offset:
        res = b.pull("RG_DRAIN", mq, offset)
        got += [{**jsonable(m), "recv_ts": int(time.time() * 1000)} for m in res.messages]
        if res.next_begin_offset <= offset:
            break
        offset = res.next_begin_offset
    b.close()
    return {"min_offset": res.min_offset, "max_offset": res.max_offset, "messages": got}


def retention_modes(args: dict) -> dict:
    """Retention, step 4 (issue 42's combined trace, with steps 1-3): on the fresh topic RT_MIX (2 queues) a
    oneway send (RemoteBroker waits until its queue grew), an async send (the request on a connection of its
    own, its answer collected from the pending response after the call returned), a send whose answer is lost
    (written on a connection closed, once the queue grew, without reading the answer) and the producer's retry
    of it (sendDefaultImpl: the next queue, the same UNIQ_KEY); then two BROADCASTING readers of group RG_BC and
    one clustering reader of RG_MIX pull both queues from 0, each with when."""
    b = RemoteBroker(NAMESRV, WallClock())
    topic = "RT_MIX"
    b.create_topic(topic, 2)
    q0 = MessageQueue(topic, 0)
    obs: dict[str, Any] = {"topic": topic}

    def message(tag: str) -> Message:
        return Message(topic, f"mix-{tag}".encode(), tags=tag, uniq_key=uuid.uuid4().hex.upper())

    def now_ms() -> int:
        return int(time.time() * 1000)

    def max_offset() -> int:
        return ops.parse_max_offset(b._invoke(ops.max_offset_request(q0)))

    m = message("oneway")
    obs["oneway"] = {"key": m.uniq_key, "ts": now_ms()}
    b.send_oneway(m, 0)
    m = message("async")
    conn = RemotingClient.connect(b.broker_addr)
    pending = conn.send(ops.send_request(b.producer_group, m, 0, m.wire_properties(), now_ms(), b.broker_name))
    asked = now_ms()
    obs["async"] = {**jsonable(ops.parse_send(pending.wait(5000), m.uniq_key)), "ts": asked, "answered_ts": now_ms()}
    conn.close()
    b.wait_dispatched()
    m = message("lost")
    before = max_offset()
    conn = RemotingClient.connect(b.broker_addr)
    obs["lost"] = {"key": m.uniq_key, "ts": now_ms()}
    conn.send(ops.send_request(b.producer_group, m, 0, m.wire_properties(), now_ms(), b.broker_name))
    t0 = time.monotonic()
    while max_offset() <= before and time.monotonic() - t0 < 5:
        time.sleep(0.005)
    conn.close()  # the answer is never read
    obs["lost"]["stored"] = max_offset() > before
    obs["retry"] = {**jsonable(b.send(m, 1)), "ts": now_ms()}
    for reader in ("bc1", "bc2", "mix"):
        got = []
        for q in range(2):
            res = b.pull("RG_BC" if reader != "mix" else "RG_MIX", MessageQueue(topic, q), 0)
            got += [{**jsonable(x), "recv_ts": now_ms()} for x in res.messages]
        obs[reader] = got
    b.close()
    return obs


SCENARIOS: dict[str, Callable[[dict], dict]] = {f.__name__: f for f in (basic, delay, retry_dlq, retry_send, locks,
                                                                        transactions, crash, replay,
                                                                        dispatch, retention_fill,
                                                                        retention_observe, retention_drain,
                                                                        retention_modes)}


def main(argv: list[str]) -> int:
    name, args = argv[0], json.loads(argv[1]) if len(argv) > 1 else {}
    try:
        obs = SCENARIOS[name](args)
    except Exception:
        obs = {"crashed": traceback.format_exc()}
    sys.stdout.write(json.dumps(obs, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
