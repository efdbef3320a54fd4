"""The PySpark daemon of a local audit (``spark.python.daemon.module``, set by ``session.local_settings``).

PySpark's daemon forks the Python workers; each worker then imports what its
tasks need (the worker module, numpy, pyarrow, pandas, the judges: 0.6-1 s of
CPU per worker), and PySpark itself comes from ``pyspark.zip`` on the workers'
path, compiled from source in every session (zipimport keeps no bytecode:
~0.7 s before the first Python task can start). This daemon takes PySpark
from the installed package instead (its bytecode is cached) when the zip is
that same package's, imports those modules once, then runs PySpark's own
daemon: every worker it forks starts with them. A module that fails to
import here is left to the workers, as before (they report the error).

PySpark's worker runs ``gc.collect()`` after every task, and a full collection
walks every object the process tracks: with these modules imported, ~88 k
objects, 35-40 ms of CPU per task (on 720 trivial ``mapInArrow`` tasks, 27-30 s
of the workers' CPU against 1.1-1.2 s; ``bench/results/audit-profile.txt``).
The daemon therefore moves what it imported into the permanent generation
(``gc.freeze``) before it forks: the workers' collections walk only their own
objects, and no longer touch (and copy on write) the pages they share with it.
"""

from __future__ import annotations

import gc
import importlib
import importlib.machinery
import os
import sys


def _without_bundled_zips(path: list[str]) -> list[str]:
    """``path`` without the ``pyspark.zip`` / ``py4j-*.zip`` of the installed PySpark package (a
    Spark installation elsewhere, through ``SPARK_HOME``, keeps its own)."""
    plain = [p for p in path if not p.endswith(".zip")]
    spec = importlib.machinery.PathFinder.find_spec("pyspark", plain)
    if spec is None or not spec.origin:
        return path
    home = os.path.join(os.path.dirname(spec.origin), "python", "lib") + os.sep
    return [p for p in path if not (p.endswith(".zip") and os.path.abspath(p).startswith(home))]


# What the audit's Python tasks import (``mapInArrow`` judges, the reference checker, the carry).
PRELOADED = (
    "numpy",
    "pyarrow",
    "pandas",
    "pyspark.worker",
    "pyspark.sql.pandas.serializers",
    "rmqspec.spark.rules_queue",
    "rmqspec.spark.rules_message",
    "rmqspec.spark.rules_txn",
    "rmqspec.spark.rules_filter",
    "rmqspec.spark.rules_table",
    "rmqspec.spark.reference",
    "rmqspec.spark.carry",
)


def preload() -> None:
    """Drop the installed PySpark's zips from ``sys.path``, then import ``PRELOADED``."""
    sys.path[:] = _without_bundled_zips(sys.path)
    for name in PRELOADED:
        try:
            importlib.import_module(name)
        except Exception:  # a broken module must not stop the daemon: the worker that needs it reports it
            continue


if __name__ == "__main__":
    preload()
    from pyspark import daemon

    gc.collect()
    gc.freeze()  # the workers' per-task collections skip what every worker shares (module docstring)
    daemon.manager()
