"""The carried rows of an incremental audit as Spark jobs (``traces/carry.py``'s rules).

Theory of operation
-------------------
``carry(rows, subscriptions)`` takes the valid rows of the history audited this run (the rows a
previous run carried, the tombstones it pulled back and the new day) and returns three small
frames: the (trace, seq) of the rows to carry, the (trace, seq) of closed keys' tombstones and
the open (trace, msg_key). Every reason of ``traces.carry.carry_trace`` is a first / last / max
per key here (``groupBy`` aggregations); the orderly owner's last SUCCESS consume is found from
its ownership's bounds (aggregations over the queue's lock rows) joined back to its consumes.
``carry`` runs Python on the executors only for the rows lacking a field a rule reads (which
ones are carried for good is ``traces.unjudged.lasting_rows``: ``spark/unjudged.lasting``) and for a
master/slave pair's rows (``_pair_rows``: ``traces/carry_ha.carry_pairs`` per trace, on a few rows). The
differential test holds this module and
``carry_trace`` to the same seqs. The reference plan runs ``carry_trace`` itself in the
audit's own job instead (``spark/reference.py``, ``Carried``).

``collect_per_trace`` runs ``carry_trace``'s rules over a trace's columns on the executors once
per trace (``carry_arrow.carry_columns`` in a ``mapInArrow``, the rows of a trace in one task;
held to ``carry_trace`` by its own differential test) and sends back the rows to carry and the
tombstones themselves, as Arrow IPC streams the driver writes with pyarrow (``reference.Carried``,
as the reference plan's state): one Spark job and one numpy pass over the columns, against some
twenty small Spark jobs for the aggregations and two Spark writes (on the incremental bench's
fourth day with its carried rows, 1.5 M rows: 0.9-1.1 s, where ``carry_trace`` on a dict per row
took 7.4 s). Its memory grows with the trace (the trace's table, sorted, and a few numpy arrays
per row), so ``spark/incremental.py`` takes it only up to ``TRACE_CARRY_ROWS`` rows per trace.
``collect_local`` gives the same ``Carried`` from the driver when the history is local Parquet the
driver can validate (``spark/driver_read.py``) and within ``TRACE_CARRY_ROWS`` rows in all: the same
per-trace code (``_traces``, ``_carry_one``) without a Spark job or the JVM's Arrow hand-over.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from functools import reduce

import numpy as np
import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from rmqspec.properties.inv_replay_ha import HA_EVENTS
from rmqspec.spark import unjudged
from rmqspec.spark.arrow_judge import keyed
from rmqspec.spark.carry_arrow import carry_columns
from rmqspec.spark.inputs import broadcasting, route_queues
from rmqspec.spark.reference import Carried, carried_from_streams, ipc_stream
from rmqspec.traces.carry import FILTER_DETAIL_KEYS, KEEP_ALL, PER_KEY, TXN_EVENTS, WAITING_TOPICS
from rmqspec.traces.carry_ha import PAIR_LINKS, carry_pairs
from rmqspec.traces.checks_common import ACKED_SEND_STATUSES, DLQ_PREFIX, SCHEDULE_TOPIC
from rmqspec.traces.schema import COLUMNS, SCHEMA

KEY = ("trace", "seq")
QUEUE = ("group", "topic", "queue_id")
# The most rows of one trace ``collect_per_trace`` takes: its Python worker holds ~0.4 GB per million rows
# (the batches as received, ~185 B a row with every column, the trace's table sorted, carry_columns' arrays;
# peaks over the batches measured with the task's own steps: 152 MB for 1 M rows, 732 MB for 4 M), so
# ~2.4 GB at this bound.
TRACE_CARRY_ROWS = 6_000_000
# What ``carry_columns`` reads of a trace.
_CARRY_COLUMNS = ("seq", "ts", "event", "group", "topic", "queue_id", "queue_offset", "msg_key", "status",
                  "client_id", "txn_id", "detail", "msg_id", "reconsume_times", "delay_level", "deliver_ts",
                  "sharding_key", "actor", "commitlog_offset")


def _seqs(df: DataFrame, column: str = "seq") -> DataFrame:
    return df.select("trace", F.col(column).cast("bigint").alias("seq"))


def carry(
    spark: SparkSession,
    rows: DataFrame,
    subscriptions: Mapping[str, Sequence[str]] | None = None,
) -> tuple[DataFrame, DataFrame, DataFrame]:
    """(keep (trace, seq), closed tombstones (trace, seq), open keys (trace, msg_key)).

    ``rows`` has ``trace``, the audit columns, ``detail`` (text), ``epoch`` and ``crashes``."""
    ev, st = F.col("event"), F.col("status")
    has = lambda *cs: reduce(lambda a, b: a & b, [F.col(c).isNotNull() for c in cs])  # noqa: E731
    reasons: list[DataFrame] = []
    # kinds kept whole; the per-key kinds and the SCHEDULE / timer / DLQ stores without a msg_key
    scheduled = (ev == "store") & (F.col("topic") == SCHEDULE_TOPIC)
    waiting = (ev == "store") & F.col("topic").isin(*sorted(WAITING_TOPICS))
    per_key = ev.isin(*PER_KEY) | waiting | ((ev == "store") & F.col("topic").startswith(DLQ_PREFIX))
    reasons.append(_seqs(rows.filter(ev.isin(*KEEP_ALL) | (per_key & F.col("msg_key").isNull()))))
    txn_rows = rows.filter(ev.isin(*TXN_EVENTS))
    reasons.append(_seqs(txn_rows.filter(F.col("txn_id").isNull())))
    # LOST's delay-progress exemption: per (queue, crashes so far) the first SCHEDULE store at the
    # highest position
    top_scheduled = rows.filter(scheduled & has("queue_offset")).groupBy("trace", "queue_id", "crashes").agg(
        F.max(F.struct(F.col("queue_offset"), (-F.col("seq")).alias("neg"))).alias("top"))
    reasons.append(top_scheduled.select("trace", (-F.col("top.neg")).alias("seq")))
    # ORDER_KEY_SPLIT: the first send per (group, topic, sharding_key, route, queue)
    route = route_queues(rows)
    reasons.append(_seqs(rows.filter((ev == "send") & has("group", "topic", "queue_id", "sharding_key")
                                     & route.isNotNull())
                         .groupBy("trace", "group", "topic", "sharding_key", route.alias("route"), "queue_id")
                         .agg(F.min("seq").alias("seq"))))
    # PRODUCER_FAULT_WINDOW: every send with an actor and a detail.tries list (a producer's attempts)
    tries = F.try_variant_get(F.try_parse_json(F.col("detail").cast("string")), "$.tries", "variant")
    reasons.append(_seqs(rows.filter((ev == "send") & has("actor")
                                     & F.schema_of_variant(tries).startswith("ARRAY"))))
    # a master/slave pair's replay state (``traces/carry_ha.py``)
    reasons.append(_pair_rows(rows))
    # ORDER_QUEUE_GAP: the last store per (topic, queue)
    reasons.append(_seqs(rows.filter((ev == "store") & has("topic", "queue_id", "queue_offset"))
                         .groupBy("trace", "topic", "queue_id").agg(F.max("seq").alias("seq"))))
    # LOST's consumers: the first consume per (topic, group), else the first deliver
    dc = rows.filter(ev.isin("deliver", "consume") & has("group", "topic"))
    consumed = dc.filter(ev == "consume").groupBy("trace", "topic", "group").agg(F.min("seq").alias("seq"))
    delivered = dc.filter(ev == "deliver").groupBy("trace", "topic", "group").agg(F.min("seq").alias("seq"))
    reasons.append(_seqs(consumed))
    reasons.append(_seqs(delivered.join(consumed.select("trace", "topic", "group"),
                                        ["trace", "topic", "group"], "left_anti")))
    # OFFSET_LOST: the last commit per queue; LOST's saved-offset exemption: the highest per crash count
    commits = rows.filter((ev == "commit_offset") & has(*QUEUE, "queue_offset"))
    reasons.append(_seqs(commits.groupBy("trace", *QUEUE).agg(F.max("seq").alias("seq"))))
    top = commits.groupBy("trace", *QUEUE, "crashes").agg(
        F.max(F.struct(F.col("queue_offset"), (-F.col("seq")).alias("neg"))).alias("top"))
    reasons.append(top.select("trace", (-F.col("top.neg")).alias("seq")))
    # ORDERLY_CONCURRENT: the opening start of every open window
    orderly = rows.filter(ev.isin("orderly_start", "orderly_end") & has(*QUEUE, "client_id"))
    ends = orderly.filter(ev == "orderly_end").groupBy("trace", *QUEUE, "client_id").agg(
        F.max("seq").alias("last_end"))
    starts = orderly.filter(ev == "orderly_start").join(ends, ["trace", *QUEUE, "client_id"], "left")
    reasons.append(_seqs(starts.filter(F.col("last_end").isNull() | (F.col("seq") > F.col("last_end")))
                         .groupBy("trace", *QUEUE, "client_id").agg(F.min("seq").alias("seq"))))
    # OFFSET_OVERRUN: the latest deliver of every pending offset
    acks = rows.filter(ev.isin("deliver", "consume", "send_back") & has(*QUEUE, "queue_offset"))
    pend = acks.groupBy("trace", *QUEUE, "queue_offset").agg(
        F.max(F.when(ev == "deliver", F.col("seq"))).alias("d"),
        F.max(F.when((ev == "send_back") | ((ev == "consume") & (st == "SUCCESS")), F.col("seq"))).alias("a"),
    )
    reasons.append(_seqs(pend.filter(F.col("d").isNotNull() & (F.col("a").isNull() | (F.col("a") < F.col("d")))),
                         "d"))
    # ORDER_KEY_REORDERED: the owner's last SUCCESS consume of its current ownership, unless the
    # owner rolled back after it (an orderly_end of status ROLLBACK). The owner
    # at the end is the client c of the last GRANTED unless c unlocked after it; its ownership
    # began at the first GRANTED to c after the last GRANTED to another client or unlock by c.
    ko = rows.filter(ev.isin("lock", "unlock", "consume", "orderly_end") & has(*QUEUE, "client_id"))
    qk = ["trace", "epoch", *QUEUE]
    client = F.col("client_id")
    granted = (ev == "lock") & (st == "GRANTED")
    last_grant = ko.filter(granted).groupBy(*qk).agg(F.max_by("client_id", "seq").alias("c"),
                                                     F.max("seq").alias("g"))
    ko = ko.join(F.broadcast(last_grant), qk)
    bounds = ko.groupBy(*qk).agg(
        F.max(F.when((ev == "unlock") & (client == F.col("c")) & (F.col("seq") > F.col("g")), F.col("seq")))
        .alias("freed"),
        F.max(F.when((granted & (client != F.col("c"))) | ((ev == "unlock") & (client == F.col("c"))),
                     F.col("seq"))).alias("r0"),
    ).filter(F.col("freed").isNull())
    ko = ko.join(bounds, qk)
    began = ko.groupBy(*qk).agg(F.min(F.when(granted & (client == F.col("c"))
                                             & (F.col("seq") > F.coalesce(F.col("r0"), F.lit(-1))),
                                             F.col("seq"))).alias("s"))
    mine = ko.join(began, qk).filter((client == F.col("c")) & (F.col("seq") > F.col("s")))
    owned = mine.filter((ev == "consume") & (st == "SUCCESS") & F.col("queue_offset").isNotNull())
    rolled = mine.filter((ev == "orderly_end") & (st == "ROLLBACK")).groupBy(*qk).agg(F.max("seq").alias("rb"))
    last_ok = owned.groupBy(*qk).agg(F.max("seq").alias("seq")).join(rolled, qk, "left")
    # the owner's ROLLBACK after it leaves no base (the order is compared anew)
    reasons.append(last_ok.filter(F.col("rb").isNull() | (F.col("rb") < F.col("seq"))).select("trace", "seq"))

    # rows lacking a field whose absence leaves findings beyond the row unjudged: carried for good
    reasons.append(unjudged.lasting(rows))
    keep = reduce(DataFrame.unionByName, reasons)

    # open keys
    keyed = rows.filter(F.col("msg_key").isNotNull())
    per_key = keyed.groupBy("trace", "msg_key").agg(
        F.max(ev.isin("send", "store", "txn_half").cast("int")).alias("known"),
        F.max((ev == "txn_half").cast("int")).alias("half"),
        F.max(((ev == "txn_end") & (st == "COMMIT")).cast("int")).alias("committed"),
        F.min(F.when(ev == "txn_half", F.col("seq"))).alias("half_seq"),
        F.max(F.when(ev == "deliver", F.col("seq"))).alias("deliver_seq"),
    )
    acked_send = (ev == "send") & (st.isNull() | st.isin(*sorted(ACKED_SEND_STATUSES))) & has("topic")
    sends = keyed.filter(acked_send)
    half_topic = keyed.filter((ev == "txn_half") & has("topic")).groupBy("trace", "msg_key").agg(
        F.min_by("topic", "seq").alias("half_topic"))
    commits_k = keyed.filter((ev == "txn_end") & (st == "COMMIT")).join(half_topic, ["trace", "msg_key"], "left")
    acked = sends.select("trace", "msg_key", "topic").unionByName(
        commits_k.select("trace", "msg_key", F.coalesce("topic", "half_topic").alias("topic"))
    ).filter(F.col("topic").isNotNull()).distinct()
    pairs = dc.select("trace", "topic", "group").distinct()
    subs = [(g, t) for g, ts in (subscriptions or {}).items() for t in ts]
    if subs:
        traces = rows.select("trace").distinct()
        pairs = pairs.unionByName(traces.crossJoin(spark.createDataFrame(subs, "group string, topic string"))
                                  .select("trace", "topic", "group")).distinct()
    done = keyed.filter(
        has("group") & (((ev == "consume") & (st == "SUCCESS")) | ((ev == "send_back") & (st == "DLQ")))
    ).groupBy("trace", "group", "msg_key").agg(F.min("seq").alias("done"))
    drains = rows.filter(ev == "drain").groupBy("trace").agg(F.max("seq").alias("drain"))
    owed = acked.join(F.broadcast(pairs), ["trace", "topic"]).join(done, ["trace", "group", "msg_key"], "left")
    owed = owed.join(F.broadcast(drains), "trace", "left")
    lost_open = owed.filter(
        F.col("done").isNull() | (F.col("drain").isNotNull() & (F.col("done") > F.col("drain")))
    ).select("trace", "msg_key")
    # TIMER_UNFIRED: an acknowledged timer send whose key no timer_fire fired before the last drain
    timed = keyed.filter((ev == "send") & (st.isNull() | st.isin(*sorted(ACKED_SEND_STATUSES)))
                         & F.col("deliver_ts").isNotNull() & F.coalesce(F.col("delay_level") <= 0, F.lit(True)))
    fired = keyed.filter(ev == "timer_fire").groupBy("trace", "msg_key").agg(F.min("seq").alias("fired"))
    unfired = timed.select("trace", "msg_key").distinct().join(fired, ["trace", "msg_key"], "left").join(
        F.broadcast(drains), "trace", "left").filter(
        F.col("fired").isNull() | (F.col("drain").isNotNull() & (F.col("fired") > F.col("drain")))
    ).select("trace", "msg_key")
    lost_open = lost_open.unionByName(unfired)
    has_ack = acked.select("trace", "msg_key").distinct().withColumn("ack", F.lit(1))
    open_keys = per_key.join(has_ack, ["trace", "msg_key"], "left").filter(
        (F.col("known") == 0) | (F.col("ack").isNull() & (F.col("half") == 0))
        | ((F.col("half") == 1) & (F.col("committed") == 0)
           & F.coalesce(F.col("deliver_seq") >= F.col("half_seq"), F.lit(False)))
    ).select("trace", "msg_key").unionByName(lost_open)
    # traces whose rows carry filter details, or with a broadcasting client's row, are carried whole
    detail = F.col("detail")
    filt = ev.isin("send", "store", "deliver", "consume") & reduce(
        lambda a, b: a | b, [detail.contains(f'"{k}"') for k in FILTER_DETAIL_KEYS])
    whole_traces = rows.filter(filt | broadcasting(rows)).select("trace").distinct()
    open_keys = open_keys.unionByName(keyed.join(F.broadcast(whole_traces), "trace", "left_semi")
                                      .select("trace", "msg_key")).distinct()
    open_keys = open_keys.persist(StorageLevel.MEMORY_AND_DISK)
    keep = keep.unionByName(_seqs(keyed.join(open_keys, ["trace", "msg_key"], "left_semi")))
    # transactions: a closed one's rows go with its key's tombstones, the others' are kept
    closed_txns = _closed_transactions(rows, open_keys, drains)
    in_txn = txn_rows.filter(F.col("txn_id").isNotNull())
    keep = keep.unionByName(_seqs(in_txn.join(closed_txns, ["trace", "txn_id"], "left_anti")))
    keep = keep.unionByName(_seqs(rows.join(F.broadcast(whole_traces), "trace", "left_semi")))

    # tombstones of closed keys: their sends, stores, send_backs and schedule_fires, the first
    # SUCCESS consume per group
    tomb = keyed.filter(ev.isin("send", "store", *PER_KEY)).select("trace", "msg_key", "seq").unionByName(
        keyed.filter((ev == "consume") & (st == "SUCCESS") & has("group")).groupBy("trace", "group", "msg_key")
        .agg(F.min("seq").alias("seq")).select("trace", "msg_key", "seq")).unionByName(
        in_txn.join(closed_txns, ["trace", "txn_id"], "left_semi").select("trace", "msg_key", "seq"))
    tomb = tomb.join(open_keys, ["trace", "msg_key"], "left_anti")
    keep = keep.distinct().persist(StorageLevel.MEMORY_AND_DISK)
    kept_keys = keyed.select("trace", "seq", "msg_key").join(keep, list(KEY), "left_semi").select(
        "trace", "msg_key").distinct().withColumn("k", F.lit(1))
    tomb = tomb.join(kept_keys, ["trace", "msg_key"], "left").withColumn(
        "kept", F.col("k").isNotNull()).persist(StorageLevel.MEMORY_AND_DISK)
    keep = keep.unionByName(tomb.filter("kept").select(*KEY)).distinct()
    closed = tomb.filter(~F.col("kept")).select(*KEY).distinct()
    return keep, closed, open_keys


_PAIR_KEPT = T.StructType([T.StructField("trace", T.StringType()), T.StructField("seq", T.LongType()),
                           T.StructField("kept", T.BooleanType())])


def _pair_rows(rows: DataFrame) -> DataFrame:
    """(trace, seq) of the rows that rebuild a master/slave pair's replay state (``traces/carry_ha.py``):
    ``carry_pairs`` per trace on the rows it must see (``pair_candidate``: a replicate or ha_link, or a store,
    send or deliver whose detail names a broker — a few; one shuffle by trace, a ``mapInArrow``), and per
    trace the last store naming no pair, of those rows or of the stores whose detail names no broker."""
    ev, text = F.col("event"), F.col("detail").cast("string")
    candidate = ev.isin(*HA_EVENTS) & (ev.isin(*PAIR_LINKS) | F.coalesce(text.contains('"broker'), F.lit(False)))
    seen = rows.filter(candidate).select("trace", F.col("seq").cast("bigint").alias("seq"), "event", "status",
                                         "commitlog_offset", "msg_key", text.alias("detail"))

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        by_trace: dict[str, list[dict]] = {}
        for batch in batches:
            for row in batch.to_pylist():
                by_trace.setdefault(row["trace"], []).append(row)
        out: list[dict] = []
        for trace, trace_rows in by_trace.items():
            trace_rows.sort(key=lambda r: r["seq"])
            pairs = carry_pairs(trace_rows)
            out.extend({"trace": trace, "seq": s, "kept": True} for s in sorted(pairs.kept))
            if pairs.nameless_store is not None:
                out.append({"trace": trace, "seq": pairs.nameless_store, "kept": False})
        yield pa.RecordBatch.from_pylist(out, schema=pa.schema([("trace", pa.string()), ("seq", pa.int64()),
                                                                  ("kept", pa.bool_())]))

    kept = keyed(seen, "trace").mapInArrow(run, _PAIR_KEPT)
    plain = _seqs(rows.filter((ev == "store") & ~candidate))
    nameless = (kept.filter(~F.col("kept")).select("trace", "seq").unionByName(plain)
                .groupBy("trace").agg(F.max("seq").alias("seq")))
    return kept.filter(F.col("kept")).select("trace", "seq").unionByName(nameless)


def _closed_transactions(rows: DataFrame, open_keys: DataFrame, drains: DataFrame) -> DataFrame:
    """(trace, txn_id) of the closed transactions (``traces.carry._Transactions``): one msg_key on
    every row, not open nor at risk, resolved, not unresolved at the last drain, and not read across
    transactions (the highest half-queue position so far and before each power crash; an op a
    power crash's window may leave unread, ``rules_lifecycle._unseen_ops``)."""
    from rmqspec.spark.inputs import at_risk
    from rmqspec.spark.rules_lifecycle import _unseen_ops

    ev, st = F.col("event"), F.col("status")
    txns = rows.filter(ev.isin(*TXN_EVENTS) & F.col("txn_id").isNotNull())
    resolving = ((ev == "txn_end") & st.isin("COMMIT", "ROLLBACK")) | (ev == "txn_discard")
    per = txns.groupBy("trace", "txn_id").agg(
        F.min("msg_key").alias("msg_key"), F.max("msg_key").alias("k_max"), F.count("msg_key").alias("keyed"),
        F.count(F.lit(1)).alias("n"), F.min(F.when(ev == "txn_half", F.col("seq"))).alias("half"),
        F.min(F.when(resolving, F.col("seq"))).alias("resolved"),
    ).join(F.broadcast(drains), "trace", "left")
    half, drain, resolved = F.col("half"), F.col("drain"), F.col("resolved")
    unresolved_now = drain.isNotNull() & half.isNotNull() & (half < drain) & ~F.coalesce(resolved < drain, F.lit(False))
    candidates = per.filter((F.col("msg_key") == F.col("k_max")) & (F.col("keyed") == F.col("n"))
                            & resolved.isNotNull() & ~unresolved_now)
    with_risk = rows.withColumn("at_risk", at_risk(rows))
    risky = with_risk.filter(ev == "crash").select("trace", F.explode("at_risk").alias("msg_key"))
    candidates = candidates.join(open_keys, ["trace", "msg_key"], "left_anti").join(
        risky.distinct(), ["trace", "msg_key"], "left_anti")
    # read across transactions: the first row at the highest half-queue position, overall and
    # before each power crash; the ops a power crash's window may leave unread
    positions = rows.filter(ev.isin("txn_half", "txn_check") & F.col("queue_offset").isNotNull()).select(
        "trace", "seq", F.struct(F.col("queue_offset"), (-F.col("seq")).alias("neg"), F.col("txn_id")).alias("at"))
    power = rows.filter((ev == "crash") & (st == "power")).select(F.col("trace").alias("c_trace"),
                                                                  F.col("seq").alias("c_seq"))
    before = positions.join(F.broadcast(power), (F.col("trace") == F.col("c_trace")) & (F.col("seq") < F.col("c_seq")))
    unseen = _unseen_ops(with_risk)
    forced = (
        positions.groupBy("trace").agg(F.max("at").alias("top")).select("trace", F.col("top.txn_id").alias("txn_id"))
        .unionByName(before.groupBy("trace", "c_seq").agg(F.max("at").alias("top"))
                     .select("trace", F.col("top.txn_id").alias("txn_id")))
        .unionByName(rows.join(unseen, (F.col("trace") == F.col("u_trace")) & (F.col("seq") == F.col("u_seq")))
                     .select("trace", "txn_id"))
        .filter(F.col("txn_id").isNotNull())
    )
    return candidates.join(forced, ["trace", "txn_id"], "left_anti").select("trace", "txn_id")


def collect_per_trace(
    rows: DataFrame, subscriptions: Mapping[str, Sequence[str]] | None = None, partitions: int = 1
) -> Carried:
    """The new state from ``traces.carry.carry_trace``'s rules (``carry_columns``), run once per
    trace on the executors and collected: each task sends back its traces' rows to carry and
    tombstones as Arrow IPC streams of the trace schema (``detail`` as its text), and their open
    msg_keys. ``rows``: ``trace`` and the trace schema's columns, ``detail`` as text.
    ``partitions``: tasks (hash-partitioned by trace); at 1 (one trace, or a small input) the rows
    reach one task without a shuffle."""
    subs = {group: list(topics) for group, topics in (subscriptions or {}).items()}

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        got = list(batches)
        if not got:
            return
        for trace, mine in _traces(pa.Table.from_batches(got)):
            keep, tomb, open_keys = _carry_one(mine, subs)
            yield _stream("keep", trace, ipc_stream(keep))
            yield _stream("tomb", trace, ipc_stream(tomb))
            yield _stream("open", trace, ipc_stream(pa.table({"msg_key": pa.array(sorted(open_keys), pa.string())})))

    frame = rows.select("trace", *COLUMNS)
    together = frame.coalesce(1) if partitions <= 1 else frame.repartition(partitions, "trace")
    parts: dict[str, list[tuple[str, bytes]]] = {"keep": [], "tomb": []}
    open_keys: dict[str, frozenset[str]] = {}
    for r in together.mapInArrow(run, "kind string, trace string, arrow binary").collect():
        if r["kind"] == "open":
            keys = pa.ipc.open_stream(r["arrow"]).read_all().column("msg_key").to_pylist()
            open_keys[r["trace"]] = frozenset(keys)
        else:
            parts[r["kind"]].append((r["trace"], bytes(r["arrow"])))
    return carried_from_streams(parts, open_keys)


def _traces(table: pa.Table) -> Iterator[tuple[str, pa.Table]]:
    """(trace, its rows in seq order) for each trace of ``table`` (``trace`` and the trace schema)."""
    table = table.sort_by([("trace", "ascending"), ("seq", "ascending")])
    ids = table.column("trace").combine_chunks().dictionary_encode().indices.to_numpy(zero_copy_only=False)
    cuts = [0, *(np.flatnonzero(np.diff(ids)) + 1).tolist(), table.num_rows]
    for start, end in itertools.pairwise(cuts):
        if end > start:
            mine = table.slice(start, end - start)
            yield mine.column("trace")[0].as_py(), mine


def _carry_one(mine: pa.Table, subs: Mapping[str, Sequence[str]]) -> tuple[pa.Table, pa.Table, list[str]]:
    """One trace's rows (seq order) -> (rows to carry, tombstones: tables of the trace schema; the
    open msg_keys), by ``carry_columns``. Its masks are widened to every row of a seq, as
    ``carry_trace``'s seq sets choose rows: a seq with a kept row is kept whole, a seq with a
    tombstone row and no kept one is a tombstone whole (one pass over the sorted seqs, no hashing)."""
    keep, tomb, open_keys = carry_columns(mine.select(_CARRY_COLUMNS), subs)
    seq = mine.column("seq").to_numpy()
    starts = np.flatnonzero(np.r_[True, seq[1:] != seq[:-1]]) if len(seq) else np.zeros(0, np.int64)
    if len(starts) < len(seq):  # rows sharing a seq: a seq is kept (closed) when any of its rows is
        segment = np.cumsum(np.r_[True, seq[1:] != seq[:-1]]) - 1
        keep = np.logical_or.reduceat(keep, starts)[segment]
        tomb = np.logical_or.reduceat(tomb, starts)[segment]
    tomb = tomb & ~keep
    keep_t, tomb_t = (mine.filter(pa.array(mask)).select(COLUMNS).cast(SCHEMA) for mask in (keep, tomb))
    return keep_t, tomb_t, list(open_keys)


def collect_local(files: Sequence[str], subscriptions: Mapping[str, Sequence[str]] | None = None) -> Carried | None:
    """``collect_per_trace``'s answer from the driver: the history's local Parquet ``files`` read
    with pyarrow (``driver_read.valid_rows``: the audit's row validation) and ``carry_columns`` run per
    trace here, with no Spark job and no rows through the JVM (on the incremental bench's 1.25 M
    rows, the Spark task's Arrow hand-over of every column alone took ~1.9 s). None when the
    files are not ones whose validation the driver can state (``spark/driver_read.py``), or when their
    columns are not of the trace schema's types: ``collect_per_trace`` answers then."""
    from rmqspec.spark import driver_read

    paths = driver_read.parquet_files(files)
    table = driver_read.valid_rows(paths, None) if paths is not None else None
    if table is None:
        return None
    if any(c in table.column_names and table.schema.field(c).type != SCHEMA.field(c).type for c in COLUMNS):
        return None
    n = table.num_rows
    table = pa.table({"trace": table["trace"], **{
        c: table[c] if c in table.column_names else pa.nulls(n, SCHEMA.field(c).type) for c in COLUMNS}})
    subs = {group: list(topics) for group, topics in (subscriptions or {}).items()}
    keep: list[pa.Table] = []
    tomb: list[pa.Table] = []
    open_keys: dict[str, frozenset[str]] = {}
    for trace, mine in _traces(table):
        k, t, o = _carry_one(mine, subs)
        keep.append(k.append_column("trace", pa.repeat(pa.scalar(trace, pa.string()), k.num_rows)))
        tomb.append(t.append_column("trace", pa.repeat(pa.scalar(trace, pa.string()), t.num_rows)))
        open_keys[trace] = frozenset(o)
    empty = SCHEMA.append(pa.field("trace", pa.string())).empty_table()
    return Carried(pa.concat_tables(keep) if keep else empty, pa.concat_tables(tomb) if tomb else empty, open_keys)


def _stream(kind: str, trace: str, blob: bytes) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [pa.array([kind], pa.string()), pa.array([trace], pa.string()), pa.array([blob], pa.binary())],
        names=["kind", "trace", "arrow"],
    )
