"""Timer messages (RocketMQ 5.x) in the conformance machine: sends, expectations, fires, the ladder.

Theory of operation
-------------------
``TimerRules`` (a mixin of ``ConformanceBase``) produces timer messages and observes the wheel.
The facts are ``model/timer.py``'s (5.3.3: B/util/HookUtils.handleScheduleMessage,
S/timer/TimerMessageStore); the decisions the machine expects are ``model/lifecycle.py``'s
``timer_decision`` / ``timer_due`` (the TIMER table's guards and effect).

- **Sends** (``send_timer``, the ``produce`` rule's ``timer`` kind): one of ``TIMER_DELAY_MS``,
  ``TIMER_DELAY_SEC``, ``TIMER_DELIVER_MS`` with a value from ``domains.TIMER_EDGES``: the
  requested time on a multiple of ``timerPrecisionMs``, one ms after or before it (``span``
  precisions ahead), now (0), in the past, exactly ``timerMaxDelaySec`` ahead, one ms (one s)
  past it (MESSAGE_ILLEGAL), or not a Java long (MESSAGE_ILLEGAL); sometimes with a delay level
  (DELAY wins). Under a profile without the wheel (4.9) the same draws are plain user
  properties: the message is delivered at once, and lockstep shows any difference.
- **What the machine expects** (``_timer_plan``, computed with the clock the broker's put reads):
  the send event carries ``detail.timer`` (requested time, parsed, precision, max delay: what
  the TIMER table's guards read) and, for a copy in the wheel, ``deliver_ts`` = out + precision
  (SPEC §8); its fire is expected like a delayed copy's (``_expect_fire``, the real topic, r 0),
  so the drain waits for it and the deadline table walks it (kind ``timer``). No transactional
  message carries timer properties: the put hook runs on the *half's* put too (parseHalfMessageInner
  stores it as TRANSACTION_NOT_TYPE), so the model sends such a half into the wheel with REAL_TOPIC
  = RMQ_SYS_TRANS_HALF_TOPIC — it comes back as a half, its real topic lost, and the COMMIT names
  the timer copy. No invariant has a meaning for that history yet (LOST and
  TXN_CHECK_AFTER_RESOLVED would report it), so it is not drawn.
- **Observing the wheel** (``_timer_revealed``): the observer reveals ``rmq_sys_wheel_timer``
  queue 0 (before the user topics, so a timer copy is seen before its fire); a copy there is a
  ``store`` whose ``deliver_ts`` is its ``TIMER_OUT_MS`` + precision. A copy with reconsume
  times 0 in a user topic whose key went to the wheel is a ``timer_fire``: ``deliver_ts`` the
  due time the machine expected for it (a copy fired again after a crash: the key's earliest),
  ``detail`` the timer copy it came from when the key has exactly one, and the store time.
- **The ladder** (``timer_ladder``, in every example's prelude): requests on the edges of one
  slot (the clock aligned to a multiple of the precision, + 1, or − 1 ms, so ``TIMER_DELAY_SEC``
  hits the edges too), now, past the max, a delay level with a timer, each due time visited at
  d − 1, d and d + 1 ms; then (crash family on) a copy in the wheel across a kill after the
  checkpoint (it must still fire) and a kill right after a fire before the checkpoint (it may
  fire again: at-least-once); the fired copies consumed, one failed once (its retry keeps
  TIMER_OUT_MS: never timed again; the DLQ ladder takes the ``timer`` family too).

- **On the wall clock** (``_timer_props_wall``): the broker's put reads its own clock, a few ms after
  the machine's, so a request on a slot's edge could round either way. There every request that goes
  to the wheel lands in the middle of a slot (``span`` slots ahead; "max" at most 5 s ahead, so
  kills do not wait days for its fire; "past_max" a second past the max, not a millisecond), and
  ``TIMER_DELAY_SEC`` is used only when the clock is itself mid-slot (else ``TIMER_DELAY_MS``): the
  machine's due time is then the broker's. A fired copy is judged for lateness like a delayed one
  (kind ``timer``: never before its due time, within the tolerance after it; TIMER_EARLY).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rmqspec.model.lifecycle import TIMER_WHEEL, timer_decision, timer_due
from rmqspec.model.message import StoredMessage
from rmqspec.model.timer import (
    PROPERTY_TIMER_DELAY_MS,
    PROPERTY_TIMER_DELAY_SEC,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_TIMER_OUT_MS,
    TIMER_TOPIC,
    is_timer_request,
    java_long,
    requested_ms,
)
from rmqspec.properties.conform_base import _pick
from rmqspec.properties.domains import TIMER_PROPERTIES
from rmqspec.properties.history import DISCARD_TOPIC, DLQ_PREFIX, RETRY_PREFIX, SCHEDULE_TOPIC


class TimerRules:
    """Mixin: timer sends, the wheel observed, the timer ladder (see the module docstring)."""

    # ------------------------------------------------------------------
    # what the machine expects of a timer request

    def _timer_plan(self, props: Mapping[str, str], level: int) -> dict[str, Any] | None:
        """The put hook's decision for a put of ``props`` now (None: no timer request, or no wheel
        in this profile / configuration). ``detail`` is what the trace carries."""
        if not is_timer_request(props) or not self.config.timer_running:
            return None  # 4.9: user properties; 5.x without timerWheelEnable: refused (lockstep judges it)
        now, cfg = self._now(), self.config
        requested = requested_ms(props, now)
        max_delay = cfg.timer_max_delay_sec * 1000
        decision = timer_decision(level, requested, now, max_delay)
        plan: dict[str, Any] = {
            "decision": decision,
            "detail": {"requested": requested, "parsed": requested is not None,
                       "precision": cfg.timer_precision_ms, "max_delay_ms": max_delay},
        }
        if decision == TIMER_WHEEL and requested is not None:
            plan["due"] = timer_due(requested, cfg.timer_precision_ms)
        return plan

    def _timer_expect(self, topic: str, key: str, due: int) -> None:
        self.timer_due.setdefault(key, []).append(due)
        self._expect_fire(topic, key, 0, None, due)
        self._sometimes("timer_expected")

    # ------------------------------------------------------------------
    # the wheel observed

    def _timer_store_due(self, m: StoredMessage) -> int | None:
        out = java_long(m.properties.get(PROPERTY_TIMER_OUT_MS) or "")
        return None if out is None else out + self.config.timer_precision_ms

    def _is_timer_fire(self, m: StoredMessage) -> bool:
        """A copy in a user topic of a key that went to the wheel (a retry, DLQ or schedule copy
        of a fired copy keeps TIMER_OUT_MS but is not a fire)."""
        topic = m.topic
        if topic in (TIMER_TOPIC, SCHEDULE_TOPIC, DISCARD_TOPIC) or topic.startswith((RETRY_PREFIX, DLQ_PREFIX)):
            return False
        return m.reconsume_times == 0 and (m.uniq_key in self.timer_copies or m.uniq_key in self.timer_due)

    def _timer_revealed(self, m: StoredMessage, fire: int | None) -> None:
        """``m`` fired from the wheel (see ``_is_timer_fire``): a ``timer_fire`` event."""
        key = m.uniq_key
        dues = self.timer_due.get(key, [])
        deliver_ts = fire if fire is not None else (min(dues) if dues else None)
        detail: dict[str, Any] = {"store_ts": m.store_ts}
        copies = self.timer_copies.get(key, [])
        if len(copies) == 1:
            detail["from_queue_offset"], detail["from_commitlog_offset"] = copies[0]
        self.changed_at(m.store_ts)
        self._sometimes("timer_fired" if fire is not None else "timer_refired")
        if fire is not None and type(self).wall is not None:
            self._judge_lateness("timer", fire, m)
        self._emit("timer_fire", actor="broker", topic=m.topic, queue_id=m.queue_id, queue_offset=m.queue_offset,
                   commitlog_offset=m.commitlog_offset, msg_key=key, msg_id=m.msg_id,
                   reconsume_times=m.reconsume_times, deliver_ts=deliver_ts, detail=detail)

    def _timer_copy_seen(self, m: StoredMessage) -> None:
        self.timer_copies.setdefault(m.uniq_key, []).append((m.queue_offset, m.commitlog_offset))
        self._sometimes("timer_stored")

    # ------------------------------------------------------------------
    # sends

    def _timer_props(self, prop: str, edge: str, span: int) -> dict[str, str]:
        """The property ``prop`` with a value on ``edge`` (``domains.TIMER_EDGES``), ``span``
        precisions ahead, for a put now."""
        now, p = self._now(), self.config.timer_precision_ms
        max_ms = self.config.timer_max_delay_sec * 1000
        if edge in ("multiple", "plus1", "minus1"):
            target = (now // p + span) * p + {"multiple": 0, "plus1": 1, "minus1": -1}[edge]
            delay = target - now
        else:
            delay = {"zero": 0, "negative": -5000, "max": max_ms, "past_max": max_ms + 1}.get(edge, 0)
        if edge == "garbage":
            value = ("soon", "1.5", " 5")[span % 3]
        elif prop == PROPERTY_TIMER_DELAY_SEC:
            value = str(-(-delay // 1000) if edge != "past_max" else max_ms // 1000 + 1)
        elif prop == PROPERTY_TIMER_DELIVER_MS:
            value = str(now + delay)
        else:
            value = str(delay)
        return {prop: value}

    def _timer_props_wall(self, prop: str, edge: str, span: int) -> dict[str, str]:
        """``_timer_props`` for a broker on its own clock: the due time cannot depend on which side of
        a slot's edge the broker's clock fell (module docstring)."""
        now, p = self._now(), self.config.timer_precision_ms
        max_ms = self.config.timer_max_delay_sec * 1000
        if edge == "past_max":
            return self._timer_props(prop, "past_max", span) if prop == PROPERTY_TIMER_DELAY_SEC \
                else {prop: str(max_ms + 1000 + (now if prop == PROPERTY_TIMER_DELIVER_MS else 0))}
        if edge not in ("multiple", "plus1", "minus1", "max"):
            return self._timer_props(prop, edge, span)  # at once, or not a number: no slot to miss
        ahead = span if edge != "max" else max(1, min(max_ms - p, 5_000) // p)
        target = (now // p + ahead) * p + p // 2
        phase = now % p
        if prop == PROPERTY_TIMER_DELAY_SEC and p // 4 <= phase <= p // 2 and (ahead * p) % 1000 == 0:
            return {prop: str(ahead * p // 1000)}  # now mid-slot: whole seconds keep it there
        if prop == PROPERTY_TIMER_DELIVER_MS:
            return {prop: str(target)}
        return {PROPERTY_TIMER_DELAY_MS: str(target - now)}

    def send_timer(self, topic: int, queue: int, prop: str, edge: str, span: int, level: int = 0) -> None:
        """One timer message (``produce``'s ``timer`` kind; the module docstring)."""
        self._record("send_timer", topic=topic, queue=queue, prop=prop, edge=edge, span=span,
                     **({"level": level} if level else {}))
        self._send_timer(topic, queue, prop, edge, span, level)
        self._after()

    def _send_timer(self, topic: int, queue: int, prop: str, edge: str, span: int, level: int = 0) -> str | None:
        """The send of ``send_timer``, unrecorded (ladders); the key when acknowledged."""
        name = _pick(sorted(self.topics), topic)
        props = self._timer_props(prop, edge, span) if type(self).wall is None \
            else self._timer_props_wall(prop, edge, span)
        msg = self._message(name, "TagA", props=props, delay=level)
        sent = len(self.history.events)
        self._send(msg, queue % self.topics[name])
        self._sometimes(f"timer_send:{edge}" + (":level" if level else ""))
        acked = any(e.event == "send" and e.status == "SEND_OK" for e in self.history.events[sent:])
        return msg.uniq_key if acked else None

    # ------------------------------------------------------------------
    # the ladder

    def _align(self, edge: int) -> None:
        """Advance to the next instant ≡ ``edge`` (mod the precision)."""
        p = self.config.timer_precision_ms
        now = self._now()
        at = now - now % p + edge % p
        if at <= now:
            at += p
        self._advance(at - now)
        self._after()

    def _walk_due(self, dues: list[int]) -> None:
        for d in sorted(set(dues)):
            for at in (d - 1, d, d + 1):
                if at >= self._now():
                    self._advance(at - self._now())
                    self._after()

    def timer_ladder(self, v: int) -> None:
        """Timer requests on a slot's edges, walked; across kills; consumed (module docstring)."""
        self._record("timer_ladder", v=v)
        if not self.topics or not self._ladder_ok():
            return
        p = self.config.timer_precision_ms
        before = {k: list(d) for k, d in self.timer_due.items()}
        self._align((0, 1, -1)[v % 3])
        span = 1 + v // 3 % 3
        props = TIMER_PROPERTIES
        for i, edge in enumerate(("plus1", "minus1", "multiple")):
            self._send_timer(v, v + i, _pick(props, v + i), edge, span + i)
        self._send_timer(v, v, _pick(props, v // 3), _pick(("zero", "negative"), v), 1)
        self._send_timer(v, v, _pick(props, v // 9), _pick(("past_max", "garbage", "max"), v // 2), v)
        self._send_timer(v, v, _pick(props, v + 1), "plus1", 2, 1 + v % 3)  # DELAY wins
        self._after()
        fresh = [d for k, dues in self.timer_due.items() for d in dues[len(before.get(k, [])):]]
        self._walk_due([d for d in fresh if d - self._now() < 3_600_000])
        if self._on("crash") and self.can_crash and not self.profile.strict and not self.windows:
            self._timer_across_kills(v, p)
        self.consume_next_batch()
        group = _pick(self._consumer_groups(), v) if self._consumer_groups() else None
        fired = [k for k in self.timer_copies if k in self.timer_due]
        if group is not None and fired:
            self._fail_key_once(group, fired[-1], 0, "none")
            self._sometimes("timer_retried")
        self._after()

    def _timer_across_kills(self, v: int, p: int) -> None:
        """A copy in the wheel across a kill after the checkpoint (it still fires); a kill right
        after a fire, before the next checkpoint (it may fire again)."""
        interval = self.config.timer_flush_interval_ms
        name = self.t0
        key = self._send_timer(sorted(self.topics).index(name), v, PROPERTY_TIMER_DELAY_MS, "plus1",
                               3 + 2 * interval // p)
        self._after()
        self._advance(2 * max(p, interval))  # enqueued into the wheel and checkpointed
        self._after()
        self._crash_and_recover("kill")
        self._sometimes("timer_pending_across_kill")
        dues = [d for d in self.timer_due.get(key or "", []) if d >= self._now()]
        if not dues:
            return
        due = min(dues)
        if due - interval // 2 > self._now():  # the last checkpoint just before the fire
            self._advance(due - interval // 2 - self._now())
        self._advance(max(0, due - self._now()))
        self._after()
        self._crash_and_recover("kill")  # fired, not yet checkpointed: delivered again
        self._tick()
        self._after()
        self._sometimes("timer_fired_across_kill")


__all__ = ["TimerRules"]
