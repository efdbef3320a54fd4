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
from rmqspec.model.versions import VERSIONS
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


def test_a_5x_profile_brings_op_batching_to_the_spark_rules(spark, tmp_path, capsys):
    """``--profile rocketmq-5.1`` with the config's transactionOpBatchInterval (700 ms): the SQL plan's
    transaction judge (``--plan small``, not the reference checker) gives each op-batch case exactly
    its findings — 4.9's would be more (``checker_cases_batch``)."""
    from rmqspec.traces.checker_cases_batch import OP_BATCH_CASES, OP_BATCH_CONFIG_JSON, OP_BATCH_PROFILE

    rows = [
        {**r, "trace_id": f"batch{i}", "detail": json.loads(r["detail"]) if r.get("detail") else None}
        for i, case in enumerate(OP_BATCH_CASES) for r in parse(case.text)
    ]  # fmt: skip
    pq.write_table(rows_to_table(rows), tmp_path / "batch.parquet")
    (tmp_path / "audit.json").write_text(json.dumps(OP_BATCH_CONFIG_JSON))
    out = tmp_path / "out"
    code = main(["audit", str(tmp_path / "batch.parquet"), "--out", str(out), "--profile", OP_BATCH_PROFILE,
                 "--config", str(tmp_path / "audit.json"), "--plan", "small", "--json", "--master", "local[2]",
                 "--quiet"])  # fmt: skip
    summary = json.loads(capsys.readouterr().out)
    assert code == 1 and summary["rows_rejected"] == 0
    found: dict[str, list] = {}
    for kind in ("violations", "observations"):
        for r in pq.read_table(out / kind).to_pylist():
            found.setdefault(r["trace_id"], []).append((r["code"], tuple(r["seqs"])))
    for i, case in enumerate(OP_BATCH_CASES):
        assert sorted(found.get(f"batch{i}", [])) == sorted(case.expected), case.name
        assert sorted(case.expected) != sorted(case.expected_49)


_BATCHING = sorted(name for name, v in VERSIONS.items() if v.op_batch)  # rocketmq-5.1 and later


@pytest.mark.parametrize(
    "args, config, needle",
    [
        (["--profile", "rocketmq-9"], None, "argument --profile: invalid choice: 'rocketmq-9'"),
        ([], {"transactionOpBatchInterval": 700}, "transactionOpBatchInterval applies to a profile that batches op "
                                                  f"messages ({', '.join(_BATCHING)}); rocketmq-4.9 writes them"),
        (["--profile", "rocketmq-5.0"], {"transactionOpBatchInterval": 700}, "rocketmq-5.0 writes them at the END"),
        (["--profile", _BATCHING[-1]], {"transactionOpBatchInterval": 0}, "must be a positive integer (ms), got 0"),
    ],
)
def test_a_bad_profile_or_op_batch_key_exits_2_before_spark(tmp_path, capsys, args, config, needle):
    pq.write_table(rows_to_table(parse(GOOD)), tmp_path / "t.parquet")
    if config is not None:
        (tmp_path / "c.json").write_text(json.dumps(config))
        args = [*args, "--config", str(tmp_path / "c.json")]
    argv = ["audit", str(tmp_path / "t.parquet"), "--out", str(tmp_path / "out"), "--quiet", *args]
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse refuses a choice itself: usage and one error line
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and needle in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_the_op_batch_period_follows_the_profile():
    from rmqspec.spark.config import parse_config

    assert parse_config({}, profile="rocketmq-4.9").params.op_batch_ms == 0
    assert parse_config({}, profile="rocketmq-5.0").params.op_batch_ms == 0
    assert parse_config({}, profile="rocketmq-5.1").params.op_batch_ms == 3000  # RocketMQ's default
    assert parse_config({}, profile="rocketmq-5.1", op_batch_default_ms=500).params.op_batch_ms == 500
    assert "rocketmq-5.1" in _BATCHING and "rocketmq-5.0" not in _BATCHING
    five = parse_config({"transactionOpBatchInterval": 700}, profile=_BATCHING[-1], op_batch_default_ms=500)
    assert five.params.op_batch_ms == 700 and five.params.op_written_within_ms == 2100
