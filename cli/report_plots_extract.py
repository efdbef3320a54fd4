"""Plot series of the check report, extracted from trace rows.

Theory of operation
-------------------
Extraction reads trace rows — plain dicts with SPEC §8's columns, in ``seq``
order (``detail`` a mapping or its JSON text, ``detail_of``) — once per plot
and returns ``report_model`` values; nothing here judges a rule (that is the
audit's job), it only shows what happened:

- ``extract_retries``: each ``send_back`` RETRY matched with the later
  ``deliver`` of the copy it created (same group, msg_key and the copy's
  reconsume_times) → observed delay vs the level's delay;
- ``extract_delays``: each ``store`` in ``SCHEDULE_TOPIC_XXXX`` (it carries
  ``deliver_ts``) matched with its ``schedule_fire`` (by
  ``detail.from_commitlog_offset``, else msg_key + reconsume_times) and the
  first ``deliver`` of the fired copy (its commitlog offset);
- ``extract_locks``: ``lock`` GRANTED / DENIED and ``unlock`` (plus ``crash``)
  → one ``LockSegment`` per ownership, ending at unlock, takeover, expiry
  (last grant + broker lifetime, rocketmq.broker.rebalance.lockMaxLiveTime),
  crash or the trace end;
- ``extract_txn_counts``: ``txn_half``, ``txn_end``, ``txn_check``,
  ``txn_discard`` → lifecycle totals per transaction (``txn_id``).

The delay levels are ``messageDelayLevel`` (MessageStoreConfig; parsed by
``model.config.parse_delay_levels``); a retry copy's default level is 3 + r
(SendMessageProcessor.consumerSendMsgBack). The timer series (5.x) is
extracted in ``cli.report_plots_timer``; ``cli.report_plots.extract_plot_data``
runs them all.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from rmqspec.cli.report_model import (
    DelayPoint,
    LockDenial,
    LockSegment,
    RetryPoint,
    TxnCounts,
)
from rmqspec.model.config import DEFAULT_DELAY_LEVELS, parse_delay_levels

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
DEFAULT_LEVELS_MS: tuple[int, ...] = parse_delay_levels(DEFAULT_DELAY_LEVELS)
BROKER_LOCK_MS = 60_000  # rocketmq.broker.rebalance.lockMaxLiveTime
FIRST_RETRY_LEVEL = 3  # the r-th retry (r = 0, 1, …) waits level 3 + r

Row = Mapping[str, Any]


def int_value(value: Any) -> int | None:
    """``value`` as an int, None when absent or not a whole number (never a crash)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def detail_of(row: Row) -> Mapping[str, Any]:
    value = row.get("detail")
    if isinstance(value, Mapping):
        return value
    if isinstance(value, str) and value:
        try:
            parsed = json.loads(value)
        except ValueError:
            return {}
        return parsed if isinstance(parsed, Mapping) else {}
    return {}


def level_delay_ms(levels_ms: Sequence[int], level: int) -> int:
    """The delay of ``level`` clamped to ``[1, len(levels_ms)]`` (RocketMQ clamps at store time)."""
    return levels_ms[min(max(level, 1), len(levels_ms)) - 1]


def retry_table_ms(levels_ms: Sequence[int], attempt: int) -> int:
    """The default delay before retry copy ``attempt`` (its reconsume_times ≥ 1): level 3 + r."""
    return level_delay_ms(levels_ms, FIRST_RETRY_LEVEL + attempt - 1)



def extract_retries(
    rows: Iterable[Row], levels_ms: Sequence[int] = DEFAULT_LEVELS_MS
) -> tuple[list[RetryPoint], int]:
    """(points, send-backs whose copy was never delivered) from ``send_back`` RETRY → ``deliver``.

    A send_back carries the new copy's reconsume_times; the copy's deliver is
    the first later ``deliver`` with the same group, msg_key and
    reconsume_times. Send-backs are matched first come, first served.
    """
    pending: dict[tuple[Any, Any, int], list[Row]] = {}
    points: list[RetryPoint] = []
    for row in rows:
        event = row.get("event")
        if event == "send_back" and row.get("status") == "RETRY":
            r = row.get("reconsume_times")
            if r is None or row.get("msg_key") is None:
                continue
            pending.setdefault((row.get("group"), row.get("msg_key"), int(r)), []).append(row)
        elif event == "deliver":
            r = row.get("reconsume_times")
            if not r:
                continue
            queue = pending.get((row.get("group"), row.get("msg_key"), int(r)))
            if not queue:
                continue
            back = queue.pop(0)
            level = back.get("delay_level")
            attempt = int(r)
            points.append(
                RetryPoint(
                    group=str(back.get("group")),
                    msg_key=str(back.get("msg_key")),
                    attempt=attempt,
                    level=None if level is None else int(level),
                    sent_back_ts=int(back["ts"]),
                    delivered_ts=int(row["ts"]),
                    observed_ms=int(row["ts"]) - int(back["ts"]),
                    level_ms=None if level is None or level <= 0 else level_delay_ms(levels_ms, int(level)),
                    table_ms=retry_table_ms(levels_ms, attempt),
                    seqs=(int(back["seq"]), int(row["seq"])),
                )
            )
    unmatched = sum(len(q) for q in pending.values())
    return points, unmatched


def extract_delays(rows: Iterable[Row], levels_ms: Sequence[int] = DEFAULT_LEVELS_MS) -> list[DelayPoint]:
    """Each ``store`` in SCHEDULE_TOPIC_XXXX with its ``schedule_fire`` and first ``deliver``."""
    points: list[DelayPoint] = []
    by_offset: dict[int, int] = {}  # SCHEDULE copy commitlog offset -> point index
    by_key: dict[tuple[Any, Any], list[int]] = {}  # (msg_key, reconsume_times) -> point indexes
    awaiting: dict[int, int] = {}  # fired copy commitlog offset -> point index
    for row in rows:
        event = row.get("event")
        if event == "store" and row.get("topic") == SCHEDULE_TOPIC and row.get("deliver_ts") is not None:
            level = row.get("delay_level")
            if level is None:
                level = int(row.get("queue_id") or 0) + 1  # SCHEDULE queue = level − 1
            r = int(row.get("reconsume_times") or 0)
            index = len(points)
            points.append(
                DelayPoint(
                    msg_key=row.get("msg_key"),
                    kind="retry" if r >= 1 else "delayed",
                    level=int(level),
                    stored_ts=int(row["ts"]),
                    due_ts=int(row["deliver_ts"]),
                    level_ms=level_delay_ms(levels_ms, int(level)),
                    seqs=(int(row["seq"]),),
                )
            )
            if row.get("commitlog_offset") is not None:
                by_offset[int(row["commitlog_offset"])] = index
            by_key.setdefault((row.get("msg_key"), r), []).append(index)
        elif event == "schedule_fire":
            source = detail_of(row).get("from_commitlog_offset")
            index = by_offset.pop(int(source), None) if source is not None else None
            key = (row.get("msg_key"), int(row.get("reconsume_times") or 0))
            if index is None:
                queue = [i for i in by_key.get(key, ()) if points[i].fired_ts is None]
                index = queue[0] if queue else None
            if index is None or points[index].fired_ts is not None:
                continue
            if index in by_key.get(key, []):
                by_key[key].remove(index)
            p = points[index]
            points[index] = attrs.evolve(p, fired_ts=int(row["ts"]), seqs=(*p.seqs, int(row["seq"])))
            if row.get("commitlog_offset") is not None:
                awaiting[int(row["commitlog_offset"])] = index
        elif event == "deliver" and row.get("commitlog_offset") is not None:
            index = awaiting.pop(int(row["commitlog_offset"]), None)
            if index is None:
                continue
            p = points[index]
            points[index] = attrs.evolve(p, delivered_ts=int(row["ts"]), seqs=(*p.seqs, int(row["seq"])))
    return points


def extract_locks(
    rows: Iterable[Row], broker_lock_ms: int = BROKER_LOCK_MS
) -> tuple[list[LockSegment], list[LockDenial], int, int]:
    """(segments, denials, first ts, last ts) of the broker's lock table over the trace.

    GRANTED to the holder within the lifetime renews its segment; GRANTED to
    anyone after ``last_grant + broker_lock_ms`` ends the old segment at that
    expiry; GRANTED to another client before it ends it as a ``takeover``
    (the audit's LOCK_OVERLAP). ``unlock`` by the holder and ``crash`` end it
    at their ts; a segment still open ends at its expiry or the trace end.
    """
    open_: dict[tuple[str, str, int], dict[str, Any]] = {}
    segments: list[LockSegment] = []
    denials: list[LockDenial] = []
    first: int | None = None
    last = 0

    def close(key: tuple[str, str, int], end: int, reason: str, seq: int | None) -> None:
        seg = open_.pop(key)
        expiry = seg["last_grant"] + broker_lock_ms
        if end > expiry:
            end, reason, seq = expiry, "expired", None
        seqs = seg["seqs"] if seq is None else (*seg["seqs"], seq)
        segments.append(
            LockSegment(key[0], key[1], key[2], seg["client"], seg["start"], seg["last_grant"], end, reason,
                        seg["grants"], seqs)
        )

    for row in rows:
        ts = int(row["ts"])
        first = ts if first is None else first
        last = max(last, ts)
        event = row.get("event")
        if event == "crash":
            for key in list(open_):
                close(key, ts, "crash", int(row["seq"]))
            continue
        if event not in ("lock", "unlock") or row.get("queue_id") is None:
            continue
        key = (str(row.get("group")), str(row.get("topic")), int(row["queue_id"]))
        client = str(row.get("client_id") or row.get("actor"))
        seq = int(row["seq"])
        held = open_.get(key)
        if event == "unlock":
            if held is not None and held["client"] == client:
                close(key, ts, "unlock", seq)
            continue
        status = row.get("status")
        if status == "DENIED":
            denials.append(LockDenial(key[0], key[1], key[2], client, ts, seq))
            continue
        if status != "GRANTED":
            continue
        if held is not None:
            expired = ts - held["last_grant"] > broker_lock_ms
            if held["client"] == client and not expired:
                held["last_grant"] = ts
                held["grants"] += 1
                continue
            close(key, ts, "expired" if expired else "takeover", seq)
        open_[key] = {"client": client, "start": ts, "last_grant": ts, "grants": 1, "seqs": (seq,)}
    for key in list(open_):
        close(key, last, "trace end", None)
    segments.sort(key=lambda s: (s.group, s.topic, s.queue_id, s.start))
    return segments, denials, first or 0, last


def extract_txn_counts(rows: Iterable[Row]) -> TxnCounts:
    """Totals of the transaction lifecycle (each transaction by ``txn_id``, else msg_key)."""
    halves: set[Any] = set()
    commits: dict[Any, int] = {}
    rollbacks: set[Any] = set()
    discarded: set[Any] = set()
    checked: set[Any] = set()
    checks = 0
    for row in rows:
        event = row.get("event")
        if event not in ("txn_half", "txn_end", "txn_check", "txn_discard"):
            continue
        txn = row.get("txn_id") or row.get("msg_key")
        if txn is None:
            continue
        if event == "txn_half":
            halves.add(txn)
        elif event == "txn_end":
            if row.get("status") == "COMMIT":
                commits[txn] = commits.get(txn, 0) + 1
            elif row.get("status") == "ROLLBACK":
                rollbacks.add(txn)
        elif event == "txn_check":
            checks += 1
            checked.add(txn)
        else:
            discarded.add(txn)
    resolved = set(commits) | rollbacks | discarded
    return TxnCounts(
        halves=len(halves),
        committed=len(commits),
        rolled_back=len(rollbacks),
        checks=checks,
        checked_txns=len(checked),
        discarded=len(discarded),
        duplicate_commits=sum(1 for n in commits.values() if n > 1),
        unresolved=len(halves - resolved),
    )

