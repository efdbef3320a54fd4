"""``spark-submit --py-files rmqspec.zip spark/job.py``, as on a cluster: the Python workers see
rmqspec only through the zip (the editable install is hidden from them), the job file runs as a
script, and the submit's ``--master`` stands."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from rmqspec.spark.submit import build_zip, command
from rmqspec.traces.generator import GenConfig, generate_rows
from rmqspec.traces.io import rows_to_table
from tests.spark.bare_python import bare_python

pytestmark = pytest.mark.spark


def test_spark_submit_runs_the_job_from_the_zip(tmp_path):
    zip_path = build_zip(tmp_path / "dist" / "rmqspec.zip")
    worker = bare_python(tmp_path)
    rows, truth = generate_rows(GenConfig(events=600, seed=3, inject=("LOST",)))
    pq.write_table(rows_to_table(rows), tmp_path / "trace.parquet")
    out = tmp_path / "out"
    argv = command(zip_path, "local[2]", [str(tmp_path / "trace.parquet"), "--out", str(out), "--plan", "reference",
                                          "--json"])  # fmt: skip
    argv[0] = str(Path(sys.executable).parent / "spark-submit")
    env = {**os.environ, "PYSPARK_PYTHON": str(worker), "PYSPARK_DRIVER_PYTHON": sys.executable,
           "SPARK_LOCAL_IP": "127.0.0.1"}  # fmt: skip
    env.pop("PYSPARK_GATEWAY_PORT", None)
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 1, done.stderr[-3000:]  # the injected LOST
    summary = json.loads((out / "summary.json").read_text())
    assert summary["master"] == "local[2]"  # the submit's --master, not job.py's default local[*]
    assert summary["events_read"] == len(rows) and summary["violations"]["LOST"] == len(truth) >= 1
