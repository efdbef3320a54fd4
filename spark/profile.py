"""Where the audit's time goes: per pass (key family) and per Spark stage.

Theory of operation
-------------------
``profile_audit(spark, paths, out)`` runs the audit's phases one at a time
in the session it is given, with the SQL plan ``run_audit`` would choose for
that input (small-input or scale plan, ``job.SMALL_INPUT_CONF``; the
reference plan, ``spark/reference.py``, has no passes to profile): the facts
pass (a collect), then every pass of ``rules.PASSES`` on its own, executed
with Spark's ``noop`` sink (the full query runs, nothing is written). For
each phase it records the wall time and, from Spark's status store (which
exists with the UI off), the stages that phase ran: their number, tasks,
executor run and CPU time, bytes read from files, shuffle bytes written and
read, shuffle write time and spill. Passes run alone cost a little more
than inside the audit's single union query (each re-reads its input), so
the profile shows where the time goes, not the audit's total; ``bench
audit --profile`` prints it next to the real audit's wall time.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import attrs
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from rmqspec.spark import inputs as inputs_mod
from rmqspec.spark import job
from rmqspec.spark.config import AuditConfig
from rmqspec.spark.rules import PASSES, pass_findings

__all__ = ["PhaseProfile", "profile_audit", "render_profile"]


@attrs.frozen
class PhaseProfile:
    """One phase: wall seconds and the totals of the Spark stages it ran."""

    name: str
    wall_s: float
    stages: int = 0
    tasks: int = 0
    run_s: float = 0.0
    cpu_s: float = 0.0
    input_mb: float = 0.0
    shuffle_write_mb: float = 0.0
    shuffle_read_mb: float = 0.0
    shuffle_write_s: float = 0.0
    spill_mb: float = 0.0


def _store_stages(spark: SparkSession) -> list[Any]:
    sc = spark.sparkContext
    gateway = sc._gateway
    empty = gateway.jvm.java.util.ArrayList()
    stages = sc._jsc.sc().statusStore().stageList(empty, False, False, gateway.new_array(gateway.jvm.double, 0), empty)
    return [stages.apply(i) for i in range(stages.size())]


def _completed(spark: SparkSession) -> set[int]:
    return {int(s.stageId()) for s in _store_stages(spark)}


def _measure(spark: SparkSession, name: str, action: Any) -> PhaseProfile:
    before = _completed(spark)
    start = time.monotonic()
    action()
    wall = time.monotonic() - start
    mb = 1024 * 1024
    totals = dict.fromkeys(("stages", "tasks", "run", "cpu", "input", "sw", "sr", "swt", "spill"), 0.0)
    for s in _store_stages(spark):
        if int(s.stageId()) in before:
            continue
        totals["stages"] += 1
        totals["tasks"] += s.numTasks()
        totals["run"] += s.executorRunTime() / 1000
        totals["cpu"] += s.executorCpuTime() / 1e9
        totals["input"] += s.inputBytes() / mb
        totals["sw"] += s.shuffleWriteBytes() / mb
        totals["sr"] += (s.shuffleRemoteBytesRead() + s.shuffleLocalBytesRead()) / mb
        totals["swt"] += s.shuffleWriteTime() / 1e9
        totals["spill"] += (s.memoryBytesSpilled() + s.diskBytesSpilled()) / mb
    return PhaseProfile(
        name,
        wall,
        int(totals["stages"]),
        int(totals["tasks"]),
        totals["run"],
        totals["cpu"],
        totals["input"],
        totals["sw"],
        totals["sr"],
        totals["swt"],
        totals["spill"],
    )


def _noop(df: DataFrame) -> None:
    df.write.format("noop").mode("overwrite").save()


def profile_audit(
    spark: SparkSession,
    paths: Sequence[str],
    out: str,
    config: AuditConfig | None = None,
    *,
    small: bool | None = None,
) -> list[PhaseProfile]:
    """The facts pass and every rules pass, each run and measured alone (see the module doc)."""
    config = config or AuditConfig()
    prepared = inputs_mod.prepare(paths, out.removeprefix("file:"))
    rows, _has_trace_id = inputs_mod.load(spark, prepared, positions=False)  # as the SQL plans read it
    small = job._is_small(prepared.parquet) if small is None else small
    tuning = dict(job.SMALL_INPUT_CONF) if small else {}
    tuning.setdefault("spark.sql.shuffle.partitions", str(job._shuffle_partitions(spark, prepared.parquet)))
    saved = {key: spark.conf.get(key, None) for key in tuning}
    for key, value in tuning.items():
        spark.conf.set(key, value)
    if small:
        rows = rows.persist(StorageLevel.MEMORY_ONLY)
    out_profiles: list[PhaseProfile] = []
    try:
        result: list[Any] = []
        out_profiles.append(_measure(spark, "facts", lambda: result.append(job._facts(rows))))
        facts, _unknown = result[0]
        good = [r for r in facts if r["good"]]
        base = rows.filter(F.col("problem").isNull()).select(
            "trace", *inputs_mod.AUDIT_COLUMNS, *inputs_mod.DERIVED_COLUMNS
        )
        base = job._with_trace_facts(spark, base, facts)
        built = time.monotonic()
        parts = pass_findings(
            base,
            config.params,
            has_drain=any(r["drain"] is not None for r in good),
            subscriptions=config.subscriptions,
            at_risk=job._at_risk(spark, facts),
            has_crash=any(r["crash_seqs"] for r in good),
            has_power=any(r["power"] for r in good),
            constants=job._constants(facts),
            consumers=job._consumers(facts, config.subscriptions),
            drain_ts=job._drain_ts(facts),
            broadcasting=job._broadcasting(facts),
            has_expire=any(r["anchors"]["expire"][0] is not None for r in good),
        )
        out_profiles.append(PhaseProfile("plan (python)", time.monotonic() - built))
        for name, _fn in PASSES:
            out_profiles.append(_measure(spark, f"pass {name}", lambda df=parts[name]: _noop(df)))
    finally:
        if small:
            rows.unpersist()
        for key, value in saved.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)
    return out_profiles


def render_profile(profiles: Sequence[PhaseProfile]) -> str:
    """A table: one line per phase."""
    head = (
        f"{'phase':<16}{'wall s':>8}{'stages':>7}{'tasks':>7}{'run s':>8}{'cpu s':>8}"
        f"{'in MB':>8}{'shw MB':>8}{'shr MB':>8}{'shw s':>7}{'spill MB':>9}"
    )
    lines = [head]
    for p in profiles:
        lines.append(
            f"{p.name:<16}{p.wall_s:>8.2f}{p.stages:>7}{p.tasks:>7}{p.run_s:>8.2f}{p.cpu_s:>8.2f}"
            f"{p.input_mb:>8.1f}{p.shuffle_write_mb:>8.1f}{p.shuffle_read_mb:>8.1f}{p.shuffle_write_s:>7.2f}"
            f"{p.spill_mb:>9.1f}"
        )
    return "\n".join(lines)
