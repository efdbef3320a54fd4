"""A quiet SparkSession for the audit.

``audit_session(master)`` starts (or reuses) a session with the UI off, the
console progress bar off (and, for a small local input, a driver JVM tuned
for a job of seconds: ``SMALL_INPUT_JVM_OPTIONS``), ANSI casts off (a bad value becomes null and is
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
}
RUNTIME: dict[str, str] = {"spark.sql.ansi.enabled": "false"}
# The driver JVM of a local audit of a small input (``small_input``): the C1 JIT alone
# (C2 never pays off in a job of seconds, and its compiler threads compete with the
# job on a small machine) and the serial GC. On 5 k events this took the session
# start from ~6 s to ~4 s, the first read and the first job from ~3.5 s to ~2 s each.
SMALL_INPUT_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


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
    """The active session if there is one, else a new one on ``master``; ``small_input``
    starts a local driver JVM with ``SMALL_INPUT_JVM_OPTIONS`` (unless ``conf`` sets
    ``spark.driver.extraJavaOptions``)."""
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
        local = {"spark.sql.shuffle.partitions": "8"} if master and master.startswith("local") else {}
        if local and small_input:
            local["spark.driver.extraJavaOptions"] = SMALL_INPUT_JVM_OPTIONS
        for key, value in {**DEFAULTS, **local, **(conf or {})}.items():
            builder = builder.config(key, value)
        if quiet:
            with _stderr_silenced():
                active = builder.getOrCreate()
        else:
            active = builder.getOrCreate()
    prepare(active)
    return active


def prepare(spark: SparkSession) -> None:
    """Runtime settings the audit relies on, for any session (also spark-submit's)."""
    spark.sparkContext.setLogLevel("ERROR")
    for key, value in RUNTIME.items():
        spark.conf.set(key, value)
