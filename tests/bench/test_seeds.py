"""bench seeds: the honest brokers across seeds, one conform process per run."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import bench_seeds


def test_a_small_run_passes_and_reports_every_seed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "seeds.txt"
    status = bench_seeds.main(["--seeds", "2", "--examples", "2", "--steps", "6", "--brokers", "model,impl",
                               "--jobs", "2", "--out", str(out)])
    text = out.read_text()
    assert status == 0
    assert text == capsys.readouterr().out
    assert "model   rocketmq-4.9       2/2" in text and "impl    rocketmq-4.9       2/2" in text
    assert text.count("PASS: 2 examples") == 4
    assert "seed   1" in text and "seed   2" in text


def test_bad_arguments_are_usage_errors() -> None:
    with pytest.raises(SystemExit) as info:
        bench_seeds.main(["--brokers", "nope"])
    assert info.value.code == 2


def test_an_unknown_profile_is_a_usage_error() -> None:
    with pytest.raises(SystemExit) as info:
        bench_seeds.main(["--profiles", "rocketmq-9.9"])
    assert info.value.code == 2
