"""A quiet SparkSession for the audit.

``audit_session(master)`` starts (or reuses) a session with the UI off, the
console progress bar off (and, on a local master, a driver JVM tuned for
the job: ``SMALL_INPUT_JVM_OPTIONS`` for a job of seconds, ``LOCAL_JVM_OPTIONS``
otherwise, and Python workers forked by ``spark/daemon.py``), no byte limit on
the Arrow batches handed to Python, ANSI casts off (a bad value becomes null and is
reported, never an exception) and the log level at ERROR. With ``quiet``
the JVM's own stderr (log4j banner, "incubator modules" and hostname
warnings) is sent to /dev/null while the gateway starts; errors still reach
Python as exceptions. Under ``spark-submit`` the JVM already runs
(``PYSPARK_GATEWAY_PORT``): ``master`` is ignored (the submit's ``--master``
stands) and only the runtime settings matter.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Mapping

from pyspark.sql import SparkSession

DEFAULTS: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.ansi.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
    # The audit raises spark.sql.shuffle.partitions to the input size (job.py);
    # AQE coalesces the partitions of the small families.
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.adaptive.coalescePartitions.enabled": "true",
    # No byte limit on the Arrow batches handed to the Python judges (``mapInArrow``): with a
    # limit (Spark 4's default: 256 MB) the JVM measures the batch being built after every row
    # (``ArrowWriter.sizeInBytes``: every vector's value count set again, per row), 16-18 % of
    # the executors' CPU in a 10 M-event audit (a JFR profile). Batches stay bounded by
    # ``maxRecordsPerBatch`` (10,000 of the judges' narrow rows). Warm 10 M audit: 30.4-31.2 s
    # -> 22.1-23.5 s, findings identical (bench/results/audit-profile.txt).
    "spark.sql.execution.arrow.maxBytesPerBatch": str(2**31 - 1),
}
RUNTIME: dict[str, str] = {"spark.sql.ansi.enabled": "false"}
# The driver JVM of a local audit of a small input (``small_input``): the C1 JIT alone
# (C2 never pays off in a job of seconds, and its compiler threads compete with the
# job on a small machine) and the serial GC. On 5 k events this took the session
# start from ~6 s to ~4 s, the first read and the first job from ~3.5 s to ~2 s each.
SMALL_INPUT_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
# The driver JVM of any other local audit: C2 compiles only what is hot. A fresh JVM running a
# 10 M-event audit had C2 compile ~2,900 methods (27 s of CPU; all tiers 34 s, in a 56 s run),
# most of them lukewarm (task serialization, closure cleaning, Janino, class loading), on the
# same two cores as the job. Tier-4 thresholds 6-12x the defaults (5000 / 600 / 15000 / 40000)
# leave those in C1 code, while the rows' loops, run millions of times, still reach C2; the
# warm throughput is unchanged (spark/README.md "Local JVM", bench/results/audit-profile.txt).
LOCAL_JVM_OPTIONS = (
    "-XX:Tier4InvocationThreshold=60000 -XX:Tier4MinInvocationThreshold=6000 "
    "-XX:Tier4CompileThreshold=90000 -XX:Tier4BackEdgeThreshold=400000"
)


@contextlib.contextmanager
def _stderr_silenced() -> Iterator[None]:
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def audit_session(
    master: str | None = "local[*]",
    conf: Mapping[str, str] | None = None,
    *,
    app_name: str = "rmqspec-audit",
    quiet: bool = True,
    small_input: bool = False,
) -> SparkSession:
    """The active session if there is one, else a new one on ``master``; a local driver JVM
    starts with ``SMALL_INPUT_JVM_OPTIONS`` (``small_input``) or ``LOCAL_JVM_OPTIONS``
    (``local_settings``)."""
    active = SparkSession.getActiveSession()
    if active is None:
        if "PYSPARK_GATEWAY_PORT" in os.environ:  # spark-submit started the JVM: its --master stands
            master = None
        if master and master.startswith("local"):
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
            # Python workers (the filter rules, spark/rules_filter.py) import rmqspec: this interpreter
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = SparkSession.builder.appName(app_name)
        if master:
            builder = builder.master(master)
        for key, value in {**DEFAULTS, **local_settings(master, small_input), **(conf or {})}.items():
            builder = builder.config(key, value)
        if quiet:
            with _stderr_silenced():
                active = builder.getOrCreate()
        else:
            active = builder.getOrCreate()
    prepare(active)
    return active


def local_settings(master: str | None, small_input: bool) -> dict[str, str]:
    """The settings of a new session on a local ``master`` (none for any other master, or
    under spark-submit: ``master`` None): 8 shuffle partitions, the driver JVM's options
    (``SMALL_INPUT_JVM_OPTIONS`` for a small input, else ``LOCAL_JVM_OPTIONS``) and the Python
    workers' daemon (``spark/daemon.py``: the audit's modules imported once, before the workers
    are forked). The caller's ``conf`` overrides them (``--conf spark.driver.extraJavaOptions=…``)."""
    if not (master and master.startswith("local")):
        return {}
    return {
        "spark.sql.shuffle.partitions": "8",
        "spark.driver.extraJavaOptions": SMALL_INPUT_JVM_OPTIONS if small_input else LOCAL_JVM_OPTIONS,
        "spark.python.daemon.module": "rmqspec.spark.daemon",
    }


def prepare(spark: SparkSession) -> None:
    """Runtime settings the audit relies on, for any session (also spark-submit's)."""
    spark.sparkContext.setLogLevel("ERROR")
    for key, value in RUNTIME.items():
        spark.conf.set(key, value)
