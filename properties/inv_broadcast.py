"""Broadcasting consumers (issue 42): every client of the group owes every message from where it started.

Theory of operation
-------------------
RocketMQ 4.9.8's broadcasting (``MessageModel.BROADCASTING``): every client of the group consumes every
message of every queue; a client's offsets live in its own ``LocalFileOffsetStore`` (the broker's offset
table is never updated for it); a client without an offsets file starts at the queue's max offset
(CONSUME_FROM_LAST_OFFSET: ``RebalancePushImpl.computePullFromWhere``); a message whose listener fails is
dropped (``ConsumeMessageConcurrentlyService.processConsumeResult``: no send-back). To the broker a
broadcasting client is only a puller of its group that pulls from its own offsets: two clients of one
group pull the same queue independently, and each must get the same messages.

A broadcasting client's rows say so (``detail.message_model``: BROADCASTING, ``broadcasting``); a
``commit_offset`` with ``detail.from_where`` is where it began pulling a queue without an offsets file.
The group-wide rules read those rows per client: LOST here, OFFSET_OVERRUN and DUPLICATED in
``invariants.py`` (the client's own queue; any consume acknowledges); the group-wide LOST
(``NoLossProperty``) leaves broadcasting groups to this one.

``check_lost_per_client`` (``NoLossPerClientProperty``, eventually) is the reference checker's
``traces.checks_delivery.detect_lost_per_client`` on the ghost history: at the drain, for a client c of a
broadcasting group g and an acknowledged plain ``send`` (not delayed, not a timer message's: their
positions are their schedule or wheel copy's) of key k at (topic, queue, offset o), c owes k when, in one
*run* of c on that queue, it started at or before o and committed an offset > o; it lost k when it has no
``consume`` of k (any status: a failed one is dropped) before that commit. A run starts at a
``commit_offset`` of c with ``detail.from_where`` (its offset), else at the lowest offset c got in it
(a ``deliver`` or ``consume`` of c); what a restarted client skipped below its new start is not its loss.
A client that never committed past o in a run (stopped, or behind at the drain) is not judged. The
exemptions are ``NoLossProperty``'s: a crash's at-risk keys, ``skipped_by_saved_delay_progress``, and per
group ``skipped_by_saved_offsets`` (a client's own offsets file passes the positions a power loss frees, as
the broker's offset table does), plus every key with a copy in SCHEDULE_TOPIC_XXXX or rmq_sys_wheel_timer
(its positions are not the send's). One finding per (group, client, key), at the first commit past it.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from rmqspec.model.events import TraceEvent
from rmqspec.model.results import SendStatus
from rmqspec.model.timer import TIMER_TOPIC
from rmqspec.properties.codes import Code
from rmqspec.properties.history import SCHEDULE_TOPIC, History
from rmqspec.properties.inv_base import Invariant, Violation, _at_risk, _detail, _until_last_drain, _v
from rmqspec.properties.inv_saved import expired_keys, skipped_by_saved_delay_progress, skipped_by_saved_offsets
from rmqspec.properties.inv_timer import delayed_send, is_timer_request

__all__ = ["BROADCASTING", "BROADCAST_INVARIANTS", "broadcasting", "broadcasting_groups", "check_lost_per_client",
           "client_runs"]

BROADCASTING = "BROADCASTING"
# the rows a consumer writes (a broadcasting one marks them)
CLIENT_EVENTS = frozenset({"deliver", "consume", "commit_offset"})
# a send the producer saw acknowledged (the reference checker's ``acked_send``)
ACKED = frozenset({None, *(s.value for s in SendStatus)})


def broadcasting(ev: TraceEvent) -> bool:
    """A row of a broadcasting client: ``detail.message_model`` is BROADCASTING (absent: clustering)."""
    return _detail(ev, "message_model") == BROADCASTING


def broadcasting_groups(events: Iterable[TraceEvent]) -> set[str]:
    """The groups with a broadcasting client's row: LOST is judged per client for them."""
    return {ev.group for ev in events
            if ev.event in CLIENT_EVENTS and ev.group is not None and broadcasting(ev)}


@attrs.define
class Run:
    """One run of a broadcasting client on a queue: from its start (a ``commit_offset`` with
    ``detail.from_where``, or the lowest offset it got before any) to the next start."""

    start: int | None = None
    commits: list[tuple[int, int]] = attrs.field(factory=list)  # (offset, seq), offsets rising

    def past(self, offset: int) -> int | None:
        """The seq of the run's first commit past ``offset`` when the run started at or before it."""
        if self.start is None or self.start > offset:
            return None
        return next((seq for committed, seq in self.commits if committed > offset), None)


def client_runs(events: Iterable[TraceEvent]) -> tuple[dict[tuple, list[Run]], dict[tuple, int], set[str]]:
    """Per (group, client, topic, queue) the broadcasting client's runs; per (group, client, key) its first
    consume's seq; the keys with a delayed or timer copy (their positions are not the send's)."""
    runs: dict[tuple, list[Run]] = {}
    consumed: dict[tuple, int] = {}
    waiting: set[str] = set()
    for ev in events:
        if ev.event == "store":
            if ev.topic in (SCHEDULE_TOPIC, TIMER_TOPIC) and ev.msg_key:
                waiting.add(ev.msg_key)
            continue
        if ev.event not in CLIENT_EVENTS or ev.group is None or ev.client_id is None or not broadcasting(ev):
            continue
        if ev.event == "consume" and ev.msg_key is not None:
            consumed.setdefault((ev.group, ev.client_id, ev.msg_key), ev.seq)
        if ev.topic is None or ev.queue_id is None or ev.queue_offset is None:
            continue
        mine = runs.setdefault((ev.group, ev.client_id, ev.topic, ev.queue_id), [Run()])
        offset = ev.queue_offset
        if ev.event == "commit_offset" and "from_where" in (ev.detail or {}):
            mine.append(Run(start=offset))  # the client (re)started here: what lies below is not its
        elif ev.event != "commit_offset":
            run = mine[-1]
            run.start = offset if run.start is None else min(run.start, offset)
        elif not mine[-1].commits or offset > mine[-1].commits[-1][0]:
            mine[-1].commits.append((offset, ev.seq))
    return runs, consumed, waiting


def check_lost_per_client(h: History) -> list[Violation]:
    """At the drain, a broadcasting client never committed past an acknowledged message it owed (from its
    run's start) without consuming it (see the module docstring)."""
    if not h.drained():
        return []
    events = _until_last_drain(h)
    runs, consumed, waiting = client_runs(events)
    clients: dict[tuple, list[tuple[str, str]]] = {}  # (topic, queue) -> (group, client)
    for group, client, topic, queue in sorted(runs, key=repr):
        clients.setdefault((topic, queue), []).append((group, client))
    if not clients:
        return []
    risky = _at_risk(events) | skipped_by_saved_delay_progress(events) | waiting \
        | expired_keys(events, h.params.file_reserved_ms, h.forcible)
    skipped = skipped_by_saved_offsets(events)
    out: list[Violation] = []
    reported: set[tuple[str, str, str]] = set()
    for ev in events:
        if ev.event != "send" or ev.status not in ACKED or not ev.msg_key or ev.queue_offset is None \
                or delayed_send(ev) or is_timer_request(ev) or ev.msg_key in risky:
            continue
        for group, client in clients.get((ev.topic, ev.queue_id), ()):
            if (group, client, ev.msg_key) in reported or (group, ev.msg_key) in skipped:
                continue
            passed = [seq for run in runs[(group, client, ev.topic, ev.queue_id)]
                      if (seq := run.past(ev.queue_offset)) is not None]
            if not passed:
                continue
            got = consumed.get((group, client, ev.msg_key))
            if got is not None and got < min(passed):
                continue
            reported.add((group, client, ev.msg_key))
            commit = h.events[min(passed)]
            out.append(_v(h, Code.LOST, commit,
                          f"broadcasting client {client} of {group} committed {commit.queue_offset} past "
                          f"{ev.msg_key} (offset {ev.queue_offset} of {ev.topic}/{ev.queue_id}, sent at event "
                          f"{ev.seq}) without consuming it",
                          "a consume of the key before the client's first commit past it", "none"))
    return out


BROADCAST_INVARIANTS: tuple[Invariant, ...] = (
    Invariant("NoLossPerClientProperty", Code.LOST, "eventually",
              "Every client of a broadcasting group consumes every acknowledged message from where it started.",
              "broadcasting: RebalancePushImpl.computePullFromWhere + LocalFileOffsetStore + "
              "ConsumeMessageConcurrentlyService.processConsumeResult (a failed message is dropped)",
              check_lost_per_client),
)
