"""``rmqspec store verify|dump`` through ``cli.main.main`` and once as a subprocess."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from rmqspec.cli.main import main
from rmqspec.impl.codec import MessageRecord
from rmqspec.impl.store import MessageStore, StoreConfig

REPO = Path(__file__).resolve().parents[2]


def _store(root: Path) -> list[int]:
    cfg = StoreConfig(commitlog_file_size=800, cq_file_size=60)
    with MessageStore.open(root, config=cfg) as store:
        return [
            store.put(
                MessageRecord("Orders", i % 2, b"b%d" % i, {"TAGS": "t", "KEYS": "a b"}, store_ts=10 + i)
            ).commitlog_offset
            for i in range(12)
        ]


def test_verify_clean_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _store(tmp_path)
    assert main(["store", "verify", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "OK" in out and "12 records" in out
    assert main(["store", "verify", str(tmp_path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is True and doc["findings"] == [] and doc["stats"]["records"] == 12


def test_verify_findings_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    offsets = _store(tmp_path)
    path = tmp_path / "commitlog" / f"{0:020d}"
    data = bytearray(path.read_bytes())
    data[offsets[2] + 4] ^= 0xFF
    path.write_bytes(bytes(data))
    (tmp_path / "commitlog" / "README").write_text("x")
    assert main(["store", "verify", str(tmp_path), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is False
    got = {(f["code"], f["file"], f["offset"]) for f in doc["findings"]}
    assert ("BAD_MAGIC", f"commitlog/{0:020d}", offsets[2]) in got
    assert ("BAD_FILE_NAME", "commitlog/README", 0) in got
    assert main(["store", "verify", str(tmp_path)]) == 1
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1].startswith("store verify") and "finding(s)" in lines[-1]
    assert any(line.startswith("BAD_MAGIC commitlog/") for line in lines)


def test_not_a_store_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["store", "verify", str(tmp_path)]) == 2
    assert "no commitlog directory" in capsys.readouterr().err
    assert main(["store", "dump", str(tmp_path / "nope")]) == 2
    assert main(["store", "verify", str(tmp_path), "--delay-levels", "1x"]) == 2


def test_dump_json_keys_and_filters(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    offsets = _store(tmp_path)
    assert main(["store", "dump", str(tmp_path), "--topic", "Orders", "--queue", "1", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["commitlog_offset"] for r in rows] == offsets[1::2]
    assert set(rows[0]) == {
        "commitlog_offset",
        "size",
        "topic",
        "queue_id",
        "queue_offset",
        "sys_flag",
        "born_ts",
        "store_ts",
        "reconsume_times",
        "prepared_txn_offset",
        "body_crc",
        "msg_id",
        "tags",
        "keys",
        "properties",
        "body_b64",
    }
    assert rows[0]["keys"] == ["a", "b"] and rows[0]["body_b64"] == "YjE="
    assert main(["store", "dump", str(tmp_path)]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 12


def test_dump_reports_damage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    offsets = _store(tmp_path)
    path = tmp_path / "commitlog" / f"{0:020d}"
    data = bytearray(path.read_bytes())
    struct.pack_into(">i", data, offsets[3], 5)  # impossible totalSize
    path.write_bytes(bytes(data))
    assert main(["store", "dump", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert "BAD_SIZE" in captured.err and "Traceback" not in captured.err
    assert len(captured.out.splitlines()) >= 3


def test_subprocess_on_garbage(tmp_path: Path) -> None:
    (tmp_path / "commitlog").mkdir()
    (tmp_path / "commitlog" / f"{0:020d}").write_bytes(b"\x00\x00\x01\x00garbage" * 50)
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "delayOffset.json").write_text("{offsetTable:{1:}")
    exe = REPO / ".venv" / "bin" / "rmqspec"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "rmqspec.cli.main"]
    proc = subprocess.run(
        [*cmd, "store", "verify", str(tmp_path), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    codes = {f["code"] for f in json.loads(proc.stdout)["findings"]}
    assert {"BAD_MAGIC", "BAD_JSON"} <= codes
    proc = subprocess.run(
        [*cmd, "store", "dump", str(tmp_path / "missing")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


def test_verify_and_dump_a_store_with_uniq_keys_in_every_client_format(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/fidelity.md B14: the MmapBroker's store after sends, a retry, a delayed message and two
    transactions whose UNIQ_KEYs are in every client's format (56-char IPv6 Java key, lower-case, Go,
    5.x, arbitrary characters) verifies clean; dump shows each key as sent."""
    from rmqspec.impl import factory as mmap_factory
    from tests.uniq_keys import IPV6_JAVA, KEYS, record_trace

    root = tmp_path / "store"
    record_trace(mmap_factory, root)
    assert main(["store", "verify", str(root), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is True and doc["findings"] == []
    assert main(["store", "dump", str(root), "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    stored = {r["properties"].get("UNIQ_KEY") for r in rows}
    assert set(KEYS.values()) | {IPV6_JAVA + "-t"} <= stored
    half = [r for r in rows
            if r["topic"] == "RMQ_SYS_TRANS_HALF_TOPIC" and r["properties"]["UNIQ_KEY"] == IPV6_JAVA + "-t"]
    assert half and all(r["properties"]["PGROUP"] == "PKT" for r in half)
