"""``rmqspec store crashtest`` through ``cli.main.main``."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

from rmqspec.cli.main import main

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "impl"))
VARIANTS = importlib.import_module("crash_variants").VARIANTS  # tests/impl/crash_variants.py


def test_clean_run_text_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["store", "crashtest", "--workload", "async-sends", "--states", "40", "--seed", "3"]) == 0
    captured = capsys.readouterr()
    assert "40 states" in captured.out and "no failures" in captured.out
    assert "crashtest: [" in captured.err  # progress on stderr
    assert main(["store", "crashtest", "--ops", "12", "--states", "30", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is True and doc["states"] == 30 and doc["workloads"][0]["name"] == "random-12-0"
    assert doc["states_per_second"] > 0 and doc["minimal"] is None


def test_failures_exit_1_with_the_minimal_state(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    VARIANTS["sync-acknowledged-before-flush"].install(monkeypatch)
    assert main(["store", "crashtest", "--workload", "sync-sends", "--states", "120"]) == 1
    out = capsys.readouterr().out
    assert "FAIL PromisedRecordsSurvive" in out
    assert "minimal failing state sync-sends/" in out and "power cut after effect #" in out
    assert "-> PromisedRecordsSurvive:" in out


def test_materialize_list_and_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["store", "crashtest", "--list"]) == 0
    assert "sync-sends" in capsys.readouterr().out
    target = tmp_path / "state"
    assert main(["store", "crashtest", "--materialize", "offsets/-1/0/0/-", str(target)]) == 0
    assert "power cut after effect #-1" in capsys.readouterr().out
    assert (target / "commitlog").is_dir()
    for argv, message in (
        (["--workload", "nope"], "unknown workload"),
        (["--states", "0"], "--states must be positive"),
        (["--ops", "-1"], "--ops must be positive"),
        (["--materialize", "offsets/-1/0/0/-", str(target)], "not an empty directory"),
        (["--materialize", "offsets/zz/0/0/-", str(tmp_path / "x")], "state id"),
        (["--workdir", str(target)], "not empty"),
    ):
        assert main(["store", "crashtest", *argv]) == 2
        assert message in capsys.readouterr().err


def test_workdir_is_used_and_left_for_inspection(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    work = tmp_path / "work"
    assert main(["store", "crashtest", "--workload", "offsets", "--states", "5", "--workdir", str(work)]) == 0
    assert (work / "state" / "commitlog").is_dir()  # the last state checked
    assert "5 states" in capsys.readouterr().out
