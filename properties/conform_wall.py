"""Wall-clock mode of the conformance machine: a broker on its own clock.

Theory of operation
-------------------
``WallRules`` (a mixin of ``ConformanceBase``) synchronises the machine with a broker that runs
its services on its own clock (``properties/wallclock.py``): before every request the machine
sleeps out of every *quiet window* (a due time, a predicted check round, a lock expiry, each ±
the tolerance), waits for the broker's first check round when a half is due, renews the locks of
open orderly windows, and lets the model replay in time order what the broker did on its own
since the last sync (``_wall_tick``: fires at their due times, check rounds where the broker was
seen to run them). A round's checks are collected until none came for ``ROUND_QUIET_MS``;
what may fall on either side of a round's instant forks the model (``_model_round``). Before a
kill the machine waits until the broker surely persisted its offsets and delay progress
(``_wall_persisted``). The manual clock never enters this module.
"""

from __future__ import annotations

import time
from typing import Any

from rmqspec.model.message import MessageQueue
from rmqspec.model.queues import HALF_TOPIC, OP_TOPIC
from rmqspec.model.results import CheckRequest
from rmqspec.model.transactions import CID_RMQ_SYS_TRANS
from rmqspec.properties.conform_base import ROUND_QUIET_MS
from rmqspec.properties.wallclock import in_window, round_points, sleep_until, wall_ms


class WallRules:
    """Mixin: the wall-clock mode's synchronisation with a broker on its own clock."""

    # ------------------------------------------------------------------
    # wall-clock mode (properties/wallclock.py: quiet windows, the model replays background work)

    def _sync(self) -> int:
        """The machine's clock follows the wall (never backwards)."""
        self.clock.set(max(self.clock.now(), wall_ms()))
        return self.clock.now()

    def _open_txn_pending(self) -> bool:
        return any(not t.decided and not t.discarded for t in self.txns.values())

    def _rounds_between(self, start: int, end: int) -> list[int]:
        """Predicted check rounds in ``(start, end]`` from the last one seen."""
        if self.check_phase is None or (self.txn_settled and not self._open_txn_pending()):
            return []
        interval = self.config.transaction_check_interval_ms
        first = self.check_phase + max(1, (start - self.check_phase) // interval + 1) * interval
        return list(range(first, end + 1, interval))

    def _quiet_deadlines(self, lock_op: bool) -> list[int]:
        now = self._now()
        out = [d for d in self.expect_fire.values()]
        wall = type(self).wall
        horizon = now + wall.guard_ms + wall.tolerance_ms
        out += self._round_points(now - wall.tolerance_ms - wall.guard_ms, horizon)
        if lock_op:
            out += [ts + self.config.broker_lock_max_live_ms for _, ts in self.broker_grants.values()]
        return out

    def _round_points(self, start: int, end: int) -> list[int]:
        """Deadlines for the predicted rounds in ``(start, end]``: a round's broker-side start may
        precede its checks' arrival (the phase) by up to the check lag, so each round's quiet window
        reaches that far earlier."""
        wall = type(self).wall
        lag = type(self).check_lag[0]
        late = self.config.behaviour.check_sleep_ms
        return round_points(self._rounds_between(start - late, end + lag), lag, wall.guard_ms + wall.tolerance_ms,
                            late)

    def _learn_check_lag(self, timed: list[tuple[int, CheckRequest]]) -> None:
        """A check of a copy some round re-put (TRANSACTION_CHECK_TIMES ≥ 2) carries that copy's store
        time (4.9.8 sends the half as read): when that round really ran. The model placed it at its
        checks' arrival; the difference is the lag the quiet windows must allow for."""
        limit = self.config.transaction_check_interval_ms // 2
        for _, req in timed:
            times = req.message.properties.get("TRANSACTION_CHECK_TIMES", "")
            if not times.isdigit() or int(times) < 2:
                continue
            reput = req.message.store_ts
            lags = [r - reput for r in self.seen_rounds if 0 <= r - reput <= limit]
            if lags and min(lags) > type(self).check_lag[0]:
                type(self).check_lag[0] = min(lags)
                self._sometimes("wall_check_lag_learnt")

    def _wall_before(self, rule_name: str, lock_op: bool = False, horizon_ms: int = 0) -> None:
        """Before a request: out of every quiet window, the model caught up with the broker.
        ``horizon_ms``: the request has effects the broker makes that long after it starts (5.1.0+: an
        END's op message), which must not cross a fire either."""
        self._wall_quiet(lock_op, horizon_ms)
        self._await_first_round()
        self._renew_window_locks()
        self._wall_tick()

    def _wall_catch_up(self) -> None:
        """After a request, before the observer looks: a request may take long (a dispatch barrier, an
        op batch awaited) and end inside a quiet window, or past deadlines the model has not replayed.
        Out of the window first, then the model replays what the broker did meanwhile, so a reveal
        compares the broker with a model at the same moment."""
        self._wall_quiet(False)
        self._wall_tick()

    def _wall_quiet(self, lock_op: bool, horizon_ms: int = 0) -> bool:
        """Sleep out of every quiet window (a fire's window widened by ``horizon_ms`` before it);
        True if it slept."""
        wall = type(self).wall
        slept = False
        for _ in range(64):
            now = self._sync()
            fires = set(self.expect_fire.values()) if horizon_ms else set()
            inside = [d for d in self._quiet_deadlines(lock_op)
                      if in_window(now, d, wall.guard_ms + (horizon_ms if d in fires else 0), wall.tolerance_ms)]
            if not inside:
                break
            self._sometimes("wall_quiet_wait")
            sleep_until(max(inside) + wall.tolerance_ms + 1)
            slept = True
        return slept

    def _op_landed(self) -> None:
        """The broker wrote the op message the model just wrote last (an END's, or 5.1.0+'s batch): the
        session view moves later records by its body's extra digits on the broker (``SessionView.op_landed``).
        Each op once: a batch pass or an END that wrote none leaves an op counted before as the model's
        last record, and counting it again would move every later record by its extra digits twice."""
        last = self.ls.model.store.records[-1] if self.ls.model.store.records else None
        if last is not None and last.topic == OP_TOPIC and last is not self.op_counted:
            self.op_counted = last
            self.ls.candidate.op_landed(last.commitlog_offset, last.body)

    def changed_at(self, ms: int) -> None:
        """A consumer offset committed, a delayed copy fired or a check round moved the check
        service's progress (CID_RMQ_SYS_TRANS offsets) at ``ms``: state the broker persists only every
        few seconds. Kept across examples: they share the broker."""
        type(self).last_change[0] = max(type(self).last_change[0], ms)

    def _wall_persisted(self) -> None:
        """Before a kill: wait until the broker has surely persisted its consumer offsets (every
        flushConsumerOffsetInterval), delay progress (flushDelayOffsetInterval) and timer checkpoint
        (timerFlushIntervalMs), as the model has,
        so what survives the kill is one state, not a race between the two clocks."""
        wall = type(self).wall
        quiet = max(self.config.flush_consumer_offset_interval_ms, self.config.flush_delay_offset_interval_ms,
                    self.config.timer_flush_interval_ms)
        for _ in range(16):
            pending = [d for d in self.expect_fire.values()]
            target = max([*pending, type(self).last_change[0]]) + quiet + wall.tolerance_ms
            if target <= self._sync():
                return
            self._sometimes("wall_wait_persisted")
            self._wall_sleep(target)
            self._after()

    def _await_first_round(self) -> None:
        """A half is due for its first check but the broker's round phase is unknown: wait for it."""
        if self.check_phase is not None:
            return
        now = self._now()
        due = [h.ts + self.config.transaction_timeout_ms for h in self.history.events
               if h.event == "txn_half" and (t := self.txns.get(h.msg_key)) is not None
               and not t.decided and not t.discarded]
        if not due or min(due) > now:
            return
        wall = type(self).wall
        give_up = min(due) + self.config.transaction_check_interval_ms + wall.tolerance_ms
        while not self.buffered_checks and wall_ms() < give_up:
            time.sleep(0.05)
            self.buffered_checks += self.ls.candidate.tick_timed(wall_ms())
        self._sometimes("wall_first_round_seen" if self.buffered_checks else "wall_first_round_missing")
        self._sync()

    def _renew_window_locks(self) -> None:
        """An open orderly batch renews its broker lock before the broker could free it (as the
        Java client's lockAll does every lockInterval)."""
        wall = type(self).wall
        margin = wall.tolerance_ms + 4 * wall.guard_ms
        for (client, mq), w in sorted(self.windows.items(), key=lambda kv: (kv[0][0], kv[0][1].queue_id)):
            if self._now() - w.lock_ts > self.config.broker_lock_max_live_ms - margin - 2000 \
                    and mq in self._lock(client, [mq]):
                w.lock_ts = self.client_lock[(client, mq)]
                self._sometimes("wall_window_lock_renewed")

    def _wall_sleep(self, target: int) -> None:
        wall = type(self).wall
        for d in sorted(self._quiet_deadlines(False) + self._round_points(self._now(), target)):
            if in_window(target, d, wall.guard_ms, wall.tolerance_ms):
                target = d + wall.tolerance_ms + 1
        sleep_until(target)
        self._sync()
        self._wall_tick()

    def _wall_tick(self) -> None:
        """The model replays, in time order, what the broker did on its own since the last tick:
        copies fired at their due times, check rounds where the broker was seen to run them."""
        now = self._sync()
        timed = self._complete_rounds(self.buffered_checks + self.ls.candidate.tick_timed(now))
        self.buffered_checks = []
        now = self._sync()
        wall = type(self).wall
        fires = sorted({d for d in self.expect_fire.values() if self.model_time < d <= now})
        # the checks one round sends arrive close together (4.9.8 hands each to a thread pool, so
        # on a busy machine one may come hundreds of ms after the others); rounds are at least
        # transactionCheckInterval apart (the service waits that long after each): arrivals within
        # half an interval of a round's first belong to it
        together = max(wall.tolerance_ms, self.config.transaction_check_interval_ms // 2)
        seen: dict[int, list[CheckRequest]] = {}
        for at, req in sorted(timed, key=lambda p: p[0]):
            start = next((r for r in seen if at - r <= together), None)
            seen.setdefault(at if start is None else start, []).append(req)
        seen = {max(r, self.model_time + 1): reqs for r, reqs in seen.items()}
        if seen:
            self.check_phase = max(seen)
            self.seen_rounds += sorted(seen)
        self._learn_check_lag(timed)
        # a predicted round nobody saw is modelled once its checks could no longer come (5.1.0+: up to
        # SLEEP_WHILE_NO_OP late); a seen one within the tolerance (and that lateness) is that round
        late = self.config.behaviour.check_sleep_ms
        rounds = [r for r in self._rounds_between(self.model_time, now - wall.tolerance_ms - late)
                  if all(not -wall.tolerance_ms - late <= s - r <= wall.tolerance_ms + late for s in seen)]
        writes, self.op_writes = [w for w in self.op_writes if w <= now], [w for w in self.op_writes if w > now]
        # a fire due shortly before a round that sent checks may be written after the round's re-puts
        # (the wheel or the schedule service writes up to the tolerance late, the round re-puts up to the
        # check lag before its checks arrive): such a fire is the round's to place, either side of it
        # (_model_round). A round that sent none re-put nothing for a fire to race with.
        lag = type(self).check_lag[0]
        near: dict[int, list[int]] = {}
        for r in sorted(seen):
            near[r] = [d for d in fires if r - lag - wall.tolerance_ms <= d <= r + wall.tolerance_ms
                       and not any(d in ds for ds in near.values())]
        placed = {d for ds in near.values() for d in ds}
        steps = sorted([(d, 0) for d in fires if d not in placed] + [(r, 1) for r in [*rounds, *seen]]
                       + [(w, 2) for w in writes])
        view = self.ls.candidate
        for at, kind in steps:
            self.clock.set(max(at, self.model_time))
            if kind == 0:
                self.ls.on_forks(lambda b: b.tick())
            elif kind == 2:  # 5.1.0+: the broker was seen to write its pending op messages
                self.ls.on_forks(lambda b: b.flush_ops())
                if self.ls.enabled:
                    self._op_landed()
            else:  # checks are judged in the example's view as it stands now (SessionView.in_view)
                self._model_round(at, [view.in_view(r) for r in seen.get(at, [])], near.get(at, []))
                self.txn_settled = not seen.get(at)
        self.clock.set(now)
        self.ls.on_forks(lambda b: b.tick())
        self.model_time = now
        self._checks_received([view.in_view(req) for _, req in sorted(timed, key=lambda p: p[0])])

    def _complete_rounds(self, timed: list[tuple[int, CheckRequest]]) -> list[tuple[int, CheckRequest]]:
        """A round's checks leave the broker one by one (a thread pool): once one has arrived,
        keep draining until none has come for ``ROUND_QUIET_MS`` (at most half an interval after
        the first), so a round is never judged on part of its checks."""
        if not timed:
            return timed
        first = min(at for at, _ in timed)
        limit = first + max(type(self).wall.tolerance_ms, self.config.transaction_check_interval_ms // 2)
        last_new = wall_ms()
        while wall_ms() - last_new < ROUND_QUIET_MS and wall_ms() < limit:
            time.sleep(0.05)
            more = self.ls.candidate.tick_timed(wall_ms())
            if more:
                timed = timed + more
                last_new = wall_ms()
                self._sometimes("wall_round_straggler")
        return timed

    def _model_round(self, at: int, observed: list[CheckRequest], fires: list[int] | None = None) -> None:
        """One check round of every fork at ``at``, judged against what the broker sent in it.
        Two things may fall either side, so the forks split and the broker's observations prune
        them: a half first due within the tolerance of ``at`` (5.1.0+: or of the 1 s the scan may
        sleep; checked in this round or the next; with several such halves, a fork per cut:
        none, the first k in store order, all);
        the copies this round re-puts with TRANSACTION_CHECK_TIMES = transactionCheckMax (each
        discarded in this round if the reput service dispatched it before the scan got there, else
        in the next; the scan stops at the first it does not see, so the first k of them, for every
        k: ``ModelBroker.check_round(reput_visible=...)``);
        the copies due at ``fires`` (shortly before the round, see ``_wall_tick``): the first k of
        them (in due order) written before the round's re-puts, the rest after, for every k."""
        wall = type(self).wall
        timeout = self.config.transaction_timeout_ms
        late = self.config.behaviour.check_sleep_ms  # 5.1.0+: the scan may go on after a 1 s sleep
        # each borderline half's first due time cuts the round in two: the broker's round may fall
        # before none, some (in store order) or all of them
        dues = sorted({h.ts + timeout for h in self.history.events
                       if h.event == "txn_half" and h.msg_key in self.txns
                       and -wall.tolerance_ms <= h.ts + timeout - at <= wall.tolerance_ms + late})
        at_max = str(self.config.transaction_check_max)
        lagging = sum(r.message.properties.get("TRANSACTION_CHECK_TIMES") == at_max for r in observed)
        whens = sorted({at - wall.tolerance_ms, *dues, at + wall.tolerance_ms + late}) if dues else [at]
        fires = sorted(fires or [])
        choices = [(when, visible, k) for when in whens for visible in [True, *range(lagging)]
                   for k in range(len(fires) + 1)]
        if len(choices) > 1 and self.ls.enabled:
            self.ls.split(lambda f: choices, lambda f, choice: setattr(f, "_wall_round", choice))
            self._sometimes("wall_round_forked")
        clock = self.clock
        moved: list[int] = []  # when a fork's round moved the check service's progress

        def model_round(b: Any) -> list[CheckRequest]:
            when, visible, k = getattr(b, "_wall_round", (at, True, len(fires)))
            if hasattr(b, "_wall_round"):
                del b._wall_round
            saved = clock.now()
            try:
                for due in fires[:k]:
                    clock.set(due)
                    b.tick()
                clock.set(when)
                before = _txn_progress(b)
                checks = b.check_round(reput_visible=visible)
                if _txn_progress(b) != before:
                    moved.append(when)
                for due in fires[k:]:  # written after the round's re-puts: fired at their due time all the same
                    clock.set(due)
                    b.tick()
                return checks
            finally:
                clock.set(saved)

        # one round's checks leave in the scan's order but from a thread pool, so they may arrive in
        # another: judged in the scan's order (the re-put copies' half-queue offsets)
        observed = sorted(observed, key=lambda r: r.tran_state_table_offset)
        out = self._call(f"check round at {at}", model_round, candidate_fn=lambda b: observed)
        if out.error is None and observed:
            self._sometimes("wall_round_matched")
        if moved:
            # the round moved CID_RMQ_SYS_TRANS's offsets: consumer offsets the broker persists only
            # every flushConsumerOffsetInterval, so a kill waits for them too (docs/fidelity.md O1)
            self.changed_at(max(moved))
            self._sometimes("wall_round_moved_progress")


def _txn_progress(fork: Any) -> tuple[int, int]:
    """The check service's progress (TransactionalMessageBridge.fetchConsumeOffset): group
    CID_RMQ_SYS_TRANS's offsets on the half queue and the op queue, kept with the consumer offsets."""
    return (fork.query_offset(CID_RMQ_SYS_TRANS, MessageQueue(HALF_TOPIC, 0)),
            fork.query_offset(CID_RMQ_SYS_TRANS, MessageQueue(OP_TOPIC, 0)))
