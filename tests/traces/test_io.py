"""Readers and writers: round trips, extras, partitions, malformed input (traces/io.py)."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rmqspec.model.events import TraceEvent
from rmqspec.traces.errors import TraceReadError
from rmqspec.traces.io import (
    convert,
    open_trace,
    read_events,
    read_table,
    rows_to_table,
    truth_path,
    write_events,
)
from rmqspec.traces.parquet import PartitionedParquetWriter
from rmqspec.traces.schema import SCHEMA

EVENTS = [
    TraceEvent(seq=0, ts=10, event="send", actor="producer-0", group="PG", topic="T", queue_id=1,
               queue_offset=0, commitlog_offset=0, msg_key="K1", msg_id="M1", status="SEND_OK"),
    TraceEvent(seq=1, ts=11, event="store", actor="broker", topic="SCHEDULE_TOPIC_XXXX",
               queue_id=2, queue_offset=7, delay_level=3, deliver_ts=10_011, reconsume_times=1,
               detail={"real_topic": "%RETRY%G", "real_queue_id": 0}),
    TraceEvent(seq=2, ts=12, event="txn_end", txn_id="K1", msg_key="K1", status="COMMIT",
               detail={"from_check": True}),
    TraceEvent(seq=3, ts=13, event="drain", actor="broker"),
]


@pytest.mark.parametrize("first,second", [("a.jsonl", "b.parquet"), ("a.parquet", "b.jsonl"),
                                          ("a.jsonl", "parts"), ("parts", "b.jsonl")])
def test_round_trip_between_formats(tmp_path, first, second):
    write_events(EVENTS, tmp_path / first)
    n, rejected = convert(tmp_path / first, tmp_path / second)
    assert (n, rejected) == (len(EVENTS), [])
    events, rejected = read_events(tmp_path / second)
    assert events == EVENTS and rejected == []


def test_jsonl_detail_is_nested_and_parquet_detail_is_a_string(tmp_path):
    write_events(EVENTS, tmp_path / "t.jsonl")
    lines = [json.loads(x) for x in (tmp_path / "t.jsonl").read_text().splitlines()]
    assert lines[2]["detail"] == {"from_check": True}
    assert "queue_id" not in lines[3]  # nulls are omitted
    write_events(EVENTS, tmp_path / "t.parquet")
    table = pq.read_table(tmp_path / "t.parquet")
    assert table.schema.field("detail").type == pa.string()
    assert json.loads(table.column("detail")[2].as_py()) == {"from_check": True}


def test_extra_columns_are_carried_through(tmp_path):
    src = tmp_path / "x.jsonl"
    src.write_text(
        '{"seq":0,"ts":1,"event":"send","broker_name":"broker-a","tags":["a","b"]}\n'
        '{"seq":1,"ts":2,"event":"drain","weight":1.5}\n'
    )
    convert(src, tmp_path / "x.parquet")
    table, _ = read_table(tmp_path / "x.parquet")
    assert table.schema.names[: len(SCHEMA)] == SCHEMA.names
    assert {"broker_name", "tags", "weight"} <= set(table.schema.names)
    convert(tmp_path / "x.parquet", tmp_path / "y.jsonl")
    rows = [json.loads(x) for x in (tmp_path / "y.jsonl").read_text().splitlines()]
    assert rows[0]["broker_name"] == "broker-a" and rows[0]["tags"] == ["a", "b"]
    assert rows[1]["weight"] == 1.5
    # a Parquet file with a native extra column keeps its type
    t = rows_to_table([e.as_row() for e in EVENTS])
    t = t.append_column("region", pa.array(["r1", "r2", None, "r4"]))
    pq.write_table(t, tmp_path / "native.parquet")
    got = list(open_trace(tmp_path / "native.parquet").iter_rows())
    assert [r["region"] for r in got] == ["r1", "r2", None, "r4"]


def test_partitioned_output_is_bounded_and_read_back_in_order(tmp_path):
    rows = [{"seq": i, "ts": i, "event": "send", "msg_key": f"K{i}"} for i in range(2500)]
    with PartitionedParquetWriter(tmp_path / "out", part_rows=1000, row_group_rows=300) as w:
        for start in range(0, 2500, 700):
            w.write_batch(rows_to_table(rows[start : start + 700]))
    parts = sorted(p.name for p in (tmp_path / "out").glob("*.parquet"))
    assert parts == ["part-00000.parquet", "part-00001.parquet", "part-00002.parquet"]
    assert [pq.ParquetFile(tmp_path / "out" / p).metadata.num_rows for p in parts] == [1000, 1000, 500]
    assert pq.ParquetFile(tmp_path / "out" / parts[0]).metadata.num_row_groups > 1
    table, rejected = read_table(tmp_path / "out")
    assert rejected == [] and table.column("seq").to_pylist() == list(range(2500))


def test_malformed_jsonl_rows_are_reported_with_position_and_skipped(tmp_path):
    src = tmp_path / "bad.jsonl"
    src.write_text(
        "\n".join(
            [
                '{"seq":0,"ts":1,"event":"send"}',
                '{"seq":1,"ts":2,"event":"send"',  # bad JSON
                '{"seq":2,"ts":"late","event":"send"}',  # wrong type
                '{"seq":3,"ts":3,"event":"teleport"}',  # unknown event
                '{"ts":4,"event":"send"}',  # missing seq
                '{"seq":5,"event":"send"}',  # missing ts
                '{"seq":6,"ts":6,"event":"send","queue_id":4294967296}',  # int32 overflow
                '{"seq":7,"ts":7,"event":"send","detail":[1]}',  # detail not an object
                '[1,2]',  # not an object
                '{"seq":9,"ts":9,"event":"drain"}',
            ]
        )
        + "\n"
    )
    source = open_trace(src)
    assert [r["seq"] for r in source.iter_rows()] == [0, 9]
    got = [(r.position.rsplit(":", 1)[1], r.seq) for r in source.rejected]
    assert got == [("2", None), ("3", 2), ("4", 3), ("5", None), ("6", 5), ("7", 6), ("8", 7),
                   ("9", None)]
    reasons = [r.reason for r in source.rejected]
    assert reasons[0].startswith("bad JSON")
    assert "'ts'" in reasons[1] and reasons[2] == "unknown event 'teleport'"
    assert reasons[3] == "missing required field 'seq'" and "out of range" in reasons[5]


def test_malformed_parquet_rows_are_rejected_by_seq(tmp_path):
    table = pa.table(
        {
            "seq": pa.array([0, 1, 2, None], pa.int64()),
            "ts": pa.array([1, None, 3, 4], pa.int64()),
            "event": pa.array(["send", "send", "warp", "drain"]),
            "detail": pa.array([None, None, None, "not json"]),
        }
    )
    pq.write_table(table, tmp_path / "t.parquet")
    source = open_trace(tmp_path / "t.parquet")
    assert [r["seq"] for r in source.iter_rows()] == [0]
    assert [(r.position.rsplit("#", 1)[1], r.seq) for r in source.rejected] == [
        ("1", 1), ("2", 2), ("3", None)
    ]
    # a column of the wrong type is checked row by row
    pq.write_table(
        pa.table({"seq": [0, 1], "ts": [5, 6], "event": ["send", "send"],
                  "queue_id": ["3", "x"]}),
        tmp_path / "w.parquet",
    )
    source = open_trace(tmp_path / "w.parquet")
    assert list(source.iter_rows()) == [] and len(source.rejected) == 2
    assert "queue_id" in source.rejected[0].reason


def _missing(p):
    return p / "missing.jsonl"


def _empty_dir(p):
    (p / "empty").mkdir()
    (p / "empty" / "README").write_text("no traces here")
    return p / "empty"


def _corrupt_parquet(p):
    (p / "x.parquet").write_bytes(b"PAR1 garbage")
    return p / "x.parquet"


def _text_file(p):
    (p / "notes.txt").write_text("hello\nworld\n")
    return p / "notes.txt"


@pytest.mark.parametrize(
    "make,reason",
    [
        (_missing, "no such file"),
        (_empty_dir, "no trace files"),
        (_corrupt_parquet, "Parquet"),
        (_text_file, "not a JSONL"),
    ],
)
def test_unreadable_inputs_raise_a_typed_error(tmp_path, make, reason):
    path = make(tmp_path)
    with pytest.raises(TraceReadError) as info:
        list(open_trace(path).iter_rows())
    assert reason in str(info.value) and str(path) in str(info.value)


def test_parquet_without_trace_columns_is_not_a_trace(tmp_path):
    pq.write_table(pa.table({"a": [1]}), tmp_path / "other.parquet")
    with pytest.raises(TraceReadError, match="missing column"):
        open_trace(tmp_path / "other.parquet")


def test_truth_path_next_to_file_or_inside_directory(tmp_path):
    assert truth_path(tmp_path / "t.parquet").name == "t.parquet.truth.json"
    assert truth_path(tmp_path / "t.jsonl").name == "t.jsonl.truth.json"
    assert truth_path(tmp_path / "dir") == tmp_path / "dir" / "_truth.json"
