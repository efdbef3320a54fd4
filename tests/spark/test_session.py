"""The audit's SparkSession: the driver JVM options chosen for a local master reach the JVM; the Arrow
batches handed to Python are bounded by rows; local Python workers come from the preloading daemon."""

from __future__ import annotations

import pytest

from rmqspec.spark.session import LOCAL_JVM_OPTIONS, SMALL_INPUT_JVM_OPTIONS, local_settings

pytestmark = pytest.mark.spark


def test_a_local_master_gets_the_jvm_options_of_its_input_size():
    for master in ("local[2]", "local[*]", "local"):
        small, large = local_settings(master, True), local_settings(master, False)
        assert small["spark.driver.extraJavaOptions"] == SMALL_INPUT_JVM_OPTIONS
        assert large["spark.driver.extraJavaOptions"] == LOCAL_JVM_OPTIONS
        assert small["spark.sql.shuffle.partitions"] == large["spark.sql.shuffle.partitions"] == "8"
    # a cluster's driver, or spark-submit's (master None), keeps its own JVM
    assert local_settings("spark://127.0.0.1:7077", False) == {}
    assert local_settings("yarn", True) == {}
    assert local_settings(None, False) == {}


def _flags(options: str) -> dict[str, str]:
    """``-XX:Name=value`` tokens as name -> value (``-XX:+Name`` as name -> "true")."""
    out = {}
    for token in options.split():
        name, _, value = token.removeprefix("-XX:").partition("=")
        if name.startswith("+"):
            name, value = name[1:], "true"
        out[name] = value
    return out


def test_the_tier4_thresholds_raise_the_jvm_defaults():
    defaults = {"Tier4InvocationThreshold": 5000, "Tier4MinInvocationThreshold": 600,
                "Tier4CompileThreshold": 15000, "Tier4BackEdgeThreshold": 40000}  # fmt: skip
    flags = _flags(LOCAL_JVM_OPTIONS)
    assert flags.keys() == defaults.keys()
    assert all(int(flags[name]) > default for name, default in defaults.items())


def test_the_session_jvm_runs_with_the_options_its_conf_names(spark):
    """The test session is a local one from ``audit_session``: its driver JVM runs with the options
    of ``local_settings``, read back from the JVM itself. Spark starts the JVM with
    ``-XX:+IgnoreUnrecognizedVMOptions``, so a misspelt flag would be dropped silently: each one's
    value is asked of HotSpot."""
    conf = spark.sparkContext.getConf().get("spark.driver.extraJavaOptions")
    chosen = next(o for o in (LOCAL_JVM_OPTIONS, SMALL_INPUT_JVM_OPTIONS) if conf.endswith(o))
    jvm = spark.sparkContext._jvm
    management = jvm.java.lang.management.ManagementFactory
    assert set(chosen.split()) <= set(management.getRuntimeMXBean().getInputArguments())
    hotspot = management.getPlatformMXBean(jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean"))
    for name, value in _flags(chosen).items():
        assert hotspot.getVMOption(name).getValue() == value, name


def test_arrow_batches_to_python_are_bounded_by_rows_not_measured_bytes(spark):
    """The session turns off the byte limit of the Arrow batches handed to ``mapInArrow`` (which
    costs a measurement of the batch after every row) and keeps them bounded by
    ``maxRecordsPerBatch``: every batch a judge gets holds at most that many rows, and none is lost."""
    import pyarrow as pa

    assert spark.conf.get("spark.sql.execution.arrow.maxBytesPerBatch") == str(2**31 - 1)
    limit = int(spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch"))

    def sizes(batches):
        for batch in batches:
            yield pa.RecordBatch.from_pydict({"n": [batch.num_rows]})

    rows = spark.range(0, 3 * limit + 7, numPartitions=1).selectExpr("id", "repeat('x', 200) AS pad")
    got = [r["n"] for r in rows.mapInArrow(sizes, "n long").collect()]
    assert sum(got) == 3 * limit + 7
    assert max(got) == limit


def test_local_python_workers_come_from_the_preloading_daemon(spark):
    """On a local master the Python workers are forked by ``spark/daemon.py``: they run the installed
    PySpark (not ``pyspark.zip``, compiled from source in every session) and start with the audit's
    modules imported, frozen out of the cyclic GC (PySpark's worker collects after every task)."""

    def probe(_rows):
        import gc
        import os
        import sys
        from pathlib import Path

        import pyspark

        parent = Path(f"/proc/{os.getppid()}/cmdline").read_text().replace("\0", " ")
        preloaded = all(m in sys.modules for m in ("pyarrow", "rmqspec.spark.rules_message"))
        yield (parent, pyspark.__file__, preloaded, gc.get_freeze_count())

    got = spark.sparkContext.parallelize([0], 1).mapPartitions(probe).collect()[0]
    daemon, pyspark_file, preloaded, frozen = got
    assert "rmqspec.spark.daemon" in daemon
    assert ".zip" not in pyspark_file
    assert preloaded
    assert frozen > 10_000  # numpy, pyarrow, pandas and PySpark's objects: ~88 k
