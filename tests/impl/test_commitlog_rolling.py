"""Mapped files and rolling: a record + 8 bytes that does not fit → blank record, next file."""

from __future__ import annotations

import struct
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqspec.impl.codec import BLANK_MAGIC, MessageRecord, PutError, prepare
from rmqspec.impl.store import MessageStore, StoreConfig
from rmqspec.model.message import record_size

BASE = record_size(0, "T", {}, 0)  # 91 bytes for an empty body on topic "T"


def _put(store: MessageStore, body_len: int, qid: int = 0, ts: int = 1) -> int:
    return store.put(MessageRecord("T", qid, b"b" * body_len, store_ts=ts)).commitlog_offset


@pytest.mark.parametrize("slack", [-1, 0, 1, 7, 8, 9])
def test_roll_exactly_at_the_boundary(tmp_path: Path, slack: int) -> None:
    """File of 2 records; the 2nd fits iff size + 8 <= remaining."""
    size = 400
    cfg = StoreConfig(commitlog_file_size=size, cq_file_size=40)
    with MessageStore.open(tmp_path, config=cfg) as store:
        first = _put(store, 100)  # 191 bytes
        remaining = size - (BASE + 100)
        # the second record is remaining - 8 - slack bytes long
        second_len = remaining - 8 - slack - BASE
        off = _put(store, second_len)
        if slack >= 0:
            assert off == BASE + 100  # fits in the first file
        else:
            assert off == size  # rolled
            raw = (tmp_path / "commitlog" / f"{0:020d}").read_bytes()
            assert struct.unpack_from(">ii", raw, BASE + 100) == (remaining, BLANK_MAGIC)
        assert store.read(first).body == b"b" * 100
        assert store.read(off).body == b"b" * second_len


def test_record_larger_than_a_file_is_refused(tmp_path: Path) -> None:
    with MessageStore.open(tmp_path, config=StoreConfig(commitlog_file_size=200)) as store:
        with pytest.raises(PutError) as info:
            _put(store, 200 - BASE - 7)
        assert "> a commitlog file of 200" in str(info.value)
        _put(store, 200 - BASE - 8)  # exactly fits with the 8-byte marker


@given(
    file_size=st.integers(BASE + 8, 700),
    lengths=st.lists(st.integers(0, 600), min_size=1, max_size=25),
)
@settings(max_examples=40)
def test_rolling_at_every_boundary(file_size: int, lengths: list[int]) -> None:
    lengths = [n for n in lengths if BASE + n + 8 <= file_size] or [0]
    with tempfile.TemporaryDirectory() as tmp:
        cfg = StoreConfig(commitlog_file_size=file_size, cq_file_size=60)
        store = MessageStore.open(tmp, config=cfg)
        offsets = []
        expect = 0
        for i, n in enumerate(lengths):
            size = BASE + n
            if size + 8 > file_size - expect % file_size:
                expect += file_size - expect % file_size
            off = _put(store, n, ts=i + 1)
            assert off == expect
            offsets.append(off)
            expect += size
            assert store.commitlog_max_offset == expect
        for i, (off, n) in enumerate(zip(offsets, lengths)):
            rec = store.read(off)
            assert (rec.body, rec.queue_offset, rec.store_ts) == (b"b" * n, i, i + 1)
        units = store.queue_units("T", 0, 0, 1000)
        assert [u.commitlog_offset for u in units] == offsets
        store.close()
        names = sorted(p.name for p in (Path(tmp) / "commitlog").iterdir())
        assert names == [f"{k * file_size:020d}" for k in range(len(names))]
        # every file but the last ends with a blank record that fills it
        for name in names[:-1]:
            raw = (Path(tmp) / "commitlog" / name).read_bytes()
            assert len(raw) == file_size
            pos = 0
            while True:
                total, magic = struct.unpack_from(">ii", raw, pos)
                if magic == BLANK_MAGIC:
                    assert pos + total == file_size and total >= 8
                    break
                pos += total
        # a reopened store reads the same and continues where it stopped
        store = MessageStore.open(tmp, config=cfg)
        assert store.recovery is not None and store.recovery.kind == "normal"
        assert store.commitlog_max_offset == expect
        assert store.max_offset("T", 0) == len(lengths)
        nxt = store.put(MessageRecord("T", 0, b"", store_ts=99))
        assert nxt.queue_offset == len(lengths)
        assert nxt.commitlog_offset in (expect, expect + file_size - expect % file_size)
        store.close()


def test_prepare_size_matches_record_size_with_ipv6() -> None:
    rec = MessageRecord("T", 0, b"x", born_host=("::1", 1))
    p = prepare(rec, ("fe80::1", 2))
    assert p.sys_flag == 0x30
    assert p.size == record_size(1, "T", {}, 0x30) == BASE + 1 + 24
