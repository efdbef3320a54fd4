"""Crash-state exploration benchmark: states checked per second; recovery against a raw read and RocketMQ.

- **states/s**: ``crashtest.explore`` over every recorded workload (state
  selection, materialization, recovery through ``MmapBroker``, the oracle and
  ``store verify``), against a baseline that only materializes each of the
  same states and reads their written bytes back (the floor any checker pays).
- **recovery vs raw read**: one store of ``--records`` 200-byte messages,
  recovered abnormally (abort file present) with its consume queues intact
  (every unit compared) and with them deleted (every unit rebuilt), and
  ``store verify``, each against a plain sequential read of the same bytes
  (page cache warm, best of 3).
- **recovery vs RocketMQ** (``--real``, needs Java and Maven: ``scripts/real-rocketmq oracle``): the same
  directory recovered by the real ``DefaultMessageStore`` (``oracle.sh dump``
  with INFO logs; its recovery time is the span from ``last shutdown`` to
  ``load over`` in its own log, so JVM start and the dump's output do not
  count) and by ours (``MessageStore.open``). The figure is ours/theirs
  throughput; the goal is ≥ 0.5. With the consume queues intact RocketMQ
  logs one WARN per record ("build consume queue repeatedly"), part of its
  real cost.

Usage: ``python -m bench crash [-- --states N --records N --real]``.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from bench.bench_store import _records as store_records
from rmqspec.impl import crashfs, crashtest, crashwork
from rmqspec.impl.codec import MessageRecord
from rmqspec.impl.store import MessageStore, StoreConfig
from rmqspec.impl.verify import verify_store

FILE_SIZE = 64 * 1024 * 1024
REPO = Path(__file__).resolve().parents[1]
REAL_VERSION = os.environ.get("RMQ_VERSION", "4.9.8")  # the store oracle's RocketMQ (scripts/real-rocketmq)


def _records(n: int) -> list[MessageRecord]:
    """The store benchmark's records (200-byte bodies)."""
    return store_records(n, 200)


def make_store(root: Path, n: int) -> int:
    """A crashed store (abort file present) of ``n`` records; returns its CommitLog end."""
    with MessageStore.open(root, config=StoreConfig(commitlog_file_size=FILE_SIZE, flush="ASYNC")) as store:
        for r in _records(n):
            store.put(r)
        end = store.commitlog_max_offset
    (root / "abort").touch()
    return end


def _plain_read(root: Path) -> float:
    t0 = time.perf_counter()
    for path in sorted(p for p in root.rglob("0*") if p.is_file()):
        with open(path, "rb") as f:
            for extent_start, extent_end in _extents(path):
                f.seek(extent_start)
                left = extent_end - extent_start
                while left > 0:
                    chunk = f.read(min(left, 1 << 20))
                    if not chunk:
                        break
                    left -= len(chunk)
    return time.perf_counter() - t0


def _extents(path: Path) -> list[tuple[int, int]]:
    from rmqspec.impl.mappedfile import data_extents

    fd = os.open(path, os.O_RDONLY)
    try:
        return data_extents(fd, 0, os.fstat(fd).st_size)
    finally:
        os.close(fd)


def _recover(root: Path) -> tuple[float, int]:
    t0 = time.perf_counter()
    store = MessageStore.open(root, config=StoreConfig(commitlog_file_size=FILE_SIZE))
    elapsed = time.perf_counter() - t0
    end = store.commitlog_max_offset
    store.crash("kill")
    return elapsed, end


def _copy(src: Path, dst: Path) -> Path:
    if dst.exists():
        shutil.rmtree(dst)
    subprocess.run(["cp", "-a", "--sparse=always", str(src), str(dst)], check=True)
    return dst


def bench_states(states: int) -> None:
    workloads = list(crashwork.WORKLOADS.values())
    report = crashtest.explore(workloads, states=states, seed=0)
    print(
        f"  crashtest: {report.states:,} states ({report.torn_states:,} torn) over {len(workloads)} workloads "
        f"in {report.seconds:.1f} s: {report.rate:,.0f} states/s, {report.failed_states} failing"
    )
    # baseline: materialize the same kind of states and read them back, nothing else
    root = crashtest.scratch_root()
    try:
        prepared = [crashtest.prepare(w, root / f"w{i}") for i, w in enumerate(workloads)]
        import random

        chosen = [
            s
            for i, p in enumerate(prepared)
            for s in crashtest.select_states(p.points, states // len(workloads), random.Random(f"0/{i}"))[0]
        ]
        t0 = time.perf_counter()
        for state in chosen:
            target = root / "state"
            if target.exists():
                shutil.rmtree(target)
            crashfs.materialize(state, target)
            _plain_read(target)
        base = time.perf_counter() - t0
    finally:
        shutil.rmtree(root, ignore_errors=True)
    base_rate = len(chosen) / base
    print(
        f"  baseline (materialize + read back only): {base_rate:,.0f} states/s"
        f" | ratio checked/baseline {report.rate / base_rate:.2f} ({base_rate / report.rate:.1f}x slower)"
    )


def bench_recovery(records: int) -> None:
    with tempfile.TemporaryDirectory(dir=crashtest.scratch_base()) as tmp:
        base = Path(tmp) / "base"
        end = make_store(base, records)
        mb = end / 1e6
        work = Path(tmp) / "work"
        plain = min(_plain_read(_copy(base, work)) for _ in range(3))
        print(f"  {records:,} records, {mb:.1f} MB of commitlog (+ consume queues); plain read {plain * 1000:.1f} ms")
        intact = min(_recover(_copy(base, work))[0] for _ in range(3))
        rebuilt = []
        for _ in range(3):
            _copy(base, work)
            shutil.rmtree(work / "consumequeue")
            rebuilt.append(_recover(work)[0])
        rebuild = min(rebuilt)
        _copy(base, work)
        t0 = time.perf_counter()
        assert verify_store(work).ok
        verify = time.perf_counter() - t0
        for label, t in (
            ("abnormal recovery, queues intact ", intact),
            ("abnormal recovery, queues rebuilt", rebuild),
            ("store verify                     ", verify),
        ):
            print(
                f"  {label} {t * 1000:8.1f} ms ({records / t:,.0f} records/s, {mb / t:,.1f} MB/s)"
                f" | ratio plain/this {plain / t:.2e} ({t / plain:,.0f}x slower than the read)"
            )


_LOG_TIME = re.compile(r"^(\d\d):(\d\d):(\d\d)\.(\d\d\d) ")


def _log_ms(line: str) -> int:
    m = _LOG_TIME.match(line)
    if m is None:
        raise ValueError(f"no timestamp in {line!r}")
    h, mi, s, ms = (int(x) for x in m.groups())
    return ((h * 60 + mi) * 60 + s) * 1000 + ms


def real_recovery_ms(root: Path) -> tuple[int, int]:
    """(recovery ms, max offset) of the real DefaultMessageStore on ``root`` (mutated: pass a copy)."""
    env = dict(os.environ, ORACLE_OPTS=f"-Doracle.clFileSize={FILE_SIZE} -Doracle.logLevel=INFO")
    done = subprocess.run(
        [str(REPO / "scripts" / "real-rocketmq"), "oracle", "--version", REAL_VERSION, "dump", str(root)],
        capture_output=True, text=True, env=env, check=True,
    )
    start = end = None
    max_offset = -1
    for line in done.stderr.splitlines():
        if start is None and "last shutdown" in line:
            start = _log_ms(line)
        elif "load over, and the max phy offset" in line:
            end = _log_ms(line)
            max_offset = int(line.rsplit("=", 1)[1])
    if start is None or end is None:
        raise RuntimeError(f"the real store logged no recovery: {done.stderr[-2000:]}")
    return (end - start) % (24 * 3600 * 1000), max_offset


def bench_real(records: int) -> None:
    with tempfile.TemporaryDirectory(dir=crashtest.scratch_base()) as tmp:
        base = Path(tmp) / "base"
        end = make_store(base, records)
        for label, drop in (("queues rebuilt", True), ("queues intact ", False)):
            ours_t: list[float] = []
            theirs_t: list[int] = []
            for _ in range(2):
                work = _copy(base, Path(tmp) / "ours")
                real = _copy(base, Path(tmp) / "real")
                if drop:
                    shutil.rmtree(work / "consumequeue")
                    shutil.rmtree(real / "consumequeue")
                elapsed, our_end = _recover(work)
                ms, their_end = real_recovery_ms(real)
                if our_end != end or their_end != end:
                    raise RuntimeError(f"recovered ends differ: ours {our_end}, RocketMQ {their_end}, written {end}")
                ours_t.append(elapsed)
                theirs_t.append(ms)
            ours, theirs = min(ours_t), min(theirs_t) / 1000
            print(
                f"  {label}: ours {ours * 1000:8.1f} ms ({records / ours:,.0f} records/s)"
                f" | RocketMQ DefaultMessageStore {theirs * 1000:8.1f} ms ({records / theirs:,.0f} records/s)"
                f" | throughput ours/RocketMQ {theirs / ours:.2f} (goal >= 0.5)"
            )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench crash")
    parser.add_argument("--states", type=int, default=4000, help="crash states to check")
    parser.add_argument("--records", type=int, default=100_000, help="records in the recovery store")
    parser.add_argument("--real", action="store_true", help="also recover with the real RocketMQ store")
    parser.add_argument("--skip-states", action="store_true", help="only the recovery figures")
    args = parser.parse_args(argv)
    if not args.skip_states:
        print("crash states checked per second (8 recorded workloads)")
        bench_states(args.states)
    print("recovery and verify vs a plain read of the same files")
    bench_recovery(args.records)
    if args.real:
        if shutil.which("mvn") is None or shutil.which("javac") is None:
            print("--real needs Java (javac) and Maven: the store oracle runs the official release jars")
            return 2
        print(f"recovery vs the real RocketMQ {REAL_VERSION} DefaultMessageStore on the same directory")
        bench_real(args.records)
    return 0
