"""Edges of the conformance machine's state space: crossed families, hidden effects, deadline instants.

Theory of operation
-------------------
Issue 41 sorted the broken brokers that escaped the machine by *why* they escaped. ``EdgeRules``
(a mixin of ``ConformanceBase``, like ``DeepRules``; it uses the machine's plumbing) closes each
kind by construction, whatever the bug:

1. **parameters never drawn away from their defaults** — ``domains.py`` lists every parameter of
   every operation with the values drawn, boundaries included; the probes below send the values a
   well-behaved consumer never sends (``pull_edge``: offsets −1, 0, max − 1, max, max + 1,
   max + 1000, the queue after the topic's last, and batch sizes 1, 31, 32, 33, 1024;
   ``offset_reset``: an admin rewind of a consumer group's offset; ``end_tampered``: an
   END_TRANSACTION with one field checkPrepareMessage compares wrong, or a negative commitlog
   offset; ``lock_edge``: an empty batch, a queue twice, a queue past the topic's last;
   ``send_edge``: the queue past the last, a delay level past the table's end, and a message
   exactly at a size limit and one past it: a small commitlog file's room, the body's 4 MiB, the
   properties string's 32767 chars, plain and delayed; ``topic_edge``: a topic named with 127 chars,
   created and sent to, and one of 128, refused).
2. **features never crossed** — ``_fresh(family, …)`` produces one message of a family
   (``domains.MSG_FAMILIES``: plain, keyed, with user properties, delayed and fired, sent oneway, the middle of a
   batch, a committed half, a half committed by a check answer, a 5.x timer message fired) and
   makes it visible; the DLQ and
   orderly ladders (``composite.py``) take a family, so a committed half is failed until the DLQ,
   a delayed message is sent back, an orderly consumer suspends a transactional message.
3. **effects no answer shows** — after an operation whose reply carries nothing, a probe reveals
   the state it changed. The observer already reveals every queue after every step (stores,
   fires, retry and DLQ copies, discards) and every offset commit is read back; here the lock
   table gets its probe, ``_probe_lock``: a client that does not hold the queue unlocks it (must
   change nothing), then the observer asks for it (granted only when free or expired, and then
   released at once, which leaves the queue free: observationally the same as an expired entry).
   It runs after every ``orderly_unlock`` and at every lock deadline instant below. An
   END_TRANSACTION's op shows only at the next check round that finds the half old enough: the
   drain is not quiescent before such a round ran after the last COMMIT/ROLLBACK (``end_due``).
4. **times never drawn just before a deadline** — ``_deadline_table`` lists every deadline the
   machine knows, by kind: ``delay``, ``retry`` and ``timer`` (a copy's due time; ``timer``: a
   5.x timer copy's, out + precision, ``conform_timer.py``), ``lock`` (the broker
   lock's expiry: last grant or renewal + lockMaxLiveTime), ``client_lock`` (the client's lock
   lifetime, 30 s: half the broker's), ``round`` (the check service's next round: the machine
   mirrors its timer, which restarts at every round and every broker restart), ``half`` (a half
   becomes old enough to check: transactionTimeOut after it was born) and ``reserved`` (a half
   older than fileReservedTime is discarded), ``offsets_persist`` and ``delay_persist`` (the
   consumer offsets and the delay progress are persisted every 5 s and 10 s; mirrored like the
   rounds; only where the broker can crash). ``deadline_walk`` picks a kind, then a deadline d of
   it, and visits d − 1, d and d + 1 ms, ticking and probing at each (reveal; lock probe). A
   ``half`` edge cannot be walked (the check service acts only at its rounds): a half is sent so
   that the next round finds it aged transactionTimeOut − 1, exactly it, or + 1
   (``txn_half_before_check(edge)``); ``reserved`` is one jump to d − 1, d or d + 1 (the round
   then runs there); a persist deadline is one jump to d − 1, d or d + 1, then a kill: what the
   restarted broker reads back is what it had persisted by then. ``advance_to_deadline``
   (single jumps, ± 1 ms / 1 s) uses the same table.

Where they run: the ``edge`` rule draws one action; every example's prelude (``composite.py``)
ends with ``deadline_tour`` (what the example lacks is made first: a delayed message, a retry, a
lock; then one walk per timed kind in time order, and a half on the next round's edge; the
persist kinds are left to the drawn walks, and ``reserved`` to them and to a quarter of the tours, for
the half the tour sent) after one of each parameter probe;
``beat`` walks a deadline every tenth beat. All of them need the manual clock;
on the wall clock they idle.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from typing import Any

import attrs
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from rmqspec.model.limits import END_FILE_MIN_BLANK_LENGTH, MAX_PROPERTIES_LENGTH
from rmqspec.model.message import (
    JAVA_INT_MAX,
    JAVA_INT_MIN,
    MAX_BODY_BYTES,
    MAX_TOPIC_BYTES,
    STOREHOST_V6_FLAG,
    Message,
    MessageQueue,
    encode_properties,
    record_size,
)
from rmqspec.model.results import ResponseCode, TxnAction
from rmqspec.model.sendpath import plain_send_properties
from rmqspec.model.timer import TIMER_TOPIC
from rmqspec.properties.conform_base import CLIENTS, PICK, START_MS, Txn, _pick
from rmqspec.properties.domains import EDGE_KINDS, PULL_MAX, PULL_OFFSETS
from rmqspec.properties.history import DISCARD_TOPIC, SCHEDULE_TOPIC

# send_edge's edges by pick: (coverage label, the DELAY level from the table's last level, or None for a
# send to the queue past the topic's last); half the picks are the queue, the levels take turns
SEND_EDGES: tuple[tuple[str, Callable[[int], int] | None], ...] = (
    ("queue_past", None), ("level_past", lambda top: top + 1),
    ("queue_past", None), ("level_past", lambda top: top + 2),
    ("queue_past", None), ("level_past", lambda top: JAVA_INT_MAX),
    ("queue_past", None), ("level_int_min", lambda top: JAVA_INT_MIN),
)  # fmt: skip
# and then a message at one of the store's size limits (``model/limits.py``), exactly at it or one past
# it: a small file's room (the file size less the 8-byte end marker; at it, the record opens a new file
# and fills it), else, by turns, the body limit (4 MiB; one past it is no message: the client refuses
# it), the properties string's (32767 chars), and a delayed message at the latter, whose string the
# routing then lengthens (PROPERTIES_SIZE_EXCEEDED)
LIMIT_EDGES: tuple[str, ...] = ("props", "props_delayed", "props", "props_delayed", "body")
# what RocketMQ answers them (``oracles.py``), where it fixes one answer: a delayed message whose
# string is at the limit is lengthened by the routing (refused in 4.9.8, a profile's matter), and a
# record one past a small file's room is answered PUT_OK and not written by real 4.9.8 (fidelity)
LIMIT_ANSWERS: dict[str, bool] = {"room_fit": True, "body_fit": True, "props_fit": True, "props_over": False,
                                  "props_delayed_over": False}
WALKED = ("delay", "retry", "timer", "lock", "client_lock", "round")  # visited at d − 1, d, d + 1
PERSISTS = ("offsets_persist", "delay_persist")  # one instant, then a kill shows what was persisted
Deadline = tuple[int, str, Any]  # (instant, kind, subject: a key, a queue, a half's key or None)


class EdgeRules:
    """Mixin: the probes, families and deadline walks above (see the module docstring)."""

    timers: dict[str, int] | None = None  # the broker's timers as the machine mirrors them
    end_due: int = 0  # a check round at or after this shows the last COMMIT/ROLLBACK's op (drain)

    # -- the broker's periodic services, mirrored: each runs at the first tick an interval after
    #    its last run (the check service's rounds, the consumer-offset and delay-progress
    #    persists: ModelBroker.tick, MmapBroker.tick); a restart starts them anew ---------------

    def _intervals(self) -> dict[str, int]:
        cfg = self.config
        return {"round": cfg.transaction_check_interval_ms, "offsets_persist": cfg.flush_consumer_offset_interval_ms,
                "delay_persist": cfg.flush_delay_offset_interval_ms}

    def _timer(self, name: str) -> int:
        if self.timers is None:
            self.timers = dict.fromkeys(self._intervals(), START_MS)
        return self.timers[name]

    def _note_tick(self) -> None:
        now = self._now()
        for name, interval in self._intervals().items():
            at = self._timer(name)
            if now < at or now - at >= interval:
                self.timers[name] = now

    def _restarted(self) -> None:
        """A restarted broker starts its periodic services anew; its consumer tables are empty (the
        broadcasting clients restart with it)."""
        self.timers = dict.fromkeys(self._intervals(), self._now())
        # a new flush service: its start's pass (what was written before it is on disk or lost)
        self.async_thorough_at = self._now()
        self.async_passes = ((len(self.history.events), self._now()),) * 2
        self._forget_consumers()
        self._broadcast_restarted()
        self.rounds_mirrored = True

    def _next_round(self) -> int:
        return self._timer("round") + self.config.transaction_check_interval_ms

    def _noted_end(self, txn: Txn) -> None:
        """A COMMIT/ROLLBACK op was written: the first round that may check the half after it."""
        self.end_due = max(self.end_due, self._now(), txn.born + self.config.transaction_timeout_ms)

    # -- 4. deadlines -----------------------------------------------------------------------

    def _deadline_table(self) -> list[Deadline]:
        """Every deadline the machine knows, not more than 1 s in the past."""
        now, cfg = self._now(), self.config
        out: list[Deadline] = []
        for (topic, key, *_), due in self.expect_fire.items():
            kind = "retry" if topic.startswith("%RETRY%") else "timer" if key in self.timer_due else "delay"
            out.append((due, kind, key))
        for mq, (_, ts) in self.broker_grants.items():
            out.append((ts + cfg.broker_lock_max_live_ms, "lock", mq))
        for (_, mq), ts in self.client_lock.items():
            out.append((ts + self.client_lock_ms, "client_lock", mq))
        if self.txns:
            out.append((self._next_round(), "round", None))
        if self._on("crash") and self.can_crash and not self.profile.strict:
            for name in PERSISTS:
                out.append((self._timer(name) + self._intervals()[name], name, None))
        for t in self.txns.values():
            if not t.discarded and t.decided is None:
                out.append((t.born + cfg.transaction_timeout_ms, "half", t.key))
                out.append((t.born + cfg.file_reserved_hours * 3_600_000, "reserved", t.key))
        out = [d for d in out if d[0] > now - 1000]
        if self.topics and self._on("txn") and not any(k == "half" for _, k, _ in out):
            out.append((self._next_round(), "half", None))  # a half sent for the next round
        return sorted(set(out), key=lambda d: (d[0], d[1], str(d[2])))

    def _pick_deadline(self, which: int) -> Deadline | None:
        """Kind first (each kind present equally likely), then one deadline of that kind."""
        table = self._deadline_table()
        kinds = sorted({k for _, k, _ in table})
        if not kinds:
            return None
        kind = kinds[which % len(kinds)]
        return _pick([d for d in table if d[1] == kind], which // len(kinds))

    def _visit(self, at: int, kind: str, subject: Any) -> None:
        """Be at ``at`` and probe what the deadline's kind decides: a lock is decided when it is
        asked for (the clock is set, the services wait for the next tick); a fire or a round needs
        the tick (and a fire the reveal)."""
        if kind in ("lock", "client_lock") and isinstance(subject, MessageQueue):
            limit = self._window_limit()
            if at > self._now():
                self.clock.set(at if limit is None else min(at, limit))
            self._probe_lock(subject, unlock_first=True)
            return
        if at > self._now():
            self._advance(at - self._now())
        else:
            self._tick()
        if kind != "round":
            self._after()

    def _visit_edge(self, d: int, delta: int, kind: str, subject: Any) -> None:
        """``_visit`` at ``d + delta`` (never back in time); a half's reserved deadline is counted."""
        self._visit(max(d + delta, self._now()), kind, subject)
        if kind == "reserved":
            self._sometimes(f"deadline:reserved{delta:+d}")

    def _walk(self, deadline: Deadline, which: int) -> None:
        d, kind, subject = deadline
        edge = which % 3 - 1  # −1, 0, +1
        if kind == "half":
            self._half_edge(which, edge)
        elif kind == "reserved":
            self._visit_edge(d, edge, kind, subject)
        elif kind in PERSISTS:  # what the service persisted by then is what a kill keeps
            self._visit(max(d + edge, self._now()), kind, subject)
            self._crash_and_recover("kill")
        elif kind in WALKED:
            for at in (d - 1, d, d + 1):
                if at >= self._now():
                    self._visit(at, kind, subject)
        self._sometimes(f"deadline:{kind}")

    def _half_edge(self, topic: int, edge: int) -> None:
        """A half the next round finds aged transactionTimeOut − ``edge`` (too young at +1)."""
        self.txn_half_before_check(topic, topic // 3, edge)

    def _edges_ok(self) -> bool:
        return type(self).wall is None and not self.windows

    def deadline_walk(self, which: int) -> None:
        """One deadline (kind drawn first), visited at d − 1, d and d + 1 ms with its probes."""
        self._record("deadline_walk", which=which)
        deadline = self._pick_deadline(which) if self._edges_ok() else None
        if deadline is not None:
            self._walk(deadline, which // 7)
        self._after()

    def deadline_tour(self, v: int) -> None:
        """Every deadline kind, walked: what the example lacks is made first (a delayed message, a
        retry, a lock: ``_seed_deadlines``), then one deadline per kind (``v`` picks which) is
        visited at d − 1, d, d + 1 in time order, and a half is sent for the next round's edge
        (``reserved``, 72 h away: that half's, in a quarter of the tours; else left to the walks)."""
        self._record("deadline_tour", v=v)
        if not self._edges_ok():
            return
        self._seed_deadlines(v)
        table = self._deadline_table()
        chosen = []
        for kind in sorted({k for _, k, _ in table} - {"reserved", "half", *PERSISTS}):
            chosen.append(_pick([d for d in table if d[1] == kind], v))
        for deadline in sorted(chosen, key=lambda d: (d[0], d[1])):
            if deadline[0] + 1 >= self._now() and not self.windows:
                self._walk(deadline, v)
        if self.topics and self._on("txn") and not self.windows:
            self._half_edge(v, v % 3 - 1)
            self._sometimes("deadline:half")
            if v % 4 == 0:  # a quarter of the tours: that half's fileReservedTime, 72 h on
                self._walk_reserved(v // 4 % 3 - 1)
        self._after()

    def _walk_reserved(self, edge: int) -> None:
        """The youngest pending half's fileReservedTime deadline d, jumped to d + ``edge`` (the check
        round runs there: checked at d − 1 and d, discarded unchecked at d + 1). The walks draw it too,
        but rarely: a pending half is one kind among many."""
        pending = [d for d in self._deadline_table() if d[1] == "reserved"]
        if pending and not self.windows:
            self._walk(max(pending, key=lambda d: d[0]), edge + 1)

    def _seed_deadlines(self, v: int) -> None:
        """A deadline of each timed kind the example has none of: a delayed message, a message
        failed once (its retry), a lock grant (its client and broker expiries)."""
        kinds = {k for _, k, _ in self._deadline_table()}
        if "delay" not in kinds and self.topics:
            name = _pick(sorted(self.topics), v)
            self._send(self._message(name, "TagB", delay=1 + v % 3), v % self.topics[name])
        if "retry" not in kinds and self._consumer_groups():
            group = _pick(self._consumer_groups(), v)
            key = self._fresh("plain", sorted(self.history.subscriptions[group])[0], 0)
            if key is not None:
                self._fail_key_once(group, key, 1 + v % 3, "none")
        if "lock" not in kinds and self._on("orderly") and self._orderly_mqs():
            self._lock(_pick(CLIENTS, v), [_pick(self._orderly_mqs(), v // 3)])
        self._after()

    def _jump_to_deadline(self, which: int, delta: int) -> None:
        """``advance_to_deadline`` on the manual clock: kind first, then d + ``delta``, probed."""
        deadline = self._pick_deadline(which)
        if deadline is None:
            return
        d, kind, subject = deadline
        if kind == "half":
            self._half_edge(which, max(-1, min(1, delta)))
        elif kind in PERSISTS and not self.windows:
            self._walk(deadline, delta + 1 if abs(delta) <= 1 else which)
        else:
            self._visit_edge(d, delta, kind, subject)

    # -- 3. probes of effects no answer shows ---------------------------------------------------

    def _probe_lock(self, mq: MessageQueue, unlock_first: bool = False) -> None:
        """What the lock table holds for ``mq``: (``unlock_first``) a client that does not hold it
        unlocks it, which must change nothing; then the observer asks for it — granted only when
        free or expired, and then released at once."""
        if type(self).wall is not None:
            return
        holder = self.broker_grants.get(mq, (None,))[0]
        if unlock_first and holder is not None:
            others = [c for c in CLIENTS if c != holder and (c, mq) not in self.windows]
            if others:
                self._unlock(_pick(others, len(self.program)), [mq])
        if mq in self._lock(self.obs, [mq]):
            self._unlock(self.obs, [mq])
        self._sometimes("lock_probe")

    # -- 1. parameter probes -------------------------------------------------------------------

    @precondition(lambda self: type(self).wall is None)
    @rule(kind=st.sampled_from(EDGE_KINDS), which=PICK, pick=PICK)
    def edge(self, kind: str, which: int, pick: int) -> None:
        """One of the edge actions (the module docstring)."""
        if kind == "deadline_walk":
            self.deadline_walk(which)
        else:
            getattr(self, kind)(which, pick)

    def pull_edge(self, which: int, pick: int) -> None:
        """The observer pulls a queue at an offset and with a batch size a consumer never uses."""
        self._record("pull_edge", which=which, pick=pick)
        mqs = sorted((mq for mq in self.frontier if mq.topic not in self.unrevealable
                      and mq.topic not in (SCHEDULE_TOPIC, DISCARD_TOPIC, TIMER_TOPIC)),
                     key=lambda q: (q.topic, q.queue_id))
        if mqs:
            mq = _pick(mqs, which)
            end = self.frontier[mq]
            where = _pick(PULL_OFFSETS, pick)
            offset = {"below": -1, "zero": 0, "last": end - 1, "end": end, "past": end + 1, "far": end + 1000}[where]
            max_nums = _pick(PULL_MAX, pick // len(PULL_OFFSETS))
            self._pull(self.obs, mq, offset, max_nums, self.obs, sub="*", deliver=False)
            self._sometimes(f"pull_edge:{where}")
            if mq.topic in self.topics:  # and the queue after the topic's last: refused (SYSTEM_ERROR)
                past = MessageQueue(mq.topic, self.topics[mq.topic])
                res = self._pull(self.obs, past, 0, max_nums, self.obs, sub="*", deliver=False)
                self.expect_answer(f"a pull of {past.topic}/{past.queue_id}, the queue past the topic's last",
                                   res is not None, stored=False)
                self._sometimes("pull_edge:queue_past")
        self._after()

    def offset_reset(self, which: int, pick: int) -> None:
        """An admin rewinds a concurrent group's offset on one queue (to 0, one back, or where it
        is); the broker stores what it is sent, the read-back shows it, the consumer re-pulls (what
        it consumes again is an observation: not in ``strict``)."""
        self._record("offset_reset", which=which, pick=pick)
        keys = sorted(self.client_committed, key=lambda k: (k[0], k[1].topic, k[1].queue_id))
        if keys and self._on("admin") and not self.profile.strict:
            group, mq = _pick(keys, which)
            committed = self.client_committed[(group, mq)]
            offset = max(0, _pick((0, committed - 1, committed), pick))
            self.pqs.pop((group, mq), None)  # the client drops its process queue and re-pulls
            self.next_pull.pop((group, mq), None)
            self.client_committed[(group, mq)] = offset
            self._call(f"update_offset({group!r}, {mq.topic}/{mq.queue_id}, {offset}) [reset]",
                       lambda b: b.update_offset(group, mq, offset))
            stored = self.query_offset(group, mq)
            client = "consumer-" + group
            self._emit("commit_offset", actor=client, group=group, client_id=client, topic=mq.topic,
                       queue_id=mq.queue_id, queue_offset=stored.value if stored.error is None else None,
                       detail={"requested": offset, "reset": True})
            self._sometimes("offset_reset:rewound")
        self._after()

    def end_tampered(self, which: int, pick: int) -> None:
        """An END_TRANSACTION with one field wrong (tranStateTableOffset, commitlog offset, producer
        group): checkPrepareMessage refuses it and the half stays as it was; or a negative commitlog
        offset, which lookMessageByOffset finds no message at (SYSTEM_ERROR)."""
        self._record("end_tampered", which=which, pick=pick)
        txns = [t for _, t in sorted(self.txns.items()) if not t.maybe_lost and not t.discarded]
        if txns and self._on("txn"):
            txn: Txn = _pick(txns, which)
            field = _pick(("tsto", "offset", "group", "negative"), pick)
            action = _pick((TxnAction.COMMIT, TxnAction.ROLLBACK), pick // 4)
            group = self.pg + ("_other" if field == "group" else "")
            clo = {"offset": txn.commitlog_offset + 1, "negative": -1 - txn.commitlog_offset}.get(
                field, txn.commitlog_offset)
            tsto = txn.half_offset + (1 if field == "tsto" else 0)
            out = self._call(f"end_transaction({group!r}, {clo}, {tsto}, {action.value}, False) [{field} wrong]",
                             lambda b: b.end_transaction(group, clo, tsto, action, False))
            code = out.value if out.error is None else ResponseCode.SYSTEM_ERROR
            self._sometimes(f"end_tampered:{ResponseCode(code).name}")
            if code == ResponseCode.SUCCESS:  # a broker that accepted it: what it then did is judged
                self._emit("txn_end", actor=self.pg, group=self.pg, topic=txn.topic, queue_id=txn.queue_id,
                           msg_key=txn.key, txn_id=txn.key, status=action.value, commitlog_offset=clo,
                           queue_offset=tsto, detail={"from_check": False, "tampered": field})
                txn.decided = txn.decided or action.value
                self._noted_end(txn)
        self._after()

    def lock_edge(self, which: int, pick: int) -> None:
        """A lock batch a rebalance never sends: empty, one queue twice, or with the queue past the
        topic's last (the broker keeps a lock per queue it is asked for); probed, then released."""
        self._record("lock_edge", which=which, pick=pick)
        if self._on("orderly") and self._edges_ok():
            client = _pick(CLIENTS, which)
            mqs = self._orderly_mqs()
            shape = _pick(("empty", "twice", "past"), pick)
            if shape == "empty":
                batch: list[MessageQueue] = []
            elif shape == "twice":
                batch = [_pick(mqs, pick // 3)] * 2
            else:
                batch = [_pick(mqs, pick // 3), MessageQueue(self.t0, len(mqs))]
            granted = self._lock(client, batch)
            for mq in sorted(set(batch)):
                self._probe_lock(mq)
            extra = [mq for mq in granted if mq.queue_id >= len(mqs)]
            if extra:
                self._unlock(client, extra)
            self._sometimes(f"lock_edge:{shape}")
        self._after()

    def send_edge(self, which: int, pick: int) -> None:
        """A send to the queue past the topic's last (refused), or delayed past the table's end: one or
        two levels past it (clamped to the last), or a DELAY at a Java int's ends (``Integer.parseInt``
        takes both: the largest is clamped like any level past the end, the smallest is ≤ 0, stored as
        sent and never scheduled). ``SEND_EDGES[pick % 8]`` names the edge. Then a message at a size
        limit or one past it (``_at_limit``: ``LIMIT_EDGES``)."""
        self._record("send_edge", which=which, pick=pick)
        if self.topics:
            name = _pick(sorted(self.topics), which)
            label, level_of = SEND_EDGES[pick % len(SEND_EDGES)]
            if level_of is None:
                res = self._send(self._message(name, "TagA"), self.topics[name])
                self.expect_answer(f"a send to {name}/{self.topics[name]}, the queue past the topic's last",
                                   res is not None, stored=False)
            else:
                level = level_of(self.config.max_delay_level)
                res = self._send(self._message(name, "TagB", delay=level), which % self.topics[name])
                self.expect_answer(f"a send to {name} with DELAY {level} ({label})", res is not None, stored=True)
            self._sometimes(f"send_edge:{label}")
            limit = self._at_limit(name, pick // len(SEND_EDGES))
            if limit is not None:
                res = self._send(limit[1], which % self.topics[name])
                stored = LIMIT_ANSWERS.get(limit[0])
                if stored is not None:
                    self.expect_answer(f"a message {limit[0].replace('_', ' ')} its size limit to {name}",
                                       res is not None, stored=stored)
                self._sometimes(f"send_edge:{limit[0]}")
        self._after()

    def topic_edge(self, which: int, pick: int) -> None:
        """A topic name at its length limit (127 chars, TopicValidator's and the store's
        ``checkMessage``'s) and one past it: the longer one is refused at creation; the one at the
        limit is created and sent to, plain and (by ``pick``) delayed, and stays for every later rule."""
        self._record("topic_edge", which=which, pick=pick)
        if not any(len(t) == MAX_TOPIC_BYTES for t in self.topics):  # one per example, past MAX_TOPICS
            head = f"T{len(self.topics)}"
            name = head + "_" * (MAX_TOPIC_BYTES - len(head) - len(self.ns)) + self.ns
            over = name + "x"
            out = self._call(f"create_topic({over[:12]}…[{len(over)} chars], 1) [too long]",
                             lambda b: b.create_topic(over, 1))
            if out.error is None:  # judged without the model too: no message could ever be stored there
                self._oracle_fail(f"the broker created a topic named with {len(over)} chars (the limit is 127)")
            self._create_topic(name, 1 + which % 2)
            for delay in (0, 1 + pick % 2) if pick % 3 == 2 else (0,):
                res = self._send(self._message(name, "TagA", delay=delay), pick % self.topics[name])
                self.expect_answer(f"a send to the topic of {len(name)} chars", res is not None, stored=True)
                self._sometimes(f"topic_edge:{'delayed' if delay else 'plain'}")
        self._after()

    def _at_limit(self, topic: str, pick: int) -> tuple[str, Message] | None:
        """(label, a message exactly at a size limit, ``pick % 2`` = 0, or one past it): the record a
        small commitlog file has room for, else one of ``LIMIT_EDGES`` (the next in the example's rotation, offset
        by ``pick // 2``);
        sized from what the broker stores for it (``model/sendpath.py``, ``message.record_size``).
        None when the file cannot hold the record (the file's own limit would answer first)."""
        cfg = self.config
        trailing = cfg.behaviour.properties_trailing_separator
        flag = STOREHOST_V6_FLAG if ipaddress.ip_address(cfg.store_host).version == 6 else 0
        room = cfg.commitlog_file_size - END_FILE_MIN_BLANK_LENGTH
        extra, label = pick % 2, ("fit", "over")[pick % 2]

        def stored(m: Message) -> dict[str, str]:
            return plain_send_properties(m.wire_properties(), cfg, delayed=False)

        def size(m: Message, body_len: int) -> int:
            return record_size(body_len, topic, stored(m), flag, trailing=trailing)

        msg = self._message(topic, "TagA")
        if room - size(msg, 0) <= MAX_BODY_BYTES:  # a small file: its room
            body = room - size(msg, 0) + extra
            return (f"room_{label}", attrs.evolve(msg, body=b"s" * body)) if body > 0 else None
        # rotate through the kinds within an example (picks drawn are small: a hash of them left some unseen)
        kind = LIMIT_EDGES[(self.limit_edges + pick // 2) % len(LIMIT_EDGES)]
        self.limit_edges += 1
        if kind == "body":  # one past it is no message (``Message`` refuses it, as the client does)
            label, msg = "fit", attrs.evolve(msg, body=b"b" * MAX_BODY_BYTES)
        else:
            delay = 1 if kind == "props_delayed" else 0
            base = self._message(topic, "TagA", props={"PAD": "p"}, delay=delay)
            width = MAX_PROPERTIES_LENGTH + extra - len(encode_properties(stored(base), trailing=trailing)) + 1
            msg = attrs.evolve(base, properties={"PAD": "p" * width})
            if len(encode_properties(stored(msg), trailing=trailing)) != MAX_PROPERTIES_LENGTH + extra:
                return None
        return (f"{kind}_{label}", msg) if size(msg, len(msg.body)) <= room else None

    # -- 2. message families -------------------------------------------------------------------

    def _fresh(self, family: str, topic: str, queue_id: int) -> str | None:
        """One message of ``family`` in ``topic``/``queue_id``, visible when this returns; its key
        (a batch: the middle one's), or None when the broker refused it. A transactional family
        is a plain message in an example whose swarm switched transactions off."""
        if family in ("txn", "txn_checked") and not self._on("txn"):
            family = "plain"
        if family == "oneway" and not self.takes_oneway:
            family = "plain"  # as ``produce`` does (conform_messaging.py)
        key = self._fresh_one(family, topic, queue_id)
        if key is not None:
            self._sometimes(f"family:{family}")
        return key

    def _fresh_one(self, family: str, topic: str, queue_id: int) -> str | None:
        sends = len(self.history.events)
        if family == "keyed":
            msg = self._message(topic, "TagA", (f"key-{self.body_seq}",))
        elif family == "props":
            msg = self._message(topic, "TagC", props={"region": "HZ", "color": "blue", "price": "10"})
        elif family == "delayed":
            msg = self._message(topic, "TagB", delay=1 + self.body_seq % 3)
        elif family == "batch":
            msgs = [self._message(topic, ("TagA", "TagB", "TagA")[i]) for i in range(3)]
            self._send_batch(msgs, queue_id)
            self._after()
            return msgs[1].uniq_key
        elif family in ("txn", "txn_checked"):
            return self._fresh_txn(topic, queue_id, family == "txn_checked")
        elif family == "oneway":  # stored, never answered: its only trace is the broker's copy
            msg = self._message(topic, "TagA")
            return msg.uniq_key if self._send_oneway(msg, queue_id) else None
        elif family == "timer":  # 5.x: two precisions ahead (4.9: a user property, delivered at once)
            msg = self._message(topic, "TagB", props=self._timer_props("TIMER_DELAY_MS", "plus1", 2))
        else:
            msg = self._message(topic, "TagB")
        self._send(msg, queue_id)
        self._after()
        if not any(e.event == "send" and e.msg_key == msg.uniq_key for e in self.history.events[sends:]):
            return None
        due = [d for t, d in self.expect_fire.items() if t[1] == msg.uniq_key]
        if due:  # delayed: it fires into its queue first
            self._advance(max(0, min(due) - self._now()))
            self._after()
        return msg.uniq_key

    def _fresh_txn(self, topic: str, queue_id: int, by_check: bool) -> str | None:
        """A half committed by its producer, or (``by_check``) by its answer to the first check."""
        known = set(self.txns)
        self._send_half(sorted(self.topics).index(topic), queue_id, "COMMIT")
        fresh = [t for k, t in self.txns.items() if k not in known]
        if not fresh:
            return None
        txn = fresh[0]
        txn.ended = True
        if not by_check:
            self._end(txn, TxnAction.COMMIT, txn.commitlog_offset, txn.half_offset, False)
        else:  # its END_TRANSACTION was lost: the check service asks, the producer answers COMMIT
            due = self._next_round()
            while due - txn.born < self.config.transaction_timeout_ms:
                due += self.config.transaction_check_interval_ms
            self._advance(max(0, due - self._now()))
            for req in [r for r in self.pending_checks if r.message.uniq_key == txn.key]:
                self.pending_checks.remove(req)
                self._check_answer(req, "COMMIT")
        self._after()
        return txn.key if txn.decided == "COMMIT" else None
