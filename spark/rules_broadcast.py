"""LOST of a broadcasting client (issue 42) as DataFrame operations: ``traces.checks_delivery.detect_lost_per_client``.

Theory of operation
-------------------
Every client of a broadcasting group consumes every message of a queue from where it started, keeps its
offsets itself and drops a message whose listener failed. The reference detector walks, per (group, client,
topic, queue), the client's runs: a run starts at a ``commit_offset`` with ``detail.from_where`` (the
derived column ``from_where``) or at the trace's first row of the client there, and its start is the lowest
offset of that commit and of the client's deliveries and consumes in the run; an acknowledged plain
``send`` at offset o is owed to the client by every run that started at or before o and has a commit past
o, and is LOST when the client's first consume of its msg_key (any status) is not before the earliest such
commit. Here, each rule is a column expression, a join or a window, on the broadcasting rows alone
(``inputs.broadcasting``; the facts pass tells the message pass whether any trace has some):

- a row's run is the running count of run starts before it (a window per (trace, group, client, topic,
  queue) by seq); a run's start is a min per run;
- "the first commit past o" is the earliest commit of the run with an offset above o: of the commits
  above o, the one with the least seq (a commit before it with a higher offset would be one past o
  too), so a running min of the commits' seqs over the run's commits and sends ordered by offset,
  highest first (a send before a commit at its own offset), answers it for every send at once;
- the sends owed (each with each run of its queue that started at or before its offset) are few: a
  queue's sends times its broadcasting clients' runs; the earliest commit past a send over the
  client's runs, the client's first consume of the key, and the first of the key's sends that is LOST
  (the reference reports one finding per (group, client, msg_key), its first send's) are aggregations.

The exemptions by key are anti-joins: the keys with a SCHEDULE_TOPIC_XXXX or rmq_sys_wheel_timer store
before the drain (their positions are not the send's) and those a crash lists at risk here; the saved
offsets, saved delay progress (``rules_message.message_findings``) and filter (``rules_filter``)
exemptions drop these findings as they drop the group-wide LOST's, by (trace, group, msg_key).
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from rmqspec.properties.codes import Code
from rmqspec.spark.rules import EV, SEQ, UNBOUNDED, _finding, _nn
from rmqspec.traces.checks_common import ACKED_SEND_STATUSES, SCHEDULE_TOPIC, TIMER_TOPIC

__all__ = ["lost_per_client"]

_CLIENT = ("trace", "group", "client_id")
_RUN = (*_CLIENT, "topic", "queue_id")


def lost_per_client(df: DataFrame, at_risk: DataFrame | None) -> DataFrame:
    """The LOST findings (``FINDING_COLUMNS``) of broadcasting clients in the validated rows ``df`` (with
    ``drain``, ``broadcasting`` and ``from_where``), less the keys at risk (``at_risk``: (trace, msg_key))."""
    drained = F.col("drain").isNotNull() & (SEQ() <= F.col("drain"))
    mine = df.filter(EV().isin("deliver", "consume", "commit_offset") & F.col("broadcasting")
                     & _nn("group", "client_id") & drained)
    consumed = mine.filter((EV() == "consume") & F.col("msg_key").isNotNull()).groupBy(*_CLIENT, "msg_key").agg(
        F.min("seq").alias("got"))
    placed = mine.filter(_nn("topic", "queue_id", "queue_offset")).select(
        *_RUN, "seq", "event", "queue_offset", "from_where")
    placed = placed.withColumn("run", F.sum(F.col("from_where").cast("int")).over(
        Window.partitionBy(*_RUN).orderBy("seq").rowsBetween(UNBOUNDED, 0)))
    opening = (EV() != "commit_offset") | F.col("from_where")
    runs = placed.groupBy(*_RUN, "run").agg(F.min(F.when(opening, F.col("queue_offset"))).alias("start")).filter(
        F.col("start").isNotNull())
    commits = placed.filter(~opening).select(*_RUN, "run", F.col("queue_offset").alias("offset"),
                                             F.lit(0).alias("kind"), F.lit(None).cast("bigint").alias("s_seq"),
                                             F.col("seq").alias("c_seq"))
    # the acknowledged plain sends (not delayed, not a timer message's) before the drain, less the keys
    # with a delayed or timer copy and those at risk
    status = F.col("status")
    plain = ((EV() == "send") & _nn("topic", "queue_id", "queue_offset", "msg_key") & drained
             & (status.isNull() | status.isin(*sorted(ACKED_SEND_STATUSES)))
             & ~F.coalesce(F.col("delay_level") > 0, F.lit(False)) & F.col("deliver_ts").isNull())
    sends = df.filter(plain).select("trace", "topic", "queue_id", "msg_key", F.col("queue_offset").alias("offset"),
                                    F.col("seq").alias("s_seq"))
    waiting = df.filter((EV() == "store") & F.col("topic").isin(SCHEDULE_TOPIC, TIMER_TOPIC)
                        & F.col("msg_key").isNotNull() & drained).select("trace", "msg_key")
    sends = sends.join(waiting, ["trace", "msg_key"], "left_anti")
    if at_risk is not None:
        sends = sends.join(at_risk.select("trace", "msg_key"), ["trace", "msg_key"], "left_anti")
    owed = sends.join(runs, ["trace", "topic", "queue_id"]).filter(F.col("start") <= F.col("offset"))
    # per send and run, the least seq of the run's commits above the send's offset
    marks = owed.select(*_RUN, "run", "offset", F.lit(1).alias("kind"), "s_seq", F.lit(None).cast("bigint")
                        .alias("c_seq")).unionByName(commits)
    down = Window.partitionBy(*_RUN, "run").orderBy(F.col("offset").desc(), F.col("kind").desc()).rowsBetween(
        UNBOUNDED, 0)
    past = marks.withColumn("past", F.min("c_seq").over(down)).filter((F.col("kind") == 1) & F.col("past").isNotNull())
    passed = past.groupBy(*_RUN, "s_seq").agg(F.min("past").alias("past"))
    lost = owed.select(*_RUN, "s_seq", "msg_key", "offset").distinct().join(passed, [*_RUN, "s_seq"]).join(
        consumed, [*_CLIENT, "msg_key"], "left").filter(F.col("got").isNull() | (F.col("got") >= F.col("past")))
    first = lost.groupBy(*_CLIENT, "msg_key").agg(
        F.min(F.struct("s_seq", "past", "topic", "queue_id", "offset")).alias("f")).select(
        *_CLIENT, "msg_key", "f.*")
    reason = F.concat(F.lit("broadcasting client "), F.col("client_id"), F.lit(" of "), F.col("group"),
                      F.lit(" committed past "), F.col("msg_key"), F.lit(" (offset "), F.col("offset").cast("string"),
                      F.lit(" of queue "), F.col("queue_id").cast("string"), F.lit(") without consuming it"))
    return _finding(first, Code.LOST.value, [F.col("s_seq"), F.col("past")], ("group", "topic", "msg_key", "client_id"),
                    reason)
