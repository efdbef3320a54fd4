"""Master/slave replication (RocketMQ 4.9.8 HA) measured over the wire on a real pair: what the model is held to.

    python -m interop.ha_probe --pair-dir D [--pair-script scripts/real-rocketmq-pair] [--json FILE]

run on the pair's client host (``scripts/real-rocketmq-pair exec --dir D -- .venv/bin/python -m interop.ha_probe
--pair-dir D``); ``tests/interop/test_ha_real.py`` runs it once per master role (SYNC_MASTER, ASYNC_MASTER) and
asserts the facts; the figures and their 4.9.8 sources are in docs/ha-facts.md (issue 43).

Theory of operation
-------------------
rmqspec's own wire client, one ``RemotingClient`` per broker (the addresses come from the pair's ``rmq.env``),
requests built by ``remoting/client_ops.py`` (sends, pulls, offsets) and three raw admin codes
(UPDATE_BROKER_CONFIG 25 to switch slaveReadEnable / accessMessageInMemoryMaxRatio at run time,
GET_ALL_DELAY_OFFSET 45, GET_BROKER_RUNTIME_INFO 28 for each store's commitLogMaxOffset). The pair's faults
are the fixture's verbs (``cut`` / ``heal`` the HA link, ``kill`` / ``restart`` / ``drop-store`` a broker), run
as commands. The checks run in order on one topic of one queue (``HaProbe<stamp>``), so every figure is a
queue offset or a commitlog offset of one log:

- ``replicated``: sends to the master with the slave connected: codes and round trips; how long until the
  slave's store holds them (its commitLogMaxOffset = the master's);
- ``slave_write``: a send straight to the slave: code and remark;
- ``slave_read``: pulls from the slave with slaveReadEnable false then true (code, suggestWhichBrokerId,
  messages), a pull past the slave's max offset; the master's suggestion when the consumer is "slow"
  (accessMessageInMemoryMaxRatio 0 makes any pull that is not at the log's end a slow one);
- ``sync``: a consumer offset committed on the master and the delay-offset table: when the slave has them;
- ``cut``: the HA link cut, sends every 0.3 s until the answer changes twice or 30 s: each send's code, remark
  and round trip and its time since the cut; whether those messages are on the master (pulled); how far the
  slave falls behind; after ``heal``, the time until a send is SEND_OK again and the slave has caught up;
- ``slave_crash``: the slave killed (-9): the answers of three sends right after, the slave restarted on its
  store: how long until it caught up, a send after;
- ``failover``: the link cut for the last ``--tail`` sends of a stream (ASYNC_MASTER acknowledges them, a
  SYNC_MASTER does not), the master's host crashed (kill -9 and every socket of its namespace destroyed: a
  process kill alone leaves the replication data already written to its kernel socket, which reaches the
  slave when the link heals): the time until the name server's route lacks the master
  and until the slave serves every message it has; then the master restarted on its store: a consumer
  whose offset the master last knew reads again what it read on the slave (duplicates); the slave's
  consumer offset after SlaveSynchronize ran again; finally the master killed, its store dropped and the
  master restarted: the acknowledged messages only the slave holds (loss = acknowledged − slave), and
  whether the empty master's new messages reach the slave.

The probe only observes and reports; the test decides (the Jepsen-style check of acknowledged messages is
there, on the lists this probe returns).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from rmqspec.model.message import Message, MessageQueue
from rmqspec.remoting import client_ops as ops
from rmqspec.remoting.client import RemotingClient, RemotingError
from rmqspec.remoting.command import RemotingCommand

REPO = Path(__file__).resolve().parents[1]
UPDATE_BROKER_CONFIG, GET_ALL_DELAY_OFFSET, GET_BROKER_RUNTIME_INFO = 25, 45, 28
PRODUCER, GROUP = "ha_probe_producer", "ha_probe_reader"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class Pair:
    """The pair's addresses (``rmq.env``), a connection per broker, and the fixture's fault verbs."""

    def __init__(self, directory: Path, script: Path) -> None:
        self.dir, self.script = directory, script
        self.env = dict(line.split("=", 1) for line in (directory / "rmq.env").read_text().splitlines() if "=" in line)
        self.addr = {"master": self.env["RMQ_MASTER"], "slave": self.env["RMQ_SLAVE"]}
        self.namesrv = self.env["RMQ_NAMESRV"]
        self.conns: dict[str, RemotingClient] = {}
        self.topic = f"HaProbe{now_ms() % 10**8}"
        self.mq = MessageQueue(self.topic, 0)

    def fault(self, verb: str, *args: str) -> float:
        """Run a fixture verb; seconds it took. Drops the connection of a broker it touches."""
        t0 = time.monotonic()
        done = subprocess.run([str(self.script), verb, "--dir", str(self.dir), *args], capture_output=True,
                              text=True, timeout=300, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"real-rocketmq-pair {verb} {' '.join(args)}: {done.stderr[-2000:]}")
        for who in args:
            self.drop(who)
        return time.monotonic() - t0

    def drop(self, who: str) -> None:
        conn = self.conns.pop(who, None)
        if conn is not None:
            conn.close()

    def conn(self, who: str) -> RemotingClient:
        c = self.conns.get(who)
        if c is None or c.closed:
            c = RemotingClient.connect(self.addr[who] if who != "namesrv" else self.namesrv, timeout_ms=30_000)
            self.conns[who] = c
        return c

    def ask(self, who: str, cmd: RemotingCommand) -> RemotingCommand:
        return self.conn(who).invoke(cmd, timeout_ms=30_000)

    # --- requests ---------------------------------------------------------------------------------------

    def send(self, who: str, body: str) -> dict[str, Any]:
        props = {"UNIQ_KEY": uuid.uuid4().hex.upper(), "WAIT": "true"}
        t0 = now_ms()
        try:
            resp = self.ask(who, ops.send_request(PRODUCER, Message(self.topic, body.encode()), 0, props, t0,
                                                  self.env.get("RMQ_BROKER_NAME", "broker-a")))
        except RemotingError as err:
            return {"body": body, "code": None, "error": type(err).__name__, "rt_ms": now_ms() - t0, "at": t0}
        return {"body": body, "code": resp.code, "remark": resp.remark, "rt_ms": now_ms() - t0, "at": t0,
                "queue_offset": int(resp.ext("queueOffset") or -1), "msg_id": resp.ext("msgId")}

    def pull(self, who: str, offset: int, max_nums: int = 32) -> dict[str, Any]:
        resp = self.ask(who, ops.pull_request(GROUP, self.mq, offset, max_nums, "*"))
        bodies = [m.body.decode() for m in ops.messages_of(resp.body, "PULL")] if resp.code == 0 else []
        return {"code": resp.code, "remark": resp.remark, "suggest": resp.ext("suggestWhichBrokerId"),
                "next": resp.ext("nextBeginOffset"), "max": resp.ext("maxOffset"), "bodies": bodies}

    def read_all(self, who: str) -> list[str]:
        out: list[str] = []
        offset = 0
        while True:
            got = self.pull(who, offset)
            if not got["bodies"]:
                return out
            out += got["bodies"]
            offset = int(got["next"])

    def set_config(self, who: str, **values: str) -> int:
        body = "".join(f"{k}={v}\n" for k, v in values.items()).encode()
        return self.ask(who, RemotingCommand(code=UPDATE_BROKER_CONFIG, body=body)).code

    def runtime(self, who: str) -> dict[str, str]:
        resp = self.ask(who, RemotingCommand(code=GET_BROKER_RUNTIME_INFO))
        return json.loads(resp.body)["table"] if resp.code == 0 else {}

    def log_end(self, who: str) -> int:
        return int(self.runtime(who).get("commitLogMaxOffset", "-1"))

    def query_offset(self, who: str, group: str = GROUP) -> int:
        resp = self.ask(who, ops.query_offset_request(group, self.mq))
        return int(resp.ext("offset") or -1) if resp.code == 0 else -resp.code

    def until(self, what: Any, timeout_s: float, step_s: float = 0.2) -> float | None:
        """Seconds until ``what()`` is true (None: not within timeout_s)."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout_s:
            try:
                if what():
                    return round(time.monotonic() - t0, 2)
            except (RemotingError, OSError, ValueError):
                pass
            time.sleep(step_s)
        return None


def caught_up(pair: Pair) -> bool:
    return pair.log_end("slave") == pair.log_end("master")


def check_replicated(pair: Pair, n: int = 20) -> dict[str, Any]:
    sends = [pair.send("master", f"r-{i}") for i in range(n)]
    lag_s = pair.until(lambda: caught_up(pair), 30)
    return {"codes": sorted({s["code"] for s in sends}), "rt_ms": sorted(s["rt_ms"] for s in sends),
            "slave_caught_up_s": lag_s, "master_log_end": pair.log_end("master"),
            "slave_log_end": pair.log_end("slave")}


def check_slave_write(pair: Pair) -> dict[str, Any]:
    before = pair.log_end("slave")
    got = pair.send("slave", "to-the-slave")
    return {**got, "slave_log_end_moved": pair.log_end("slave") != before}


def check_slave_read(pair: Pair) -> dict[str, Any]:
    out: dict[str, Any] = {}
    out["topic_on_slave_s"] = pair.until(lambda: pair.pull("slave", 0)["code"] != 17, 30)  # SlaveSynchronize
    out["read_disabled"] = pair.pull("slave", 0, 4)
    out["set_slave_read_on_slave"] = pair.set_config("slave", slaveReadEnable="true")
    out["read_enabled"] = pair.pull("slave", 0, 4)
    end = int(out["read_enabled"]["max"] or 0)
    out["at_end"] = pair.pull("slave", end)
    out["past_end"] = pair.pull("slave", end + 5)
    out["master_past_end"] = pair.pull("master", end + 5)
    out["master_default"] = pair.pull("master", 0, 1)
    pair.set_config("master", slaveReadEnable="true", accessMessageInMemoryMaxRatio="0")
    out["master_slow"] = pair.pull("master", 0, 1)
    out["master_at_tail"] = pair.pull("master", end - 1, 1)
    pair.set_config("master", slaveReadEnable="false", accessMessageInMemoryMaxRatio="40")
    return out


def check_sync(pair: Pair) -> dict[str, Any]:
    group = f"ha_sync_{pair.topic}"
    pair.ask("master", ops.create_group_request(group, 16, 1))
    code = pair.ask("master", ops.update_offset_request(group, pair.mq, 7)).code
    t0 = time.monotonic()
    offset_s = pair.until(lambda: pair.query_offset("slave", group) == 7, 30)
    props = {"UNIQ_KEY": uuid.uuid4().hex.upper(), "WAIT": "true", "DELAY": "1"}
    resp = pair.ask("master", ops.send_request(PRODUCER, Message(pair.topic, b"delayed"), 0, props, now_ms(),
                                               "broker-a"))
    time.sleep(1.5)
    master_delay = pair.ask("master", RemotingCommand(code=GET_ALL_DELAY_OFFSET)).body.decode()
    slave_file = pair.dir / "slave" / "store" / "config" / "delayOffset.json"  # SlaveSynchronize writes the file
    delay_s = pair.until(lambda: slave_file.read_text() == master_delay, 30)
    slave_memory = pair.ask("slave", RemotingCommand(code=GET_ALL_DELAY_OFFSET)).body.decode()
    return {"update_offset_code": code, "offset_on_slave_s": offset_s, "delay_send_code": resp.code,
            "delay_offsets_master": master_delay, "delay_file_on_slave_s": delay_s,
            "delay_offsets_slave_memory": slave_memory,
            "elapsed_s": round(time.monotonic() - t0, 1)}


def check_cut(pair: Pair, window_s: float = 30) -> dict[str, Any]:
    base = pair.log_end("master")
    pair.fault("cut")
    t_cut = now_ms()
    sends: list[dict[str, Any]] = []
    changes = 0
    while now_ms() - t_cut < window_s * 1000:
        got = pair.send("master", f"c-{len(sends)}")
        got["since_cut_ms"] = got["at"] - t_cut
        if sends and got["code"] != sends[-1]["code"]:
            changes += 1
        sends.append(got)
        if changes >= 2 or (changes >= 1 and pair.env["RMQ_ROLE"] == "ASYNC_MASTER"):
            break
        if len(sends) >= 8 and changes == 0 and sends[0]["code"] == 0 and pair.env["RMQ_ROLE"] == "ASYNC_MASTER":
            break
        time.sleep(0.3)
    on_master = set(pair.read_all("master"))
    lag = pair.log_end("master") - pair.log_end("slave")
    pair.fault("heal")
    t_heal = time.monotonic()
    ok_s = pair.until(lambda: pair.send("master", "after-heal")["code"] == 0, 60, 0.5)
    caught_s = pair.until(lambda: caught_up(pair), 60)
    return {"sends": sends, "stored_on_master": [s["body"] in on_master for s in sends],
            "slave_behind_bytes": lag, "master_log_grew": pair.log_end("master") - base,
            "send_ok_after_heal_s": ok_s, "caught_up_after_heal_s": caught_s,
            "heal_total_s": round(time.monotonic() - t_heal, 2)}


def check_slave_crash(pair: Pair) -> dict[str, Any]:
    """The slave killed (-9, a process crash: its sockets close), sends, the slave restarted on its store."""
    pair.fault("kill", "slave")
    t0 = now_ms()
    sends = []
    for i in range(3):
        got = pair.send("master", f"s-{i}")
        got["since_kill_ms"] = got["at"] - t0
        sends.append(got)
    restart_s = pair.fault("restart", "--ha", "slave")
    caught_s = pair.until(lambda: caught_up(pair), 60)
    after = pair.send("master", "s-after")
    return {"sends": sends, "restart_s": round(restart_s, 1), "caught_up_after_restart_s": caught_s,
            "after_restart": after, "slave_has_all": all(f"s-{i}" in pair.read_all("slave") for i in range(3))}


def route_has_master(pair: Pair) -> bool:
    resp = pair.ask("namesrv", ops.route_request(pair.topic))
    return resp.code == 0 and pair.addr["master"].encode() in resp.body


def _stream(pair: Pair, prefix: str, n: int, tail: int) -> list[dict[str, Any]]:
    """n sends; the last ``tail`` with the HA link cut (left cut)."""
    sends = [pair.send("master", f"{prefix}-{i}") for i in range(n - tail)]
    pair.until(lambda: caught_up(pair), 30)
    pair.fault("cut")
    sends += [pair.send("master", f"{prefix}-{i}") for i in range(n - tail, n)]
    return [{k: s.get(k) for k in ("body", "code", "rt_ms")} for s in sends]


def check_failover(pair: Pair, n: int, tail: int) -> dict[str, Any]:
    """Master kill with its store kept (reads from the slave, duplicates), then a master kill with the store
    lost (acknowledged messages only the slave can give back)."""
    out: dict[str, Any] = {}
    pair.ask("master", ops.create_group_request(GROUP, 16, 1))
    before = pair.read_all("master")
    pair.ask("master", ops.update_offset_request(GROUP, pair.mq, len(before)))  # a consumer at the end
    time.sleep(6)  # past flushConsumerOffsetInterval (5 s): the master's consumerOffset.json has it
    out["sends"] = _stream(pair, "f", n, tail)
    out["master_offset_before_kill"] = pair.query_offset("master")
    pair.fault("kill", "--host", "master")
    t_kill = time.monotonic()
    out["route_without_master_s"] = pair.until(lambda: not route_has_master(pair), 180)
    out["slave_reads_s"] = pair.until(lambda: pair.pull("slave", len(before), 1)["code"] == 0, 60)
    out["slave_reads_after_kill_s"] = round(time.monotonic() - t_kill, 2)
    pair.fault("heal")
    out["slave_bodies"] = pair.read_all("slave")
    read = set(out["slave_bodies"][len(before):])
    out["slave_offset_commit_code"] = pair.ask("slave", ops.update_offset_request(
        GROUP, pair.mq, len(out["slave_bodies"]))).code
    out["slave_offset_after_commit"] = pair.query_offset("slave")
    out["restart_s"] = round(pair.fault("restart", "--ha", "master"), 1)
    out["master_offset_after_restart"] = pair.query_offset("master")
    again = pair.read_all("master")
    out["master_bodies_after_restart"] = again
    out["reread_from_master_offset"] = len([b for b in again[max(0, out["master_offset_after_restart"]):]
                                            if b in read])
    out["slave_caught_up_after_restart_s"] = pair.until(lambda: caught_up(pair), 60)
    out["slave_offset_changed_s"] = pair.until(
        lambda: pair.query_offset("slave") != out["slave_offset_after_commit"], 45, 0.5)
    out["slave_offset_later"] = pair.query_offset("slave")
    # the lost disk: a second stream, its tail sent with the link cut, the master killed and its store dropped
    out["loss_sends"] = _stream(pair, "g", n // 2, tail)
    pair.fault("kill", "--host", "master")
    pair.fault("drop-store", "master")
    pair.fault("heal")
    out["restart_empty_s"] = round(pair.fault("restart", "master"), 1)
    out["loss_slave_bodies"] = pair.read_all("slave")
    out["empty_master_send"] = pair.send("master", "after-loss")
    time.sleep(3)
    out["after_loss_master_log_end"] = pair.log_end("master")
    out["after_loss_slave_log_end"] = pair.log_end("slave")
    out["after_loss_master_bodies"] = pair.read_all("master")
    # once the slave (ahead of the empty master) has reconnected and reported its offset
    pair.until(lambda: pair.send("master", "probe-after-loss")["code"] == 0, 15, 1.0)
    out["empty_master_send_later"] = pair.send("master", "after-loss-2")
    time.sleep(2)
    slave_now = pair.read_all("slave")
    out["after_loss_slave_got_new"] = "after-loss" in slave_now or "after-loss-2" in slave_now
    out["after_loss_slave_log_end_later"] = pair.log_end("slave")
    return out


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pair-dir", required=True)
    p.add_argument("--pair-script", default=str(REPO / "scripts" / "real-rocketmq-pair"))
    p.add_argument("--failover-sends", type=int, default=40)
    p.add_argument("--tail", type=int, default=10, help="sends of the failover stream made with the link cut")
    p.add_argument("--json")
    a = p.parse_args(argv)
    pair = Pair(Path(a.pair_dir).resolve(), Path(a.pair_script))
    result: dict[str, Any] = {"role": pair.env["RMQ_ROLE"], "topic": pair.topic}
    pair.ask("master", ops.create_topic_request(pair.topic, 1))
    pair.ask("master", ops.create_group_request(GROUP, 16, 1))
    cfg = pair.ask("master", RemotingCommand(code=26)).body.decode()
    result["config"] = {k: v for k, v in (line.split("=", 1) for line in cfg.splitlines() if "=" in line)
                        if k in ("brokerRole", "haHousekeepingInterval", "haSendHeartbeatInterval", "syncFlushTimeout",
                                 "slaveReadEnable", "haSlaveFallbehindMax", "accessMessageInMemoryMaxRatio",
                                 "offsetCheckInSlave", "haTransferBatchSize", "slaveTimeout")}
    result["runtime_keys_slave"] = sorted(pair.runtime("slave"))
    for name, check in (("replicated", check_replicated), ("slave_write", check_slave_write),
                        ("slave_read", check_slave_read), ("sync", check_sync), ("cut", check_cut),
                        ("slave_crash", check_slave_crash),
                        ("failover", lambda p: check_failover(p, a.failover_sends, a.tail))):
        t0 = time.monotonic()
        try:
            result[name] = check(pair)
        except Exception as err:  # reported: the test decides
            result[name] = {"error": f"{type(err).__name__}: {err}"}
        result[name]["check_s"] = round(time.monotonic() - t0, 1)
        print(f"{name}: {json.dumps(result[name])[:1500]}", flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
