"""The MESSAGE table replayed on send-backs and the copies they make: MESSAGE_LIFECYCLE.

Theory of operation
-------------------
``model/lifecycle.py``'s MESSAGE has its guards and effects where a consumer
hands a failed copy back: ``DELIVERED --send_back[retry]--> SCHEDULED`` sets
r + 1 and ``deliver_ts = now + D(level)`` (the routed level: 3 + r, or the
requested one, clamped to the table), ``--send_back[dlq]--> DEAD`` sets
r + 1, ``send_back_failed`` writes nothing, and ``SCHEDULED --fire[due]-->
STORED`` changes nothing. A trace shows a send-back (``send_back``: the
failed copy, the routing in ``status``, the new copy's ``reconsume_times``,
``delay_level`` and ``deliver_ts``) and, from the broker, the copies:
``store`` in SCHEDULE_TOPIC_XXXX (a retry copy: reconsume_times ≥ 1; 0 is a
delayed send's) or in ``%DLQ%{group}``, then the fire (``schedule_fire``,
``store`` in ``%RETRY%{group}``). Per msg_key, rows in ``seq`` order:

- **the copy a send-back made** (the guards ``retry`` / ``dlq`` and their
  effects; ``send_back_failed``): a retry copy is judged when the key's
  retry copies so far do not outnumber its earlier RETRY send-backs (it
  answers one of them; a broker that records the copy before the send-back
  is never judged this way, as DLQ_DELAYED does), a DLQ copy likewise with
  the DLQ send-backs. It must agree with some earlier send-back of the key
  that succeeded (``detail.code`` absent or SUCCESS): same group, the copy's
  place is the routing's (``status`` RETRY → scheduled, DLQ → the DLQ),
  reconsume_times is the effect's r + 1, and a scheduled copy's level is the
  routed level — the table's (``MESSAGE.step`` with ``route_send_back``)
  when the send-back carries its requested level (``detail.requested_level``,
  ``detail.max``: the conformance machine's), and the one the send-back
  names. None agreeing is MESSAGE_LIFECYCLE. A copy that outnumbers the
  send-backs of its own place is judged only as the *other* place's: when an
  earlier send-back of the other routing with the copy's
  reconsume_times is still unanswered (a copy scheduled where the send-back
  routed it to the DLQ, or the reverse), unless some earlier send-back
  agrees. (A send-back whose own routing is not the table's is DLQ_EARLY's
  or DLQ_MISSED's.)
- **the fire** (``fire[due]``'s effect: none): a ``schedule_fire`` or a
  ``store`` in ``%RETRY%`` carries the reconsume_times of some earlier
  SCHEDULE_TOPIC_XXXX copy of the key (of its group; judged only once a
  store surely in SCHEDULE_TOPIC_XXXX precedes it, a topic-less one may
  match but never makes the rule judge); and a copy in
  ``%RETRY%`` with reconsume_times 0 is impossible (only the retry effect,
  r + 1, puts copies there). Fired early is DELAY_EARLY's / RETRY_EARLY's.
- **where a delayed send's copy fires** (``fire[due]``'s effect: none, so the
  copy keeps REAL_TOPIC / REAL_QID — messageTimeup puts it in the topic and
  queue the producer sent it to): a ``schedule_fire`` naming a topic other
  than ``%RETRY%…`` / ``%DLQ%…`` and a queue must name those of some earlier
  ``send`` of the key that may be delayed (delay_level absent or above 0);
  judged only when every such send names both (and no send that may be
  delayed lacks its msg_key: ``Unkeyed.sends``).

The retry effect's ``deliver_ts = now + D(level)`` is not compared: a
send-back's ``ts`` is its recorder's clock, not the broker's store time, so
only "not earlier" is sound (RETRY_EARLY); the level pins the delay.

Unknown (``inv_replay.py``): a null compares equal to anything; a store that
may be a copy (no topic, or a schedule copy without reconsume_times) counts
as one but is not judged; a trace with a ``send_back``, or a ``store`` that
may be a copy, lacking its msg_key has the copy rule off, one with a ``store``
that may be a schedule copy lacking it the fire rule (``Unkeyed``).
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from rmqspec.model.lifecycle import DLQ, MESSAGE, RETRY, MessageVars, route_send_back
from rmqspec.properties.codes import AuditParams, Code
from rmqspec.properties.inv_replay import (
    ALL_KEYED,
    DLQ_PREFIX,
    RETRY_PREFIX,
    SCHEDULE_TOPIC,
    Row,
    TableFinding,
    Unkeyed,
    detail_of,
    found,
    int_or_none,
    may_be_delayed,
    row_label,
    table_row,
)

__all__ = ["MESSAGE_KEYS", "MessageReplay", "judge_messages"]

MESSAGE_KEYS = ("group", "topic", "msg_key")
_RETRY = table_row(MESSAGE, "DELIVERED", "send_back", "retry")
_DEAD = table_row(MESSAGE, "DELIVERED", "send_back", "dlq")
_FAILED = table_row(MESSAGE, "DELIVERED", "send_back_failed", "")
_FIRE = table_row(MESSAGE, "SCHEDULED", "fire", "due")
_TARGET = {RETRY: _RETRY.target, DLQ: _DEAD.target}  # a send-back's status -> where its copy goes
_MAYBE = "?"


@attrs.frozen
class _Expect:
    """What one send-back makes, by the table: its copy's place (a target state), r and level."""

    row: Row
    ok: bool  # the broker accepted it (else ``send_back_failed``: nothing is written)
    group: str | None
    target: str | None  # SCHEDULED / DEAD; None: unknown
    r: int | None
    levels: tuple[int, ...]  # every level it is known to schedule at (the table's, the named one)


@attrs.define
class _Key:
    """One msg_key's replay state: its send-backs, its copies per place, its possible schedule copies."""

    backs: list[_Expect] = attrs.field(factory=list)
    copies: dict[str, int] = attrs.field(factory=lambda: {_RETRY.target: 0, _DEAD.target: 0})
    scheduled: list[Row] = attrs.field(factory=list)  # stores that may be SCHEDULE_TOPIC_XXXX copies
    # where the sends that may be delayed went: (topic, queue_id), None for one that does not say
    sent_to: list[tuple[str, int] | None] = attrs.field(factory=list)


class MessageReplay:
    """The message replay, resumable: ``feed`` takes the next rows of a trace (seq order) and returns
    the findings they add (each key's state is its own)."""

    def __init__(self, params: AuditParams) -> None:
        self.params = params
        self.keys: dict[str, _Key] = {}

    def feed(self, rows: Iterable[Row], unkeyed: Unkeyed = ALL_KEYED) -> list[TableFinding]:
        out: list[TableFinding] = []
        for row in rows:
            if row["event"] in ("send", "send_back", "store", "schedule_fire") and row.get("msg_key") is not None:
                state = self.keys.get(row["msg_key"])
                if state is None:
                    state = self.keys[row["msg_key"]] = _Key()
                finding = self._row(state, row, unkeyed)
                if finding is not None:
                    out.append(finding)
        return out

    def _row(self, key: _Key, row: Row, unkeyed: Unkeyed) -> TableFinding | None:
        event, topic = row["event"], row.get("topic")
        finding = None
        if event == "send":
            if may_be_delayed(row):
                queue = int_or_none(row.get("queue_id"))
                key.sent_to.append(None if topic is None or queue is None else (topic, queue))
            return None
        if event == "send_back":
            key.backs.append(_expect(row, self.params))
        elif event == "store" and (place := _copy_place(topic, row.get("reconsume_times"))) is not None:
            for p in key.copies if place == _MAYBE else (place,):
                key.copies[p] += 1
            if place != _MAYBE and not (unkeyed.send_backs or unkeyed.copies):
                finding = _judge_copy(row, place, key.backs, key.copies)
        if event == "schedule_fire" or (event == "store" and topic is not None and topic.startswith(RETRY_PREFIX)):
            finding = _judge_fire(row, key.scheduled, unkeyed)
        if event == "schedule_fire" and finding is None and not unkeyed.sends:
            finding = _judge_destination(row, key.sent_to)
        if event == "store" and topic in (None, SCHEDULE_TOPIC):
            key.scheduled.append(row)
        return finding


def judge_messages(rows: Iterable[Row], params: AuditParams, unkeyed: Unkeyed = ALL_KEYED) -> list[TableFinding]:
    """MESSAGE_LIFECYCLE findings of ``rows`` (seq order; other events are skipped)."""
    return MessageReplay(params).feed(rows, unkeyed)


def _copy_place(topic: str | None, r: int | None) -> str | None:
    """Where a stored copy is by the table (SCHEDULED / DEAD) if a send-back made it, ``_MAYBE``
    when the row cannot say, None when it is no such copy."""
    if topic is None:
        return _MAYBE
    if topic.startswith(DLQ_PREFIX):
        return _DEAD.target
    if topic == SCHEDULE_TOPIC:
        if r is None:
            return _MAYBE
        return _RETRY.target if r >= 1 else None  # r = 0: a delayed send's copy
    return None


def _group_of(topic: str | None) -> str | None:
    for prefix in (RETRY_PREFIX, DLQ_PREFIX):
        if topic is not None and topic.startswith(prefix):
            return topic[len(prefix):]
    return None


def _expect(back: Row, params: AuditParams) -> _Expect:
    detail = detail_of(back)
    code = detail.get("code")
    target = _TARGET.get(back.get("status"))  # type: ignore[arg-type]
    r = int_or_none(back.get("reconsume_times"))
    levels: list[int] = []
    named = int_or_none(back.get("delay_level"))
    if target == _RETRY.target and named is not None:
        levels.append(named)
    requested = int_or_none(detail.get("requested_level"))
    if target == _RETRY.target and r is not None and r >= 1 and requested is not None:
        limit = int_or_none(detail.get("max"))
        limit = params.retry_max(back.get("group")) if limit is None else limit
        top = len(params.delay_levels_ms)
        route, level = route_send_back(r - 1, limit, requested, top)
        state, after = MESSAGE.step("DELIVERED", MessageVars(r=r - 1, m=limit, max_level=top), "send_back",
                                    {"level": requested, "now": back["ts"],
                                     "delay": params.delay_ms(level) if route == RETRY else 0})
        if state == _RETRY.target:  # else the status is not the table's routing: DLQ_MISSED states it
            levels.append(level)
            r = after.r
    return _Expect(back, code in (None, "SUCCESS"), back.get("group"), target, r, tuple(dict.fromkeys(levels)))


def _agrees(e: _Expect, place: str, group: str | None, r: int | None, level: int | None) -> bool:
    return (
        e.ok
        and (group is None or e.group is None or group == e.group)
        and (e.target is None or e.target == place)
        and (r is None or e.r is None or r == e.r)
        and (place != _RETRY.target or level is None or all(level == x for x in e.levels))
    )


def _judge_copy(row: Row, place: str, backs: list[_Expect], copies: dict[str, int]) -> TableFinding | None:
    """The copy ``row`` (at ``place``) against the key's earlier send-backs (see the module docstring)."""
    topic = row.get("topic")
    group = _group_of(topic) if place == _DEAD.target else row.get("group")
    r, level = row.get("reconsume_times"), int_or_none(row.get("delay_level"))
    other = _DEAD.target if place == _RETRY.target else _RETRY.target
    if copies[place] <= sum(1 for e in backs if e.target == place):
        suspects = backs
    elif copies[other] < sum(1 for e in backs if e.target == other):
        suspects = [e for e in backs if e.target == other and r is not None and e.r == r]
    else:
        suspects = []
    if not suspects or any(_agrees(e, place, group, r, level) for e in backs):
        return None
    e = suspects[-1]
    where = "scheduled" + (f" at level {level}" if level is not None else "") if place == _RETRY.target \
        else f"in {topic}"
    if not e.ok:
        why = f"{row_label(MESSAGE, _FAILED)} writes nothing (the broker answered {detail_of(e.row).get('code')})"
    else:
        t = _RETRY if e.target == _RETRY.target else _DEAD if e.target == _DEAD.target else None
        made = "a copy" if t is None else (
            f"a copy scheduled at level {'/'.join(map(str, e.levels)) or '?'}" if t is _RETRY else "a DLQ copy")
        rule = row_label(MESSAGE, t) + f" / {t.effect}" if t is not None else "its send-back"
        why = f"{rule} makes {made} of {e.group} with reconsume_times {e.r}"
    of = f" of group {group}" if group is not None else ""
    return _found(e.row, row, f"{why}; but this copy is {where}{of} with reconsume_times {r}, which no "
                              f"earlier send-back of the key makes")


def _judge_fire(row: Row, scheduled: list[Row], unkeyed: Unkeyed) -> TableFinding | None:
    r, topic = row.get("reconsume_times"), row.get("topic")
    if r is None:
        return None
    if topic is not None and topic.startswith(RETRY_PREFIX) and r == 0:
        return _found(None, row, f"{row_label(MESSAGE, _FIRE)} changes nothing and only "
                                 f"{row_label(MESSAGE, _RETRY)} / {_RETRY.effect} (r + 1) puts copies in "
                                 f"{RETRY_PREFIX}…, but this one carries reconsume_times 0")
    if unkeyed.schedules or not any(p.get("topic") == SCHEDULE_TOPIC for p in scheduled):
        return None  # judged only against a row that surely is a schedule copy (a topic-less store may not be)
    group = _group_of(topic) if topic is not None and topic.startswith(RETRY_PREFIX) else row.get("group")
    for p in scheduled:
        pr, pg = p.get("reconsume_times"), p.get("group")
        if (pr is None or pr == r) and (pg is None or group is None or pg == group):
            return None
    had = sorted({p.get("reconsume_times") for p in scheduled if p.get("reconsume_times") is not None})
    return _found(scheduled[-1], row, f"{row_label(MESSAGE, _FIRE)} changes nothing, so a fired copy keeps "
                                      f"its schedule copy's reconsume_times ({had}), but it carries {r}")


def _judge_destination(row: Row, sent_to: list[tuple[str, int] | None]) -> TableFinding | None:
    topic, queue = row.get("topic"), int_or_none(row.get("queue_id"))
    if topic is None or queue is None or topic.startswith((RETRY_PREFIX, DLQ_PREFIX)):
        return None
    if not sent_to or None in sent_to or (topic, queue) in sent_to:
        return None
    named = ", ".join(f"{t}/{q}" for t, q in dict.fromkeys(sent_to))  # type: ignore[misc]
    return _found(None, row, f"{row_label(MESSAGE, _FIRE)} changes nothing: a delayed copy fires into "
                             f"REAL_TOPIC / REAL_QID, the queue it was sent to ({named}), but this one "
                             f"fired into {topic}/{queue}")


def _found(proof: Row | None, row: Row, reason: str) -> TableFinding:
    return found(Code.MESSAGE_LIFECYCLE.value, [proof], row, MESSAGE_KEYS, reason)
