"""Crash states recovered by the real RocketMQ 4.9.8 ``DefaultMessageStore`` and by ours: the same records kept.

The states are the ones ``make test`` explores (``impl/crashtest.py``: every
recorded workload, seeded sampling), each written twice: one copy recovered
by our ``MessageStore``, the other by the real store through
``real-rocketmq oracle dump-many`` (``JVMS`` JVMs in parallel, commitlog files of the
workloads' 8 KiB, their delay levels). Compared per state: the CommitLog max
offset, the records kept (offset, size), every consume-queue unit (commitlog
offset, size, tagsCode).

A disagreement must be one of RocketMQ's documented behaviours
(``docs/fidelity.md``, "Crash-state exploration"), recognised from the state
itself before recovery; anything else fails the test.

Budget: the real store spends ~1.5 s per state, most of it asleep (a fixed 1 s
sleep in ``DefaultMessageStore.shutdown`` and start-up waits), so four JVMs
share the two cores of the CI machine; 1,000 states (the default;
``RMQSPEC_INTEROP_CRASH_STATES`` overrides it, ``RMQSPEC_INTEROP_CRASH_WORKLOADS`` names the workloads)
take the time the closing line prints. A workload with its own consume-queue file size (``retention``'s
10-unit files) is recovered by an oracle batch told that size.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from rmqspec.impl import crashfs, crashtest, crashwork
from rmqspec.impl.codec import SCHEDULE_TOPIC, CorruptRecord, DecodedRecord, decode_at
from rmqspec.impl.codec import tags_code as compute_tags_code
from rmqspec.impl.commitlog import ScanStop
from rmqspec.impl.consumequeue import UNIT_SIZE, unpack_unit
from rmqspec.impl.crashfs import CrashState
from rmqspec.impl.store import MessageStore, StoreConfig
from tests.interop.realrmq import RealRocketMQ

# make interop runs it after the wall-clock modules, never beside them (the Makefile)
pytestmark = pytest.mark.cpu_heavy

STATES = int(os.environ.get("RMQSPEC_INTEROP_CRASH_STATES", "1000"))
JVMS = int(os.environ.get("RMQSPEC_INTEROP_ORACLE_JVMS", "4"))  # asleep most of the time: see above
WORKLOADS = os.environ.get("RMQSPEC_INTEROP_CRASH_WORKLOADS", "")  # comma-separated names; default: every workload
REPO = Path(__file__).resolve().parents[2]

Summary = dict[str, Any]


def _ours(state: CrashState, directory: Path, config: StoreConfig) -> Summary:
    crashfs.materialize(state, directory)
    try:
        store = MessageStore.open(directory, config=config)
    except Exception as exc:  # compared with the real store's answer
        return {"error": f"{type(exc).__name__}: {exc}"}
    records = []
    for item in store.commitlog.scan(store.commitlog_min_offset, limit=store.commitlog_max_offset, check_crc=False):
        if isinstance(item, ScanStop):
            break
        records.append((item.commitlog_offset, item.size))
    queues, mins = {}, {}
    for key in store.queues():  # from the min offset, as the oracle lists them (getMinOffsetInQueue: retention)
        units = store.queue_units(*key, store.min_offset(*key), 1 << 30)
        if units:
            queues[key] = [(u.commitlog_offset, u.size, u.tags_code) for u in units]
            mins[key] = units[0].queue_offset
    summary = {"max": store.commitlog_max_offset, "records": records, "cq": queues, "cq_min": mins}
    store.crash("kill")
    return summary


def _theirs(realrmq: RealRocketMQ, directories: list[Path], workdir: Path, delay_levels: str,
            cq_file_size: int) -> dict[str, Summary]:
    env = dict(
        os.environ,
        ORACLE_OPTS=f"-Doracle.clFileSize={crashwork.COMMITLOG_FILE_SIZE} -Doracle.cqFileSize={cq_file_size}",
        JDK_JAVA_OPTIONS=f'"-Doracle.delayLevels={delay_levels}"',  # quoted: the value has spaces
    )
    procs = []
    for j in range(JVMS):
        listing = workdir / f"list{j}"
        listing.write_text("".join(f"{d}\n" for d in directories[j::JVMS]))
        out = open(workdir / f"out{j}", "w")  # noqa: SIM115 - closed below
        err = open(workdir / f"err{j}", "w")  # noqa: SIM115 - closed below
        procs.append((subprocess.Popen(realrmq.oracle("dump-many", str(listing)),
                                       stdout=out, stderr=err, env=env), out, err))
    for j, (proc, out, err) in enumerate(procs):
        proc.wait()
        out.close()
        err.close()
        if proc.returncode not in (0, 3):  # 3: some store refused to load (answered); else its states read "no answer"
            tail = (workdir / f"err{j}").read_text(errors="replace")[-2000:]
            print(f"oracle JVM {j} exited {proc.returncode}:\n{tail}", file=sys.stderr)
    summaries: dict[str, Summary] = {}
    for j in range(JVMS):
        current: Summary = {}
        for line in (workdir / f"out{j}").read_text().splitlines():
            if not line.startswith("{"):
                continue
            doc = json.loads(line)
            kind = doc["kind"]
            if kind == "store":
                current = {"records": [], "cq": defaultdict(list)}
                summaries[doc["path"]] = current
            elif kind == "error":
                current["error"] = doc["error"]
            elif kind == "recovery":
                current["max"] = doc["commitlog_max_offset"]
            elif kind == "cl":
                current["records"].append((doc["scan_offset"], doc["size"]))
            elif kind == "cq":
                key = (doc["cq_topic"], doc["cq_queue_id"])
                current["cq"][key].append((doc["cq_phy_offset"], doc["cq_size"], doc["cq_tags_code"]))
                current.setdefault("cq_min", {}).setdefault(key, doc["cq_offset"])
    for summary in summaries.values():
        summary["cq"] = {k: v for k, v in summary.get("cq", {}).items() if v}
    return summaries


# -- RocketMQ's documented behaviours (docs/fidelity.md), recognised from the state before recovery -------


def _file_bytes(state: CrashState, path: str) -> bytes:
    length, pages = crashfs.state_files(state).get(path, (0, {}))
    out = bytearray(length)
    for page, content in pages.items():
        start = page * crashfs.PAGE
        out[start : min(start + crashfs.PAGE, length)] = content[: length - start]
    return bytes(out)


def _torn_tail_kept(state: CrashState, ours: Summary, theirs: Summary, file_size: int) -> bool:
    """RocketMQ keeps a record whose properties tail is zeros (it checks lengths and the body CRC only)."""
    if theirs.get("max", -1) <= ours["max"]:
        return False
    kept = [r for r in theirs["records"] if r[0] >= ours["max"]]
    if not kept:
        return False
    offset = kept[0][0]
    name = f"commitlog/{offset - offset % file_size:020d}"
    data = _file_bytes(state, name)
    pos = offset % file_size
    try:
        lenient = decode_at(data, pos, base_offset=offset - pos, check_tail=False)
    except CorruptRecord:
        return False
    try:
        decode_at(data, pos, base_offset=offset - pos)
    except CorruptRecord as exc:
        return isinstance(lenient, DecodedRecord) and exc.code == "TRUNCATED"
    return False


def _unit_differences(ours: Summary, theirs: Summary) -> list[tuple[tuple[str, int], int, tuple, tuple]]:
    out = []
    for key in set(ours["cq"]) | set(theirs["cq"]):
        a, b = ours["cq"].get(key, []), theirs["cq"].get(key, [])
        if len(a) != len(b):
            out.append((key, -1, (), ()))
        out += [(key, i, u, v) for i, (u, v) in enumerate(zip(a, b, strict=False)) if u != v]
    return out


def _unit_on_disk(state: CrashState, key: tuple[str, int], offset: int, cq_file_size: int) -> tuple | None:
    """The unit at queue offset ``offset`` as the state's consume-queue file holds it (None past its end)."""
    at = offset * UNIT_SIZE
    on_disk = _file_bytes(state, f"consumequeue/{key[0]}/{key[1]}/{at - at % cq_file_size:020d}")
    at %= cq_file_size
    return unpack_unit(on_disk, at) if at + UNIT_SIZE <= len(on_disk) else None


def _units_explained(state: CrashState, ours: Summary, theirs: Summary, delays: tuple[int, ...],
                     cq_file_size: int) -> str | None:
    """Every differing unit is one RocketMQ keeps or makes up: the same offset and size with the torn
    tagsCode on disk, a delay unit rebuilt before it knew the delay levels, or a (0, 0, 0) unit at the start of
    a queue's last file, which holds no unit (truncateDirtyLogicFiles takes it unchecked). The names of the
    behaviours, or None."""
    names = set()
    for key, index, ours_unit, their_unit in _unit_differences(ours, theirs):
        mine, real = ours["cq"].get(key, []), theirs["cq"].get(key, [])
        start = theirs.get("cq_min", {}).get(key, 0)
        if index < 0 and real == [*mine, (0, 0, 0)] and ours.get("cq_min", {}).get(key, start) == start:
            phantom = start + len(mine)
            if (phantom * UNIT_SIZE) % cq_file_size == 0 and \
                    _unit_on_disk(state, key, phantom, cq_file_size) == (0, 0, 0):
                names.add("phantom unit in an empty consume-queue file")
                continue
        if index < 0 or ours_unit[:2] != their_unit[:2]:
            return None
        if _unit_on_disk(state, key, start + index, cq_file_size) == their_unit:
            names.add("torn consume-queue unit kept")
            continue
        if key[0] == SCHEDULE_TOPIC:
            record = _record_at(state, ours_unit[0])
            if record is not None and their_unit[2] == compute_tags_code("T", record.properties, 0, delays):
                names.add("delay unit rebuilt without the delay table")
                continue
        return None
    return ", ".join(sorted(names))


def _record_at(state: CrashState, offset: int) -> DecodedRecord | None:
    size = crashwork.COMMITLOG_FILE_SIZE
    data = _file_bytes(state, f"commitlog/{offset - offset % size:020d}")
    item = decode_at(data, offset % size, base_offset=offset - offset % size, check_crc=False)
    return item if isinstance(item, DecodedRecord) else None


def _empty_file_refused(state: CrashState, theirs: Summary) -> bool:
    """RocketMQ refuses to start on a file created but not yet sized (MappedFileQueue.load)."""
    return "error" in theirs and any(
        length == 0 and path.split("/")[0] in ("commitlog", "consumequeue")
        for path, (length, _pages) in crashfs.state_files(state).items()
    )


def explain(state: CrashState, ours: Summary, theirs: Summary, config: Any) -> str | None:
    """The documented RocketMQ behaviour behind a disagreement, or None."""
    if "error" in ours:
        return None
    if "error" in theirs:
        return "empty file refused" if _empty_file_refused(state, theirs) else None
    if _torn_tail_kept(state, ours, theirs, config.commitlog_file_size):
        return "torn record kept"
    if ours["max"] == theirs["max"] and ours["records"] == theirs["records"]:
        return _units_explained(state, ours, theirs, config.delay_levels_ms, config.consume_queue_file_size)
    return None


def test_the_real_store_keeps_what_ours_keeps(realrmq: RealRocketMQ) -> None:
    root = crashtest.scratch_root()
    t0 = time.perf_counter()
    try:
        items = []
        workloads = crashtest.workloads_named(WORKLOADS.split(",")) if WORKLOADS else list(crashwork.WORKLOADS.values())
        for i, workload in enumerate(workloads):
            prepared = crashtest.prepare(workload, root / f"w{i}")
            share = STATES // len(workloads) + (1 if i < STATES % len(workloads) else 0)
            states, _exhaustive = crashtest.select_states(
                prepared.points, share, random.Random(f"interop/{workload.name}")
            )
            items += [(workload, state) for state in states]
        ours: list[Summary] = []
        real_dirs: list[Path] = []
        for k, (workload, state) in enumerate(items):
            config = StoreConfig(
                commitlog_file_size=workload.config.commitlog_file_size,
                cq_file_size=workload.config.consume_queue_file_size,
                delay_levels_ms=workload.config.delay_levels_ms,
            )
            ours.append(_ours(state, root / f"ours{k}", config))
            real_dirs.append(root / f"real{k}")
            crashfs.materialize(state, real_dirs[-1])
        t_ours = time.perf_counter() - t0
        theirs: dict[str, Summary] = {}
        for cq_size in sorted({w.config.consume_queue_file_size for w, _ in items}):  # one oracle batch per size
            dirs = [d for d, (wl, _) in zip(real_dirs, items, strict=True)
                    if wl.config.consume_queue_file_size == cq_size]
            batch = root / f"oracle-{cq_size}"
            batch.mkdir()
            theirs |= _theirs(realrmq, dirs, batch, crashwork.DELAY_LEVELS, cq_size)
        t_theirs = time.perf_counter() - t0 - t_ours
        explained: Counter[str] = Counter()
        examples: dict[str, str] = {}
        unexplained = []
        for k, (workload, state) in enumerate(items):
            a, b = ours[k], theirs.get(str(real_dirs[k]), {"error": "no answer from the real store"})
            if "error" not in a and "error" not in b and (a["max"], a["records"], a["cq"]) == (
                b["max"],
                b["records"],
                b["cq"],
            ):
                continue
            name = explain(state, a, b, workload.config)
            sid = crashtest.state_id(workload.name, state)
            if name is None:
                unexplained.append(f"{sid}: ours {_short(a)} | RocketMQ {_short(b)}")
                print(f"unexplained {sid}: ours {a} | RocketMQ {b}", file=sys.stderr)
            else:
                explained[name] += 1
                examples.setdefault(name, sid)
        print(
            f"\n{len(items)} crash states recovered by both stores: ours {t_ours:.1f} s (with writing both copies), "
            f"RocketMQ {t_theirs:.1f} s with {JVMS} JVMs ({t_theirs / len(items) * JVMS:.2f} s per state per JVM); "
            f"{len(items) - sum(explained.values()) - len(unexplained)} identical, "
            f"{sum(explained.values())} documented RocketMQ behaviours, {len(unexplained)} unexplained",
            file=sys.stderr,
        )
        for name, n in sorted(explained.items()):
            print(f"  {name}: {n} state(s), e.g. {examples[name]}", file=sys.stderr)
        assert len(items) >= STATES
        assert not unexplained, "\n".join(unexplained[:20])
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _short(summary: Summary) -> str:
    if "error" in summary:
        return f"error {summary['error'][:200]}"
    return f"max {summary['max']}, {len(summary['records'])} records, {sum(map(len, summary['cq'].values()))} units"


def test_recovery_throughput_against_the_real_store(realrmq: RealRocketMQ) -> None:
    """bench/bench_crash.py --real: ours against DefaultMessageStore on the same directory (figures printed)."""
    done = subprocess.run(
        [sys.executable, "-m", "bench", "crash", "--", "--skip-states", "--records", "100000", "--real"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=dict(os.environ, RMQ_VERSION=realrmq.version),
        timeout=900,
    )
    print("\n" + done.stdout, file=sys.stderr)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "throughput ours/RocketMQ" in done.stdout
