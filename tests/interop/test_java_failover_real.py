"""The real Java client's own failover (issue 43) on a real RocketMQ 4.9.8 master/slave pair, per master role.

``interop/java/v4/PairFailover.java`` (the official 4.9.8 client jars: a DefaultMQProducer sending a numbered
stream, one sync send every 100 ms, and a CLUSTERING DefaultMQPushConsumer recording what it consumes, the pulls it
sends and the routes it is told, through an RPCHook) runs on the client host of a pair made by
``scripts/real-rocketmq-pair`` (the settings of ``test_ha_real.py``). The test drives the faults while it runs, once
the slave has the topic (SlaveSynchronize copies it within 10 s; a slave without it refuses every pull with
TOPIC_NOT_EXIST, for the whole outage): the consumer suspended for a few seconds (a backlog stays on the brokers),
the master's host crashed (kill -9, its sockets destroyed) and the consumer resumed; once both clients' routes lack
the master and the consumer has read the backlog (from the slave), the master restarted on its store; then the
stream until the producer is acknowledged again and the consumer pulls from the master, and a drain. It asserts,
from the program's JSON lines, what the client did (sources: the 4.9.8 client, named in docs/ha-facts.md "The Java
client across a failover"):

- Jepsen check: every SEND_OK is consumed (SYNC_MASTER: lost = acknowledged - consumed = 0; ASYNC_MASTER: only
  sends acknowledged before the crash may be lost);
- the consumer reads the backlog from the slave while the master is down, once its route refresh (every
  pollNameServerInterval, 30 s) has dropped the master: ``findBrokerAddressInSubscribe`` then answers the slave;
- the producer while the master is down: "Send [3] times, still failed" (connection refused, the stale route) until
  its route lacks the master, then "No route info of this topic" at once; SEND_OK again after the restart;
- back on the master: its pulls refused until the consumer's next heartbeat (the restarted master has no consumer
  table), then served; no duplicates (the consumer keeps its offsets in memory); the order per queue of first
  consumption = the send order.

Run time about 1.5-2 minutes per role, 3.1-3.3 minutes for both (a pair of three JVMs started in ~15 s; the master
down until both clients' 30 s route refreshes came, 20-30 s; its restart 3-8 s; up to 30 s more until the
consumer's heartbeat lets the master serve it): cpu_heavy.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.interop.realrmq import VERSION, RealRocketMQ, resolved
from tests.interop.test_ha_real import CONF, PAIR, REPO

pytestmark = pytest.mark.cpu_heavy

KEEP = REPO / "build" / "interop-ha"  # the program's JSON lines per role, for docs/ha-facts.md
TOPIC, GROUP = "PairFailoverTopic", "pf-consumer-group"
POLL_NAMESRV_S = 30  # the 4.9.8 client's pollNameServerInterval (ClientConfig), the program keeps it
BACKLOG_S = 3  # how long the consumer is suspended before the crash (about 30 messages left on the brokers)
DOWN_MAX_S = 2 * POLL_NAMESRV_S  # the longest the master stays down waiting for both clients' route refreshes
BACK_MAX_S = POLL_NAMESRV_S + 25  # after the restart: until SEND_OK and a pull from the master


class Program:
    """PairFailover on the pair's client host: its stdin for commands, its JSON lines as they are written."""

    def __init__(self, tmp: Path, env: dict[str, str]) -> None:
        self.out = tmp / "pair-failover.jsonl"
        cmd = [str(PAIR), "exec", "--dir", str(tmp), "--",
               *RealRocketMQ(VERSION).java("PairFailover", env["RMQ_NAMESRV"], env["RMQ_MASTER"], TOPIC, GROUP,
                                           str(self.out))]
        self.log = open(tmp / "pair-failover.out", "w")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=self.log, stderr=subprocess.STDOUT,
                                     text=True, start_new_session=True)

    def events(self) -> list[dict[str, Any]]:
        if not self.out.exists():
            return []
        lines = self.out.read_text().splitlines()
        return [json.loads(line) for line in lines if line.endswith("}")]

    def command(self, cmd: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()

    def wait(self, what: str, cond: Callable[[list[dict[str, Any]]], bool], timeout: float,
             minimum: float = 0) -> float:
        """Seconds until ``cond`` holds of the events (at least ``minimum``); fails after ``timeout``."""
        t0 = time.monotonic()
        while True:
            elapsed = time.monotonic() - t0
            if elapsed >= minimum and cond(self.events()):
                return elapsed
            if self.proc.poll() is not None:
                raise AssertionError(f"PairFailover exited ({self.proc.returncode}) waiting for {what}:\n"
                                     f"{(self.out.parent / 'pair-failover.out').read_text()[-3000:]}")
            if elapsed > timeout:
                raise AssertionError(f"no {what} within {timeout} s")
            time.sleep(0.25)

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                self.command("quit")
                self.proc.wait(timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=30)
        self.log.close()


def _now_ms() -> int:
    return int(time.time() * 1000)


def _of(events: list[dict[str, Any]], ev: str) -> list[dict[str, Any]]:
    return [e for e in events if e["ev"] == ev]


def _acked_before(events: list[dict[str, Any]], t_ms: int) -> set[int]:
    return {s["n"] for s in _of(events, "send") if s.get("status") == "SEND_OK" and s["t"] + s["rt"] <= t_ms}


def _consumed(events: list[dict[str, Any]]) -> set[int]:
    return {c["n"] for c in _of(events, "consume")}


def _route_without_master(events: list[dict[str, Any]], who: str, after_ms: int) -> bool:
    return any(r["who"] == who and r["t"] >= after_ms and "0" not in r["brokers"] for r in _of(events, "route"))


def _slave_read_all(events: list[dict[str, Any]], crash: int, slave: str) -> bool:
    """The consumer has read what the slave holds: every acknowledged send, or (an ASYNC_MASTER's tail may be
    missing there) nothing new for 5 s since it pulled from the slave."""
    if _acked_before(events, crash) <= _consumed(events):
        return True
    pulled = [p["t"] for p in _of(events, "pull") if p["addr"] == slave]
    last = max((c["t"] for c in _of(events, "consume")), default=0)
    return bool(pulled) and _now_ms() - max(last, pulled[0]) >= 5000


def _failover(tmp: Path, role: str) -> dict[str, Any]:
    resolved(VERSION)
    program = None
    marks: dict[str, int] = {}
    try:
        done = subprocess.run([str(PAIR), "start", "--version", VERSION, "--dir", str(tmp), "--role", role, *CONF],
                              capture_output=True, text=True, timeout=400, check=False)
        assert done.returncode == 0, f"pair start failed:\n{done.stdout}{done.stderr[-4000:]}"
        env = dict(line.split("=", 1) for line in (tmp / "rmq.env").read_text().splitlines() if "=" in line)
        program = Program(tmp, env)
        program.wait("consumption", lambda ev: len(_of(ev, "consume")) >= 20, timeout=120)
        # the topic exists on the slave only once SlaveSynchronize (every 10 s, fixed) copied the master's topic
        # config: before that the slave refuses its pulls (TOPIC_NOT_EXIST), and with the master gone it never learns
        # it. The run starts the failover after the copy (the slave's store/config/topics.json names the topic).
        topics = tmp / "slave" / "store" / "config" / "topics.json"
        ready = next(e["t"] for e in program.events() if e["ev"] == "ready")
        program.wait("the topic on the slave", lambda _ev: topics.is_file() and TOPIC in topics.read_text(),
                     timeout=40)
        marks["slave_topic"] = _now_ms() - ready
        program.command("suspend")
        time.sleep(BACKLOG_S)
        marks["kill"] = _now_ms()
        kill = subprocess.run([str(PAIR), "kill", "--host", "--dir", str(tmp), "master"], capture_output=True,
                              text=True, timeout=60, check=False)
        assert kill.returncode == 0, kill.stderr
        marks["crash"] = _now_ms()  # every thread of the master gone, its sockets destroyed: the times count from here
        program.command("resume")
        crash = marks["crash"]
        # down until both clients' routes lack the master and the consumer has read the backlog (from the slave)
        program.wait("route refreshes and the backlog read on the slave", lambda ev: (
            _route_without_master(ev, "producer", crash) and _route_without_master(ev, "consumer", crash)
            and _slave_read_all(ev, crash, env["RMQ_SLAVE"])), timeout=DOWN_MAX_S, minimum=3)
        marks["restart"] = _now_ms()
        restart = subprocess.run([str(PAIR), "restart", "--dir", str(tmp), "master"], capture_output=True,
                                 text=True, timeout=240, check=False)
        assert restart.returncode == 0, restart.stderr
        marks["restarted"] = _now_ms()
        back = marks["restart"]
        program.wait("SEND_OK and a pull from the master after the restart", lambda ev: (
            any(s.get("status") == "SEND_OK" and s["t"] >= back for s in _of(ev, "send"))
            and any(p["addr"] == env["RMQ_MASTER"] and p["t"] >= back for p in _of(ev, "pull"))),
            timeout=BACK_MAX_S)
        time.sleep(2)
        program.command("stop-sending")
        marks["stop_sending"] = _now_ms()
        # the restarted master serves the consumer only after its next heartbeat (≤ 30 s after the restart)
        program.wait("the drain", lambda ev: _acked_before(ev, _now_ms()) <= _consumed(ev), timeout=45, minimum=1)
        program.stop()
        events = program.events()
        assert events[-1]["ev"] == "end", events[-3:]
    finally:
        if program is not None:
            program.stop()
        subprocess.run([str(PAIR), "stop", "--dir", str(tmp)], capture_output=True, timeout=180, check=False)
    KEEP.mkdir(parents=True, exist_ok=True)
    shutil.copy(program.out, KEEP / f"java-failover-{role}.jsonl")
    logs = {"master": tmp / "master" / "logs" / "broker.log", "slave": tmp / "slave" / "logs" / "broker.log",
            "client": tmp / "rocketmq_client.log"}
    for who, log in logs.items():
        if log.is_file():
            shutil.copy(log, KEEP / f"java-failover-{role}-{who}.log")
    # the restarted master refuses the consumer's pulls until its heartbeat: PullMessageProcessor's warning
    refused = (tmp / "master" / "logs" / "broker.log").read_text(errors="replace").count(
        f"the consumer's group info not exist, group: {GROUP}")
    return {**analyse(events, marks, env["RMQ_MASTER"], env["RMQ_SLAVE"], role), "pulls_refused_by_master": refused}


def _broker_of(pulls: list[dict[str, Any]], c: dict[str, Any]) -> str | None:
    """The address of the pull that brought consumed message ``c``: the push consumer has one pull in flight per
    queue, so it is the last pull of that queue sent before the consumption at an offset ≤ the message's."""
    found = [p for p in pulls if p["queue"] == c["queue"] and p["offset"] <= c["offset"] and p["t"] <= c["t"]]
    return found[-1]["addr"] if found else None


def analyse(events: list[dict[str, Any]], marks: dict[str, int], master: str, slave: str,
            role: str) -> dict[str, Any]:
    """The figures of one run (times in seconds, from the marks the test took: crash, restart, restarted)."""
    crash, restart, restarted = marks["crash"], marks["restart"], marks["restarted"]
    in_kill = [x for x in _of(events, "send") if marks["kill"] <= x["t"] < crash]
    sends, consumes, pulls, routes = (_of(events, k) for k in ("send", "consume", "pull", "route"))
    name = {master: "master", slave: "slave"}
    first: dict[int, dict[str, Any]] = {}
    for c in consumes:
        first.setdefault(c["n"], c)
    acked = {s["n"] for s in sends if s.get("status") == "SEND_OK"}
    backlog = sorted(_acked_before(events, crash) - {c["n"] for c in consumes if c["t"] < crash})
    backlog_reads = [first[n] for n in backlog if n in first]

    def s(t: int | None, since: int) -> float | None:
        return None if t is None else round((t - since) / 1000, 2)

    def route_change(who: str, since: int, with_master: bool) -> int | None:
        return next((r["t"] for r in routes if r["who"] == who and r["t"] >= since
                     and ("0" in r["brokers"]) == with_master), None)

    down = [x for x in sends if crash <= x["t"] < restart]
    errors: dict[str, int] = {}
    for x in down:
        key = x.get("status") or x["error"].split(",")[0].split(" See ")[0]
        errors[key] = errors.get(key, 0) + 1
    first_no_route = next((x["t"] for x in down if "No route info" in x.get("error", "")), None)
    after = [x for x in sends if x["t"] >= restart]
    send_ok_again = next((x["t"] for x in after if x.get("status") == "SEND_OK"), None)
    statuses_after: list[str] = []
    for x in after:
        key = x.get("status") or x["error"].split(",")[0].split(" See ")[0]
        if x["t"] <= (send_ok_again or 0) and (not statuses_after or statuses_after[-1] != key):
            statuses_after.append(key)
    slave_pulls = [p for p in pulls if p["addr"] == slave]
    master_pull_back = next((p["t"] for p in pulls if p["addr"] == master and p["t"] >= restart), None)
    heartbeat_back = next((h["t"] for h in _of(events, "heartbeat") if h["addr"] == master and h["t"] >= restart),
                          None)
    from_master_back = [c for c in consumes if c["t"] >= restart and _broker_of(pulls, c) == master]
    pull_of_first = next((p for p in reversed(pulls) if from_master_back and p["addr"] == master
                          and p["queue"] == from_master_back[0]["queue"] and p["t"] <= from_master_back[0]["t"]
                          and p["offset"] <= from_master_back[0]["offset"]), None)
    order_broken = {}
    for q in sorted({c["queue"] for c in first.values()}):
        seq = sorted((c for c in first.values() if c["queue"] == q), key=lambda c: c["t"])
        by_offset = sorted(seq, key=lambda c: c["offset"])
        if [c["n"] for c in seq] != sorted(c["n"] for c in seq) or seq != by_offset:
            order_broken[q] = [(c["n"], c["offset"]) for c in seq]
    dups = [c for c in consumes if first[c["n"]] is not c]
    return {
        "role": role,
        "sends": len(sends), "acked": len(acked), "consumed": len(first), "consume_events": len(consumes),
        "lost": sorted(acked - set(first)),
        # acknowledged before the crash and not read while the master was down (the slave did not have them)
        "missing_on_slave_while_down": sorted(_acked_before(events, crash)
                                              - {c["n"] for c in consumes if c["t"] < restart}),
        "acked_before_crash": _acked_before(events, crash),
        "backlog": len(backlog),
        "backlog_from": sorted({name.get(_broker_of(pulls, c) or "", "?") for c in backlog_reads}),
        "backlog_first_read_s": s(min((c["t"] for c in backlog_reads), default=None), crash),
        "backlog_read_s": s(max((c["t"] for c in backlog_reads), default=None), crash)
        if len(backlog_reads) == len(backlog) else None,
        "first_slave_pull_s": s(next((p["t"] for p in slave_pulls if p["t"] >= crash), None), crash),
        "pulls_before_crash": sorted({name.get(p["addr"], p["addr"]) for p in pulls if p["t"] < crash}),
        "route_without_master_s": {who: s(route_change(who, crash, False), crash) for who in ("producer", "consumer")},
        "route_with_master_again_s": {who: s(route_change(who, restart, True), restarted)
                                      for who in ("producer", "consumer")},
        "down_errors": errors,
        "first_no_route_s": s(first_no_route, crash),
        "down_rt_ms_max": max((x["rt"] for x in down), default=None),
        "restart_s": s(restarted, restart),
        "send_ok_again_s": s(send_ok_again, restarted),
        "statuses_after_restart": statuses_after,
        "master_pull_again_s": s(master_pull_back, restarted),
        "master_heartbeat_again_s": s(heartbeat_back, restarted),
        "master_consumed_again_s": s(from_master_back[0]["t"] if from_master_back else None, restarted),
        "master_first_good_pull_s": s(pull_of_first["t"] if pull_of_first else None, restarted),
        "consumed_after_restart_from": sorted({name.get(_broker_of(pulls, c) or "", "?")
                                               for c in consumes if c["t"] >= restart}),
        "stored_unacknowledged_consumed": len(set(first) - acked),
        "sends_during_kill": [x.get("status") or x["error"][:40] for x in in_kill],
        "duplicates": len(dups),
        "duplicate_reads": [(c["n"], name.get(_broker_of(pulls, c) or "", "?")) for c in dups],
        "commits_to_slave": len([p for p in _of(events, "commit") if p["addr"] == slave]),
        "order_broken": order_broken,
        "down_s": s(restart, crash),
        "slave_topic_after_ready_s": round(marks["slave_topic"] / 1000, 2),
    }


@pytest.fixture(scope="module", params=["SYNC_MASTER", "ASYNC_MASTER"])
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    r = _failover(tmp_path_factory.mktemp(f"java-failover-{request.param.lower()}"), request.param)
    print(f"--- {r['role']} (4.9.8 pair, 4.9.8 Java client): "
          + ", ".join(f"{k} {v}" for k, v in r.items() if k not in ("role", "acked_before_crash")))
    return r


def test_no_acknowledged_message_lost(run: dict[str, Any]) -> None:
    assert run["acked"] > 50 and run["backlog"] > 0, run
    if run["role"] == "SYNC_MASTER":  # every SEND_OK waited for the slave: all of them were read there
        assert run["lost"] == [] and run["missing_on_slave_while_down"] == [], run
    else:  # only an unreplicated tail before the crash can be missing
        assert set(run["lost"]) <= run["acked_before_crash"], run["lost"]


def test_consumer_reads_the_slave_while_the_master_is_down(run: dict[str, Any]) -> None:
    # before the crash the consumer pulls from the master only (suggestWhichBrokerId 0, the master in its table)
    assert run["pulls_before_crash"] == ["master"]
    # after: the backlog comes from the slave, once the consumer's route refresh (≤ pollNameServerInterval) has
    # dropped the master; pulls to the master fail meanwhile and are retried after pullTimeDelayMillsWhenException
    assert run["backlog_from"] == ["slave"], run["backlog_from"]
    assert run["route_without_master_s"]["consumer"] is not None
    assert run["route_without_master_s"]["consumer"] <= POLL_NAMESRV_S + 10
    assert run["first_slave_pull_s"] >= run["route_without_master_s"]["consumer"] - 0.5
    assert run["backlog_first_read_s"] <= POLL_NAMESRV_S + 20
    if run["role"] == "SYNC_MASTER":  # the whole backlog was on the slave (an ASYNC tail comes with the master)
        assert run["backlog_read_s"] is not None and run["backlog_read_s"] <= POLL_NAMESRV_S + 20


def test_producer_while_the_master_is_down_and_after(run: dict[str, Any]) -> None:
    route = run["route_without_master_s"]["producer"]
    assert route is not None and route <= POLL_NAMESRV_S + 10
    # a stale route: connection refused, three tries; the route without a master: no writable queue at all
    assert set(run["down_errors"]) <= {"MQClientException: Send [3] times", "MQClientException: No route info of "
                                       f"this topic: {TOPIC}"}, run["down_errors"]
    assert run["first_no_route_s"] is not None and run["first_no_route_s"] >= route - 0.5
    assert run["down_rt_ms_max"] < 3000  # every failure is fast: refused connections, the name server's answer
    assert run["send_ok_again_s"] is not None and run["send_ok_again_s"] <= 30
    assert run["statuses_after_restart"][-1] == "SEND_OK"
    if run["role"] == "ASYNC_MASTER":
        assert "SLAVE_NOT_AVAILABLE" not in run["statuses_after_restart"]


def test_consumer_back_on_the_master(run: dict[str, Any]) -> None:
    # the consumer's route gets the master back at its next offset persist (every 5 s, updateConsumeOffsetToBroker
    # refreshes the route when the master is missing) or route poll; its pulls then go to the master (the slave
    # suggested brokerId 0), which refuses them (SUBSCRIPTION_NOT_EXIST, the restarted master has no consumer
    # table) until the consumer's next heartbeat (heartbeatBrokerInterval 30 s): no message comes from the master
    # through a pull sent before that heartbeat
    assert run["route_with_master_again_s"]["consumer"] is not None
    assert run["master_consumed_again_s"] is not None and run["master_consumed_again_s"] <= 30 + 15
    assert run["master_first_good_pull_s"] >= run["master_heartbeat_again_s"], run
    assert run["pulls_refused_by_master"] > 0 or run["master_pull_again_s"] >= run["master_heartbeat_again_s"]


def test_order_and_duplicates(run: dict[str, Any]) -> None:
    assert run["order_broken"] == {}
    # the consumer keeps its offsets in memory (PullRequest.nextOffset) across the failover: the master's older
    # persisted offset is never read back (no rebalance, no OFFSET_ILLEGAL), so nothing is consumed twice
    assert run["duplicates"] == 0 and run["consume_events"] == run["consumed"], run["duplicate_reads"]
