"""Streaming trace generator: realistic RocketMQ 4.9 traces at any size.

Theory of operation
-------------------
A discrete-event simulation in plain Python (not the ModelBroker): a heap of
timed actions (producer sends, consumer pulls and results, schedule fires,
transaction checks, lock renewals and takeovers, crashes, injected
scenarios). Each action appends rows to a buffer; rows are tuples whose
``seq`` is implied by their position, turned into Arrow arrays column by
column every ``flush_rows`` rows and streamed to a writer (a directory of
``part-NNNNN.parquet`` files of ``part_rows`` rows, one Parquet file, or
JSONL). State is bounded by the in-flight work (queued copies, scheduled
retries, open transactions), never by the trace length.

What it models (SPEC §4, field conventions §8 and traces/README.md):

- producers send to topics with N queues (round robin, or by
  ``abs(hash(sharding_key)) % N`` for orderly topics), delayed messages
  through ``SCHEDULE_TOPIC_XXXX`` (queue level − 1, fired on the 100 ms tick
  at or after ``deliver_ts``), transactions through the half topic;
- concurrent groups: one client per queue pulls batches in queue order,
  consumes SUCCESS or RECONSUME_LATER, sends failures back (level 3 + r,
  ``%RETRY%{group}`` via the schedule topic; at r = ``retry_max`` or with
  level −1 to ``%DLQ%{group}``), commits the next offset after the batch;
- orderly groups: broker locks granted and renewed every 20 s, the owner
  consumes inside ``orderly_start``/``orderly_end`` windows (local retry
  after 1000 ms on failure); an owner may die (renewals stop, another client
  is DENIED until the broker lock is > 60 s old, then GRANTED) or rebalance
  (``unlock`` then the other client is GRANTED);
- transactions commit or roll back directly, or stay unknown and are checked
  on the 60 s check tick once older than the timeout, up to ``check_max``
  times, then discarded; rarely committed twice (an observation);
- optional broker crashes (kill): see traces/README.md;
- with ``p_timer`` > 0, RocketMQ 5.x timer messages through ``rmq_sys_wheel_timer`` and the
  timer wheel, fired again after a crash since its last checkpoint (``gen_timer.py``).

Deviations (deliberate simplifications): one broker; op-half messages and
consumer-offset persistence are not traced; a duplicate copy (from a crash
or a duplicate commit) is always consumed successfully, so each
(group, msg_key, reconsume_times) has at most one retry chain.

A clean trace satisfies every rule of SPEC §8.1; ``inject`` adds one
self-contained scenario per requested code (``scenarios.py``) whose exact
violation seqs are recorded as ground truth.

The knobs are ``gen_config.py``'s; how rows leave the simulation (Arrow tables, JSON dicts, the
background writer) is ``gen_output.py``.
"""

from __future__ import annotations

import gc
import heapq
import itertools
import json
import random
from collections import deque
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

from rmqspec.model.javahash import select_queue_by_hash
from rmqspec.traces import gen_timer
from rmqspec.traces.gen_config import GenConfig, GenResult
from rmqspec.traces.gen_output import Row, WriterThread, row_dicts, rows_to_table
from rmqspec.traces.io import open_writer, truth_path
from rmqspec.traces.jsonl import JsonlWriter

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
BROKER = "broker"
MSGID_PREFIX = "7F00000100002A9F"  # 127.0.0.1:10911
POISON = 1  # the message fails every time (→ DLQ)
DUP = 2  # a duplicate copy: always consumed successfully


class _Lane:
    """One consumer queue of one group: the copies waiting for delivery, in offset order."""

    __slots__ = (
        "alive",
        "busy",
        "client",
        "clients",
        "group",
        "last_grant",
        "orderly",
        "q",
        "qid",
        "topic",
        "window",
    )

    def __init__(self, group: str, topic: str, qid: int, clients: list[str], orderly: bool):
        self.group = group
        self.topic = topic
        self.qid = qid
        self.clients = clients
        self.client = clients[qid % len(clients)]
        self.orderly = orderly
        self.q: deque = deque()
        self.busy = False
        self.alive = True
        self.last_grant = -(10**15)
        self.window = False  # an orderly_start … orderly_end window is open


class Simulation:
    """The generator's state and actions; ``run()`` drives it to the final ``drain``."""

    def __init__(
        self,
        cfg: GenConfig,
        sink: Callable[[list[Row], int], None],
        *,
        flush_rows: int = 131_072,
        on_progress: Callable[[int, int | None], None] | None = None,
    ) -> None:
        self.cfg = cfg
        self.rng = random.Random(cfg.seed)
        self.sink = sink
        self.flush_rows = flush_rows
        self.on_progress = on_progress
        self.rows: list[Row] = []
        self.base = 0
        self.heap: list = []
        self._ctr = itertools.count()
        self.now = cfg.start_ms
        self.work = 0
        self.producing = True
        self.crash_guard = 0  # >0 while a crash-sensitive scenario runs
        self.restart_waiters = 0  # crash-sensitive scenarios waiting to restart the broker cleanly
        self.restarting = False  # a scenario's clean restart is under way
        self.half_pos: dict[str, int] = {}  # txn key -> half-queue position of its latest copy
        self.down_until = -1
        self.clo = 0
        self.next_off: dict[tuple[str, int], int] = {}
        self.delays = cfg.delays_ms
        self.truth: list[dict[str, Any]] = []
        self._truth_at_drain: list[tuple[str, list[int], str]] = []
        self.recent_fires: deque = deque()
        self.recent_timer_fires: deque = deque()  # the timer wheel's fires since its last checkpoint
        self._inj_keys = itertools.count()
        self._month_start = cfg.start_ms
        self._build_topology()

    # -- topology ---------------------------------------------------------
    def _build_topology(self) -> None:
        cfg = self.cfg
        rng = self.rng
        self.producers = []
        for p in range(cfg.producers):
            prefix = f"0A00{p // 256:02X}{p % 256:02X}{1000 + p:04X}{rng.getrandbits(32):08X}"
            self.producers.append([f"producer-{p}", f"PG_{p % max(1, cfg.producers // 2)}", prefix, 0])
        self.topics = [f"Topic{i}" for i in range(cfg.topics)]
        self.otopics = [f"OrderTopic{i}" for i in range(cfg.orderly_topics)]
        self.subs: dict[tuple[str, int], list[_Lane]] = {}
        self.lanes: list[_Lane] = []
        self.olanes: list[_Lane] = []
        groups = [f"CG_{g}" for g in range(cfg.groups)]
        for i, topic in enumerate(self.topics):
            subscribers = [groups[i % len(groups)]]
            if i % 2 == 0 and len(groups) > 1:
                subscribers.append(groups[(i + 1) % len(groups)])
            for g in subscribers:
                clients = [f"{g}@client-{c}" for c in range(cfg.clients)]
                for q in range(cfg.queues):
                    self._lane(g, topic, q, clients, False)
        for g in groups:
            clients = [f"{g}@client-{c}" for c in range(cfg.clients)]
            self._lane(g, f"%RETRY%{g}", 0, clients, False)
        ogroups = [f"OG_{g}" for g in range(cfg.orderly_groups)]
        for i, topic in enumerate(self.otopics):
            g = ogroups[i % len(ogroups)]
            clients = [f"{g}@client-{c}" for c in range(max(2, cfg.clients))]
            for q in range(cfg.queues):
                self.olanes.append(self._lane(g, topic, q, clients, True))
        self.shard_queue: dict[str, int] = {}
        # an ordered send's detail: the route its selector chose among (ORDER_KEY_SPLIT reads it)
        self.route_detail = json.dumps({"route_queues": cfg.queues}, separators=(",", ":"))

    def _lane(self, g: str, topic: str, q: int, clients: list[str], orderly: bool) -> _Lane:
        lane = _Lane(g, topic, q, clients, orderly)
        self.subs.setdefault((topic, q), []).append(lane)
        self.lanes.append(lane)
        return lane

    # -- scheduling -------------------------------------------------------
    def push(self, ts: int, fn: Callable, arg: Any = None, work: bool = True) -> None:
        if work:
            self.work += 1
        heapq.heappush(self.heap, (ts, next(self._ctr), fn, arg, work))

    @property
    def emitted(self) -> int:
        return self.base + len(self.rows)

    def flush(self) -> None:
        if self.rows:
            self.sink(self.rows, self.base)
            self.base += len(self.rows)
            self.rows = []
            if self.on_progress:
                self.on_progress(self.base, self.cfg.events)

    # -- generic emission (scenarios, rare events) ------------------------
    def emit(self, event: str, **f: Any) -> int:
        """Append one row at ``now``; returns its seq."""
        detail = f.get("detail")
        if detail is not None and not isinstance(detail, str):
            detail = json.dumps(detail, sort_keys=True, separators=(",", ":"))
        seq = self.base + len(self.rows)
        self.rows.append(
            (
                self.now,
                event,
                f.get("actor"),
                f.get("group"),
                f.get("topic"),
                f.get("queue_id"),
                f.get("queue_offset"),
                f.get("commitlog_offset"),
                f.get("msg_key"),
                f.get("msg_id"),
                f.get("reconsume_times"),
                f.get("delay_level"),
                f.get("deliver_ts"),
                f.get("status"),
                f.get("client_id"),
                f.get("sharding_key"),
                f.get("txn_id"),
                detail,
            )
        )
        return seq

    def add_truth(self, code: str, seqs: list[int], reason: str) -> None:
        self.truth.append({"code": code, "seqs": sorted(seqs), "reason": reason})

    def add_truth_at_drain(self, code: str, seqs: list[int], reason: str) -> None:
        self._truth_at_drain.append((code, seqs, reason))

    def inj_key(self) -> str:
        return f"C0A8006300010000{next(self._inj_keys):016X}"

    # -- hot paths ---------------------------------------------------------
    def store(
        self,
        topic: str,
        qid: int,
        key: str,
        rt: int,
        group: str | None,
        flags: int,
        dl: int | None = None,
        dts: int | None = None,
        detail: str | None = None,
        txn: str | None = None,
    ) -> tuple:
        """The broker stores a new copy (dense queue offset); returns the copy."""
        k = (topic, qid)
        off = self.next_off.get(k, 0)
        self.next_off[k] = off + 1
        clo = self.clo
        self.clo = clo + 256
        mid = f"{MSGID_PREFIX}{clo:016X}"
        self.rows.append(
            (self.now, "store", BROKER, group, topic, qid, off, clo, key, mid, rt, dl, dts,
             None, None, None, txn, detail)
        )
        return (key, topic, qid, off, clo, mid, rt, flags)

    def dispatch(self, copy: tuple) -> None:
        lanes = self.subs.get((copy[1], copy[2]))
        if not lanes:
            return
        for lane in lanes:
            lane.q.append(copy)
            if not lane.busy:
                lane.busy = True
                self.push(self.now + 1 + (copy[4] & 3), self._pull_orderly if lane.orderly else self._pull, lane)

    def _new_key(self, producer: list) -> str:
        ctr = producer[3]
        producer[3] = ctr + 1
        return f"{producer[2]}{(self.now - self._month_start) & 0xFFFFFFFF:08X}{ctr & 0xFFFF:04X}"

    # -- producers -----------------------------------------------------------
    def _produce(self, _arg: Any) -> None:
        cfg = self.cfg
        rng = self.rng
        if self.emitted + 4 * self.work >= cfg.events:
            self.producing = False
            return
        if self._crash_at and self.emitted >= self._crash_at[0] and not self.crash_guard:
            self._crash_at.pop(0)
            self._crash()
            self.push(self.down_until + 1, self._produce)
            return
        if self._inject_at and self.emitted >= self._inject_at[0][0]:
            _, factory = self._inject_at.pop(0)
            self.start_scenario(factory(self))
        producer = self.producers[rng.randrange(len(self.producers))]
        x = rng.random()
        if x < cfg.p_orderly:
            self._send_orderly(producer)
        elif x < cfg.p_orderly + cfg.p_delayed:
            self._send_delayed(producer)
        elif x < cfg.p_orderly + cfg.p_delayed + cfg.p_txn:
            self._send_half(producer)
        elif x < cfg.p_orderly + cfg.p_delayed + cfg.p_txn + cfg.p_timer:
            gen_timer.send_timer(self, producer)
        else:
            self._send_normal(producer)
        self.push(self.now + rng.randint(0, 2 * cfg.send_gap_ms), self._produce)

    def _send_normal(
        self, producer: list, flags: int = 0, key: str | None = None, where: tuple | None = None
    ) -> tuple:
        rng = self.rng
        if where is None:
            topic = self.topics[rng.randrange(len(self.topics))]
            qid = rng.randrange(self.cfg.queues)
        else:
            topic, qid = where
        if key is None:
            key = self._new_key(producer)
        if not flags and rng.random() < self.cfg.p_poison:
            flags = POISON
        copy = self.store(topic, qid, key, 0, producer[1], flags)
        self.rows.append(
            (self.now, "send", producer[0], producer[1], topic, qid, copy[3], copy[4], key,
             copy[5], None, None, None, "SEND_OK", None, None, None, None)
        )
        self.dispatch(copy)
        return copy

    def _send_orderly(self, producer: list) -> None:
        rng = self.rng
        topic = self.otopics[rng.randrange(len(self.otopics))]
        skey = f"order-{rng.randrange(1000)}"
        qid = self.shard_queue.get(skey)
        if qid is None:
            qid = self.shard_queue[skey] = select_queue_by_hash(skey, self.cfg.queues)
        key = self._new_key(producer)
        copy = self.store(topic, qid, key, 0, producer[1], 0)
        self.rows.append(
            (self.now, "send", producer[0], producer[1], topic, qid, copy[3], copy[4], key,
             copy[5], None, None, None, "SEND_OK", None, skey, None, self.route_detail)
        )
        self.dispatch(copy)

    def _send_delayed(self, producer: list) -> None:
        rng = self.rng
        topic = self.topics[rng.randrange(len(self.topics))]
        qid = rng.randrange(self.cfg.queues)
        level = rng.randint(1, 8) if rng.random() < 0.95 else rng.randint(9, len(self.delays))
        key = self._new_key(producer)
        dts = self.now + self.delays[level - 1]
        detail = f'{{"real_queue_id":{qid},"real_topic":"{topic}"}}'
        sched = self.store(SCHEDULE_TOPIC, level - 1, key, 0, producer[1], 0, level, dts, detail)
        self.rows.append(
            (self.now, "send", producer[0], producer[1], topic, qid, None, None, key,
             sched[5], None, level, None, "SEND_OK", None, None, None, None)
        )
        self.push(-(-dts // 100) * 100, self._fire, (sched, topic, qid, None, 0, level, dts))

    # -- schedule service --------------------------------------------------
    def _fire(self, arg: tuple) -> None:
        sched, topic, qid, group, flags, level, dts = arg
        self.rows.append(
            (self.now, "schedule_fire", BROKER, group, topic, qid, None, None, sched[0],
             sched[5], sched[6], level, dts, None, None, None, None, None)
        )
        copy = self.store(topic, qid, sched[0], sched[6], group, flags | sched[7])
        self.dispatch(copy)
        fires = self.recent_fires
        fires.append((self.now, arg))
        horizon = self.now - 10_000
        while fires and fires[0][0] < horizon:
            fires.popleft()

    # -- concurrent consumers ---------------------------------------------
    def _pull(self, lane: _Lane) -> None:
        q = lane.q
        n = min(len(q), self.rng.randint(1, self.cfg.batch))
        batch = [q.popleft() for _ in range(n)]
        now = self.now
        cid = lane.client
        g = lane.group
        append = self.rows.append
        for c in batch:
            append((now, "deliver", cid, g, c[1], c[2], c[3], c[4], c[0], c[5], c[6], None, None,
                    None, cid, None, None, None))
        self.push(now + 1 + self.rng.randrange(20), self._consume, (lane, batch))

    def _consume(self, arg: tuple) -> None:
        lane, batch = arg
        rng = self.rng
        cfg = self.cfg
        now = self.now
        cid = lane.client
        g = lane.group
        append = self.rows.append
        p_fail = cfg.p_fail
        for c in batch:
            flags = c[7]
            fail = not flags & DUP and (flags & POISON or rng.random() < p_fail)
            append((now, "consume", cid, g, c[1], c[2], c[3], c[4], c[0], c[5], c[6], None, None,
                    "RECONSUME_LATER" if fail else "SUCCESS", cid, None, None, None))
            if fail:
                self._send_back(lane, c)
        append((now, "commit_offset", cid, g, lane.topic, lane.qid, batch[-1][3] + 1, None, None,
                None, None, None, None, None, cid, None, None, None))
        if lane.q:
            self.push(now + 1 + rng.randrange(3), self._pull, lane)
        else:
            lane.busy = False

    def _send_back(self, lane: _Lane, c: tuple) -> None:
        g = lane.group
        cid = lane.client
        r = c[6]
        direct = self.rng.random() < self.cfg.p_dlq_direct
        if r >= self.cfg.retry_max or direct:
            self.rows.append(
                (self.now, "send_back", cid, g, c[1], c[2], c[3], c[4], c[0], c[5], r + 1,
                 -1 if direct else 0, None, "DLQ", cid, None, None, None)
            )
            self.store(f"%DLQ%{g}", 0, c[0], r + 1, g, 0)
            return
        level = min(3 + r, len(self.delays))
        dts = self.now + self.delays[level - 1]
        self.rows.append(
            (self.now, "send_back", cid, g, c[1], c[2], c[3], c[4], c[0], c[5], r + 1, level, dts,
             "RETRY", cid, None, None, None)
        )
        rtopic = f"%RETRY%{g}"
        detail = f'{{"real_queue_id":0,"real_topic":"{rtopic}"}}'
        sched = self.store(SCHEDULE_TOPIC, level - 1, c[0], r + 1, g, c[7], level, dts, detail)
        self.push(-(-dts // 100) * 100, self._fire, (sched, rtopic, 0, g, 0, level, dts))

    # -- orderly consumers ---------------------------------------------------
    def _lock(self, lane: _Lane, cid: str, granted: bool) -> int:
        seq = self.emitted
        self.rows.append(
            (self.now, "lock", BROKER, lane.group, lane.topic, lane.qid, None, None, None, None,
             None, None, None, "GRANTED" if granted else "DENIED", cid, None, None, None)
        )
        if granted:
            lane.last_grant = self.now
        return seq

    def _renew(self, lane: _Lane) -> None:
        """Background: the owner re-locks every lockInterval; it may die or hand over."""
        if not self.producing and lane.alive and not lane.busy and not lane.q:
            return  # draining: nothing more will arrive on an orderly topic
        if lane.alive:
            self._lock(lane, lane.client, True)
            if not lane.window:
                x = self.rng.random()
                if x < self.cfg.p_owner_dies:
                    lane.alive = False
                    self.push(self.now + self.cfg.lock_interval_ms, self._takeover, lane)
                elif x < self.cfg.p_owner_dies + self.cfg.p_rebalance:
                    self.rows.append(
                        (self.now, "unlock", lane.client, lane.group, lane.topic, lane.qid, None,
                         None, None, None, None, None, None, None, lane.client, None, None, None)
                    )
                    lane.client = self._other_client(lane)
                    self._lock(lane, lane.client, True)
        self.push(self.now + self.cfg.lock_interval_ms, self._renew, lane, work=False)

    def _other_client(self, lane: _Lane) -> str:
        i = lane.clients.index(lane.client)
        return lane.clients[(i + 1) % len(lane.clients)]

    def _takeover(self, lane: _Lane) -> None:
        """Another client of the group asks for the dead owner's queue."""
        cid = self._other_client(lane)
        if self.now - lane.last_grant > self.cfg.broker_lock_ms:
            lane.client = cid
            lane.alive = True
            self._lock(lane, cid, True)
            if lane.q and not lane.busy:
                lane.busy = True
                self.push(self.now + 1, self._pull_orderly, lane)
        else:
            self._lock(lane, cid, False)
            self.push(self.now + self.cfg.lock_interval_ms, self._takeover, lane)

    def _pull_orderly(self, lane: _Lane) -> None:
        if not lane.alive:
            lane.busy = False
            return
        now = self.now
        if now - lane.last_grant > self.cfg.lock_interval_ms:
            self._lock(lane, lane.client, True)  # the consume request re-locks first
        cid = lane.client
        g = lane.group
        append = self.rows.append
        append((now, "orderly_start", cid, g, lane.topic, lane.qid, None, None, None, None, None,
                None, None, None, cid, None, None, None))
        lane.window = True
        q = lane.q
        n = min(len(q), self.rng.randint(1, self.cfg.batch))
        batch = [q.popleft() for _ in range(n)]
        for c in batch:
            append((now, "deliver", cid, g, c[1], c[2], c[3], c[4], c[0], c[5], c[6], None, None,
                    None, cid, None, None, None))
        self.push(now + 1 + self.rng.randrange(10), self._consume_orderly, (lane, batch, 0, 0))

    def _consume_orderly(self, arg: tuple) -> None:
        lane, batch, start, attempts = arg
        now = self.now
        cid = lane.client
        g = lane.group
        append = self.rows.append
        rng = self.rng
        p = self.cfg.p_orderly_fail
        for j in range(start, len(batch)):
            c = batch[j]
            if attempts < 3 and rng.random() < p:
                append((now, "consume", cid, g, c[1], c[2], c[3], c[4], c[0], c[5],
                        c[6] + attempts, None, None, "RECONSUME_LATER", cid, None, None, None))
                self.push(now + 1000, self._consume_orderly, (lane, batch, j, attempts + 1))
                return
            append((now, "consume", cid, g, c[1], c[2], c[3], c[4], c[0], c[5], c[6] + attempts,
                    None, None, "SUCCESS", cid, None, None, None))
            attempts = 0
        append((now, "commit_offset", cid, g, lane.topic, lane.qid, batch[-1][3] + 1, None, None,
                None, None, None, None, None, cid, None, None, None))
        append((now, "orderly_end", cid, g, lane.topic, lane.qid, None, None, None, None, None,
                None, None, None, cid, None, None, None))
        lane.window = False
        if lane.q:
            self.push(now + 1 + rng.randrange(3), self._pull_orderly, lane)
        else:
            lane.busy = False

    # -- transactions ----------------------------------------------------------
    def _send_half(self, producer: list) -> None:
        rng = self.rng
        cfg = self.cfg
        topic = self.topics[rng.randrange(len(self.topics))]
        qid = rng.randrange(cfg.queues)
        key = self._new_key(producer)
        half = self.store(HALF_TOPIC, 0, key, 0, producer[1], 0, txn=key)
        self.half_pos[key] = half[3]
        self.rows.append(
            (self.now, "txn_half", producer[0], producer[1], topic, qid, half[3], half[4], key,
             half[5], None, None, None, "SEND_OK", None, None, key, None)
        )
        txn = [producer, topic, qid, key, self.now, 0]  # …, half ts, checks so far
        x = rng.random()
        if x < cfg.p_txn_unknown:
            stuck = rng.random() < cfg.p_txn_stuck
            txn.append(stuck)
            if rng.random() < 0.5:
                self._txn_end(txn, "UNKNOWN", False)
            self.push(self._next_check_tick(self.now + cfg.transaction_timeout_ms), self._check, txn)
        else:
            action = "COMMIT" if rng.random() < 0.8 else "ROLLBACK"
            self.push(self.now + 1 + rng.randrange(50), self._resolve, (txn, action, False))

    def _next_check_tick(self, ts: int) -> int:
        interval = self.cfg.transaction_check_interval_ms
        start = self.cfg.start_ms
        return start + -(-(ts - start) // interval) * interval

    def _txn_end(self, txn: list, status: str, from_check: bool) -> None:
        producer, topic, qid, key = txn[0], txn[1], txn[2], txn[3]
        self.rows.append(
            (self.now, "txn_end", producer[0], producer[1], topic, qid, self.half_pos.get(key), None, key, None,
             None, None, None, status, None, None, key,
             '{"from_check":true}' if from_check else '{"from_check":false}')
        )

    def _resolve(self, arg: tuple) -> None:
        txn, action, from_check = arg
        self._txn_end(txn, action, from_check)
        if action == "COMMIT":
            dup = self.rng.random() < self.cfg.p_dup_commit
            copy = self.store(txn[1], txn[2], txn[3], 0, txn[0][1], DUP if dup else 0, txn=txn[3])
            self.dispatch(copy)
            if dup:
                self._txn_end(txn, "COMMIT", from_check)
                self.dispatch(self.store(txn[1], txn[2], txn[3], 0, txn[0][1], DUP, txn=txn[3]))

    def _check(self, txn: list) -> None:
        cfg = self.cfg
        producer, topic, qid, key = txn[0], txn[1], txn[2], txn[3]
        if txn[5] >= cfg.transaction_check_max:
            self.rows.append(
                (self.now, "txn_discard", BROKER, producer[1], topic, qid, None, None, key, None,
                 None, None, None, None, None, None, key, None)
            )
            return
        txn[5] += 1
        reput = self.store(HALF_TOPIC, 0, key, 0, producer[1], 0, txn=key)  # the re-put copy
        self.half_pos[key] = reput[3]
        self.rows.append(
            (self.now, "txn_check", BROKER, producer[1], topic, qid, reput[3], None, key, None, None,
             None, None, None, None, None, key, f'{{"check_times":{txn[5]}}}')
        )
        x = self.rng.random()
        if txn[6] or x < 0.5:
            self.push(self.now + 1 + self.rng.randrange(20), self._answer_unknown, txn)
        else:
            action = "COMMIT" if x < 0.85 else "ROLLBACK"
            self.push(self.now + 1 + self.rng.randrange(20), self._resolve, (txn, action, True))

    def _answer_unknown(self, txn: list) -> None:
        self._txn_end(txn, "UNKNOWN", True)
        self.push(
            self._next_check_tick(self.now + 1), self._check, txn
        )

    # -- crashes ---------------------------------------------------------------
    def _crash(self) -> None:
        """kill -9 of the broker: see traces/README.md for what is lost."""
        rng = self.rng
        in_flight = [
            self._send_unacked(self.producers[rng.randrange(len(self.producers))])
            for _ in range(rng.randint(1, 2))
        ]
        crash_ts = self.now
        self.emit("crash", actor=BROKER, status="kill")
        self.down_until = crash_ts + self.cfg.crash_downtime_ms
        persisted = crash_ts // 10_000 * 10_000
        lost = [arg for ts, arg in self.recent_fires if ts >= persisted]
        self.recent_fires.clear()
        self.push(self.down_until, self._recover, (in_flight, lost, gen_timer.lost_fires(self, crash_ts)))

    def _send_unacked(self, producer: list) -> tuple:
        rng = self.rng
        topic = self.topics[rng.randrange(len(self.topics))]
        qid = rng.randrange(self.cfg.queues)
        key = self._new_key(producer)
        copy = self.store(topic, qid, key, 0, producer[1], DUP)
        self.dispatch(copy)
        return (producer, key, (topic, qid))

    def _recover(self, arg: tuple) -> None:
        in_flight, lost, lost_timer = arg
        self.emit("recover", actor=BROKER)
        for lane in self.olanes:
            if lane.alive:
                self._lock(lane, lane.client, True)
            else:  # the restart emptied the broker's lock table: a takeover is granted at once
                lane.last_grant = -(10**15)
        for fire in lost:  # schedule progress since the last persist is replayed
            sched, topic, qid, group, _flags, level, dts = fire
            self._fire((sched, topic, qid, group, DUP, level, dts))
        for fire in lost_timer:  # so is the timer wheel's since its last checkpoint
            gen_timer.fire(self, fire)
        for producer, key, where in in_flight:  # the producer retries with the same UNIQ_KEY
            self._send_normal(producer, DUP, key, where)

    def clean_restart(self) -> None:
        """A clean shutdown + reopen (an injected scenario's): nothing is lost — offsets and
        delay progress are persisted on shutdown — and the lock table comes back empty.
        Nothing happens while it is down; ``recover`` (status REOPEN) follows without a crash."""
        self.down_until = self.now + self.cfg.crash_downtime_ms
        self.push(self.down_until, self._reopened, None)

    def _reopened(self, _arg: Any) -> None:
        self.emit("recover", actor=BROKER, status="REOPEN")
        for lane in self.olanes:
            if lane.alive:
                self._lock(lane, lane.client, True)
            else:  # the lock table comes back empty: a takeover is granted at once
                lane.last_grant = -(10**15)

    # -- scenarios ---------------------------------------------------------------
    def start_scenario(self, gen: Generator[int, None, None]) -> None:
        self.push(self.now, self._step_scenario, gen)

    def _step_scenario(self, gen: Generator[int, None, None]) -> None:
        try:
            delay = next(gen)
        except StopIteration:
            return
        self.push(self.now + max(0, delay), self._step_scenario, gen)

    # -- main loop -------------------------------------------------------------
    def run(self) -> int:
        cfg = self.cfg
        self.producing = True
        n = cfg.events
        self._crash_at = [n * (i + 1) // (cfg.crashes + 1) for i in range(cfg.crashes)]
        from rmqspec.traces.scenarios import scenario_factories

        factories = scenario_factories(cfg.inject, cfg.inject_count)
        k = len(factories)
        self._inject_at = [(n * (i + 1) // (k + 2), f) for i, f in enumerate(factories)]
        for lane in self.olanes:
            self.push(cfg.start_ms + 1000, self._renew, lane, work=False)
        self.push(cfg.start_ms + 2000, self._produce)
        heap = self.heap
        pop = heapq.heappop
        flush_rows = self.flush_rows
        while heap:
            ts, _c, fn, arg, work = pop(heap)
            if work:
                self.work -= 1
            elif self.work == 0 and not self.producing:
                break
            if ts < self.down_until:
                self.push(self.down_until + 1, fn, arg, work)
                continue
            self.now = ts
            fn(arg)
            if len(self.rows) >= flush_rows:
                self.flush()
        while self._inject_at:  # tiny traces: scenarios not yet started run now
            _, factory = self._inject_at.pop(0)
            self.start_scenario(factory(self))
            while self.heap:
                ts, _c, fn, arg, work = pop(heap)
                if work:
                    self.work -= 1
                    self.now = max(self.now, ts)
                    fn(arg)
        drain = self.emit("drain", actor=BROKER)
        for code, seqs, reason in self._truth_at_drain:
            self.add_truth(code, [*seqs, drain], reason)
        self.truth.sort(key=lambda t: (t["seqs"][-1], t["code"]))
        self.flush()
        return self.base


def generate(
    out: str | Path,
    cfg: GenConfig,
    *,
    format: str | None = None,
    part_rows: int = 1_000_000,
    on_progress: Callable[[int, int | None], None] | None = None,
) -> GenResult:
    """Generate a trace to ``out`` (+ ground truth when injecting); see ``GenConfig``.

    ``out``: ``*.jsonl`` → JSONL, ``*.parquet`` → one Parquet file, else a
    directory of ``part-NNNNN.parquet`` files of ``part_rows`` rows each.
    """
    writer = open_writer(out, format, part_rows=part_rows, row_group_rows=131_072)
    background = None
    if isinstance(writer, JsonlWriter):

        def sink(rows: list[Row], base: int) -> None:
            writer.write_rows(row_dicts(rows, base))

    else:
        background = WriterThread(writer)

        def sink(rows: list[Row], base: int) -> None:
            background.put(rows_to_table(rows, base))

    sim = Simulation(cfg, sink, flush_rows=min(131_072, part_rows), on_progress=on_progress)
    gc_was_enabled = gc.isenabled()
    gc.disable()  # millions of short-lived tuples: the cyclic GC only costs time here
    try:
        total = sim.run()
    finally:
        if gc_was_enabled:
            gc.enable()
        if background is not None:
            background.close()
        else:
            writer.close()
    tpath = None
    if cfg.inject:
        tp = truth_path(out)
        tp.write_text(json.dumps(sim.truth, indent=1) + "\n", encoding="utf-8")
        tpath = str(tp)
    parts = tuple(str(p) for p in getattr(writer, "parts", [Path(out)]))
    return GenResult(total, parts, tuple(sim.truth), tpath, sim.now - cfg.start_ms)


def generate_rows(cfg: GenConfig) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Small traces in memory: (rows as dicts, truth). For tests and tools."""
    out: list[dict[str, Any]] = []

    def sink(rows: list[Row], base: int) -> None:
        out.extend(row_dicts(rows, base))

    sim = Simulation(cfg, sink)
    sim.run()
    return out, sim.truth
