"""The broker guarantees of SPEC §6 as named predicates over the ghost history.

Theory of operation
-------------------
Each ``Invariant`` is one guarantee: a name (``…Property``, kafka-tlaplus
style), the violation code it reports (``properties/codes.py``, shared with
the z3 theorems and the Spark audit), a kind, a one-sentence doc and the
RocketMQ behaviour it states. ``check(history)`` returns ``Violation`` values
(data, never exceptions); the conformance machine turns them into failures.

Kinds:
- ``always``: judged after every step on any prefix of the history;
- ``eventually``: judged only once the history contains ``drain`` (all time
  advanced, every retry, delayed copy and check done);
- ``observation``: counted, not a failure, unless the ``strict`` profile
  promotes it.

The checks read *observations only* (``properties/history.py``), so they
judge any broker, with or without the lockstep model. Epochs: a ``crash``
starts a new epoch; queue density, locks and unacknowledged offsets are
judged per epoch (the lock table and a client's process queues do not
survive a broker restart; a power loss may truncate a queue's tail).

This module holds the table (``INVARIANTS``) and the ordering, loss, retry,
delay, offset and observation checks; the lock checks live in
``inv_locks.py``, a sharding key's routing in ``inv_keys.py``, a broadcasting client's LOST in
``inv_broadcast.py`` (the exemptions LOST shares in ``inv_saved.py``), a routed producer's attempts in
``inv_route.py``, the transaction
checks in ``inv_txn.py``, the 5.x timer messages' in ``inv_timer.py`` (a timer send's offsets are its timer copy's:
the ordering and offset rules leave them out; LOST leaves out a timer message
not due at the drain), the replay of
``model/lifecycle.py``'s tables in ``inv_tables.py`` (each table row's
guard and effect judged, ``TABLE_JUDGES``), the shared types and helpers in
``inv_base.py``. Every check keeps its name here (``invariants.check_…``).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable

from rmqspec.model.events import TraceEvent
from rmqspec.model.filterapi import SubscriptionSplitError, build_subscription
from rmqspec.model.javahash import java_string_hash
from rmqspec.model.pullfilter import subscription_matches
from rmqspec.model.sql92 import is_tag_type
from rmqspec.properties.codes import Code, ObservationCode
from rmqspec.properties.history import (
    DLQ_PREFIX,
    RETRY_PREFIX,
    SCHEDULE_TOPIC,
    History,
    group_of,
    is_visible_topic,
)
from rmqspec.properties.inv_base import (
    ACKED_SEND,
    Invariant,
    Violation,
    _at_risk,
    _detail,
    _epochs,
    _restart,
    _until_last_drain,
    _v,
)
from rmqspec.properties.inv_broadcast import (  # noqa: F401 - re-exported
    BROADCAST_INVARIANTS,
    broadcasting,
    broadcasting_groups,
    check_lost_per_client,
)
from rmqspec.properties.inv_keys import KEY_INVARIANTS, check_key_split  # noqa: F401 - re-exported
from rmqspec.properties.inv_locks import (  # noqa: F401 - re-exported
    _lock_key,
    check_lock_overlap,
    check_orderly_concurrent,
    check_orderly_without_lock,
)
from rmqspec.properties.inv_route import ROUTE_INVARIANTS
from rmqspec.properties.inv_saved import (  # used here, and re-exported
    expired_keys,
    skipped_by_saved_delay_progress,
    skipped_by_saved_offsets,
)
from rmqspec.properties.inv_tables import POP_INVARIANTS, TABLE_INVARIANTS
from rmqspec.properties.inv_timeout import TIMEOUT_INVARIANTS, check_clean_early  # noqa: F401 - re-exported
from rmqspec.properties.inv_timer import (  # noqa: F401 - re-exported
    TIMER_INVARIANTS,
    check_timer_duplicated,
    check_timer_early,
    check_timer_unfired,
    delayed_send,
    is_timer_request,
    skipped_by_saved_timer_progress,
    timer_not_due,
)
from rmqspec.properties.inv_txn import (  # noqa: F401 - re-exported
    _check_times,
    _txn_index,
    check_txn_check_after_resolved,
    check_txn_check_early,
    check_txn_check_exceeded,
    check_txn_discard_early,
    check_txn_double_resolved,
    check_txn_unresolved,
    check_txn_visibility,
    skipped_by_saved_progress,
    unseen_ops,
)

# ---------------------------------------------------------------------------
# Ordering


def check_queue_order(h: History) -> list[Violation]:
    """Per queue, within an epoch: stored offsets are dense (previous + 1); an
    acknowledged or delivered position holds the copy that was stored there;
    one pull returns ascending offsets from the requested one."""
    out: list[Violation] = []
    last: dict[tuple, int] = {}
    at: dict[tuple, str | None] = {}
    for epoch, ev in _epochs(h.events):
        if ev.event == "store":
            key = (epoch, ev.topic, ev.queue_id)
            prev = last.get(key)
            if prev is not None and ev.queue_offset != prev + 1:
                out.append(_v(h, Code.ORDER_QUEUE_GAP, ev,
                              f"store on {ev.topic}/{ev.queue_id} is not dense",
                              f"queue offset {prev + 1}", f"queue offset {ev.queue_offset}"))
            last[key] = ev.queue_offset if prev is None else max(prev, ev.queue_offset or 0)
            at[(epoch, ev.topic, ev.queue_id, ev.queue_offset)] = ev.msg_id
    pulls: dict[object, int] = {}
    stored_key = {}
    for epoch, ev in _epochs(h.events):
        if ev.event == "store":
            stored_key[(epoch, ev.topic, ev.queue_id, ev.queue_offset)] = ev.msg_key
        elif ev.event == "send" and ev.status in ACKED_SEND and not delayed_send(ev) and not is_timer_request(ev):
            where = (epoch, ev.topic, ev.queue_id, ev.queue_offset)
            if where in stored_key and stored_key[where] != ev.msg_key:
                out.append(_v(h, Code.ORDER_QUEUE_GAP, ev,
                              f"acknowledged position {ev.topic}/{ev.queue_id}@{ev.queue_offset} "
                              "holds another message", ev.msg_key, stored_key[where]))
        elif ev.event == "deliver":
            where = (epoch, ev.topic, ev.queue_id, ev.queue_offset)
            if where in at and at[where] != ev.msg_id:
                out.append(_v(h, Code.ORDER_QUEUE_GAP, ev,
                              f"entry {ev.topic}/{ev.queue_id}@{ev.queue_offset} changed",
                              at[where], ev.msg_id))
            pull = _detail(ev, "pull")
            start = _detail(ev, "from")
            if pull is not None:
                prev = pulls.get(pull)
                floor = start if prev is None else prev + 1
                if floor is not None and (ev.queue_offset or 0) < floor:
                    out.append(_v(h, Code.ORDER_QUEUE_GAP, ev,
                                  f"pull {pull} returned offsets out of queue order",
                                  f"offset >= {floor}", ev.queue_offset))
                pulls[pull] = ev.queue_offset or 0
    # a send whose position was never revealed although later entries were
    return out + _served_entries_kept_by_kills(h)


def _served_entries_kept_by_kills(h: History) -> list[Violation]:
    """A position a consumer was served holds the same message after a kill (across epochs; within one,
    ``check_queue_order`` above judges it). A kill keeps the page cache, and with a TransientStorePool it
    takes only what was not committed, while reads end at the committed position (4.9.8
    ``MappedFile.getReadPosition``): only a power loss truncates below a served entry."""
    out: list[Violation] = []
    served: dict[tuple, tuple[str, int]] = {}  # (topic, queue, offset) -> (msg_key, epoch it was served in)
    for epoch, ev in _epochs(h.events):
        if ev.event == "crash" and ev.status == "power":
            served.clear()
            continue
        if ev.msg_key is None or ev.topic is None or ev.queue_offset is None:
            continue
        if ev.event == "send" and (ev.status not in ACKED_SEND or delayed_send(ev) or is_timer_request(ev)):
            continue
        if ev.event not in ("deliver", "send", "store"):
            continue
        where = (ev.topic, ev.queue_id, ev.queue_offset)
        was = served.get(where)
        if was is not None and was[1] < epoch and was[0] != ev.msg_key:
            out.append(_v(h, Code.ORDER_QUEUE_GAP, ev,
                          f"entry {ev.topic}/{ev.queue_id}@{ev.queue_offset}, served before a kill, changed",
                          was[0], ev.msg_key))
            served.pop(where)
        elif ev.event == "deliver" and was is None:
            served[where] = (ev.msg_key, epoch)
    return out


# ---------------------------------------------------------------------------
# No loss, no surprises


def _sent_keys(h: History) -> tuple[set[str], set[str]]:
    """(keys acknowledged — a oneway send counts here: it is never answered, and its delivery is no
    recovery —, keys attempted)."""
    acked, attempted = set(), set()
    for ev in h.events:
        if ev.event in ("send", "txn_half") and ev.msg_key:
            if ev.status in (*ACKED_SEND, "ONEWAY", None) or ev.event == "txn_half":
                acked.add(ev.msg_key)
            attempted.add(ev.msg_key)
    return acked, attempted


def check_no_loss(h: History) -> list[Violation]:
    """At drain, every acknowledged send and every committed transaction was
    consumed successfully by each subscribed group or landed in its DLQ (a copy the
    group may never see after a power loss, ``skipped_by_saved_offsets``, a delayed copy the
    schedule service may skip, ``skipped_by_saved_delay_progress``, and a 5.x timer message not due
    at the drain or skipped by the wheel, ``inv_timer``, excepted). A broadcasting group is judged per
    client instead (``inv_broadcast.check_lost_per_client``): each client starts at the max offset."""
    if not h.drained():
        return []
    events = _until_last_drain(h)
    drain_ts = max(e.ts for e in events if e.event == "drain")
    # (a timer copy stored at a position a power loss freed is not excepted: the wheel's rebuild covers it,
    # ``inv_timer.skipped_by_saved_timer_progress``; the reference checker and Spark do not except it either)
    risky = _at_risk(events) | skipped_by_saved_delay_progress(events) | timer_not_due(events, drain_ts) \
        | expired_keys(events, h.params.file_reserved_ms, h.forcible)
    skipped = skipped_by_saved_offsets(events)
    per_client = broadcasting_groups(events)
    done: set[tuple[str, str]] = set()
    for ev in events:
        if ev.event == "consume" and ev.status == "SUCCESS":
            done.add((ev.group, ev.msg_key))
        elif ev.event == "store" and ev.topic and ev.topic.startswith(DLQ_PREFIX):
            done.add((group_of(ev.topic), ev.msg_key))
    out: list[Violation] = []
    seen: set[tuple[str, str]] = set()
    for ev in events:
        if ev.msg_key in risky:
            continue
        if (ev.event == "send" and ev.status in ACKED_SEND) or (ev.event == "txn_end" and ev.status == "COMMIT"):
            topic = ev.topic
        else:
            continue
        for group, topics in sorted(h.subscriptions.items()):
            key = (group, ev.msg_key)
            if topic in topics and key not in done and key not in seen and key not in skipped \
                    and group not in per_client:
                seen.add(key)
                out.append(_v(h, Code.LOST, ev,
                              f"{ev.event} of {ev.msg_key} to {topic} never consumed by {group}",
                              "a SUCCESS consume or a DLQ copy", "neither after drain"))
    return out


def check_unexpected(h: History) -> list[Violation]:
    """A consumer never sees a message nobody sent, nor one its subscription excludes."""
    _acked, attempted = _sent_keys(h)
    out = []
    for ev in h.events:
        if ev.event in ("store", "deliver") and ev.topic and ev.topic != SCHEDULE_TOPIC \
                and ev.msg_key not in attempted:
            out.append(_v(h, Code.UNEXPECTED, ev,
                          f"{ev.event} of unknown message {ev.msg_key} in {ev.topic}",
                          "a key that was sent or half-sent", ev.msg_key))
        if ev.event == "deliver":
            sub, kind = _broker_sub(ev)
            tags = _detail(ev, "tags")
            sql = not is_tag_type(kind)  # judged by check_filter_mismatch
            # the broker compares String.hashCode values (a colliding tag such as Aa for BB is returned)
            if not sql and not _broker_keeps(sub, tags):
                out.append(_v(h, Code.UNEXPECTED, ev,
                              f"pull with subscription {sub!r} returned tags {tags!r}",
                              sub, tags))
    return out


def _broker_keeps(sub: object, tags: object) -> bool:
    """Would the broker's tag filter (``model/filterapi.py``) return a copy with ``tags`` for ``sub``? An
    expression FilterAPI refuses is not judged (True)."""
    try:
        parsed = build_subscription(None if sub is None else str(sub))
    except SubscriptionSplitError:
        return True
    return parsed.sub_all or (tags is not None and parsed.broker_matches(java_string_hash(str(tags))))


def _broker_sub(ev: TraceEvent) -> tuple[object, object]:
    """The (expression, type) the broker filtered a delivery with: ``broker_subscription`` when the pull
    carried none (a heartbeat group, ``properties/filters.py``), else the pull's own."""
    if _detail(ev, "broker_subscription") is not None:
        return _detail(ev, "broker_subscription"), _detail(ev, "broker_expression_type")
    return _detail(ev, "subscription", "*"), _detail(ev, "expression_type")


def check_filter_mismatch(h: History) -> list[Violation]:
    """A SQL92 pull never returns a message its expression does not select, and a client never
    consumes (SUCCESS) one its own subscription excludes — unless the broker filtered the client's
    pull with another client's heartbeated subscription (an inconsistent group: the client
    configuration is wrong, not the broker; the trace audit reports it)."""
    out = []
    for ev in h.events:
        if ev.event not in ("deliver", "consume") or "properties" not in (ev.detail or {}):
            continue
        if ev.event == "consume" and ev.status != "SUCCESS":
            continue
        if ev.event == "consume" and _detail(ev, "broker_subscription") is not None and (
                _broker_sub(ev) != (_detail(ev, "subscription"), _detail(ev, "expression_type"))):
            continue
        sub, kind = _broker_sub(ev) if ev.event == "deliver" else (
            _detail(ev, "subscription"), _detail(ev, "expression_type"))
        if ev.event == "deliver" and is_tag_type(kind):  # type: ignore[arg-type]
            continue  # tag deliveries: the broker compares hash codes (check_unexpected)
        verdict = subscription_matches(sub, kind, _detail(ev, "tags"), _detail(ev, "properties"))
        if verdict is False:
            out.append(_v(h, Code.FILTER_MISMATCH, ev,
                          f"{ev.event} of {ev.msg_key} does not match {kind} subscription {sub!r}",
                          "a message the subscription selects", _detail(ev, "properties")))
    return out


# ---------------------------------------------------------------------------
# Consumer offsets


def check_offset_overrun(h: History) -> list[Violation]:
    """The committed offset never passes a delivered message not yet acknowledged
    (consumed successfully or sent back). A broadcasting client's rows are its own queue (it keeps its
    offsets itself) and any consume acknowledges (a failed message is dropped). Retention acknowledges
    too: a unit below a queue's new min (an ``expire`` of the queue), or whose record is below the
    commitlog's new min (an ``expire`` with a null topic: the pull skips it, MESSAGE_WAS_REMOVING), is
    never delivered again and the client commits past it."""
    out = []
    # key -> queue offset -> the delivered copy's commitlog offset (None: not given)
    outstanding: dict[tuple, dict[int, int | None]] = defaultdict(dict)
    for ev in h.events:
        own = broadcasting(ev)
        key = (ev.group, ev.topic, ev.queue_id, ev.client_id if own else None)
        if _restart(ev):
            outstanding.clear()
        elif ev.event == "deliver" and _detail(ev, "client", True):
            outstanding[key][ev.queue_offset] = ev.commitlog_offset
        elif (ev.event == "consume" and (ev.status == "SUCCESS" or own)) or (
                ev.event == "send_back" and _detail(ev, "code", "SUCCESS") == "SUCCESS"):
            outstanding[key].pop(ev.queue_offset, None)
        elif ev.event == "expire" and ev.topic is not None and ev.queue_offset is not None:
            # retention took the units below the queue's new min: a client answered OFFSET_ILLEGAL drops them
            # from its process queue and commits that min (DefaultMQPushConsumerImpl; the audit's unjudged)
            for (_g, topic, queue_id, _c), units in outstanding.items():
                if topic == ev.topic and queue_id == ev.queue_id:
                    for o in [o for o in units if o < ev.queue_offset]:
                        del units[o]
        elif ev.event == "expire" and ev.topic is None and ev.commitlog_offset is not None:
            for units in outstanding.values():
                for o in [o for o, c in units.items() if c is not None and c < ev.commitlog_offset]:
                    del units[o]
        elif ev.event == "commit_offset":
            low = min(outstanding[key], default=None)
            if low is not None and ev.queue_offset is not None and ev.queue_offset > low:
                out.append(_v(h, Code.OFFSET_OVERRUN, ev,
                              f"{ev.group} committed {ev.topic}/{ev.queue_id} past an "
                              "unacknowledged message", f"offset <= {low}", ev.queue_offset))
    return out


# ---------------------------------------------------------------------------
# Retry, DLQ, delay


def _send_backs(h: History) -> dict[tuple, list[TraceEvent]]:
    by: dict[tuple, list[TraceEvent]] = defaultdict(list)
    for ev in h.events:
        if ev.event == "send_back" and _detail(ev, "code", "SUCCESS") == "SUCCESS":
            by[(ev.group, ev.msg_key)].append(ev)
    return by


def _back_max(h: History, back: TraceEvent, group: str) -> int:
    """The max a send-back was routed by: its own ``detail.max``, else the group's."""
    limit = _detail(back, "max", None)
    return h.params.retry_max(group) if limit is None else limit


def _latest_before(events: list[TraceEvent], seq: int) -> TraceEvent | None:
    best = None
    for ev in events:
        if ev.seq < seq:
            best = ev
    return best


def _lineage(ev: TraceEvent) -> object:
    """The copy a retry descends from: ORIGIN_MESSAGE_ID (the failed first-generation copy's offset
    msgId, kept by every later retry), carried in ``detail.origin``; None when the event has none."""
    return _detail(ev, "origin")


def check_retry_early(h: History) -> list[Violation]:
    """A retry copy (reconsume_times r ≥ 1) is never visible before its level's delay
    has passed since the send-back that created it.

    Pairing is by the copy, not the key: two copies can share a UNIQ_KEY (a duplicate
    COMMIT writes a second copy; a crash makes a copy be consumed and sent back again),
    each send-back makes its own retry copy, and a retry descends from the copy named by
    its ORIGIN_MESSAGE_ID (``detail.origin``). The candidates are the earlier successful
    RETRY send-backs of the same (group, key, r, origin); the first retry of them cannot
    be visible before the earliest of them is due, so a copy earlier than that is early.
    """
    out = []
    due: dict[tuple, tuple[int, TraceEvent]] = {}
    for ev in h.events:
        if ev.event == "send_back" and ev.status == "RETRY" and _detail(ev, "code", "SUCCESS") == "SUCCESS" \
                and ev.deliver_ts is not None:
            key = (ev.group, ev.msg_key, ev.reconsume_times, _lineage(ev))
            if key not in due or ev.deliver_ts < due[key][0]:
                due[key] = (ev.deliver_ts, ev)
            continue
        if ev.event not in ("store", "deliver") or not ev.topic or not ev.topic.startswith(RETRY_PREFIX):
            continue
        found = due.get((group_of(ev.topic), ev.msg_key, ev.reconsume_times, _lineage(ev)))
        if found is not None and ev.ts < found[0]:
            out.append(_v(h, Code.RETRY_EARLY, ev,
                          f"retry copy {ev.msg_key} r={ev.reconsume_times} visible "
                          f"{found[0] - ev.ts} ms early (level {found[1].delay_level})",
                          f"ts >= {found[0]}", ev.ts))
    return out


def check_dlq_early(h: History) -> list[Violation]:
    """A copy reaches the DLQ only after failing max + 1 times (or a negative level)."""
    out = []
    backs = _send_backs(h)
    for ev in h.events:
        if ev.event != "store" or not ev.topic or not ev.topic.startswith(DLQ_PREFIX):
            continue
        group = group_of(ev.topic)
        prev = _latest_before(backs.get((group, ev.msg_key), []), ev.seq)
        if prev is None:
            out.append(_v(h, Code.DLQ_EARLY, ev, f"DLQ copy of {ev.msg_key} without a send-back",
                          "a send-back first", "none"))
            continue
        requested = _detail(prev, "requested_level", prev.delay_level)
        limit = _detail(prev, "max", h.params.retry_max(group))
        if (requested or 0) >= 0 and (ev.reconsume_times or 0) <= limit:
            out.append(_v(h, Code.DLQ_EARLY, ev,
                          f"{ev.msg_key} in {ev.topic} with reconsume_times {ev.reconsume_times}",
                          f"reconsume_times > {limit}", ev.reconsume_times))
    return out


def check_dlq_missed(h: History) -> list[Violation]:
    """A copy that failed max + 1 times is never retried or delivered again: a retry copy is judged
    against the max of the send-back that made it (its reconsume_times), else the group's."""
    out = []
    backs = _send_backs(h)
    for ev in h.events:
        if ev.event not in ("store", "deliver") or not ev.topic:
            continue
        if ev.topic.startswith(RETRY_PREFIX):
            group = group_of(ev.topic)
            # the max in force when this copy was made: its maker's, an earlier send-back whose new
            # copy has this reconsume_times. A DLQ send-back makes no retry copy (a duplicate of the
            # message may have been dead-lettered with the same reconsume_times under a lower max),
            # so the largest max of the others (the maker is one of them) is the bound; without
            # them, the latest one's
            makers = [b for b in backs.get((group, ev.msg_key), [])
                      if b.reconsume_times == ev.reconsume_times and b.seq < ev.seq]
            limits = [_back_max(h, b, group) for b in makers if b.status != "DLQ"]
            if limits:
                limit = max(limits)
            else:
                limit = _back_max(h, makers[-1], group) if makers else h.params.retry_max(group)
        elif ev.event == "deliver" and is_visible_topic(ev.topic):
            limit = h.params.retry_max(ev.group)
        else:
            continue
        if (ev.reconsume_times or 0) > limit:
            out.append(_v(h, Code.DLQ_MISSED, ev,
                          f"{ev.event} of {ev.msg_key} in {ev.topic} after the retry limit",
                          f"reconsume_times <= {limit} (else DLQ)", ev.reconsume_times))
    return out


def check_dlq_landed(h: History) -> list[Violation]:
    """After a drain, every send-back the routing rule sends to the DLQ has a DLQ copy."""
    if not h.drained():
        return []
    events = _until_last_drain(h)
    risky = _at_risk(events)
    landed = {(group_of(e.topic), e.msg_key) for e in events
              if e.event == "store" and e.topic and e.topic.startswith(DLQ_PREFIX)}
    return [
        _v(h, Code.DLQ_MISSED, ev, f"{ev.msg_key} sent back past the limit but no DLQ copy",
           f"a copy in %DLQ%{ev.group}", "none")
        for ev in events
        if ev.event == "send_back" and ev.status == "DLQ" and ev.msg_key not in risky
        and _detail(ev, "code", "SUCCESS") == "SUCCESS" and (ev.group, ev.msg_key) not in landed
    ]


def check_delay_early(h: History) -> list[Violation]:
    """A delayed copy is never visible in its destination before ``deliver_ts``."""
    out = []
    due: dict[str, tuple[int, str]] = {}
    for ev in h.events:
        if delayed_send(ev) and ev.status in ACKED_SEND:
            due[ev.msg_key] = (ev.ts + h.params.delay_ms(ev.delay_level), ev.topic)
        elif ev.event in ("store", "deliver") and ev.msg_key in due and ev.topic == due[ev.msg_key][1]:
            when = due[ev.msg_key][0]
            if ev.ts < when:
                out.append(_v(h, Code.DELAY_EARLY, ev,
                              f"delayed {ev.msg_key} visible in {ev.topic} {when - ev.ts} ms early",
                              f"ts >= {when}", ev.ts))
        elif ev.event == "schedule_fire" and ev.deliver_ts is not None and ev.ts < ev.deliver_ts:
            out.append(_v(h, Code.DELAY_EARLY, ev, f"{ev.msg_key} fired early",
                          f"ts >= {ev.deliver_ts}", ev.ts))
    return out



def check_dlq_delayed(h: History) -> list[Violation]:
    """A DLQ copy is stored by the send-back that routes it, never scheduled or delayed.

    consumerSendMsgBack puts the DLQ copy with delay level 0 (no SCHEDULE_TOPIC_XXXX detour):
    its store time (``detail.store_ts``, else when it became visible) is less than the
    shortest delay level after the latest send-back of its (group, key).
    """
    last: dict[tuple, TraceEvent] = {}
    out = []
    for ev in h.events:
        if ev.event == "send_back" and _detail(ev, "code", "SUCCESS") == "SUCCESS":
            last[(ev.group, ev.msg_key)] = ev
        elif ev.event == "store" and ev.topic and ev.topic.startswith(DLQ_PREFIX):
            back = last.get((group_of(ev.topic), ev.msg_key))
            stored = _detail(ev, "store_ts", ev.ts)
            if back is not None and isinstance(stored, int) and stored - back.ts >= h.params.shortest_delay_ms:
                out.append(_v(h, Code.DLQ_DELAYED, ev,
                              f"DLQ copy of {ev.msg_key} stored {stored - back.ts} ms after its send-back",
                              f"< {h.params.shortest_delay_ms} ms (no schedule)", stored - back.ts))
    return out


def check_schedule_duplicated(h: History) -> list[Violation]:
    """A scheduled copy fires once: no more fires of a (key, reconsume_times) than copies were
    scheduled, unless a crash (kill or power) lost the delay progress since the first fire.

    The schedule service persists its progress every 10 s and on a clean shutdown, so after a
    crash it may deliver a copy again (at-least-once, SPEC §4.3) but never after a clean
    restart (``recover`` REOPEN) or without any restart. Once retention took schedule copies (an
    ``expire`` row of the schedule topic) a copy may have fired and gone unseen: not judged.
    """
    scheduled: Counter[tuple] = Counter()
    fired: Counter[tuple] = Counter()
    first_fire: dict[tuple, int] = {}
    crashes = 0
    expired = False
    out = []
    for ev in h.events:
        key = (ev.msg_key, ev.reconsume_times or 0)
        if ev.event == "crash":
            crashes += 1
        elif ev.event == "expire" and ev.topic in (SCHEDULE_TOPIC, None):
            expired = True
        elif ev.event == "store" and ev.topic == SCHEDULE_TOPIC:
            scheduled[key] += 1
        elif ev.event == "schedule_fire":
            fired[key] += 1
            first_fire.setdefault(key, crashes)
            if fired[key] > scheduled[key] and first_fire[key] == crashes and not expired:
                out.append(_v(h, Code.SCHEDULE_DUPLICATED, ev,
                              f"{ev.msg_key} r={ev.reconsume_times} fired {fired[key]} times, "
                              f"{scheduled[key]} scheduled, no crash since its first fire",
                              f"<= {scheduled[key]} fires", fired[key]))
    return out


def check_offset_lost(h: History) -> list[Violation]:
    """Committed consumer offsets survive a clean restart.

    After a clean shutdown + reopen (ConsumerOffsetManager persists on shutdown), the offset
    the broker reports (``commit_offset`` RESTORED) is the last one committed on that queue.
    A crash may lose the last 5 s of commits: it clears what is known.
    """
    known: dict[tuple, TraceEvent] = {}
    out = []
    for ev in h.events:
        if ev.event == "crash":
            known.clear()
        elif ev.event == "commit_offset" and ev.queue_offset is not None:
            key = (ev.group, ev.topic, ev.queue_id)
            if ev.status == "RESTORED":
                before = known.get(key)
                if before is not None and before.queue_offset != ev.queue_offset:
                    out.append(_v(h, Code.OFFSET_LOST, ev,
                                  f"{ev.group} offset on {ev.topic}/{ev.queue_id} after a clean restart",
                                  before.queue_offset, ev.queue_offset))
            known[key] = ev
    return out


# ---------------------------------------------------------------------------
# Observations


def observe_duplicated(h: History) -> list[Violation]:
    """A group consumed one message successfully more than once (at-least-once); a broadcasting
    client's consumes count per client (every client of the group consumes every message once)."""
    seen: Counter[tuple] = Counter()
    out = []
    for ev in h.events:
        if ev.event == "consume" and ev.status == "SUCCESS":
            who = (ev.group, ev.msg_key, ev.client_id if broadcasting(ev) else None)
            seen[who] += 1
            if seen[who] > 1:
                client = f" (broadcasting client {ev.client_id})" if who[2] is not None else ""
                out.append(_v(h, ObservationCode.DUPLICATED, ev,
                              f"{ev.group} consumed {ev.msg_key} again{client}", 1, seen[who]))
    return out


def observe_duplicate_commit(h: History) -> list[Violation]:
    """A transaction was committed twice (RocketMQ 4.9 writes a second message)."""
    seen: Counter[str] = Counter()
    out = []
    for ev in h.events:
        if ev.event == "txn_end" and ev.status == "COMMIT":
            seen[ev.msg_key] += 1
            if seen[ev.msg_key] > 1:
                out.append(_v(h, ObservationCode.DUPLICATE_COMMIT, ev,
                              f"{ev.msg_key} committed again", 1, seen[ev.msg_key]))
    return out


def observe_recovered(h: History) -> list[Violation]:
    """A message was delivered although its send was never acknowledged."""
    acked, attempted = _sent_keys(h)
    return [
        _v(h, ObservationCode.RECOVERED, ev, f"{ev.msg_key} delivered without an acknowledged send",
           "acknowledged", "unacknowledged")
        for ev in h.events
        if ev.event == "deliver" and ev.msg_key in attempted and ev.msg_key not in acked
    ]


# ---------------------------------------------------------------------------
# The table

INVARIANTS: tuple[Invariant, ...] = (
    Invariant("QueueOrderProperty", Code.ORDER_QUEUE_GAP, "always",
              "Queue offsets are dense and a pull returns a queue's entries in offset order.",
              "ConsumeQueue / CommitLog.putMessage queue offset assignment", check_queue_order),
    *KEY_INVARIANTS,
    Invariant("NoUnexpectedProperty", Code.UNEXPECTED, "always",
              "Consumers only see messages that were sent and that their subscription selects.",
              "PullMessageProcessor + ExpressionMessageFilter (tagsCode)", check_unexpected),
    Invariant("FilterMismatchProperty", Code.FILTER_MISMATCH, "always",
              "A filtered pull or a client only delivers messages its subscription selects.",
              "ExpressionMessageFilter.isMatchedByCommitLog + PullAPIWrapper.processPullResult",
              check_filter_mismatch),
    *TIMER_INVARIANTS,  # before NoLossProperty: a timer message never fired is named as such first
    Invariant("NoLossProperty", Code.LOST, "eventually",
              "Every acknowledged send is eventually consumed by each group or lands in its DLQ.",
              "at-least-once: SendMessageProcessor + ConsumeMessageConcurrentlyService",
              check_no_loss),
    *BROADCAST_INVARIANTS,
    Invariant("OffsetBelowUnackedProperty", Code.OFFSET_OVERRUN, "always",
              "The committed offset never passes a delivered but unacknowledged message.",
              "ProcessQueue.removeMessage + RemoteBrokerOffsetStore", check_offset_overrun),
    Invariant("RetryNotEarlyProperty", Code.RETRY_EARLY, "always",
              "A retry copy is never visible before its delay level has elapsed.",
              "SendMessageProcessor.consumerSendMsgBack + ScheduleMessageService",
              check_retry_early),
    *TIMEOUT_INVARIANTS,
    Invariant("DlqNotEarlyProperty", Code.DLQ_EARLY, "always",
              "A message reaches the DLQ only after max + 1 failures or a negative level.",
              "SendMessageProcessor.consumerSendMsgBack (maxReconsumeTimes)", check_dlq_early),
    Invariant("DlqNotMissedProperty", Code.DLQ_MISSED, "always",
              "A message that failed max + 1 times is never retried or delivered again.",
              "SendMessageProcessor.consumerSendMsgBack (DLQ routing)", check_dlq_missed),
    Invariant("DlqLandedProperty", Code.DLQ_MISSED, "eventually",
              "Every send-back routed to the DLQ leaves a copy in the group's DLQ topic.",
              "SendMessageProcessor.consumerSendMsgBack (DLQ routing)", check_dlq_landed),
    Invariant("DelayNotEarlyProperty", Code.DELAY_EARLY, "always",
              "A delayed message is never visible before its deliver timestamp.",
              "ScheduleMessageService.DeliverDelayedMessageTimerTask", check_delay_early),
    Invariant("LockExclusiveProperty", Code.LOCK_OVERLAP, "always",
              "At most one client holds an unexpired broker lock on a queue.",
              "RebalanceLockManager.tryLockBatch / LockEntry.isExpired", check_lock_overlap),
    Invariant("OrderlyUnderLockProperty", Code.ORDERLY_WITHOUT_LOCK, "always",
              "Orderly consumption runs only under the client's own unexpired lock.",
              "ConsumeMessageOrderlyService.ConsumeRequest (isLocked, isLockExpired)",
              check_orderly_without_lock),
    Invariant("OrderlyExclusiveProperty", Code.ORDERLY_CONCURRENT, "always",
              "Two clients never consume one queue orderly at the same time.",
              "ConsumeMessageOrderlyService + RebalanceLockManager", check_orderly_concurrent),
    Invariant("TxnInvisibleProperty", Code.TXN_VISIBLE_BEFORE_COMMIT, "always",
              "A half message is invisible until it is committed (rollback keeps it invisible).",
              "TransactionalMessageBridge.parseHalfMessageInner + EndTransactionProcessor",
              check_txn_visibility),
    Invariant("TxnSingleResolutionProperty", Code.TXN_DOUBLE_RESOLVED, "always",
              "A transaction is never both committed and rolled back, nor resolved after discard.",
              "EndTransactionProcessor + TransactionalMessageServiceImpl.check",
              check_txn_double_resolved),
    Invariant("TxnCheckNotEarlyProperty", Code.TXN_CHECK_EARLY, "always",
              "A half is never checked before transactionTimeOut has passed since it was sent.",
              "TransactionalMessageServiceImpl.check (valueOfCurrentMinusBorn < checkImmunityTime)",
              check_txn_check_early),
    Invariant("TxnCheckBoundedProperty", Code.TXN_CHECK_EXCEEDED, "always",
              "A half is checked at most transactionCheckMax times (re-checks after a crash repeat a number).",
              "TransactionalMessageServiceImpl.needDiscard (TRANSACTION_CHECK_TIMES)",
              check_txn_check_exceeded),
    Invariant("TxnResolvedProperty", Code.TXN_UNRESOLVED, "eventually",
              "Every half is eventually committed, rolled back or discarded.",
              "TransactionalMessageCheckService", check_txn_unresolved),
    Invariant("TxnNoCheckAfterResolutionProperty", Code.TXN_CHECK_AFTER_RESOLVED, "always",
              "A half copy resolved by an op (COMMIT/ROLLBACK) is never checked back.",
              "TransactionalMessageServiceImpl.check (removeMap from fillOpRemoveMap)",
              check_txn_check_after_resolved),
    Invariant("TxnDiscardAfterCheckMaxProperty", Code.TXN_DISCARD_EARLY, "always",
              "A half is discarded only after transactionCheckMax checks or past fileReservedTime.",
              "TransactionalMessageServiceImpl.needDiscard / needSkip", check_txn_discard_early),
    Invariant("DlqNeverScheduledProperty", Code.DLQ_DELAYED, "always",
              "A DLQ copy is stored by its send-back, never scheduled or delayed.",
              "SendMessageProcessor.consumerSendMsgBack (DLQ: delayLevel 0)", check_dlq_delayed),
    Invariant("ScheduleOnceWithoutCrashProperty", Code.SCHEDULE_DUPLICATED, "always",
              "A scheduled copy is delivered once unless a crash lost the delay progress (never "
              "twice across a clean restart).",
              "ScheduleMessageService.persist (every 10 s and on shutdown; delayOffset.json)",
              check_schedule_duplicated),
    Invariant("OffsetSurvivesRestartProperty", Code.OFFSET_LOST, "always",
              "Committed consumer offsets survive a clean restart.",
              "ConsumerOffsetManager.persist (BrokerController.shutdown; consumerOffset.json)",
              check_offset_lost),
    *ROUTE_INVARIANTS,  # issue 43: judged only on a routed producer's rows (detail.tries); one broker: none
    *TABLE_INVARIANTS,
    *POP_INVARIANTS,  # after the tables': name_of(MESSAGE_LIFECYCLE) stays MessageLifecycleProperty
    Invariant("DuplicatedObservation", ObservationCode.DUPLICATED, "observation",
              "A group consumed one message successfully more than once.",
              "at-least-once delivery (offset commit after consumption)", observe_duplicated),
    Invariant("DuplicateCommitObservation", ObservationCode.DUPLICATE_COMMIT, "observation",
              "A transaction was committed more than once.",
              "EndTransactionProcessor does not de-duplicate (4.9)", observe_duplicate_commit),
    Invariant("RecoveredObservation", ObservationCode.RECOVERED, "observation",
              "A message was delivered although its send was never acknowledged.",
              "CommitLog recovery keeps unacknowledged records", observe_recovered),
)

BY_NAME: dict[str, Invariant] = {inv.name: inv for inv in INVARIANTS}


def name_of(code: str) -> str:
    """The invariant reporting ``code`` (TXN_ROLLBACK_VISIBLE comes from TxnInvisibleProperty)."""
    for inv in INVARIANTS:
        if inv.code == code:
            return inv.name
    return "TxnInvisibleProperty" if code == Code.TXN_ROLLBACK_VISIBLE else code


def of_kind(kind: str) -> tuple[Invariant, ...]:
    return tuple(inv for inv in INVARIANTS if inv.kind == kind)


def evaluate_named(h: History, kinds: Iterable[str]) -> list[tuple[Invariant, Violation]]:
    """Each violation of the invariants of ``kinds`` on ``h`` with the invariant that found it, in table
    order (two invariants may report one code: NoLossProperty and NoLossPerClientProperty)."""
    wanted = set(kinds)
    return [(inv, v) for inv in INVARIANTS if inv.kind in wanted for v in inv.check(h)]


def evaluate(h: History, kinds: Iterable[str]) -> list[Violation]:
    """All violations of the invariants of ``kinds`` on ``h``, in table order."""
    return [v for _, v in evaluate_named(h, kinds)]
