"""``store verify`` / ``store dump``: a clean store, corruptions, an independently written store."""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path

import pytest

from rmqspec.impl.codec import MessageRecord
from rmqspec.impl.dump import DumpRow, dump_store
from rmqspec.impl.reader import Finding, NotAStore
from rmqspec.impl.store import MessageStore, StoreConfig
from rmqspec.impl.verify import verify_store
from rmqspec.model.ids import offset_msg_id
from rmqspec.model.javahash import java_string_hash

CL_SIZE = 1024
CQ_SIZE = 100


def _make_store(root: Path, n: int = 20) -> list[int]:
    cfg = StoreConfig(commitlog_file_size=CL_SIZE, cq_file_size=CQ_SIZE)
    offsets = []
    with MessageStore.open(root, config=cfg) as store:
        for i in range(n):
            res = store.put(
                MessageRecord("T", i % 2, f"body-{i}".encode(), {"TAGS": "tg", "KEYS": f"k{i}"}, store_ts=1000 + i)
            )
            offsets.append(res.commitlog_offset)
    (root / "config" / "consumerOffset.json").write_text('{"offsetTable":{"T@g":{0:3,1:2}}}')
    return offsets


def _codes(findings: tuple[Finding, ...]) -> list[tuple[str, str, int]]:
    return [(f.code, f.file, f.offset) for f in findings]


def test_clean_store_passes(tmp_path: Path) -> None:
    _make_store(tmp_path)
    report = verify_store(tmp_path)
    assert report.ok, report.findings
    assert report.stats["records"] == 20 and report.stats["cq_units"] == 20
    assert report.stats["commitlog_files"] >= 2 and report.stats["blank_records"] >= 1


def test_bit_flip_in_a_body(tmp_path: Path) -> None:
    offsets = _make_store(tmp_path)
    target = offsets[3]
    path = tmp_path / "commitlog" / f"{0:020d}"
    data = bytearray(path.read_bytes())
    body_pos = target + 4 * 5 + 8 + 8 + 4 + 8 + 8 + 8 + 8 + 4 + 8 + 4
    data[body_pos] ^= 0x10
    path.write_bytes(bytes(data))
    report = verify_store(tmp_path)
    assert _codes(report.findings) == [("BAD_CRC", f"commitlog/{0:020d}", target)]


def test_bit_flip_in_a_magic_and_a_physical_offset(tmp_path: Path) -> None:
    offsets = _make_store(tmp_path)
    name = f"{0:020d}"
    path = tmp_path / "commitlog" / name
    data = bytearray(path.read_bytes())
    data[offsets[1] + 20 + 8 + 7] ^= 0x01  # physicalOffset low byte
    data[offsets[4] + 5] ^= 0x01  # magic
    path.write_bytes(bytes(data))
    report = verify_store(tmp_path)
    codes = _codes(report.findings)
    assert ("BAD_PHYSICAL_OFFSET", f"commitlog/{name}", offsets[1]) in codes
    assert ("BAD_MAGIC", f"commitlog/{name}", offsets[4]) in codes
    # the units of the unreadable records are reported as dangling, nothing crashes
    assert {c for c, _, _ in codes} <= {"BAD_PHYSICAL_OFFSET", "BAD_MAGIC", "CQ_DANGLING"}


def test_truncated_commitlog_file(tmp_path: Path) -> None:
    offsets = _make_store(tmp_path)
    name = f"{0:020d}"
    path = tmp_path / "commitlog" / name
    os.truncate(path, offsets[2] + 10)
    report = verify_store(tmp_path)
    codes = _codes(report.findings)
    assert ("BAD_FILE_SIZE", f"commitlog/{name}", 0) in codes
    assert ("TRUNCATED", f"commitlog/{name}", offsets[2]) in codes


def test_torn_tail_with_abort_is_truncated(tmp_path: Path) -> None:
    cfg = StoreConfig(commitlog_file_size=CL_SIZE, cq_file_size=CQ_SIZE, flush="ASYNC")
    store = MessageStore.open(tmp_path, config=cfg)
    for i in range(3):
        store.put(MessageRecord("T", 0, b"x" * 40, store_ts=i + 1))
    store.flush()
    last = store.put(MessageRecord("T", 0, b"y" * 40, store_ts=9))
    store.crash("power", torn=True)
    report = verify_store(tmp_path)
    assert report.stats["abort"] is True
    assert ("TRUNCATED", f"commitlog/{0:020d}", last.commitlog_offset) in _codes(report.findings)


def test_retry_and_dlq_topics_of_any_group_name_are_a_stores(tmp_path: Path) -> None:
    """The broker builds %RETRY%/%DLQ% + the group without validating the group: a group name beyond
    ASCII gives such topics; a client topic with the same characters is still BAD_TOPIC."""
    cfg = StoreConfig(commitlog_file_size=CL_SIZE, cq_file_size=CQ_SIZE)
    with MessageStore.open(tmp_path, config=cfg) as store:
        for topic in ("%RETRY%观察\ufdd01", "%DLQ%观察\ufdd01", "T观察"):
            store.put(MessageRecord(topic, 0, b"b", {"TAGS": "tg"}, store_ts=1000))
    codes = [(f.code, f.reason) for f in verify_store(tmp_path).findings]
    assert [c for c, _ in codes if c == "BAD_TOPIC"] == ["BAD_TOPIC"], codes
    assert all("RETRY" not in d and "DLQ" not in d for c, d in codes if c == "BAD_TOPIC"), codes


def test_foreign_file_and_bad_names(tmp_path: Path) -> None:
    _make_store(tmp_path)
    (tmp_path / "commitlog" / "notes.txt").write_text("hello")
    os.rename(tmp_path / "commitlog" / f"{1024:020d}", tmp_path / "commitlog" / f"{5000:020d}")
    report = verify_store(tmp_path)
    codes = _codes(report.findings)
    assert ("BAD_FILE_NAME", "commitlog/notes.txt", 0) in codes
    assert ("BAD_FILE_NAME", f"commitlog/{5000:020d}", 0) in codes


def test_cq_unit_pointing_mid_record(tmp_path: Path) -> None:
    offsets = _make_store(tmp_path)
    cq = tmp_path / "consumequeue" / "T" / "0" / f"{0:020d}"
    data = bytearray(cq.read_bytes())
    struct.pack_into(">q", data, 20, offsets[2] + 7)  # unit 1 of queue 0 → mid-record
    cq.write_bytes(bytes(data))
    report = verify_store(tmp_path)
    codes = _codes(report.findings)
    assert ("CQ_DANGLING", f"consumequeue/T/0/{0:020d}", 20) in codes
    # and the record it should point at has lost its unit? no: the unit slot exists,
    # so only the dangling unit is reported
    assert [c for c, _, _ in codes] == ["CQ_DANGLING"]


def test_cq_mismatch_tags_and_missing(tmp_path: Path) -> None:
    offsets = _make_store(tmp_path)
    cq = tmp_path / "consumequeue" / "T" / "0" / f"{0:020d}"
    data = bytearray(cq.read_bytes())
    struct.pack_into(">q", data, 20, offsets[0])  # unit 1 → record of queue offset 0
    struct.pack_into(">q", data, 40 + 12, 12345)  # unit 2 tagsCode
    cq.write_bytes(bytes(data))
    os.unlink(tmp_path / "consumequeue" / "T" / "1" / f"{100:020d}")  # queue 1, units 5..9
    report = verify_store(tmp_path)
    codes = _codes(report.findings)
    assert ("CQ_MISMATCH", f"consumequeue/T/0/{0:020d}", 20) in codes
    assert ("BAD_TAGS_CODE", f"consumequeue/T/0/{0:020d}", 40) in codes
    missing = [c for c in codes if c[0] == "CQ_MISSING"]
    assert len(missing) == 5


def test_malformed_json(tmp_path: Path) -> None:
    _make_store(tmp_path)
    (tmp_path / "config" / "consumerOffset.json").write_text('{"offsetTable":{"T@g":{0:3,,}}}')
    (tmp_path / "config" / "delayOffset.json").write_text('{"offsetTable":{"x":1}}')
    report = verify_store(tmp_path)
    codes = _codes(report.findings)
    assert ("BAD_JSON", "config/consumerOffset.json", 27) in codes  # the second comma
    assert ("BAD_JSON", "config/delayOffset.json", 0) in codes


def test_not_a_store(tmp_path: Path) -> None:
    with pytest.raises(NotAStore):
        verify_store(tmp_path)
    with pytest.raises(NotAStore):
        list(dump_store(tmp_path / "missing"))


def test_special_entries_in_store_dirs(tmp_path: Path) -> None:
    _make_store(tmp_path)
    (tmp_path / "commitlog" / f"{9 * 1024:020d}").mkdir()  # a directory with a segment name
    os.mkfifo(tmp_path / "consumequeue" / "T" / "0" / "pipe")  # never opened (would block)
    report = verify_store(tmp_path)
    codes = _codes(report.findings)
    assert ("BAD_FILE_NAME", f"commitlog/{9 * 1024:020d}", 0) in codes
    assert ("BAD_FILE_NAME", "consumequeue/T/0/pipe", 0) in codes


def test_garbage_everywhere_never_raises(tmp_path: Path) -> None:
    (tmp_path / "commitlog").mkdir()
    (tmp_path / "commitlog" / f"{0:020d}").write_bytes(os.urandom(3000))
    (tmp_path / "commitlog" / f"{3000:020d}").write_bytes(b"")
    (tmp_path / "consumequeue" / "T" / "0").mkdir(parents=True)
    (tmp_path / "consumequeue" / "T" / "0" / f"{0:020d}").write_bytes(os.urandom(57))
    (tmp_path / "consumequeue" / "bad topic!").mkdir()
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "topics.json").write_bytes(b"\xff\xfe")
    (tmp_path / "checkpoint").write_bytes(b"abc")
    report = verify_store(tmp_path)
    assert not report.ok
    codes = {f.code for f in report.findings}
    assert {"BAD_FILE_NAME", "BAD_JSON", "BAD_CHECKPOINT", "BAD_FILE_SIZE"} <= codes
    items = list(dump_store(tmp_path))
    assert any(isinstance(i, Finding) for i in items)


def test_dump(tmp_path: Path) -> None:
    offsets = _make_store(tmp_path)
    rows = [r for r in dump_store(tmp_path, topic="T", queue_id=1) if isinstance(r, DumpRow)]
    assert [r.record.commitlog_offset for r in rows] == offsets[1::2]
    d = rows[0].to_dict()
    assert d["keys"] == ["k1"] and d["tags"] == "tg" and d["queue_offset"] == 0
    assert d["msg_id"] == offset_msg_id("127.0.0.1", 10911, offsets[1])


# -- an independent writer -----------------------------------------------------------------------
# A small struct-based writer that follows the format facts (SPEC §5) and nothing from impl/.


def _ind_record(
    phys: int,
    qid: int,
    qoff: int,
    topic: str,
    body: bytes,
    props: str,
    store_ts: int,
    sys_flag: int = 0,
    v6: bool = False,
) -> bytes:
    born = (
        (b"\x0a\x00\x00\x02" + struct.pack(">i", 5555)) if not v6 else (bytes(15) + b"\x01" + struct.pack(">i", 5555))
    )
    flag = sys_flag | (0x10 if v6 else 0)
    store = b"\xc0\xa8\x01\x01" + struct.pack(">i", 10911)
    t = topic.encode()
    p = props.encode()
    length = (
        4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + len(born) + 8 + len(store) + 4 + 8 + 4 + len(body) + 1 + len(t) + 2 + len(p)
    )
    out = struct.pack(
        ">iiiiiqqiq",
        length,
        -626843481,
        zlib.crc32(body) & 0x7FFFFFFF,
        qid,
        0,
        qoff,
        phys,
        flag,
        store_ts - 5,
    )
    out += born + struct.pack(">q", store_ts) + store + struct.pack(">iqi", 0, 0, len(body))
    out += body + bytes([len(t)]) + t + struct.pack(">h", len(p)) + p
    assert len(out) == length
    return out


def _independent_store(root: Path) -> list[tuple[int, str, int, int, bytes, str]]:
    """Write commitlog files of 512 bytes and cq files of 60 bytes; return what was written."""
    file_size, cq_size = 512, 60
    files: dict[int, bytearray] = {}
    cqs: dict[tuple[str, int], bytearray] = {}
    written = []
    pos = 0
    next_q: dict[tuple[str, int], int] = {}
    for i in range(14):
        topic, qid = ("OrderTopic", i % 2) if i % 3 else ("Pay_Topic", 0)
        body = f"订单-{i}".encode() * (i % 4 + 1)
        tags = "标签A" if i % 2 else "TagB"
        props = f"TAGS\x01{tags}\x02KEYS\x01key{i} other{i}\x02UNIQ_KEY\x01{i:032X}"
        qoff = next_q.get((topic, qid), 0)
        probe = _ind_record(0, qid, qoff, topic, body, props, 2000 + i, v6=(i == 5))
        if len(probe) + 8 > file_size - pos % file_size:
            start = pos - pos % file_size
            files.setdefault(start, bytearray(file_size))
            files[start][pos % file_size : pos % file_size + 8] = struct.pack(
                ">ii", file_size - pos % file_size, -875286124
            )
            pos = start + file_size
        rec = _ind_record(pos, qid, qoff, topic, body, props, 2000 + i, v6=(i == 5))
        start = pos - pos % file_size
        files.setdefault(start, bytearray(file_size))
        files[start][pos % file_size : pos % file_size + len(rec)] = rec
        cqs.setdefault((topic, qid), bytearray()).extend(struct.pack(">qiq", pos, len(rec), java_string_hash(tags)))
        written.append((pos, topic, qid, qoff, body, tags))
        next_q[(topic, qid)] = qoff + 1
        pos += len(rec)
    (root / "commitlog").mkdir(parents=True)
    for start, data in files.items():
        (root / "commitlog" / f"{start:020d}").write_bytes(bytes(data))
    for (topic, qid), units in cqs.items():
        d = root / "consumequeue" / topic / str(qid)
        d.mkdir(parents=True)
        for k in range(0, len(units), cq_size):
            chunk = units[k : k + cq_size]
            (d / f"{k:020d}").write_bytes(bytes(chunk) + bytes(cq_size - len(chunk)))
    (root / "config").mkdir()
    # fastjson's pretty output as RocketMQ writes it
    (root / "config" / "consumerOffset.json").write_text(
        '{\n\t"offsetTable":{\n\t\t"OrderTopic@grp":{0:3,1:2\n\t\t},\n\t\t"%RETRY%grp@grp":{0:0\n\t\t}\n\t}\n}'
    )
    (root / "config" / "delayOffset.json").write_text('{\n\t"offsetTable":{1:5,2:0\n\t}\n}')
    (root / "checkpoint").write_bytes(struct.pack(">qqq", 2013, 2013, 0) + bytes(4096 - 24))
    return written


def test_independently_written_store_is_read_dumped_and_verified(tmp_path: Path) -> None:
    written = _independent_store(tmp_path)
    report = verify_store(tmp_path)
    assert report.ok, report.findings
    assert report.stats["records"] == len(written)
    rows = [r for r in dump_store(tmp_path) if isinstance(r, DumpRow)]
    got = [
        (
            r.record.commitlog_offset,
            r.record.topic,
            r.record.queue_id,
            r.record.queue_offset,
            r.record.body,
            r.record.tags,
        )
        for r in rows
    ]
    assert got == written
    assert rows[5].record.born_host == ("::1", 5555)
    assert rows[1].record.keys == ("key1", "other1")
    assert rows[1].record.msg_id == offset_msg_id("192.168.1.1", 10911, written[1][0])
    # and the store opens, recovers and continues appending where the writer stopped
    cfg = StoreConfig(commitlog_file_size=512, cq_file_size=60, store_host="192.168.1.1")
    with MessageStore.open(tmp_path, config=cfg) as store:
        assert store.max_offset("OrderTopic", 1) == sum(1 for w in written if w[1:3] == ("OrderTopic", 1))
        assert store.read(written[-1][0]).body == written[-1][4]
        res = store.put(MessageRecord("Pay_Topic", 0, b"more", {"TAGS": "x"}, store_ts=9999))
        assert res.queue_offset == sum(1 for w in written if w[1] == "Pay_Topic")
    assert verify_store(tmp_path).ok


def test_a_unit_after_unallocated_pages_is_a_gap(tmp_path: Path) -> None:
    """verify walks only a sparse file's allocated extents; a hole of zero units still counts."""
    cfg = StoreConfig(commitlog_file_size=CL_SIZE, cq_file_size=20 * 1000)
    with MessageStore.open(tmp_path, config=cfg) as store:
        offsets = [store.put(MessageRecord("T", 0, b"b", {"TAGS": "t"}, store_ts=5)).commitlog_offset for _ in range(3)]
    cq = tmp_path / "consumequeue" / "T" / "0" / f"{0:020d}"
    assert verify_store(tmp_path).ok
    far = 3 * 4096 + 4 * 20 - (3 * 4096) % 20  # a unit in the fourth page, three pages of holes before it
    with open(cq, "r+b") as f:
        f.seek(far)
        f.write(struct.pack(">qiq", offsets[0], 10, 0))
    assert cq.stat().st_blocks * 512 < 20 * 1000  # still sparse
    codes = _codes(verify_store(tmp_path).findings)
    assert ("CQ_GAP", f"consumequeue/T/0/{0:020d}", far) in codes
