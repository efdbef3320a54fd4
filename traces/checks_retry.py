"""Retry, dead-letter and delay detectors (SPEC §4.2–§4.4, §8.1)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from rmqspec.properties.codes import Code
from rmqspec.properties.inv_timeout import clean_reason, clean_timing  # the invariant's reading and words
from rmqspec.traces.checks_common import (
    SCHEDULE_TOPIC,
    Finding,
    Trace,
    detail_of,
    has,
    keys_of,
    violation,
)


def detect_retry_early(trace: Trace) -> Iterator[Finding]:
    """RETRY_EARLY: a retry came back before its level's delay.

    SPEC §8.1 / §4.2: (a) a ``deliver`` of a retry copy (group, msg_key,
    reconsume_times r ≥ 1) with ts before the ``deliver_ts`` of the
    earliest-due earlier ``send_back`` RETRY with the same (group, msg_key,
    reconsume_times) — seqs = [send_back, deliver]. Several send-backs can
    share that key (a duplicate COMMIT writes a second copy; a crash makes a
    copy be consumed and sent back again), each creating its own retry copy;
    none of those copies can come before the earliest is due, so pairing a
    retry with the *latest* send-back would cry wolf; (b) a ``send_back``
    RETRY (delay_level ≥ 1) whose ``deliver_ts − ts`` is shorter than
    ``delay(level)`` (``SendMessageProcessor``: level 0 → 3 + reconsume_times,
    then ``ScheduleMessageService``) — seqs = [send_back].
    A delivery equal to ``deliver_ts`` is on time.
    """
    params = trace.params
    created: dict[tuple, Mapping[str, Any]] = {}
    for _, row in trace.of("send_back", "deliver"):
        if row["event"] == "send_back":
            if row["status"] != "RETRY":
                continue
            if has(row, "delay_level", "deliver_ts") and row["delay_level"] >= 1:
                delay = params.delay_ms(row["delay_level"])
                if row["deliver_ts"] - row["ts"] < delay:
                    yield violation(
                        Code.RETRY_EARLY,
                        (row["seq"],),
                        keys_of(row, "group", "topic", "msg_key"),
                        f"retry due after {row['deliver_ts'] - row['ts']} ms, "
                        f"level {row['delay_level']} needs {delay} ms",
                    )
            if has(row, "group", "msg_key", "reconsume_times", "deliver_ts"):
                key = (row["group"], row["msg_key"], row["reconsume_times"])
                if key not in created or row["deliver_ts"] < created[key]["deliver_ts"]:
                    created[key] = row
        elif has(row, "group", "msg_key", "reconsume_times") and row["reconsume_times"] >= 1:
            back = created.get((row["group"], row["msg_key"], row["reconsume_times"]))
            if back is not None and row["ts"] < back["deliver_ts"]:
                yield violation(
                    Code.RETRY_EARLY,
                    (back["seq"], row["seq"]),
                    keys_of(row, "group", "topic", "msg_key"),
                    f"retry {row['reconsume_times']} delivered at {row['ts']}, due at {back['deliver_ts']}",
                )


def detect_clean_early(trace: Trace) -> Iterator[Finding]:
    """RETRY_EARLY (the client's): a send-back by the client's cleanExpiredMsg at or before consumeTimeout
    after its message's consume start.

    SPEC §8.1 (RETRY_EARLY), issue 42; RocketMQ 4.9.8 ``ProcessQueue.cleanExpiredMsg``: the clean sends
    back (level 3) the first message of a process queue only when ``now − CONSUME_START_TIME >
    consumeTimeout``. A ``send_back`` whose
    ``detail.clean_expired`` is true states ``detail.consume_start`` and ``detail.consume_timeout_min`` (the
    client's configuration); one lacking either number, or not stating the clean, is not judged. The reason
    says the client is at fault: the broker only stored what it was sent back. The copy's later consumption
    beside the listener's late SUCCESS stays a DUPLICATED observation (``detect_duplicated``).
    seqs = [send_back].
    """
    for _, row in trace.of("send_back"):
        timing = clean_timing(detail_of(row)) if row.get("detail") is not None else None
        if timing is None or row["ts"] is None:
            continue
        start, timeout = timing
        if row["ts"] - start <= timeout:
            yield violation(Code.RETRY_EARLY, (row["seq"],), keys_of(row, "group", "topic", "msg_key"),
                            clean_reason(row["ts"], start, timeout))


def send_back_max(row: Mapping[str, Any], params: Any) -> int:
    """The max reconsume times a ``send_back`` was judged against.

    ``detail.max`` when the trace carries it (RocketMQ routes on the request's
    ``maxReconsumeTimes`` when the client sends one, else the group's
    ``retryMaxTimes``: ``SendMessageProcessor.consumerSendMsgBack``), else the
    configured max of the group.
    """
    value = detail_of(row).get("max")
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else params.retry_max(row["group"])


def detect_dlq_early(trace: Trace) -> Iterator[Finding]:
    """DLQ_EARLY: a message dead-lettered before it failed max + 1 times.

    SPEC §8.1 / §4.4: a ``send_back`` DLQ with delay_level ≥ 0 (one without
    delay_level is not judged: ``traces/unjudged.py``) whose new copy's reconsume_times ≤ the max in force
    (``send_back_max``; ``SendMessageProcessor``: DLQ iff reconsumeTimes ≥ max
    or level < 0; the new copy carries reconsumeTimes + 1). seqs = [send_back].
    """
    for _, row in trace.of("send_back"):
        if row["status"] != "DLQ" or row["reconsume_times"] is None:
            continue
        level = row["delay_level"] if row["delay_level"] is not None else 0
        limit = send_back_max(row, trace.params)
        if level >= 0 and row["reconsume_times"] <= limit:
            yield violation(
                Code.DLQ_EARLY,
                (row["seq"],),
                keys_of(row, "group", "topic", "msg_key"),
                f"dead-lettered after {row['reconsume_times']} failures, max is {limit}",
            )


def detect_dlq_missed(trace: Trace) -> Iterator[Finding]:
    """DLQ_MISSED: a message retried past its max instead of dead-lettered.

    SPEC §8.1 / §4.4: a ``send_back`` RETRY whose new copy's reconsume_times
    > the max in force (``send_back_max``; seqs = [send_back]), or any
    ``deliver`` with reconsume_times > max (seqs = [deliver]) — the max of the
    latest earlier ``send_back`` of that (group, msg_key) whose new copy has
    the deliver's reconsume_times (the send-back that made it: a later one of
    an older copy may have dead-lettered that, with another max); when some
    of those were not routed to the DLQ, the largest max among them (a DLQ
    send-back makes no retry copy: a duplicate of the message may have been
    dead-lettered with the same reconsume_times under a lower max, and one
    of unknown routing may be the maker), else the group's —
    also of a ``%DLQ%`` copy: SPEC §4.4 says the DLQ is not consumed by the
    group's normal subscription.
    """
    in_force: dict[tuple[Any, Any], int] = {}
    retried: dict[tuple[Any, Any], int] = {}  # the largest max of those not routed to the DLQ
    for _, row in trace.of("send_back", "deliver"):
        rt = row["reconsume_times"]
        if row["event"] == "send_back":
            limit = send_back_max(row, trace.params)
            in_force[(row["group"], row["msg_key"], rt)] = limit
            if row["status"] != "DLQ":
                key = (row["group"], row["msg_key"], rt)
                retried[key] = max(retried.get(key, limit), limit)
            if rt is not None and row["status"] == "RETRY" and rt > limit:
                yield violation(
                    Code.DLQ_MISSED,
                    (row["seq"],),
                    keys_of(row, "group", "topic", "msg_key"),
                    f"retry copy {rt} created, max is {limit}: should go to the DLQ",
                )
            continue
        if rt is None:
            continue
        key = (row["group"], row["msg_key"], rt)
        limit = retried.get(key, in_force.get(key, trace.params.retry_max(row["group"])))
        if rt > limit:
            yield violation(
                Code.DLQ_MISSED,
                (row["seq"],),
                keys_of(row, "group", "topic", "msg_key"),
                f"delivered with reconsume_times {rt}, max is {limit}",
            )


def detect_delay_early(trace: Trace) -> Iterator[Finding]:
    """DELAY_EARLY: a delayed copy fired or was delivered before its deliver_ts.

    SPEC §8.1 / §4.3 (``ScheduleMessageService``: never before
    ``deliver_ts``). Fire clause: a ``schedule_fire`` whose SCHEDULE copy is
    not yet due — its copy is the latest earlier ``store`` in
    SCHEDULE_TOPIC_XXXX (with ``deliver_ts``) with the fire's ``msg_id``, or,
    when the fire carries no msg_id, with its msg_key (the detector's reading; the
    audit withholds it, since the copy is then unknown: ``traces/unjudged.py``);
    seqs = [store, schedule_fire]. Deliver clause,
    first-generation copies only (reconsume_times 0; an early retry copy is RETRY_EARLY;
    a deliver, fire or SCHEDULE store without reconsume_times is not judged,
    ``traces/unjudged.py``): a
    ``deliver`` before the ``deliver_ts`` of the latest earlier
    first-generation SCHEDULE store of its msg_key, when no first-generation
    fire of that msg_key happened since (an early fire is the offending
    event, not its consequences); seqs = [store, deliver].
    """
    by_id: dict[tuple[str, str], Mapping[str, Any]] = {}
    by_key: dict[str, Mapping[str, Any]] = {}
    first_gen: dict[str, Mapping[str, Any]] = {}
    fired_since: dict[str, bool] = {}
    for _, row in trace.of("store", "schedule_fire", "deliver"):
        key = row["msg_key"]
        if key is None:
            continue
        ev = row["event"]
        gen0 = (row["reconsume_times"] or 0) == 0
        if ev == "store":
            if row["topic"] == SCHEDULE_TOPIC and row["deliver_ts"] is not None:
                by_key[key] = row
                if row["msg_id"] is not None:
                    by_id[(key, row["msg_id"])] = row
                if gen0:
                    first_gen[key] = row
                    fired_since[key] = False
            continue
        if ev == "schedule_fire":
            if gen0 and key in first_gen:
                fired_since[key] = True
            s = by_id.get((key, row["msg_id"])) if row["msg_id"] is not None else by_key.get(key)
            if s is not None and row["ts"] < s["deliver_ts"]:
                yield violation(
                    Code.DELAY_EARLY,
                    (s["seq"], row["seq"]),
                    keys_of(row, "topic", "msg_key"),
                    f"fired at {row['ts']}, due at {s['deliver_ts']}",
                )
            continue
        s = first_gen.get(key)
        if gen0 and s is not None and not fired_since[key] and row["ts"] < s["deliver_ts"]:
            yield violation(
                Code.DELAY_EARLY,
                (s["seq"], row["seq"]),
                keys_of(row, "group", "topic", "msg_key"),
                f"delivered at {row['ts']}, due at {s['deliver_ts']}",
            )
