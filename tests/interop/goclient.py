"""The Go client's scenario program (``interop/goclient``) as the interop tests build and run it."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.interop.realrmq import LOCK_MS, scenario_rows

REPO = Path(__file__).resolve().parents[2]
GO_MODULE = REPO / "interop" / "goclient"
GO_BINARY = REPO / "build" / "goclient" / "rmqspec-go-scenarios"
SCENARIOS = ("setup", "a_retry_dlq", "b_delay", "c_transaction", "d_lock", "done")


def _go() -> str:
    found = shutil.which("go") or ("/usr/local/go/bin/go" if Path("/usr/local/go/bin/go").is_file() else None)
    if found is None:
        pytest.fail("make interop needs Go (scripts/ensure-interop.sh installs golang-go)")
    return found


def build() -> Path:
    """The Go scenario program, built from interop/goclient (the module cache is Go's default). Built
    beside it and renamed into place, one build at a time: a pytest-xdist worker may be running the
    binary another one replaces."""
    GO_BINARY.parent.mkdir(parents=True, exist_ok=True)
    staged = GO_BINARY.with_name(f"{GO_BINARY.name}.{os.getpid()}")
    with open(GO_BINARY.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = subprocess.run([_go(), "build", "-o", str(staged), "."], cwd=GO_MODULE, capture_output=True,
                              text=True, timeout=600, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        os.replace(staged, GO_BINARY)
    return GO_BINARY


def program(binary: Path, namesrv: str, log: Path) -> list[str]:
    """The program's command line, its logs in ``log`` (the lock lifetime is reported in (d))."""
    return ["env", f"RMQSPEC_LOCK_MAX_LIVE_TIME={LOCK_MS}", f"RMQSPEC_GO_LOG={log}", "RMQSPEC_GO_LOG_LEVEL=info",
            str(binary), namesrv]


def checked(code: int, out: str, err: str) -> dict[str, dict[str, Any]]:
    rows = scenario_rows(out)
    assert code == 0 and "error" not in json.dumps(rows), out[-4000:] + err[-4000:]
    assert tuple(rows) == SCENARIOS, list(rows)
    return rows
