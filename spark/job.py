"""The Spark audit job: read traces once, run every §8.1 rule, write the results.

``run_audit(spark, paths, out, config)`` is the library entry (the CLI's
``rmqspec audit`` and ``spark-submit`` both call it through ``main``):

The plan (``--plan``, ``choose_plan``): ``reference`` (the default for a
small local input, ``REFERENCE_INPUT_BYTES``) runs the reference checker in
Spark's Python workers as one job (``spark/reference.py``) and writes the
outputs from the driver; ``small`` and ``scale`` run the SQL rules, as follows:

1. prepare: check the inputs, convert JSONL to Parquet (driver side);
2. facts: row counts per (trace, validity, event, unknown status, filter
   detail, candidate of ``spark/unjudged.py``) and the crash / recover /
   drain rows, validating every row (``spark/facts.py``: two small collects)
   — row counts, drain seq, crash/recover seqs for epochs, at-risk keys of
   crashes, the rows that may lack what a rule reads and the anchors they
   read. Nothing is cached: Parquet is already a compact columnar copy, and
   each later pass reads only its own columns of its own events;
3. rules: ``rules.all_findings`` (four passes, each one shuffle by its key
   and a judge per partition; shuffle partitions sized to the input), less
   what rows lacking fields leave unjudged (``spark/unjudged.py``: only when
   some row is a candidate; their count per code is the summary's
   ``not_judged``), persisted, written to ``OUT/violations`` and
   ``OUT/observations`` (Parquet);
4. summary: ``OUT/rejected`` (Parquet: position, seq, reason; the input is
   re-read for it only when some row was rejected) and ``OUT/summary.json``.

Run it on a cluster with ``spark-submit`` (see ``spark/README.md``)::

    spark-submit --master yarn --py-files rmqspec.zip spark/job.py TRACE... --out DIR
"""

from __future__ import annotations

import sys
from pathlib import Path

if __name__ == "__main__":  # spark-submit runs this file as a script: its folder (profile.py…) must not
    # shadow the standard modules pyspark imports (``profile``), so it leaves sys.path
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import argparse
import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from functools import reduce
from typing import Any
from urllib.parse import urlparse

import attrs
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from rmqspec.model.versions import DEFAULT_VERSION
from rmqspec.properties.codes import OBSERVATION_CODES, VIOLATION_CODES
from rmqspec.spark import inputs as inputs_mod
from rmqspec.spark import reference
from rmqspec.spark import unjudged as unjudged_mod
from rmqspec.spark.args import add_arguments
from rmqspec.spark.config import AuditConfig, ConfigError, load_config
from rmqspec.spark.errors import StateError
from rmqspec.spark.facts import facts as _facts
from rmqspec.spark.rules import all_findings
from rmqspec.traces.checker import not_judged_reasons
from rmqspec.traces.errors import TraceReadError
from rmqspec.traces.unjudged import Withheld

__all__ = ["AuditSummary", "add_arguments", "main", "render_summary", "run", "run_audit"]

OUTPUT_KEYS = ("group", "topic", "queue_id", "msg_key", "client_id", "txn_id")
# The rejected rows' output (``out/rejected``).
REJECTED_SCHEMA = T.StructType([T.StructField("position", T.StringType()), T.StructField("seq", T.LongType()),
                                T.StructField("reason", T.StringType())])
# Input (compressed Parquet) bytes per shuffle partition: the widest family
# shuffles ~5x its share of the input, so this gives ~64-128 MB partitions;
# AQE coalesces the partitions of the smaller families.
INPUT_BYTES_PER_PARTITION = 16 * 1024 * 1024
# Up to this many crash, recover and drain seqs over all traces (+1 a trace), and up to
# INLINE_TRACES traces (a row tests the traces' names one by one), the rows' epoch, crashes and
# drain are compiled comparisons (``_inline_trace_facts``); beyond, a broadcast join of the
# per-trace lists and Spark's (interpreted) ``filter`` lambdas.
INLINE_TRACE_FACTS = 256
INLINE_TRACES = 8
# Findings of a large input written from the driver when there are at most this many (~200 bytes
# each): sorting and writing a few thousand rows through Spark took five jobs and ~1.8 s of a
# 10 M-event audit's 32 s (its range sampling, sort and write per output, the counts, the samples).
COLLECTED_FINDINGS = 100_000
# Local Parquet input up to this size (~1 M events of a generated trace) is
# "small": Spark's per-stage and per-job costs dominate, not the data. It is
# read once and cached, the rules run as one job (AQE off: AQE runs every
# shuffle stage as a job of its own) over one shuffle partition, and the
# findings are collected once.
SMALL_INPUT_BYTES = 8 * 1024 * 1024
SMALL_INPUT_CONF: dict[str, str] = {
    "spark.sql.shuffle.partitions": "1",
    "spark.sql.adaptive.enabled": "false",
}
# Local Parquet input up to this size (~130 k events of a generated trace)
# takes the reference plan under ``--plan auto``: the reference checker in one
# Python worker, ~25 us per event after ~0.6 s of fixed costs in a warm session,
# against ~3.4 s + ~2.6 us per event for the scale plan's numpy judges, so the
# reference plan is the faster one up to ~125 k events (same session,
# 2026-11-23: 100 k events 2.7-3.1 s against 3.3-4.3 s; 250 k 6.4 s against
# 3.8 s; 500 k 12.9-13.3 s against 4.7-4.8 s).
REFERENCE_INPUT_BYTES = 2 * 1024 * 1024
PLANS = ("auto", "reference", "small", "scale")
# The rules passes the reference checker states; a pass registered beyond these
# (``rules.register_pass``) runs only in the SQL plans, so ``auto`` then picks one.
REFERENCE_PASSES = frozenset({"queue", "message", "txn", "table", "keyed", "route", "ha"})


@attrs.frozen
class AuditSummary:
    """What ``summary.json`` holds; ``samples`` are the first violations for the terminal."""

    violations: Mapping[str, int]
    observations: Mapping[str, int]
    events_read: int
    rows_rejected: int
    not_judged: Mapping[str, str]
    wall_time_s: float
    inputs: tuple[str, ...]
    master: str
    out: str
    rejected_sample: tuple[str, ...] = ()
    samples: tuple[tuple[str, tuple[int, ...], str], ...] = ()
    # The reference plan's new incremental state (``run_audit(carry=True)``); not in summary.json.
    carried: reference.Carried | None = attrs.field(default=None, eq=False, repr=False)
    # Per trace, what rows lacking fields withhold beyond themselves (``run_audit(lasting=True)``:
    # an incremental run withholds it from the stored findings); not in summary.json.
    withheld: Mapping[str, Withheld] = attrs.field(factory=dict, eq=False, repr=False)

    @property
    def events_per_s(self) -> float:
        return self.events_read / self.wall_time_s if self.wall_time_s > 0 else 0.0

    @property
    def exit_code(self) -> int:
        return 1 if any(self.violations.values()) else 0

    def as_json(self) -> dict[str, Any]:
        return {
            "violations": dict(self.violations),
            "observations": dict(self.observations),
            "events_read": self.events_read,
            "rows_rejected": self.rows_rejected,
            "not_judged": dict(self.not_judged),
            "wall_time_s": round(self.wall_time_s, 3),
            "events_per_s": round(self.events_per_s, 1),
            "inputs": list(self.inputs),
            "master": self.master,
            "out": self.out,
            "rejected_sample": list(self.rejected_sample),
        }


def _is_local(path: str) -> bool:
    scheme = urlparse(path).scheme
    return len(scheme) <= 1 or scheme == "file"


def _write_text(spark: SparkSession, path: str, text: str) -> None:
    if _is_local(path):
        Path(path.removeprefix("file:")).write_text(text, encoding="utf-8")
        return
    jvm = spark.sparkContext._jvm  # Hadoop FileSystem for hdfs://, s3a://, …
    hpath = jvm.org.apache.hadoop.fs.Path(path)
    fs = hpath.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    stream = fs.create(hpath, True)
    stream.write(bytearray(text.encode("utf-8")))
    stream.close()


def _consumers(facts: list[Any], subscriptions: Mapping[str, Sequence[str]]) -> dict[tuple[str, str], list[str]]:
    """(trace, topic) -> the groups consuming it, sorted: those a valid deliver or consume shows
    (``_facts``) and, in every trace with valid rows, those the configuration subscribes."""
    out: dict[tuple[str, str], set[str]] = {}
    for r in facts:
        if not r["good"]:
            continue
        for topic, groups in r["consumers"].items():
            out.setdefault((r["trace"], topic), set()).update(groups)
        for group, topics in subscriptions.items():
            for topic in topics:
                out.setdefault((r["trace"], topic), set()).add(group)
    return {key: sorted(groups) for key, groups in out.items()}


def _broadcasting(facts: list[Any]) -> dict[str, list[str]]:
    """trace -> its broadcasting groups (``_facts``; ``Trace.broadcasting``), for the traces that have some."""
    return {r["trace"]: list(r["broadcasting"]) for r in facts if r["good"] and r["broadcasting"]}


def _drain_ts(facts: list[Any]) -> dict[str, int]:
    """trace -> the ts of its last drain (``_facts``), for the traces with valid rows and a drain."""
    return {r["trace"]: r["drain_ts"] for r in facts if r["good"] and r["drain"] is not None}


def _at_risk(spark: SparkSession, facts: list[Any]) -> DataFrame | None:
    """(trace, msg_key) of every key a ``crash`` lists in ``detail.at_risk``; None if none."""
    pairs = [(r["trace"], k) for r in facts if r["good"] for k in r["at_risk"]]
    if not pairs:
        return None
    schema = T.StructType([T.StructField("trace", T.StringType()), T.StructField("msg_key", T.StringType())])
    return driver_table(spark, pairs, schema)


def driver_table(spark: SparkSession, rows: Sequence[Sequence[Any]], schema: T.StructType) -> DataFrame:
    """A small table the driver made (``rows`` of JSON-able values in ``schema``'s order) as a
    DataFrame that needs no Python worker: one JSON literal, parsed by ``from_json`` in the JVM.
    (``createDataFrame`` of a list is a Python RDD: a stage whose tasks start the Python workers
    before any rule needs them, ~0.8 s on the critical path of a 10 M-event audit.)"""
    text = json.dumps([dict(zip(schema.fieldNames(), row, strict=True)) for row in rows])
    return spark.range(1).select(F.inline(F.from_json(F.lit(text), T.ArrayType(schema))))


def _constants(facts: list[Any]) -> dict[str, Any]:
    """Columns ``_with_trace_facts`` gives one value on every valid row (``arrow_judge.shipped``:
    the rules passes then leave them out of their shuffles): the trace and its drain when one
    trace has valid rows; ``epoch`` and ``crashes`` (0) when no trace has a crash or recover row."""
    good = [r for r in facts if r["good"]]
    out: dict[str, Any] = {}
    if len(good) == 1:
        out["trace"], out["drain"] = good[0]["trace"], good[0]["drain"]
    if not any(r["bounds"] for r in good):
        out["epoch"] = out["crashes"] = 0
    return out


def _input_bytes(parquet: Sequence[str]) -> int:
    """Bytes of the local Parquet inputs (a directory: its ``*.parquet`` files)."""
    total = 0
    for path in parquet:
        if _is_local(path):
            local = Path(path.removeprefix("file:"))
            try:
                files = sorted(local.glob("*.parquet")) if local.is_dir() else [local]
                total += sum(f.stat().st_size for f in files)
            except OSError:
                continue
    return total


def _shuffle_partitions(spark: SparkSession, parquet: Sequence[str]) -> int:
    """The configured shuffle partitions, raised to one per 16 MB of local Parquet input."""
    configured = int(spark.conf.get("spark.sql.shuffle.partitions") or "200")
    return max(configured, math.ceil(_input_bytes(parquet) / INPUT_BYTES_PER_PARTITION))


def _inline_trace_facts(small: Sequence[tuple[str, int | None, list[int], list[int]]]) -> list[Column]:
    """``epoch``, ``crashes`` and ``drain`` as plain expressions of ``trace`` and ``seq`` (a sum of
    comparisons per trace; Spark compiles them, where the lambdas of ``F.filter`` are interpreted
    row by row)."""

    def per_trace(value: Callable[[int | None, list[int], list[int]], Column], default: Column) -> Column:
        if len(small) == 1:
            return value(*small[0][1:])
        out = None
        for trace, drain, bounds, crash_seqs in small:
            hit = F.col("trace") == F.lit(trace)
            out = F.when(hit, value(drain, bounds, crash_seqs)) if out is None else out.when(
                hit, value(drain, bounds, crash_seqs))
        return out.otherwise(default)  # type: ignore[union-attr]

    def below(seqs: list[int]) -> Column:
        return reduce(lambda a, b: a + b, [(F.col("seq") > s).cast("int") for s in seqs], F.lit(0))

    return [
        per_trace(lambda _d, b, _c: below(b), F.lit(0)).alias("epoch"),
        per_trace(lambda _d, _b, c: below(c), F.lit(0)).alias("crashes"),
        per_trace(lambda d, _b, _c: F.lit(d).cast("bigint"), F.lit(None).cast("bigint")).alias("drain"),
    ]


def _with_trace_facts(spark: SparkSession, base: DataFrame, facts: list[Any]) -> DataFrame:
    """``epoch`` (crash/recover rows before the row), ``crashes`` (crash rows before it) and
    ``drain`` (the trace's last drain seq) on every row."""
    small = [(r["trace"], r["drain"], list(r["bounds"]), list(r["crash_seqs"])) for r in facts if r["good"]]
    if not any(d is not None or b for _, d, b, _c in small):
        return (
            base.withColumn("epoch", F.lit(0))
            .withColumn("crashes", F.lit(0))
            .withColumn("drain", F.lit(None).cast("bigint"))
        )
    schema = T.StructType(
        [
            T.StructField("trace", T.StringType()),
            T.StructField("drain", T.LongType()),
            T.StructField("bounds", T.ArrayType(T.LongType())),
            T.StructField("crash_seqs", T.ArrayType(T.LongType())),
        ]
    )
    if len(small) <= INLINE_TRACES and sum(len(b) + len(c) + 1 for _t, _d, b, c in small) <= INLINE_TRACE_FACTS:
        return base.select("*", *_inline_trace_facts(small))
    table = driver_table(spark, small, schema)
    joined = base.join(F.broadcast(table), "trace", "left")
    bounds = F.coalesce(F.col("bounds"), F.array().cast("array<bigint>"))
    crash_seqs = F.coalesce(F.col("crash_seqs"), F.array().cast("array<bigint>"))
    epoch = F.size(F.filter(bounds, lambda b: b < F.col("seq")))
    crashes = F.size(F.filter(crash_seqs, lambda b: b < F.col("seq")))
    return joined.withColumn("epoch", epoch).withColumn("crashes", crashes).drop("bounds", "crash_seqs")


def _is_small(parquet: Sequence[str]) -> bool:
    """Whether the input is local and at most ``SMALL_INPUT_BYTES`` (a few hundred k events)."""
    return all(_is_local(p) for p in parquet) and _input_bytes(parquet) <= SMALL_INPUT_BYTES


def choose_plan(plan: str, parquet: Sequence[str]) -> str:
    """``reference``, ``small`` or ``scale`` for ``--plan`` (``auto``: by the local input's size)."""
    if plan not in PLANS:
        raise ValueError(f"unknown plan {plan!r}; expected one of {PLANS}")
    if plan != "auto":
        return plan
    from rmqspec.spark import rules

    only_reference = {name for name, _ in rules.PASSES} <= REFERENCE_PASSES
    local = all(_is_local(p) for p in parquet)
    if local and only_reference and _input_bytes(parquet) <= REFERENCE_INPUT_BYTES:
        return "reference"
    return "small" if _is_small(parquet) else "scale"


def is_small_plan(plan: str, parquet: Sequence[str]) -> bool:
    """Whether the Spark steps of ``plan`` (``auto`` resolved) take ``SMALL_INPUT_CONF``."""
    return choose_plan(plan, parquet) in ("reference", "small")


Counts = dict[tuple[str, str], int]
Samples = tuple[tuple[str, tuple[int, ...], str], ...]


def _order(row: Any) -> tuple[Any, ...]:
    return (row["trace_id"], row["seqs"][-1], row["code"], list(row["seqs"]))


def _write_collected(
    spark: SparkSession, findings: DataFrame, cols: list[str], out: str, stage: Callable[[str], None]
) -> tuple[Counts, Samples]:
    """Small inputs: one job collects every finding; they are sorted, counted and written from here
    (``write_rows``: with pyarrow when ``out`` is local, no Spark job)."""
    return _write_rows_of(spark, findings.collect(), findings.select(*cols).schema, cols, out, stage)


def _write_rows_of(
    spark: SparkSession,
    rows: list[Any],
    schema: T.StructType,
    cols: list[str],
    out: str,
    stage: Callable[[str], None],
) -> tuple[Counts, Samples]:
    """The findings ``rows`` (collected), sorted, counted and written from the driver."""
    got = sorted(rows, key=_order)
    counts: Counts = {}
    for r in got:
        counts[(r["kind"], r["code"])] = counts.get((r["kind"], r["code"]), 0) + 1
    for kind, name in (("violation", "violations"), ("observation", "observations")):
        stage(f"write {name}")
        write_rows(spark, [tuple(r[c] for c in cols) for r in got if r["kind"] == kind], schema, f"{out}/{name}")
    samples = tuple((r["code"], tuple(r["seqs"]), r["reason"]) for r in got if r["kind"] == "violation")[:10]
    return counts, samples


def _write_distributed(
    spark: SparkSession, findings: DataFrame, cols: list[str], out: str, stage: Callable[[str], None]
) -> tuple[Counts, Samples]:
    """Large inputs: the findings are materialised once (persisted); up to ``COLLECTED_FINDINGS`` of
    them are then collected and written from the driver (``_write_rows_of``), more are sorted and
    written by Spark."""
    # An orderBy on the full plan would run it twice (range sampling).
    raw = findings.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        if raw.count() <= COLLECTED_FINDINGS:
            return _write_rows_of(spark, raw.collect(), raw.select(*cols).schema, cols, out, stage)
        width = max(1, spark.sparkContext.defaultParallelism)
        ordered = raw.coalesce(width).orderBy("trace_id", F.element_at("seqs", -1), "code", "seqs")
        for kind, name in (("violation", "violations"), ("observation", "observations")):
            stage(f"write {name}")
            ordered.filter(F.col("kind") == kind).select(*cols).coalesce(1).write.mode("overwrite").parquet(
                f"{out}/{name}"
            )
        counts = {(r["kind"], r["code"]): r["count"] for r in raw.groupBy("kind", "code").count().collect()}
        samples = tuple(
            (r["code"], tuple(r["seqs"]), r["reason"])
            for r in ordered.filter(F.col("kind") == "violation").limit(10).collect()
        )
    finally:
        raw.unpersist()
    return counts, samples


def run_audit(
    spark: SparkSession,
    paths: Sequence[str],
    out: str,
    config: AuditConfig | None = None,
    *,
    on_stage: Callable[[str], None] | None = None,
    plan: str = "auto",
    prepared: inputs_mod.Inputs | None = None,
    carry: bool = False,
    lasting: bool = False,
) -> AuditSummary:
    """Audit the traces at ``paths``; write ``out/{violations,observations,rejected}`` and
    ``out/summary.json``. Raises ``TraceReadError`` for unreadable input.

    ``plan``: ``reference`` (the reference checker in Spark's Python workers),
    ``small`` (SQL rules, one partition) or ``scale`` (SQL rules, shuffles sized
    to the input); ``auto`` chooses by the size of local input (``choose_plan``).
    ``prepared``: the inputs as ``start_audit`` prepared them (else prepared here).
    ``carry``: on the reference plan, also compute an incremental run's new state in the
    same job (``AuditSummary.carried``; the SQL plans leave it ``None``). ``lasting``: also collect
    what rows lacking fields withhold beyond themselves (``AuditSummary.withheld``; the reference
    plan always has it)."""
    config = config or AuditConfig()
    stage = on_stage or (lambda _name: None)
    start = time.monotonic()
    if _is_local(out):
        Path(out.removeprefix("file:")).mkdir(parents=True, exist_ok=True)

    if prepared is None:
        stage("prepare inputs")
        prepared = inputs_mod.prepare(paths, out.removeprefix("file:"))
    else:  # prepared before the session started: its time still counts
        start -= prepared.seconds

    stage("read + validate")
    plan = choose_plan(plan, prepared.parquet)
    # the SQL plans read positions for rejected rows only (a second read, when there are any)
    rows, has_trace_id = inputs_mod.load(spark, prepared, positions=plan == "reference")
    if plan == "reference":
        return _run_reference(spark, rows, has_trace_id, prepared, paths, out, config, stage, start, carry)
    small = plan == "small"
    tuning = dict(SMALL_INPUT_CONF) if small else {}
    tuning.setdefault("spark.sql.shuffle.partitions", str(_shuffle_partitions(spark, prepared.parquet)))
    saved = {key: spark.conf.get(key, None) for key in tuning}
    for key, value in tuning.items():
        spark.conf.set(key, value)
    if small:  # one scan of the files into one cached partition; no pass then needs a shuffle
        rows = rows.persist(StorageLevel.MEMORY_ONLY)
    unjudged: DataFrame | None = None
    try:
        try:
            facts, unknown = _facts(rows)
        except Exception as exc:  # corrupt data pages surface only when Spark reads them
            raise TraceReadError(", ".join(paths), f"cannot read: {_first_line(exc)}") from None
        spark_read = sum(r["n"] for r in facts)
        spark_bad = sum(r["n"] - r["good"] for r in facts)
        good_traces = [r for r in facts if r["good"]]
        has_drain = bool(good_traces) and all(r["drain"] is not None for r in good_traces)

        stage("rules")
        base = rows.filter(F.col("problem").isNull()).select(
            "trace", *inputs_mod.AUDIT_COLUMNS, *inputs_mod.DERIVED_COLUMNS
        )
        base = _with_trace_facts(spark, base, facts)
        if any(r["candidates"] for r in good_traces):  # rows lacking what a rule reads: not judged
            unjudged = unjudged_mod.entries(base, {r["trace"]: unjudged_mod.trace_facts(r) for r in good_traces})
        not_judged = not_judged_reasons(has_drain, unjudged_mod.lacking(unjudged) if unjudged else {}, unknown)
        any_drain = any(r["drain"] is not None for r in good_traces)
        findings = all_findings(
            base,
            config.params,
            has_drain=any_drain,
            subscriptions=config.subscriptions,
            at_risk=_at_risk(spark, facts),
            has_crash=any(r["crash_seqs"] for r in good_traces),
            has_filters=any(r["filtered"] for r in good_traces),
            has_power=any(r["power"] for r in good_traces),
            constants=_constants(facts),
            consumers=_consumers(facts, config.subscriptions),
            drain_ts=_drain_ts(facts),
            broadcasting=_broadcasting(facts),
            has_expire=any(r["anchors"]["expire"][0] is not None for r in good_traces),
        )
        withheld = unjudged_mod.lasting_withheld(unjudged) if unjudged is not None and lasting else {}
        if unjudged is not None:
            findings = unjudged_mod.withhold(findings, unjudged)
        findings = findings.withColumnRenamed("trace", "trace_id")
        cols = ["code", "seqs", *(["trace_id"] if has_trace_id else []), *OUTPUT_KEYS, "reason"]
        try:
            write = _write_collected if small else _write_distributed
            counts, samples = write(spark, findings, cols, out, stage)
        except Exception as exc:  # a corrupt page in a column the facts pass did not read
            if "parquet" not in str(exc).lower():
                raise
            raise TraceReadError(", ".join(paths), f"cannot read: {_first_line(exc)}") from None

        stage("write rejected")
        driver_rejected = [(r.position, r.seq, r.reason) for r in prepared.rejected]
        if spark_bad:  # only then re-read the input for the rejected rows' positions
            positioned, _ = inputs_mod.load(spark, prepared)
            rejected = positioned.filter(F.col("problem").isNotNull()).select(
                "position", "seq", F.col("problem").alias("reason")
            )
            if driver_rejected:
                rejected = spark.createDataFrame(driver_rejected, REJECTED_SCHEMA).unionByName(rejected)
            rejected = rejected.persist()
            rejected.coalesce(1).write.mode("overwrite").parquet(f"{out}/rejected")
            first = [(r["position"], r["seq"], r["reason"]) for r in rejected.limit(20).collect()]
            rejected.unpersist()
        else:  # the rows the driver rejected while preparing the inputs, if any: no Spark job
            write_rows(spark, driver_rejected, REJECTED_SCHEMA, f"{out}/rejected")
            first = driver_rejected[:20]
        sample = tuple(f"{pos} (seq {'?' if seq is None else seq}): {reason}" for pos, seq, reason in first)
    finally:
        if small:
            rows.unpersist()
        if unjudged is not None:
            unjudged.unpersist()
        for key, value in saved.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)

    summary = AuditSummary(
        violations={c: counts.get(("violation", c), 0) for c in VIOLATION_CODES},
        observations={c: counts.get(("observation", c), 0) for c in OBSERVATION_CODES},
        events_read=spark_read + len(prepared.rejected),
        rows_rejected=spark_bad + len(prepared.rejected),
        not_judged=not_judged,
        wall_time_s=time.monotonic() - start,
        inputs=tuple(paths),
        master=spark.sparkContext.master,
        out=out,
        rejected_sample=sample,
        samples=samples,
        withheld=withheld,
    )
    _write_text(spark, f"{out}/summary.json", json.dumps(summary.as_json(), indent=2) + "\n")
    return summary


def _arrow_type(dtype: T.DataType) -> Any:
    import pyarrow as pa

    if isinstance(dtype, T.ArrayType):
        return pa.list_(pa.field("element", _arrow_type(dtype.elementType)))
    return {T.StringType: pa.string(), T.IntegerType: pa.int32(), T.LongType: pa.int64()}[type(dtype)]


def write_rows(spark: SparkSession, rows: list[tuple[Any, ...]], schema: T.StructType, path: str) -> None:
    """``rows`` as one Parquet file under the directory ``path`` (replaced): from the driver with
    pyarrow when ``path`` is local (no Spark job), else through Spark."""
    if not _is_local(path):
        spark.createDataFrame(rows, schema).coalesce(1).write.mode("overwrite").parquet(path)
        return
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    target = Path(path.removeprefix("file:"))
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    arrow = pa.schema([pa.field(f.name, _arrow_type(f.dataType)) for f in schema.fields])
    columns = [[row[i] for row in rows] for i in range(len(schema.fields))]
    pq.write_table(pa.Table.from_arrays([pa.array(c, f.type) for c, f in zip(columns, arrow, strict=True)],
                                        schema=arrow), target / "part-00000.snappy.parquet")
    (target / "_SUCCESS").write_bytes(b"")


def _finding_order(row: Mapping[str, Any]) -> tuple[Any, ...]:
    """The SQL plans' order (trace, last seq, code, seqs), then the other columns for ties."""
    rest = tuple((row[k] is None, row[k] if row[k] is not None else 0) for k in (*OUTPUT_KEYS, "reason"))
    return (row["trace"], row["seqs"][-1], row["code"], list(row["seqs"]), rest)


def _run_reference(
    spark: SparkSession,
    rows: DataFrame,
    has_trace_id: bool,
    prepared: inputs_mod.Inputs,
    paths: Sequence[str],
    out: str,
    config: AuditConfig,
    stage: Callable[[str], None],
    start: float,
    carry: bool = False,
) -> AuditSummary:
    """The reference plan (``spark/reference.py``): one job, outputs written from the driver."""
    stage("reference checker")
    partitions = 1 if _is_small(prepared.parquet) else _shuffle_partitions(spark, prepared.parquet)
    try:
        got = reference.collect_audit(rows, config.params, config.subscriptions, partitions, carry)
    except Exception as exc:  # corrupt data pages surface only when Spark reads them
        if "parquet" not in str(exc).lower() or "Traceback" in str(exc):
            raise  # not the input's fault: the checker or Spark itself failed
        raise TraceReadError(", ".join(paths), f"cannot read: {_first_line(exc)}") from None
    findings = sorted(got.findings, key=_finding_order)
    counts: Counts = {}
    for r in findings:
        counts[(r["kind"], r["code"])] = counts.get((r["kind"], r["code"]), 0) + 1
    fields = {f.name: f for f in reference.FINDING_SCHEMA.fields}
    cols = ["code", "seqs", *(["trace_id"] if has_trace_id else []), *OUTPUT_KEYS, "reason"]
    schema = T.StructType(
        [T.StructField("trace_id", T.StringType()) if c == "trace_id" else fields[c] for c in cols]
    )
    source = ["trace" if c == "trace_id" else c for c in cols]
    stage("write outputs")
    for kind, name in (("violation", "violations"), ("observation", "observations")):
        part = [tuple(r[c] for c in source) for r in findings if r["kind"] == kind]
        write_rows(spark, part, schema, f"{out}/{name}")
    rejected = [(r.position, r.seq, r.reason) for r in prepared.rejected] + list(got.rejected)
    write_rows(spark, rejected, REJECTED_SCHEMA, f"{out}/rejected")
    summary = AuditSummary(
        violations={c: counts.get(("violation", c), 0) for c in VIOLATION_CODES},
        observations={c: counts.get(("observation", c), 0) for c in OBSERVATION_CODES},
        events_read=got.good + len(got.rejected) + len(prepared.rejected),
        rows_rejected=len(got.rejected) + len(prepared.rejected),
        not_judged=not_judged_reasons(got.has_drain, got.lacking, got.unknown),
        wall_time_s=time.monotonic() - start,
        inputs=tuple(paths),
        master=spark.sparkContext.master,
        out=out,
        rejected_sample=tuple(
            f"{position} (seq {'?' if seq is None else seq}): {reason}" for position, seq, reason in rejected[:20]
        ),
        samples=tuple((r["code"], tuple(r["seqs"]), r["reason"]) for r in findings if r["kind"] == "violation")[:10],
        carried=got.carried,
        withheld=got.withheld,
    )
    _write_text(spark, f"{out}/summary.json", json.dumps(summary.as_json(), indent=2) + "\n")
    return summary


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("An error occurred while calling"):
            return line[:300]
    return type(exc).__name__


def render_summary(summary: AuditSummary) -> str:
    """The terminal table: one line per code, then not-judged reasons and samples."""
    lines = [
        f"audited {summary.events_read} events ({summary.rows_rejected} rejected) in "
        f"{summary.wall_time_s:.1f}s ({summary.events_per_s:,.0f} events/s) on {summary.master}",
        f"{'code':<28}{'kind':<13}{'count':>10}",
    ]
    for code, n in summary.violations.items():
        note = "  not judged" if code in summary.not_judged and not n else ""
        lines.append(f"{code:<28}{'violation':<13}{n:>10}{note}")
    for code, n in summary.observations.items():
        lines.append(f"{code:<28}{'observation':<13}{n:>10}")
    for code, why in summary.not_judged.items():
        lines.append(f"not judged {code}: {why}")
    for code, seqs, reason in summary.samples:
        lines.append(f"{code} seqs={list(seqs)}: {reason}")
    for text in summary.rejected_sample[:5]:
        lines.append(f"rejected {text}")
    total = sum(summary.violations.values())
    lines.append(f"{total} violation(s); results in {summary.out}")
    return "\n".join(lines)


def start_audit(
    paths: Sequence[str],
    out: str,
    master: str,
    conf: Mapping[str, str],
    plan: str = "auto",
    *,
    on_stage: Callable[[str], None] | None = None,
) -> tuple[SparkSession, inputs_mod.Inputs, str]:
    """(session, prepared inputs, plan): the inputs are checked and JSONL converted on the
    driver first, so the plan is known before the JVM starts and a small input gets a
    JVM tuned for it (``session.SMALL_INPUT_JVM_OPTIONS``). Raises ``TraceReadError``."""
    from rmqspec.spark.session import audit_session

    stage = on_stage or (lambda _name: None)
    if _is_local(out):
        Path(out.removeprefix("file:")).mkdir(parents=True, exist_ok=True)
    stage("prepare inputs")
    prepared = inputs_mod.prepare(paths, out.removeprefix("file:"))
    plan = choose_plan(plan, prepared.parquet)
    stage("starting Spark")
    spark = audit_session(master, conf, small_input=plan in ("reference", "small"))
    return spark, prepared, plan


class AuditUsageError(ValueError):
    """A bad option value (``--conf`` without ``=``…)."""


def run(args: argparse.Namespace) -> int:
    """Run the audit for parsed ``args``; raises ConfigError / TraceReadError / AuditUsageError."""
    from rmqspec.spark.session import audit_session

    config = load_config(args.config, getattr(args, "profile", DEFAULT_VERSION))
    conf: dict[str, str] = {}
    for item in args.conf:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise AuditUsageError(f"--conf {item!r} is not KEY=VALUE")
        conf[key] = value
    for path in args.paths:  # fail before the JVM starts
        if _is_local(path) and not Path(path).exists():
            raise TraceReadError(path, "no such file or directory")
    if args.master.startswith("local"):
        conf.setdefault("spark.driver.memory", "2g")
    started = time.monotonic()

    def stage(name: str) -> None:
        if not args.quiet:
            print(f"audit: {name} ({time.monotonic() - started:.1f}s)", file=sys.stderr, flush=True)

    since, state_out = getattr(args, "since", None), getattr(args, "state_out", None)
    if since or state_out:
        from rmqspec.spark import incremental

        for flag, path in (("--since", since), ("--state-out", state_out), ("--out", args.out)):
            if path and not _is_local(path):
                raise incremental.StateError(f"{path}: {flag} of an incremental audit must be a local directory")
        if since:  # fail before the JVM starts
            incremental.read_state(since, config)
    plan = getattr(args, "plan", "auto")
    if since or state_out:
        stage("starting Spark")
        spark = audit_session(args.master, conf)
        summary = incremental.run(
            spark, args.paths, args.out, config, since, state_out, on_stage=stage, plan=plan
        )
    else:
        spark, prepared, plan = start_audit(args.paths, args.out, args.master, conf, plan, on_stage=stage)
        summary = run_audit(spark, args.paths, args.out, config, on_stage=stage, plan=plan, prepared=prepared)
    if args.json:
        print(json.dumps(summary.as_json(), indent=2))
    else:
        print(render_summary(summary))
    return summary.exit_code


def main(argv: Sequence[str] | None = None) -> int:
    """``spark-submit spark/job.py PATH... --out DIR``: exit 0 clean, 1 violations, 2 bad input."""
    parser = argparse.ArgumentParser(prog="rmqspec-audit", description=__doc__.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except (TraceReadError, ConfigError, AuditUsageError, StateError) as exc:
        print(f"rmqspec-audit: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
