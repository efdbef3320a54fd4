"""Pop consumption (RocketMQ 5.x) in the conformance machine: a popping group's ladder, observed.

Theory of operation
-------------------
``PopRules`` (a mixin of ``ConformanceBase``) plays group ``GP``, a 5.x pop consumer (the remoting
``POP_MESSAGE`` / ``ACK_MESSAGE`` / ``BATCH_ACK_MESSAGE`` / ``CHANGE_MESSAGE_INVISIBLETIME`` requests of
``model/pop.py``), where the profile pops (``Version.pop``) and the broker declares ``Capability.POP``
(with the model beside it in lockstep: the model too). Every request goes through ``_call`` (lockstep
compares the answers: the messages, their handles, the pop time and invisible time); the random choice a
5.3.3 pop makes (``randomQ``: the first queue, and whether the retry topic is read first) is forced on
every broker that can be told (``force_pop_random``), so the model forks and the candidate choose alike
(manual clock; on the wall clock pops are compared as sets and each fork acks its own handles:
``conform_pop_wall.py``).

What the machine writes (the rows ``properties/inv_pop.py`` replays through the POP and POP_ORDER tables, as a
5.x broker's own trace would show them, ``model/broker_pop.py``): a ``pop`` per message handed out
(``deliver_ts`` its handle's revive time, ``detail.handle``; orderly: ``detail.attempt_id``), an ``ack`` per
acked handle with the broker's answer, a ``change_invisible`` per change, and a ``revive`` when a retry copy
(its handle's retry flag) is popped that the machine has not seen — at the pop's time, a bound of when the
broker revived it.

The ladder (``pop_prelude``, in every example's prelude where pop applies; on the wall clock, against a
broker that cannot be told its ``randomQ`` and revives on its own clock, ``conform_pop_wall.py``'s instead):
three messages popped with a short invisible time; the first acked at once and again, the second's
invisible time changed (then its old handle acked: a stale ack) or left, nothing for the third; a pop
while they are invisible, and one a millisecond before the invisible time ends (the retry topic first:
nothing may be revived yet); the clock past their revive times and the revive service's margin; the
observer reads the pop retry topic (a ``revive`` row per copy there) and the third message's handle is
acked late; pops (the retry topic first) hand the revived copies out again (reconsume times + 1), and
they are batch-acked. Then an orderly queue, popped by group ``GPO`` (a
concurrent pop moves its group's offset past what it read, so one group pops one way): two messages popped by attempt
A1, a pop by A2 while they are in flight (blocked), the first acked, A2 again, the clock past the
invisible time, A2 takes the rest from the first message not acked; acked. With the crash family on, every
third example kills the broker with handles out, and pops again after the restart. Coverage:
``pop:found``, ``pop:hidden`` (a pop while the messages were invisible), ``pop:before_the_end``,
``pop:changed``, ``pop:revived``,
``pop:orderly``, ``pop:orderly_blocked``, ``pop:orderly_again``, ``pop:across_kill``.
"""

from __future__ import annotations

from typing import Any

from rmqspec.model.message import MessageQueue
from rmqspec.model.pop import NORMAL, pop_retry_topic, real_topic
from rmqspec.model.protocol import Capability
from rmqspec.properties.conform_pop_wall import PopWallRules

POP_GROUP = "GP"
POP_ORDER_GROUP = "GPO"  # its own group: a concurrent pop moves the group's offset past what it read
POP_INVISIBLE_MS = (2_000, 3_000)
REVIVE_WAIT_MS = 5_000  # past the revive time: the model's margin (2 s) and a tick's step
RETRY_FIRST, TOPIC_FIRST = 0, 50  # randomQ below / above popFromRetryProbability (20)


def _retry_flag(handle: Any) -> str:
    return str(getattr(handle, "retry", NORMAL))


def _where(topic: str, group: str, handle: Any) -> str:
    """The topic the handed-out copy lies in (a revived one is answered under its original topic; its
    handle's queue and offset are the pop retry topic's): ExtraInfoUtil.getRealTopic."""
    return real_topic(topic, group, _retry_flag(handle))


class PopRules(PopWallRules):
    """Mixin: the popping group's ladder (see the module docstring)."""

    def _pop_init(self) -> None:
        self.pop_group = POP_GROUP + self.ns
        self.pop_order_group = POP_ORDER_GROUP + self.ns
        self.pop_created: set[str] = set()
        # the retry copies already popped: commitlog offsets (wall clock: UNIQ_KEY and reconsume times, POP-1)
        self.pop_seen: set[Any] = set()

    def _pop_ok(self) -> bool:
        """Pop applies: a profile that pops, brokers that declare it (on the wall clock: ``conform_pop_wall.py``)."""
        if not self.topics or not self.config.behaviour.pop:
            return False
        brokers = [self.ls.candidate, *self.ls.forks]
        applies = all(Capability.POP in getattr(b, "capabilities", frozenset()) for b in brokers)
        type(self).pop_applies[0] |= applies  # the POP tables apply (coverage)
        return applies

    def _pop_group_ready(self, orderly: bool) -> str:
        group = self.pop_order_group if orderly else self.pop_group
        if group not in self.pop_created:
            self._call(f"create_group({group!r})", lambda b: b.create_group(group))
            self.pop_created.add(group)
        return group

    # ------------------------------------------------------------------
    # requests and their rows

    def _pop(self, topic: str, queue_id: int, n: int, invisible: int, random_q: int,
             attempt: str | None = None) -> list[Any]:
        """One POP_MESSAGE; its messages' rows; the popped messages (empty when refused)."""
        order = attempt is not None
        group = self._pop_group_ready(order)

        def go(b: Any) -> Any:
            if hasattr(b, "force_pop_random"):
                b.force_pop_random(random_q)
            return b.pop(group, topic, queue_id, n, invisible, order=order, attempt_id=attempt)

        what = f"pop({group!r}, {topic}, {queue_id}, max={n}, invisible={invisible}" \
               + (f", order, attempt={attempt!r}" if order else "") + f") [randomQ {random_q}]"
        if type(self).wall is None:
            out = self._call(what, go)
            raw = out.value
        else:  # compared as sets, each fork at the broker's pop time (conform_pop_wall.py)
            out, raw = self._wall_pop_call(what, go)
        if out.error is not None:
            self._sometimes(f"pop:refused:{out.error[1]}")
            return []
        popped = list(raw.messages)
        if popped and type(self).wall is not None:
            self.changed_at(raw.pop_time)  # the pop offset moved: persisted every flushConsumerOffsetInterval
        for p in popped:
            self._pop_row(group, p, attempt)
        if popped:
            self._sometimes("pop:orderly" if order else "pop:found")
        return popped

    def _pop_row(self, group: str, p: Any, attempt: str | None) -> None:
        m, handle = p.message, p.handle
        if attempt is None and _retry_flag(handle) != NORMAL:
            self._revived(group, m)
        detail: dict[str, Any] = {"handle": handle.extra_info()}
        if attempt is not None:
            detail["attempt_id"] = attempt
        self._emit("pop", actor=group, group=group, topic=_where(m.topic, group, handle), queue_id=handle.queue_id,
                   queue_offset=handle.queue_offset, commitlog_offset=self._pop_offset_in_view(m.commitlog_offset),
                   msg_key=m.uniq_key,
                   msg_id=m.msg_id, reconsume_times=m.reconsume_times, deliver_ts=handle.revive_time,
                   status="ORDERLY" if attempt is not None else "CONCURRENT", detail=detail)

    def _ack(self, topic: str, popped: list[Any], batch: bool = False) -> None:
        """ACK_MESSAGE per message, or one BATCH_ACK_MESSAGE; an ``ack`` row per handle."""
        if not popped:
            return
        group = self.pop_order_group if popped[0].handle.order else self.pop_group
        if batch:  # each broker acks its own handles (on the wall clock the forks' differ: _handle_for)
            out = self._call(f"batch_ack({group!r}, {topic}, {len(popped)} handles)",
                             lambda b: b.batch_ack(group, topic, [self._handle_for(b, p) for p in popped]))
            outs = [out] * len(popped)
        else:
            outs = [self._call(f"ack({group!r}, {topic}, {p.handle.extra_info()!r})",
                               lambda b, p=p: b.ack(group, topic, self._handle_for(b, p)))
                    for p in popped]
        if type(self).wall is not None:
            self.changed_at(self._now())
        for p, out in zip(popped, outs, strict=True):
            status = out.error[1] if out.error is not None else getattr(out.value, "name", str(out.value))
            self._emit("ack", actor=group, group=group, topic=_where(p.message.topic, group, p.handle),
                       queue_id=p.handle.queue_id,
                       queue_offset=p.handle.queue_offset, msg_key=p.message.uniq_key, status=status,
                       detail={"handle": p.handle.extra_info(), "batch": batch})

    def _change(self, topic: str, p: Any, invisible: int) -> Any | None:
        """CHANGE_MESSAGE_INVISIBLETIME of ``p``'s handle: the new handle (None when refused)."""
        handle = p.handle
        group = self.pop_order_group if handle.order else self.pop_group
        what = f"change_invisible_time({group!r}, {topic}, {handle.extra_info()!r}, {invisible})"
        if type(self).wall is None:
            out = self._call(what, lambda b: b.change_invisible_time(group, topic, handle, invisible))
            new = out.value
        else:  # each fork changes its own handle at the broker's time (conform_pop_wall.py)
            out, new = self._wall_change(what, group, topic, p, invisible)
        if out.error is not None:
            self._sometimes(f"pop:change_refused:{out.error[1]}")
            return None
        self._emit("change_invisible", actor=group, group=group, topic=_where(p.message.topic, group, handle),
                   queue_id=handle.queue_id,
                   queue_offset=handle.queue_offset, msg_key=p.message.uniq_key, deliver_ts=new.revive_time,
                   status="ORDERLY" if handle.order else "CONCURRENT",
                   detail={"handle": handle.extra_info(), "new_handle": new.extra_info()})
        self._sometimes("pop:changed")
        return new

    def _revived(self, group: str, m: Any) -> None:
        """A ``revive`` row for a retry copy not seen before: the broker revived it by now."""
        seen = m.commitlog_offset if type(self).wall is None else (m.uniq_key, m.reconsume_times)
        if seen in self.pop_seen:
            return
        self.pop_seen.add(seen)
        self._emit("revive", actor="broker", group=group, topic=m.topic, msg_key=m.uniq_key,
                   reconsume_times=m.reconsume_times, detail={"observed": True})
        self._sometimes("pop:revived")

    def _peek_revived(self, topic: str) -> None:
        """The observer pulls the group's pop retry topic (queue 0, where PopReviveService puts): a
        ``revive`` row for each copy stored there not seen before, so an ack after it is a late one."""
        retry = pop_retry_topic(topic, self.pop_group, self.config.enable_retry_topic_v2)
        what = f"pull({self.obs!r}, {retry}/0, offset=0) [revived]"
        if type(self).wall is None:
            out = self._call(what, lambda b: b.pull(self.obs, MessageQueue(retry, 0), 0, 32, "*"))
            messages = out.value.messages if out.error is None else ()
        else:  # revived in the broker's order (8 revive queues), at its offsets (POP-1): compared as a set
            seen: dict[str, Any] = {}

            def read(b: Any) -> Any:
                return frozenset((m.uniq_key, m.reconsume_times, m.body)
                                 for m in b.pull(self.obs, MessageQueue(retry, 0), 0, 32, "*").messages)

            def read_candidate(b: Any) -> Any:
                seen["raw"] = b.pull(self.obs, MessageQueue(retry, 0), 0, 32, "*").messages
                return frozenset((m.uniq_key, m.reconsume_times, m.body) for m in seen["raw"])

            out = self._call(what + " [as a set]", read, candidate_fn=read_candidate)
            messages = seen.get("raw", ())
        if out.error is not None:
            self._sometimes(f"pop:peek_error:{out.error[1]}")
            return
        for m in messages:
            self._revived(self.pop_group, m)

    def _pop_offset_in_view(self, offset: int) -> int:
        """A popped copy's commitlog offset as the example sees it (the wall clock's session view)."""
        down = getattr(self.ls.candidate, "down", None) if type(self).wall is not None else None
        return offset if down is None else down(offset)

    def _pop_send(self, topic: str, queue_id: int, n: int) -> None:
        for _ in range(n):
            self._send(self._message(topic, "TagA"), queue_id)

    def _pop_wait(self, ms: int) -> None:
        """Let ``ms`` pass in steps of a second, ticking: the revive service runs on the ticks."""
        end = self._now() + ms
        while self._now() < end:
            self._advance(min(1_000, end - self._now()))
        self._after()

    # ------------------------------------------------------------------
    # the ladder

    def pop_prelude(self, v: int, f: int) -> None:
        """The popping group's ladder (module docstring)."""
        self._record("pop_prelude", v=v, f=f)
        if not self._pop_ok():
            return
        if type(self).wall is not None:
            self.pop_wall_ladder(v)
            return
        topic = self.t0 if self.t0 in self.topics else sorted(self.topics)[0]
        queues = self.topics[topic]
        invisible = POP_INVISIBLE_MS[v % len(POP_INVISIBLE_MS)]
        # concurrent: three messages, acked / changed / left
        self._pop_send(topic, v % queues, 3)
        self._after()
        popped = self._pop(topic, v % queues, 3, invisible, TOPIC_FIRST)
        self._ack(topic, popped[:1])
        self._ack(topic, popped[:1])  # again: an acked message stays acked
        if len(popped) > 1 and v % 2 == 0 and self._change(topic, popped[1], invisible + 1_000) is not None:
            self._ack(topic, popped[1:2])  # the changed handle's ack: a stale one, the new checkpoint stays
        if self._pop(topic, -1, 3, invisible, TOPIC_FIRST + v % 40) == []:
            self._sometimes("pop:hidden")
        self._pop_wait(invisible - 1)  # a millisecond before the invisible time ends: nothing is revived yet
        self._pop(topic, -1, 3, invisible, RETRY_FIRST)
        self._sometimes("pop:before_the_end")
        if self._on("crash") and self.can_crash and not self.profile.strict and v % 3 == 0:
            self._crash_and_recover("kill")
            self._sometimes("pop:across_kill")
        self._pop_wait(1_000 + REVIVE_WAIT_MS)
        self._peek_revived(topic)
        self._ack(topic, popped[2:])  # a late ack: the message was revived
        for random_q in (RETRY_FIRST, RETRY_FIRST + 1, TOPIC_FIRST):
            again = self._pop(topic, -1, 4, invisible, random_q)
            self._ack(topic, again, batch=True)
        # orderly: one queue, attempts A1 and A2
        q = (v + 1) % queues
        self._pop_send(topic, q, 2)
        self._after()
        first = self._pop(topic, q, 2, invisible, TOPIC_FIRST, attempt="A1")
        if first and not self._pop(topic, q, 2, invisible, TOPIC_FIRST, attempt="A2"):
            self._sometimes("pop:orderly_blocked")
        self._ack(topic, first[:1])
        self._pop(topic, q, 2, invisible, TOPIC_FIRST, attempt="A2")
        self._pop_wait(invisible + 100)
        rest = self._pop(topic, q, 2, invisible, TOPIC_FIRST, attempt="A2")
        if rest:
            self._sometimes("pop:orderly_again")
        self._ack(topic, rest)
        self._after()


__all__ = ["POP_GROUP", "PopRules"]
