"""Recorders that write traces incrementally (traces/recorder.py)."""

from __future__ import annotations

import pytest

from rmqspec.model.events import ListRecorder, Recorder
from rmqspec.traces.io import read_events
from rmqspec.traces.recorder import (
    JsonlRecorder,
    ParquetRecorder,
    events_to_jsonl,
    events_to_table,
    open_recorder,
)


def _emit_some(rec: Recorder) -> None:
    rec.emit("send", 1, topic="T", queue_id=0, msg_key="K")
    rec.emit("store", 1, actor="broker", topic="T", queue_id=0, queue_offset=0)
    rec.emit("txn_end", 2, txn_id="K", status="COMMIT", detail={"from_check": False})
    rec.emit("drain", 3)


@pytest.mark.parametrize("name", ["r.jsonl", "r.parquet", "rdir"])
def test_recorders_write_what_a_list_recorder_keeps(tmp_path, name):
    expected = ListRecorder()
    _emit_some(expected)
    with open_recorder(tmp_path / name, buffer_rows=2) as rec:
        assert isinstance(rec, Recorder)
        _emit_some(rec)
        assert rec.count == 4
    events, rejected = read_events(tmp_path / name)
    assert events == expected.events and rejected == []


def test_buffer_is_flushed_when_full_and_on_close(tmp_path):
    rec = JsonlRecorder(tmp_path / "r.jsonl", buffer_rows=3)
    for i in range(4):
        rec.emit("send", i, msg_key=f"K{i}")
    rec._writer._fh.flush()
    assert len((tmp_path / "r.jsonl").read_text().splitlines()) == 3
    rec.close()
    assert len((tmp_path / "r.jsonl").read_text().splitlines()) == 4
    with pytest.raises(RuntimeError, match="closed"):
        rec.emit("drain", 5)


def test_parquet_recorder_partitions_large_runs(tmp_path):
    with ParquetRecorder(tmp_path / "parts", buffer_rows=100, part_rows=250) as rec:
        for i in range(600):
            rec.emit("send", i, msg_key=f"K{i}")
    assert len(list((tmp_path / "parts").glob("part-*.parquet"))) == 3
    events, _ = read_events(tmp_path / "parts")
    assert [e.seq for e in events] == list(range(600))


def test_list_recorder_helpers(tmp_path):
    rec = ListRecorder()
    _emit_some(rec)
    table = events_to_table(rec.events)
    assert table.num_rows == 4 and table.column("event").to_pylist()[-1] == "drain"
    assert events_to_jsonl(rec.events, tmp_path / "l.jsonl") == 4
    assert read_events(tmp_path / "l.jsonl")[0] == rec.events
