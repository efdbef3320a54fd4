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
from cannot be told. A revived copy handed out (its handle's retry flag) stands for its revive when no
``revive`` row came before it (a trace of the client's rows only): the revive is stepped at the hand-out's
time, a bound of when it happened.

A missing value never makes a finding (SPEC §8): a row lacking what a step reads is not stepped, and what
it could have changed is judged no more — a hand-out or change of a known message without its handle or
``deliver_ts`` ends that message's judgement; a pop whose group or msg_key is missing may be any message's
hand-out, so a revive of a message the replay holds READY proves nothing in that group; an orderly pop or
ack that cannot be placed (no queue, offset, handle, attempt id or answer) ends its queue's judgement, or
the group's orderly judgement when its queue, group or kind (no ``status`` nor handle) is not known. Each
taken row is counted in ``taken`` (``properties/coverage.py``).

"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

import attrs

from rmqspec.model import lifecycle as lc
from rmqspec.model.pop import NORMAL, POP_ORDER_REVIVE_QUEUE
from rmqspec.properties.codes import Code
from rmqspec.properties.inv_replay import Row, TableFinding, detail_of, found, int_or_none, row_label, table_row

__all__ = ["PopReplay", "judge_pops"]

ORDERLY, CONCURRENT = "ORDERLY", "CONCURRENT"
# an ack that met its checkpoint: the answer (SUCCESS), or a broker's own row (ACKED; orderly COMMITTED)
ACK_OK = ("SUCCESS", "ACKED", "COMMITTED")
KEYS = ("group", "topic", "queue_id", "queue_offset", "msg_key")
# the rows a finding names (a reason starts with the row it broke, as every table replay's does)
_POP = row_label(lc.POP, table_row(lc.POP, "READY", "pop", ""))
_REVIVE = row_label(lc.POP, table_row(lc.POP, "POPPED", "revive", "expired"))
_ORDER_POP = row_label(lc.POP_ORDER, table_row(lc.POP_ORDER, "IDLE", "pop", ""))
_ORDER_FREE = row_label(lc.POP_ORDER, table_row(lc.POP_ORDER, "INFLIGHT", "pop", "free"))


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
        # groups (None: any) with a row the replay could not place: an unseen hand-out (a later revive of a
        # ready message proves nothing) and an unseen orderly pop or ack (no orderly queue judged after it)
        self.blind: set[str | None] = set()
        self.blind_orderly: set[str | None] = set()
        self.taken: Counter[str] = Counter()  # the table rows taken, by label (properties/coverage.py)

    def feed(self, rows: Iterable[Row]) -> list[TableFinding]:
        out: list[TableFinding] = []
        for row in rows:
            event = row["event"]
            if event == "crash":
                self._crashed(row.get("status"))
            elif event in ("pop", "change_invisible", "ack", "revive"):
                kind = _kind(row)
                if row.get("group") is None or kind is None:  # which group, or which table, is not known
                    if event in ("pop", "ack"):
                        self.blind_orderly.add(row.get("group"))
                    if event == "pop" and kind != ORDERLY:
                        self.blind.add(row.get("group"))
                    continue
                finding = self._orderly(row) if kind == ORDERLY else self._concurrent(row)
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
            if row["event"] == "pop":
                self.blind.add(row["group"])
            return None
        name = (row["group"], key)
        if name in self.tainted:
            return None
        event, now = row["event"], int(row["ts"])
        m = self.messages.get(name)
        if event == "pop":
            due = int_or_none(row.get("deliver_ts"))
            if not isinstance(handle, str) or due is None:
                self._taint(name)  # a hand-out not stepped: what follows it is not judged
                return None
            r = int_or_none(row.get("reconsume_times"))
            if m is None:  # first seen: its reconsume times so far are the revives before
                m = self.messages[name] = _Message("READY", lc.PopVars(r=r or 0))
            fields = handle.split(" ")
            if m.rolled and m.state == "ACKED":
                # the pop offset (of its topic, or of the pop retry topic for a revived copy) rolled back over
                # it: a new hand-out, of this copy with its reconsume times, judged anew
                m.state, m.rolled, m.vars = "READY", False, lc.PopVars(r=r or 0)
            if len(fields) > 4 and fields[4] == NORMAL:  # the message in its own topic, not a revived copy
                origin = (row.get("topic"), row.get("queue_id"), row.get("queue_offset"))
                if m.origin is not None and origin != m.origin:
                    # two stored copies of one key (a producer's retry after a lost answer): its revived
                    # copies cannot be told apart, the key is judged no more
                    self.tainted.add(name)
                    del self.messages[name]
                    return None
                m.origin = origin
            elif len(fields) > 4 and m.state != "READY":  # a revived copy: it stands for its revive (unseen)
                before = m.proof
                bad = self._step(m, row, "revive", {"now": now})
                if bad is not None:
                    self._hand_out(m, row, handle, key, "pop", {"now": now, "invisible": due - now})
                    return found(Code.MESSAGE_LIFECYCLE, (before,), row, KEYS, f"{bad} (the revived copy handed out)")
            bad = self._step(m, row, "pop", {"now": now, "invisible": due - now})
            if bad is None and r is not None and r != m.vars.r:
                bad = (f"{_REVIVE} / revived: handed out with reconsume times {r}, revived {m.vars.r} times "
                       "(reconsumeTimes + 1 per revive)")
            before = m.proof
            m.handles[handle] = m.vars.h
            self.owner[(row["group"], handle)] = key
            m.proof = row
            return None if bad is None else found(Code.MESSAGE_LIFECYCLE, (before,), row, KEYS, bad)
        if m is None:
            return None
        if event == "revive":
            if m.state == "READY" and ({None, row["group"]} & self.blind):
                self._taint(name)  # its hand-out may be the row not placed
                return None
            before = m.proof
            bad = self._step(m, row, "revive", {"now": now})
            r = int_or_none(row.get("reconsume_times"))  # the revived copy's
            if bad is None and r is not None and r != m.vars.r:
                bad = (f"{_REVIVE} / revived: revived with reconsume times {r}, the revive number {m.vars.r} "
                       "(reconsumeTimes + 1)")
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

    def _taint(self, name: tuple[str, ...]) -> None:
        self.tainted.add(name)
        self.messages.pop(name, None)  # type: ignore[arg-type]
        self.queues.pop(name, None)  # type: ignore[arg-type]

    def _hand_out(self, m: _Message, row: Row, handle: str, key: str, action: str, args: dict[str, int]) -> None:
        """Go on as ``row`` says the message was handed out (after a finding: one fault, one finding)."""
        self._step(m, row, action, args)
        m.handles[handle] = m.vars.h
        self.owner[(row["group"], handle)] = key
        m.proof = row

    def _take(self, table: lc.Lifecycle, state: str, vars_: Any, action: str, args: dict[str, int]) -> tuple[str, Any]:
        """``table``'s enabled row taken (``Refused`` when none), counted in ``taken`` (the coverage)."""
        t = table.enabled(state, action, vars_, args)
        self.taken[row_label(table, t)] += 1
        return t.target, (table.effects[t.effect](vars_, args) if t.effect else vars_)

    def _step(self, m: _Message, row: Row, action: str, args: dict[str, int]) -> str | None:
        """``action`` through the table; refused: the reason, and the message goes on as the row says
        it did (a hand-out is POPPED with its handle, a revive READY with one more reconsume), so one
        fault is one finding."""
        try:
            m.state, m.vars = self._take(lc.POP, m.state, m.vars, action, args)
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
        group = row["group"]
        if {None, group} & self.blind_orderly:
            return None
        if topic is None or qid is None:  # which queue it moved is not known: none of the group's is judged
            self.blind_orderly.add(group)
            return None
        name = (group, topic, qid)
        if name in self.tainted:
            return None
        q = self.queues.setdefault(name, _Queue("IDLE", lc.PopOrderVars()))
        event, now, detail = row["event"], int(row["ts"]), detail_of(row)
        handle = _handle_fields(detail.get("handle"))
        if offset is None or (event == "ack" and (row.get("status") is None or handle is None)) \
                or (event == "pop" and (handle is None or "attempt_id" not in detail)):
            self._taint(name)  # a hand-out or an ack not placed: the queue's state is not known after it
            return None
        if event == "ack":
            # an ack counts for the batch in flight (its pop time: an older pop's ack changes nothing)
            if row.get("status") in ACK_OK and q.state == "INFLIGHT" and offset in q.batch \
                    and handle is not None and q.key is not None and handle[1] == q.key[1]:
                q.acked.add(offset)
                count = 0
                while q.vars.off + count in q.acked:
                    count += 1
                if count:  # commitAndNext: the offset moves to the first message not acked
                    q.state, q.vars = self._take(lc.POP_ORDER, q.state, q.vars, "commit",
                                                 {"now": now, "count": count})
                    q.batch -= set(range(q.vars.off - count, q.vars.off))
                    q.acked -= set(range(q.vars.off - count, q.vars.off))
            return None
        if event != "pop":
            return None
        due = int_or_none(row.get("deliver_ts"))
        if handle is None or due is None:
            self._taint(name)
            return None
        # one pop's rows share their handles' checkpoint start and pop time (ExtraInfoUtil)
        batch = (handle[0], handle[1], str(detail.get("attempt_id")))
        if q.state == "INFLIGHT" and q.proof is not None and batch == q.key and offset == q.vars.off + q.vars.n:
            q.vars = attrs.evolve(q.vars, n=q.vars.n + 1)  # the batch goes on (another message of its pop)
            q.batch.add(offset)
            return None
        if q.state == "IDLE" and q.proof is None:  # first seen: the consume offset is where it starts
            q.vars = attrs.evolve(q.vars, off=offset)
        number = self.attempts.setdefault(batch[2], len(self.attempts) + 1)
        args = {"now": now, "attempt": number, "batch": 1, "invisible": due - now}
        before = q.proof
        bad = None
        try:
            q.state, q.vars = self._take(lc.POP_ORDER, q.state, q.vars, "pop", args)
        except lc.Refused:
            bad = (f"{_ORDER_FREE}: queue handed to attempt {batch[2]!r} at {now} while the batch of attempt "
                   f"{q.key[2] if q.key else '?'} is in flight (visible again at {q.vars.pop_ts + q.vars.inv})")
            q.state, q.vars = "INFLIGHT", lc.POP_ORDER.effects["batch"](q.vars, args)
        q.batch, q.acked, q.proof, q.key = {offset}, set(), row, batch
        if bad is None and offset != q.vars.off:
            bad = f"{_ORDER_POP} / batch: batch starts at offset {offset}, the first message not acked is {q.vars.off}"
        if bad is not None:
            q.vars = attrs.evolve(q.vars, off=offset)  # go on from where the broker is
        return None if bad is None else found(Code.LOCK_LIFECYCLE, (before,), row, KEYS, bad)


def _handle_fields(text: Any) -> tuple[int, int] | None:
    """A handle's checkpoint start offset and pop time (ExtraInfoUtil's first two fields), or None."""
    parts = text.split(" ") if isinstance(text, str) else []
    start, pop_time = (int_or_none(p) for p in parts[:2]) if len(parts) >= 2 else (None, None)
    return None if start is None or pop_time is None else (start, pop_time)


def _kind(row: Row) -> str | None:
    """ORDERLY or CONCURRENT: a pop's ``status`` says, else its handle (ExtraInfoUtil: the revive queue id
    999 is an orderly pop's), an ack's handle; None when the row says neither (not placed)."""
    event, status = row["event"], row.get("status")
    if event == "revive" or (event != "ack" and status is not None):
        return ORDERLY if status == ORDERLY else CONCURRENT
    handle = detail_of(row).get("handle")
    parts = handle.split(" ") if isinstance(handle, str) else []
    if len(parts) <= 3:
        return None
    return ORDERLY if parts[3] == str(POP_ORDER_REVIVE_QUEUE) else CONCURRENT


def _why(m: _Message, action: str, args: dict[str, int]) -> str:
    """Why the table refused ``action``, after the row it broke: a hand-out is only ``READY --pop``, a
    revive only ``POPPED --revive[expired]``."""
    v, now = m.vars, args["now"]
    row = _POP if action == "pop" else _REVIVE
    if m.state == "ACKED":
        return f"{row}: {'handed out again' if action == 'pop' else 'revived'} at {now} after an ack met its checkpoint"
    if action == "pop" and now < v.pop_ts + v.inv:
        return f"{row}: handed out again at {now} while invisible until {v.pop_ts + v.inv} (popped at {v.pop_ts})"
    if action == "pop":
        return f"{row}: handed out again at {now} without a revive since its hand-out at {v.pop_ts}"
    if m.state == "POPPED":
        return f"{row}: revived at {now}, before pop time {v.pop_ts} + invisible time {v.inv}"
    return f"{row}: {action} at {now} with the message {m.state.lower()}"


def judge_pops(rows: Iterable[Row]) -> list[TableFinding]:
    """The pop tables' findings on ``rows`` (seq order; other events skipped)."""
    return PopReplay().feed(rows)
