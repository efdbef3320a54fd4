"""Requests the conformance machine does not send, as RocketMQ's clients send them, over the wire.

    python -m interop.compat_probe --broker rocketmq://127.0.0.1:9876 --profile rocketmq-5.2 \
        [--checks retry_send,lock_4x] [--json FILE]

(from the repository root; in a ``scripts/real-rocketmq`` fixture: ``real-rocketmq exec --dir D --
.venv/bin/python -m interop.compat_probe ...``). Exit 0 when the broker answered every check as the profile's
RocketMQ does, 1 when it did not (each difference printed), 2 when the broker cannot be reached or refuses a
step the check needs. The rocketmq-rust report (docs/conformance/rocketmq-rust.md) keeps its runs.

Theory of operation
-------------------
The conformance machine plays one client (``RemoteBroker``); these checks cover what other clients send.

``retry_send``: the machine sends a message back with CONSUMER_SEND_MSG_BACK only, so the rule RocketMQ applies
to a plain SEND_MESSAGE_V2 whose topic is ``%RETRY%<group>`` (the client's fallback when its send-back fails,
and the 5.x proxy's way) is judged here: SendMessageProcessor.handleRetryAndDLQ dead-letters such a send when
``reconsumeTimes`` passes ``maxReconsumeTimes`` (``>=`` in 4.9.8, ``>`` from 5.0), and from 5.1.1 also while
the group holds an unexpired orderly lock (``!rebalanceLockManager.isLockAllExpired(group)``: "the group has
unexpired lock record, which shows it is an ordered message"); the model's flags are
``retry_send_dlq_above_max`` and ``retry_send_dlq_when_locked`` (``model/versions.py``; fidelity P5-3).
Three sends, each of ``reconsumeTimes`` 1 with ``maxReconsumeTimes`` 16 in the header (far below it), to a
fresh group ``G`` on a topic ``T`` of 4 queues:

1. ``unlocked``: the group has never locked a queue;
2. ``locked``: LOCK_BATCH_MQ of ``T`` queue 0 for ``G`` (granted), then the send;
3. ``unlocked_again``: UNLOCK_BATCH_MQ of that queue, then the send (no lock of the group is left).

Each message is then looked for by its UNIQ_KEY in ``%RETRY%G`` and ``%DLQ%G`` (every queue, from offset 0).
Expected: ``%DLQ%G`` for ``locked`` exactly when the profile has ``retry_send_dlq_when_locked``, ``%RETRY%G``
otherwise.

``lock_4x``: LOCK_BATCH_MQ and UNLOCK_BATCH_MQ with the body 4.9.8's client sends (LockBatchRequestBody without
5.x's ``onlyThisBroker``), the way every 4.x orderly consumer locks its queues. Every RocketMQ broker, 4.9.8 and
5.x alike, reads the missing field as false (fastjson) and answers: the lock granted, the unlock SUCCESS.

``go_header``: a request header as the Go client (rocketmq-client-go v2.1.2, ``internal/remote/codec.go``) writes
it: ``code``, ``language`` GO, ``version``, ``opaque``, ``flag``, ``remark``, ``extFields``, and no
``serializeTypeCurrentRPC`` (the Java client's RemotingCommand always writes that field). RocketMQ reads the header
with fastjson, which leaves the field at JSON: GET_BROKER_CLUSTER_INFO to the name server and GET_BROKER_CONFIG to
the broker are answered SUCCESS.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import struct
import sys
import time
from typing import Any

import attrs

from rmqspec.model.clock import WallClock
from rmqspec.model.config import default_config
from rmqspec.model.ids import UniqKeyFactory
from rmqspec.model.message import Message, MessageQueue
from rmqspec.model.results import BrokerError
from rmqspec.model.versions import VERSIONS, version_named
from rmqspec.remoting import client_ops as ops
from rmqspec.remoting.adapter import RemoteBroker, parse_url
from rmqspec.remoting.client import RemotingClient, RemotingError
from rmqspec.remoting.codes import RequestCode
from rmqspec.remoting.frame import decode_frame

RETRY, DLQ = "%RETRY%", "%DLQ%"
PRODUCER = "rmqspec_compat_probe_pg"
CLIENT_ID = "127.0.0.1@compat_probe"
STEPS = ("unlocked", "locked", "unlocked_again")
CHECKS = ("retry_send", "lock_4x", "go_header")
WAIT_S = 5.0  # how long a sent message is looked for


class ProbeError(Exception):
    """A step the broker did not let the probe take."""


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class Probe:
    """The broker under test as the profile's client reaches it, a raw connection for the sends, and a fresh topic
    and group of its own."""

    def __init__(self, namesrv: str, profile: str) -> None:
        self.version = version_named(profile)
        # the profile's client: 5.x's lock body (Version.lock_only_this_broker)
        self.broker = RemoteBroker(namesrv, WallClock(), default_config(profile), heartbeat_consumers=False)
        self.sender = RemotingClient.connect(self.broker.broker_addr)
        self.uniq = UniqKeyFactory("127.0.0.1", os.getpid())
        stamp = _now_ms() % 10**9
        self.topic, self.group = f"CompatProbe{stamp}", f"CompatProbeG{stamp}"
        self.broker.create_topic(self.topic, 4)
        self.broker.create_group(self.group, retry_max_times=16, retry_queue_nums=1)

    def close(self) -> None:
        self.sender.close()
        self.broker.close()

    def send_retry(self, reconsume_times: int, max_reconsume_times: int) -> dict[str, Any]:
        """SEND_MESSAGE_V2 to ``%RETRY%G`` queue 0 as the client's fallback sends it: RETRY_TOPIC, reconsume
        times ``j`` and the max ``l`` in the header (the V2 names of reconsumeTimes and maxReconsumeTimes)."""
        uniq = self.uniq.next(_now_ms())
        topic = RETRY + self.group
        msg = Message(topic, b"retry-send", uniq_key=uniq)
        props = {**msg.wire_properties(), "RETRY_TOPIC": self.topic}  # a system property: not a user's
        req = ops.send_request(PRODUCER, msg, 0, props, _now_ms(), self.broker.broker_name)
        req = attrs.evolve(req, ext_fields={**req.ext_fields, "j": str(reconsume_times),
                                            "l": str(max_reconsume_times)})
        resp = self.broker.ask(self.sender, req)
        return {"uniq": uniq, "code": resp.code, "remark": resp.remark or ""}

    def where(self, uniq: str) -> list[str]:
        """The topics (of %RETRY%G and %DLQ%G) holding the message, looked for until WAIT_S passes."""
        deadline = time.monotonic() + WAIT_S
        while True:
            found = [t for t in (RETRY + self.group, DLQ + self.group) if self._holds(t, uniq)]
            if found or time.monotonic() > deadline:
                return found
            time.sleep(0.2)

    def _holds(self, topic: str, uniq: str) -> bool:
        for queue in range(4):
            offset = 0
            while True:
                try:
                    res = self.broker.pull(self.group + "_reader", MessageQueue(topic, queue), offset, 32)
                except BrokerError:  # no such topic or queue (yet)
                    break
                if any(m.uniq_key == uniq for m in res.messages):
                    return True
                if not res.messages:
                    break
                offset = res.next_begin_offset
        return False


def check_retry_send(probe: Probe) -> dict[str, Any]:
    """The three sends to ``%RETRY%G`` (module docstring), each looked for in ``%RETRY%G`` and ``%DLQ%G``."""
    mq = MessageQueue(probe.topic, 0)
    rows: dict[str, Any] = {}
    for step in STEPS:
        if step == "locked":
            granted = probe.broker.lock_batch(probe.group, CLIENT_ID, [mq])
            if mq not in granted:
                raise ProbeError(f"LOCK_BATCH_MQ of {mq} for {probe.group} was not granted")
        elif step == "unlocked_again":
            probe.broker.unlock_batch(probe.group, CLIENT_ID, [mq])
        sent = probe.send_retry(1, 16)
        dead = step == "locked" and probe.version.retry_send_dlq_when_locked
        expected = (DLQ if dead else RETRY) + probe.group
        found = probe.where(sent["uniq"]) if sent["code"] == 0 else []
        rows[step] = {**sent, "expected": expected, "found": found, "ok": sent["code"] == 0 and found == [expected]}
    return {"group": probe.group, "steps": rows,
            "differences": [f"{step}: expected {row['expected']}, found {row['found'] or 'nothing'} (answer "
                            f"{row['code']} {row['remark']!r})" for step, row in rows.items() if not row["ok"]]}


def check_lock_4x(probe: Probe) -> dict[str, Any]:
    """LOCK_BATCH_MQ / UNLOCK_BATCH_MQ with 4.9.8's body (no onlyThisBroker), on a queue of a fresh group."""
    group = probe.group + "_4x"
    probe.broker.create_group(group)
    mq = MessageQueue(probe.topic, 1)
    rows: dict[str, Any] = {}
    for step, request in (("lock", ops.lock_request), ("unlock", ops.unlock_request)):
        resp = probe.broker.ask(probe.sender, request(group, CLIENT_ID, [mq], probe.broker.broker_name))
        granted = step == "unlock" or (resp.code == 0 and mq in ops.parse_lock(resp, [mq]))
        rows[step] = {"code": resp.code, "remark": resp.remark or "", "ok": resp.code == 0 and granted}
    return {"group": group, "steps": rows,
            "differences": [f"{step} with 4.9.8's body: answer {row['code']} {row['remark']!r} (RocketMQ: "
                            f"{'granted' if step == 'lock' else 'SUCCESS'})" for step, row in rows.items()
                            if not row["ok"]]}


def _go_request(address: str, code: int) -> dict[str, Any]:
    """One request in the Go client's header (see the module docstring) on a connection of its own: the answer's
    code, or how the connection ended."""
    header = json.dumps({"code": code, "language": "GO", "version": 317, "opaque": 1, "flag": 0, "remark": "",
                         "extFields": {}}, separators=(",", ":")).encode()
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(struct.pack(">ii", 4 + len(header), len(header)) + header)
        data = b""
        try:
            while len(data) < 8 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
                chunk = sock.recv(65536)
                if not chunk:
                    return {"code": None, "remark": f"connection closed after {len(data)} bytes, no answer"}
                data += chunk
        except TimeoutError:
            return {"code": None, "remark": "no answer in 5 s"}
    answer = decode_frame(data[4:4 + struct.unpack(">i", data[:4])[0]])  # read by the project's decoder
    return {"code": answer.code, "remark": answer.remark or ""}


def check_go_header(probe: Probe) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    for step, address, code in (("namesrv", probe.broker.namesrv_addr, RequestCode.GET_BROKER_CLUSTER_INFO),
                                ("broker", probe.broker.broker_addr, RequestCode.GET_BROKER_CONFIG)):
        got = _go_request(address, int(code))
        rows[step] = {**got, "ok": got["code"] == 0}
    return {"group": "-", "steps": rows,
            "differences": [f"{step}: {row['remark'] if row['code'] is None else row['code']} (RocketMQ: SUCCESS)"
                            for step, row in rows.items() if not row["ok"]]}


RUNS = {"retry_send": check_retry_send, "lock_4x": check_lock_4x, "go_header": check_go_header}


def run(probe: Probe, checks: list[str]) -> dict[str, Any]:
    done = {name: RUNS[name](probe) for name in checks}
    return {"profile": probe.version.name, "checks": done,
            "differences": [f"{name}: {d}" for name, row in done.items() for d in row["differences"]]}


def report(result: dict[str, Any]) -> str:
    lines = [f"profile {result['profile']}"]
    for name, row in result["checks"].items():
        lines.append(f"{name} (group {row['group']}):")
        for step, r in row["steps"].items():
            where = f"stored in {', '.join(r['found']) or 'nothing':40} expected {r['expected']}" if "found" in r \
                else f"{r['remark'][:60]!r}"
            lines.append(f"  {step:15} answer {r['code']!s:4}  {where}  {'ok' if r['ok'] else 'DIFFERS'}")
    lines.append("differences: " + ("; ".join(result["differences"]) or "none"))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m interop.compat_probe", description=__doc__.split("\n")[0])
    parser.add_argument("--broker", required=True, help="rocketmq://NAMESRV_HOST:PORT")
    parser.add_argument("--profile", required=True, choices=sorted(VERSIONS))
    parser.add_argument("--checks", default=",".join(CHECKS), help=f"which checks (default: all of {CHECKS})")
    parser.add_argument("--json", default=None, metavar="FILE", help="write the observations as JSON")
    args = parser.parse_args(argv)
    checks = [c.strip() for c in args.checks.split(",") if c.strip()]
    unknown = sorted(set(checks) - set(CHECKS))
    if unknown or not checks:
        parser.error(f"--checks: unknown {', '.join(unknown)}" if unknown else "--checks: none given")
    if not args.broker.startswith("rocketmq://"):
        parser.error(f"--broker must be rocketmq://HOST:PORT, got {args.broker!r}")
    try:
        probe = Probe(parse_url(args.broker), args.profile)
        try:
            result = run(probe, checks)
        finally:
            probe.close()
    except (BrokerError, RemotingError, ProbeError, OSError) as exc:
        print(f"compat_probe: {exc}", file=sys.stderr)
        return 2
    print(report(result))
    if args.json:
        with open(args.json, "w") as out:
            json.dump(result, out, indent=1)
    return 1 if result["differences"] else 0


if __name__ == "__main__":
    sys.exit(main())
