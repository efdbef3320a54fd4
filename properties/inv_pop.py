"""The pop tables replayed on a popping group's rows: MESSAGE_LIFECYCLE (POP) and LOCK_LIFECYCLE (POP_ORDER).

Theory of operation
-------------------
``model/lifecycle.py``'s POP table is one message popped by one group (5.x, concurrently) and POP_ORDER
one queue popped with order=true; ``properties/theorems_pop.py`` proves their guarantees for all
parameters. This module steps the rows a popping group leaves (``pop``, ``change_invisible``, ``ack``,
``revive``, ``crash``) through the tables' own ``Lifecycle.step``; a step the table refuses, or a hand-out
whose reconsume times are not the table's count of revives, is a finding. What each row is:

- ``pop`` (``status`` CONCURRENT or ORDERLY): a message handed out, ``ts`` the pop time, ``deliver_ts``
  the time it is visible again unless acked (pop time + invisible time), ``detail.handle`` its handle
  (ExtraInfoUtil's text: the rows of one pop share its checkpoint start and pop time); orderly:
  ``detail.attempt_id``;
- ``change_invisible``: ``detail.handle`` changed to ``detail.new_handle``, visible again at
  ``deliver_ts``;
- ``ack``: ``detail.handle`` acked; ``status`` the client's answer (SUCCESS) or the broker's own row's
  (ACKED: it met its checkpoint; orderly COMMITTED); any other status is not stepped;
- ``revive``: the message put into the pop retry topic (the broker's row, or the conformance machine's
  when it pops a retry copy it had not seen: ``ts`` is then the pop's, a bound of the revive's time);
- ``crash``: what the broker persists of pop is older than the crash (the pop offsets and the revive
  progress are consumer offsets, flushed every few seconds; the orderly infos every 10 s): it may hand
  out again, and revive again, anything popped before it. The messages and queues popped before a crash
  are judged no more (``tainted``: a checker never reports what it cannot prove) — but for a message an
  ack settled before a kill (``status`` kill): the ack is a commitlog record the kill keeps and the revive
  service finds again, so it is never revived; it may be handed out again from its topic (the pop offset
  rolled back), and is then judged anew.

Findings (each names the rows that prove it): a message handed out again while its live hand-out is invisible,
or after an ack that met its checkpoint; a revive before pop time + invisible time, or of an acked message; a
hand-out whose reconsume times are not the revives so far (MESSAGE_LIFECYCLE); an orderly batch handed to
another attempt while the queue's batch is in flight, or not starting at the first message not acked
(LOCK_LIFECYCLE). An orderly ack commits when the acks reach the batch's first messages (the table's
``commit`` of that many); an ack of an older pop's handle (its pop time) counts for nothing. An ack at or
after the hand-out's deadline is not stepped: the revive may have run before it (``pop_expired``), so what
follows it is not judged by that ack. A change of a stale handle (5.3.3 accepts it and writes one more
checkpoint: two revives may follow) ends the message's judgement. A msg_key handed out from two places in its
topic (a producer's retry after a lost answer stored it twice) is judged no more: which copy a revive comes
from cannot be told. Rows without what a step reads (msg_key, group, a handle, ``deliver_ts``) are skipped.

"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from typing import Any

import attrs

from rmqspec.model import lifecycle as lc
from rmqspec.model.pop import NORMAL, POP_ORDER_REVIVE_QUEUE
from rmqspec.properties.codes import Code
from rmqspec.properties.history import History
from rmqspec.properties.inv_base import Invariant, Violation
from rmqspec.properties.inv_replay import Row, TableFinding, detail_of, found, int_or_none
from rmqspec.properties.inv_tables import EventRow

__all__ = ["POP_INVARIANTS", "PopReplay", "judge_pops"]

ORDERLY = "ORDERLY"
# an ack that met its checkpoint: the answer (SUCCESS), or a broker's own row (ACKED; orderly COMMITTED)
ACK_OK = ("SUCCESS", "ACKED", "COMMITTED", None)
KEYS = ("group", "topic", "queue_id", "queue_offset", "msg_key")


@attrs.define
class _Message:
    state: str
    vars: lc.PopVars
    handles: dict[str, int] = attrs.Factory(dict)  # a handle's text -> its number (the table's h)
    proof: Row | None = None  # the row of the live hand-out
    origin: tuple[Any, ...] | None = None  # where the message itself (not a revived copy) was popped
    rolled: bool = False  # acked before a kill: it may be handed out again from its topic (module docstring)


@attrs.define
class _Queue:
    state: str
    vars: lc.PopOrderVars
    batch: set[int] = attrs.Factory(set)  # the queue offsets of the batch in flight
    acked: set[int] = attrs.Factory(set)
    proof: Row | None = None  # the first row of the batch in flight
    key: tuple[int, int, str] | None = None  # its handles' checkpoint start and pop time, and its attempt


class PopReplay:
    """The pop tables over rows fed in seq order (``feed`` may be called again with the rows that follow)."""

    def __init__(self) -> None:
        self.messages: dict[tuple[str, str], _Message] = {}
        self.queues: dict[tuple[str, str, int], _Queue] = {}
        self.attempts: dict[str, int] = {}
        self.tainted: set[tuple[str, ...]] = set()
        self.owner: dict[tuple[str, str], str] = {}  # (group, a handle's text) -> the msg_key it was handed with

    def feed(self, rows: Iterable[Row]) -> list[TableFinding]:
        out: list[TableFinding] = []
        for row in rows:
            event = row["event"]
            if event == "crash":
                self._crashed(row.get("status"))
            elif event in ("pop", "change_invisible", "ack", "revive") and row.get("group") is not None:
                orderly = row.get("status") == ORDERLY or (event == "ack" and _orderly_handle(row))
                finding = self._orderly(row) if orderly else self._concurrent(row)
                if finding is not None:
                    out.append(finding)
        return out

    def _crashed(self, kind: Any) -> None:
        """After a kill only what an ack settled stays judged: an ack is a commitlog record a kill keeps, so
        the revive service, reading the log again, still finds it — an acked message is never revived — but
        the pop offsets roll back (the message may be handed out again from its topic: it is then judged
        anew). Everything else, and everything after a power loss, is judged no more (module docstring)."""
        for name, m in list(self.messages.items()):
            if kind == "kill" and m.state == "ACKED":
                m.rolled = True
            else:
                self.tainted.add(name)
                del self.messages[name]
        self.tainted |= set(self.queues)
        self.queues.clear()

    # -- one message, concurrently ------------------------------------------------------------------

    def _concurrent(self, row: Row) -> TableFinding | None:
        handle = detail_of(row).get("handle")
        key = row.get("msg_key")
        if key is None and isinstance(handle, str):  # a broker's ack or change names the handle only
            key = self.owner.get((row["group"], handle))
        if key is None:
            return None
        name = (row["group"], key)
        if name in self.tainted:
            return None
        event, now = row["event"], int(row["ts"])
        m = self.messages.get(name)
        if event == "pop":
            due = int_or_none(row.get("deliver_ts"))
            if not isinstance(handle, str) or due is None:
                return None
            r = int_or_none(row.get("reconsume_times"))
            if m is None:  # first seen: its reconsume times so far are the revives before
                m = self.messages[name] = _Message("READY", lc.PopVars(r=r or 0))
            fields = handle.split(" ")
            if m.rolled and m.state == "ACKED" and len(fields) > 4 and fields[4] == NORMAL:
                m.state, m.rolled = "READY", False  # the pop offset rolled back over it: a new hand-out
            if len(fields) > 4 and fields[4] == NORMAL:  # the message in its own topic, not a revived copy
                origin = (row.get("topic"), row.get("queue_id"), row.get("queue_offset"))
                if m.origin is not None and origin != m.origin:
                    # two stored copies of one key (a producer's retry after a lost answer): its revived
                    # copies cannot be told apart, the key is judged no more
                    self.tainted.add(name)
                    del self.messages[name]
                    return None
                m.origin = origin
            bad = self._step(m, row, "pop", {"now": now, "invisible": due - now})
            if bad is None and r is not None and r != m.vars.r:
                bad = f"handed out with reconsume times {r}, revived {m.vars.r} times (reconsumeTimes + 1 per revive)"
            before = m.proof
            m.handles[handle] = m.vars.h
            self.owner[(row["group"], handle)] = key
            m.proof = row
            return None if bad is None else found(Code.MESSAGE_LIFECYCLE, (before,), row, KEYS, bad)
        if m is None:
            return None
        if event == "revive":
            before = m.proof
            bad = self._step(m, row, "revive", {"now": now})
            r = int_or_none(row.get("reconsume_times"))  # the revived copy's
            if bad is None and r is not None and r != m.vars.r:
                bad = f"revived with reconsume times {r}, the revive number {m.vars.r} (reconsumeTimes + 1)"
            return None if bad is None else found(Code.MESSAGE_LIFECYCLE, (before,), row, KEYS, bad)
        if not isinstance(handle, str):
            return None
        number = m.handles.get(handle, -1)
        if event == "ack":
            if row.get("status") not in ACK_OK:
                return None
            if m.state == "POPPED" and number == m.vars.h and lc.pop_expired(m.vars.pop_ts, m.vars.inv, now):
                return None  # the revive may have come first: the ack proves nothing (module docstring)
            self._step(m, row, "ack", {"now": now, "handle": number})
            return None
        new, due = detail_of(row).get("new_handle"), int_or_none(row.get("deliver_ts"))
        if m.state != "POPPED" or number != m.vars.h or not isinstance(new, str) or due is None:
            self.tainted.add(name)  # a stale handle's change: not a row of the table (module docstring)
            del self.messages[name]
            return None
        self._step(m, row, "change", {"now": now, "handle": number, "invisible": due - now})
        m.handles[new] = m.vars.h
        self.owner[(row["group"], new)] = key
        m.proof = row
        return None

    @staticmethod
    def _step(m: _Message, row: Row, action: str, args: dict[str, int]) -> str | None:
        """``action`` through the table; refused: the reason, and the message goes on as the row says
        it did (a hand-out is POPPED with its handle, a revive READY with one more reconsume), so one
        fault is one finding."""
        try:
            m.state, m.vars = lc.POP.step(m.state, m.vars, action, args)
        except lc.Refused:
            why = _why(m, action, args)
            if action == "pop":
                m.state, m.vars = "POPPED", lc.POP.effects["handle"](m.vars, args)
            elif action == "revive":
                m.state, m.vars = "READY", lc.POP.effects["revived"](m.vars, args)
            return why
        return None

    # -- one queue, orderly --------------------------------------------------------------------------

    def _orderly(self, row: Row) -> TableFinding | None:
        topic, qid, offset = row.get("topic"), int_or_none(row.get("queue_id")), int_or_none(row.get("queue_offset"))
        if topic is None or qid is None or offset is None:
            return None
        name = (row["group"], topic, qid)
        if name in self.tainted:
            return None
        q = self.queues.setdefault(name, _Queue("IDLE", lc.PopOrderVars()))
        event, now, detail = row["event"], int(row["ts"]), detail_of(row)
        if event == "ack":
            handle = _handle_fields(detail.get("handle"))
            # an ack counts for the batch in flight (its pop time: an older pop's ack changes nothing)
            if row.get("status") in ACK_OK and q.state == "INFLIGHT" and offset in q.batch \
                    and handle is not None and q.key is not None and handle[1] == q.key[1]:
                q.acked.add(offset)
                count = 0
                while q.vars.off + count in q.acked:
                    count += 1
                if count:  # commitAndNext: the offset moves to the first message not acked
                    q.state, q.vars = lc.POP_ORDER.step(q.state, q.vars, "commit", {"now": now, "count": count})
                    q.batch -= set(range(q.vars.off - count, q.vars.off))
                    q.acked -= set(range(q.vars.off - count, q.vars.off))
            return None
        if event != "pop":
            return None
        handle, due = _handle_fields(detail.get("handle")), int_or_none(row.get("deliver_ts"))
        if handle is None or due is None:
            return None
        # one pop's rows share their handles' checkpoint start and pop time (ExtraInfoUtil)
        batch = (handle[0], handle[1], str(detail.get("attempt_id")))
        if q.state == "INFLIGHT" and q.proof is not None and batch == q.key:
            if offset != q.vars.off + q.vars.n:
                return found(Code.LOCK_LIFECYCLE, (q.proof,), row, KEYS, f"batch message at offset {offset}, "
                             f"the batch from {q.vars.off} has {q.vars.n} before it")
            q.vars = attrs.evolve(q.vars, n=q.vars.n + 1)
            q.batch.add(offset)
            return None
        if q.state == "IDLE" and q.proof is None:  # first seen: the consume offset is where it starts
            q.vars = attrs.evolve(q.vars, off=offset)
        number = self.attempts.setdefault(batch[2], len(self.attempts) + 1)
        args = {"now": now, "attempt": number, "batch": 1, "invisible": due - now}
        before = q.proof
        bad = None
        try:
            q.state, q.vars = lc.POP_ORDER.step(q.state, q.vars, "pop", args)
        except lc.Refused:
            bad = (f"queue handed to attempt {batch[2]!r} at {now} while the batch of attempt "
                   f"{q.key[2] if q.key else '?'} is in flight (visible again at {q.vars.pop_ts + q.vars.inv})")
            q.state, q.vars = "INFLIGHT", lc.POP_ORDER.effects["batch"](q.vars, args)
        q.batch, q.acked, q.proof, q.key = {offset}, set(), row, batch
        if bad is None and offset != q.vars.off:
            bad = f"batch starts at offset {offset}, the first message not acked is {q.vars.off}"
        if bad is not None:
            q.vars = attrs.evolve(q.vars, off=offset)  # go on from where the broker is
        return None if bad is None else found(Code.LOCK_LIFECYCLE, (before,), row, KEYS, bad)


def _handle_fields(text: Any) -> tuple[int, int] | None:
    """A handle's checkpoint start offset and pop time (ExtraInfoUtil's first two fields), or None."""
    parts = text.split(" ") if isinstance(text, str) else []
    start, pop_time = (int_or_none(p) for p in parts[:2]) if len(parts) >= 2 else (None, None)
    return None if start is None or pop_time is None else (start, pop_time)


def _orderly_handle(row: Row) -> bool:
    """An ack whose handle is an orderly pop's (ExtraInfoUtil: the revive queue id 999)."""
    handle = detail_of(row).get("handle")
    parts = handle.split(" ") if isinstance(handle, str) else []
    return len(parts) > 3 and parts[3] == str(POP_ORDER_REVIVE_QUEUE)


def _why(m: _Message, action: str, args: dict[str, int]) -> str:
    v, now = m.vars, args["now"]
    if m.state == "ACKED":
        return f"{'handed out again' if action == 'pop' else 'revived'} at {now} after an ack met its checkpoint"
    if action == "pop" and now < v.pop_ts + v.inv:
        return f"handed out again at {now} while invisible until {v.pop_ts + v.inv} (popped at {v.pop_ts})"
    if action == "pop":
        return f"handed out again at {now} without a revive since its hand-out at {v.pop_ts}"
    if action == "revive" and m.state == "POPPED":
        return f"revived at {now}, before pop time {v.pop_ts} + invisible time {v.inv}"
    return f"{action} at {now} with the message {m.state.lower()}"


def judge_pops(rows: Iterable[Row]) -> list[TableFinding]:
    """The pop tables' findings on ``rows`` (seq order; other events skipped)."""
    return PopReplay().feed(rows)


# ---------------------------------------------------------------------------
# On the conformance machine's ghost history


@attrs.define
class _Fed:
    ref: weakref.ref[History]
    replay: PopReplay = attrs.Factory(PopReplay)
    seen: int = 0
    found: list[TableFinding] = attrs.Factory(list)


_FED: dict[int, _Fed] = {}


def _fed(h: History) -> _Fed:
    f = _FED.get(id(h))
    if f is None or f.ref() is not h or f.seen > len(h.events):
        while len(_FED) >= 4:
            del _FED[next(iter(_FED))]
        f = _FED[id(h)] = _Fed(weakref.ref(h))
    f.found += f.replay.feed(EventRow(ev) for ev in h.events[f.seen:])
    f.seen = len(h.events)
    return f


def _violations(h: History, code: str) -> list[Violation]:
    return [Violation(code=f.code, step=h.step_of[f.seqs[-1]], reason=f.reason, seq=f.seqs[-1])
            for f in _fed(h).found if f.code == code]


POP_INVARIANTS: tuple[Invariant, ...] = (
    Invariant("PopLifecycleProperty", Code.MESSAGE_LIFECYCLE, "always",
              "A popped message is not handed out again before its invisible time ends nor after an ack met its "
              "checkpoint, is revived only after it and with reconsume times + 1.",
              "PopMessageProcessor, AckMessageProcessor, ChangeInvisibleTimeProcessor, PopReviveService "
              "(model/lifecycle.py POP)",
              lambda h: _violations(h, Code.MESSAGE_LIFECYCLE)),
    Invariant("PopOrderLifecycleProperty", Code.LOCK_LIFECYCLE, "always",
              "An orderly popped queue is handed to another attempt only when its batch is acked or past its "
              "invisible time, and always from the first message not acked.",
              "ConsumerOrderInfoManager.checkBlock / commitAndNext (model/lifecycle.py POP_ORDER)",
              lambda h: _violations(h, Code.LOCK_LIFECYCLE)),
)
