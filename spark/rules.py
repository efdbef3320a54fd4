"""The SPEC §8.1 rules as DataFrame operations (no Python UDFs).

Theory of operation
-------------------
Every rule here has the name, the definition and the ``seqs`` convention of
its reference detector in ``rmqspec.traces.checks_*`` (read those
docstrings for the exact meaning); a differential test holds the two equal.
Rules are grouped by key family so each family costs one shuffle of the
rows it needs, after which every window partitions by a superset of the
family key (no further exchange, only sorts):

==========  ===============================  =====================================
family      repartitioned by                 rules
==========  ===============================  =====================================
row         (none: filters on the cache)     RETRY_EARLY (send_back), DLQ_EARLY,
                                             DLQ_MISSED
queue       trace, topic, queue_id           ORDER_QUEUE_GAP
lock        trace, group, topic, queue_id    ORDER_KEY_REORDERED, LOCK_OVERLAP,
                                             ORDERLY_WITHOUT_LOCK, ORDERLY_CONCURRENT
consumer    trace, group, topic, queue_id    OFFSET_OVERRUN
message     trace, msg_key                   LOST, UNEXPECTED, RETRY_EARLY (deliver),
                                             DELAY_EARLY, TXN_VISIBLE_BEFORE_COMMIT,
                                             TXN_ROLLBACK_VISIBLE, DUPLICATED, RECOVERED
txn         trace, txn_id                    TXN_DOUBLE_RESOLVED, TXN_CHECK_EARLY,
                                             TXN_CHECK_EXCEEDED, TXN_UNRESOLVED,
                                             DUPLICATE_COMMIT
==========  ===============================  =====================================

Input: the validated rows with columns ``trace`` (non-null; "" for a
single trace), the SPEC §8 columns, ``epoch`` (crash/recover rows before
the row) and ``drain`` (the trace's last drain seq or null). Output: one
DataFrame with ``kind`` ('violation' / 'observation'), ``code``, ``seqs``
(array<bigint>), the key columns and ``reason``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import reduce

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from rmqspec.properties.codes import AuditParams, Code, ObservationCode
from rmqspec.traces.checks_common import ACKED_SEND_STATUSES, SCHEDULE_TOPIC

__all__ = ["FINDING_COLUMNS", "OFFSET_BUCKET", "all_findings"]

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
# OFFSET_OVERRUN joins pending-offset intervals to commits within seq buckets
# of this width (an interval is exploded into the buckets it spans).
OFFSET_BUCKET = 8192


def EV() -> Column:
    return F.col("event")


def SEQ() -> Column:
    return F.col("seq")


UNBOUNDED = Window.unboundedPreceding
FOLLOWING = Window.unboundedFollowing


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


def _fmt(template: str, *cols: Column | str) -> Column:
    return F.format_string(template, *[F.col(c) if isinstance(c, str) else c for c in cols])


def _keep(df: DataFrame, keep: list[DataFrame]) -> DataFrame:
    """Persist a family frame several rules read (the caller unpersists ``keep``)."""
    df = df.persist(StorageLevel.MEMORY_AND_DISK)
    keep.append(df)
    return df


def _retry_limit(params: AuditParams) -> Column:
    expr = F.lit(params.retry_max_times)
    for group, value in reversed(params.group_retry_max):
        expr = F.when(F.col("group") == group, F.lit(value)).otherwise(expr)
    return expr


def _delay_ms(params: AuditParams, level: Column) -> Column:
    table = F.array(*[F.lit(ms) for ms in params.delay_levels_ms])
    clamped = F.least(F.greatest(level, F.lit(1)), F.lit(len(params.delay_levels_ms)))
    return F.element_at(table, clamped.cast("int"))


# ---------------------------------------------------------------- row family


def row_rules(df: DataFrame, params: AuditParams) -> list[DataFrame]:
    """RETRY_EARLY (send_back clause), DLQ_EARLY, DLQ_MISSED: per-row filters."""
    limit = _retry_limit(params)
    sb = df.filter(EV() == "send_back")
    delay = _delay_ms(params, F.col("delay_level"))
    early = sb.filter(
        (F.col("status") == "RETRY")
        & _nn("delay_level", "deliver_ts")
        & (F.col("delay_level") >= 1)
        & (F.col("deliver_ts") - F.col("ts") < delay)
    )
    out = [
        _finding(
            early,
            Code.RETRY_EARLY,
            [SEQ()],
            ("group", "topic", "msg_key"),
            _fmt(
                "retry due after %d ms, level %d needs %d ms",
                F.col("deliver_ts") - F.col("ts"),
                "delay_level",
                delay,
            ),
        )
    ]
    level = F.coalesce(F.col("delay_level"), F.lit(0))
    dlq_early = sb.filter(
        (F.col("status") == "DLQ")
        & F.col("reconsume_times").isNotNull()
        & (level >= 0)
        & (F.col("reconsume_times") <= limit)
    )
    out.append(
        _finding(
            dlq_early,
            Code.DLQ_EARLY,
            [SEQ()],
            ("group", "topic", "msg_key"),
            _fmt("dead-lettered after %d failures, max is %d", "reconsume_times", limit),
        )
    )
    missed_sb = sb.filter((F.col("status") == "RETRY") & (F.col("reconsume_times") > limit))
    out.append(
        _finding(
            missed_sb,
            Code.DLQ_MISSED,
            [SEQ()],
            ("group", "topic", "msg_key"),
            _fmt("retry copy %d created, max is %d: should go to the DLQ", "reconsume_times", limit),
        )
    )
    missed_dv = df.filter((EV() == "deliver") & (F.col("reconsume_times") > limit))
    out.append(
        _finding(
            missed_dv,
            Code.DLQ_MISSED,
            [SEQ()],
            ("group", "topic", "msg_key"),
            _fmt("delivered with reconsume_times %d, max is %d", "reconsume_times", limit),
        )
    )
    return out


# -------------------------------------------------------------- queue family


def queue_rules(df: DataFrame) -> list[DataFrame]:
    """ORDER_QUEUE_GAP over stores per (trace, epoch, topic, queue_id)."""
    s = df.filter((EV() == "store") & _nn("topic", "queue_id", "queue_offset"))
    s = s.repartition("trace", "topic", "queue_id")
    w = Window.partitionBy("trace", "epoch", "topic", "queue_id").orderBy("seq")
    s = s.withColumn("p_seq", F.lag("seq").over(w)).withColumn("p_off", F.lag("queue_offset").over(w))
    gap = s.filter(F.col("p_seq").isNotNull() & (F.col("queue_offset") != F.col("p_off") + 1))
    return [
        _finding(
            gap,
            Code.ORDER_QUEUE_GAP,
            [F.col("p_seq"), SEQ()],
            ("topic", "queue_id"),
            _fmt(
                "queue offset %d after %d (expected %d)",
                "queue_offset",
                "p_off",
                F.col("p_off") + 1,
            ),
        )
    ]


# --------------------------------------------------------------- lock family

_QUEUE = ("trace", "group", "topic", "queue_id")
_QKEYS = ("group", "topic", "queue_id", "client_id")


def lock_rules(df: DataFrame, params: AuditParams, keep: list[DataFrame]) -> list[DataFrame]:
    fam = df.filter(
        EV().isin("lock", "unlock", "consume", "orderly_start", "orderly_end")
        & _nn("group", "topic", "queue_id", "client_id")
    ).repartition(*_QUEUE)
    fam = _keep(fam, keep)
    return [
        _key_reordered(fam),
        _lock_overlap(fam, params),
        *_orderly_without_lock(fam, params),
        _orderly_concurrent(fam),
    ]


def _key_reordered(fam: DataFrame) -> DataFrame:
    """ORDER_KEY_REORDERED: ownership segments from grants / effective unlocks."""
    is_grant = (EV() == "lock") & (F.col("status") == "GRANTED")
    rows = fam.filter(
        is_grant
        | (EV() == "unlock")
        | ((EV() == "consume") & (F.col("status") == "SUCCESS") & F.col("queue_offset").isNotNull())
    )
    w = Window.partitionBy(*_QUEUE, "epoch").orderBy("seq")
    before = w.rowsBetween(UNBOUNDED, -1)
    rows = rows.withColumn(
        "lg",
        F.last(
            F.when(is_grant, F.struct(F.col("client_id").alias("c"), SEQ().alias("s"))),
            ignorenulls=True,
        ).over(before),
    )
    eff_unlock = (EV() == "unlock") & (F.col("lg.c") == F.col("client_id"))
    rows = rows.withColumn("eff_unlock", F.coalesce(eff_unlock, F.lit(False)))
    rows = rows.withColumn("leu", F.max(F.when(F.col("eff_unlock"), SEQ())).over(before))
    owner = F.when(F.col("lg").isNull() | (F.col("leu").isNotNull() & (F.col("leu") > F.col("lg.s"))), None).otherwise(
        F.col("lg.c")
    )
    rows = rows.withColumn("owner", owner)
    start = (is_grant & (F.col("owner").isNull() | (F.col("owner") != F.col("client_id")))) | F.col("eff_unlock")
    rows = rows.withColumn("seg", F.sum(start.cast("int")).over(w.rowsBetween(UNBOUNDED, 0)))
    owned = rows.filter((EV() == "consume") & (F.col("owner") == F.col("client_id")))
    w2 = Window.partitionBy(*_QUEUE, "epoch", "seg").orderBy("seq")
    owned = owned.withColumn("p_seq", F.lag("seq").over(w2)).withColumn("p_off", F.lag("queue_offset").over(w2))
    bad = owned.filter(F.col("p_seq").isNotNull() & (F.col("queue_offset") <= F.col("p_off")))
    return _finding(
        bad,
        Code.ORDER_KEY_REORDERED,
        [F.col("p_seq"), SEQ()],
        _QKEYS,
        _fmt("orderly SUCCESS of offset %d after offset %d", "queue_offset", "p_off"),
    )


def _lock_overlap(fam: DataFrame, params: AuditParams) -> DataFrame:
    """LOCK_OVERLAP: the previous run's last grant, unless expired or unlocked since."""
    is_grant = (EV() == "lock") & (F.col("status") == "GRANTED")
    rows = fam.filter(is_grant | (EV() == "unlock"))
    wc = Window.partitionBy(*_QUEUE, "epoch", "client_id").orderBy("seq")
    rows = rows.withColumn("next_unlock", F.min(F.when(EV() == "unlock", SEQ())).over(wc.rowsBetween(1, FOLLOWING)))
    grants = rows.filter(is_grant)
    w = Window.partitionBy(*_QUEUE, "epoch").orderBy("seq")
    prev = F.lag(
        F.struct(
            F.col("client_id").alias("c"),
            SEQ().alias("s"),
            F.col("ts").alias("t"),
            F.col("next_unlock").alias("u"),
        )
    ).over(w)
    grants = grants.withColumn("prev", prev)
    run_start = F.col("prev").isNull() | (F.col("prev.c") != F.col("client_id"))
    grants = grants.withColumn(
        "other",
        F.last(F.when(run_start, F.struct(F.col("prev").alias("o"))), ignorenulls=True).over(
            w.rowsBetween(UNBOUNDED, 0)
        ),
    )
    o = "other.o"
    bad = grants.filter(
        F.col(o).isNotNull()
        & (F.col("ts") - F.col(f"{o}.t") <= params.broker_lock_ms)
        & ~F.coalesce(F.col(f"{o}.u") < SEQ(), F.lit(False))
    )
    return _finding(
        bad,
        Code.LOCK_OVERLAP,
        [F.col(f"{o}.s"), SEQ()],
        _QKEYS,
        _fmt(
            "granted to %s while %s's lock is %d ms old (lifetime %d ms)",
            "client_id",
            f"{o}.c",
            F.col("ts") - F.col(f"{o}.t"),
            F.lit(params.broker_lock_ms),
        ),
    )


def _orderly_without_lock(fam: DataFrame, params: AuditParams) -> list[DataFrame]:
    is_grant = (EV() == "lock") & (F.col("status") == "GRANTED")
    rows = fam.filter(is_grant | (EV() == "orderly_start"))
    wc = Window.partitionBy(*_QUEUE, "client_id").orderBy("seq").rowsBetween(UNBOUNDED, -1)
    w = Window.partitionBy(*_QUEUE).orderBy("seq").rowsBetween(UNBOUNDED, -1)
    rows = rows.withColumn(
        "mine",
        F.last(F.when(is_grant, F.struct(SEQ().alias("s"), F.col("ts").alias("t"))), ignorenulls=True).over(wc),
    ).withColumn(
        "latest",
        F.last(
            F.when(is_grant, F.struct(F.col("client_id").alias("c"), SEQ().alias("s"))),
            ignorenulls=True,
        ).over(w),
    )
    starts = rows.filter(EV() == "orderly_start")
    missing = starts.filter(F.col("mine").isNull())
    superseded = starts.filter(F.col("mine").isNotNull() & (F.col("latest.c") != F.col("client_id")))
    expired = starts.filter(
        F.col("mine").isNotNull()
        & (F.col("latest.c") == F.col("client_id"))
        & (F.col("ts") - F.col("mine.t") > params.client_lock_ms)
    )
    code = Code.ORDERLY_WITHOUT_LOCK
    return [
        _finding(missing, code, [SEQ()], _QKEYS, _fmt("%s never locked this queue", "client_id")),
        _finding(
            superseded,
            code,
            [F.col("latest.s"), SEQ()],
            _QKEYS,
            _fmt("%s's lock was superseded by %s", "client_id", "latest.c"),
        ),
        _finding(
            expired,
            code,
            [F.col("mine.s"), SEQ()],
            _QKEYS,
            _fmt(
                "%s's lock is %d ms old (client lifetime %d ms)",
                "client_id",
                F.col("ts") - F.col("mine.t"),
                F.lit(params.client_lock_ms),
            ),
        ),
    ]


def _orderly_concurrent(fam: DataFrame) -> DataFrame:
    """ORDERLY_CONCURRENT: running count of open windows; a join only for offenders."""
    rows = fam.filter(EV().isin("orderly_start", "orderly_end"))
    wc = Window.partitionBy(*_QUEUE, "client_id").orderBy("seq")
    rows = rows.withColumn("prev_ev", F.lag("event").over(wc))
    is_start = EV() == "orderly_start"
    opens = is_start & (F.col("prev_ev").isNull() | (F.col("prev_ev") == "orderly_end"))
    closes = (EV() == "orderly_end") & (F.col("prev_ev") == "orderly_start")
    rows = rows.withColumn("open_tr", opens).withColumn("close_tr", F.coalesce(closes, F.lit(False)))
    rows = rows.withColumn("close_seq", F.min(F.when(F.col("close_tr"), SEQ())).over(wc.rowsBetween(1, FOLLOWING)))
    delta = F.when(F.col("open_tr"), 1).when(F.col("close_tr"), -1).otherwise(0)
    w = Window.partitionBy(*_QUEUE).orderBy("seq")
    rows = rows.withColumn("open_before", F.coalesce(F.sum(delta).over(w.rowsBetween(UNBOUNDED, -1)), F.lit(0)))
    self_open = F.when(F.col("prev_ev") == "orderly_start", 1).otherwise(0)
    offenders = rows.filter(is_start & (F.col("open_before") - self_open > 0)).select(*_QUEUE, "client_id", "seq")
    windows = rows.filter(F.col("open_tr")).select(
        *_QUEUE,
        F.col("client_id").alias("w_client"),
        F.col("seq").alias("w_open"),
        "close_seq",
    )
    joined = offenders.join(windows, list(_QUEUE)).filter(
        (F.col("w_client") != F.col("client_id"))
        & (F.col("w_open") < SEQ())
        & (F.col("close_seq").isNull() | (F.col("close_seq") > SEQ()))
    )
    best = joined.groupBy(*_QUEUE, "client_id", "seq").agg(
        F.max(F.struct(F.col("w_open").alias("s"), F.col("w_client").alias("c"))).alias("o")
    )
    return _finding(
        best,
        Code.ORDERLY_CONCURRENT,
        [F.col("o.s"), SEQ()],
        _QKEYS,
        _fmt("%s started while %s's orderly window is open", "client_id", "o.c"),
    )


# ----------------------------------------------------------- consumer family


def consumer_rules(df: DataFrame, keep: list[DataFrame]) -> list[DataFrame]:
    """OFFSET_OVERRUN: pending intervals (deliver → next deliver/ack of that offset)."""
    ack = (EV() == "send_back") | ((EV() == "consume") & (F.col("status") == "SUCCESS"))
    rows = df.filter(
        (EV().isin("deliver", "commit_offset") | ack) & _nn("group", "topic", "queue_id", "queue_offset")
    ).repartition(*_QUEUE)
    wq = Window.partitionBy(*_QUEUE)
    rows = rows.withColumn("max_commit", F.max(F.when(EV() == "commit_offset", SEQ())).over(wq))
    wo = Window.partitionBy(*_QUEUE, "queue_offset").orderBy("seq")
    rows = rows.withColumn("end", F.min(F.when(EV() != "commit_offset", SEQ())).over(wo.rowsBetween(1, FOLLOWING)))
    rows = _keep(rows, keep)
    b = F.lit(OFFSET_BUCKET)
    intervals = rows.filter((EV() == "deliver") & F.col("max_commit").isNotNull() & (SEQ() < F.col("max_commit")))
    last = F.least(F.coalesce(F.col("end"), F.col("max_commit")), F.col("max_commit"))
    intervals = intervals.select(
        *_QUEUE,
        F.col("queue_offset").alias("o"),
        SEQ().alias("d"),
        F.col("end").alias("e"),
        F.explode(F.sequence(F.floor(SEQ() / b), F.floor(last / b))).alias("b"),
    )
    commits = rows.filter(EV() == "commit_offset").select(
        *_QUEUE, "seq", F.col("queue_offset").alias("x"), F.floor(SEQ() / b).alias("b")
    )
    joined = commits.join(intervals, [*_QUEUE, "b"]).filter(
        (F.col("d") < SEQ()) & (F.col("e").isNull() | (SEQ() < F.col("e"))) & (F.col("o") < F.col("x"))
    )
    low = joined.groupBy(*_QUEUE, "seq", "x").agg(
        F.min(F.struct(F.col("o").alias("o"), F.col("d").alias("d"))).alias("p")
    )
    return [
        _finding(
            low,
            Code.OFFSET_OVERRUN,
            [F.col("p.d"), SEQ()],
            ("group", "topic", "queue_id"),
            _fmt("committed offset %d passes unacknowledged offset %d", "x", "p.o"),
        )
    ]


# ------------------------------------------------------------ message family


def message_rules(
    df: DataFrame,
    consumers: DataFrame,
    has_drain: bool,
    keep: list[DataFrame],
) -> list[DataFrame]:
    """Rules keyed by msg_key; ``consumers`` is (trace, topic, groups array)."""
    fam = df.filter(
        EV().isin(
            "send",
            "store",
            "deliver",
            "consume",
            "send_back",
            "schedule_fire",
            "txn_half",
            "txn_end",
        )
        & F.col("msg_key").isNotNull()
    ).repartition("trace", "msg_key")
    wk = Window.partitionBy("trace", "msg_key")
    acked_send = (EV() == "send") & (F.col("status").isNull() | F.col("status").isin(*sorted(ACKED_SEND_STATUSES)))
    commit = (EV() == "txn_end") & (F.col("status") == "COMMIT")
    rollback = (EV() == "txn_end") & (F.col("status") == "ROLLBACK")
    half = EV() == "txn_half"
    flag = lambda c: F.max(F.when(c, 1).otherwise(0)).over(wk)  # noqa: E731
    fam = (
        fam.withColumn("k_known", flag(EV().isin("send", "store", "txn_half")))
        .withColumn("k_acked", flag(acked_send | commit))
        .withColumn("k_half", flag(half))
        .withColumn("k_seen", flag((EV() == "store") | ((EV() == "send") & ~acked_send)))
        .withColumn("k_first_deliver", F.min(F.when(EV() == "deliver", SEQ())).over(wk))
        .withColumn("k_half_seq", F.min(F.when(half, SEQ())).over(wk))
        .withColumn(
            "k_half_topic",
            F.min(F.when(half & F.col("topic").isNotNull(), F.struct(SEQ().alias("s"), "topic")))
            .over(wk)
            .getField("topic"),
        )
        .withColumn("k_commit", F.min(F.when(commit, SEQ())).over(wk))
        .withColumn("k_rollback", F.min(F.when(rollback, SEQ())).over(wk))
    )
    fam = _keep(fam, keep)
    gk = ("group", "topic", "msg_key")
    out: list[DataFrame] = []

    unexpected = fam.filter(EV().isin("deliver", "consume") & (F.col("k_known") == 0))
    out.append(
        _finding(
            unexpected,
            Code.UNEXPECTED,
            [SEQ()],
            gk,
            _fmt("%s of %s, which was never sent, stored or half-sent", "event", "msg_key"),
        )
    )

    recovered = fam.filter(
        (EV() == "deliver")
        & (SEQ() == F.col("k_first_deliver"))
        & (F.col("k_seen") == 1)
        & (F.col("k_acked") == 0)
        & (F.col("k_half") == 0)
    )
    out.append(
        _finding(
            recovered,
            ObservationCode.RECOVERED,
            [SEQ()],
            gk,
            _fmt("%s delivered although its send was never acknowledged", "msg_key"),
            kind="observation",
        )
    )

    success = fam.filter((EV() == "consume") & (F.col("status") == "SUCCESS") & _nn("group"))
    success = success.withColumn("first", F.min("seq").over(Window.partitionBy("trace", "msg_key", "group")))
    dup = success.filter(SEQ() > F.col("first"))
    out.append(
        _finding(
            dup,
            ObservationCode.DUPLICATED,
            [F.col("first"), SEQ()],
            gk,
            _fmt("%s consumed %s with SUCCESS again", "group", "msg_key"),
            kind="observation",
        )
    )

    # RETRY_EARLY, deliver clause.
    is_back = (EV() == "send_back") & (F.col("status") == "RETRY") & F.col("deliver_ts").isNotNull()
    retry = fam.filter(
        _nn("group", "reconsume_times") & (is_back | ((EV() == "deliver") & (F.col("reconsume_times") >= 1)))
    )
    wr = Window.partitionBy("trace", "msg_key", "group", "reconsume_times").orderBy("seq")
    retry = retry.withColumn(
        "back",
        F.last(
            F.when(is_back, F.struct(SEQ().alias("s"), F.col("deliver_ts").alias("due"))),
            ignorenulls=True,
        ).over(wr.rowsBetween(UNBOUNDED, -1)),
    )
    early = retry.filter((EV() == "deliver") & F.col("back").isNotNull() & (F.col("ts") < F.col("back.due")))
    out.append(
        _finding(
            early,
            Code.RETRY_EARLY,
            [F.col("back.s"), SEQ()],
            gk,
            _fmt("retry %d delivered at %d, due at %d", "reconsume_times", "ts", "back.due"),
        )
    )

    # DELAY_EARLY: fires matched by (msg_key, msg_id) or by msg_key; delivers by first generation.
    sched = (EV() == "store") & (F.col("topic") == SCHEDULE_TOPIC) & F.col("deliver_ts").isNotNull()
    gen0 = F.coalesce(F.col("reconsume_times"), F.lit(0)) == 0
    fire = EV() == "schedule_fire"
    copy = F.struct(SEQ().alias("s"), F.col("deliver_ts").alias("due"))
    last_copy = lambda cond: F.last(F.when(cond, copy), ignorenulls=True)  # noqa: E731
    by_key = Window.partitionBy("trace", "msg_key").orderBy("seq").rowsBetween(UNBOUNDED, -1)
    by_id = Window.partitionBy("trace", "msg_key", "msg_id").orderBy("seq").rowsBetween(UNBOUNDED, -1)
    fires = fam.filter(sched | fire)
    fires = fires.withColumn(
        "st",
        F.when(F.col("msg_id").isNotNull(), last_copy(sched).over(by_id)).otherwise(last_copy(sched).over(by_key)),
    )
    fired = fires.filter(fire & F.col("st").isNotNull() & (F.col("ts") < F.col("st.due")))
    out.append(
        _finding(
            fired,
            Code.DELAY_EARLY,
            [F.col("st.s"), SEQ()],
            ("topic", "msg_key"),
            _fmt("fired at %d, due at %d", "ts", "st.due"),
        )
    )
    firsts = fam.filter((sched | fire | (EV() == "deliver")) & gen0)
    firsts = firsts.withColumn("st", last_copy(sched).over(by_key)).withColumn(
        "lf", F.max(F.when(fire, SEQ())).over(by_key)
    )
    no_fire = F.col("lf").isNull() | (F.col("lf") < F.col("st.s"))
    delivered = firsts.filter((EV() == "deliver") & F.col("st").isNotNull() & (F.col("ts") < F.col("st.due")) & no_fire)
    out.append(
        _finding(
            delivered,
            Code.DELAY_EARLY,
            [F.col("st.s"), SEQ()],
            gk,
            _fmt("delivered at %d, due at %d", "ts", "st.due"),
        )
    )

    # Transaction visibility.
    dv = fam.filter((EV() == "deliver") & F.col("k_half_seq").isNotNull() & (SEQ() > F.col("k_half_seq")))
    c, r = F.col("k_commit"), F.col("k_rollback")
    rb_visible = c.isNull() & r.isNotNull() & (SEQ() > r)
    out.append(
        _finding(
            dv.filter(rb_visible),
            Code.TXN_ROLLBACK_VISIBLE,
            [r, SEQ()],
            gk,
            _fmt("%s delivered although its transaction was rolled back", "msg_key"),
        )
    )
    before = ~rb_visible & ((c.isNotNull() & (SEQ() < c)) | c.isNull())
    out.append(
        _finding(
            dv.filter(before),
            Code.TXN_VISIBLE_BEFORE_COMMIT,
            [F.col("k_half_seq"), SEQ()],
            gk,
            _fmt("%s delivered before its transaction committed", "msg_key"),
        )
    )

    if has_drain:
        out.append(_lost(fam, consumers, acked_send, commit))
    return out


def _lost(fam: DataFrame, consumers: DataFrame, acked_send: Column, commit: Column) -> DataFrame:
    """LOST: first acknowledgement per (msg_key, topic) × consuming groups − done groups."""
    wk = Window.partitionBy("trace", "msg_key")
    done = ((EV() == "consume") & (F.col("status") == "SUCCESS")) | ((EV() == "send_back") & (F.col("status") == "DLQ"))
    rows = fam.withColumn(
        "done_groups",
        F.collect_set(F.when(done & (SEQ() <= F.col("drain")), F.col("group"))).over(wk),
    )
    topic = F.when(EV() == "send", F.col("topic")).otherwise(F.coalesce(F.col("topic"), F.col("k_half_topic")))
    acked = rows.filter(acked_send | commit).withColumn("a_topic", topic)
    acked = acked.filter(F.col("a_topic").isNotNull() & (SEQ() <= F.col("drain")))
    acked = acked.withColumn(
        "rank",
        F.row_number().over(Window.partitionBy("trace", "msg_key", "a_topic").orderBy("seq")),
    ).filter(F.col("rank") == 1)
    joined = acked.join(
        F.broadcast(consumers),
        (acked["trace"] == consumers["c_trace"]) & (acked["a_topic"] == consumers["c_topic"]),
    )
    lost = joined.select(
        "trace",
        "seq",
        "drain",
        "msg_key",
        "done_groups",
        F.col("a_topic").alias("topic"),
        F.explode("groups").alias("group"),
    ).filter(~F.array_contains(F.col("done_groups"), F.col("group")))
    return _finding(
        lost,
        Code.LOST,
        [SEQ(), F.col("drain")],
        ("group", "topic", "msg_key"),
        _fmt("acknowledged %s never consumed by %s nor sent to its DLQ", "msg_key", "group"),
    )


# ---------------------------------------------------------------- txn family


def txn_rules(df: DataFrame, params: AuditParams, has_drain: bool, keep: list[DataFrame]) -> list[DataFrame]:
    fam = df.filter(
        EV().isin("txn_half", "txn_end", "txn_check", "txn_discard") & F.col("txn_id").isNotNull()
    ).repartition("trace", "txn_id")
    kind = F.when(EV() == "txn_discard", F.lit("DISCARD")).when(EV() == "txn_end", F.col("status"))
    fam = fam.withColumn("kind", kind)
    wt = Window.partitionBy("trace", "txn_id")
    wo = wt.orderBy("seq")
    before = wo.rowsBetween(UNBOUNDED, -1)
    first = lambda k: F.min(F.when(F.col("kind") == k, SEQ())).over(before)  # noqa: E731
    fam = (
        fam.withColumn("fc", first("COMMIT"))
        .withColumn("fr", first("ROLLBACK"))
        .withColumn("fd", first("DISCARD"))
        .withColumn(
            "half",
            F.min(
                F.when(
                    EV() == "txn_half",
                    F.struct(SEQ().alias("s"), F.col("ts").alias("t"), F.col("msg_key").alias("k")),
                )
            ).over(wt),
        )
        .withColumn("n_check", F.count(F.when(EV() == "txn_check", 1)).over(wo.rowsBetween(UNBOUNDED, 0)))
    )
    fam = _keep(fam, keep)
    tk = ("txn_id", "msg_key")
    out: list[DataFrame] = []
    is_commit = F.col("kind") == "COMMIT"
    is_rb = F.col("kind") == "ROLLBACK"
    earlier = F.when(is_commit, F.least("fr", "fd")).when(is_rb, F.least("fc", "fd"))
    double = fam.withColumn("earlier", earlier).filter(F.col("earlier").isNotNull())
    out.append(
        _finding(
            double,
            Code.TXN_DOUBLE_RESOLVED,
            [F.col("earlier"), SEQ()],
            tk,
            _fmt(
                "transaction %s resolved %s after an earlier conflicting resolution",
                "txn_id",
                "kind",
            ),
        )
    )
    dup = fam.filter(is_commit & F.col("fc").isNotNull())
    out.append(
        _finding(
            dup,
            ObservationCode.DUPLICATE_COMMIT,
            [F.col("fc"), SEQ()],
            tk,
            _fmt("transaction %s committed twice", "txn_id"),
            kind="observation",
        )
    )
    checks = fam.filter((EV() == "txn_check") & F.col("half").isNotNull()).withColumn("msg_key", F.col("half.k"))
    due = F.col("half.t") + F.lit(params.transaction_timeout_ms)
    out.append(
        _finding(
            checks.filter(F.col("ts") < due),
            Code.TXN_CHECK_EARLY,
            [F.col("half.s"), SEQ()],
            tk,
            _fmt("checked at %d, not before %d", "ts", due),
        )
    )
    out.append(
        _finding(
            checks.filter(F.col("n_check") > params.transaction_check_max),
            Code.TXN_CHECK_EXCEEDED,
            [F.col("half.s"), SEQ()],
            tk,
            _fmt(
                "check %d exceeds transactionCheckMax %d",
                "n_check",
                F.lit(params.transaction_check_max),
            ),
        )
    )
    if has_drain:
        resolved = (F.col("kind") == "DISCARD") | is_commit | is_rb
        un = fam.withColumn("res", F.max(F.when(resolved & (SEQ() < F.col("drain")), 1).otherwise(0)).over(wt)).filter(
            (EV() == "txn_half")
            & (SEQ() == F.col("half.s"))
            & F.col("drain").isNotNull()
            & (SEQ() < F.col("drain"))
            & (F.col("res") == 0)
        )
        out.append(
            _finding(
                un,
                Code.TXN_UNRESOLVED,
                [SEQ(), F.col("drain")],
                tk,
                _fmt("transaction %s still unresolved at the drain", "txn_id"),
            )
        )
    return out


# --------------------------------------------------------------------- plan


def consumers_of(df: DataFrame, subscriptions: Mapping[str, Sequence[str]]) -> DataFrame:
    """(c_trace, c_topic, groups): who consumes each topic, per trace."""
    seen = df.filter(EV().isin("deliver", "consume") & _nn("group", "topic")).select(
        F.col("trace").alias("c_trace"), F.col("topic").alias("c_topic"), "group"
    )
    if subscriptions:
        traces = df.select(F.col("trace").alias("c_trace")).distinct()
        pairs = [(g, t) for g, ts in subscriptions.items() for t in ts]
        sub = df.sparkSession.createDataFrame(pairs, "group string, c_topic string")
        seen = seen.unionByName(traces.crossJoin(sub).select("c_trace", "c_topic", "group"))
    return seen.groupBy("c_trace", "c_topic").agg(F.array_sort(F.collect_set("group")).alias("groups"))


def all_findings(
    df: DataFrame,
    params: AuditParams,
    *,
    has_drain: bool,
    subscriptions: Mapping[str, Sequence[str]] | None = None,
    keep: list[DataFrame] | None = None,
) -> DataFrame:
    """Every §8.1 finding of ``df`` (validated rows with trace/epoch/drain) as one DataFrame.

    Family frames read by several rules are persisted and appended to
    ``keep``; unpersist them once the findings are materialised.
    """
    keep = [] if keep is None else keep
    parts = [
        *row_rules(df, params),
        *queue_rules(df),
        *lock_rules(df, params, keep),
        *consumer_rules(df, keep),
        *message_rules(df, consumers_of(df, subscriptions or {}), has_drain, keep),
        *txn_rules(df, params, has_drain, keep),
    ]
    return reduce(DataFrame.unionByName, parts)
