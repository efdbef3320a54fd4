"""Delivery detectors (SPEC §4.2, §8.1): loss, unexpected keys, offset overrun, duplicates."""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Mapping
from typing import Any

from rmqspec.properties.codes import Code, ObservationCode
from rmqspec.properties.inv_broadcast import Run  # a client's run: the invariant's and the audit's
from rmqspec.traces.checks_common import (
    SCHEDULE_TOPIC,
    TIMER_TOPIC,
    Finding,
    Trace,
    acked_send,
    broadcasting_row,
    delayed_send,
    detail_of,
    has,
    keys_of,
    observation,
    oneway_send,
    timer_send,
    violation,
)
from rmqspec.traces.checks_filter import filter_exempt
from rmqspec.traces.checks_retention import Verdict, copies_by_key, expire_rows, verdict


def _acknowledged(trace: Trace) -> dict[tuple[str, str], int]:
    """(topic, msg_key) -> seq of the first acknowledged send or COMMIT ``txn_end``.

    A COMMIT without a topic takes the topic of the first ``txn_half`` with
    its msg_key.
    """
    half_topic: dict[str, str] = {}
    for _, row in trace.of("txn_half"):
        if has(row, "msg_key", "topic"):
            half_topic.setdefault(row["msg_key"], row["topic"])
    acked: dict[tuple[str, str], int] = {}
    for _, row in trace.of("send", "txn_end"):
        if row["msg_key"] is None:
            continue
        if row["event"] == "send":
            if not acked_send(row):
                continue
            topic = row["topic"]
        else:
            if row["status"] != "COMMIT":
                continue
            topic = row["topic"] if row["topic"] is not None else half_topic.get(row["msg_key"])
        if topic is not None:
            acked.setdefault((topic, row["msg_key"]), row["seq"])
    return acked


def skipped_by_saved_offsets(trace: Trace) -> set[tuple[Any, Any]]:
    """(group, msg_key) a group may never see: a ``send`` (not delayed, not a timer message's) or ``store``
    of the key at a queue_offset below a ``commit_offset`` of that group on that queue from before an earlier
    ``crash`` (consumer offsets are persisted apart from the commitlog: after a power loss the
    truncated queue reuses positions the group already passed, apache/rocketmq#8239 and
    docs/fidelity.md T2). Positions below a committed offset exist only after a truncation, and only a
    ``power`` crash truncates below what a group read: a kill keeps the page cache, and with a
    TransientStorePool it takes only uncommitted bytes, which reads never reach."""
    crashes = 0  # power losses
    # (topic, queue) -> group -> the group's committed offsets on it, folded (``_SavedOffsets``)
    commits: dict[tuple[Any, Any], dict[Any, _SavedOffsets]] = {}
    out: set[tuple[Any, Any]] = set()
    for _, row in trace.of("crash", "commit_offset", "send", "store"):
        ev = row["event"]
        if ev == "crash":
            crashes += row["status"] == "power"
        elif row["queue_offset"] is None or row["topic"] is None or row["queue_id"] is None:
            continue
        elif delayed_send(row) or (ev == "send" and row["deliver_ts"] is not None):
            continue  # a delayed (timer) send's queue_offset is its SCHEDULE_TOPIC_XXXX (rmq_sys_wheel_timer) copy's
        elif ev == "commit_offset":
            if row["group"] is not None:
                by_group = commits.setdefault((row["topic"], row["queue_id"]), {})
                by_group.setdefault(row["group"], _SavedOffsets()).commit(crashes, row["queue_offset"])
        elif row["msg_key"] is not None:
            for group, saved in commits.get((row["topic"], row["queue_id"]), {}).items():
                if saved.before(crashes) > row["queue_offset"]:
                    out.add((group, row["msg_key"]))
    return out


class _SavedOffsets:
    """The highest offset a group committed on a queue before the current crash count, in O(1):
    ``best`` folds every earlier crash count, ``current`` is the highest of count ``at``."""

    __slots__ = ("at", "best", "current")

    def __init__(self) -> None:
        self.best, self.at, self.current = -1, -1, -1

    def commit(self, crashes: int, offset: int) -> None:
        if crashes != self.at:
            self.best, self.at, self.current = max(self.best, self.current), crashes, offset
        else:
            self.current = max(self.current, offset)

    def before(self, crashes: int) -> int:
        """The highest offset committed with fewer than ``crashes`` crashes before it."""
        return self.best if crashes == self.at else max(self.best, self.current)


def skipped_by_saved_delay_progress(trace: Trace) -> set[Any]:
    """msg_keys whose schedule copy the schedule service may skip (docs/fidelity.md T4).

    RocketMQ 4.9.8 persists the delay progress (delayOffset.json) apart from the commitlog;
    after an ASYNC broker's power loss correctDelayOffset clamps it into the truncated
    schedule queue in memory only, and a second crash before the next persist reads the old
    progress again, skipping the copies stored meanwhile at the reused positions. A ``store``
    in SCHEDULE_TOPIC_XXXX at a queue_offset below 1 + the highest one of its queue seen before
    an earlier ``crash`` with status ``power``, followed (before the drain) by a ``crash`` with
    no ``schedule_fire`` of its msg_key in between, exempts its msg_key. Positions are reused
    only after a truncation: nothing else is exempt.
    """
    drain = trace.drain_seq
    seen: dict[Any, int] = {}
    bound: dict[Any, int] = {}
    fired: dict[Any, int] = {}
    waiting: list[tuple[Any, int]] = []
    out: set[Any] = set()
    for _, row in trace.of("store", "schedule_fire", "crash"):
        ev = row["event"]
        if ev == "crash":
            if drain is not None and row["seq"] > drain:
                break
            out.update(key for key, stored in waiting if fired.get(key, -1) < stored)
            waiting = []
            if row["status"] == "power":
                for q, top in seen.items():
                    bound[q] = max(bound.get(q, 0), top + 1)
        elif ev == "schedule_fire":
            if row["msg_key"] is not None:
                fired[row["msg_key"]] = row["seq"]
        elif row["topic"] == SCHEDULE_TOPIC and row["queue_offset"] is not None:
            if row["msg_key"] is not None and row["queue_offset"] < bound.get(row["queue_id"], 0):
                waiting.append((row["msg_key"], row["seq"]))
            seen[row["queue_id"]] = max(seen.get(row["queue_id"], -1), row["queue_offset"])
    return out


def detect_lost(trace: Trace) -> Iterator[Finding]:
    """LOST: an acknowledged message a group never consumed nor dead-lettered.

    SPEC §8.1 / §4.2 (no loss): at ``drain``, an acknowledged ``send`` (or
    COMMITted transaction) of a topic that a group consumes, with neither a
    SUCCESS ``consume`` nor a ``send_back`` DLQ for that (group, msg_key)
    before the drain. Not judged without ``drain``. Groups consuming a topic
    are those seen delivering/consuming it plus configured subscriptions.
    A msg_key listed in a ``crash``'s ``detail.at_risk`` (written after the
    last flush of an ASYNC broker that lost power) may be lost: not judged;
    nor a (group, msg_key) ``skipped_by_saved_offsets`` or ``checks_filter.filter_exempt`` names
    (a filtering group's messages its subscriptions do not select or whose attributes no row
    states, and FILTER_SKIPPED ones), nor a
    msg_key ``skipped_by_saved_delay_progress`` names, nor one ``expire`` rows may have taken (judged only
    when they provably kept it or took it before fileReservedTime: ``checks_retention.verdict``; the
    reason then says so). A broadcasting group (``Trace.broadcasting``) is
    judged per client instead (``detect_lost_per_client``): each of its clients starts at the queue's max
    offset, so messages sent before every client started are no one's.
    seqs = [send (or COMMIT), drain]; one finding per (group, msg_key).
    """
    drain = trace.drain_seq
    if drain is None:
        return
    done: set[tuple[str, str]] = set(skipped_by_saved_offsets(trace)) | filter_exempt(trace)
    for _, row in trace.of("consume", "send_back"):
        if row["seq"] > drain or not has(row, "group", "msg_key"):
            continue
        if (row["event"] == "consume" and row["status"] == "SUCCESS") or (
            row["event"] == "send_back" and row["status"] == "DLQ"
        ):
            done.add((row["group"], row["msg_key"]))
    delay_skipped = skipped_by_saved_delay_progress(trace)
    retained = _Retained(trace, drain)
    for (topic, key), seq in sorted(_acknowledged(trace).items(), key=lambda kv: kv[1]):
        if seq > drain or key in trace.at_risk or key in delay_skipped or not retained(key).judged:
            continue
        for group in sorted(trace.consumers.get(topic, ())):
            if (group, key) not in done and group not in trace.broadcasting:
                yield violation(
                    Code.LOST,
                    (seq, drain),
                    {"group": group, "topic": topic, "msg_key": key},
                    f"acknowledged {key} never consumed by {group} nor sent to its DLQ{retained(key).reason}",
                )


class _Retained:
    """key -> what retention did to it (``checks_retention.verdict``), computed once per key."""

    def __init__(self, trace: Trace, drain: int) -> None:
        self.expires = expire_rows(trace.rows, drain)
        self.copies = copies_by_key(trace.rows) if self.expires else {}
        self.params = trace.params
        self.seen: dict[Any, Verdict] = {}

    def __call__(self, key: Any) -> Verdict:
        if key not in self.seen:
            self.seen[key] = verdict(self.copies.get(key, ()), self.expires, self.params)
        return self.seen[key]


def _broadcast_runs(trace: Trace, drain: int) -> tuple[dict[tuple, list[Run]], dict[tuple, int], set[Any]]:
    """Per (group, client, topic, queue) the broadcasting client's runs; per (group, client, msg_key) its
    first consume's seq; the keys with a delayed or timer copy (their positions are not the send's)."""
    runs: dict[tuple, list[Run]] = {}
    consumed: dict[tuple, int] = {}
    waiting: set[Any] = set()
    for _, row in trace.of("store", "deliver", "consume", "commit_offset"):
        ev = row["event"]
        if row["seq"] > drain:
            break
        if ev == "store":
            if row["topic"] in (SCHEDULE_TOPIC, TIMER_TOPIC) and row["msg_key"] is not None:
                waiting.add(row["msg_key"])
            continue
        if not has(row, "group", "client_id") or not broadcasting_row(row):
            continue
        if ev == "consume" and row["msg_key"] is not None:
            consumed.setdefault((row["group"], row["client_id"], row["msg_key"]), row["seq"])
        if not has(row, "topic", "queue_id", "queue_offset"):
            continue
        mine = runs.setdefault((row["group"], row["client_id"], row["topic"], row["queue_id"]), [Run()])
        offset = row["queue_offset"]
        if ev == "commit_offset" and "from_where" in detail_of(row):
            mine.append(Run(start=offset))  # the client (re)started here: what lies below is not its
        elif ev != "commit_offset":
            run = mine[-1]
            run.start = offset if run.start is None else min(run.start, offset)
        elif not mine[-1].commits or offset > mine[-1].commits[-1][0]:
            mine[-1].commits.append((offset, row["seq"]))
    return runs, consumed, waiting


def detect_lost_per_client(trace: Trace) -> Iterator[Finding]:
    """LOST of a broadcasting client: it passed an acknowledged message without consuming it.

    SPEC §8.1 (LOST), issue 42 (RocketMQ 4.9's broadcasting: every client of the group consumes every
    message from where it started — the queue's max offset when it has no offsets file — keeps its
    offsets in that file and drops a message whose listener failed). At ``drain``, for a client c of
    group g whose rows are broadcasting (``broadcasting_row``) and an acknowledged plain ``send`` (not
    delayed, not a timer message's) of msg_key k at (topic, queue, offset o): c is owed k when, in one
    run of c on that queue, it started at or before o and committed an offset > o; it is LOST when c
    has no ``consume`` of k (any status: a failed one is dropped) before that commit. A run starts at a
    ``commit_offset`` of c with ``detail.from_where`` (where the client began pulling the queue without
    a stored offset: its offset), else at the lowest offset c got in it (a ``deliver`` or ``consume`` of
    c; a broker's deliver rows name no client); what a restarted client skipped below its new start is
    not its loss. The exemptions of ``detect_lost`` apply per group (a crash's at-risk keys,
    ``skipped_by_saved_offsets``, ``filter_exempt``, ``skipped_by_saved_delay_progress``, retention's). A client
    that never committed past o in such a run (stopped, or behind at the drain) is not judged. Not
    judged without ``drain``.
    seqs = [send, the first commit past o]; one finding per (group, client, msg_key).
    """
    drain = trace.drain_seq
    if drain is None or not trace.broadcasting:
        return
    runs, consumed, waiting = _broadcast_runs(trace, drain)
    clients: dict[tuple[Any, Any], list[tuple[Any, Any]]] = {}  # (topic, queue) -> (group, client)
    for group, client, topic, queue in sorted(runs, key=repr):
        clients.setdefault((topic, queue), []).append((group, client))
    if not clients:
        return
    exempt = skipped_by_saved_offsets(trace) | filter_exempt(trace)
    delay_skipped = skipped_by_saved_delay_progress(trace)
    retained = _Retained(trace, drain)
    reported: set[tuple[Any, Any, Any]] = set()
    for _, row in trace.of("send"):
        if row["seq"] > drain:
            break
        key = row["msg_key"]
        if (
            not has(row, "topic", "queue_id", "queue_offset", "msg_key")
            or not acked_send(row)
            or delayed_send(row)
            or timer_send(row)
            or key in waiting
            or key in trace.at_risk
            or key in delay_skipped
            or not retained(key).judged
        ):
            continue
        offset = row["queue_offset"]
        for group, client in clients.get((row["topic"], row["queue_id"]), ()):
            if (group, client, key) in reported or (group, key) in exempt:
                continue
            passed = [seq for run in runs[(group, client, row["topic"], row["queue_id"])]
                      if (seq := run.past(offset)) is not None]
            if not passed:
                continue
            got = consumed.get((group, client, key))
            if got is not None and got < min(passed):
                continue
            reported.add((group, client, key))
            yield violation(
                Code.LOST,
                (row["seq"], min(passed)),
                {"group": group, "topic": row["topic"], "msg_key": key, "client_id": client},
                f"broadcasting client {client} of {group} committed past {key} (offset {offset} of queue "
                f"{row['queue_id']}) without consuming it{retained(key).reason}",
            )


def detect_unexpected(trace: Trace) -> Iterator[Finding]:
    """UNEXPECTED: a consumer saw a message nobody sent.

    SPEC §8.1: a ``deliver``/``consume`` of a msg_key never sent, stored or
    half-sent anywhere in the trace (RocketMQ never invents messages).
    seqs = [deliver/consume].
    """
    known = {r["msg_key"] for _, r in trace.of("send", "store", "txn_half") if r["msg_key"] is not None}
    for _, row in trace.of("deliver", "consume"):
        if row["msg_key"] is not None and row["msg_key"] not in known:
            yield violation(
                Code.UNEXPECTED,
                (row["seq"],),
                keys_of(row, "group", "topic", "msg_key"),
                f"{row['event']} of {row['msg_key']}, which was never sent, stored or half-sent",
            )


def detect_offset_overrun(trace: Trace) -> Iterator[Finding]:
    """OFFSET_OVERRUN: a committed offset skipped an unacknowledged message.

    SPEC §8.1 / §4.2 (``ProcessQueue.removeMessage``): a ``commit_offset``
    (offset in queue_offset) greater than the lowest offset delivered to that
    group on that queue and not yet acknowledged. An offset is pending from
    its latest ``deliver`` until a SUCCESS ``consume`` or a ``send_back`` of
    it (same group, topic, queue, offset). A broadcasting client's rows (``broadcasting_row``) are its
    own queue (it keeps its offsets itself), and any consume acknowledges (a failed message is dropped).
    seqs = [deliver of the lowest pending offset, commit_offset].
    """
    pending: dict[tuple, dict[int, int]] = {}  # queue key -> offset -> deliver seq
    heaps: dict[tuple, list[int]] = {}
    for _, row in trace.of("deliver", "consume", "send_back", "commit_offset"):
        if not has(row, "group", "topic", "queue_id", "queue_offset"):
            continue
        broadcast = broadcasting_row(row)
        if broadcast and row["client_id"] is None:
            continue  # whose queue is unknown (``unjudged``: a consume's absence withholds the queue)
        qkey = (row["group"], row["topic"], row["queue_id"], row["client_id"] if broadcast else None)
        offset, ev = row["queue_offset"], row["event"]
        offsets = pending.setdefault(qkey, {})
        heap = heaps.setdefault(qkey, [])
        if ev == "deliver":
            if offset not in offsets:
                heapq.heappush(heap, offset)
            offsets[offset] = row["seq"]
        elif ev == "send_back" or (ev == "consume" and (row["status"] == "SUCCESS" or broadcast)):
            offsets.pop(offset, None)
        elif ev == "commit_offset":
            while heap and heap[0] not in offsets:
                heapq.heappop(heap)
            if heap and offset > heap[0]:
                low = heap[0]
                yield violation(
                    Code.OFFSET_OVERRUN,
                    (offsets[low], row["seq"]),
                    keys_of(row, "group", "topic", "queue_id"),
                    f"committed offset {offset} passes unacknowledged offset {low}",
                )


def detect_duplicated(trace: Trace) -> Iterator[Finding]:
    """DUPLICATED (observation): a group consumed one msg_key with SUCCESS more than once.

    SPEC §4.2 / §8.1 observations: at-least-once delivery allows duplicates; they are counted,
    not violations. A broadcasting client's consume (``broadcasting_row``, with its client_id) counts
    per client: every client of a broadcasting group consumes every message once (issue 42). The reason
    names the consumeTimeout cause when either consume says ``detail.return_type`` TIME_OUT (its listener
    outlived consumeTimeout: the client's cleanExpiredMsg had sent the copy back while it ran).
    seqs = [first SUCCESS consume, duplicate consume].
    """
    first: dict[tuple[Any, ...], tuple[int, bool]] = {}  # -> (seq, timed out) of the first SUCCESS
    for _, row in trace.of("consume"):
        if row["status"] != "SUCCESS" or not has(row, "group", "msg_key"):
            continue
        client = row["client_id"] if row["client_id"] is not None and broadcasting_row(row) else None
        key = (row["group"], row["msg_key"]) if client is None else (row["group"], row["msg_key"], client)
        timed_out = _timed_out(row)
        if key not in first:
            first[key] = (row["seq"], timed_out)
            continue
        seq, first_timed_out = first[key]
        who = row["group"] if client is None else f"broadcasting client {client} of {row['group']}"
        cause = TIMED_OUT_CAUSE if timed_out or first_timed_out else ""
        yield observation(
            ObservationCode.DUPLICATED,
            (seq, row["seq"]),
            keys_of(row, "group", "topic", "msg_key", *(("client_id",) if client is not None else ())),
            f"{who} consumed {row['msg_key']} with SUCCESS again{cause}",
        )


TIMED_OUT_CAUSE = "; a listener outlived consumeTimeout (TIME_OUT): cleanExpiredMsg sent the copy back while it ran"


def _timed_out(row: Mapping[str, Any]) -> bool:
    """A consume whose ``detail.return_type`` is TIME_OUT (cheap: most details do not name it)."""
    detail = row.get("detail")
    if detail is None or (isinstance(detail, str) and "TIME_OUT" not in detail):
        return False
    return detail_of(row).get("return_type") == "TIME_OUT"


def detect_recovered(trace: Trace) -> Iterator[Finding]:
    """RECOVERED (observation): a message delivered although its send was never acknowledged.

    SPEC §8 / §8.1 observations: the broker stored it (a ``store``, or a ``send`` with a failure
    status) but no acknowledged ``send`` nor COMMIT exists for its msg_key,
    and it is not a transaction half nor sent oneway (a ``send`` with status ``ONEWAY`` is never
    acknowledged: its delivery is how it arrives, issue 42). Not reported for a msg_key listed in a
    ``crash``'s ``detail.at_risk`` (its acknowledgement may have been lost with
    the broker's unflushed pages). seqs = [first deliver of the msg_key].
    """
    acked: set[str] = set()
    half: set[str] = set()
    seen: set[str] = set()
    oneway: set[str] = set()
    first_deliver: dict[str, Mapping[str, Any]] = {}
    for _, row in trace.of("send", "store", "txn_half", "txn_end", "deliver"):
        key = row["msg_key"]
        if key is None:
            continue
        ev = row["event"]
        if ev == "send":
            (acked if acked_send(row) else oneway if oneway_send(row) else seen).add(key)
        elif ev == "store":
            seen.add(key)
        elif ev == "txn_half":
            half.add(key)
        elif ev == "txn_end":
            if row["status"] == "COMMIT":
                acked.add(key)
        else:
            first_deliver.setdefault(key, row)
    for key, row in sorted(first_deliver.items(), key=lambda kv: kv[1]["seq"]):
        if key in seen and key not in acked | half | oneway and key not in trace.at_risk:
            yield observation(
                ObservationCode.RECOVERED,
                (row["seq"],),
                keys_of(row, "group", "topic", "msg_key"),
                f"{key} delivered although its send was never acknowledged",
            )
