"""The SPEC §8.1 rules in Spark: seven passes, each one shuffle by its key (four for the table pass)
and a judge per partition.

Theory of operation
-------------------
Every rule has the name, the definition and the ``seqs`` convention of its
reference detector in ``rmqspec.traces.checks_*`` (read those docstrings
for the exact meaning); differential tests hold the two equal.

The input is lazy (never cached): Parquet is already a compact columnar
copy of the trace, so each pass below reads only its own events and
columns (filter and projection before the shuffle) and shuffles them once
by its key. Every rule keys by a refinement of its pass's key, so a
partition holds all the rows any of its rules reads for a key, and each
partition is judged in Python (``mapInArrow``): in numpy over integer codes
of the keys where the rows are many (``arrow_judge.py``), by the checker's
own detectors where they are a few percent of a trace.

=====================  =============================  ===============================================
pass (rows read)       shuffled by, judged            rules
=====================  =============================  ===============================================
queue: store,          trace, topic, queue_id;        ORDER_QUEUE_GAP, OFFSET_OVERRUN, OFFSET_LOST,
deliver, acks,         in numpy per partition         ORDER_KEY_REORDERED, LOCK_OVERLAP,
commit_offset, lock,   (``rules_queue.py``,           ORDERLY_WITHOUT_LOCK, ORDERLY_CONCURRENT
unlock, orderly_*      ``rules_lock.py``); a filter   ORDERLY_LOOP_OVERRUN (a row's own judgement)
                       of the orderly_start rows
message: the 9         trace, msg_key;                UNEXPECTED, RECOVERED, DUPLICATED,
message events         in numpy per partition         RETRY_EARLY, DLQ_EARLY, DLQ_MISSED,
                       (``rules_message.py``,         TXN_VISIBLE_BEFORE_COMMIT, TXN_ROLLBACK_VISIBLE,
                       ``rules_retry.py``,            DELAY_EARLY, DLQ_DELAYED, SCHEDULE_DUPLICATED,
                       ``rules_copies.py``,           LOST (x the consumers of the topic, collected;
                       ``rules_timer.py``,            a broadcasting client's: ``rules_broadcast.py``),
                       ``rules_broadcast.py``)        TIMER_EARLY, TIMER_DUPLICATED, TIMER_UNFIRED
txn: txn_*             trace, txn_id; by the          TXN_DOUBLE_RESOLVED, DUPLICATE_COMMIT,
                       checker's detectors            TXN_CHECK_EARLY, TXN_CHECK_EXCEEDED,
                       (``rules_txn.py``)             TXN_UNRESOLVED, TXN_CHECK_AFTER_RESOLVED,
                                                      TXN_DISCARD_EARLY
table: lock, unlock,   trace / trace, msg_key /       LOCK_LIFECYCLE, MESSAGE_LIFECYCLE,
restarts; send-backs,  trace, txn_id / trace,         TXN_LIFECYCLE
copies, fires; txn_*;  msg_key; the checker's
timer requests,        replays (``rules_table.py``)
copies, fires
keyed: sends with a    trace, topic, sharding_key;    ORDER_KEY_SPLIT
sharding_key           the checker's detector
                       (``rules_keyed.py``)
route: sends with an   trace, actor; the checker's    PRODUCER_RETRY_SAME_BROKER,
actor and              detectors (``rules_route.py``) PRODUCER_FAULT_WINDOW
``detail.tries``
ha: a pair's stores,   trace (the traces with a       HA_SYNC_ACK_UNREPLICATED, HA_SYNC_ACK_LOST,
sends, deliveries,     pair's row); the checker's     HA_SLAVE_SERVED_UNSTORED,
replicate, ha_link     replay (``rules_ha.py``)       HA_SLAVE_BEYOND_REPLICATED, HA_SLAVE_NOT_PREFIX,
                                                      HA_SLAVE_WROTE, HA_ASYNC_TAIL_LOST
=====================  =============================  ===============================================

Input: the validated rows with columns ``trace`` (non-null; "" for a
single trace), the SPEC §8 columns, ``epoch`` (crash/recover rows before
the row) and ``drain`` (the trace's last drain seq or null); optionally
``at_risk`` = (trace, msg_key) of the keys crashes list in
``detail.at_risk``, for which LOST, TXN_UNRESOLVED and RECOVERED are not
reported (a small broadcast join). Output: one DataFrame with ``kind``
('violation' / 'observation'), ``code``, ``seqs`` (array<bigint>), the
key columns and ``reason``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import reduce
from typing import Any

import attrs
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from rmqspec.properties.codes import AuditParams, Code

__all__ = [
    "FINDING_COLUMNS",
    "FINDING_SCHEMA",
    "PASSES",
    "PassInput",
    "all_findings",
    "pass_findings",
    "register_pass",
    "shuffled_by",
]

KEYS: tuple[tuple[str, T.DataType], ...] = (
    ("group", T.StringType()),
    ("topic", T.StringType()),
    ("queue_id", T.IntegerType()),
    ("msg_key", T.StringType()),
    ("client_id", T.StringType()),
    ("txn_id", T.StringType()),
)
FINDING_COLUMNS: tuple[str, ...] = (
    "kind",
    "code",
    "seqs",
    "trace",
    *(k for k, _ in KEYS),
    "reason",
)
# The findings of every rule, as a Spark schema (the plans that build findings in Python use it).
FINDING_SCHEMA = T.StructType(
    [
        T.StructField("kind", T.StringType()),
        T.StructField("code", T.StringType()),
        T.StructField("seqs", T.ArrayType(T.LongType())),
        T.StructField("trace", T.StringType()),
        *(T.StructField(name, dtype) for name, dtype in KEYS),
        T.StructField("reason", T.StringType()),
    ]
)


def EV() -> Column:
    return F.col("event")


def SEQ() -> Column:
    return F.col("seq")


UNBOUNDED = Window.unboundedPreceding


def shuffled_by(*cols: str) -> Callable[[DataFrame], DataFrame]:
    """For ``DataFrame.transform``: a pass's narrow rows hash-partitioned by its key ``cols``.

    When the session runs on one shuffle partition (small inputs, ``job.SMALL_INPUT_CONF``:
    the cached input is one partition), every window, aggregation and join already has the
    distribution it needs, so the rows are left where they are: a shuffle would only copy
    them (and cost a stage). Either way Spark's planner adds any shuffle a window needs.
    """

    def apply(df: DataFrame) -> DataFrame:
        if df.sparkSession.conf.get("spark.sql.shuffle.partitions") == "1":
            return df
        return df.repartition(*cols)

    return apply


def _finding(
    df: DataFrame,
    code: str,
    seqs: Sequence[Column],
    keys: Sequence[str],
    reason: Column,
    kind: str = "violation",
) -> DataFrame:
    cols = [
        F.lit(kind).alias("kind"),
        F.lit(code).alias("code"),
        F.array(*[c.cast("bigint") for c in seqs]).alias("seqs"),
        F.col("trace"),
    ]
    for name, dtype in KEYS:
        cols.append((F.col(name) if name in keys else F.lit(None)).cast(dtype).alias(name))
    cols.append(reason.alias("reason"))
    return df.select(*cols)


def _nn(*names: str) -> Column:
    return reduce(lambda a, b: a & b, [F.col(n).isNotNull() for n in names])


# -------------------------------------------------------------- queue family


def queue_rules(df: DataFrame, params: AuditParams, constants: Mapping[str, Any] | None = None) -> list[DataFrame]:
    """ORDER_QUEUE_GAP, OFFSET_OVERRUN and the lock family (ORDER_KEY_REORDERED, LOCK_OVERLAP,
    ORDERLY_WITHOUT_LOCK, ORDERLY_CONCURRENT): one shuffle by (trace, topic, queue_id), judged
    per partition (``spark/rules_queue.py``); ORDERLY_LOOP_OVERRUN, a row's own judgement, a filter of the
    rows (``spark/rules_lock.loop_findings``)."""
    from rmqspec.spark.rules_lock import loop_findings  # they import this module
    from rmqspec.spark.rules_queue import queue_findings

    return [queue_findings(df, params, constants), loop_findings(df)]


# ------------------------------------------------------------ message family


_MSG_EVENTS = ("send", "store", "deliver", "consume", "send_back", "schedule_fire", "txn_half", "txn_end",
               "timer_fire")


def message_rules(
    df: DataFrame,
    params: AuditParams,
    consumers: Mapping[tuple[str, str], list[str]],
    has_drain: bool,
    at_risk: DataFrame | None = None,
    has_crash: bool = True,
    has_power: bool = True,
    constants: Mapping[str, Any] | None = None,
    drain_ts: Mapping[str, int] | None = None,
    broadcasting: Mapping[str, Sequence[str]] | None = None,
    has_expire: bool = True,
) -> list[DataFrame]:
    """Rules keyed by msg_key; ``consumers`` is (trace, topic) -> its consuming groups; ``drain_ts``
    is trace -> its last drain's ts (TIMER_UNFIRED); ``broadcasting`` is trace -> its broadcasting
    groups (LOST judges them per client: ``spark/rules_broadcast.py``).

    One shuffle by (trace, msg_key) of the message rows, judged per partition
    in numpy (``spark/rules_message.py``): UNEXPECTED, RECOVERED, DUPLICATED,
    RETRY_EARLY (deliver clause), transaction visibility, DELAY_EARLY and LOST; and the
    timer rules by the checker's detectors (``spark/rules_timer.py``).
    """
    from rmqspec.spark.rules_message import message_findings  # it imports this module

    return [message_findings(df, params, consumers, has_drain, at_risk, has_crash, has_power, constants, drain_ts,
                             broadcasting, has_expire), clean_findings(df)]


def clean_findings(df: DataFrame) -> DataFrame:
    """RETRY_EARLY's clean case (``traces/checks_retry.detect_clean_early``): a row's own judgement, so a filter
    of the validated rows, no shuffle: a ``send_back`` of the client's clean (the derived columns
    ``clean_start`` and ``clean_timeout_min``, ``inputs.clean_number``) at or before consumeTimeout after its
    consume start; the checker's keys and reason."""
    start, minutes = F.col("clean_start"), F.col("clean_timeout_min")
    ran, timeout = F.col("ts") - start, minutes * F.lit(60_000)
    early = df.filter((EV() == "send_back") & _nn("clean_start", "clean_timeout_min", "ts") & (minutes > 0)
                      & (ran <= timeout))
    reason = F.concat(
        F.lit("the client's cleanExpiredMsg sent back a running message "), ran.cast("string"),
        F.lit(" ms after its consume start, not more than consumeTimeout ("), timeout.cast("string"),
        F.lit(" ms): a client fault, not the broker's"),
    )
    return _finding(early, Code.RETRY_EARLY.value, [F.col("seq")], ("group", "topic", "msg_key"), reason)


# ---------------------------------------------------------------- txn family


def txn_rules(
    df: DataFrame,
    params: AuditParams,
    at_risk: DataFrame | None = None,
    has_power: bool = True,
    constants: Mapping[str, Any] | None = None,
    has_expire: bool = True,
) -> list[DataFrame]:
    """Every transaction rule in one pass: one shuffle by txn_id, judged per partition by the
    checker's detectors (``spark/rules_txn.py``). ``has_power`` False (no power-loss crash): no
    half can be skipped and every op is seen, so neither is computed. With op batching
    (``params.op_batch_ms`` > 0) the seq, ts and event of the crash and recover rows are collected too;
    with ``has_expire`` (some trace has an ``expire`` row) the ``expire`` rows before each drain."""
    from rmqspec.spark.rules_lifecycle import _unseen_ops  # they import this module
    from rmqspec.spark.rules_retention import expires_of
    from rmqspec.spark.rules_txn import txn_findings

    skipped = _skipped_halves(df) if has_power else None
    unseen = _unseen_ops(df) if has_power else None
    # op batching (5.1.0+): a crash or recover within 3 x op_batch_ms of an END, or a recover as the first
    # restart row after it (a clean restart: no row shows when the broker stopped), loses its op
    downs = df.filter(EV().isin("crash", "recover")).select("trace", "seq", "ts", "event") if params.op_batch_ms \
        else None
    expires = expires_of(df) if has_expire else None
    return [txn_findings(df, params, at_risk, skipped, unseen, constants, downs, expires)]


def table_rules(df: DataFrame, params: AuditParams, constants: Mapping[str, Any] | None = None) -> list[DataFrame]:
    """MESSAGE_LIFECYCLE, LOCK_LIFECYCLE, TXN_LIFECYCLE: ``model/lifecycle.py``'s tables replayed
    (``spark/rules_table.py``: the reference checker's replays, per trace / msg_key / txn_id)."""
    from rmqspec.spark.rules_table import table_findings  # it imports this module

    return table_findings(df, params, constants)


def route_rules(df: DataFrame, params: AuditParams, constants: Mapping[str, Any] | None = None) -> list[DataFrame]:
    """PRODUCER_RETRY_SAME_BROKER, PRODUCER_FAULT_WINDOW: one shuffle of a routed producer's sends by (trace,
    actor), judged by the checker's detectors (``spark/rules_route.py``)."""
    from rmqspec.spark.rules_route import route_findings  # it imports this module

    return [route_findings(df, params, constants)]
def ha_rules(df: DataFrame, constants: Mapping[str, Any] | None = None) -> list[DataFrame]:
    """A master/slave pair's rules (issue 43; ``spark/rules_ha.py``: the reference checker's replay, per
    trace with a pair's rows)."""
    from rmqspec.spark.rules_ha import ha_findings  # it imports this module

    return ha_findings(df, constants)


def keyed_rules(df: DataFrame, params: AuditParams, constants: Mapping[str, Any] | None = None) -> list[DataFrame]:
    """ORDER_KEY_SPLIT: the ordered sends shuffled by (trace, topic, sharding_key), judged by the
    checker's detector (``spark/rules_keyed.py``)."""
    from rmqspec.spark.rules_keyed import keyed_findings  # it imports this module

    return [keyed_findings(df, params, constants)]


def _skipped_halves(df: DataFrame) -> DataFrame:
    """(s_trace, s_txn): halves sent after a power loss at a reused half-queue position below
    1 + the highest one seen before it (``traces.checks_txn.skipped_halves``)."""
    is_pos = EV().isin("txn_half", "txn_check") & F.col("queue_offset").isNotNull()
    power = (EV() == "crash") & (F.col("status") == "power")
    rows = df.filter(is_pos | power).select("trace", "seq", "event", "queue_offset", "txn_id", power.alias("power"))
    w = Window.partitionBy("trace").orderBy("seq").rowsBetween(UNBOUNDED, -1)
    seen = F.max(F.when(is_pos, F.col("queue_offset"))).over(w)
    rows = rows.withColumn("bound_here", F.when(F.col("power"), F.coalesce(seen, F.lit(-1)) + 1))
    rows = rows.withColumn("bound", F.max("bound_here").over(w))
    return (
        rows.filter((EV() == "txn_half") & F.col("txn_id").isNotNull() & (F.col("queue_offset") < F.col("bound")))
        .select(F.col("trace").alias("s_trace"), F.col("txn_id").alias("s_txn"))
        .distinct()
    )


# --------------------------------------------------------------------- plan


def consumers_of(df: DataFrame, subscriptions: Mapping[str, Sequence[str]]) -> DataFrame:
    """(c_trace, c_topic, groups): who consumes each topic, per trace (a job of its own: the
    audit job has them from its facts pass, ``job._consumers``)."""
    seen = df.filter(EV().isin("deliver", "consume") & _nn("group", "topic")).select(
        F.col("trace").alias("c_trace"), F.col("topic").alias("c_topic"), "group"
    )
    if subscriptions:
        traces = df.select(F.col("trace").alias("c_trace")).distinct()
        pairs = [(g, t) for g, ts in subscriptions.items() for t in ts]
        sub = df.sparkSession.createDataFrame(pairs, "group string, c_topic string")
        seen = seen.unionByName(traces.crossJoin(sub).select("c_trace", "c_topic", "group"))
    return seen.groupBy("c_trace", "c_topic").agg(F.array_sort(F.collect_set("group")).alias("groups"))


def broadcasting_of(df: DataFrame) -> dict[str, list[str]]:
    """trace -> its broadcasting groups (``Trace.broadcasting``: a broadcasting deliver, consume or
    commit_offset with a group), for the traces with some: a job of its own (the audit job has them from
    its facts pass)."""
    rows = df.filter(EV().isin("deliver", "consume", "commit_offset") & F.col("broadcasting") & _nn("group"))
    found = rows.groupBy("trace").agg(F.array_sort(F.collect_set("group")).alias("groups")).collect()
    return {r["trace"]: list(r["groups"]) for r in found}


def drains_of(df: DataFrame) -> dict[str, int]:
    """trace -> the ts of its last drain (of two with one seq, the later ts): a job of its own (the
    audit job has them from its facts pass)."""
    last = df.filter((EV() == "drain") & (SEQ() == F.col("drain"))).groupBy("trace").agg(F.max("ts").alias("ts"))
    return {r["trace"]: r["ts"] for r in last.collect()}


@attrs.frozen
class PassInput:
    """What every pass gets besides the rows: the configuration and the trace facts."""

    params: AuditParams
    has_drain: bool
    consumers: Mapping[tuple[str, str], list[str]]  # (trace, topic) -> its consuming groups, sorted
    at_risk: DataFrame | None
    has_crash: bool = True  # False: no trace has a crash row (the crash exemptions are empty)
    has_power: bool = True  # False: no trace has a power-loss crash (the power-loss exemptions are empty)
    # Columns of ``df`` the driver knows to hold one value (``arrow_judge.shipped``): not shuffled.
    constants: Mapping[str, Any] = attrs.field(factory=dict)
    drain_ts: Mapping[str, int] = attrs.field(factory=dict)  # trace -> its last drain's ts
    broadcasting: Mapping[str, list[str]] = attrs.field(factory=dict)  # trace -> its broadcasting groups
    has_expire: bool = True  # False: no trace has an ``expire`` row (retention took nothing: no pass reads one)


Pass = Callable[[DataFrame, PassInput], list[DataFrame]]

# The passes of the rules phase, in order: (name, pass). A new rules module adds
# its pass here (``PASSES += (("name", fn),)``) or through ``register_pass``;
# ``bench audit --profile`` times each pass on its own.
PASSES: tuple[tuple[str, Pass], ...] = (
    ("queue", lambda df, c: queue_rules(df, c.params, c.constants)),
    (
        "message",
        lambda df, c: message_rules(
            df, c.params, c.consumers, c.has_drain, c.at_risk, c.has_crash, c.has_power, c.constants, c.drain_ts,
            c.broadcasting, c.has_expire,
        ),
    ),
    ("txn", lambda df, c: txn_rules(df, c.params, c.at_risk, c.has_power, c.constants,
                                    c.has_drain and c.has_expire)),
    ("table", lambda df, c: table_rules(df, c.params, c.constants)),
    ("keyed", lambda df, c: keyed_rules(df, c.params, c.constants)),
    ("route", lambda df, c: route_rules(df, c.params, c.constants)),
    ("ha", lambda df, c: ha_rules(df, c.constants)),
)


def register_pass(name: str, fn: Pass) -> None:
    """Add a pass (a rules module's entry) after the built-in ones; its findings join ``all_findings``."""
    global PASSES
    if name in dict(PASSES):
        raise ValueError(f"pass {name!r} is already registered")
    PASSES = (*PASSES, (name, fn))


def pass_findings(
    df: DataFrame,
    params: AuditParams,
    *,
    has_drain: bool,
    subscriptions: Mapping[str, Sequence[str]] | None = None,
    at_risk: DataFrame | None = None,
    has_crash: bool = True,
    has_power: bool = True,
    constants: Mapping[str, Any] | None = None,
    consumers: Mapping[tuple[str, str], list[str]] | None = None,
    drain_ts: Mapping[str, int] | None = None,
    broadcasting: Mapping[str, Sequence[str]] | None = None,
    has_expire: bool = True,
) -> dict[str, DataFrame]:
    """pass name -> the union of that pass's findings (same arguments as ``all_findings``)."""
    if consumers is None:  # only LOST reads them, and only with a drain
        found = consumers_of(df, subscriptions or {}).collect() if has_drain else []
        consumers = {(r["c_trace"], r["c_topic"]): list(r["groups"]) for r in found}
    if drain_ts is None:  # only TIMER_UNFIRED reads them, and only with a drain
        drain_ts = drains_of(df) if has_drain else {}
    if broadcasting is None:  # only LOST reads them, and only with a drain
        broadcasting = broadcasting_of(df) if has_drain else {}
    ctx = PassInput(params, has_drain, dict(consumers), at_risk, has_crash, has_power, dict(constants or {}),
                    dict(drain_ts), {trace: list(groups) for trace, groups in broadcasting.items()}, has_expire)
    return {name: reduce(DataFrame.unionByName, fn(df, ctx)) for name, fn in PASSES}


def all_findings(
    df: DataFrame,
    params: AuditParams,
    *,
    has_drain: bool,
    subscriptions: Mapping[str, Sequence[str]] | None = None,
    at_risk: DataFrame | None = None,
    has_crash: bool = True,
    has_filters: bool = True,
    has_power: bool = True,
    constants: Mapping[str, Any] | None = None,
    consumers: Mapping[tuple[str, str], list[str]] | None = None,
    drain_ts: Mapping[str, int] | None = None,
    broadcasting: Mapping[str, Sequence[str]] | None = None,
    has_expire: bool = True,
) -> DataFrame:
    """Every §8.1 finding of ``df`` (validated rows with trace/epoch/drain) as one DataFrame.

    ``df`` is read lazily, never cached: each branch reads only its own
    events and columns (Parquet column pruning), shuffles them by its key
    and sorts once per ordering it needs. ``at_risk`` is (trace, msg_key) of
    the keys crashes list in ``detail.at_risk`` (None when there are none):
    no LOST, TXN_UNRESOLVED or RECOVERED for them. ``has_crash``: whether any
    trace has a crash row (when none, the rules skip the crash exemptions' joins); ``has_power``
    likewise for power-loss crashes (``status`` power). ``constants``: columns of ``df`` the
    driver knows to hold one value on every row (name -> value, ``arrow_judge.CONSTANT_TYPES``),
    which the judged passes then do not shuffle. ``consumers``: (trace, topic) -> the groups
    consuming it (``consumers_of``; None: computed here, a job of its own). ``drain_ts``: trace -> its
    last drain's ts (``drains_of``; None: likewise). ``broadcasting``: trace -> its broadcasting groups
    (``broadcasting_of``; None: likewise). ``has_expire``: whether any trace has an ``expire`` row (when
    none, LOST's and TIMER_UNFIRED's retention pass is left out, ``spark/rules_retention.py``, and the
    transaction pass collects no ``expire`` rows for TXN_UNRESOLVED).
    ``has_filters``: whether any row carries what the filter rules read (``inputs.filter_detail``;
    when none, they find nothing and exempt nothing, and are left out). The passes are ``PASSES``.
    """
    parts = pass_findings(
        df,
        params,
        has_drain=has_drain,
        subscriptions=subscriptions,
        at_risk=at_risk,
        has_crash=has_crash,
        has_power=has_power,
        constants=constants,
        consumers=consumers,
        drain_ts=drain_ts,
        broadcasting=broadcasting,
        has_expire=has_expire,
    )
    found = reduce(DataFrame.unionByName, parts.values())
    if not has_filters:
        return found
    from rmqspec.spark import rules_filter  # it imports this module

    return rules_filter.with_filter_rules(found, df)
