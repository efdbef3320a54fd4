"""The deep lifecycle rules of transactions in Spark (issue 14), as ``traces.checks_lifecycle``
states them, and the crash exemptions of LOST.

=====================  ==============================  =========================================
family                 shuffle / window                codes
=====================  ==============================  =========================================
txn_half/end/check/    trace, txn_id; seq              TXN_CHECK_AFTER_RESOLVED (the copies and
discard                                                ops before a check, as arrays; ops
                                                       unseen after a power loss: per trace),
                                                       TXN_DISCARD_EARLY
=====================  ==============================  =========================================

The arrays of the transaction family are per transaction (a few dozen rows),
so their growing frames stay small. The other lifecycle rules run in the
numpy judges: DLQ_DELAYED and SCHEDULE_DUPLICATED in the message judge
(``rules_copies.py``), OFFSET_LOST in the queue judge (``rules_queue.py``).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from rmqspec.properties.codes import AuditParams, Code
from rmqspec.spark.rules import EV, SEQ, UNBOUNDED, _findings, _fmt, _nn, _risky, _struct, shuffled_by
from rmqspec.traces.checks_common import SCHEDULE_TOPIC


def lifecycle_rules(
    df: DataFrame, params: AuditParams, at_risk: DataFrame | None, has_power: bool = True
) -> list[DataFrame]:
    """``has_power`` False (no power-loss crash): every op is seen (no ``_unseen_ops`` join)."""
    return [_txn(df, params, at_risk, has_power)]


def _check_number() -> Column:
    ct = F.col("check_times")
    return F.when(ct.rlike("^-?[0-9]+$"), ct.cast("long"))


def _unseen_ops(df: DataFrame) -> DataFrame:
    """(u_trace, u_seq): COMMIT/ROLLBACK ``txn_end`` rows whose op the check service may never
    read after a power loss (``traces.checks_lifecycle.unseen_ops``): a ``crash`` with status
    ``power`` whose ``at_risk`` lists the keys of L earlier op rows exempts the next L."""
    is_op = (EV() == "txn_end") & F.col("status").isin("COMMIT", "ROLLBACK") & F.col("msg_key").isNotNull()
    power = (EV() == "crash") & (F.col("status") == "power")
    rows = df.filter(is_op | power).select("trace", "seq", is_op.alias("op"), "msg_key", "at_risk")
    before = Window.partitionBy("trace").orderBy("seq").rowsBetween(UNBOUNDED, -1)
    rows = rows.withColumn("idx", F.count(F.when(F.col("op"), 1)).over(before))
    ops = rows.filter(F.col("op")).select("trace", "seq", "idx", "msg_key")
    crashes = rows.filter(~F.col("op")).select(
        F.col("trace").alias("c_trace"), F.col("seq").alias("c_seq"), F.col("idx").alias("c_idx"),
        F.explode(F.array_distinct(F.col("at_risk"))).alias("c_key"))
    lost = (
        crashes.join(ops, (ops["trace"] == crashes["c_trace"]) & (ops["msg_key"] == crashes["c_key"])
                     & (ops["seq"] < crashes["c_seq"]))
        .groupBy("c_trace", "c_seq", "c_idx")
        .agg(F.count(F.lit(1)).alias("lost"))
    )
    return (
        ops.join(F.broadcast(lost), (ops["trace"] == lost["c_trace"]) & (ops["idx"] >= lost["c_idx"])
                 & (ops["idx"] < lost["c_idx"] + lost["lost"]))
        .select(F.col("trace").alias("u_trace"), F.col("seq").alias("u_seq"))
        .distinct()
    )


def _txn(df: DataFrame, params: AuditParams, at_risk: DataFrame | None, has_power: bool = True) -> DataFrame:
    fam = df.filter(EV().isin("txn_half", "txn_end", "txn_check", "txn_discard") & F.col("txn_id").isNotNull())
    if has_power:
        unseen = _unseen_ops(df)
        fam = fam.join(
            F.broadcast(unseen), (fam["trace"] == unseen["u_trace"]) & (fam["seq"] == unseen["u_seq"]), "left"
        ).withColumn("unseen", F.col("u_seq").isNotNull())
    else:
        fam = fam.withColumn("unseen", F.lit(False))
    fam = fam.select(
        "trace", "seq", "ts", "event", "status", "txn_id", "msg_key", "queue_offset", "check_times", "unseen"
    ).transform(shuffled_by("trace", "txn_id"))
    before = Window.partitionBy("trace", "txn_id").orderBy("seq").rowsBetween(UNBOUNDED, -1)
    k = _check_number()
    pos = F.col("queue_offset")
    copy = F.when((EV() == "txn_half") & pos.isNotNull(), F.struct(F.lit(0).cast("long").alias("t"), pos.alias("p")))
    copy = copy.when((EV() == "txn_check") & pos.isNotNull() & k.isNotNull(), F.struct(k.alias("t"), pos.alias("p")))
    op = F.when(
        (EV() == "txn_end") & F.col("status").isin("COMMIT", "ROLLBACK") & pos.isNotNull() & ~F.col("unseen"),
        F.struct(pos.alias("p"), SEQ().alias("s")),
    )
    check = EV() == "txn_check"
    half = EV() == "txn_half"
    fam = (
        fam.withColumn("copies", F.collect_list(copy).over(before))
        .withColumn("ops", F.collect_list(op).over(before))
        .withColumn("half", F.min(F.when(half, F.struct(SEQ().alias("s"), F.col("ts").alias("t"),
                                                         F.col("msg_key").alias("k")))).over(before))
        .withColumn("named", F.size(F.array_distinct(F.collect_list(F.when(check, F.col("check_times"))).over(before))))
        .withColumn("unnamed", F.count(F.when(check & F.col("check_times").isNull(), 1)).over(before))
    )
    fam = _risky(fam, at_risk)
    cands = F.transform(F.filter("copies", lambda c: c["t"] == k - 1), lambda c: c["p"])
    covered = F.forall(cands, lambda p: F.exists("ops", lambda o: o["p"] == p))
    op_seq = F.array_max(
        F.transform(cands, lambda p: F.array_min(F.transform(F.filter("ops", lambda o: o["p"] == p), lambda o: o["s"])))
    )
    n = F.col("named") + F.col("unnamed")
    age = F.col("ts") - F.col("half.t")
    tk = ("txn_id", "msg_key")
    return _findings(
        fam,
        [
            (
                check & pos.isNotNull() & k.isNotNull() & (F.size(cands) > 0) & covered & ~F.col("risky"),
                _struct(
                    Code.TXN_CHECK_AFTER_RESOLVED,
                    [op_seq, SEQ()],
                    tk,
                    _fmt("check %d of transaction %s after an op resolved position(s) [%s]", k, "txn_id",
                         F.array_join(F.array_sort(F.array_distinct(cands)).cast("array<string>"), ", ")),
                ),
            ),
            (
                (EV() == "txn_discard")
                & F.col("half").isNotNull()
                & (n < params.transaction_check_max)
                & (age <= params.file_reserved_ms),
                _struct(
                    Code.TXN_DISCARD_EARLY,
                    [F.col("half.s"), SEQ()],
                    {"txn_id": F.col("txn_id"), "msg_key": F.col("half.k")},
                    _fmt("discarded after %d checks at age %d ms, transactionCheckMax is %d", n, age,
                         F.lit(params.transaction_check_max)),
                ),
            ),
        ],
    )


def skipped_by_saved_offsets(df: DataFrame) -> DataFrame:
    """(trace, group, msg_key) a group may never see after a crash (``traces.checks_delivery.
    skipped_by_saved_offsets``): a send/store of the key at a queue_offset below a commit of the
    group on that queue made before an earlier crash (``crashes`` counts them per row)."""
    commits = (
        df.filter((EV() == "commit_offset") & _nn("group", "topic", "queue_id", "queue_offset"))
        .groupBy("trace", "group", "topic", "queue_id", F.col("crashes").alias("cc"))
        .agg(F.max("queue_offset").alias("committed"))
    )
    delayed = (EV() == "send") & F.coalesce(F.col("delay_level") != 0, F.lit(False))  # offset of the schedule copy
    positions = df.filter(
        EV().isin("send", "store") & _nn("topic", "queue_id", "queue_offset", "msg_key") & ~delayed
    ).select(
        "trace", "topic", "queue_id", "queue_offset", "msg_key", "crashes"
    )
    joined = positions.join(commits, ["trace", "topic", "queue_id"])
    return (
        joined.filter((F.col("cc") < F.col("crashes")) & (F.col("queue_offset") < F.col("committed")))
        .select("trace", "group", "msg_key")
        .distinct()
    )


def skipped_by_saved_delay_progress(df: DataFrame) -> DataFrame:
    """(trace, msg_key) whose schedule copy the schedule service may skip (``traces.checks_delivery.
    skipped_by_saved_delay_progress``): a SCHEDULE store at a position below 1 + the highest one of
    its queue seen before an earlier power loss, with a crash after it before its key's next fire
    and before the drain (``crashes`` at that point exceeds the store's)."""
    is_store = (EV() == "store") & (F.col("topic") == SCHEDULE_TOPIC) & F.col("queue_offset").isNotNull()
    stores = df.filter(is_store).select("trace", "seq", "queue_id", "queue_offset", "msg_key", "crashes", "drain")
    power = (
        df.filter((EV() == "crash") & (F.col("status") == "power"))
        .select("trace", "seq")
        .join(stores.select("trace", "queue_id").distinct(), "trace")
    )
    rows = stores.withColumn("store", F.lit(True)).unionByName(power.withColumn("store", F.lit(False)),
                                                               allowMissingColumns=True)
    w = Window.partitionBy("trace", "queue_id").orderBy("seq").rowsBetween(UNBOUNDED, -1)
    seen = F.max(F.when(F.col("store"), F.col("queue_offset"))).over(w)
    rows = rows.withColumn("bound_here", F.when(~F.col("store"), F.coalesce(seen, F.lit(-1)) + 1))
    reused = (
        rows.withColumn("bound", F.max("bound_here").over(w))
        .filter(F.col("store") & F.col("msg_key").isNotNull() & (F.col("queue_offset") < F.col("bound")))
        .select("trace", "seq", "msg_key", "crashes", "drain")
    )
    fires = df.filter((EV() == "schedule_fire") & F.col("msg_key").isNotNull()).select(
        "trace", "msg_key", F.col("seq").alias("f_seq"), F.col("crashes").alias("f_crashes")
    )
    drains = df.filter((EV() == "drain") & (SEQ() == F.col("drain"))).select(
        "trace", F.col("crashes").alias("d_crashes")
    )
    first_fire = (
        reused.join(fires, ["trace", "msg_key"], "left")
        .groupBy("trace", "seq", "msg_key", "crashes")
        .agg(F.min(F.when(F.col("f_seq") > SEQ(), F.struct("f_seq", "f_crashes"))).alias("fire"))
    )
    judged = first_fire.join(drains, "trace")
    reached = F.coalesce(F.least(F.col("fire.f_crashes"), F.col("d_crashes")), F.col("d_crashes"))
    return judged.filter(reached > F.col("crashes")).select("trace", "msg_key").distinct()
