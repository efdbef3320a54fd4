"""Deep rules of the conformance machine: clean restarts, lifecycle ladders, swarm families.

Theory of operation
-------------------
``DeepRules`` is a mixin of ``ConformanceBase`` (``properties/conformance.py``);
it uses the machine's plumbing (``_record``, ``_call``, ``_send``,
``_consume``, ``_lock``, ``_advance``, …) and adds what a random walk of 30
steps rarely reaches:

- ``close_reopen`` — a clean shutdown and reopen (``Capability.CLOSE_REOPEN``):
  the clients restart, the restarted consumers read back every offset they had
  committed (``commit_offset`` RESTORED, judged by OffsetSurvivesRestartProperty)
  and scheduled copies must not fire twice (ScheduleOnceWithoutCrashProperty);
- three *ladders*, each one rule that drives one message through its whole
  lifecycle: ``dlq_ladder`` fails a fresh message in one concurrent group,
  advancing the clock to each retry's due time, until the send-back routes it
  to the DLQ (every RETRY level up to the group's max, then DEAD);
  ``orderly_ladder`` suspends a fresh message in the orderly group until its
  limit sends it to the DLQ; both take a message *family* (``edges._fresh``:
  plain, keyed, with properties, delayed, in a batch, a committed half, a half
  committed by a check answer), so one family goes through another's lifecycle;
  ``txn_ladder`` answers a fresh half UNKNOWN at every check round until the
  check service discards it;
- ``send_back_lost`` — the CONSUMER_SEND_MSG_BACK request is lost (a network
  failure: ConsumeMessageConcurrentlyService re-consumes the message locally
  after 5 s), the lifecycle's ``send_back_failed`` row.

Swarm testing: ``init`` draws ``swarm``, a bit mask of the optional rule
families in ``FAMILIES`` (hashed from a drawn integer); a set bit switches that
family off for the whole example (0, the shrinking direction, enables all).
``init`` also draws a ``PRELUDE``: every ladder (the timer ladder of
``conform_timer.py`` among them), the filter actions (SQL92 probes and a tag
probe the message just sent does not match) and the edge
probes (``edges.py``), in a drawn order, run right after it (Hypothesis rarely
draws the late rules with arguments on its own), then the broadcasting clients'
opening actions (``conform_broadcast.py``) and a ``deadline_tour`` that walks
one deadline of every kind at d − 1, d and d + 1 ms. ``_on(family)`` is the
precondition. The mask depends on nothing the broker does, so the draw
structure stays time-independent on the wall clock as well (where the ladders
and restarts idle: they would sleep for minutes). ``depth_targets`` feeds
``hypothesis.target`` at teardown with how deep the example went: one score adding the
reconsume times reached, the checks done and the retries fired (capped). Restarts are not
scored: the optimiser then filled the examples with clean restarts, the cheapest way up.

A ladder records itself as one op; replaying it repeats the same steps.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import attrs
import hypothesis
import hypothesis.errors
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from rmqspec.model.crash import TORN
from rmqspec.model.message import MAX_BODY_BYTES, MessageQueue
from rmqspec.model.protocol import Capability
from rmqspec.model.results import PullStatus
from rmqspec.properties.coverage import classify
from rmqspec.properties.domains import FAMILY, MAX_CHOICES, MSG_FAMILIES, SEND_BACK_LEVELS, TIMER_PROPERTIES
from rmqspec.properties.filters import GF_TAG_SUBS
from rmqspec.properties.sql92_strategies import TAG_VALUES, expressions, property_maps

# optional rule families (swarm testing): the disruptive and the incidental ones; producing,
# consuming, time, the ladders and the lost send-back are always allowed (Hypothesis's own feature
# flags still switch single rules off per example)
FAMILIES: tuple[str, ...] = ("crash", "restart", "flush", "probe", "admin", "drain", "orderly", "txn")
# The mask is a hash of a drawn integer: a mask drawn directly (an integer, or one coin per family)
# comes with Hypothesis's bias towards "interesting" values — with one coin per family, 39 of the
# default budget's 42 examples switched clean restarts off and 19 drew the same mask. Hashed, every
# family is off in about half the examples, and the shrinking direction (0) still enables all.
_SWARM_BITS = (1 << len(FAMILIES)) - 1


def _swarm_mask(seed: int) -> int:
    return (seed * 0x9E3779B1 & 0xFFFFFFFF) >> (32 - len(FAMILIES)) & _SWARM_BITS


# The store's file geometry of an in-process example (mappedFileSizeCommitLog,
# mappedFileSizeConsumeQueue): RocketMQ's defaults in half the examples, small files in the rest, so
# records roll to the next file (a blank at the end of the last), queues span files, and recovery
# scans several — paths a 1 GiB file never takes in 30 steps. 40 KiB still holds a record with the
# largest properties a message may carry (32767 bytes). Taken from other bits of the same drawn integer as the swarm
# mask (bits 8 and up of ``SWARM``'s value), so adding it changed no other draw.
FILE_GEOMETRIES: tuple[tuple[int, int] | None, ...] = (None, None, (4096, 200), (40960, 2000))


# The broker's store host (brokerIP1, what msgIds and every record's storeHost carry): IPv4's loopback
# (the configuration's), or IPv6's — records with the STOREHOST_V6 bit and 16-byte hosts, 56-digit
# msgIds. From two more bits of the same integer (bits 10 and 11 of ``SWARM``'s value), so no other
# draw changed.
STORE_HOSTS: tuple[str | None, ...] = (None, None, None, "::1")
_HOST_SHIFT = len(FAMILIES) + 2


def _swarm_value(seed: int) -> int:
    """The swarm mask in the low bits, the file geometry's index above them, the store host's above."""
    mixed = seed * 0x9E3779B1 & 0xFFFFFFFF
    geometry = mixed >> 20 & (len(FILE_GEOMETRIES) - 1)
    host = mixed >> 16 & (len(STORE_HOSTS) - 1)
    return _swarm_mask(seed) | geometry << len(FAMILIES) | host << _HOST_SHIFT


def swarm_store_host(value: int) -> str | None:
    """``SWARM``'s value's store host (None: the configuration's own)."""
    return STORE_HOSTS[(value >> _HOST_SHIFT) & (len(STORE_HOSTS) - 1)]


def keep_crashes_under_sync(mask: int, flush: str) -> int:
    """The family mask of an example: under SYNC_FLUSH the crash family stays on. What SYNC changes — the
    group commit, WAIT=false sends, a hung disk's FLUSH_DISK_TIMEOUT — shows only in what a power loss keeps,
    so a SYNC example without crashes tests nothing of it (the prelude's stall ladder needs one)."""
    return mask & ~(1 << FAMILIES.index("crash")) if flush == "SYNC" else mask


def split_swarm(value: int) -> tuple[int, tuple[int, int] | None]:
    """``SWARM``'s value as (the family mask, the file geometry)."""
    return value & _SWARM_BITS, FILE_GEOMETRIES[(value >> len(FAMILIES)) & (len(FILE_GEOMETRIES) - 1)]


SWARM = st.integers(0, 2**32 - 1).map(_swarm_value)
# What every example starts with, right after ``init`` (which draws it): the ladders and the filter
# actions, in a drawn order, with drawn variations. Hypothesis draws the late rules with arguments
# rarely, and its target phase spends half the budget on mutations of one example: a prelude that
# runs one ladder per example left the deep paths to a handful of examples (all of them: +40 % time).
PRELUDES: tuple[str, ...] = ("restart", "power", "orderly", "dlq", "txn", "filter", "edges", "timer")
PRELUDE = st.tuples(st.permutations(PRELUDES), st.integers(0, 255), st.sampled_from(TAG_VALUES),
                    property_maps(), expressions(), st.integers(0, 255))
# The timer requests of the wall clock's beat (the ladder's waits are too long there): mostly a slot or
# two ahead, sometimes at once, not a number, past the max, or the longest wait the wall allows (5 s)
WALL_TIMER_EDGES: tuple[str, ...] = ("plus1", "minus1", "multiple", "plus1", "zero", "garbage", "past_max", "max")
PICK = st.integers(0, 255)
LADDER_ROUNDS = 40
CLIENTS = ("c1", "c2", "c3")


def _enabled(cond: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """As ``conformance._enabled``: always drawn on the wall clock (the body idles there)."""
    return precondition(lambda self: type(self).wall is not None or bool(cond(self)))


def _pick(seq: list | tuple, i: int) -> Any:
    return seq[i % len(seq)]


def depth_targets(history: Any) -> dict[str, float]:
    """How deep an example went (``hypothesis.target`` maximizes each)."""
    max_r = max((e.reconsume_times or 0 for e in history.events if e.event == "deliver"), default=0)
    checks = sum(1 for e in history.events if e.event == "txn_check")
    retries = sum(1 for e in history.events if e.event == "schedule_fire" and (e.reconsume_times or 0) >= 1)
    # one combined, capped score: with a label per depth (or restarts in it) the optimiser floods
    # the examples with the cheapest way up (clean restarts) and starves the other families
    return {"depth": float(max_r) + min(checks, 15) / 3 + min(retries, 16) / 4}


class DeepRules:
    """Mixin: the rules above (see the module docstring)."""

    swarm_off: frozenset[str] = frozenset()

    # -- swarm --------------------------------------------------------------

    def _set_swarm(self, mask: int) -> None:
        self.swarm_off = frozenset(f for i, f in enumerate(FAMILIES) if mask >> i & 1)

    def _on(self, family: str) -> bool:
        return family not in self.swarm_off

    def _account(self) -> None:
        """At teardown: what this example reached (coverage) and how deep (targets)."""
        type(self).lifecycle.update(classify(self.history))
        type(self).rules_run.update(op.rule for op in self.program)
        busy = getattr(self.ls.candidate, "busy_retries", 0) if self.ls is not None else 0
        if isinstance(busy, int) and busy:  # a remote broker's flow control, sent again (remoting/adapter.py)
            self.coverage["busy_retried"] += busy
        self._target_depth()

    def _target_depth(self) -> None:
        for label, value in depth_targets(self.history).items():
            with contextlib.suppress(hypothesis.errors.InvalidArgument):
                hypothesis.target(value, label=label)

    # -- clean restart ------------------------------------------------------

    def _can_reopen(self) -> bool:
        return (type(self).wall is None and self.ls is not None and not self.profile.strict
                and Capability.CLOSE_REOPEN in getattr(self.ls.candidate, "capabilities", frozenset()))

    @precondition(lambda self: type(self).wall is None)  # never on the wall clock: no draw wasted
    @_enabled(lambda self: self._on("restart") and self._can_reopen() and not self.windows)
    @rule(down_ms=st.sampled_from([0, 0, 1000, 30_000, 600_000]), tick=st.booleans(),
          level=st.sampled_from([0, 1, 2, 3, 4]))
    def close_reopen(self, down_ms: int = 0, tick: bool = True, level: int = 0) -> None:
        """Clean shutdown, ``down_ms`` of downtime, reopen: durable state back, offsets and
        delay progress persisted (copies due meanwhile fire after the reopen, once; with
        ``tick`` the reopened broker's services run at once). With ``level`` > 0 the shutdown
        comes right after a delayed message of that level fired and the consumers consumed
        what was ready (as ``restart_ladder``): the state only a shutdown persists is fresh."""
        if not self._holds(lambda: self._can_reopen() and not self.windows):
            return self._idle("close_reopen")
        self._record("close_reopen", down_ms=down_ms, tick=tick, **({"level": level} if level else {}))
        if level:
            self._fire_and_consume(level)
        self._close_reopen(down_ms, tick)
        if level:
            self.consume_next_batch()

    def _close_reopen(self, down_ms: int, tick: bool = True) -> None:
        self._close_candidate_and_probe("after a clean shutdown")
        self.offsets_persisted()
        self.ls.on_forks(lambda fork: fork.close())
        if down_ms:
            self.clock.set(self._now() + down_ms)
        try:
            self.ls.candidate.reopen()
        except Exception as exc:
            self._fail(f"candidate failed to reopen(): {exc!r}")
        self.ls.on_forks(lambda fork: fork.reopen())
        self._restarted()
        self._probe_store("after the reopen")
        self._emit("recover", actor="broker", status="REOPEN", detail={"clean": True})
        self._sometimes("close_reopen")
        # the clients restart with the broker (as after a crash)
        for table in (self.pqs, self.next_pull, self.client_committed, self.opqs, self.client_lock,
                      self.broker_grants):
            table.clear()
        self.pending_checks.clear()
        for group, mq in sorted(self.committed_keys, key=lambda k: (k[0], k[1].topic, k[1].queue_id)):
            out = self.query_offset(group, mq, " [after reopen]")
            if out.error is None:
                self._emit("commit_offset", actor="consumer-" + group, group=group, topic=mq.topic,
                           queue_id=mq.queue_id, queue_offset=out.value, status="RESTORED")
                self._sometimes("offset_restored")
        self._after()
        if tick:
            self._tick()  # the restarted services run at once: a copy due meanwhile fires now, once
            self._after()

    # -- the consumer's usual cycle, and a lost send-back ---------------------

    @rule(n=st.integers(1, 8))
    def beat(self, n: int) -> None:
        """The workload's heartbeat, in a fixed cycle: consume, produce, a transaction, its end,
        consume, a flush (ASYNC) or a short wait, a duplicate commit, an orderly batch, a lock
        takeover after expiry, a jump to the next deadline, a consume and a broadcasting client's turn,
        a ladder in turn (on the wall clock, where waiting means
        sleeping: a short delayed send and a filtered probe instead of the waits, and only halves
        ended at once — see docs/fidelity.md "Open"). Hypothesis
        draws the first of its rules (ordered by their number of arguments, then name) far more
        often than the others; this one spreads that weight over the everyday actions, so every
        example runs them whatever rules it draws. Each action records itself."""
        beat = self.beats % 10
        self.beats += 1
        manual = type(self).wall is None  # on the wall clock waiting means sleeping: the beat does not wait
        if beat == 1 and self.topics:
            self.send_plain(n, n, "TagA", (), False)
        elif beat == 2 and self._on("txn") and manual:
            self.txn_send_half(n, n, ("COMMIT", "ROLLBACK", "UNKNOWN", "LOST")[self.beats // 8 % 4])
        elif beat == 2 and self._on("txn") and self.topics:
            # wall clock: a half its producer ends at once (never checked)
            self.txn_send_half(n, n, ("COMMIT", "ROLLBACK")[self.beats // 8 % 2])
            if self._open_txns():
                self.txn_end(len(self._open_txns()) - 1)
        elif beat == 3 and self._on("txn") and manual and self._open_txns():
            self.txn_end(n)
        elif beat == 5 and self.config.flush == "ASYNC" and self._on("flush"):
            self.flush()
        elif beat == 5 and manual:
            self.advance_small(250 * n)
        elif beat == 6 and self._on("txn") and manual and not self.profile.strict and self._committed():
            self.txn_recommit(n)
        elif beat == 7 and self._on("orderly") and manual:
            self._orderly_batch(n)
        elif beat == 4 and manual:
            # a ladder in turn: Hypothesis rarely draws the late rules with arguments on its own
            self._beat_ladder(n)
        elif beat == 4 and self.topics:
            # the wall clock's budget is a dozen examples: every one sends a short delay
            self.send_delayed(n, n, 1 + n % 3)
        elif beat == 0 and not manual and self.topics and self.config.timer_running:
            # ... and, on 5.x, a timer message: due within a few seconds, or stored at once, or refused
            turn = self.beats // 10 + n
            self.send_timer(n, n, _pick(TIMER_PROPERTIES, turn), _pick(WALL_TIMER_EDGES, turn), 1 + n % 2)
        elif beat == 8 and self._on("orderly") and manual and self.broker_grants:
            self.orderly_takeover(n, n)
        elif beat == 8 and not manual and self.topics and self._on("probe"):
            # ... and a tag the observer's filter must drop
            self.send_plain(n, n, ("TagB", "TagC", None)[n % 3], (), n % 2 == 0)
            self.probe_filtered(n, n, "TagA")
        elif beat == 9 and manual and self._deadlines():
            self.deadline_walk(n + self.beats)
        elif beat == 0 and manual:  # the usual consume, then a broadcasting client's turn (its own offsets)
            self.consume_next(n)
            self.broadcast(n, n, 1 + n % 4, ("SUCCESS", "RECONSUME_LATER")[n % 3 // 2])
        else:
            self.consume_next(n)

    beats = 0

    def _orderly_batch(self, n: int) -> None:
        """An orderly batch through the rules: lock if needed, begin, finish."""
        if not self.windows and not self._can_begin():
            self.orderly_lock(n, n)
        if not self.windows and self._can_begin():
            self.orderly_begin(n, 1 + n % 3)
        if self.windows:
            self.orderly_finish(n, "SUSPEND" if n % 4 == 0 else "SUCCESS")

    def _gf_prelude(self, v: int, f: int, expr: str) -> None:
        """GF's lifecycle (``filters.py``): sometimes a client that is no member leaves first (nothing
        changes), a round of both clients, one leaves (the other takes every queue), sometimes the
        last one leaves too (its pull in flight is refused: the group info went with it)."""
        if self.t0 not in self.topics:
            return
        if v % 3 == 0:
            self.group_leave(f, 1 + v % 8)
        tag1, tag2 = _pick(GF_TAG_SUBS, v), _pick(GF_TAG_SUBS, f)
        # two SQL92 clients build their subscriptions at once (equal subVersions: the broker keeps the
        # subscription and filter data it heard first) where client 0's would have been the later
        both_sql = tag1 is None and tag2 is None
        style = (tag1, tag2, 2 if both_sql and f % 2 == 0 else f % 2)
        self.inconsistent_group(expr, "region IS NOT NULL", v % 2, 1 + f % 8, style)
        self.group_leave(v // 2, 1 + f % 8)
        if f % 3 == 0:
            self.group_leave(v // 2 + 1, 8)

    def _prelude(self, prelude: tuple | None) -> None:
        """Right after ``init``: each ladder and the filter actions in the drawn order (each records
        itself as an op of its own), those that can run in this example (manual clock, family on; on the
        wall clock only the pop ladder, `conform_pop_wall.py`);
        ``v`` varies their arguments."""
        if prelude is None:
            return
        order, v, tags, props, expr, f = prelude if len(prelude) > 5 else (*prelude, 0)
        if type(self).wall is not None:  # on the wall clock no ladder runs but the pop ladder (conform_pop_wall.py)
            if not self.windows and self._pop_ok():
                self.pop_prelude(v, f)
            return
        for kind in order:
            if not self._ladder_ok():
                return
            if kind == "restart" and self._on("restart") and self._can_reopen():
                self.restart_ladder(1 + v % 4, (0, 5000)[v % 2])
            elif kind == "power" and self._on("crash") and self._power_ok():
                self.power_ladder(1 + v % 3, 1 + v // 3 % 3)
                if self.config.flush == "ASYNC" and TORN in self._crash_kinds():
                    self.crash_recover(TORN)  # and a power loss that tears the unflushed tail
                elif self.config.flush == "SYNC" and self._can_stall() and not self.windows:
                    # and a hung disk: FLUSH_DISK_TIMEOUT answers, a power loss during the stall, then after one
                    for then in ("power", "recovered_power"):
                        if self._ladder_ok() and self._can_stall() and not self.windows:
                            self.disk_stall(1 + v % 3, then, (5_000, 12_000)[v // 2 % 2])
            elif kind == "orderly" and self._on("orderly") and self._orderly_mqs():
                self.orderly_ladder(v, v // 2, _pick(MSG_FAMILIES, f // len(MSG_FAMILIES)))
                self.send_plain(v, 0, "TagA", (), False)
                self._orderly_batch(v)
                # and a client's unlock of queues, the lock table probed after it (the rule's kind that the
                # draws may leave out: the ladder unlocks only inside its own rebalance)
                self.orderly_unlock(v + 1, 1 + f % 15)
            elif kind == "dlq" and self._consumer_groups():
                self.dlq_ladder(v, (0, 0, 0, 1, 2, 19, -1)[v % 7], ("none", "group", "client", 0, 17, -1)[f % 6],
                                _pick(MSG_FAMILIES, f))
            elif kind == "txn" and self._on("txn"):
                self.txn_ladder(v, v // 2)
                # and a committed half whose COMMIT is sent twice (the row COMMITTED → COMMITTED)
                self.txn_send_half(v, v // 2, "COMMIT")
                if self._open_txns():
                    self.txn_end(len(self._open_txns()) - 1)
                if not self.profile.strict and self._committed():
                    self.txn_recommit(len(self._committed()) - 1)
            elif kind == "filter" and self._on("probe"):
                self.filter_prelude(tags, props, expr)
                # and a tag probe the message just sent does not match (a TAG filter's catch does not
                # depend on Hypothesis drawing ``probe_filtered``)
                self.probe_filtered(0, 0, "TagC" if tags != "TagC" else "TagA")
                self._gf_prelude(v, f, expr)
            elif kind == "edges":
                for action in ("pull_edge", "offset_reset", "end_tampered", "lock_edge", "send_edge"):
                    getattr(self, action)(v, f)
                if self.config.commitlog_file_size > 2 * MAX_BODY_BYTES:  # (a small file's room: only its own edge)
                    self.send_edge(v, f ^ 8)  # the same size limit, one past it where it was at it, and back
                if self.topics:  # and the send families the drawn rules may miss: a delayed send, an ASYNC
                    # send whose answer is lost and retried (a duplicate: not under strict), a WAIT=false send,
                    # an order's ordered sends
                    self.send_delayed(v, f, 1 + v % 3)
                    if not self.profile.strict:
                        self.send_unanswered(v, f, "TagA", "ASYNC")
                    self.send_plain(v, f, "TagA", ("edge",), False)
                    if self.config.flush == "SYNC":  # (the ASYNC examples keep their draws: apache/rocketmq#1869's
                        # replica needs them)
                        self.send_keyed(v, ("order-1", "order-2", "order-3", "user-42")[f % 4], 2 + f % 3)
            elif kind == "timer":  # 5.x timer messages (conform_timer.py); 4.9: the same user properties
                self.timer_ladder(v + f)
        if self._ladder_ok():  # a broadcasting group's two clients, each from its own offsets
            self.broadcast_prelude(v, f)
        if self._timeout_ok():  # a listener outliving consumeTimeout: the client's clean (conform_timeout.py)
            self.consume_timeout(v, f)
        if self._ladder_ok() and self._pop_ok():  # 5.x: a popping group (conform_pop.py)
            self.pop_prelude(v, f)
        if self._ladder_ok():  # last: every deadline kind the prelude left, at d − 1, d, d + 1
            self.deadline_tour(v + f)

    def _beat_ladder(self, n: int) -> None:
        """Every tenth beat (manual clock): a clean restart after a delayed copy was consumed, an
        orderly message suspended until the DLQ, a power loss over fired schedule copies, or files aged
        past fileReservedTime deleted, in turn, each when its families are on (else the usual consume)."""
        turn = n % 4
        if turn == 3 and self._retention_ok() and not self.crashes:
            # files aged past fileReservedTime, deleted at the next deleteWhen hour; before any crash, so that the
            # copies it may take (retention is not loss: LOST leaves them unjudged) are never a crash's losses
            self.retention("age", n)
        elif turn == 0 and self._on("restart") and self._ladder_ok() and self._can_reopen():
            self.restart_ladder(1 + n % 4, (0, 5000)[n % 2])
        elif turn == 1 and self._on("orderly") and self._ladder_ok() and self._orderly_mqs():
            self.orderly_ladder(n, n)
        elif turn == 2 and self._on("crash") and self._power_ok():
            self.power_ladder(1 + n % 3, 1 + n % 3)
        else:
            self.consume_next(n)

    def consume_next(self, n: int = 8) -> None:
        """The first ready queue's next batch (up to ``n``) is pulled and consumed successfully,
        or, with nothing to consume, a producer sends one message."""
        self._record("consume_next", n=n)
        ready = self._ready()
        if ready:
            group, mq = ready[0]
            self._pull_into_pq(group, mq, 8)
            if self.pqs[(group, mq)].has_temp_message():
                self._consume(group, mq, n, "SUCCESS", -1, 0, "none")
        else:
            msg = self._message(self.t0, "TagA")
            self._send(msg, len(self.program) % self.topics[self.t0])
        self._after()

    @_enabled(lambda self: self._ready())
    @rule(which=PICK)
    def send_back_lost(self, which: int) -> None:
        """The listener fails the first message; the CONSUMER_SEND_MSG_BACK request is lost, so
        the client keeps it and re-consumes it locally (its reconsume count only in memory)."""
        if not self._holds(lambda: self._ready()):
            return self._idle("send_back_lost")
        self._record("send_back_lost", which=which)
        group, mq = _pick(self._ready(), which)
        self._pull_into_pq(group, mq, 8)
        pq = self.pqs[(group, mq)]
        if not pq.has_temp_message():
            self._after()
            return
        m = pq.get(pq.offsets()[0])
        client = "consumer-" + group
        self._emit("consume", actor=client, group=group, client_id=client, topic=m.topic,
                   queue_id=m.queue_id, queue_offset=m.queue_offset, msg_key=m.uniq_key, msg_id=m.msg_id,
                   reconsume_times=m.reconsume_times, status="RECONSUME_LATER", detail={"listener": "LOST"})
        self.history.emit("send_back", self._now(), trace=False, actor=client, group=group, client_id=client,
                          topic=m.topic, queue_id=m.queue_id, queue_offset=m.queue_offset,
                          commitlog_offset=m.commitlog_offset, msg_key=m.uniq_key, msg_id=m.msg_id,
                          reconsume_times=m.reconsume_times + 1, detail={"code": "LOST"})
        self.local_failures[(group, m.commitlog_offset)] += 1
        self._sometimes("send_back_failed")
        self._after()

    # -- ladders ------------------------------------------------------------

    def _ladder_ok(self) -> bool:
        return type(self).wall is None and not self.windows

    def _fail_key_once(self, group: str, key: str, level: int, max_choice: str) -> str | None:
        """Pull ``group``'s queues until the copy of ``key`` is in a process queue, ack what is
        before it and fail it: the routing of its send-back (RETRY / DLQ), None if not found."""
        for mq in self._group_mqs(group):
            for _ in range(8):
                pq = self.pqs.get((group, mq))
                offsets = pq.offsets() if pq is not None else []
                index = next((i for i, o in enumerate(offsets) if pq.get(o).uniq_key == key), None)
                if index is not None:
                    before = len(self.history.events)
                    if index == 0:
                        self._consume(group, mq, 1, "RECONSUME_LATER", -1, level, max_choice)
                    else:
                        self._consume(group, mq, index + 1, "SUCCESS", index - 1, level, max_choice)
                    backs = [e for e in self.history.events[before:]
                             if e.event == "send_back" and e.msg_key == key]
                    return backs[-1].status if backs else None
                res = self._pull_into_pq(group, mq, 32)
                if res is None or res.status is not PullStatus.FOUND:
                    break
        return None

    @precondition(lambda self: type(self).wall is None)  # never on the wall clock: no draw wasted
    @_enabled(lambda self: self._ladder_ok())
    @rule(group=PICK, level=SEND_BACK_LEVELS, max_choice=MAX_CHOICES, family=FAMILY)
    def dlq_ladder(self, group: int, level: int, max_choice: str | int, family: str = "plain") -> None:
        """A fresh message of ``family`` (``edges._fresh``) fails in one group at every delivery
        until it lands in the DLQ."""
        if not self._holds(self._ladder_ok):
            return self._idle("dlq_ladder")
        self._record("dlq_ladder", group=group, level=level, max_choice=max_choice,
                     **({} if family == "plain" else {"family": family}))
        g = _pick(self._consumer_groups(), group)
        topics = sorted(self.history.subscriptions[g])
        key = self._fresh(family, topics[0], 0)
        if key is None:
            return
        for _ in range(LADDER_ROUNDS):
            routed = self._fail_key_once(g, key, level, max_choice)
            if routed != "RETRY":
                if routed == "DLQ":
                    self._sometimes("dlq_ladder:dead")
                break
            due = [d for t, d in self.expect_fire.items() if t[0] == f"%RETRY%{g}" and t[1] == key]
            if not due:
                break
            self._advance(max(0, min(due) - self._now()))
            self._after()

    def _fire_and_consume(self, level: int) -> None:
        """A delayed message of ``level`` is sent, fires, and what is ready is consumed."""
        self._send(self._message(self.t0, "TagB", delay=level), 0)
        self._after()
        self._advance(self.config.delay_ms(level))
        self._after()
        self.consume_next_batch()

    def _power_ok(self) -> bool:
        return self._ladder_ok() and self.can_crash and not self.profile.strict

    @precondition(lambda self: type(self).wall is None)  # never on the wall clock: no draw wasted
    @_enabled(lambda self: self._on("restart") and self._ladder_ok() and self._can_reopen())
    @rule(level=st.integers(1, 4), down_ms=st.sampled_from([0, 5000]))
    def restart_ladder(self, level: int, down_ms: int) -> None:
        """A delayed message fires and is consumed, then the broker restarts cleanly: its delay
        progress and the group's offset must come back as they were (no second delivery)."""
        if not self._holds(lambda: self._ladder_ok() and self._can_reopen()):
            return self._idle("restart_ladder")
        self._record("restart_ladder", level=level, down_ms=down_ms)
        self._fire_and_consume(level)
        self._close_reopen(down_ms)
        self.consume_next_batch()
        self._sometimes("restart_ladder")

    @precondition(lambda self: type(self).wall is None)  # never on the wall clock: no draw wasted
    @_enabled(lambda self: self._on("crash") and self._power_ok())
    @rule(level=st.integers(1, 3), n=st.integers(1, 3))
    def power_ladder(self, level: int, n: int) -> None:
        """Delayed messages fire from schedule copies (unflushed on an ASYNC broker), their
        progress (and the consumers' offsets) is persisted, the power fails (ASYNC: the copies are
        gone and the saved progress points past the truncated queue; SYNC: nothing acknowledged
        may go), then more delayed messages are sent at the reused positions: correctDelayOffset
        must bring the progress back so they are delivered."""
        if not self._holds(self._power_ok):
            return self._idle("power_ladder")
        self._record("power_ladder", level=level, n=n)
        if self.config.flush != "ASYNC":  # ASYNC: the flush service's passes (_between_flush_passes)
            self._call("flush()", lambda b: b.flush())
            self.last_flush_seq, self.last_flush_ts = len(self.history.events), self._now()
        delay = self.config.delay_ms(level)
        for round_ in range(2):
            if round_ == 0 and self.config.flush == "ASYNC":
                self._between_flush_passes(delay)
            for i in range(n):
                self._send(self._message(self.t0, "TagB", delay=level), i % self.topics[self.t0])
            self._after()
            self._advance(delay)
            self._after()
            self.consume_next_batch()
            if round_ == 0:
                # progress (and offsets) persisted: under ASYNC at the next persist, before the flush service's
                # next thorough pass takes the copies to disk
                self._advance(self._delay_persist_due() - self._now() if self.config.flush == "ASYNC"
                              else self.config.flush_delay_offset_interval_ms)
                self._after()
                if self.config.flush == "SYNC":  # a WAIT=false send: answered before the group commit
                    msg = attrs.evolve(self._message(self.t0, "TagB", ("unwaited",)), wait="false")
                    self._send(msg, 0)
                self._crash_and_recover("power")
                self._sometimes("power_ladder:crashed")

    def _delay_persist_due(self) -> int:
        return self._timer("delay_persist") + self.config.flush_delay_offset_interval_ms

    def _between_flush_passes(self, delay: int) -> None:
        """ASYNC: move to an instant from which the copies sent now fire (``delay``) and their progress is
        persisted before the flush service's next thorough pass (``model/flushing.py``), as the broker's
        two threads drift apart (apache/rocketmq#1869 needs the persist first): at a thorough pass, then,
        while the next persist comes too early or too late, at that persist and the next thorough pass.
        A message sent first, before a pass, is on disk from that thorough pass on."""
        wait = self.config.flush_commitlog_thorough_interval_ms + self.config.flush_interval_commitlog_ms
        # a message the next pass sees and the thorough pass takes to disk: it must survive the power loss
        self._send(self._message(self.t0, "TagA", ("flushed",)), 0)
        self._advance(0)
        self._after()
        for _ in range(4):
            self._advance(max(0, self.async_thorough_at + wait - self._now()))
            self._after()
            due = self._delay_persist_due()
            if self._now() + delay < due < self.async_thorough_at + wait:
                self._sometimes("power_ladder:between_flush_passes")
                return
            self._advance(max(0, due - self._now()))
            self._after()

    def consume_next_batch(self) -> None:
        """Consume what is ready in the first ready queue (as ``consume_next`` does, unrecorded)."""
        ready = self._ready()
        if ready:
            group, mq = ready[0]
            self._pull_into_pq(group, mq, 8)
            if self.pqs[(group, mq)].has_temp_message():
                self._consume(group, mq, 8, "SUCCESS", -1, 0, "none")
            self._after()

    @precondition(lambda self: type(self).wall is None)  # never on the wall clock: no draw wasted
    @_enabled(lambda self: self._ladder_ok())
    @rule(client=PICK, queue=PICK, family=FAMILY)
    def orderly_ladder(self, client: int, queue: int, family: str = "plain") -> None:
        """A fresh message of ``family`` (``edges._fresh``) on an orderly queue is suspended until
        its limit sends it to the DLQ (the messages before it are consumed). For the keyed and props
        families (manual clock; not under the strict profile, which allows no duplicate), a long
        listener follows (``_long_listener``, B12)."""
        if not self._holds(self._ladder_ok):
            return self._idle("orderly_ladder")
        self._record("orderly_ladder", client=client, queue=queue, **({} if family == "plain" else {"family": family}))
        c = _pick(CLIENTS, client)
        mq = _pick(self._orderly_mqs(), queue)
        if mq not in self._lock(c, [mq]):
            self._sometimes("orderly_ladder:denied")
            self._after()
            return
        key = self._fresh(family, self.t0, mq.queue_id)
        if family in ("delayed", "txn_checked"):  # time passed: the client's lockAll renews
            self._lock(c, [mq])
        for _ in range(LADDER_ROUNDS):
            if key is None or not self._client_holds(c, mq) or not self._begin(c, mq, 1):
                break
            mine = self.windows[(c, mq)].batch[0].uniq_key == key
            before = len(self.history.events)
            self._finish((c, mq), "SUSPEND" if mine else "SUCCESS")
            if mine and any(e.event == "orderly_end" and e.status == "DLQ" for e in self.history.events[before:]):
                self._sometimes("orderly_ladder:dead")
                break
        # the holder renews every lockInterval (20 s); a competitor asking 45 s after the last
        # renewal is refused: the broker's lock lives 60 s from the last grant
        other = _pick([x for x in CLIENTS if x != c], client // 3)
        holder = c
        if not self.windows:
            for _ in range(3):
                self._advance(20_000)
                self._lock(c, [mq])
            self._advance(45_000)  # past a 30 s lifetime, within the broker's 60 s
            self._lock(other, [mq])
            # the holder stops renewing: 60 s after its last grant the lock expires and the
            # competitor takes the queue over (RebalanceLockManager.isExpired)
            self._advance(self.config.broker_lock_max_live_ms - 45_000 + 1)
            if mq in self._lock(other, [mq]):
                holder, other = other, c
        # the queue is rebalanced away: another client unlocks what it does not hold, the holder
        # releases it, and the other's unlock then finds it free (RebalanceImpl.unlock)
        if not any(k[1] == mq for k in self.windows):
            self._lock(other, [mq])  # still held by the holder: denied
            self._unlock(other, [mq])
            self._unlock(holder, [mq])
            self._unlock(other, [mq])
        if family in ("keyed", "props") and type(self).wall is None and not self.profile.strict and not self.windows:
            self._long_listener(holder, other, mq)
        self._after()

    def _long_listener(self, c: str, other: str, mq: MessageQueue) -> None:
        """``c`` locks ``mq`` and starts a batch (a fresh message behind what is left) whose listener
        outlives the broker lock; ``other`` takes the queue and starts inside it (``_outlive``); both
        batches then end, the long one first. 4.9 permits it: what it costs is the duplicate."""
        if mq not in self._lock(c, [mq]) or self._fresh("plain", self.t0, mq.queue_id) is None \
                or not self._begin(c, mq, 1):
            return
        self._outlive((c, mq), other)
        for key in ((c, mq), (other, mq)):
            if key in self.windows:
                self._finish(key, "SUCCESS")

    @precondition(lambda self: type(self).wall is None)  # never on the wall clock: no draw wasted
    @_enabled(lambda self: self._ladder_ok())
    @rule(topic=PICK, queue=PICK)
    def txn_ladder(self, topic: int, queue: int) -> None:
        """A fresh half is answered UNKNOWN at every check until the check service discards it."""
        if not self._holds(self._ladder_ok):
            return self._idle("txn_ladder")
        self._record("txn_ladder", topic=topic, queue=queue)
        known = set(self.txns)
        self._send_half(topic, queue, "UNKNOWN")
        self._after()
        fresh = [t for k, t in self.txns.items() if k not in known]
        if not fresh:
            return
        txn = fresh[0]
        txn.ended = True  # its producer answers only checks, always UNKNOWN
        interval, timeout = self.config.transaction_check_interval_ms, self.config.transaction_timeout_ms
        for i in range(self.config.transaction_check_max + 3):
            if i == 1 and timeout < interval:  # a half half a timeout before the next round: too young
                self._advance(interval - timeout // 2)
                self._send_half(topic + 1, queue, "ROLLBACK")
                self._advance(timeout // 2)
            else:
                self._advance(interval)
            mine = [r for r in self.pending_checks if r.message.uniq_key == txn.key]
            for req in mine:
                self.pending_checks.remove(req)
                self._check_answer(req, "UNKNOWN")
            self._after()
            if txn.discarded:
                self._sometimes("txn_ladder:discarded")
                break
