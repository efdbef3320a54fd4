"""The lifecycle tables replayed in Spark: MESSAGE_LIFECYCLE, LOCK_LIFECYCLE, TXN_LIFECYCLE (and pop's).

Theory of operation
-------------------
The reference checker (``traces/checks_table.py``) and this pass run the same
replays of ``model/lifecycle.py``'s tables (``properties/inv_replay_*.py``),
so they agree by construction; what the pass decides is where each replay's
rows meet, each in one shuffle and a ``mapInArrow`` judge that hands every
trace's (or key's) rows, in seq order, to the replay:

=========  ==============================================  ==================
replay     rows                                            shuffled by
=========  ==============================================  ==================
lock       ``lock``, ``unlock``, ``crash``, ``recover``      trace (a lock row
           (a few per ten thousand rows)                   lacking its queue
                                                           may touch any
                                                           entry)
message    ``send_back``, ``schedule_fire``, and ``store``   trace, msg_key
           rows that may be a send-back's copy, a schedule
           copy or a fired retry copy (topic absent,
           SCHEDULE_TOPIC_XXXX, ``%DLQ%…``, ``%RETRY%…``),
           the ``send``s that may be delayed (delay_level
           absent or above 0), with a msg_key; ``detail``
           only on send-backs
txn        ``txn_*`` rows with a txn_id of the              trace, txn_id
           transactions that have a ``txn_check`` (the only
           rows a finding ends on; filtered in the judge);
           the ``epoch`` column stands for the restarts
timer      5.x timer requests (a ``send``, or a COMMIT       trace, msg_key
           ``txn_end``, whose ``detail`` names ``"timer"``:
           ``inputs.timer_detail``), the ``store``s in
           rmq_sys_wheel_timer and the ``timer_fire``s,
           with a msg_key; the ``crashes`` column stands
           for the ``crash`` rows
pop        5.x pop rows: ``pop``, ``change_invisible``,      trace (an ack or a
           ``ack``, ``revive`` and the ``crash`` rows        change may name
           (their ``status``: kill or power), with           only its handle,
           ``detail`` (``inputs.pop_detail``)                 whose msg_key is
                                                           its pop row's)
=========  ==============================================  ==================

The timer replay (``inv_replay_timer.judge_timers``, MESSAGE_LIFECYCLE) keeps
one lifecycle per request of a msg_key and reads no other key's rows, except
the ``crash`` rows, which step every request (a fired copy becomes
REFIRABLE). A crash row has no msg_key, so it cannot go with its keys'
partitions; the judge puts one back wherever the ``crashes`` column (the crash
rows before a row) grows between two consecutive rows of a trace in its
partition. That is exact: the TIMER table's crash rows read no variable
(unguarded, no effect), and a crash is idempotent on every state (WHEEL stays
WHEEL, FIRED and REFIRABLE become REFIRABLE; SCHEDULED, STORED and REFUSED
have no crash row), so several crashes between two rows act as one, and a
crash before a key's first row acts on no request of it.

What a replay reads beyond its partition is whether the trace has rows it
cannot attribute (``inv_replay.Unkeyed``: a send-back or a possible copy
without msg_key, a ``txn_*`` row without txn_id): one small aggregation,
collected on the driver (at most a few rows per trace), each row's class read
by ``inv_replay.unkeyed_row`` itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from rmqspec.properties.codes import AuditParams
from rmqspec.properties.inv_pop import judge_pops
from rmqspec.properties.inv_replay import (
    ALL_KEYED,
    DLQ_PREFIX,
    RETRY_PREFIX,
    SCHEDULE_TOPIC,
    UNKEYED_TXN_EVENTS,
    TableFinding,
    Unkeyed,
    unkeyed_row,
)
from rmqspec.properties.inv_replay_lock import judge_locks
from rmqspec.properties.inv_replay_message import judge_messages
from rmqspec.properties.inv_replay_timer import judge_timers
from rmqspec.properties.inv_replay_txn import judge_txns
from rmqspec.spark.arrow_judge import Columns, finding, judge, keyed, shipped
from rmqspec.spark.rules import EV, FINDING_SCHEMA
from rmqspec.traces.checks_common import TIMER_TOPIC

__all__ = ["LOCK_COLUMNS", "MESSAGE_COLUMNS", "POP_COLUMNS", "TIMER_COLUMNS", "TXN_COLUMNS", "table_findings",
           "unkeyed_by_trace"]

LOCK_COLUMNS = ("trace", "seq", "ts", "event", "group", "topic", "queue_id", "client_id", "status")
MESSAGE_COLUMNS = ("trace", "seq", "ts", "event", "group", "topic", "queue_id", "msg_key", "reconsume_times",
                   "delay_level", "status", "detail")  # fmt: skip
TXN_COLUMNS = ("trace", "seq", "ts", "event", "status", "msg_key", "txn_id", "check_times", "epoch")
TIMER_COLUMNS = ("trace", "seq", "ts", "event", "topic", "queue_id", "msg_key", "reconsume_times", "delay_level",
                 "deliver_ts", "status", "detail", "crashes")  # fmt: skip
POP_COLUMNS = ("trace", "seq", "ts", "event", "group", "topic", "queue_id", "queue_offset", "msg_key",
               "reconsume_times", "deliver_ts", "status", "detail")  # fmt: skip
POP_EVENTS = ("pop", "change_invisible", "ack", "revive", "crash")
_TXN_EVENTS = ("txn_half", *UNKEYED_TXN_EVENTS)


def table_findings(df: DataFrame, params: AuditParams, constants: Mapping[str, Any] | None = None) -> list[DataFrame]:
    """The five replays' findings (``FINDING_COLUMNS``) of the validated rows ``df`` (with ``trace``,
    ``epoch`` and ``crashes``); ``constants``: columns the driver knows to hold one value
    (``arrow_judge.shipped``)."""
    constants = constants or {}
    unkeyed = unkeyed_by_trace(df)
    locks, left = shipped(df.filter(EV().isin("lock", "unlock", "crash", "recover")),
                          [F.col(c) for c in LOCK_COLUMNS], constants)  # fmt: skip
    messages, m_left = shipped(df.filter(_message_rows()), [_message_column(c) for c in MESSAGE_COLUMNS], constants)
    txns, t_left = shipped(df.filter(EV().isin(*_TXN_EVENTS) & F.col("txn_id").isNotNull()),
                           [F.col(c) for c in TXN_COLUMNS], constants)  # fmt: skip
    timers, w_left = shipped(df.filter(_timer_rows()), [_timer_column(c) for c in TIMER_COLUMNS], constants)
    pops, p_left = shipped(df.filter(EV().isin(*POP_EVENTS)),
                           [F.col("pop_detail").alias(c) if c == "detail" else F.col(c) for c in POP_COLUMNS],
                           constants)  # fmt: skip
    locks = keyed(locks, "trace") if "trace" in locks.columns else locks.coalesce(1)  # one trace: one partition
    pops = keyed(pops, "trace") if "trace" in pops.columns else pops.coalesce(1)
    return [
        locks.mapInArrow(judge(_by_trace(_locks(params)), left), FINDING_SCHEMA),
        keyed(messages, "trace", "msg_key").mapInArrow(judge(_by_trace(_messages(params, unkeyed)), m_left),
                                                       FINDING_SCHEMA),
        keyed(txns, "trace", "txn_id").mapInArrow(judge(_Txns(params, unkeyed), t_left), FINDING_SCHEMA),
        keyed(timers, "trace", "msg_key").mapInArrow(judge(_by_trace(_timers(params)), w_left), FINDING_SCHEMA),
        pops.mapInArrow(judge(_by_trace(lambda _trace, rows: judge_pops(rows)), p_left), FINDING_SCHEMA),
    ]


def unkeyed_by_trace(df: DataFrame) -> dict[str, Unkeyed]:
    """trace -> the rows its replays cannot attribute (``inv_replay.unkeyed_row``), one small job."""
    topic = F.col("topic")
    kind = (F.when(topic.isNull(), F.lit(None)).when(topic == SCHEDULE_TOPIC, F.lit(SCHEDULE_TOPIC))
            .when(topic.startswith(DLQ_PREFIX), F.lit(DLQ_PREFIX)).otherwise(F.lit("")))  # fmt: skip
    lacking = (
        ((EV() == "send_back") & F.col("msg_key").isNull())
        | ((EV() == "store") & F.col("msg_key").isNull())
        | (EV().isin(*UNKEYED_TXN_EVENTS) & F.col("txn_id").isNull())
        | ((EV() == "send") & F.col("msg_key").isNull() & _may_be_delayed())
    )
    out: dict[str, Unkeyed] = {}
    for r in df.filter(lacking).select("trace", "event", kind.alias("kind")).distinct().collect():
        row = {"event": r["event"], "topic": r["kind"], "msg_key": None, "txn_id": None}
        out[r["trace"]] = out.get(r["trace"], ALL_KEYED) | unkeyed_row(row)
    return out


def _message_rows() -> Column:
    topic = F.col("topic")
    copy = topic.isNull() | (topic == SCHEDULE_TOPIC) | topic.startswith(DLQ_PREFIX) | topic.startswith(RETRY_PREFIX)
    return EV().isin("send_back", "schedule_fire") | ((EV() == "store") & copy) \
        | ((EV() == "send") & F.col("msg_key").isNotNull() & _may_be_delayed())


def _may_be_delayed() -> Column:
    """``inv_replay.may_be_delayed``: a send whose delay_level is absent or above 0."""
    return F.col("delay_level").isNull() | (F.col("delay_level") > 0)


def _message_column(name: str) -> Column:
    """The message rows' columns; ``detail`` is the send-backs' (``inputs.send_back_detail``: JSON text)."""
    return F.col("sb_detail").alias("detail") if name == "detail" else F.col(name)


def _timer_rows() -> Column:
    """The rows the timer replay reads besides the crashes, with a msg_key: the requests (a ``send`` or
    COMMIT ``txn_end`` whose ``detail`` names ``"timer"``: ``inputs.timer_detail``, a superset of those
    ``inv_replay_timer.timer_vars`` reads), the timer copies and the fires."""
    copy = (EV() == "store") & F.coalesce(F.col("topic") == TIMER_TOPIC, F.lit(False))
    return F.col("msg_key").isNotNull() & (F.col("timer_detail").isNotNull() | copy | (EV() == "timer_fire"))


def _timer_column(name: str) -> Column:
    """The timer rows' columns; ``detail`` is the requests' (``inputs.timer_detail``: JSON text)."""
    return F.col("timer_detail").alias("detail") if name == "detail" else F.col(name)


Replay = Callable[[str, list[dict[str, Any]]], list[TableFinding]]


def _by_trace(replay: Replay) -> Callable[[pa.Table], list[dict[str, Any]]]:
    """A judge: the partition's rows by trace, in seq order, through ``replay``."""

    def run(table: pa.Table) -> list[dict[str, Any]]:
        by_trace: dict[str, list[dict[str, Any]]] = {}
        for row in table.to_pylist():
            by_trace.setdefault(row["trace"], []).append(row)
        out: list[dict[str, Any]] = []
        for trace_id, rows in by_trace.items():
            rows.sort(key=lambda r: r["seq"])
            out.extend(_finding(trace_id, f) for f in replay(trace_id, rows))
        return out

    return run


def _locks(params: AuditParams) -> Replay:
    return lambda _trace, rows: judge_locks(rows, params)


def _messages(params: AuditParams, unkeyed: Mapping[str, Unkeyed]) -> Replay:
    return lambda trace, rows: judge_messages(rows, params, unkeyed.get(trace, ALL_KEYED))


def _timers(params: AuditParams) -> Replay:
    """The timer replay on one trace's rows of the partition (seq order), a ``crash`` row put back
    wherever the ``crashes`` column grows (see the module docstring)."""

    def run(_trace: str, rows: list[dict[str, Any]]) -> list[TableFinding]:
        fed: list[dict[str, Any]] = []
        before: int | None = None
        for row in rows:
            crashes = row.pop("crashes")
            if before is not None and crashes > before:
                fed.append({"seq": row["seq"], "ts": row["ts"], "event": "crash"})
            before = crashes
            fed.append(row)
        return judge_timers(fed, params)

    return run


class _Txns:
    """The transaction rows of a partition: those of transactions with a check, by trace, replayed
    with the ``epoch`` column as the restarts and ``check_times`` as ``detail.check_times``."""

    def __init__(self, params: AuditParams, unkeyed: Mapping[str, Unkeyed]) -> None:
        self.params = params
        self.unkeyed = dict(unkeyed)

    def __call__(self, table: pa.Table) -> list[dict[str, Any]]:
        cols = Columns(table)
        group = cols.codes("trace") * (int(cols.codes("txn_id").max()) + 2) + cols.codes("txn_id") + 1
        checked = np.unique(group[cols.is_("event", "txn_check")])
        rows = table.filter(pa.array(np.isin(group, checked))).to_pylist()
        by_trace: dict[str, list[dict[str, Any]]] = {}
        for row in rows:
            row["detail"] = {"check_times": row.pop("check_times")}
            by_trace.setdefault(row["trace"], []).append(row)
        out: list[dict[str, Any]] = []
        for trace_id, trows in by_trace.items():
            trows.sort(key=lambda r: r["seq"])
            epochs: Sequence[int] = [r["epoch"] for r in trows]
            found = judge_txns(trows, epochs, self.params, self.unkeyed.get(trace_id, ALL_KEYED))
            out.extend(_finding(trace_id, f) for f in found)
        return out


def _finding(trace_id: str, f: TableFinding) -> dict[str, Any]:
    return finding("violation", f.code, list(f.seqs), trace_id, f.reason, **dict(f.keys))
