"""The test suite's own distribution: ``make test`` runs the tests under pytest-xdist with ``--dist
loadgroup``, and ``tests/conftest.py`` puts the Spark tests in two ``xdist_group``s (the audit batch's,
built once, and the rest: one JVM each). A pytest / xdist pair that drops the groups runs nothing wrong,
only slower — every worker then starts Spark and builds the batch — so nothing else would notice (pytest
9.2 with xdist 3.8 did: 15 → 20 min). Here two tests of one group must run on one worker and carry the
group in their node ids."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.xdist_group("loadgroup_probe")  # grouped itself: it starts a pytest of its own
def test_loadgroup_keeps_a_group_on_one_worker(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(
        "import pytest\n\n"
        "@pytest.hookimpl(tryfirst=True)\n"  # as tests/conftest.py: marks added before xdist reads them
        "def pytest_collection_modifyitems(config, items):\n"
        "    for item in items:\n"
        "        if 'grouped' in item.name:\n"
        "            item.add_marker(pytest.mark.xdist_group('g'))\n")
    (tmp_path / "test_probe.py").write_text(
        "".join(f"def test_grouped_{i}():\n    pass\n\ndef test_free_{i}():\n    pass\n\n" for i in range(4)))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v", "-p", "no:randomly",
                           "-p", "no:cacheprovider", str(tmp_path)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    grouped = re.findall(r"\[(gw\d)\].*PASSED .*::(test_grouped_\d)(@g)?", proc.stdout)
    assert len(grouped) == 4, proc.stdout
    assert all(suffix == "@g" for _, _, suffix in grouped), "the group is not in the node ids: " + proc.stdout
    assert len({worker for worker, _, _ in grouped}) == 1, "one group ran on several workers: " + proc.stdout


@pytest.mark.no_cover
def test_a_no_cover_test_runs_untraced() -> None:
    """``tests/conftest.py``'s hook: under ``make test`` (coverage in pytest-xdist workers) a test marked
    ``no_cover`` runs with no tracer at all; without coverage there is none to begin with."""
    import sys

    assert sys.gettrace() is None, sys.gettrace()
