"""The observer, the invariants, the drain and the teardown of the conformance machine.

Theory of operation
-------------------
``ObserverRules`` (a mixin of ``ConformanceBase``):

- **reveals** — after every step (``_after``) the private observer group pulls every known queue
  from its frontier to its end (schedule queues first, so a scheduled copy is seen before
  anything fired from it: the levels the machine's sends and send-backs asked for, and every
  level once a copy fires that nobody asked for); each copy is a ``store`` event, a copy that came through the schedule
  topic a ``schedule_fire`` matched to the copy the machine expected (``_expect_fire`` /
  ``_fired_due``: one entry per copy, the earliest due first), a copy in
  TRANS_CHECK_MAX_TIME_TOPIC a ``txn_discard``; on a 5.x profile ``rmq_sys_wheel_timer`` comes
  right after the schedule queues, and a copy fired from it is a ``timer_fire``
  (``conform_timer.py``). On the wall clock a fired copy is judged for lateness against the
  tolerance;
- **invariants** — ``check_always`` (Hypothesis's ``@invariant``) evaluates the ``always``
  invariants on the ghost history after every step; a violation fails the example with its
  program (``strict`` adds the observations);
- **the drain** — quiesce: finish open windows, tick, answer pending checks, end the halves
  whose producer would, consume every group's queues to their ends, jump to the next due time,
  until nothing is pending and (manual clock) a check round ran after the last COMMIT/ROLLBACK
  (its op is an effect no answer shows: ``edges.py``); at most ``DRAIN_ROUNDS`` rounds; then the
  ``eventually`` invariants. ``drain_now`` is the rule,
  the teardown drains too, accounts coverage and observations, and closes the candidate.
"""

from __future__ import annotations

import shutil
from collections import Counter

from hypothesis.stateful import invariant, precondition, rule

from rmqspec.model.message import MessageQueue, StoredMessage
from rmqspec.model.results import PullResult, PullStatus, ResponseCode, TxnAction
from rmqspec.model.timer import TIMER_TOPIC
from rmqspec.properties import invariants as inv
from rmqspec.properties.conform_base import CLIENTS, CONSUME_TIMEOUT_ROUNDS, DRAIN_ROUNDS, _enabled
from rmqspec.properties.history import DISCARD_TOPIC, SCHEDULE_TOPIC, group_of


class ObserverRules:
    """Mixin: the observer's reveals, the invariants, the drain and the teardown."""

    # ------------------------------------------------------------------
    # revealing what the broker stored (the observer)

    def _expect_fire(self, topic: str, key: str, r: int, origin: str | None, due: int) -> None:
        """A delayed or retry copy will appear in ``topic``; one entry per copy, never merged
        with another copy sharing the key (a duplicate commit, a re-consumption after a crash)."""
        self.expect_seq += 1
        self.expect_fire[(topic, key, r, origin, self.expect_seq)] = due

    def _fired_due(self, m: StoredMessage) -> int | None:
        """The due time of the expected copy ``m`` is: the earliest-due entry of its copy
        (topic, key, reconsume_times, origin) — the first of them cannot come before it. A copy
        of an identity that already fired before a crash, appearing before any entry is due, is
        that copy fired again (at-least-once after a crash), not the next one: None."""
        origin = m.origin_message_id if m.topic.startswith("%RETRY%") else None
        ident = (m.topic, m.uniq_key, m.reconsume_times, origin)
        mine = [t for t in self.expect_fire if t[:4] == ident]
        if not mine:
            return None
        first = min(mine, key=lambda t: (self.expect_fire[t], t[4]))
        if m.store_ts < self.expect_fire[first] and self.fired_in_epoch.get(ident, self.crashes) < self.crashes:
            return None
        self.fired_in_epoch[ident] = self.crashes
        return self.expect_fire.pop(first)

    def _reveal_mqs(self) -> list[MessageQueue]:
        """Schedule queues first, then the timer wheel's queue: a scheduled or timer copy is seen
        before anything fired from it."""
        mqs = [MessageQueue(SCHEDULE_TOPIC, level - 1) for level in sorted(self.sched_levels)
               if SCHEDULE_TOPIC not in self.unrevealable]
        mqs += [mq for mq in self.frontier if mq.topic == TIMER_TOPIC and mq.topic not in self.unrevealable]
        mqs += [mq for mq in self.frontier if mq.topic not in self.unrevealable
                and mq.topic not in (SCHEDULE_TOPIC, TIMER_TOPIC)]
        return mqs

    def _reveal_schedule_levels(self) -> None:
        """Reveal every schedule queue, not only the levels the machine's sends and send-backs
        asked for: a copy that fired unexpected was scheduled at a level nobody asked for (a broker
        that routed a send-back wrongly); its schedule copy is an observation like any other."""
        if SCHEDULE_TOPIC in self.unrevealable:
            return
        for level in range(1, self.config.max_delay_level + 1):
            if level not in self.sched_levels:
                mq = MessageQueue(SCHEDULE_TOPIC, level - 1)
                self._reveal(mq)
                if self.frontier.get(mq, 0) > 0:
                    self.sched_levels.add(level)

    def _after(self, after_crash: bool = False) -> None:
        if type(self).wall is not None and self.ls is not None and not after_crash:
            self._wall_catch_up()  # the step may have ended inside a quiet window, or past a deadline
        for mq in self._reveal_mqs():
            self._reveal(mq, after_crash)
        self.judge_fires()
        self.judge_answers(after_crash)

    def _reveal(self, mq: MessageQueue, after_crash: bool = False) -> None:
        """Pull ``mq`` with the observer from its frontier to its end."""
        if mq.topic in self.unrevealable:
            return
        self.frontier.setdefault(mq, 0)
        for _ in range(64):
            start = self.frontier[mq]
            out = self._call(f"pull({self.obs!r}, {mq.topic}/{mq.queue_id}, offset={start}) [reveal]",
                             lambda b, mq=mq, start=start: b.pull(self.obs, mq, start, 32, "*"))
            if out.error is not None:
                if out.error[1] != ResponseCode.TOPIC_NOT_EXIST.name and \
                        mq.topic in (SCHEDULE_TOPIC, DISCARD_TOPIC, TIMER_TOPIC):
                    self.unrevealable.add(mq.topic)  # the broker does not expose it
                break
            res: PullResult = out.value
            if after_crash and res.max_offset < start:
                self.frontier[mq] = res.max_offset  # power loss truncated the tail
                continue
            self._note_queue(mq, start, res, "*")  # retention (conform_retention.py)
            if res.next_begin_offset <= self.__dict__.get("queue_low", {}).get(mq, 0) \
                    and res.next_begin_offset > start and res.status is not PullStatus.FOUND:
                self.frontier[mq] = res.next_begin_offset  # past copies retention took (_note_queue)
                continue
            if res.status is not PullStatus.FOUND:
                break
            for m in res.messages:
                self._revealed(m)
            self.frontier[mq] = max(start + 1, res.next_begin_offset)
            if self.frontier[mq] >= res.max_offset:  # a pull may stop short of 32 (its byte budget)
                break

    def _revealed(self, m: StoredMessage) -> None:
        deliver_ts = None
        if m.topic == SCHEDULE_TOPIC:
            deliver_ts = m.store_ts + self.config.delay_ms(m.queue_id + 1)
            self.schedule_copy_seen(m, deliver_ts)
        elif m.topic == TIMER_TOPIC:  # 5.x: the wheel's copy, due at TIMER_OUT_MS + precision
            deliver_ts = self._timer_store_due(m)
            self._timer_copy_seen(m)
        self._emit("store", actor="broker", group=group_of(m.topic), topic=m.topic,
                   queue_id=m.queue_id, queue_offset=m.queue_offset,
                   commitlog_offset=m.commitlog_offset, msg_key=m.uniq_key, msg_id=m.msg_id,
                   reconsume_times=m.reconsume_times,
                   delay_level=m.queue_id + 1 if m.topic == SCHEDULE_TOPIC else None,
                   deliver_ts=deliver_ts, detail={"store_ts": m.store_ts, "origin": m.origin_message_id})
        if m.topic not in (SCHEDULE_TOPIC, TIMER_TOPIC, DISCARD_TOPIC):
            self.fire_seen(m)  # whatever the copy's way here: a schedule copy of its key may be behind it
        fire = self._fired_due(m)
        if self._is_timer_fire(m):
            self._timer_revealed(m, fire)
        elif fire is not None:
            self.changed_at(m.store_ts)
            self._sometimes("retry_fired" if m.topic.startswith("%RETRY%") else "delay_fired")
            if type(self).wall is not None:
                self._judge_lateness("retry" if m.topic.startswith("%RETRY%") else "delay", fire, m)
        scheduled = m.delay_level > 0 and not m.topic.startswith("%DLQ%") \
            and m.topic not in (SCHEDULE_TOPIC, DISCARD_TOPIC, TIMER_TOPIC)
        if not self._is_timer_fire(m) and (fire is not None or scheduled):
            # every copy that came through the schedule topic (it keeps DELAY): one fire each
            if fire is None:
                self._sometimes("schedule_refired")
                self._reveal_schedule_levels()  # a copy no send asked for: where was it scheduled?
            self._emit("schedule_fire", actor="broker", topic=m.topic, queue_id=m.queue_id,
                       queue_offset=m.queue_offset, msg_key=m.uniq_key, msg_id=m.msg_id,
                       reconsume_times=m.reconsume_times, deliver_ts=fire)
        self.judge_copy(m)
        if m.topic.startswith("%DLQ%"):
            self._sometimes("dlq_landed")
        if m.topic == DISCARD_TOPIC:
            txn = self.txns.get(m.uniq_key)
            if txn is not None and not txn.discarded:
                txn.discarded = True
                self._sometimes("txn_discard")
                self._emit("txn_discard", actor="broker", group=self.pg, topic=txn.topic,
                           msg_key=m.uniq_key, txn_id=m.uniq_key,
                           commitlog_offset=m.commitlog_offset)

    def _judge_lateness(self, kind: str, due: int, m: StoredMessage) -> None:
        """Wall clock: a fired copy is stored never before its due time (the broker's due time is
        no earlier than the machine's, which read the clock before the request) and within the
        tolerance after it."""
        late = m.store_ts - due
        tolerance = type(self).wall.tolerance_ms
        if late < 0:
            code = {"retry": "RETRY_EARLY", "timer": "TIMER_EARLY"}.get(kind, "DELAY_EARLY")
            self._fail(f"invariant {inv.name_of(code)} violated: {code} {kind} copy {m.msg_id} of {m.uniq_key} "
                       f"stored at {m.store_ts}, {-late} ms before it was due ({due})")
        if late > tolerance:
            self._fail(f"wall-clock window violated: {kind} copy {m.msg_id} of {m.uniq_key} stored {late} ms "
                       f"after it was due ({due}); tolerance {tolerance} ms")
        type(self).lateness.note(kind, late)

    # ------------------------------------------------------------------
    # invariants

    def _judge(self, kinds: tuple[str, ...]) -> None:
        named = inv.evaluate_named(self.history, kinds)
        if self.profile.strict:
            named += inv.evaluate_named(self.history, ("observation",))
        violations = [v for _, v in named]
        if violations:
            first = violations[0]
            name = named[0][0].name  # the invariant that found it (two may report one code)
            rest = Counter(v.code for v in violations[1:])
            listed = ", ".join(f"{code}×{n}" if n > 1 else str(code) for code, n in sorted(rest.items()))
            more = f" (+{len(violations) - 1} more: {listed})" if rest else ""
            self._fail(f"invariant {name} violated: {first.render()}{more}")

    @invariant()
    def check_always(self) -> None:
        """The "always" invariants on the history so far; a step that left the history as it was
        (no event, no parameter, subscription or orderly group added) is not judged again: the
        invariants are functions of the history alone, and events are frozen and only appended."""
        if self.failed or self.ls is None:
            return
        h = self.history
        key = (len(h.events), h.params, tuple(sorted((g, tuple(sorted(t))) for g, t in h.subscriptions.items())),
               tuple(sorted(h.orderly_groups)))
        if key == getattr(self, "_judged_at", None):
            return
        self._judge(("always",))
        self._judged_at = key

    def _quiescent(self) -> bool:
        if self.expect_fire or self.pending_checks or self.windows:
            return False
        if any(not t.decided and not t.discarded for t in self.txns.values()):
            return False
        if type(self).wall is not None and not self.txn_settled:
            return False  # a re-put copy may still be checked (see _wall_tick): the broker is not done
        if type(self).wall is None and self.end_due > self._timer("round"):
            return False  # the END's op has no answer of its own: a check round after it must show it
        return not self._pq_keys()

    def _consume_all(self) -> bool:
        """Every group (and every broadcasting client) pulls and consumes every queue to its end successfully."""
        moved = False
        for group in self._consumer_groups():
            for mq in self._group_mqs(group):
                for _ in range(CONSUME_TIMEOUT_ROUNDS):
                    before = self.next_pull.get((group, mq))
                    res = self._pull_into_pq(group, mq, 32)
                    pq = self.pqs[(group, mq)]
                    if pq.has_temp_message():
                        moved = True
                        self._consume(group, mq, len(pq.offsets()), "SUCCESS", -1, 0, "none")
                    if res is not None and res.status is PullStatus.OFFSET_ILLEGAL \
                            and self.next_pull[(group, mq)] != before:
                        moved = True  # corrected (retention took the start): pull again from the answer
                        continue
                    if res is None or res.status is not PullStatus.FOUND:
                        break
        for mq in self._orderly_mqs():
            for _ in range(CONSUME_TIMEOUT_ROUNDS):
                holder = next((c for c in CLIENTS if self._client_holds(c, mq)), None)
                if holder is None:
                    for c in CLIENTS:
                        if mq in self._lock(c, [mq]):
                            holder = c
                            break
                if holder is None or not self._begin(holder, mq, 32):
                    break
                moved = True
                self._finish((holder, mq), "SUCCESS")
        return self._broadcast_all() or moved

    def drain(self) -> None:
        """Quiesce: answer checks, consume everything, advance to the next due time, repeat. With a
        TransientStorePool (model/committing.py) a round that finds nothing to do is repeated once, a second
        or more later: what the last writes left in the write buffers is committed by then."""
        for key in sorted(self.windows, key=lambda k: (k[0], k[1].queue_id)):
            self._finish(key, "SUCCESS")
        pooled, calm = self._pooled(), False
        for _ in range(DRAIN_ROUNDS):
            self._tick()
            self._after()
            while self.pending_checks:
                self._check_answer(self.pending_checks.pop(0), None)
            for txn in self.txns.values():
                if not txn.ended and not txn.discarded and txn.decided is None \
                        and txn.plan in ("COMMIT", "ROLLBACK"):
                    txn.ended = True
                    if not txn.maybe_lost:  # else the check service resolves it (see Txn)
                        self._end(txn, TxnAction(txn.plan), txn.commitlog_offset, txn.half_offset, False)
            self._after()
            moved = self._consume_all()
            self._after()
            if self._quiescent() and not moved:
                if calm or not pooled:
                    break
                calm = True
            else:
                calm = False
            due = [d for d in self.expect_fire.values() if d > self._now()]
            step = self.config.transaction_check_interval_ms
            target = min(due) if due else self._now() + step
            if type(self).wall is not None:
                self._wall_sleep(max(target + type(self).wall.tolerance_ms, self._now() + 200))
            else:
                self.clock.set(max(target, self._now() + 1000))
        self._emit("drain", actor="machine")
        self._sometimes("drained")

    @precondition(lambda self: self._on("drain"))
    @_enabled(lambda self: len(self.program) > 8 and not self.history.drained())
    @rule()
    def drain_now(self) -> None:
        if not self._holds(lambda: len(self.program) > 8 and not self.history.drained()):
            if type(self).wall is not None:
                # always drawn on the wall clock, and Hypothesis draws a rule without arguments far
                # more often than the others: where it cannot drain it runs the workload's beat
                self._sometimes("wall_drain_beat")
                return self.beat(1 + len(self.program) % 8)
            return self._idle('drain_now')
        self._record("drain_now")
        self.drain()
        self._judge(("always", "eventually"))

    def teardown(self) -> None:
        try:
            # an example whose init did not finish has nothing to drain: its own failure is the finding
            if not self.failed and self.drain_on_teardown and self.ls is not None and self.started:
                try:
                    self.drain()
                    self._judge(("always", "eventually"))
                    self._final_store_probe()
                finally:
                    self._account()
            else:
                self._account()
            for name, found in ((i.name, len(i.check(self.history)))
                                for i in inv.of_kind("observation")):
                self.observations[name] += found
        finally:
            try:
                if self.ls is not None:
                    self.ls.candidate.close()
            except Exception:
                pass
            if self.workdir:
                shutil.rmtree(self.workdir, ignore_errors=True)
