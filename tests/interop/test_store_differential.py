"""Differential store tier: real RocketMQ 4.9.8's DefaultMessageStore and rmqspec read the same directories.

Stores come from both writers — the real store (``oracle.sh write`` of generated messages: unicode,
empty property values, non-ASCII topics, delays, halves, every transaction type, IPv6 born hosts,
records that roll 1 MiB files) and ours (``MessageStore.put`` of such records, and ``MmapBroker``
under the ``rmqspec check`` client workload: retries, DLQ, delays, transactions, checks, discards) —
and each is also read as damaged copies: a kill (abort file left), a torn tail, a flipped body byte
(CRC) with and without the abort file, a smashed record header, a short file. The real side is one
``real-rocketmq oracle dump-many`` JVM over copies (a dump recovers, so it mutates its copy); ours opens its own
copy with ``MessageStore.open`` (the same recovery). Both must agree on the recovered CommitLog range,
every recovered record, every consume-queue unit (with the message it points to) and every queue's
min/max offsets; ``rmqspec store dump`` must list the same records as the real scan of a clean store.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rmqspec.cli.workload import T0, run_workload
from rmqspec.impl.broker import MmapBroker
from rmqspec.impl.checkpoint import read_checkpoint
from rmqspec.impl.codec import DecodedRecord, MessageRecord
from rmqspec.impl.mappedfile import StoreError
from rmqspec.impl.store import MessageStore, StoreConfig
from rmqspec.model.clock import ManualClock
from rmqspec.model.config import BrokerConfig
from rmqspec.model.events import NullRecorder
from tests.interop.realrmq import RealRocketMQ

# make interop runs it after the wall-clock modules, never beside them (the Makefile)
pytestmark = pytest.mark.cpu_heavy

FILE = 1 << 20  # the oracle's default commitlog file size
GIB = 1 << 30
HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
FIELDS = (
    "commitlog_offset",
    "size",
    "topic",
    "queue_id",
    "queue_offset",
    "sys_flag",
    "flag",
    "born_ts",
    "store_ts",
    "born_host",
    "store_host",
    "reconsume_times",
    "prepared_txn_offset",
    "body_crc",
    "msg_id",
    "tags",
    "keys",
    "properties",
    "body_b64",
)


# -- generated messages -------------------------------------------------------------------------


def generated_messages(seed: int, n: int, *, routed: bool) -> list[dict[str, Any]]:
    """Oracle input lines; ``routed`` adds what only a writer with routing can take (delay, half)."""
    rng = random.Random(seed)
    topics = ["T0", "T1", "Orders", "tö", "a b", "%RETRY%g", "主题"]
    text = "abcé主😀 \t"
    out = []
    for i in range(n):
        big = i % 17 == 5
        body = rng.randbytes(rng.randint(150_000, 300_000) if big else rng.randint(0, 600))
        props = {}
        for _ in range(rng.randint(0, 4)):
            name = "p" + "".join(rng.choice("xyz019_") for _ in range(rng.randint(1, 6)))
            props[name] = "" if rng.random() < 0.2 else "".join(rng.choice(text) for _ in range(rng.randint(1, 30)))
        line: dict[str, Any] = {
            "topic": rng.choice(topics),
            "queue_id": rng.randint(0, 3),
            "body_b64": base64.b64encode(body).decode(),
            "properties": props,
            "flag": rng.randint(-(2**31), 2**31 - 1),
            "born_ts": 1_700_000_000_000 + i * 7,
            "born_host": "[::1]:5555" if rng.random() < 0.2 else f"10.0.0.{rng.randint(1, 254)}:{rng.randint(1, 9999)}",
            "reconsume_times": rng.randint(0, 20),
            "prepared_txn_offset": rng.randint(0, 2**40),
            "sys_flag": rng.choice([0, 0, 0, 0, 4, 8, 12]),
        }
        if rng.random() < 0.7:
            line["tags"] = "" if rng.random() < 0.15 else "".join(rng.choice(text) for _ in range(rng.randint(1, 8)))
        if rng.random() < 0.5:
            line["keys"] = " ".join("k" + str(rng.randint(0, 999)) for _ in range(rng.randint(1, 3)))
        if routed and rng.random() < 0.2:
            line["delay_level"] = rng.randint(1, 20)
        if routed and rng.random() < 0.1:
            line["half"] = True
            line["sys_flag"] = 0
        out.append(line)
    return out


def _host(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host.strip("[]"), int(port)


def message_record(line: dict[str, Any], i: int) -> MessageRecord:
    """Oracle input line ``i`` as rmqspec's ``MessageRecord`` (stored at ``T0 + i``)."""
    props = dict(line["properties"])
    if "tags" in line:
        props["TAGS"] = line["tags"]
    if "keys" in line:
        props["KEYS"] = line["keys"]
    return MessageRecord(
        topic=line["topic"],
        queue_id=line["queue_id"],
        body=base64.b64decode(line["body_b64"]),
        properties=props,
        sys_flag=line["sys_flag"],
        born_ts=line["born_ts"],
        store_ts=T0 + i,
        born_host=_host(line["born_host"]),
        reconsume_times=line["reconsume_times"],
        prepared_txn_offset=line["prepared_txn_offset"],
        flag=line["flag"],
    )


def write_ours(root: Path, lines: list[dict[str, Any]], config: StoreConfig | None = None) -> None:
    """The same messages through rmqspec's ``MessageStore.put`` (no routing: none are delayed or half)."""
    with MessageStore.open(root, config=config or StoreConfig(commitlog_file_size=FILE)) as store:
        for i, line in enumerate(lines):
            store.put(message_record(line, i))


def write_workload(root: Path, config: BrokerConfig, rounds: int) -> None:
    """The store ``rmqspec check`` leaves in work/workload: the client workload on ``MmapBroker``."""
    clock = ManualClock(T0)
    broker = MmapBroker.open(root, clock, config, NullRecorder())
    try:
        run_workload(broker, clock, NullRecorder(), rounds=rounds)
    finally:
        broker.close()


# -- damage ------------------------------------------------------------------------------------------


def _records(root: Path) -> list[DecodedRecord]:
    with MessageStore.open(root, config=StoreConfig(commitlog_file_size=FILE)) as store:
        return [
            r
            for r in store.commitlog.scan(store.commitlog_min_offset, limit=store.commitlog_max_offset)
            if isinstance(r, DecodedRecord)
        ]


def _in_last_file(records: list[DecodedRecord], want_body: bool) -> DecodedRecord:
    last_file = records[-1].commitlog_offset // FILE
    pool = [r for r in records if r.commitlog_offset // FILE == last_file and (r.body or not want_body)]
    return pool[len(pool) // 2]


def _commitlog_file(root: Path, offset: int) -> Path:
    return root / "commitlog" / f"{offset // FILE * FILE:020d}"


def _patch(path: Path, pos: int, data: bytes) -> None:
    with path.open("r+b") as f:
        f.seek(pos)
        f.write(data)


def damage(root: Path, kind: str, records: list[DecodedRecord]) -> None:
    """Damage the store at ``root`` in place (``records``: its records before the damage)."""
    abort = root / "abort"
    if kind == "kill":
        abort.touch()
    elif kind == "torn_tail":  # the last record half written, the rest of the file zero
        last = records[-1]
        start = last.commitlog_offset + last.size // 2
        _patch(_commitlog_file(root, start), start % FILE, bytes(last.size - last.size // 2))
        abort.touch()
    elif kind == "torn_last_header":  # the last record's size and magic survive, the rest is zero
        last = records[-1]
        _patch(_commitlog_file(root, last.commitlog_offset), last.commitlog_offset % FILE + 8, bytes(last.size - 8))
        abort.touch()
    elif kind in ("bad_crc_abnormal", "bad_crc_normal"):
        r = _in_last_file(records, want_body=True)
        pos = r.commitlog_offset + _body_start(r)  # the first body byte
        path = _commitlog_file(root, pos)
        with path.open("r+b") as f:
            f.seek(pos % FILE)
            byte = f.read(1)[0]
            f.seek(pos % FILE)
            f.write(bytes([byte ^ 0x5A]))
        if kind == "bad_crc_abnormal":
            abort.touch()
    elif kind == "torn_header":  # garbage over a record's size and magic
        r = _in_last_file(records, want_body=False)
        _patch(_commitlog_file(root, r.commitlog_offset), r.commitlog_offset % FILE, b"\x13\x37" * 4)
        abort.touch()
    elif kind == "short_file":  # a commitlog file shorter than the mapped-file size
        path = _commitlog_file(root, records[-1].commitlog_offset)
        os.truncate(path, FILE // 2)
    else:
        raise ValueError(kind)


def _body_start(r: DecodedRecord) -> int:
    born = 20 if r.sys_flag & 0x10 else 8
    store = 20 if r.sys_flag & 0x20 else 8
    return 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + born + 8 + store + 4 + 8 + 4


DAMAGE = ("kill", "torn_tail", "torn_last_header", "bad_crc_abnormal", "bad_crc_normal", "torn_header", "short_file")


# -- the two readers -------------------------------------------------------------------------------


def _norm_host(text: str) -> str:
    host, port = _host(text)
    return f"{ipaddress.ip_address(host)}:{port}"


def _real_message(row: dict[str, Any]) -> dict[str, Any]:
    out = {k: row.get(k) for k in FIELDS}
    out["born_host"] = _norm_host(row["born_host"])
    out["store_host"] = _norm_host(row["store_host"])
    return out


def _our_message(r: DecodedRecord) -> dict[str, Any]:
    return {
        "commitlog_offset": r.commitlog_offset,
        "size": r.size,
        "topic": r.topic,
        "queue_id": r.queue_id,
        "queue_offset": r.queue_offset,
        "sys_flag": r.sys_flag,
        "flag": r.flag,
        "born_ts": r.born_ts,
        "store_ts": r.store_ts,
        "born_host": f"{r.born_host[0]}:{r.born_host[1]}",
        "store_host": f"{r.store_host[0]}:{r.store_host[1]}",
        "reconsume_times": r.reconsume_times,
        "prepared_txn_offset": r.prepared_txn_offset,
        "body_crc": r.body_crc,
        "msg_id": r.msg_id,
        "tags": r.tags,
        "keys": list(r.keys),
        "properties": dict(sorted(r.properties.items())),
        "body_b64": base64.b64encode(r.body).decode(),
    }


def real_views(realrmq: RealRocketMQ, paths: list[Path], opts: str = "") -> list[dict[str, Any]]:
    """One ``real-rocketmq oracle dump-many`` JVM over ``paths``; per store its normalized view."""
    listing = paths[0].parent / f"dump-many-{paths[0].name}.txt"
    listing.write_text("".join(f"{p}\n" for p in paths))
    env = dict(os.environ, ORACLE_OPTS=opts)
    proc = subprocess.run(
        realrmq.oracle("dump-many", str(listing)),
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert proc.returncode in (0, 3), proc.stderr[-2000:]  # 3: some store refused (reported per store)
    views: dict[str, dict[str, Any]] = {}
    current: dict[str, Any] | None = None
    for line in proc.stdout.splitlines():
        row = json.loads(line)
        kind = row.get("kind")
        if kind == "store":
            current = views.setdefault(row["path"], {"cq": [], "cl": []})
        elif current is None:
            continue
        elif kind == "error":
            current["error"] = row.get("error", "")
        elif kind == "recovery":
            current["range"] = (row["commitlog_min_offset"], row["commitlog_max_offset"])
            current["queues"] = {
                (q["topic"], q["queue_id"]): (q["min_offset"], q["max_offset"], q["max_physic_offset"])
                for q in row["queues"]
                if q["max_offset"] > 0  # ScheduleMessageService opens its 18 queues empty
            }
        elif kind == "cq":
            current["cq"].append(
                (
                    (row["cq_topic"], row["cq_queue_id"], row["cq_offset"]),
                    (row["cq_phy_offset"], row["cq_size"], row["cq_tags_code"]),
                    _real_message(row) if row.get("get_status") == "FOUND" else None,
                )
            )
        elif kind == "cl":
            current["cl"].append((_real_message(row), row["dispatch_tags_code"]))
        elif kind == "cl_error":
            current["cl_error"] = row["offset"]
    return [views[str(p)] for p in paths]


def our_view(root: Path, file_size: int = FILE) -> dict[str, Any]:
    """The same view through rmqspec's recovery (``MessageStore.open``) and reader."""
    try:
        store = MessageStore.open(root, config=StoreConfig(commitlog_file_size=file_size))
    except StoreError as exc:
        return {"error": str(exc), "cq": [], "cl": []}
    try:
        view: dict[str, Any] = {"range": (store.commitlog_min_offset, store.commitlog_max_offset)}
        queues, cq = {}, []
        for topic, qid in store.queues():
            lo, hi = store.min_offset(topic, qid), store.max_offset(topic, qid)
            if hi == 0:
                continue
            units = store.queue_units(topic, qid, lo, hi - lo)
            queues[(topic, qid)] = (lo, hi, units[-1].commitlog_offset + units[-1].size)
            for u in units:
                cq.append(
                    (
                        (topic, qid, u.queue_offset),
                        (u.commitlog_offset, u.size, u.tags_code),
                        _our_message(store.read(u.commitlog_offset)),
                    )
                )
        view["queues"] = queues
        view["cq"] = sorted(cq, key=lambda row: row[0])
        view["cl"] = [
            (_our_message(r), r.tags_code(store.config.delay_levels_ms))
            for r in store.commitlog.scan(store.commitlog_min_offset, limit=store.commitlog_max_offset)
            if isinstance(r, DecodedRecord)
        ]
        return view
    finally:
        store.close()


def disagreements(real: dict[str, Any], ours: dict[str, Any]) -> list[str]:
    """Every difference between the two views, one line each (empty: they agree)."""
    if "error" in real or "error" in ours:
        if "error" in real and "error" in ours:
            return []
        return [f"only one side refused the store: real={real.get('error')!r} ours={ours.get('error')!r}"]
    out = []
    if real["range"] != ours["range"]:
        out.append(f"commitlog [min, max) real={real['range']} ours={ours['range']}")
    for key in sorted(set(real["queues"]) | set(ours["queues"])):
        if real["queues"].get(key) != ours["queues"].get(key):
            real_q, our_q = real["queues"].get(key), ours["queues"].get(key)
            out.append(f"queue {key} (min, max, maxPhysic) real={real_q} ours={our_q}")
    real_cq = {row[0]: row[1:] for row in real["cq"]}
    our_cq = {row[0]: row[1:] for row in ours["cq"]}
    for key in sorted(set(real_cq) | set(our_cq)):
        if real_cq.get(key) != our_cq.get(key):
            out.append(f"consume-queue unit {key}: real={real_cq.get(key)!r:.300} ours={our_cq.get(key)!r:.300}")
    if len(real["cl"]) != len(ours["cl"]):
        out.append(f"{len(real['cl'])} real records, {len(ours['cl'])} ours")
    for (rm, rt), (om, ot) in zip(real["cl"], ours["cl"]):
        for field in FIELDS:
            if rm[field] != om[field]:
                out.append(f"record @{rm['commitlog_offset']} {field}: real={rm[field]!r:.200} ours={om[field]!r:.200}")
        if rt != ot:
            out.append(f"record @{rm['commitlog_offset']} tagsCode: real={rt} ours={ot}")
    return out


# -- the corpus ----------------------------------------------------------------------------------------


def _oracle_write(realrmq: RealRocketMQ, root: Path, lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    src = root.parent / f"{root.name}.jsonl"
    src.write_text("".join(json.dumps(line) + "\n" for line in lines))
    proc = subprocess.run(
        realrmq.oracle("write", str(root), str(src)), capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return [json.loads(line) for line in proc.stdout.splitlines()]


def _copy(src: Path, dst: Path) -> Path:
    subprocess.run(["cp", "-r", "--sparse=always", str(src), str(dst)], check=True)
    return dst


@pytest.fixture(scope="module")
def corpus(realrmq: RealRocketMQ, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("differential")
    pristine = base / "pristine"
    pristine.mkdir()
    written = _oracle_write(realrmq, pristine / "real", generated_messages(1, 120, routed=True))
    write_ours(pristine / "ours", generated_messages(2, 120, routed=False))
    write_workload(pristine / "workload", BrokerConfig(commitlog_file_size=FILE), rounds=3)
    cases: dict[str, Path] = {}
    work = base / "cases"
    work.mkdir()
    for name in ("real", "ours", "workload"):
        records = _records(_copy(pristine / name, work / f"probe-{name}"))
        cases[name] = pristine / name
        for kind in DAMAGE:
            path = _copy(pristine / name, work / f"{name}-{kind}")
            damage(path, kind, records)
            cases[f"{name}-{kind}"] = path
    real_copies = [_copy(path, base / f"real-{name}") for name, path in cases.items()]
    our_copies = {name: _copy(path, base / f"ours-{name}") for name, path in cases.items()}
    reals = real_views(realrmq, real_copies)
    views = {name: (real, our_view(our_copies[name])) for name, real in zip(cases, reals)}
    return {"pristine": pristine, "views": views, "written": written}


CASES = [name for base in ("real", "ours", "workload") for name in (base, *(f"{base}-{k}" for k in DAMAGE))]


def _torn_record_kept(real: dict[str, Any], ours: dict[str, Any]) -> bool:
    """docs/fidelity.md "RocketMQ keeps a torn record": the last record's tail is zeros but its body (all the
    CRC covers) is whole; RocketMQ keeps it (and its unit), rmqspec cuts the CommitLog where it starts."""
    if "error" in real or "error" in ours or len(real["cl"]) != len(ours["cl"]) + 1:
        return False
    torn = real["cl"][-1][0]
    cut = torn["commitlog_offset"]
    ours_without = {**real, "range": (real["range"][0], cut), "cl": real["cl"][:-1],
                    "cq": [row for row in real["cq"] if row[1][0] != cut],
                    "queues": ours["queues"]}
    return ours["range"][1] == cut and disagreements(ours_without, ours) == []


@pytest.mark.parametrize("case", CASES)
def test_real_and_rmqspec_recover_the_same_store(corpus: dict[str, Any], case: str) -> None:
    real, ours = corpus["views"][case]
    if case.endswith("-torn_tail") and _torn_record_kept(real, ours):
        return  # the documented RocketMQ behaviour, exactly: nothing else differs
    assert disagreements(real, ours) == []
    if case.endswith("short_file"):
        assert "error" in real and "error" in ours  # both refuse a file of the wrong length
    else:
        assert "error" not in real and real["cl"], "the case must exercise records"


def test_damage_is_really_recovered_from(corpus: dict[str, Any]) -> None:
    """The damaged copies lose records (the cases test recovery, not just reading)."""
    for base in ("real", "ours", "workload"):
        intact = len(corpus["views"][base][0]["cl"])
        # (torn_tail may keep its record: the CRC covers the body only, see docs/fidelity.md)
        for kind in ("torn_last_header", "bad_crc_abnormal", "bad_crc_normal", "torn_header"):
            assert len(corpus["views"][f"{base}-{kind}"][0]["cl"]) < intact, (base, kind)
        assert len(corpus["views"][f"{base}-kill"][0]["cl"]) == intact


def test_rmqspec_store_dump_lists_what_the_real_scan_lists(corpus: dict[str, Any], tmp_path: Path) -> None:
    for name in ("real", "ours", "workload"):
        copy = _copy(corpus["pristine"] / name, tmp_path / name)
        proc = subprocess.run(
            [sys.executable, "-m", "rmqspec.cli.main", "store", "dump", str(copy), "--json"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr
        rows = [json.loads(line) for line in proc.stdout.splitlines()]
        real = [m for m, _tags in corpus["views"][name][0]["cl"]]
        assert len(rows) == len(real)
        for row, want in zip(rows, real):
            for field in ("commitlog_offset", "size", "topic", "queue_id", "queue_offset", "sys_flag",
                          "born_ts", "store_ts", "reconsume_times", "prepared_txn_offset", "body_crc",
                          "msg_id", "tags", "keys", "properties", "body_b64"):
                assert row[field] == want[field], (name, row["commitlog_offset"], field)


def test_clean_shutdown_leaves_the_same_files(corpus: dict[str, Any]) -> None:
    """lock holds ``lock``, index/ exists, the checkpoint is (last flushed, last dispatched, 0) on both sides."""
    for name in ("real", "ours", "workload"):
        root = corpus["pristine"] / name
        assert (root / "lock").read_bytes() == b"lock", name
        assert (root / "index").is_dir(), name
        assert not (root / "abort").exists(), name
        cp = read_checkpoint(root / "checkpoint")
        records = [m for m, _tags in corpus["views"][name][0]["cl"]]
        dispatched = [m for m in records if m["sys_flag"] & 0xC not in (0x4, 0xC)]
        # physic: the storeTs seen by the last flush pass (the real FlushRealTimeService runs every
        # 500 ms and its final flush at shutdown does not update it); rmqspec's close() is a flush
        # pass after the last write, one of the values the real store can leave.
        assert records[0]["store_ts"] <= cp.physic_msg_timestamp <= records[-1]["store_ts"], name
        if name != "real":
            assert cp.physic_msg_timestamp == records[-1]["store_ts"], name
        assert cp.logics_msg_timestamp == dispatched[-1]["store_ts"], name
        assert cp.index_msg_timestamp == 0, name


def test_the_rmqspec_check_store_as_it_is(realrmq: RealRocketMQ, tmp_path: Path) -> None:
    """The workload store with ``rmqspec check``'s own configuration (1 GiB commitlog files)."""
    root = tmp_path / "workload"
    write_workload(root, BrokerConfig(), rounds=1)
    (real,) = real_views(realrmq, [_copy(root, tmp_path / "real")], opts=f"-Doracle.clFileSize={GIB}")
    ours = our_view(_copy(root, tmp_path / "ours"), file_size=GIB)
    assert disagreements(real, ours) == []
    assert len(real["cl"]) > 100


def test_generated_messages_were_taken_by_the_real_store(corpus: dict[str, Any]) -> None:
    """The real writer stored what it was given, except where 4.9.8 refuses or drops (none here)."""
    rows = [r for r in corpus["written"] if "i" in r]
    assert len(rows) == 120 and all(r["status"] == "PUT_OK" for r in rows)
    assert any(r["topic"] == "SCHEDULE_TOPIC_XXXX" for r in rows) and any(r["topic"] == HALF_TOPIC for r in rows)
