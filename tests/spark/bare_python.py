"""A Python with the audit's packages but not rmqspec: the executors (and driver) of a cluster where only
``spark-submit --py-files rmqspec.zip`` brings rmqspec.

``bare_python(tmp)`` writes ``tmp/bare-python``, a wrapper around this interpreter (the venv's: attrs,
pyarrow, lark, numpy, pandas, pyspark) that hides the editable install of rmqspec before running
``-m MODULE`` (PySpark's workers and daemon) or a script (``spark-submit``'s driver running
``spark/job.py``). Set as ``PYSPARK_PYTHON``, every import of rmqspec must come from the zip.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HIDE = '''"""python [-u] (-m MODULE | SCRIPT) ARGS... without the rmqspec installed here: only --py-files remain."""
import runpy
import sys

sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()
                    and "editable" not in type(f).__module__.lower()]
sys.path[:] = [p for p in sys.path if "__editable__" not in p]
args = sys.argv[1:]
while args and args[0] in ("-u", "-B", "-s", "-E"):
    args.pop(0)
if args and args[0] == "-m":
    module, sys.argv = args[1], [args[1], *args[2:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
else:
    sys.argv = args
    runpy.run_path(args[0], run_name="__main__")
'''


def bare_python(tmp: Path) -> Path:
    """The wrapper (checked: it runs a module, and rmqspec is not importable in it)."""
    (tmp / "hide.py").write_text(HIDE)
    wrapper = tmp / "bare-python"
    wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} {tmp / 'hide.py'} \"$@\"\n")
    wrapper.chmod(0o755)
    probe = subprocess.run([str(wrapper), "-m", "json.tool", "--help"], capture_output=True, text=True, check=False)
    assert probe.returncode == 0, probe.stderr
    hidden = subprocess.run([str(wrapper), "-m", "rmqspec.traces.checker"], capture_output=True, text=True,
                            check=False)
    assert "No module named 'rmqspec" in hidden.stderr, hidden.stderr  # the workers really depend on the zip
    return wrapper
