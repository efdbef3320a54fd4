"""Timer messages (RocketMQ 5.x, RIP-43) measured over the wire, against any broker rmqspec can reach.

    python -m interop.timer_probe --broker rocketmq://127.0.0.1:9876 --profile rocketmq-5.2 \
        [--checks lateness,refusals,delay_wins,not_after_now,batch,txn_commit,crash] [--count 30] \
        [--crash-cmd CMD --restart-cmd CMD] [--json FILE]

(from the repository root; inside a ``scripts/real-rocketmq`` fixture run it with ``real-rocketmq exec
--dir D -- .venv/bin/python -m interop.timer_probe ...``). It prints a small report and, with ``--json``,
writes every observation; ``tests/interop/test_timer_real.py`` runs it against real 5.3.3, real 4.9.8 and
``rmqspec serve`` and asserts the facts of ``model/timer.py``.

Theory of operation
-------------------
The probe is rmqspec's own wire client: ``RemoteBroker`` (topics, pulls, crash and restart) plus one
``RemotingClient`` of its own for the sends, so every ext field of a send's answer is seen (queueId,
queueOffset, msgId, 5.3.2+'s ``recallHandle``). A timer message is a plain SEND_MESSAGE_V2 whose
properties carry ``TIMER_DELIVER_MS`` (absolute ms), ``TIMER_DELAY_SEC`` or ``TIMER_DELAY_MS``.
The broker's timer settings come from GET_BROKER_CONFIG (``timerWheelEnable``, ``timerPrecisionMs``,
``timerMaxDelaySec``; a 4.9.8 broker has none) and ``messageDelayLevel``.

Times: the broker is assumed to share this machine's wall clock (a fixture on loopback). A
``TIMER_DELIVER_MS`` message asks for an exact time; a ``TIMER_DELAY_*`` one for ``now + delay`` where
the broker's ``now`` lies between the send's start and its answer, so its requested time is an interval.
The fired copy's ``store_ts`` (the commitlog's store time of the put into the real topic) is when it
became visible; lateness = ``store_ts − requested``; "due" = ``TIMER_OUT_MS + precision``, the model's
earliest delivery (``model/timer.py``: HookUtils.transformTimerMessage rounds the requested time down,
strictly below, to the precision; TimerMessageStore.dequeue reads a slot once the write time, the clock
rounded down to the precision, has passed it).

Checks (each an independent function; ``--checks`` picks them):

- ``lateness``: ``--count`` messages (mostly TIMER_DELIVER_MS, every fifth an exact multiple of the
  precision; a few TIMER_DELAY_MS / TIMER_DELAY_SEC) on queue 1 of a new topic; the send answers, the
  timer copy at the answered queue offset of ``rmq_sys_wheel_timer`` queue 0, every fired copy;
- ``refusals``: over ``timerMaxDelaySec`` (each property), not a Java long (text, decimal, blank),
  Unicode digits, a plus sign, and a valid control; code and remark of each answer;
- ``delay_wins``: DELAY=1 together with a valid, an unparsable and an over-the-max timer property;
- ``not_after_now``: a delay of 0 / −5 ms, a deliver time in the past: stored at once in the real topic;
- ``batch``: a SEND_BATCH_MESSAGE whose items carry TIMER_DELAY_MS, and one whose batch properties do;
- ``txn_commit``: a half with TIMER_DELAY_MS, committed. 5.x times the *half* (parseHalfMessageInner
  makes it type NOT before the put hook) with REAL_TOPIC = RMQ_SYS_TRANS_HALF_TOPIC, and the COMMIT
  puts the committed copy into that topic: the business topic never gets it (RocketMQ's, and the
  model's, behaviour; docs/fidelity.md);
- ``crash`` (needs ``--crash-cmd`` / ``--restart-cmd``): timer messages spread over a few seconds, a
  kill -9 after some fired, a restart; every message must fire, duplicates are counted.

Every check sends first; then all of them wait and read, so their waits overlap (about 5 s at precision
100), and the crash check runs last. Every observation is compared with what ``model/timer.py`` predicts
for the ``--profile`` and the broker's settings (``transform`` on the same properties); a mismatch is
listed under ``differences``. The probe only observes: it never fails on a difference, the test decides.
After each send it waits for the broker's dispatch (``RemoteBroker.wait_dispatched``), so the timer copy
named by the answer can be pulled at once.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from interop.figures import fmt_ms, publish, summary
from rmqspec.model.clock import WallClock
from rmqspec.model.config import parse_delay_levels
from rmqspec.model.ids import UniqKeyFactory
from rmqspec.model.message import Message, MessageQueue, StoredMessage
from rmqspec.model.results import BrokerError, TxnAction
from rmqspec.model.timer import (
    PROPERTY_TIMER_DELAY_MS,
    PROPERTY_TIMER_DELAY_SEC,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_TIMER_DEQUEUE_MS,
    PROPERTY_TIMER_ENQUEUE_MS,
    PROPERTY_TIMER_OUT_MS,
    REQUEST_PROPERTIES,
    TIMER_TOPIC,
    TimerRefused,
    TimerSettings,
    normalize_precision,
    transform,
)
from rmqspec.model.versions import VERSIONS, version_named
from rmqspec.remoting import client_ops as ops
from rmqspec.remoting.adapter import RemoteBroker, parse_url
from rmqspec.remoting.client import RemotingClient
from rmqspec.remoting.codes import RequestCode
from rmqspec.remoting.command import RemotingCommand
from rmqspec.remoting.records import BatchItem, encode_batch

GROUP = "rmqspec_timer_probe"
PRODUCER = "rmqspec_timer_probe_pg"
QUEUES = {"lateness": 1, "refusals": 2, "delay_wins": 3, "not_after_now": 4, "batch": 5, "txn_commit": 6,
          "crash": 7}
CHECKS = tuple(QUEUES)
HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
POLL_S = 0.05
Finish = Callable[[], dict[str, Any]]  # a started check: waits, reads and judges


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class Probe:
    """One connection set to the broker under test and its settings (see the module docstring)."""

    def __init__(self, namesrv: str, profile: str, crash_cmd: str | None = None,
                 restart_cmd: str | None = None) -> None:
        self.version = version_named(profile)
        self.broker = RemoteBroker(namesrv, WallClock(), crash_cmd=crash_cmd, restart_cmd=restart_cmd,
                                   heartbeat_consumers=False)
        self.sender = RemotingClient.connect(self.broker.broker_addr)
        self.uniq = UniqKeyFactory("127.0.0.1", os.getpid())
        self.config = self._broker_config()
        self.settings = TimerSettings(
            enabled=self.config.get("timerWheelEnable", "true") == "true",
            precision_ms=normalize_precision(int(self.config.get("timerPrecisionMs", "1000"))),
            max_delay_sec=int(self.config.get("timerMaxDelaySec", str(3 * 24 * 3600))),
        )
        self.wheel = self.version.timer_wheel  # the profile's claim: does this RocketMQ time messages?
        levels = self.config.get("messageDelayLevel")
        self.level1_ms = parse_delay_levels(levels)[0] if levels else 1000
        self.topic = f"TimerProbe{now_ms() % 10**9}"
        self.broker.create_topic(self.topic, 8)
        self.differences: list[str] = []

    def _broker_config(self) -> dict[str, str]:
        resp = self.broker.ask(self.sender, RemotingCommand(code=RequestCode.GET_BROKER_CONFIG))
        text = resp.body.decode("utf-8", "replace") if resp.code == 0 else ""
        return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)

    def close(self) -> None:
        self.sender.close()
        self.broker.close()

    def differ(self, check: str, what: str) -> None:
        self.differences.append(f"{check}: {what}")

    # -- sending -------------------------------------------------------------------------------------

    def send(self, queue: int, props: Mapping[str, str], delay_level: int = 0, body: bytes = b"t") -> dict[str, Any]:
        """One SEND_MESSAGE_V2 with ``props`` (+ UNIQ_KEY); the answer and the send's time window."""
        uniq = self.uniq.next(now_ms())
        msg = Message(self.topic, body, properties=dict(props), delay_level=delay_level, uniq_key=uniq)
        t0 = now_ms()
        resp = self.broker.ask(self.sender, ops.send_request(PRODUCER, msg, queue, msg.wire_properties(), t0,
                                                             self.broker.broker_name))
        t1 = now_ms()
        self.broker.wait_dispatched()  # a pull of the timer queue right after must see the copy
        return answer(resp, uniq, t0, t1, props, delay_level)

    def send_batch(self, queue: int, item_props: Mapping[str, str], batch_props: Mapping[str, str],
                   n: int = 2) -> dict[str, Any]:
        """SEND_BATCH_MESSAGE (batch=true, as the Java client sends it) of ``n`` items."""
        uniqs = [self.uniq.next(now_ms()) for _ in range(n)]
        items = [BatchItem(0, b"b%d" % i, {**item_props, "UNIQ_KEY": u}) for i, u in enumerate(uniqs)]
        head = ops.send_request(PRODUCER, Message(self.topic, b"-"), queue, batch_props, now_ms(),
                                self.broker.broker_name)
        t0 = now_ms()
        resp = self.broker.ask(self.sender, RemotingCommand(code=RequestCode.SEND_BATCH_MESSAGE,
                                                            ext_fields={**head.ext_fields, "m": "true"},
                                                            body=encode_batch(items)))
        t1 = now_ms()
        self.broker.wait_dispatched()
        return {**answer(resp, uniqs[0], t0, t1, {**item_props, **batch_props}, 0), "uniqs": uniqs}

    # -- reading -------------------------------------------------------------------------------------

    def pull_all(self, topic: str, queue: int, start: int = 0) -> list[StoredMessage]:
        out: list[StoredMessage] = []
        offset = start
        while True:
            try:
                res = self.broker.pull(GROUP, MessageQueue(topic, queue), offset, 32)
            except BrokerError:  # e.g. 4.9.8: a system topic it does not serve to pulls
                return out
            out += res.messages
            if not res.messages:
                return out
            offset = res.next_begin_offset

    def wait_for(self, queue: int, uniqs: Iterable[str], deadline_ms: int, topic: str | None = None
                 ) -> dict[str, list[StoredMessage]]:
        """Every copy in ``topic`` (default: the probe's topic) ``queue``, by UNIQ_KEY, once each of
        ``uniqs`` has one or the deadline passed."""
        wanted = set(uniqs)
        while True:
            copies: dict[str, list[StoredMessage]] = {}
            for m in self.pull_all(topic or self.topic, queue):
                copies.setdefault(m.uniq_key or "", []).append(m)
            if wanted <= set(copies) or now_ms() >= deadline_ms:
                return copies
            time.sleep(POLL_S)

    def timer_copy(self, queue_offset: int) -> StoredMessage | None:
        try:
            res = self.broker.pull(GROUP, MessageQueue(TIMER_TOPIC, 0), queue_offset, 1)
        except BrokerError:
            return None
        return res.messages[0] if res.messages else None

    # -- what the model says -------------------------------------------------------------------------

    def expect(self, props: Mapping[str, str], delay_level: int, now: int) -> dict[str, Any]:
        """model/timer.transform on the same properties: timer (with TIMER_OUT_MS), as_is or refused."""
        if not self.wheel:
            return {"kind": "as_is"}
        copy = dict(props)
        try:
            topic, _queue = transform(self.topic, 1, copy, delay_level, now, self.settings)
        except TimerRefused as exc:
            return {"kind": "refused", "code": int(exc.code), "remark": exc.remark}
        if topic == TIMER_TOPIC:
            return {"kind": "timer", "out": int(copy[PROPERTY_TIMER_OUT_MS])}
        return {"kind": "delayed" if delay_level > 0 else "as_is"}


def answer(resp: RemotingCommand, uniq: str, t0: int, t1: int, props: Mapping[str, str],
           delay_level: int) -> dict[str, Any]:
    ext = dict(resp.ext_fields)
    msg_id = ext.get("msgId", "").split(",")[0]
    commitlog = int(msg_id[-16:], 16) if len(msg_id) >= 16 else None
    return {"uniq": uniq, "t0": t0, "t1": t1, "props": dict(props), "delay_level": delay_level,
            "code": resp.code, "remark": resp.remark, "queue_id": _int(ext.get("queueId")),
            "queue_offset": _int(ext.get("queueOffset")), "commitlog_offset": commitlog,
            "ext_names": sorted(ext)}


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def requested_window(sent: Mapping[str, Any]) -> tuple[int, int] | None:
    """[earliest, latest] requested deliver time of a send (the broker's now is within [t0, t1])."""
    props = sent["props"]
    try:
        if PROPERTY_TIMER_DELAY_SEC in props:
            d = int(props[PROPERTY_TIMER_DELAY_SEC]) * 1000
        elif PROPERTY_TIMER_DELAY_MS in props:
            d = int(props[PROPERTY_TIMER_DELAY_MS])
        else:
            at = int(props[PROPERTY_TIMER_DELIVER_MS])
            return at, at
    except (KeyError, ValueError):
        return None
    return sent["t0"] + d, sent["t1"] + d



def copy_facts(m: StoredMessage) -> dict[str, Any]:
    return {"topic": m.topic, "queue_id": m.queue_id, "queue_offset": m.queue_offset,
            "commitlog_offset": m.commitlog_offset, "store_ts": m.store_ts, "born_ts": m.born_ts,
            "reconsume_times": m.reconsume_times, "properties": dict(m.properties)}


# ------------------------------------------------------------------------------------------------
# the checks


def check_lateness(p: Probe, count: int) -> Finish:
    """Rounding, never early, lateness, the fired copy's properties, the send's answer."""
    q, prec = QUEUES["lateness"], p.settings.precision_ms
    sent = []
    base = now_ms() + 1000
    for i in range(count):
        if i % 10 == 3:
            props = {PROPERTY_TIMER_DELAY_MS: str(1000 + 60 * i)}
        elif i % 10 == 7:
            props = {PROPERTY_TIMER_DELAY_SEC: "1" if i < 20 else "2"}
        else:
            at = base + 60 * i + 1 + (i * 37) % (prec - 1)
            if i % 5 == 0:
                at = -(-at // prec) * prec  # an exact multiple: rounded to the slot below it
            props = {PROPERTY_TIMER_DELIVER_MS: str(at)}
        sent.append(p.send(q, props))
    timers = [p.timer_copy(s["queue_offset"]) if s["code"] == 0 and s["queue_offset"] is not None else None
              for s in sent]
    return lambda: _lateness_rows(p, sent, timers)


def _lateness_rows(p: Probe, sent: list[dict[str, Any]], timers: list[StoredMessage | None]) -> dict[str, Any]:
    q, prec = QUEUES["lateness"], p.settings.precision_ms
    latest = max(w[1] for s in sent if (w := requested_window(s)))
    copies = p.wait_for(q, [s["uniq"] for s in sent if s["code"] == 0], latest + 2 * prec + 5000)
    rows = []
    for s, timer in zip(sent, timers, strict=True):
        window = requested_window(s)
        assert window is not None
        lo, hi = window
        timer_ours = timer is not None and timer.uniq_key == s["uniq"] and timer.topic == TIMER_TOPIC
        fired = copies.get(s["uniq"], [])
        first = min(fired, key=lambda m: m.store_ts) if fired else None
        out = _int(first.properties.get(PROPERTY_TIMER_OUT_MS)) if first else None
        exp_lo, exp_hi = p.expect(s["props"], 0, s["t0"]), p.expect(s["props"], 0, s["t1"])
        row = {
            "uniq": s["uniq"], "kind": next(iter(s["props"])), "requested": [lo, hi],
            "exact_multiple": lo == hi and lo % prec == 0, "code": s["code"], "answer_queue_id": s["queue_id"],
            "answer_queue_offset": s["queue_offset"], "answer_commitlog_offset": s["commitlog_offset"],
            "recall_handle": "recallHandle" in s["ext_names"], "timer_copy": copy_facts(timer) if timer_ours else None,
            "copies": len(fired), "fired": copy_facts(first) if first else None, "out": out,
            "model_out": [exp_lo.get("out"), exp_hi.get("out")], "model_kind": exp_lo["kind"],
        }
        if first is not None:
            row["late_vs_requested"] = [first.store_ts - hi, first.store_ts - lo]
            row["late_vs_due"] = first.store_ts - (out + prec) if out is not None else None
        rows.append(row)
    return _lateness_summary(p, rows, sent)


def _lateness_summary(p: Probe, rows: list[dict[str, Any]], sent: list[dict[str, Any]]) -> dict[str, Any]:
    q, prec = QUEUES["lateness"], p.settings.precision_ms
    fired = [r for r in rows if r["fired"] is not None]
    timed = [r for r in fired if r["out"] is not None]
    exact = [r for r in timed if r["requested"][0] == r["requested"][1]]
    out_rule = [r for r in timed if None not in r["model_out"] and r["model_out"][0] <= r["out"] <= r["model_out"][1]]
    early = [r["uniq"] for r in fired if r["late_vs_requested"][1] < 0]
    before_due = [r["uniq"] for r in timed if r["late_vs_due"] < 0]
    props = [r["fired"]["properties"] for r in timed]
    result = {
        "sent": len(sent), "accepted": sum(s["code"] == 0 for s in sent), "fired": len(fired), "timed": len(timed),
        "duplicates": sum(r["copies"] > 1 for r in rows),
        "out_rule_agrees": len(out_rule), "exact_multiples": sum(r["exact_multiple"] for r in timed),
        "exact_multiples_rounded_below": sum(r["exact_multiple"] and r["out"] == r["requested"][0] - prec
                                             for r in timed),
        "early": early, "before_due": before_due,
        "late_vs_requested_ms": summary([r["late_vs_requested"][0] for r in exact]),
        "late_vs_due_ms": summary([r["late_vs_due"] for r in timed]),
        "late_vs_send_ms": summary([r["fired"]["store_ts"] - s["t1"] for r, s in zip(rows, sent, strict=True)
                                    if r["fired"] is not None]),
        "fired_props": {name: sum(name in x for x in props) for name in (
            "REAL_TOPIC", "REAL_QID", PROPERTY_TIMER_OUT_MS, PROPERTY_TIMER_ENQUEUE_MS, PROPERTY_TIMER_DEQUEUE_MS)},
        "request_prop_kept": sum(any(n in r["fired"]["properties"] for n in REQUEST_PROPERTIES) for r in fired),
        "real_qid_as_sent": sum(x.get("REAL_QID") == str(q) for x in props),
        "fired_in_real_queue": sum(r["fired"]["topic"] == p.topic and r["fired"]["queue_id"] == q for r in fired),
        "answer_queue_id_as_sent": sum(r["answer_queue_id"] == q for r in rows),
        "answer_is_timer_copy": sum(r["timer_copy"] is not None and r["timer_copy"]["commitlog_offset"]
                                    == r["answer_commitlog_offset"] for r in rows),
        "recall_handles": sum(r["recall_handle"] for r in rows),
        "enqueue_is_floor_of_timer_store": sum(
            r["timer_copy"] is not None and r["fired"]["properties"].get(PROPERTY_TIMER_ENQUEUE_MS)
            == str(r["timer_copy"]["store_ts"] // prec * prec) for r in timed),
        "dequeue_to_store_ms": summary([
            r["fired"]["store_ts"] - int(r["fired"]["properties"][PROPERTY_TIMER_DEQUEUE_MS])
            for r in timed if PROPERTY_TIMER_DEQUEUE_MS in r["fired"]["properties"]]),
        "rows": rows,
    }
    should_time = p.wheel and p.settings.enabled
    if should_time and len(timed) != len(sent):
        p.differ("lateness", f"{len(timed)} of {len(sent)} fired as timer copies, the model times every one")
    if not should_time and timed:
        p.differ("lateness", f"{len(timed)} fired with TIMER_OUT_MS, the model ({p.version.name}) times none")
    if len(out_rule) != len(timed):
        p.differ("lateness", f"TIMER_OUT_MS differs from model/timer.out_ms for {len(timed) - len(out_rule)}")
    if should_time and early:
        p.differ("lateness", f"{len(early)} fired before the requested time")
    if should_time and before_due:
        p.differ("lateness", f"{len(before_due)} fired before TIMER_OUT_MS + precision (the model's due time)")
    if p.wheel and not p.settings.enabled and result["accepted"]:
        p.differ("lateness", f"{result['accepted']} accepted; the model refuses every one (timerWheelEnable=false)")
    if not p.wheel and len(fired) != len(sent):
        p.differ("lateness", f"{len(fired)} of {len(sent)} stored; the model ({p.version.name}) stores each at once")
    if result["duplicates"]:
        p.differ("lateness", f"{result['duplicates']} fired more than once without a crash")
    if should_time and result["answer_is_timer_copy"] != len(sent):
        p.differ("lateness", "the send's answer does not name the timer copy for every message")
    return result


REFUSAL_CASES: tuple[tuple[str, Callable[[TimerSettings, int], dict[str, str]]], ...] = (
    ("valid_delay_ms", lambda s, now: {PROPERTY_TIMER_DELAY_MS: "1500"}),
    ("sec_over_max", lambda s, now: {PROPERTY_TIMER_DELAY_SEC: str(s.max_delay_sec + 10)}),
    ("ms_over_max", lambda s, now: {PROPERTY_TIMER_DELAY_MS: str(s.max_delay_sec * 1000 + 10_000)}),
    ("deliver_over_max", lambda s, now: {PROPERTY_TIMER_DELIVER_MS: str(now + s.max_delay_sec * 1000 + 10_000)}),
    ("ms_text", lambda s, now: {PROPERTY_TIMER_DELAY_MS: "abc"}),
    ("deliver_decimal", lambda s, now: {PROPERTY_TIMER_DELIVER_MS: f"{now + 2000}.5"}),
    ("sec_blank", lambda s, now: {PROPERTY_TIMER_DELAY_SEC: " 1"}),
    ("ms_plus_sign", lambda s, now: {PROPERTY_TIMER_DELAY_MS: "+1500"}),
    ("ms_unicode_digits", lambda s, now: {PROPERTY_TIMER_DELAY_MS: "\uff11\uff15\uff10\uff10"}),  # fullwidth 1500
)


def check_refusals(p: Probe) -> Finish:
    """Each case's answer (code, remark, where the message went) against model/timer.transform."""
    q = QUEUES["refusals"]
    cases = {}
    for name, make in REFUSAL_CASES:
        s = p.send(q, make(p.settings, now_ms()))
        exp = p.expect(s["props"], 0, s["t0"])
        timer = p.timer_copy(s["queue_offset"]) if s["code"] == 0 and s["queue_offset"] is not None else None
        went = ("refused" if s["code"] != 0 else
                "timer" if timer is not None and timer.uniq_key == s["uniq"] else "as_is")
        cases[name] = {"props": s["props"], "code": s["code"], "remark": s["remark"], "went": went,
                       "model": exp}
        if went != exp["kind"] or (went == "refused" and (s["code"], s["remark"]) != (exp["code"], exp["remark"])):
            p.differ("refusals", f"{name} {s['props']}: broker {went} {s['code']} {s['remark']!r}, model {exp}")
    return lambda: {"cases": cases}


def check_delay_wins(p: Probe) -> Finish:
    """DELAY=1 with a timer property: the delay level wins, the timer properties are gone."""
    q = QUEUES["delay_wins"]
    sent = [p.send(q, props, delay_level=1) for props in (
        {PROPERTY_TIMER_DELAY_MS: "3000"}, {PROPERTY_TIMER_DELAY_MS: "abc"},
        {PROPERTY_TIMER_DELAY_SEC: str(p.settings.max_delay_sec + 10)})]
    return lambda: _delay_wins_rows(p, sent)


def _delay_wins_rows(p: Probe, sent: list[dict[str, Any]]) -> dict[str, Any]:
    q = QUEUES["delay_wins"]
    copies = p.wait_for(q, [s["uniq"] for s in sent if s["code"] == 0], max(s["t1"] for s in sent)
                        + p.level1_ms + 6000)
    rows = []
    for s in sent:
        fired = copies.get(s["uniq"], [])
        first = min(fired, key=lambda m: m.store_ts) if fired else None
        row = {"props": s["props"], "code": s["code"], "remark": s["remark"], "copies": len(fired),
               # from the send's start: the delayed copy's store time (its delay's origin) is after it, not
               # necessarily after the answer came back (under load the round trip took 62 ms once)
               "after_send_ms": first.store_ts - s["t0"] if first else None,
               "timer_props_left": sorted(n for n in (*REQUEST_PROPERTIES, PROPERTY_TIMER_OUT_MS)
                                          if first and n in first.properties),
               "fired": copy_facts(first) if first else None}
        rows.append(row)
        left = [] if p.wheel else sorted(s["props"])  # 4.9: ordinary user properties, kept
        if s["code"] != 0 or not first or row["timer_props_left"] != left:
            p.differ("delay_wins", f"{s['props']}: {row['code']} {row['remark']!r}, timer properties left "
                     f"{row['timer_props_left']}, fired {bool(first)}; the model: DELAY wins, left {left}")
    return {"level1_ms": p.level1_ms, "rows": rows}


def check_not_after_now(p: Probe) -> Finish:
    """A requested time not after the broker's now: stored as it is, in its own topic, at once."""
    q = QUEUES["not_after_now"]
    sent = [p.send(q, props) for props in ({PROPERTY_TIMER_DELAY_MS: "0"}, {PROPERTY_TIMER_DELAY_MS: "-5"},
                                           {PROPERTY_TIMER_DELAY_SEC: "0"},
                                           {PROPERTY_TIMER_DELIVER_MS: str(now_ms() - 1000)})]
    return lambda: _not_after_now_rows(p, sent)


def _not_after_now_rows(p: Probe, sent: list[dict[str, Any]]) -> dict[str, Any]:
    q = QUEUES["not_after_now"]
    copies = p.wait_for(q, [s["uniq"] for s in sent if s["code"] == 0], max(s["t1"] for s in sent) + 3000)
    rows = []
    for s in sent:
        fired = copies.get(s["uniq"], [])
        first = fired[0] if fired else None
        row = {"props": s["props"], "code": s["code"], "remark": s["remark"], "answer_queue_offset": s["queue_offset"],
               "stored_at_once": bool(first) and first.queue_offset == s["queue_offset"]
               and first.store_ts - s["t1"] <= 50,
               "props_kept": bool(first) and all(first.properties.get(k) == v for k, v in s["props"].items()),
               "out": first.properties.get(PROPERTY_TIMER_OUT_MS) if first else None,
               "model": p.expect(s["props"], 0, s["t0"])}
        rows.append(row)
        if row["model"]["kind"] == "refused":
            agrees = [s["code"], s["remark"]] == [row["model"]["code"], row["model"]["remark"]]
        else:
            agrees = row["stored_at_once"] and row["props_kept"] and row["out"] is None
        if not agrees:
            p.differ("not_after_now", f"{s['props']}: {row}")
    return {"rows": rows}


def check_batch(p: Probe) -> Finish:
    """Timer properties on the items of a batch, and on the batch itself."""
    q = QUEUES["batch"]
    items = p.send_batch(q, {PROPERTY_TIMER_DELAY_MS: "1500"}, {})
    header = p.send_batch(q, {}, {PROPERTY_TIMER_DELAY_MS: "1500"})
    return lambda: _batch_rows(p, items, header)


def _batch_rows(p: Probe, items: dict[str, Any], header: dict[str, Any]) -> dict[str, Any]:
    q = QUEUES["batch"]
    accepted = [u for s in (items, header) if s["code"] == 0 for u in s["uniqs"]]
    copies = p.wait_for(q, accepted, header["t1"] + 1500 + 2 * p.settings.precision_ms + 4000)
    result: dict[str, Any] = {}
    for name, s in (("item_properties", items), ("batch_properties", header)):
        fired = [min(copies[u], key=lambda m: m.store_ts) for u in s["uniqs"] if u in copies]
        result[name] = {"code": s["code"], "remark": s["remark"], "answer_queue_offset": s["queue_offset"],
                        "fired": len(fired), "after_send_ms": [m.store_ts - s["t1"] for m in fired],
                        "timed": [PROPERTY_TIMER_OUT_MS in m.properties for m in fired],
                        "timer_prop_kept": [PROPERTY_TIMER_DELAY_MS in m.properties for m in fired]}
    # HookUtils.handleScheduleMessage sees the batch's own properties, never an item's
    for name, s in (("item_properties", items), ("batch_properties", header)):
        row = result[name]
        exp = p.expect({} if name == "item_properties" else {PROPERTY_TIMER_DELAY_MS: "1500"}, 0, s["t0"])
        if exp["kind"] == "refused":
            agrees = [row["code"], row["remark"]] == [exp["code"], exp["remark"]] and row["fired"] == 0
        else:
            want = exp["kind"] == "timer"
            agrees = row["code"] == 0 and row["fired"] == 2 and row["timed"] == [want, want]
        if not agrees:
            p.differ("batch", f"{name}: {row}; the model: {exp}")
    return result


def check_txn_commit(p: Probe) -> Finish:
    """A half carrying TIMER_DELAY_MS, then COMMIT. The half is put as type NOT (parseHalfMessageInner) into
    RMQ_SYS_TRANS_HALF_TOPIC, so the put hook times it with REAL_TOPIC = the half topic; the commit then finds
    the timer copy and puts the committed copy (TIMER_OUT_MS: not re-timed) into REAL_TOPIC = the half topic."""
    q = QUEUES["txn_commit"]
    uniq = p.uniq.next(now_ms())
    msg = Message(p.topic, b"h", properties={PROPERTY_TIMER_DELAY_MS: "1500"}, uniq_key=uniq)
    try:
        half = p.broker.send_half(msg, q, PRODUCER)
    except BrokerError as exc:  # the put hook refused the half (a disabled wheel)
        refusal = {"half_refused": [int(exc.code), exc.remark]}
        exp = p.expect(msg.properties, 0, now_ms())
        if exp["kind"] != "refused" or [exp["code"], exp["remark"]] != refusal["half_refused"]:
            p.differ("txn_commit", f"the half was refused {refusal['half_refused']}, the model: {exp}")
        return lambda: refusal
    timer = p.timer_copy(half.queue_offset)
    half_timed = timer is not None and timer.uniq_key == uniq
    t0 = now_ms()
    code = p.broker.end_transaction(PRODUCER, half.commitlog_offset, half.queue_offset, TxnAction.COMMIT, False)
    t1 = now_ms()
    return lambda: _txn_rows(p, uniq, half_timed, timer, int(code), t0, t1)


def _txn_rows(p: Probe, uniq: str, half_timed: bool, timer: StoredMessage | None, code: int, t0: int,
              t1: int) -> dict[str, Any]:
    q = QUEUES["txn_commit"]
    time.sleep(max(0.0, (t1 + 1500 + 2 * p.settings.precision_ms + 1500 - now_ms()) / 1000))
    business = [m for m in p.pull_all(p.topic, q) if m.uniq_key == uniq]
    in_half_topic = [m for m in p.pull_all(HALF_TOPIC, 0) if m.uniq_key == uniq]
    result = {"half_timed": half_timed,
              "half_real_topic": timer.properties.get("REAL_TOPIC") if half_timed and timer else None,
              "commit_code": code, "commit_ms": [t0, t1],
              "in_business_topic": [m.store_ts - t1 for m in business],
              "in_half_topic": [{"sys_flag": m.sys_flag, "after_commit_ms": m.store_ts - t1,
                                 "timer_out": PROPERTY_TIMER_OUT_MS in m.properties,
                                 "dequeued": PROPERTY_TIMER_DEQUEUE_MS in m.properties} for m in in_half_topic]}
    if p.wheel and p.settings.enabled:  # model/timer.py: the hook sees the half as type NOT
        expected: tuple[Any, ...] = (True, HALF_TOPIC, 0, [8, 0])
        seen: tuple[Any, ...] = (half_timed, result["half_real_topic"], len(business),
                                 [m.sys_flag for m in in_half_topic])
    else:  # the half topic itself may not be served to pulls (4.9.8)
        expected, seen = (False, None, 1), (half_timed, result["half_real_topic"], len(business))
    if seen != expected:
        p.differ("txn_commit", f"(half timed, its REAL_TOPIC, copies in the business topic, sys flags in the half "
                 f"topic) = {seen}, the model: {expected}")
    return result


def check_crash(p: Probe, count: int = 20) -> dict[str, Any]:
    """Timer messages due over ~5 s; kill -9 after some fired; restart; none lost, duplicates counted."""
    q = QUEUES["crash"]
    base = now_ms() + 1500
    sent = [p.send(q, {PROPERTY_TIMER_DELIVER_MS: str(base + 250 * i + 7)}) for i in range(count)]
    time.sleep(max(0.0, (base + 1200 - now_ms()) / 1000))
    before = {m.uniq_key or "" for m in p.pull_all(p.topic, q)}
    t_kill = now_ms()
    p.broker.crash("kill")
    t_killed = now_ms()
    p.broker.recover()
    t_back = now_ms()
    last = base + 250 * count
    copies = p.wait_for(q, [s["uniq"] for s in sent], max(last, t_back) + 2 * p.settings.precision_ms + 8000)
    early = [s["uniq"] for s in sent for m in copies.get(s["uniq"], []) if m.store_ts < int(
        s["props"][PROPERTY_TIMER_DELIVER_MS])]
    lost = [s["uniq"] for s in sent if s["uniq"] not in copies]
    dups = {u: len(c) for u, c in copies.items() if len(c) > 1}
    result = {"sent": count, "fired_before_kill": len(before), "fired_before_kill_keys": sorted(before),
              "kill_ms": t_kill, "killed_ms": t_killed, "back_ms": t_back,
              "duplicated_first_vs_killed_ms": {u: min(m.store_ts for m in c) - t_killed for u, c in copies.items()
                                                if len(c) > 1},
              "down_ms": t_back - t_kill, "lost": lost, "early": early, "duplicated": dups,
              "late_vs_requested_after_kill_ms": summary([
                  m.store_ts - int(s["props"][PROPERTY_TIMER_DELIVER_MS]) for s in sent
                  for m in copies.get(s["uniq"], []) if m.store_ts > t_kill]),
              "again_after_kill_ms": sorted(max(m.store_ts for m in copies[u]) - t_kill for u in dups)}
    if lost:
        p.differ("crash", f"{len(lost)} timer messages never fired after the restart")
    if early:
        p.differ("crash", f"{len(early)} copies fired before their requested time")
    return result


# ------------------------------------------------------------------------------------------------
# the report


def run(p: Probe, checks: Iterable[str], count: int) -> dict[str, Any]:
    out: dict[str, Any] = {"profile": p.version.name, "broker": p.broker.broker_addr, "topic": p.topic,
                           "settings": {"enabled": p.settings.enabled, "precision_ms": p.settings.precision_ms,
                                        "max_delay_sec": p.settings.max_delay_sec,
                                        "config_has_timer_keys": "timerWheelEnable" in p.config},
                           "checks": {}}
    started = time.monotonic()
    # every check sends first, then all of them wait and read: their waits overlap
    pending = [(name, check_lateness(p, count) if name == "lateness" else CHECK_FUNCS[name](p))
               for name in checks if name != "crash"]
    for name, finish in pending:
        out["checks"][name] = finish()
    if "crash" in checks:  # last: it kills the broker
        out["checks"]["crash"] = check_crash(p)
    out["elapsed_s"] = round(time.monotonic() - started, 2)
    out["busy_retries"] = p.broker.busy_retries  # flow control (SYSTEM_BUSY) sent again: load, not semantics
    out["differences"] = p.differences
    return out


CHECK_FUNCS: dict[str, Callable[[Probe], Finish]] = {
    "refusals": check_refusals, "delay_wins": check_delay_wins, "not_after_now": check_not_after_now,
    "batch": check_batch, "txn_commit": check_txn_commit,
}


def report(result: Mapping[str, Any]) -> str:
    s = result["settings"]
    if s["config_has_timer_keys"]:
        wheel = (f"wheel {'on' if s['enabled'] else 'off'}, precision {s['precision_ms']} ms, "
                 f"max {s['max_delay_sec']} s")
    else:
        wheel = "no timer keys in the broker config"
    lines = [f"timer probe: {result['broker']} as {result['profile']}: {wheel}"]
    c = result["checks"]
    if "lateness" in c:
        x = c["lateness"]
        lines.append(f"  lateness: {x['sent']} sent, {x['accepted']} accepted, {x['fired']} fired "
                     f"({x['timed']} with TIMER_OUT_MS), "
                     f"out rule {x['out_rule_agrees']}/{x['timed']}, exact multiples rounded below "
                     f"{x['exact_multiples_rounded_below']}/{x['exact_multiples']}, early {len(x['early'])}, "
                     f"duplicates {x['duplicates']}")
        lines.append(f"    late vs requested {fmt_ms(x['late_vs_requested_ms'])}; "
                     f"vs due {fmt_ms(x['late_vs_due_ms'])}; "
                     f"after the send {fmt_ms(x['late_vs_send_ms'])}")
        lines.append(f"    fired copies carry {x['fired_props']}; request property kept {x['request_prop_kept']}; "
                     f"answer = timer copy {x['answer_is_timer_copy']}, recallHandle {x['recall_handles']}")
    if "refusals" in c:
        for name, case in c["refusals"]["cases"].items():
            lines.append(f"  refusals {name}: {case['went']} {case['code']} {case['remark'] or ''}".rstrip())
    if "delay_wins" in c:
        for row in c["delay_wins"]["rows"]:
            lines.append(f"  delay_wins {row['props']}: code {row['code']}, fired {row['after_send_ms']} ms after "
                         f"the send began, timer properties left {row['timer_props_left']}")
    if "not_after_now" in c:
        for row in c["not_after_now"]["rows"]:
            lines.append(f"  not_after_now {row['props']}: at once {row['stored_at_once']}, "
                         f"properties kept {row['props_kept']}")
    if "batch" in c:
        for name, row in c["batch"].items():
            lines.append(f"  batch {name}: code {row['code']}, fired {row['fired']} after {row['after_send_ms']} "
                             f"ms, timed {row['timed']}")
    if "txn_commit" in c and "half_refused" in c["txn_commit"]:
        lines.append(f"  txn_commit: half refused {c['txn_commit']['half_refused']}")
    elif "txn_commit" in c:
        x = c["txn_commit"]
        lines.append(f"  txn_commit: half timed {x['half_timed']} (REAL_TOPIC {x['half_real_topic']}), commit "
                     f"{x['commit_code']}, in the business topic {x['in_business_topic']}, in the half topic "
                     f"{x['in_half_topic']}")
    if "crash" in c:
        x = c["crash"]
        lines.append(f"  crash: {x['sent']} sent, {x['fired_before_kill']} fired before the kill, down "
                     f"{x['down_ms']} ms, lost {len(x['lost'])}, early {len(x['early'])}, duplicated "
                     f"{len(x['duplicated'])}")
    if result.get("busy_retries"):
        lines.append(f"flow control: {result['busy_retries']} requests answered SYSTEM_BUSY and sent again")
    lines.append(f"differences from the model: {len(result['differences'])}")
    lines += [f"  - {d}" for d in result["differences"]]
    return "\n".join(lines)



def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m interop.timer_probe", description=__doc__.split("\n")[0])
    parser.add_argument("--broker", required=True, help="rocketmq://NAMESRV_HOST:PORT")
    parser.add_argument("--profile", required=True, choices=sorted(VERSIONS))
    parser.add_argument("--checks", default=",".join(c for c in CHECKS if c != "crash"),
                        help=f"comma separated, of {', '.join(CHECKS)}")
    parser.add_argument("--count", type=int, default=30, help="messages of the lateness check (default 30)")
    parser.add_argument("--crash-cmd", default=None)
    parser.add_argument("--restart-cmd", default=None)
    parser.add_argument("--json", default=None, metavar="FILE", help="write every observation as JSON")
    args = parser.parse_args(argv)
    checks = [c.strip() for c in args.checks.split(",") if c.strip()]
    unknown = sorted(set(checks) - set(CHECKS))
    if unknown:
        parser.error(f"unknown check(s) {unknown}; choose from {list(CHECKS)}")
    if "crash" in checks and not (args.crash_cmd and args.restart_cmd):
        parser.error("the crash check needs --crash-cmd and --restart-cmd")
    probe = Probe(parse_url(args.broker), args.profile, args.crash_cmd, args.restart_cmd)
    try:
        result = run(probe, checks, args.count)
    finally:
        probe.close()
    publish(result, args.json, report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())

