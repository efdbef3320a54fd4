"""The pop ladder on the wall clock: a popping group against a broker on its own clock (real 5.x).

Theory of operation
-------------------
``PopWallRules`` (a mixin of ``PopRules``, ``conform_pop.py``) runs the pop ladder where ``wall`` is set.
A real broker cannot be told its draws, reads its own clock and revives on its own, so the manual
ladder's three assumptions are replaced:

- **No forcing** (POP-W6): ``randomQ`` is the broker's. The ladder's concurrent pops read a topic of one
  queue of their own (``TPC``), and never ask for fewer messages than the normal queue and the retry topic
  hold together, so which is read first cannot change *what* a pop hands out; a pop's answer is compared
  as a set (``_digest``: status and, per message, the retry flag, the queue and offset of a normal copy,
  UNIQ_KEY, reconsume times, body, invisible time, order count), not a sequence. Revived copies are
  identified by UNIQ_KEY: their retry-topic offsets may come in another order (8 revive queues).
- **One handle per broker**: each fork pops at the broker's pop time (the shared clock is set to the
  answer's ``popTime`` before the forks run), and keeps its own handles (``_wall_pop_handles``: the
  candidate's handle → the fork's, matched by retry flag, UNIQ_KEY and reconsume times; a change maps the
  candidate's new handle to the fork's new one, so an ack of the old handle stays a stale ack on every
  side); an ack or change gives every fork its own handle for the candidate's. The rows carry the
  candidate's.
- **Revive timing** (POP-3, POP-13: 2.0–3.3 s after the revive time): the machine never pops while the
  broker and the model may disagree on what was revived. It polls the pop retry topic (the observer's
  pulls of the candidate, compared with nothing) until every copy it expects is there, judging each
  copy's store time against its handle's revive time (never before it, at most ``revive_tolerance_ms``
  after: lateness kind ``pop_revive`` in the run's ``wall clock:`` line), then lets the model's clock
  pass the revive margin, so both revived the same copies before the next pop. An orderly re-pop is
  asked for ``tolerance_ms`` after the invisible time ends (real 5.x: 15–30 ms after).
- **bornTime** (POP-W13): ``RemoteBroker`` sends the machine's clock as the pop's bornTime, and 5.x answers
  POLLING_TIMEOUT ("poping message is timeout too much") when its own clock is more than pollTime + 500 ms
  past it; the machine's clock follows the wall only at its syncs, so it is synced right before each pop.
- **Commitlog offsets** (POP-1): the broker writes checkpoints and acks as timer messages (the wheel's
  queue, then the revive log); the model writes none. Before the ladder's second send batch and at its
  end the machine waits until the broker's pop writes are done (every handed-out handle's revive time,
  the wheel's precision and the tolerance) and ``SessionView.rebase`` measures the broker's commitlog end
  and the wheel queue's end again against the model's, so the rest of the example compares as before.
- **Kill crashes** (every sixth draw with the crash family on): after the revives were seen and the
  broker surely persisted its pop and revive offsets and its timer checkpoint (``_wall_persisted``), so
  both sides come back to one state; the late ack and the revived copies' pops follow the restart.

The ladder: an orderly topic first (group ``GPO``: A1 pops two, A2 is blocked, the first acked, A2
blocked again, past the invisible time A2 takes the rest, acked), quiescence and rebase; then the
concurrent topic (group ``GP``): three popped, the first acked twice, the second's invisible time
changed (its old handle acked: stale) or left, a pop while they are invisible, one ~300 ms before the
first invisible time ends, the revives awaited and judged, the observer's compared read of the retry
topic, the third acked late, the revived copies popped (one pop) and batch-acked; quiescence and rebase.
Coverage: the manual ladder's ``pop:*`` keys, and ``pop:wall_revive_judged``, ``pop:wall_rebased``.
"""

from __future__ import annotations

import time
from typing import Any

from rmqspec.model.message import MessageQueue
from rmqspec.model.pop import NORMAL, REVIVE_MARGIN_MS, pop_retry_topic
from rmqspec.model.results import BrokerError
from rmqspec.properties.wallclock import wall_ms

WALL_BEFORE_END_MS = 300  # the "just before the end" pop: the broker's clock is a few ms past the machine's
WALL_POLL_MS = 100
WALL_INVISIBLE_MS = (2_000, 3_000)


def _key(p: Any) -> tuple[str, str, int]:
    return (str(getattr(p.handle, "retry", NORMAL)), p.message.uniq_key, p.message.reconsume_times)


def _digest(result: Any) -> tuple[Any, ...]:
    """A pop's answer as a set: what it handed out, not in which order (module docstring)."""
    items = set()
    for p in result.messages:
        retry, key, times = _key(p)
        where = (p.handle.queue_id, p.handle.queue_offset) if retry == NORMAL else None
        items.add((retry, where, key, times, p.message.body, p.handle.invisible_time, p.order_count))
    return (getattr(result.status, "name", str(result.status)), frozenset(items))


class PopWallRules:
    """Mixin of ``PopRules``: the ladder on the wall clock (module docstring)."""

    # ------------------------------------------------------------------
    # requests: each fork at the broker's time, with its own handles

    def _wall_pop_call(self, what: str, ask: Any) -> Any:
        """``ask(broker)`` → a PopResult; the candidate's raw answer (None when refused)."""
        seen: dict[str, Any] = {}
        clock = self.clock

        def candidate(b: Any) -> Any:
            self._sync()  # bornTime is the machine's clock: 5.x answers POLLING_TIMEOUT past 500 ms (POP-W13)
            seen["raw"] = ask(b)
            return _digest(seen["raw"])

        def fork(b: Any) -> Any:
            raw = seen.get("raw")
            if raw is not None and raw.pop_time > clock.now():
                clock.set(raw.pop_time)  # the model pops when the broker did
            res = ask(b)
            theirs = {_key(p): p.handle for p in (raw.messages if raw is not None else ())}
            handles = dict(getattr(b, "_wall_pop_handles", {}))
            for p in res.messages:
                if _key(p) in theirs:
                    handles[theirs[_key(p)]] = p.handle
            b._wall_pop_handles = handles
            return _digest(res)

        out = self._call(what, fork, candidate_fn=candidate)
        self.model_time = max(self.model_time, self.clock.now())
        return out, seen.get("raw")

    def _handle_for(self, b: Any, p: Any) -> Any:
        """The handle broker ``b`` gave for the message of the candidate's ``p``."""
        if type(self).wall is None or b is self.ls.candidate:
            return p.handle
        return getattr(b, "_wall_pop_handles", {}).get(p.handle, p.handle)

    def _wall_change(self, what: str, group: str, topic: str, p: Any, invisible: int) -> Any:
        seen: dict[str, Any] = {}
        clock = self.clock

        def candidate(b: Any) -> Any:
            seen["raw"] = b.change_invisible_time(group, topic, p.handle, invisible)
            return (seen["raw"].invisible_time, seen["raw"].queue_offset)

        def fork(b: Any) -> Any:
            raw = seen.get("raw")
            if raw is not None and raw.pop_time > clock.now():
                clock.set(raw.pop_time)
            new = b.change_invisible_time(group, topic, self._handle_for(b, p), invisible)
            if raw is not None:
                b._wall_pop_handles = {**getattr(b, "_wall_pop_handles", {}), raw: new}
            return (new.invisible_time, new.queue_offset)

        out = self._call(what, fork, candidate_fn=candidate)
        self.model_time = max(self.model_time, self.clock.now())
        return out, seen.get("raw")

    # ------------------------------------------------------------------
    # waiting for the broker

    def _wall_pop_sleep(self, target: int) -> None:
        if target > self._now():
            self._wall_sleep(target)

    def _retry_copies(self, topic: str, group: str) -> list[Any]:
        """The candidate's pop retry topic as the observer reads it now (compared with nothing)."""
        retry = pop_retry_topic(topic, group, self.config.enable_retry_topic_v2)
        try:
            return list(self.ls.candidate.pull(self.obs, MessageQueue(retry, 0), 0, 32, "*").messages)
        except BrokerError:
            return []

    def _await_revives(self, topic: str, due: dict[str, int]) -> None:
        """Poll the retry topic until every key in ``due`` (UNIQ_KEY → revive time) was revived; judge
        each copy's lateness; then the model's clock past the revive margin (module docstring)."""
        if not due:
            return
        wall = type(self).wall
        deadline = max(due.values()) + wall.revive_tolerance_ms + WALL_POLL_MS
        copies: dict[str, Any] = {}
        while True:
            copies = {m.uniq_key: m for m in self._retry_copies(topic, self.pop_group)}
            if all(k in copies for k in due) or wall_ms() > deadline:
                break
            time.sleep(WALL_POLL_MS / 1000)
        for key, revive in sorted(due.items()):
            m = copies.get(key)
            if m is None:
                self._fail(f"wall-clock window violated: pop revive of {key} (revive time {revive}) not in the "
                           f"retry topic {wall.revive_tolerance_ms} ms after it; an un-acked message must be revived")
                continue
            late = m.store_ts - revive
            if late < 0:
                self._fail(f"invariant POP_REVIVED_EARLY violated: {key} revived at {m.store_ts}, {-late} ms "
                           f"before its invisible time ended ({revive})")
            if late > wall.revive_tolerance_ms:
                self._fail(f"wall-clock window violated: pop revive of {key} stored {late} ms after its revive "
                           f"time ({revive}); tolerance {wall.revive_tolerance_ms} ms")
            type(self).lateness.note("pop_revive", late)
            self.changed_at(m.store_ts)  # the revive moved the revive progress (a consumer offset)
            self._sometimes("pop:wall_revive_judged")
        self._wall_pop_sleep(max(due.values()) + REVIVE_MARGIN_MS + 1)  # the model revives them too
        self._wall_tick()

    def _pop_quiesce(self, handles: list[Any]) -> None:
        """Wait until the broker's checkpoints and acks of ``handles`` reached the revive log, then
        measure the bases again (``SessionView.rebase``; module docstring)."""
        wall = type(self).wall
        if handles:
            precision = getattr(self.config, "timer_precision_ms", 1_000)
            self._wall_pop_sleep(max(h.revive_time for h in handles) + precision + wall.tolerance_ms)
        model = self.ls.model
        rebase = getattr(self.ls.candidate, "rebase", None)
        if model is None or rebase is None:
            return
        store = model.store
        end = store.records[-1].end if store.records else 0
        queues = {mq: store.max_offset(mq.topic, mq.queue_id) for mq in self.ls.candidate.queue_base}
        try:
            rebase(self.obs, self.clock, end, queues)
        except Exception as exc:
            self._raised("rebase() [after the pop ladder]", exc)
            raise
        self._sometimes("pop:wall_rebased")

    # ------------------------------------------------------------------
    # the ladder

    def pop_wall_ladder(self, v: int) -> None:
        """The ladder on the wall clock (module docstring)."""
        wall = type(self).wall
        invisible = WALL_INVISIBLE_MS[v % len(WALL_INVISIBLE_MS)]
        out: list[Any] = []  # every handle handed out: quiescence waits for their revive times
        # orderly first: its own topic, one queue
        otopic = f"TPO{self.ns}"
        if otopic not in self.topics:
            self._create_topic(otopic, 1)
        self._pop_send(otopic, 0, 2)
        self._after()
        first = self._pop(otopic, 0, 2, invisible, 0, attempt="A1")
        out += [p.handle for p in first]
        if first and not self._pop(otopic, 0, 2, invisible, 0, attempt="A2"):
            self._sometimes("pop:orderly_blocked")
        self._ack(otopic, first[:1])
        self._pop(otopic, 0, 2, invisible, 0, attempt="A2")
        if first:
            self._wall_pop_sleep(max(p.handle.revive_time for p in first) + wall.tolerance_ms)
        rest = self._pop(otopic, 0, 2, invisible, 0, attempt="A2")
        out += [p.handle for p in rest]
        if rest:
            self._sometimes("pop:orderly_again")
        self._ack(otopic, rest)
        self._after()
        self._pop_quiesce(out)
        # concurrent: its own topic, one queue
        topic = f"TPC{self.ns}"
        if topic not in self.topics:
            self._create_topic(topic, 1)
        self._pop_send(topic, 0, 3)
        self._after()
        popped = self._pop(topic, -1, 3, invisible, 0)
        out = [p.handle for p in popped]
        due = {p.message.uniq_key: p.handle.revive_time for p in popped[1:]}
        self._ack(topic, popped[:1])
        self._ack(topic, popped[:1])  # again: an acked message stays acked
        if len(popped) > 1 and v % 2 == 0:
            new = self._change(topic, popped[1], invisible + 1_000)
            if new is not None:
                out.append(new)
                due[popped[1].message.uniq_key] = new.revive_time
                self._ack(topic, popped[1:2])  # the old handle's ack: a stale one
        if self._pop(topic, -1, 3, invisible, 0) == []:
            self._sometimes("pop:hidden")
        if popped:
            self._wall_pop_sleep(min(p.handle.revive_time for p in popped) - WALL_BEFORE_END_MS)
            self._pop(topic, -1, 3, invisible, 0)  # nothing may be revived yet
            self._sometimes("pop:before_the_end")
        self._await_revives(topic, due)
        if self._on("crash") and self.can_crash and not self.profile.strict and v % 6 == 0:
            self._wall_persisted()
            self._crash_and_recover("kill")
            self._sometimes("pop:across_kill")
        self._peek_revived(topic)
        self._ack(topic, popped[2:])  # a late ack: the message was revived
        again = self._pop(topic, -1, 4, invisible, 0)
        out += [p.handle for p in again]
        self._ack(topic, again, batch=True)
        self._after()
        self._pop_quiesce(out)


__all__ = ["PopWallRules"]
