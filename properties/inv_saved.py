"""What a restart lets a consumer or the schedule service skip: the exemptions LOST shares.

Theory of operation
-------------------
RocketMQ 4.9.8 persists consumer offsets (consumerOffset.json, a broadcasting client's offsets file) and
the delay progress (delayOffset.json) apart from the commitlog. After an ASYNC broker's power loss the
truncated queues reuse positions those files already passed, so a consumer (``skipped_by_saved_offsets``)
or the schedule service (``skipped_by_saved_delay_progress``) may skip a copy stored there with no broker
at fault (docs/fidelity.md T2, T4). Positions are reused only after a truncation. Retention deletes
files whether or not their messages were consumed (``expired_keys``: a copy below an ``expire`` row's
commitlog min offset).
``NoLossProperty`` (group-wide, ``invariants.py``) and ``NoLossPerClientProperty`` (a broadcasting
client's, ``inv_broadcast.py``) both except these keys, as the reference checker's LOST rules do
(``traces/checks_delivery.py``); ``invariants`` re-exports both names.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

from rmqspec.model.events import TraceEvent
from rmqspec.properties.history import SCHEDULE_TOPIC
from rmqspec.properties.inv_timer import delayed_send, is_timer_request

__all__ = ["expired_keys", "skipped_by_saved_delay_progress", "skipped_by_saved_offsets"]


def expired_keys(events: Iterable[TraceEvent], reserved_ms: int | None = None,
                 forcible: Sequence[tuple[int, int]] = ()) -> set[str]:
    """Keys with a copy that retention deleted: stored below the commitlog min offset of a later
    ``expire`` row of the commitlog (``model/retention.py``), or at a queue position below a later
    ``expire`` row's of its queue (the conformance machine's observer writes those). RocketMQ deletes
    expired files whether or not a group consumed them; whatever a group owed of such a key is not
    judged. A copy's queue position is a ``store`` row's, or a plain send's (a delayed or timer send's
    offset is its schedule copy's); its commitlog offset a ``store``, ``send`` or ``txn_half`` row's.

    With ``reserved_ms`` (fileReservedTime; the machine's invariants) only a lawful deletion excepts:
    the copy stored at least that long before the commitlog row (its file rolled after it), or the row
    inside a window of ``forcible`` (the disk over 0.85: every file but the last goes at once). A trace
    with commitlog rows is judged by them alone (its queue rows only follow from them)."""
    rows = list(events)
    by_commitlog = any(ev.event == "expire" and ev.topic is None for ev in rows)
    stored: list[tuple[int, int, str]] = []
    placed: dict[tuple[str, int], list[tuple[int, str]]] = defaultdict(list)
    out: set[str] = set()
    for ev in rows:
        if ev.event in ("store", "send") and ev.msg_key and ev.topic is not None and ev.queue_offset is not None \
                and not (ev.event == "send" and (delayed_send(ev) or is_timer_request(ev))):
            placed[(ev.topic, ev.queue_id or 0)].append((ev.queue_offset, ev.msg_key))
        if ev.event in ("store", "send", "txn_half") and ev.msg_key and ev.commitlog_offset is not None:
            stamp = (ev.detail or {}).get("store_ts", ev.ts) if ev.event == "store" else ev.ts
            stored.append((ev.commitlog_offset, stamp if isinstance(stamp, int) else ev.ts, ev.msg_key))
        elif ev.event == "expire" and ev.topic is None and ev.commitlog_offset is not None:
            at_once = any(start <= ev.ts <= end for start, end in forcible)
            out.update(key for offset, stamp, key in stored if offset < ev.commitlog_offset and (
                reserved_ms is None or at_once or stamp <= ev.ts - reserved_ms))
        elif ev.event == "expire" and ev.topic is not None and ev.queue_offset is not None and not by_commitlog:
            out.update(key for offset, key in placed[(ev.topic, ev.queue_id or 0)] if offset < ev.queue_offset)
    return out


def skipped_by_saved_offsets(events: Iterable[TraceEvent]) -> set[tuple[str | None, str]]:
    """(group, key) pairs a consumer may never see: a copy at a queue position below an offset
    the group had committed on that queue before a crash.

    RocketMQ 4.9.8 persists consumer offsets (consumerOffset.json, every 5 s) apart from the
    commitlog, and a consumer may read and commit past the flushed position (apache/rocketmq
    #8239). After an ASYNC broker's power loss the truncated queue's new messages reuse those
    positions and the group, resuming from its saved offset, skips them (docs/fidelity.md T2).
    Positions below a committed offset are reused only after a truncation: nothing else is
    exempt. Only a power loss truncates below what a consumer read: a kill keeps the page cache,
    and with a TransientStorePool it takes only uncommitted bytes, which no consumer was served
    (reads end at the committed position), so a kill does not count here.
    """
    crashes = 0  # power losses
    groups: dict[tuple, dict[str | None, list[tuple[int, int]]]] = defaultdict(lambda: defaultdict(list))
    out: set[tuple[str | None, str]] = set()
    for ev in events:
        if ev.event == "crash":
            crashes += ev.status == "power"
        elif ev.event == "commit_offset" and ev.queue_offset is not None:
            groups[(ev.topic, ev.queue_id)][ev.group].append((crashes, ev.queue_offset))
        elif ev.event in ("send", "store") and ev.msg_key and ev.queue_offset is not None \
                and not (delayed_send(ev) or is_timer_request(ev)):
            # a delayed (timer) send's offset is its schedule (timer) copy's
            for group, seen in groups.get((ev.topic, ev.queue_id), {}).items():
                if any(c < crashes and offset > ev.queue_offset for c, offset in seen):
                    out.add((group, ev.msg_key))
    return out


def skipped_by_saved_delay_progress(events: Iterable[TraceEvent]) -> set[str]:
    """Keys whose schedule copy the schedule service may skip: stored after a power loss at a
    reused SCHEDULE_TOPIC_XXXX position, then a crash before the copy fired.

    RocketMQ 4.9.8 persists the delay progress (delayOffset.json) apart from the commitlog,
    every 10 s and at shutdown. An ASYNC broker that loses power comes back with the saved
    progress X past the truncated schedule queue's end M; correctDelayOffset clamps it to M
    *in memory only*, so the file keeps X until the next persist. Copies stored at M, M+1, …
    fire as they should — unless the broker crashes again before that persist: the next load
    reads X again, clamps it to the queue's new end, and the copies at [M, X) never fire
    (docs/fidelity.md T4). A copy is exempt when its position is below 1 + the highest position
    of its level's queue seen before an earlier power loss (reused: only after a truncation)
    and a crash follows its store with no ``schedule_fire`` of its key in between. SYNC
    brokers and kills alone never reuse a position, so nothing else is exempt.
    """
    seen: dict[int | None, int] = {}
    bound: dict[int | None, int] = {}
    fired: dict[str, int] = {}
    waiting: list[tuple[str, int]] = []
    out: set[str] = set()
    for ev in events:
        if ev.event == "crash":
            out.update(key for key, stored in waiting if fired.get(key, -1) < stored)
            waiting = []
            if ev.status == "power":
                for q, top in seen.items():
                    bound[q] = max(bound.get(q, 0), top + 1)
        elif ev.event == "schedule_fire" and ev.msg_key:
            fired[ev.msg_key] = ev.seq
        elif ev.event == "store" and ev.topic == SCHEDULE_TOPIC and ev.queue_offset is not None:
            if ev.msg_key and ev.queue_offset < bound.get(ev.queue_id, 0):
                waiting.append((ev.msg_key, ev.seq))
            seen[ev.queue_id] = max(seen.get(ev.queue_id, -1), ev.queue_offset)
    return out
