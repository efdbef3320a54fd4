"""Wall-clock conformance of a real master/slave pair (issue 43): a seeded program of sends, reads, HA-link cuts
and master crashes, every answer judged as it comes, and a Jepsen-style check of the acknowledged messages at
the master's loss.

    python -m interop.pair_conform --pair-dir D [--seed N] [--steps N] [--json FILE] [--trace FILE]

run on the pair's client host (``scripts/real-rocketmq-pair exec --dir D -- .venv/bin/python -m
interop.pair_conform --pair-dir D``); ``tests/interop/test_pair_conform_real.py`` runs it per master role. Exit
0 when nothing was found, 1 when something was (the findings in the JSON and on stderr), 2 on a usage error.

Theory of operation
-------------------
One topic of one queue (so queue order is commitlog order), rmqspec's own wire client (``interop/ha_probe.Pair``:
the pair's addresses and the fixture's fault verbs). A ``random.Random(seed)`` draws each step from a weighted
table — send to the master, send to the slave, read the slave, read the master, cut or heal the HA link, wait
1-7 s, crash the master's host (kill -9 and its sockets destroyed) and restart it on its store — and the run
ends with the failover: the HA link healed and left to settle, a last stream of sends whose tail is made with
the link cut, the master's host crashed for good, everything read from the slave.

The pair is a black box, so each rule is the black-box form of an HA invariant (``properties/inv_ha.py``; the
same codes), judged only on what the wire proves:

- HA_SLAVE_WROTE: a send to the slave is refused (SERVICE_NOT_AVAILABLE) and, while the link is cut (nothing
  else can move it), its log end does not move;
- HA_SYNC_ACK_UNREPLICATED: a SYNC_MASTER's SEND_OK of a waiting message: the slave's commitLogMaxOffset asked
  right after the answer is at least the message's end (offset from the msgId, size from a read of the master).
  The slave's end only grows while it runs, so a smaller one after the answer was smaller at it;
- ``answer``: a SYNC_MASTER answers SEND_OK, FLUSH_SLAVE_TIMEOUT (only after waiting about slaveTimeout) or
  SLAVE_NOT_AVAILABLE; SEND_OK whenever the link is up and nothing changed in the last ``SETTLE_S`` seconds,
  never SEND_OK while the link is cut (the slave cannot report what it cannot receive); an ASYNC_MASTER
  answers SEND_OK. Timing windows are the measured ones of docs/ha-facts.md, not the model's instants;
- HA_SLAVE_SERVED_UNSTORED / HA_SLAVE_NOT_PREFIX: each read of the slave gives a prefix of the queue in order
  (queue offsets 0, 1, … with no gap) whose records are the master's (same commitlog offset, same UNIQ_KEY as
  the send that stored it); the master's own reads likewise;
- ``kept``: after a master crash with its store kept, every message a send stored is on the master again;
- at the failover, HA_SYNC_ACK_LOST: a SYNC_MASTER's SEND_OKs are all on the slave; an ASYNC_MASTER's missing
  ones must be a tail of the acknowledged sends (the observation HA_ASYNC_TAIL_LOST, with the count); a gap
  before the tail is HA_SLAVE_NOT_PREFIX.

Figures: acknowledged sends and how many the failover lost, answers per code, the time until the slave serves
every message it has after the master's crash, the messages re-read when the master comes back on its store
(a consumer that committed its offset on the master reads again on the slave what SlaveSynchronize had not
synced yet: duplicates), run time. ``--trace`` writes the run as pair rows
(docs/trace-schema.md): ``send`` rows of the master without ``detail.wait`` (the white-box SYNC rules read the
slave's end from ``replicate`` rows, which a black box cannot place before an answer; the rule above judges
them), ``store`` rows from the master's reads, ``replicate`` and ``deliver`` rows from the slave's reads,
``ha_link`` CUT / HEALED; ``properties/inv_ha.check_pair`` over it is part of the verdict.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

from interop.ha_probe import GROUP, REPO, Pair, now_ms
from rmqspec.model.events import ListRecorder
from rmqspec.model.ids import parse_offset_msg_id
from rmqspec.properties.inv_ha import check_pair
from rmqspec.remoting import bodies
from rmqspec.remoting import client_ops as ops
from rmqspec.remoting.client import RemotingError

SEND_OK, SLAVE_NOT_AVAILABLE, FLUSH_SLAVE_TIMEOUT, SERVICE_NOT_AVAILABLE = 0, 11, 12, 14
CODE_NAMES = {0: "SEND_OK", 10: "FLUSH_DISK_TIMEOUT", 11: "SLAVE_NOT_AVAILABLE", 12: "FLUSH_SLAVE_TIMEOUT"}
SETTLE_S = 12.0  # a healed link reconnects in 1.5-2.9 s, a restarted master takes its slave back in a few s
CUT_QUIET_S = 1.0  # after a cut, what the slave had received is applied well within this
STEPS = (("send", 8), ("send_slave", 1), ("read_slave", 2), ("read_master", 1), ("cut", 1), ("heal", 2),
         ("wait", 2), ("crash", 1))


class Run:
    """The pair, what the run knows of it, its findings and its rows."""

    def __init__(self, pair: Pair, seed: int, slave_timeout_ms: int) -> None:
        self.pair, self.rng, self.slave_timeout_ms = pair, random.Random(seed), slave_timeout_ms
        self.role = pair.env["RMQ_ROLE"]
        self.name = pair.env.get("RMQ_BROKER_NAME", "broker-a")
        self.rec = ListRecorder()
        self.t0 = now_ms()
        self.stored: dict[int, tuple[str, int]] = {}  # commitlog offset → (UNIQ_KEY, end), stored by a send
        self.acked: list[tuple[int, str]] = []  # (commitlog offset, key) of the SEND_OKs, in order
        self.answers: dict[str, int] = {}
        self.findings: list[dict[str, Any]] = []
        self.link_up, self.master_up, self.changed = True, True, time.monotonic()
        self.slave_seen = 0  # the slave's records read so far (a prefix of the queue)
        self.slave_end = 0  # the end of the last of them
        self.n = 0

    # -- rows and findings ------------------------------------------------------------------------------

    def row(self, event: str, broker_id: int, **fields: Any) -> None:
        detail = {"broker": self.name, "broker_id": broker_id, **fields.pop("detail", {})}
        self.rec.emit(event, now_ms() - self.t0, actor="pair_conform", detail=detail, **fields)

    def find(self, code: str, step: int, **what: Any) -> None:
        self.findings.append({"code": code, "step": step, **what})
        print(f"FINDING step {step}: {code} {what}", file=sys.stderr, flush=True)

    # -- steps ----------------------------------------------------------------------------------------------

    def settled(self) -> bool:
        return self.link_up and self.master_up and time.monotonic() - self.changed >= SETTLE_S

    def send(self, step: int) -> dict[str, Any]:
        self.n += 1
        settled, link_up = self.settled(), self.link_up
        got = self.pair.send("master", f"c-{self.n}")
        code = got["code"]
        self.answers[str(CODE_NAMES.get(code, code))] = self.answers.get(str(CODE_NAMES.get(code, code)), 0) + 1
        if code is None or code not in CODE_NAMES:
            if self.master_up:
                self.find("answer", step, why="the running master refused or did not answer a send", got=got)
            return got
        offset = parse_offset_msg_id(got["msg_id"])[2]
        record = self.read_one("master", got["queue_offset"])
        if record is None or record.commitlog_offset != offset:
            self.find("kept", step, why="the master does not serve the message its answer placed", got=got)
            return got
        key, end = record.properties.get("UNIQ_KEY", ""), offset + record.size
        self.stored[offset] = (key, end)
        self.row("store", 0, topic=self.pair.topic, queue_id=0, queue_offset=got["queue_offset"],
                 commitlog_offset=offset, msg_key=key)
        self.row("send", 0, topic=self.pair.topic, queue_id=0, queue_offset=got["queue_offset"],
                 commitlog_offset=offset, msg_key=key, status=CODE_NAMES[code],
                 detail={"role": self.role, "end": end})
        if code == SEND_OK:
            self.acked.append((offset, key))
        if self.role == "ASYNC_MASTER":
            if code != SEND_OK:
                self.find("answer", step, why="an ASYNC_MASTER answers SEND_OK", got=got)
            return got
        if code == SEND_OK:
            if not link_up:
                self.find("answer", step, why="SEND_OK with the HA link cut", got=got)
            slave_end = self.pair.log_end("slave")
            if slave_end < end:
                self.find("HA_SYNC_ACK_UNREPLICATED", step, end=end, slave_end_after=slave_end, got=got)
        elif settled:
            self.find("answer", step, why=f"not SEND_OK with the link up for {SETTLE_S} s", got=got)
        elif code == FLUSH_SLAVE_TIMEOUT and got["rt_ms"] < self.slave_timeout_ms - 100:
            self.find("answer", step, why="FLUSH_SLAVE_TIMEOUT before slaveTimeout", got=got)
        return got

    def read_one(self, who: str, queue_offset: int) -> Any:
        """The record at ``queue_offset`` (the consume queue is written by the reput service a moment after the
        commitlog: asked again for up to 10 s, a loaded machine's margin)."""
        deadline = time.monotonic() + 10
        while True:
            resp = self.pair.ask(who, ops.pull_request(GROUP, self.pair.mq, queue_offset, 1, "*"))
            if resp.code == 0 and resp.body:
                return bodies.decode_messages(resp.body)[0]
            if time.monotonic() > deadline:
                return None
            time.sleep(0.05)

    def records(self, who: str) -> list[Any]:
        """Every record ``who`` serves from queue offset 0."""
        out: list[Any] = []
        while True:
            resp = self.pair.ask(who, ops.pull_request(GROUP, self.pair.mq, len(out), 32, "*"))
            got = bodies.decode_messages(resp.body) if resp.code == 0 and resp.body else []
            if not got:
                return out
            out += got

    def read(self, who: str, step: int) -> list[Any]:
        """``records(who)``, each checked against what the sends stored; a read of the master commits the
        group's offset there (as a consumer does), a read of the slave is written as the slave's rows."""
        out = self.records(who)
        if who == "master":
            self.pair.ask("master", ops.update_offset_request(GROUP, self.pair.mq, len(out)))
        for i, r in enumerate(out):
            key = r.properties.get("UNIQ_KEY", "")
            if r.queue_offset != i:
                self.find("HA_SLAVE_NOT_PREFIX", step, who=who, why="a gap in the queue", at=i, got=r.queue_offset)
                break
            if self.stored.get(r.commitlog_offset, (key,))[0] != key:
                self.find("HA_SLAVE_SERVED_UNSTORED", step, who=who, offset=r.commitlog_offset, key=key,
                          stored=self.stored.get(r.commitlog_offset))
        if who == "slave":
            new = out[self.slave_seen:]
            if new:
                self.row("replicate", 1, commitlog_offset=new[-1].commitlog_offset + new[-1].size,
                         detail={"from": self.slave_end,
                                 "records": [[r.commitlog_offset, r.properties.get("UNIQ_KEY", "")] for r in new]})
                self.slave_seen, self.slave_end = len(out), new[-1].commitlog_offset + new[-1].size
            for r in out:
                self.row("deliver", 1, group=GROUP, topic=self.pair.topic, queue_id=0, queue_offset=r.queue_offset,
                         commitlog_offset=r.commitlog_offset, msg_key=r.properties.get("UNIQ_KEY", ""))
        return out

    def send_slave(self, step: int) -> None:
        """Refused (SERVICE_NOT_AVAILABLE); and, while the link has been cut ``CUT_QUIET_S`` (nothing the master
        sent is still arriving), the slave's log end does not move. With the link up replication moves it
        (a run of the quick tier saw it grow between the two reads of a refused send), so a move proves nothing then: a
        record the slave wrote would be served unstored by a later read (HA_SLAVE_SERVED_UNSTORED)."""
        quiet = not self.link_up and time.monotonic() - self.changed >= CUT_QUIET_S
        before = self.pair.log_end("slave")
        got = self.pair.send("slave", f"to-slave-{step}")
        after = self.pair.log_end("slave")
        if got["code"] != SERVICE_NOT_AVAILABLE or (quiet and after != before):
            self.find("HA_SLAVE_WROTE", step, got=got, log_end_before=before, log_end_after=after,
                      link_cut_quiet=quiet)

    def link(self, verb: str) -> None:
        self.pair.fault(verb)
        self.link_up, self.changed = verb == "heal", time.monotonic()
        self.row("ha_link", 0, status="HEALED" if verb == "heal" else "CUT")

    def crash_and_restart(self, step: int) -> None:
        """The master's host crashes; the slave serves meanwhile; the master comes back on its store."""
        self.pair.fault("kill", "--host", "master")
        self.master_up = False
        self.read("slave", step)
        self.pair.fault("restart", "master")
        self.master_up, self.changed = True, time.monotonic()
        on_master = {r.commitlog_offset for r in self.read("master", step)}
        missing = sorted(set(self.stored) - on_master)
        if missing:
            self.find("kept", step, why="stored messages gone after a restart on the store", offsets=missing)

    def step(self, step: int) -> str:
        names, weights = zip(*STEPS, strict=True)
        op = self.rng.choices(names, weights)[0]
        if op == "send":
            self.send(step)
        elif op == "send_slave":
            self.send_slave(step)
        elif op in ("read_slave", "read_master"):
            self.read(op.removeprefix("read_"), step)
        elif op in ("cut", "heal"):
            if self.link_up == (op == "cut"):
                self.link(op)
        elif op == "wait":
            time.sleep(self.rng.uniform(1, 7))
        else:
            self.crash_and_restart(step)
        return op

    def failover(self, step: int, sends: int, tail: int) -> dict[str, Any]:
        """Heal, settle, a stream whose tail is sent with the link cut, the master lost: what the slave has."""
        if not self.link_up:
            self.link("heal")
        self.pair.until(lambda: self.settled() and self.send(step)["code"] == SEND_OK, SETTLE_S + 30, 0.5)
        for i in range(sends):
            if i == sends - tail:
                self.link("cut")
            self.send(step)
        self.read("master", step)  # a consumer on the master, its offset committed there
        committed = self.pair.ask("master", ops.query_offset_request(GROUP, self.pair.mq))
        master_offset = int(committed.ext("offset") or 0) if committed.code == 0 else 0
        self.pair.fault("kill", "--host", "master")
        self.master_up, t_kill = False, time.monotonic()
        want = self.pair.log_end("slave")  # nothing reaches the slave any more

        def serves_all() -> bool:
            got = self.records("slave")
            return bool(got) and got[-1].commitlog_offset + got[-1].size == want

        serve_s = self.pair.until(serves_all, 30)
        on_slave = {r.commitlog_offset for r in self.read("slave", step)}
        self.row("ha_link", 0, status="DISK_LOST", commitlog_offset=want, detail={"role": self.role})
        lost = [(o, k) for o, k in self.acked if o not in on_slave]
        kept = [o for o, _k in self.acked if o in on_slave]
        gap = bool(lost and kept and min(o for o, _k in lost) < max(kept))
        if lost and self.role == "SYNC_MASTER":
            self.find("HA_SYNC_ACK_LOST", step, lost=[k for _o, k in lost])
        elif gap:
            self.find("HA_SLAVE_NOT_PREFIX", step, why="acknowledged messages missing before the slave's end",
                      lost=[k for _o, k in lost])
        synced = self.pair.ask("slave", ops.query_offset_request(GROUP, self.pair.mq))
        slave_offset = int(synced.ext("offset") or 0) if synced.code == 0 else 0
        return {"acked": len(self.acked), "lost": len(lost), "lost_is_tail": not gap, "slave_log_end": want,
                "slave_serves_s": serve_s, "master_offset_before_loss": master_offset,
                "slave_offset_after_loss": slave_offset, "reread_on_the_slave": max(0, master_offset - slave_offset),
                "since_kill_s": round(time.monotonic() - t_kill, 1)}


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pair-dir", required=True)
    p.add_argument("--pair-script", default=str(REPO / "scripts" / "real-rocketmq-pair"))
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--failover-sends", type=int, default=12)
    p.add_argument("--tail", type=int, default=4, help="sends of the failover stream made with the link cut")
    p.add_argument("--slave-timeout-ms", type=int, default=3000, help="the pair's slaveTimeout")
    p.add_argument("--json")
    p.add_argument("--trace", help="write the run's pair rows (JSON lines)")
    a = p.parse_args(argv)
    if a.steps < 0 or not 0 <= a.tail <= a.failover_sends:
        p.error("--steps ≥ 0 and 0 ≤ --tail ≤ --failover-sends")
    pair = Pair(Path(a.pair_dir).resolve(), Path(a.pair_script))
    run = Run(pair, a.seed, a.slave_timeout_ms)
    pair.ask("master", ops.create_topic_request(pair.topic, 1))
    pair.ask("master", ops.create_group_request(GROUP, 16, 1))
    topic_s = pair.until(lambda: pair.pull("slave", 0)["code"] != 17, 60)  # SlaveSynchronize brings the topic
    started = time.monotonic()
    ops_done: list[str] = []
    for i in range(a.steps):
        try:
            ops_done.append(run.step(i))
        except (RemotingError, OSError) as err:
            run.find("answer", i, why=f"{type(err).__name__}: {err}")
    figures = run.failover(a.steps, a.failover_sends, a.tail)
    found = check_pair(run.rec.events)
    for v in found:
        run.find(v.code, a.steps, why=v.render())
    result = {"role": run.role, "seed": a.seed, "topic": pair.topic, "ops": ops_done, "answers": run.answers,
              "topic_on_slave_s": topic_s, **figures, "findings": run.findings,
              "run_s": round(time.monotonic() - started, 1), "rows": len(run.rec.events)}
    print(json.dumps({k: v for k, v in result.items() if k != "ops"}), flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(result, indent=1))
    if a.trace:
        Path(a.trace).write_text("".join(json.dumps(e.as_row()) + "\n" for e in run.rec.events))
    return 1 if run.findings else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
