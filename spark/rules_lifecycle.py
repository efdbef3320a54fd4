"""The crash exemptions of the deep lifecycle rules and of LOST, as DataFrames.

- ``_unseen_ops``: the COMMIT / ROLLBACK ops the check service may never read
  after a power loss (TXN_CHECK_AFTER_RESOLVED; collected by the transaction
  judge, ``rules_txn.py``);
- ``skipped_by_saved_offsets`` and ``skipped_by_saved_delay_progress``: the
  keys LOST does not judge after a crash (anti-joins on the message judge's
  findings, ``rules_message.py``).

The lifecycle rules themselves run in the numpy judges: DLQ_DELAYED and
SCHEDULE_DUPLICATED in the message judge (``rules_copies.py``), OFFSET_LOST
in the queue judge (``rules_queue.py``), TXN_CHECK_AFTER_RESOLVED and
TXN_DISCARD_EARLY in the transaction judge (``rules_txn.py``).
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from rmqspec.spark.rules import EV, SEQ, UNBOUNDED, _nn
from rmqspec.traces.checks_common import SCHEDULE_TOPIC


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


def skipped_by_saved_offsets(df: DataFrame) -> DataFrame:
    """(trace, group, msg_key) a group may never see after a power loss (``traces.checks_delivery.
    skipped_by_saved_offsets``): a send/store of the key at a queue_offset below a commit of the
    group on that queue made before an earlier crash with status ``power`` (``crashes`` counts every
    crash per row; a power loss whose own count is ``k`` lies between a commit of count ``cc`` and a
    position of count ``c`` when ``cc <= k < c``). A kill truncates nothing a group read."""
    commits = (
        df.filter((EV() == "commit_offset") & _nn("group", "topic", "queue_id", "queue_offset"))
        .groupBy("trace", "group", "topic", "queue_id", F.col("crashes").alias("cc"))
        .agg(F.max("queue_offset").alias("committed"))
    )
    # a delayed (timer) send's offset is its schedule (rmq_sys_wheel_timer) copy's
    delayed = (EV() == "send") & (F.coalesce(F.col("delay_level") > 0, F.lit(False)) | F.col("deliver_ts").isNotNull())
    positions = df.filter(
        EV().isin("send", "store") & _nn("topic", "queue_id", "queue_offset", "msg_key") & ~delayed
    ).select(
        "trace", "topic", "queue_id", "queue_offset", "msg_key", "crashes"
    )
    powers = df.filter((EV() == "crash") & (F.col("status") == "power")).select(
        F.col("trace").alias("p_trace"), F.col("crashes").alias("k"))
    joined = positions.join(commits, ["trace", "topic", "queue_id"]).filter(
        (F.col("cc") < F.col("crashes")) & (F.col("queue_offset") < F.col("committed")))
    return (
        joined.join(F.broadcast(powers), (F.col("trace") == F.col("p_trace")) & (F.col("cc") <= F.col("k"))
                    & (F.col("k") < F.col("crashes")), "left_semi")
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
