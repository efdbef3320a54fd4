"""``rmqspec audit`` on malformed input: rows are reported by position and skipped; an
unreadable input is one line on stderr and exit 2 — never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rmqspec.cli.main import main
from rmqspec.traces.io import rows_to_table
from rmqspec.traces.notation import parse

pytestmark = pytest.mark.spark

GOOD = """
0 send t=1000 topic=T q=0 key=K1
1 store t=1000 topic=T q=0 off=0 key=K1
2 deliver t=1010 g=G topic=T q=0 off=0 key=K1 c=C1 rt=0
3 consume t=1020 g=G topic=T q=0 off=0 key=K1 c=C1 st=SUCCESS
"""


def test_bad_rows_are_reported_and_skipped(spark, tmp_path, capsys):
    jsonl = tmp_path / "a.jsonl"
    lines = [json.dumps({k: v for k, v in r.items() if v is not None}) for r in parse(GOOD)]
    lines[1:1] = [
        "{not json",
        json.dumps({"seq": 10, "ts": "soon", "event": "send"}),
        json.dumps({"seq": 11, "ts": 5, "event": "teleport"}),
        json.dumps({"ts": 5, "event": "send"}),
    ]
    jsonl.write_text("\n".join(lines) + "\n")
    tail = parse("4 drain t=9000\n5 deliver t=9001 g=G topic=T q=0 off=1 key=GHOST c=C1 rt=0\n")
    table = rows_to_table(tail)
    table = table.set_column(2, "event", pa.array(["drain", "warp"]))
    pq.write_table(table, tmp_path / "b.parquet")
    out = tmp_path / "out"
    code = main(["audit", str(jsonl), str(tmp_path / "b.parquet"), "--out", str(out), "--json",
                 "--master", "local[2]", "--quiet"])  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err
    summary = json.loads(captured.out)
    assert summary["events_read"] == 10 and summary["rows_rejected"] == 5
    assert sum(summary["violations"].values()) == 0
    assert json.loads((out / "summary.json").read_text())["rows_rejected"] == 5
    rejected = {r["position"]: r for r in pq.read_table(out / "rejected").to_pylist()}
    assert set(rejected) == {f"{jsonl}:{n}" for n in (2, 3, 4, 5)} | {f"{tmp_path / 'b.parquet'}#1"}
    assert rejected[f"{jsonl}:3"]["seq"] == 10 and "ts" in rejected[f"{jsonl}:3"]["reason"]
    assert "teleport" in rejected[f"{jsonl}:4"]["reason"]
    assert rejected[f"{tmp_path / 'b.parquet'}#1"]["seq"] == 5
    assert "warp" in rejected[f"{tmp_path / 'b.parquet'}#1"]["reason"]
    assert "Traceback" not in captured.err


@pytest.mark.parametrize(
    "setup, needle",
    [
        ("missing", "no such file or directory"),
        ("empty_dir", "no trace files"),
        ("corrupt", "Parquet"),
        ("bad_config", "unknown key"),
    ],
)
def test_unreadable_input_exits_2_with_one_line(spark, tmp_path, capsys, setup, needle):
    target = tmp_path / "trace.parquet"
    args = []
    if setup == "missing":
        pass
    elif setup == "empty_dir":
        target = tmp_path / "nothing"
        target.mkdir()
        (target / "notes.txt").write_text("hello")
    elif setup == "corrupt":
        target.write_bytes(b"PAR1 this is not parquet at all")
    else:
        pq.write_table(rows_to_table(parse(GOOD)), target)
        (tmp_path / "c.json").write_text('{"retryMax": 3}')
        args = ["--config", str(tmp_path / "c.json")]
    code = main(["audit", str(target), "--out", str(tmp_path / "out"), "--quiet", *args])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("rmqspec audit: error:") and needle in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_subprocess_missing_file_is_one_line(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "rmqspec.cli",
            "audit",
            str(tmp_path / "nope"),
            "--out",
            str(tmp_path / "o"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"rmqspec audit: error: {tmp_path / 'nope'}: no such file or directory"]


def test_imported_rocketmq_message_trace_audits_and_lists_what_it_cannot_judge(spark, tmp_path, capsys):
    """SPEC §8: RocketMQ's own message-trace records (examples/msgtrace.jsonl, built from the
    4.9 format facts) import into our schema; the audit judges what they support."""
    from pathlib import Path

    example = Path(__file__).resolve().parents[2] / "examples" / "msgtrace.jsonl"
    trace = tmp_path / "imported.jsonl"
    assert main(["trace", "import", "--from", "rocketmq-msgtrace", str(example), "--out", str(trace)]) == 0
    capsys.readouterr()
    code = main(["audit", str(trace), "--out", str(tmp_path / "out"), "--json", "--master", "local[2]",
                 "--quiet"])  # fmt: skip
    summary = json.loads(capsys.readouterr().out)
    assert code == 0 and summary["events_read"] == 10 and summary["rows_rejected"] == 0
    assert sum(summary["violations"].values()) == 0
    assert {"LOST", "TXN_UNRESOLVED", "OFFSET_OVERRUN"} <= set(summary["not_judged"])
    assert "queue_id" in summary["not_judged"]["OFFSET_OVERRUN"]
