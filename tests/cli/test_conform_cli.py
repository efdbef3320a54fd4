"""``rmqspec conform`` end to end: exit codes 0 / 1 / 2 and the example adapter."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from rmqspec.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
RMQSPEC = [sys.executable, "-m", "rmqspec.cli.main"]


def test_example_adapter_passes_from_its_directory() -> None:
    env = dict(os.environ, HYPOTHESIS_PROFILE="ci")
    proc = subprocess.run(
        [*RMQSPEC, "conform", "--broker", "adapter_example:factory", "--examples", "5", "--steps", "15"],
        cwd=ROOT / "examples", capture_output=True, text=True, env=env, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    head = proc.stdout.split(" examples")[0]
    assert head.startswith("PASS: ") and int(head.removeprefix("PASS: ")) >= 5, proc.stdout  # machines run
    assert "coverage: " in proc.stdout and "lifecycle transitions reached" in proc.stdout


def test_unknown_factory_exits_2_with_one_line(capsys) -> None:
    assert main(["conform", "--broker", "no_such_module_xyz:factory"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot import 'no_such_module_xyz'" in err[0]


def test_missing_attribute_exits_2(capsys) -> None:
    assert main(["conform", "--broker", "rmqspec.properties.codes:no_factory"]) == 2
    assert "has no attribute 'no_factory'" in capsys.readouterr().err


def test_broken_broker_exits_1_with_program(capsys, monkeypatch) -> None:
    monkeypatch.chdir(ROOT / "tests")
    code = main(["conform", "--broker", "broken_brokers:QueueOffsetSkips", "--examples", "100",
                 "--steps", "30"])
    out = capsys.readouterr().out
    assert code == 1, out
    assert out.startswith("FAIL") and "lockstep mismatch in send(" in out and "PROGRAM = [" in out


def test_builtin_dotted_name_and_trace_out(tmp_path, capsys) -> None:
    code = main(["conform", "--broker", "rmqspec.model.factory", "--examples", "3", "--steps", "10",
                 "--trace-out", str(tmp_path)])
    assert code == 0, capsys.readouterr()
    traces = sorted(tmp_path.glob("example-*.jsonl"))
    assert traces and traces[0].read_text().strip().splitlines()[-1].count('"event": "drain"') == 1
