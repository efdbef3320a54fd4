"""Time, flushes, crashes and recovery in the conformance machine.

Theory of operation
-------------------
``TimeRules`` (a mixin of ``ConformanceBase``) moves the manual clock and runs the broker's
background services: ``_advance(ms)`` sets the clock (clamped so an open orderly window never
outlives its broker lock) and ticks; ``_tick`` collects the checks a round sent and notes the
round for the machine's mirror of the check service's timer (``edges.py``). The ``advance`` rule
draws a small step (≤ 10 s), a large one (1 min – 6 h), a jump to a deadline ± 1 ms / 1 s
(``advance_to_deadline``: the deadline table of ``edges.py``, kind first, with its probe), or a
half on the next check round's edge. ``flush`` forces an ASYNC broker's commitlog to disk.
``crash_recover`` kills the broker or cuts its power (``Capability.CRASH``) and recovers it; the
keys written since the last flush are *at risk* on an ASYNC power loss (the invariants allow
losing them); while it is down (on the manual clock) every request of the protocol's must be refused
(``_probe_down``); the clients restart with the broker; in lockstep the model forks over every
recovery the broker may legitimately choose (``recovery_choices``).

On the wall clock ``_advance`` sleeps, bounded and out of the quiet windows (``conform_wall.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from rmqspec.model.crash import CRASH_KINDS, TORN
from rmqspec.model.message import MessageQueue
from rmqspec.model.protocol import Capability
from rmqspec.model.results import CheckRequest, TxnAction
from rmqspec.properties.conform_base import CLIENTS, LARGE_MS, PICK, SMALL_MS, _enabled, _pick


class TimeRules:
    """Mixin: the clock, flushes, crashes and recovery."""

    # ------------------------------------------------------------------
    # time

    def _tick(self) -> None:
        if type(self).wall is not None:
            self._wall_tick()
            return
        if self._now() >= self.stall_until:  # SYNC: the tick's group commit (model/crash.py), on a working disk
            self.last_commit_seq = len(self.history.events)
        self._async_flush_pass()
        out = self._call(f"tick() at {self._now()}", lambda b: b.tick())
        persist_at, round_at = self._timer("offsets_persist"), self._timer("round")
        self._note_tick()
        if out.error is None:
            self.ticked(self._now())
            self._note_commitlog()  # retention (conform_retention.py)
            if self._timer("offsets_persist") != persist_at:  # the broker persisted its offsets
                self.offsets_persisted()
            self.judge_check_round(self._timer("round") != round_at, out.value or [])
        else:
            self.rounds_mirrored = False  # the mirror advanced; the broker may not have
        self._checks_received(out.value or [] if out.error is None else [])

    def _power_at_risk(self) -> list[str]:
        """The keys a power loss now may take: under SYNC what was answered before the group commit
        since its last pass; under ASYNC what was written since the last flush."""
        if self.config.flush == "SYNC":
            # a send-back's copy, a commit and its op, a WAIT=false send (model/crash.py)
            at_risk = self._unwaited_since_commit()
            if at_risk:
                self._sometimes("crash:unwaited_at_risk")
            return at_risk
        at_risk = ({e.msg_key for e in self.history.events[self.last_flush_seq:]
                    if e.msg_key and e.event in ("send", "store", "txn_half", "txn_end", "send_back",
                                                 "schedule_fire", "timer_fire",
                                                 # a check re-put the half: the copy the check service
                                                 # would see next
                                                 "txn_check")}
                   # a delayed, retry or timer copy due by now: the broker may have fired it unobserved
                   # into the unflushed CommitLog and persisted its delay progress past it
                   # (delayOffset.json is written apart from the CommitLog)
                   | {t[1] for t, due in self.expect_fire.items() if due <= self._now()})
        within = self.history.params.op_written_within_ms
        if within:  # 5.1.0+: an END's op is written up to ``within`` later, maybe after the flush
            at_risk |= {e.msg_key for e in self.history.events if e.event == "txn_end" and e.msg_key
                        and e.status in ("COMMIT", "ROLLBACK") and e.ts + within >= self.last_flush_ts}
        return sorted(at_risk)

    def _pooled(self) -> bool:
        """A TransientStorePool (model/committing.py): a kill takes what was not committed from the write
        buffers, a subset of what a power loss may take (the flush reaches only committed bytes)."""
        return self.config.transient_store_pool

    def _unwaited_since_commit(self) -> list[str]:
        """SYNC: the keys answered before the group commit since its last pass (model/crash.py): a send-back's
        copy, a commit, a WAIT=false send, and a put answered FLUSH_DISK_TIMEOUT (a stalled disk)."""
        return sorted({e.msg_key for e in self.history.events[self.last_commit_seq:] if e.msg_key and (
            e.event in ("send_back", "txn_end") or (e.event == "send" and (e.detail or {}).get("wait") is False)
            or (e.event in ("send", "txn_half") and e.status == "FLUSH_DISK_TIMEOUT"))})

    def _async_flush_pass(self) -> None:
        """ASYNC: the FlushRealTimeService's pass at this tick (``model/flushing.py``), over what was
        written by the previous pass. A thorough pass (one each flushCommitLogThoroughInterval after the
        broker's start) flushes the file holding the flushed position to there, and that file holds
        everything written before the pass before (which, as every pass, left the files full by its
        own sight flushed): so that much is durable and leaves the power loss's ``at_risk``. What the
        least-pages passes flush is judged in lockstep, not here."""
        if self.config.flush != "ASYNC":
            return
        now = self._now()
        (seq, ts), self.async_passes = self.async_passes[0], (self.async_passes[1], (len(self.history.events), now))
        if now >= self.async_thorough_at + self.config.flush_commitlog_thorough_interval_ms \
                + self.config.flush_interval_commitlog_ms:
            self.async_thorough_at = now
            # with a TransientStorePool the pass flushes only what was committed, which the machine does not
            # follow: no credit (what the passes flushed is judged in lockstep)
            if seq > self.last_flush_seq and not self._pooled():
                self.last_flush_seq, self.last_flush_ts = seq, ts
                self._sometimes("flush:thorough")

    def _checks_received(self, requests: list[CheckRequest]) -> None:
        for req in requests:
            self.pending_checks.append(req)
            m = req.message
            self._sometimes("txn_check")
            self._emit("txn_check", actor="broker", group=req.producer_group, topic=m.topic,
                       queue_id=m.queue_id, commitlog_offset=req.commitlog_offset,
                       queue_offset=req.tran_state_table_offset, msg_key=m.uniq_key,
                       txn_id=req.transaction_id or m.uniq_key,
                       detail={"check_times": m.properties.get("TRANSACTION_CHECK_TIMES")})

    def _window_limit(self) -> int | None:
        if not self.windows:
            return None
        return min(w.lock_ts for w in self.windows.values()) + self.config.broker_lock_max_live_ms

    def _advance(self, ms: int, clamp: bool = True) -> None:
        """Let ``ms`` pass (bounded on the wall clock). With ``clamp``, never past an open orderly
        window's broker lock; ``conform_orderly._outlive``'s listener passes ``clamp=False``."""
        limit = self._window_limit() if clamp else None
        wall = type(self).wall
        if wall is not None:  # a bounded sleep that never ends inside a quiet window
            ms = min(ms, wall.small_ms if ms <= 10_000 else wall.large_ms)
            limit = None if limit is None else limit - wall.tolerance_ms - 2 * wall.guard_ms
        target = self._now() + ms
        if limit is not None:
            target = min(target, limit)
        if wall is not None:
            self._wall_sleep(target)
            return
        catch_up = self.config.commit_interval_commitlog_ms + self.config.commit_commitlog_thorough_interval_ms
        if self._pooled() and target - self._now() > catch_up:
            # a TransientStorePool's writes are committed within catch_up of them (model/committing.py): seen
            # (revealed) then, before a long jump whose tick may also expire them (retention)
            self.clock.set(self._now() + catch_up)
            self._tick()
            self._after()
        if target > self._now():
            self.clock.set(target)
        self._tick()

    def advance_small(self, ms: int) -> None:
        self._record("advance_small", ms=ms)
        self._advance(ms)
        self._after()

    def advance_large(self, ms: int) -> None:
        self._record("advance_large", ms=ms)
        self._advance(ms)
        self._after()

    def _deadlines(self) -> list[int]:
        """The instants of the deadline table (``edges.py``); on the wall clock: due times, half
        timeouts, lock expiries and the broker's rounds from the phase seen."""
        now = self._now()
        if type(self).wall is None:
            return sorted({d for d, _, _ in self._deadline_table()})
        out = list(self.expect_fire.values())
        out += [t.born + self.config.transaction_timeout_ms for t in self.txns.values() if not t.discarded]
        for _mq, (_, ts) in self.broker_grants.items():
            out.append(ts + self.config.broker_lock_max_live_ms)
        for (_, _), ts in self.client_lock.items():
            out.append(ts + self.client_lock_ms)
        if self.txns:  # the broker's rounds, from the phase seen
            out += self._rounds_between(now, now + self.config.transaction_check_interval_ms)
        return sorted({d for d in out if d > now - 1000})

    def advance_to_deadline(self, which: int, delta: int) -> None:
        """Jump to a known deadline ± a hair (kind first: ``edges.py``), tick and probe."""
        self._record("advance_to_deadline", which=which, delta=delta)
        wall = type(self).wall
        if wall is None:
            self._jump_to_deadline(which, delta)
            self._after()
            return
        target = _pick(self._deadlines(), which) + delta
        if wall is not None:  # the window's edges: the last instant before it, the first after it
            deadline = target - delta
            target = deadline - wall.guard_ms - 1 if delta < 0 else deadline + wall.tolerance_ms + 1
            self._wall_sleep(min(target, self._now() + wall.large_ms))
            self._after()
            return
        self._advance(max(0, target - self._now()))
        self._after()

    @precondition(lambda self: self._on("flush") and self.config.flush == "ASYNC")  # SYNC: nothing to flush
    @rule()
    def flush(self) -> None:
        self._record("flush")
        self._call("flush()", lambda b: b.flush())
        self.last_flush_seq, self.last_flush_ts = len(self.history.events), self._now()
        self._after()

    @rule(kind=st.sampled_from(["small", "small", "large", "deadline", "deadline", "check_probe"]),
          small=SMALL_MS, large=LARGE_MS, which=PICK,
          delta=st.sampled_from([-1000, -1, 0, 1, 1000]))
    def advance(self, kind: str, small: int, large: int, which: int, delta: int) -> None:
        if kind == "check_probe" and self.topics and type(self).wall is None:
            self.txn_half_before_check(which, delta, delta if abs(delta) <= 1 else None)
        elif kind == "deadline" and self._deadlines():
            self.advance_to_deadline(which, delta)
        elif kind == "large":
            self.advance_large(large)
        else:
            self.advance_small(small)

    # ------------------------------------------------------------------
    # crash and recovery

    @precondition(lambda self: self._on("crash"))
    @_enabled(lambda self: self.can_crash and not self.profile.strict and not self.windows)
    @rule(kind=st.sampled_from(["kill", "power"]))
    def crash_recover(self, kind: str) -> None:
        """``torn`` (the power ladder's prelude asks for it, ``composite.py``): on a candidate that
        declares it (``crash_kinds``; SPEC §5: "a torn tail is possible"), a power loss after the
        page cache wrote back some unflushed records and tore the last; on an ASYNC broker a burst of
        sends is in flight first, so there is a tail to tear. Recovery must drop the torn record and
        rebuild the consume queue units lost with the queues' unflushed bytes; the model allows every
        prefix of the unflushed records. On another candidate it is a power loss (a kill on the wall
        clock)."""
        if not self._holds(lambda: self.can_crash and not self.profile.strict and not self.windows):
            return self._idle('crash_recover')
        kinds = self._crash_kinds()
        if type(self).wall is not None:
            if self._open_txn_pending() or not self.txn_settled:
                return self._idle('crash_recover')  # the check service's progress moves every round
            kind = kind if kind in kinds else "kill"
            self._wall_persisted()
        elif kind not in kinds:
            kind = "power"
        self._record("crash_recover", kind=kind)
        if kind == TORN and self.config.flush == "ASYNC":
            for i in range(3):
                self._send(self._message(self.t0, "TagA"), i % self.topics[self.t0])
        self._crash_and_recover(kind)

    @precondition(lambda self: self._on("crash") and self.config.flush == "SYNC" and type(self).wall is None)
    @_enabled(lambda self: self._can_stall() and not self.windows and self.t0 in self.topics)
    @rule(n=st.integers(1, 3), then=st.sampled_from(["power", "recovered", "recovered_power"]),
          ms=st.sampled_from([5_000, 12_000]))
    def disk_stall(self, n: int, then: str, ms: int) -> None:
        """A hung disk (``Capability.DISK_STALL``, SYNC_FLUSH): no flush completes for ``ms`` (at least
        syncFlushTimeout, 5 s), and ``n`` sends wait on it: each is stored and answered FLUSH_DISK_TIMEOUT
        (``model/crash.py``), a WAIT=false one SEND_OK. Then ``power``: the power fails during the stall, and
        every one of them is at risk; or ``recovered``: the clock passes the stall's end, the group commit's
        pass flushes them, and (``recovered_power``) a power loss after it must keep them. The stall never
        outlives the rule (no orderly window may clamp the clock)."""
        self._record("disk_stall", n=n, then=then, ms=ms)
        self._call(f"stall_disk({ms})", lambda b: b.stall_disk(ms))
        self.stall_until = self._now() + ms
        for i in range(n):
            res = self._send(self._message(self.t0, "TagA", keys=(f"stall{i}",)), i % self.topics[self.t0])
            if res is not None and res.status.value == "FLUSH_DISK_TIMEOUT":
                self._sometimes("send:flush_disk_timeout")
        if then == "power":
            self._crash_and_recover("power")
        else:
            self._advance(ms)
            self._sometimes("disk_stall:recovered")
            if then == "recovered_power":
                self._crash_and_recover("power")
        self._after()

    def _can_stall(self) -> bool:
        caps = getattr(self.ls.candidate, "capabilities", frozenset())
        return self.can_crash and not self.profile.strict and Capability.DISK_STALL in caps

    def _crash_kinds(self) -> tuple[str, ...]:
        """The kinds the candidate's ``crash`` takes (SPEC's two unless it declares others)."""
        return tuple(getattr(self.ls.candidate, "crash_kinds", CRASH_KINDS))

    def _crash_and_recover(self, kind: str) -> None:
        """The broker crashes (``kill`` / ``power``) and recovers; the clients restart with it.
        ``torn`` (a candidate that declares it in ``crash_kinds``: the mmap broker) is a power loss
        that kept some unflushed records and tore the last (``MessageStore.torn_tail``): to the model
        and in the trace a power loss, whose recovery must drop the torn record and redispatch the
        rest."""
        self.crashes += 1
        drawn, kind = kind, "power" if kind == TORN else kind
        if self._now() < self.stall_until:
            self._sometimes("crash:disk_stalled")
        if kind == "power" and self.config.flush == "SYNC" and type(self).wall is None and self.crashes % 2 == 0 \
                and self._unwaited_since_commit():
            # every other SYNC power loss comes just after the group commit's pass (the broker's tick): what
            # it flushed must survive; the others come before it, and it is at risk
            self._tick()
            self._sometimes("crash:after_group_commit")
        if type(self).wall is None:
            # what the broker did at its last tick (a delayed copy fired, a retry) is seen before the crash: a
            # copy fired again after it (the delay progress is persisted apart) is then a refire after a crash
            for mq in self._reveal_mqs():
                self._reveal(mq)
        self.crashed_oracles()
        at_risk = self._power_at_risk() if kind == "power" or self._pooled() else []
        if kind == "kill" and at_risk:
            self._sometimes("crash:kill_uncommitted_at_risk")  # a TransientStorePool's write buffers
        self._emit("crash", actor="broker", status=kind,
                   detail={"at_risk": at_risk, **({"torn": True} if drawn == TORN else {})})
        for key in at_risk:
            if key in self.txns:
                self.txns[key].maybe_lost = True
        try:
            self.ls.candidate.crash(drawn)
        except Exception as exc:
            self._fail(f"candidate failed to crash({drawn!r}): {exc!r}")
        self._probe_hold(f"after crash({drawn!r})", running=False)
        probing = type(self).wall is None  # on the wall clock the forks crash once the broker is back
        if probing and self.ls.enabled:
            self.ls.on_forks(lambda fork: fork.crash(kind))
        if probing:
            self._probe_down()
        try:
            self.ls.candidate.recover()
        except Exception as exc:
            self._fail(f"candidate failed to recover() after crash({drawn!r}): {exc!r}")
        if self.ls.enabled:
            if not probing:
                self.ls.on_forks(lambda fork: fork.crash(kind))
            n = self.ls.split(_recovery_choices, _recover)
            if n > 1:
                self._sometimes("recovery_forked")
        self._probe_store(f"after crash({drawn!r}) and recovery")
        self._emit("recover", actor="broker", status=kind)
        self.stall_until = 0  # the disk came back with the machine
        self._restarted()
        self.judge_offsets_read_back(kind)
        self._sometimes(f"crash_recover:{drawn}")
        if type(self).wall is not None:  # a restarted broker: new service phases
            self.check_phase = None
            self.model_time = self._sync()
        # the clients restart with the broker: process queues, locks and pending checks go
        self.pqs.clear()
        self.next_pull.clear()
        self.client_committed.clear()
        self.opqs.clear()
        self.client_lock.clear()
        self.broker_grants.clear()
        self.pending_checks.clear()
        self._after(after_crash=True)


    def _probe_down(self) -> None:
        """Every request of the protocol while the broker is down (crashed, not yet recovered): each
        must be refused (SERVICE_NOT_AVAILABLE in-process) — a broker that answers then acts on
        tables a crash took. On the manual clock only (a real broker's port is closed then: the
        adapter cannot tell that from a refusal)."""
        group, topic = "G0" + self.ns, self.t0
        mq = MessageQueue(topic, 0)
        requests: dict[str, Callable[[Any], Any]] = {
            "send": lambda b: b.send(self._message(topic, "TagA"), 0),
            "send_half": lambda b: b.send_half(self._message(topic, "TagA"), 0, "PG" + self.ns),
            "end_transaction": lambda b: b.end_transaction("PG" + self.ns, 0, 0, TxnAction.COMMIT, False),
            "pull": lambda b: b.pull(group, mq, 0, 32),
            "heartbeat": lambda b: b.heartbeat(group, CLIENTS[0], {topic: ("*", "TAG", 0)}),
            "unregister_consumer": lambda b: b.unregister_consumer(group, CLIENTS[0]),
            "send_back": lambda b: b.send_back(group, 0, 0, None, None),
            "update_offset": lambda b: b.update_offset(group, mq, 0),
            "query_offset": lambda b: b.query_offset(group, mq),
            "lock_batch": lambda b: b.lock_batch(group, CLIENTS[0], [mq]),
            "unlock_batch": lambda b: b.unlock_batch(group, CLIENTS[0], [mq]),
            "tick": lambda b: b.tick(),
            "flush": lambda b: b.flush(),
            "create_topic": lambda b: b.create_topic(topic, self.topics.get(topic, 1)),
            "create_group": lambda b: b.create_group(group),
        }
        for name in DOWN_PROBES:
            out = self._call(f"{name}(…) [while down]", requests[name])
            if out.error is None:
                self._fail(f"the broker answered {name} while down (crashed, not yet recovered): {out.render()}")
        self._sometimes("down_probe")


# the requests tried while the broker is down (``_probe_down``)
DOWN_PROBES = ("lock_batch", "send", "pull", "update_offset", "query_offset", "send_back", "send_half",
               "end_transaction", "heartbeat", "unlock_batch", "unregister_consumer", "tick", "flush",
               "create_topic", "create_group")


def _recovery_choices(fork: Any) -> list[Any]:
    choices = getattr(fork, "recovery_choices", None)
    return list(choices()) if choices is not None else [None]


def _recover(fork: Any, choice: Any) -> None:
    if choice is None:
        fork.recover()
    else:
        fork.recover(survivors=choice)
