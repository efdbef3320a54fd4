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

pytestmark = pytest.mark.spark

HIDE = '''"""python -m MODULE without the rmqspec installed in this environment: only --py-files remain."""
import runpy
import sys

sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()
                    and "editable" not in type(f).__module__.lower()]
sys.path[:] = [p for p in sys.path if "__editable__" not in p]
assert sys.argv[1] == "-m", sys.argv
module, sys.argv = sys.argv[2], [sys.argv[2], *sys.argv[3:]]
runpy.run_module(module, run_name="__main__", alter_sys=True)
'''


def test_spark_submit_runs_the_job_from_the_zip(tmp_path):
    zip_path = build_zip(tmp_path / "dist" / "rmqspec.zip")
    (tmp_path / "hide.py").write_text(HIDE)
    worker = tmp_path / "worker-python"
    worker.write_text(f"#!/bin/sh\nexec {sys.executable} {tmp_path / 'hide.py'} \"$@\"\n")
    worker.chmod(0o755)
    probe = subprocess.run([str(worker), "-m", "json.tool", "--help"], capture_output=True, text=True, check=True)
    assert probe.returncode == 0
    hidden = subprocess.run([str(worker), "-m", "rmqspec.traces.checker"], capture_output=True, text=True)
    assert "No module named 'rmqspec" in hidden.stderr  # the workers really depend on the zip
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
