"""A quiet SparkSession for the audit.

``audit_session(master)`` starts (or reuses) a session with the UI off, the
console progress bar off, ANSI casts off (a bad value becomes null and is
reported, never an exception) and the log level at ERROR. With ``quiet``
the JVM's own stderr (log4j banner, "incubator modules" and hostname
warnings) is sent to /dev/null while the gateway starts; errors still reach
Python as exceptions. On a cluster (``spark-submit``) the session already
exists and only the runtime settings apply.
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
) -> SparkSession:
    """The active session if there is one, else a new one on ``master``."""
    active = SparkSession.getActiveSession()
    if active is None:
        if master and master.startswith("local"):
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
            # Python workers (the filter rules, spark/rules_filter.py) import rmqspec: this interpreter
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = SparkSession.builder.appName(app_name)
        if master:
            builder = builder.master(master)
        local = {"spark.sql.shuffle.partitions": "8"} if master and master.startswith("local") else {}
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
