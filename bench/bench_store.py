"""Store benchmark: append and scan throughput as ratios against same-run baselines.

- **append**: ``MessageStore.put`` (validation, encoding, CRC, queue offset,
  consume-queue dispatch; flush ASYNC, one ``flush()`` at the end) against a
  baseline that packs the identical record bytes with ``struct.pack_into``
  into a bare mmap (CRC included, no validation, no consume queue) and
  msyncs once. The two byte streams are compared, so the baseline really is
  the same work product.
- **scan**: ``store verify`` and abnormal recovery (``MessageStore.open`` with
  the abort file present, re-dispatching every record) against plain
  sequential reading of the same files.

Usage: ``python -m bench store [-- --messages N]``.
"""

from __future__ import annotations

import argparse
import mmap
import os
import struct
import tempfile
import time
import zlib
from pathlib import Path

from rmqspec.impl.codec import MessageRecord
from rmqspec.impl.store import MessageStore, StoreConfig
from rmqspec.impl.verify import verify_store
from rmqspec.model.message import encode_properties

FILE_SIZE = 256 * 1024 * 1024
HEAD = struct.Struct(">iiiiiqqiq")
MAGIC = 0xDAA320A7 - (1 << 32)


def _records(n: int, body_size: int) -> list[MessageRecord]:
    body = bytes(range(256)) * (body_size // 256) + bytes(body_size % 256)
    return [
        MessageRecord(
            "BenchTopic",
            i % 8,
            body,
            {"TAGS": "TagA", "KEYS": f"key-{i}", "UNIQ_KEY": f"{i:032X}"},
            born_ts=1_700_000_000_000 + i,
            store_ts=1_700_000_000_000 + i,
            born_host=("10.0.0.7", 40000),
        )
        for i in range(n)
    ]


def _baseline(records: list[MessageRecord], path: Path) -> tuple[float, bytes]:
    """Pack the same bytes with struct.pack_into into one bare mmap."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    os.ftruncate(fd, FILE_SIZE)
    mm = mmap.mmap(fd, FILE_SIZE)
    born = bytes([10, 0, 0, 7]) + (40000).to_bytes(4, "big")
    store = bytes([127, 0, 0, 1]) + (10911).to_bytes(4, "big")
    next_q = [0] * 8
    t0 = time.perf_counter()
    pos = 0
    for r in records:
        topic = r.topic.encode()
        props = encode_properties(r.properties).encode()
        body = r.body
        size = 4 * 5 + 8 + 8 + 4 + 8 + 8 + 8 + 8 + 4 + 8 + 4 + len(body) + 1 + len(topic) + 2 + len(props)
        qoff = next_q[r.queue_id]
        next_q[r.queue_id] = qoff + 1
        HEAD.pack_into(
            mm,
            pos,
            size,
            MAGIC,
            zlib.crc32(body) & 0x7FFFFFFF,
            r.queue_id,
            0,
            qoff,
            pos,
            0,
            r.born_ts,
        )
        p = pos + HEAD.size
        mm[p : p + 8] = born
        struct.pack_into(">q", mm, p + 8, r.store_ts)
        mm[p + 16 : p + 24] = store
        struct.pack_into(">iqi", mm, p + 24, 0, 0, len(body))
        p += 40
        mm[p : p + len(body)] = body
        p += len(body)
        struct.pack_into(">B", mm, p, len(topic))
        mm[p + 1 : p + 1 + len(topic)] = topic
        p += 1 + len(topic)
        struct.pack_into(">h", mm, p, len(props))
        mm[p + 2 : p + 2 + len(props)] = props
        pos = p + 2 + len(props)
    mm.flush()
    elapsed = time.perf_counter() - t0
    data = mm[:pos]
    mm.close()
    os.close(fd)
    return elapsed, data


def _store_append(records: list[MessageRecord], root: Path) -> tuple[float, bytes]:
    cfg = StoreConfig(commitlog_file_size=FILE_SIZE, flush="ASYNC")
    store = MessageStore.open(root, config=cfg)
    t0 = time.perf_counter()
    for r in records:
        store.put(r)
    store.flush()
    elapsed = time.perf_counter() - t0
    end = store.commitlog_max_offset
    store.close()
    with open(root / "commitlog" / f"{0:020d}", "rb") as f:
        data = f.read(end)
    return elapsed, data


def _written_regions(root: Path) -> list[tuple[Path, int]]:
    """Each file with the number of bytes the store wrote into it (files are sparse)."""
    store = MessageStore.open(root, config=StoreConfig(commitlog_file_size=FILE_SIZE))
    regions = [(root / "commitlog" / f"{0:020d}", store.commitlog_max_offset)]
    for topic, qid in store.queues():
        regions.append(
            (
                root / "consumequeue" / topic / str(qid) / f"{0:020d}",
                store.max_offset(topic, qid) * 20,
            )
        )
    store.close()
    return regions


def _plain_read(regions: list[tuple[Path, int]]) -> float:
    t0 = time.perf_counter()
    for path, n in regions:
        with open(path, "rb") as f:
            while n > 0:
                chunk = f.read(min(n, 1 << 20))
                if not chunk:
                    break
                n -= len(chunk)
    return time.perf_counter() - t0


def _best(fn, repeat: int = 3) -> float:  # type: ignore[no-untyped-def]
    return min(fn() for _ in range(repeat))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench store")
    parser.add_argument("--messages", type=int, default=20_000, help="messages per body size")
    args = parser.parse_args(argv)
    print(f"store append vs struct.pack_into baseline ({args.messages} messages each)")
    for body_size, n in ((200, args.messages), (4096, max(1, args.messages // 4))):
        records = _records(n, body_size)
        with tempfile.TemporaryDirectory() as tmp:
            base_t, base_bytes = _baseline(records, Path(tmp) / "baseline")
            store_t, store_bytes = _store_append(records, Path(tmp) / "store")
            same = base_bytes == store_bytes
            mb = len(store_bytes) / 1e6
            print(
                f"  body {body_size:>5} B: store {n / store_t:>10,.0f} msg/s"
                f" {mb / store_t:8.1f} MB/s"
                f" | baseline {n / base_t:>10,.0f} msg/s {mb / base_t:8.1f} MB/s"
                f" | ratio store/baseline {base_t / store_t:5.2f}"
                f" | identical bytes: {'yes' if same else 'NO'}"
            )
            if not same:
                return 1
    print("scan (verify, abnormal recovery) vs plain read of the same files")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        records = _records(args.messages, 200)
        _store_append(records, root)
        regions = _written_regions(root)
        data_mb = sum(n for _, n in regions) / 1e6
        plain = _best(lambda: _plain_read(regions))
        t0 = time.perf_counter()
        report = verify_store(root)
        verify_t = time.perf_counter() - t0
        assert report.ok, report.findings[:3]
        (root / "abort").touch()  # pretend a crash: full re-dispatch from the first file
        t0 = time.perf_counter()
        store = MessageStore.open(root, config=StoreConfig(commitlog_file_size=FILE_SIZE))
        recover_t = time.perf_counter() - t0
        assert store.recovery is not None and store.recovery.kind == "abnormal"
        store.close()
        print(f"  {data_mb:.1f} MB written (commitlog + consume queues)")
        print(f"  plain read        {plain * 1000:8.1f} ms  ({data_mb / plain:,.0f} MB/s, page cache)")
        print(
            f"  store verify      {verify_t * 1000:8.1f} ms"
            f"  ({args.messages / verify_t:,.0f} records/s)"
            f" | ratio plain/verify {plain / verify_t:.2e} ({verify_t / plain:,.0f}x slower)"
        )
        print(
            f"  abnormal recovery {recover_t * 1000:8.1f} ms"
            f"  ({args.messages / recover_t:,.0f} records/s)"
            f" | ratio plain/recovery {plain / recover_t:.2e} ({recover_t / plain:,.0f}x slower)"
        )
    return 0
