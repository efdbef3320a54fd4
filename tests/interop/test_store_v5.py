"""Differential store tier on RocketMQ 5.3.3: its DefaultMessageStore, 4.9.8's and rmqspec read the same stores.

The corpus of tests/interop/test_store_differential.py, built with its functions (imported: the generated
messages, the writers, the damage kinds, the two readers, ``disagreements``), with 5.3.3 as the real side:
``real-rocketmq oracle --version 5.3.3`` runs interop/java/v5/StoreOracle.java, the v4 oracle's program on the
5.x API, its store kept in the classic file layout (no RocksDB consume queue, no DLedger, no timer wheel, v1
records). Stores come from four writers -- 5.3.3 (``real``: the generated messages with delays and halves),
4.9.8 (``real4``: the same lines; the upgrade path), rmqspec's ``MessageStore.put`` (``ours``) and ``MmapBroker``
under the client workload (``workload``) -- each intact and damaged the seven ways of the 4.9.8 tier. Every case
is read by 5.3.3 (one ``dump-many`` JVM), by 4.9.8 (another) and by rmqspec; all three must agree.

What 5.3.3 does differently is asserted as exactly that difference, each with the 5.3.3 source that makes it:

- Normal recovery (no abort file) starts in the CommitLog file that holds the consume queues' largest
  physical offset (5.3.3 ``CommitLog.recoverNormally``: ``while (index > 0) { if (fileFromOffset <=
  maxPhyOffsetOfConsumeQueue) break; index--; }``), not in the third-last file (4.9.8: ``index =
  mappedFiles.size() - 3``). A corrupt record in an earlier file that the consume queues already cover is never
  read (``bad_crc_normal_early``: 5.3.3 keeps every record, 4.9.8 and rmqspec truncate there); with the consume
  queues gone, 5.3.3 scans (and CRC-checks) from the first file, 4.9.8 only the last three before its reput
  rebuilds the queues from offset 0 unchecked (``cq_gone_bad_crc_first_file``).
- Writing: ``MessageDecoder.messageProperties2String`` keeps the trailing ``\\u0002`` separator (4.9.8 deletes
  it: each record with properties is a byte longer), and ``string2messageProperties`` makes a ``HashMap`` of
  initial capacity 128 (4.9.8: 16), so the broker's on-disk property order differs.
- The put-message checks moved to the broker's hooks (``HookUtils.checkBeforePutMessage``: topic length in
  UTF-8 bytes, retry topics up to 255; ``checkInnerBatch``; ``handleScheduleMessage``: timer properties), and
  ``TransactionalMessageBridge.parseHalfMessageInner`` adds ``__transactionId__``: ``test_write_path_edges``.
- A clean shutdown leaves an empty ``abort.bak`` (``DefaultMessageStore.createTempFile`` writes the pid into
  ``abort`` with ``MixAll.string2File``, which first copies the old, empty, content to ``abort.bak``; shutdown
  deletes ``abort`` only), and the checkpoint carries two more longs (``StoreCheckpoint``: masterFlushedOffset,
  confirmPhyOffset, which recovery sets to the last valid record's offset).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rmqspec.impl.checkpoint import read_checkpoint
from rmqspec.impl.codec import DecodedRecord
from rmqspec.impl.store import MessageStore, StoreConfig
from rmqspec.model.config import BrokerConfig
from tests.interop.realrmq import V5, RealRocketMQ, resolved
from tests.interop.test_store_differential import (
    DAMAGE,
    FIELDS,
    FILE,
    GIB,
    HALF_TOPIC,
    _body_start,
    _copy,
    _oracle_write,
    _records,
    _torn_record_kept,
    damage,
    disagreements,
    generated_messages,
    our_view,
    real_views,
    write_ours,
    write_workload,
)

# make interop runs it after the wall-clock modules, never beside them (the Makefile)
pytestmark = pytest.mark.cpu_heavy

V4 = "4.9.8"
WRITERS = ("real", "real4", "ours", "workload")
# 5.x's own damage kind: a body byte flipped in the commitlog file before the last one (the consume queues
# reach into the last file), no abort file. Only the writers whose stores span two 1 MiB files.
EARLY = "bad_crc_normal_early"
EARLY_WRITERS = ("real", "real4", "ours")
CASES = [name for base in WRITERS for name in (base, *(f"{base}-{k}" for k in DAMAGE))]
EARLY_CASES = [f"{base}-{EARLY}" for base in EARLY_WRITERS]
SMALL = 16 * 1024  # the commitlog file size of the consume-queue-rebuild cases (the workload spans 7 files)

TIER_5X = True  # the 5.x tier (INTEROP=5x; tests/interop/conftest.py)



@pytest.fixture(scope="module")
def realrmq() -> RealRocketMQ:
    """5.3.3 for this module, whatever ``RMQ_VERSION`` says (overrides the conftest fixture of that name)."""
    return resolved(V5)


@pytest.fixture(scope="module")
def realrmq4() -> RealRocketMQ:
    return resolved(V4)


def _flip_body_byte(root: Path, record: DecodedRecord, file_size: int = FILE) -> None:
    pos = record.commitlog_offset + _body_start(record)
    path = root / "commitlog" / f"{pos // file_size * file_size:020d}"
    with path.open("r+b") as f:
        f.seek(pos % file_size)
        byte = f.read(1)[0]
        f.seek(pos % file_size)
        f.write(bytes([byte ^ 0x5A]))


def _early_victim(records: list[DecodedRecord]) -> DecodedRecord:
    """A record with a body in the file before the last one."""
    last_file = records[-1].commitlog_offset // FILE
    pool = [r for r in records if r.commitlog_offset // FILE == last_file - 1 and r.body]
    return pool[len(pool) // 2]


def build_corpus(real5: RealRocketMQ, real4: RealRocketMQ, base: Path) -> dict[str, Any]:
    """The four writers' stores, their damaged copies, and each case as 5.3.3, 4.9.8 and rmqspec read it."""
    pristine = base / "pristine"
    pristine.mkdir()
    lines = generated_messages(1, 120, routed=True)
    written = {
        "real": _oracle_write(real5, pristine / "real", lines),
        "real4": _oracle_write(real4, pristine / "real4", lines),
    }
    write_ours(pristine / "ours", generated_messages(2, 120, routed=False))
    write_workload(pristine / "workload", BrokerConfig(commitlog_file_size=FILE), rounds=3)
    cases: dict[str, Path] = {}
    victims: dict[str, int] = {}
    work = base / "cases"
    work.mkdir()
    for name in WRITERS:
        records = _records(_copy(pristine / name, work / f"probe-{name}"))
        cases[name] = pristine / name
        for kind in DAMAGE:
            path = _copy(pristine / name, work / f"{name}-{kind}")
            damage(path, kind, records)
            cases[f"{name}-{kind}"] = path
        if name in EARLY_WRITERS:
            path = _copy(pristine / name, work / f"{name}-{EARLY}")
            victim = _early_victim(records)
            _flip_body_byte(path, victim)
            cases[f"{name}-{EARLY}"] = path
            victims[f"{name}-{EARLY}"] = victim.commitlog_offset
    v5_copies = [_copy(path, base / f"v5-{name}") for name, path in cases.items()]
    v4_copies = [_copy(path, base / f"v4-{name}") for name, path in cases.items()]
    our_copies = {name: _copy(path, base / f"ours-{name}") for name, path in cases.items()}
    v5_views = real_views(real5, v5_copies)
    v4_views = real_views(real4, v4_copies)
    views = {
        name: {"v5": v5, "v4": v4, "ours": our_view(our_copies[name])}
        for name, v5, v4 in zip(cases, v5_views, v4_views, strict=True)
    }
    return {"pristine": pristine, "base": base, "views": views, "written": written, "victims": victims}


@pytest.fixture(scope="module")
def corpus(realrmq: RealRocketMQ, realrmq4: RealRocketMQ, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return build_corpus(realrmq, realrmq4, tmp_path_factory.mktemp("differential-v5"))


# -- the three readers agree ---------------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES)
def test_5_3_3_and_rmqspec_recover_the_same_store(corpus: dict[str, Any], case: str) -> None:
    v5, ours = corpus["views"][case]["v5"], corpus["views"][case]["ours"]
    if case.endswith("-torn_tail") and _torn_record_kept(v5, ours):
        return  # docs/fidelity.md "RocketMQ keeps a torn record": 5.3.3 exactly as 4.9.8
    assert disagreements(v5, ours) == []
    if case.endswith("short_file"):
        assert "error" in v5 and "error" in ours  # MappedFileQueue.load refuses a file of the wrong length
    else:
        assert "error" not in v5 and v5["cl"], "the case must exercise records"


@pytest.mark.parametrize("case", CASES)
def test_5_3_3_and_4_9_8_recover_the_same_store(corpus: dict[str, Any], case: str) -> None:
    """Including 4.9.8 reading 5.3.3's store (``real``: trailing separators, 5.x property order, abort.bak, the
    5.x checkpoint) and 5.3.3 reading 4.9.8's (``real4``)."""
    views = corpus["views"][case]
    assert disagreements(views["v5"], views["v4"]) == []


def test_damage_is_really_recovered_from(corpus: dict[str, Any]) -> None:
    for base in WRITERS:
        intact = len(corpus["views"][base]["v5"]["cl"])
        for kind in ("torn_last_header", "bad_crc_abnormal", "bad_crc_normal", "torn_header"):
            assert len(corpus["views"][f"{base}-{kind}"]["v5"]["cl"]) < intact, (base, kind)
        assert len(corpus["views"][f"{base}-kill"]["v5"]["cl"]) == intact


@pytest.mark.parametrize("case", EARLY_CASES)
def test_normal_recovery_starts_where_the_consume_queues_end(corpus: dict[str, Any], case: str) -> None:
    """5.3.3 ``CommitLog.recoverNormally`` scans from the file holding the consume queues' max physical offset
    (the last one here): the flipped record in the file before is never checked and every record stays. 4.9.8
    scans the last three files, meets the bad CRC and truncates the CommitLog there -- and rmqspec with it."""
    views = corpus["views"][case]
    v5, v4, ours = views["v5"], views["v4"], views["ours"]
    writer = case.removesuffix(f"-{EARLY}")
    intact = corpus["views"][writer]["v5"]
    cut = corpus["victims"][case]
    # 4.9.8 and rmqspec: the CommitLog ends where the corrupt record starts, and they agree on all else
    assert v4["range"] == ours["range"] == (0, cut)
    assert disagreements(v4, ours) == []
    # 5.3.3: nothing lost; the flipped record reads back with its body as it now is on disk
    assert v5["range"] == intact["range"] and len(v5["cl"]) == len(intact["cl"]) > len(v4["cl"])
    assert v5["queues"] == intact["queues"]
    changed = [
        (a[0]["commitlog_offset"], field)
        for a, b in zip(v5["cl"], intact["cl"], strict=True)
        for field in FIELDS
        if a[0][field] != b[0][field]
    ]
    assert changed == [(cut, "body_b64")]


def test_consume_queue_rebuild_without_queues(realrmq: RealRocketMQ, realrmq4: RealRocketMQ, tmp_path: Path) -> None:
    """Consume queues deleted, clean shutdown, the workload on 16 KiB commitlog files (7 files).

    Intact commitlog: all three rebuild every queue (5.3.3 dispatches during ``recoverNormally``, from the
    first file since maxPhyOffsetOfConsumeQueue is -1; 4.9.8 from its reput, started at the commitlog's min
    offset). A corrupt record in the first file: 5.3.3's scan from the first file meets it and truncates the
    CommitLog there (the six later files are deleted); 4.9.8 scans the last three files only and its reput
    rebuilds the queues without checking CRCs, the corrupt record included. (rmqspec rebuilds as 4.9.8 does,
    then refuses to read that unit's record: BAD_CRC, so only the real sides are compared there.)"""
    src = tmp_path / "workload16k"
    write_workload(src, BrokerConfig(commitlog_file_size=SMALL), rounds=3)
    with MessageStore.open(_copy(src, tmp_path / "probe"), config=StoreConfig(commitlog_file_size=SMALL)) as s:
        records = [
            r
            for r in s.commitlog.scan(s.commitlog_min_offset, limit=s.commitlog_max_offset)
            if isinstance(r, DecodedRecord)
        ]
    assert len(list((src / "commitlog").iterdir())) >= 5
    gone = _copy(src, tmp_path / "cq_gone")
    shutil.rmtree(gone / "consumequeue")
    bad = _copy(src, tmp_path / "cq_gone_bad_crc_first_file")
    shutil.rmtree(bad / "consumequeue")
    victim = [r for r in records if r.commitlog_offset < SMALL and r.body][3]
    _flip_body_byte(bad, victim, SMALL)
    opts = f"-Doracle.clFileSize={SMALL}"
    v5_gone, v5_bad = real_views(
        realrmq, [_copy(gone, tmp_path / "v5-gone"), _copy(bad, tmp_path / "v5-bad")], opts=opts
    )
    v4_gone, v4_bad = real_views(
        realrmq4, [_copy(gone, tmp_path / "v4-gone"), _copy(bad, tmp_path / "v4-bad")], opts=opts
    )
    ours_gone = our_view(_copy(gone, tmp_path / "ours-gone"), file_size=SMALL)
    assert disagreements(v5_gone, ours_gone) == [] and disagreements(v5_gone, v4_gone) == []
    assert len(v5_gone["cl"]) == len(records) and len(v5_gone["cq"]) > 0
    assert v4_bad["range"] == v4_gone["range"] and len(v4_bad["cl"]) == len(records)
    assert v5_bad["range"] == (0, victim.commitlog_offset)
    assert [m["commitlog_offset"] for m, _ in v5_bad["cl"]] == [
        r.commitlog_offset for r in records if r.commitlog_offset < victim.commitlog_offset
    ]


# -- the files a 5.3.3 store leaves ----------------------------------------------------------------------------


def test_rmqspec_store_dump_lists_what_the_5_3_3_scan_lists(corpus: dict[str, Any], tmp_path: Path) -> None:
    for name in WRITERS:
        copy = _copy(corpus["pristine"] / name, tmp_path / name)
        proc = subprocess.run(
            [sys.executable, "-m", "rmqspec.cli.main", "store", "dump", str(copy), "--json"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr
        rows = [json.loads(line) for line in proc.stdout.splitlines()]
        real = [m for m, _tags in corpus["views"][name]["v5"]["cl"]]
        assert len(rows) == len(real)
        for row, want in zip(rows, real):
            for field in (
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
            ):
                assert row[field] == want[field], (name, row["commitlog_offset"], field)


def _checkpoint_longs(root: Path) -> tuple[int, ...]:
    return struct.unpack_from(">5q", (root / "checkpoint").read_bytes())


def test_clean_shutdown_leaves_the_same_files_and_an_abort_bak(corpus: dict[str, Any]) -> None:
    """The 5.3.3-written store as 4.9.8's tier checks its own, plus what 5.3.3 adds; and every store 5.3.3
    opened (a dump is a restart) shows the same."""
    root = corpus["pristine"] / "real"
    assert (root / "lock").read_bytes() == b"lock"
    assert (root / "index").is_dir()
    assert not (root / "abort").exists()
    assert (root / "abort.bak").read_bytes() == b""  # 5.x only; 4.9.8 leaves none
    assert not (corpus["pristine"] / "real4" / "abort.bak").exists()
    cp = read_checkpoint(root / "checkpoint")
    records = [m for m, _tags in corpus["views"]["real"]["v5"]["cl"]]
    dispatched = [m for m in records if m["sys_flag"] & 0xC not in (0x4, 0xC)]
    assert records[0]["store_ts"] <= cp.physic_msg_timestamp <= records[-1]["store_ts"]
    assert cp.logics_msg_timestamp == dispatched[-1]["store_ts"]
    assert cp.index_msg_timestamp == 0
    assert _checkpoint_longs(root)[3:] == (0, 0)  # a new store: recovery never set the confirm offset
    for name in WRITERS:
        reopened = corpus["base"] / f"v5-{name}"
        assert (reopened / "abort.bak").read_bytes() == b"" and not (reopened / "abort").exists(), name
        last = corpus["views"][name]["v5"]["cl"][-1][0]["commitlog_offset"]
        # recoverNormally: setConfirmOffset(lastValidMsgPhyOffset), the last record's start, into the checkpoint
        assert _checkpoint_longs(reopened)[3:] == (0, last), name


def test_the_rmqspec_check_store_as_it_is(realrmq: RealRocketMQ, tmp_path: Path) -> None:
    """The workload store with ``rmqspec check``'s own configuration (1 GiB commitlog files)."""
    root = tmp_path / "workload"
    write_workload(root, BrokerConfig(), rounds=1)
    (real,) = real_views(realrmq, [_copy(root, tmp_path / "real")], opts=f"-Doracle.clFileSize={GIB}")
    ours = our_view(_copy(root, tmp_path / "ours"), file_size=GIB)
    assert disagreements(real, ours) == []
    assert len(real["cl"]) > 100


# -- writing -----------------------------------------------------------------------------------------------------


def _pairs(properties: str) -> list[str]:
    return sorted(p for p in properties.split("\x02") if p)


def test_generated_messages_were_taken_as_4_9_8_takes_them(corpus: dict[str, Any]) -> None:
    """Same routing (delay levels to SCHEDULE_TOPIC_XXXX, halves), queue offsets and property pairs; 5.3.3's
    records with properties are one byte longer (the trailing separator) and most list them in another order."""
    v5 = [r for r in corpus["written"]["real"] if "i" in r]
    v4 = [r for r in corpus["written"]["real4"] if "i" in r]
    assert len(v5) == len(v4) == 120 and all(r["status"] == "PUT_OK" for r in v5 + v4)
    assert any(r["topic"] == "SCHEDULE_TOPIC_XXXX" for r in v5) and any(r["topic"] == HALF_TOPIC for r in v5)
    reordered = 0
    for a, b in zip(v5, v4, strict=True):
        for key in ("topic", "queue_id", "sys_flag", "queue_offset", "msg_num"):
            assert a[key] == b[key], (a["i"], key)
        assert _pairs(a["properties_string"]) == _pairs(b["properties_string"]), a["i"]
        if b["properties_string"]:
            assert a["properties_string"].endswith("\x02") and not b["properties_string"].endswith("\x02")
            assert a["wrote_bytes"] == b["wrote_bytes"] + 1
            reordered += a["properties_string"][:-1] != b["properties_string"]
        else:
            assert a["properties_string"] == "" and a["wrote_bytes"] == b["wrote_bytes"]
    assert reordered > len(v5) // 2  # HashMap(128) against HashMap(16): most multi-property orders differ


B = base64.b64encode(b"x").decode()
# (input line, 4.9.8's status, 5.3.3's status): where the two brokers' stores take a message differently
EDGES: list[tuple[dict[str, Any], str, str]] = [
    # 4.9.8 DefaultMessageStore.checkMessage counts chars (64 <= 127); 5.3.3 HookUtils.checkBeforePutMessage
    # counts UTF-8 bytes (128 > 127) for a topic that is not a retry topic
    ({"topic": "é" * 64, "queue_id": 0, "body_b64": B}, "PUT_OK", "MESSAGE_ILLEGAL"),
    # 5.3.3 lets retry topics through up to 255 bytes; 4.9.8 refuses any topic over 127 chars
    ({"topic": "%RETRY%" + "g" * 130, "queue_id": 0, "body_b64": B}, "MESSAGE_ILLEGAL", "PUT_OK"),
    ({"topic": "t" * 127, "queue_id": 0, "body_b64": B}, "PUT_OK", "PUT_OK"),
    ({"topic": "t" * 128, "queue_id": 0, "body_b64": B}, "MESSAGE_ILLEGAL", "MESSAGE_ILLEGAL"),
    # timer properties: plain properties to 4.9.8; 5.3.3 HookUtils.handleScheduleMessage -> timer message,
    # refused with the timer wheel off (the oracle's classic layout)
    (
        {"topic": "T0", "queue_id": 0, "body_b64": B, "properties": {"TIMER_DELIVER_MS": "9999999999999"}},
        "PUT_OK",
        "WHEEL_TIMER_NOT_ENABLE",
    ),
    (
        {"topic": "T0", "queue_id": 0, "body_b64": B, "properties": {"TIMER_DELAY_SEC": "10"}},
        "PUT_OK",
        "WHEEL_TIMER_NOT_ENABLE",
    ),
    # with a delay level too: a delay message in both; 5.3.3 (checkIfTimerMessage) drops the timer property
    (
        {"topic": "T0", "queue_id": 0, "body_b64": B, "properties": {"TIMER_DELAY_SEC": "10"}, "delay_level": 2},
        "PUT_OK",
        "PUT_OK",
    ),
    # 5.3.3 parseHalfMessageInner adds __transactionId__ = UNIQ_KEY
    (
        {
            "topic": "T0",
            "queue_id": 0,
            "body_b64": B,
            "properties": {"UNIQ_KEY": "AC11000100002A9F0000000000000001"},
            "half": True,
        },
        "PUT_OK",
        "PUT_OK",
    ),
    # INNER_NUM without the inner-batch sysFlag: 5.3.3 HookUtils.checkInnerBatch refuses it
    ({"topic": "T0", "queue_id": 0, "body_b64": B, "properties": {"INNER_NUM": "3"}}, "PUT_OK", "MESSAGE_ILLEGAL"),
    (
        {"topic": "T0", "queue_id": 0, "body_b64": base64.b64encode(bytes(4 * 1024 * 1024 + 1)).decode()},
        "MESSAGE_ILLEGAL",
        "MESSAGE_ILLEGAL",
    ),
    ({"topic": "T0", "queue_id": 0, "body_b64": B, "delay_level": 3, "sys_flag": 8}, "PUT_OK", "PUT_OK"),
    ({"topic": "T0", "queue_id": 0, "body_b64": B, "delay_level": 3, "sys_flag": 4}, "PUT_OK", "PUT_OK"),
]


def test_write_path_edges(realrmq: RealRocketMQ, realrmq4: RealRocketMQ, tmp_path: Path) -> None:
    lines = [line for line, _v4, _v5 in EDGES]
    v5 = [r for r in _oracle_write(realrmq, tmp_path / "v5", lines) if "i" in r]
    v4 = [r for r in _oracle_write(realrmq4, tmp_path / "v4", lines) if "i" in r]
    assert [r["status"] for r in v4] == [s for _l, s, _s in EDGES]
    assert [r["status"] for r in v5] == [s for _l, _s, s in EDGES]
    timer_and_delay, half = v5[6], v5[7]
    assert (
        "TIMER_DELAY_SEC" not in timer_and_delay["properties_string"]
        and timer_and_delay["topic"] == "SCHEDULE_TOPIC_XXXX"
    )
    assert "TIMER_DELAY_SEC" in v4[6]["properties_string"]
    assert "__transactionId__\x01AC11000100002A9F0000000000000001" in half["properties_string"]
    assert "__transactionId__" not in v4[7]["properties_string"]


def test_a_topic_of_128_to_255_bytes_breaks_the_commitlog_in_both(
    realrmq: RealRocketMQ, realrmq4: RealRocketMQ, tmp_path: Path
) -> None:
    """A retry topic of 68 chars and 129 UTF-8 bytes: both versions take it (4.9.8 counts chars; 5.3.3 lets retry
    topics reach 255 bytes and, with its stock autoMessageVersionOnTopicLen, picks the v2 format by chars:
    ``topic.length() > Byte.MAX_VALUE``) and write the v1 format's one-byte topic length, 129 -> -127; both read
    that byte signed (``MessageVersion.MESSAGE_VERSION_V1.getTopicLength``: ``buffer.get()``), so on restart
    the record fails ``checkMessageAndReturnSize`` and normal recovery ends the CommitLog there: the later
    message is lost too. (rmqspec's codec reads the length unsigned and keeps all three records.)"""
    lines = [
        {"topic": "T0", "queue_id": 0, "body_b64": B},
        {"topic": "%RETRY%" + "é" * 61, "queue_id": 0, "body_b64": B},
        {"topic": "T0", "queue_id": 0, "body_b64": B},
    ]
    stock = dict(os.environ, ORACLE_OPTS="-Doracle.autoMessageVersionOnTopicLen=true")
    for real in (realrmq, realrmq4):
        root = tmp_path / real.version
        src = tmp_path / f"{real.version}.jsonl"
        src.write_text("".join(json.dumps(line) + "\n" for line in lines))
        proc = subprocess.run(
            real.oracle("write", str(root), str(src)), capture_output=True, text=True, timeout=300, env=stock
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        written = [json.loads(line) for line in proc.stdout.splitlines() if '"i"' in line]
        assert [r["status"] for r in written] == ["PUT_OK"] * 3, real.version
        (view,) = real_views(real, [_copy(root, tmp_path / f"read-{real.version}")])
        assert view["range"] == (0, written[1]["wrote_offset"]), real.version
        assert [m["topic"] for m, _ in view["cl"]] == ["T0"], real.version
