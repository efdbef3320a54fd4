"""``rmqspec trace`` through ``rmqspec.cli.main.main``: exit codes 0 / 1 / 2, no tracebacks."""

from __future__ import annotations

import json

from test_msgtrace import bodies

from rmqspec.cli.main import main
from rmqspec.traces.io import read_events


def test_gen_validate_convert(tmp_path, capsys):
    out = tmp_path / "t"
    assert main(["trace", "gen", "--events", "20000", "--out", str(out), "--seed", "3",
                 "--inject", "LOST,DELAY_EARLY", "--crashes", "1", "--part-rows", "8000"]) == 0
    truth = json.loads((out / "_truth.json").read_text())
    assert {t["code"] for t in truth} == {"LOST", "DELAY_EARLY"}
    assert len(list(out.glob("part-*.parquet"))) >= 3
    captured = capsys.readouterr()
    assert "events/s" in captured.out and "trace gen:" in captured.err
    assert main(["trace", "validate", str(out)]) == 0
    assert main(["trace", "convert", str(out), str(tmp_path / "t.jsonl")]) == 0
    assert main(["trace", "validate", str(tmp_path / "t.jsonl")]) == 0
    assert main(["trace", "gen", "--events", "3000", "--out", str(tmp_path / "one.parquet"),
                 "--quiet"]) == 0
    assert read_events(tmp_path / "one.parquet")[0][-1].event == "drain"


def test_validate_reports_rejected_rows(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"seq":0,"ts":1,"event":"send"}\n{"seq":1,"ts":1,"event":"nope"}\n{oops\n')
    assert main(["trace", "validate", str(bad)]) == 1
    err = capsys.readouterr().err
    assert f"{bad}:2 (seq 1): unknown event 'nope'" in err and f"{bad}:3 (seq ?): bad JSON" in err
    assert main(["trace", "convert", str(bad), str(tmp_path / "b.parquet")]) == 1


def test_unreadable_inputs_and_usage_errors_exit_2(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main(["trace", "validate", str(tmp_path / "missing.jsonl")]) == 2
    assert main(["trace", "validate", str(tmp_path / "empty")]) == 2
    assert main(["trace", "convert", str(tmp_path / "empty"), str(tmp_path / "x.jsonl")]) == 2
    assert main(["trace", "gen", "--out", str(tmp_path / "g"), "--inject", "NOPE"]) == 2
    assert main(["trace", "import", "--from", "rocketmq-msgtrace", str(tmp_path / "no.txt"),
                 "--out", str(tmp_path / "o.jsonl")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "no trace files" in err and "NOPE" in err


def test_import_msgtrace(tmp_path, capsys):
    src = tmp_path / "bodies.txt"
    src.write_text("\n".join(bodies()) + "\n")
    assert main(["trace", "import", "--from", "rocketmq-msgtrace", str(src),
                 "--out", str(tmp_path / "m.parquet")]) == 0
    events, rejected = read_events(tmp_path / "m.parquet")
    assert rejected == [] and [e.event for e in events][:3] == ["send", "send", "deliver"]
    assert "1 skipped" in capsys.readouterr().out
    src.write_text("\n".join([*bodies(), "SubBefore" + "\x01" + "x" + "\x02"]) + "\n")
    assert main(["trace", "import", "--from", "rocketmq-msgtrace", str(src),
                 "--out", str(tmp_path / "m.jsonl")]) == 1
