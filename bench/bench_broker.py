"""End-to-end broker throughput: MmapBroker vs ModelBroker vs the raw store append.

One workload per broker, same clock and config (ASYNC flush, so the numbers
measure the broker and the store rather than the disk's msync latency; pass
``--sync`` to include it):

  send N messages (2 queues) → pull them in batches of 32 → consume: every
  message acknowledged by an offset commit; plus N/10 transactions (half,
  then COMMIT) whose committed copies are pulled too.

The baseline measured in the same run is the raw ``MessageStore.put`` of the
same number of records (no routing, no events, no pulls). Printed: messages
per second for each, and the ratios mmap / model and mmap / raw append.

``python -m bench broker -- [-n N] [--sync]``; the default run takes well
under a minute.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from typing import Any

from rmqspec.impl.broker import MmapBroker
from rmqspec.impl.codec import MessageRecord
from rmqspec.impl.store import MessageStore, StoreConfig
from rmqspec.model import BrokerConfig, ManualClock, Message, MessageQueue, ModelBroker, TxnAction

START_MS = 1_700_000_000_000
QUEUES = 2


def workload(broker: Any, clock: ManualClock, n: int) -> int:
    """Send → pull → consume (success + commit) and transactions; returns messages consumed."""
    broker.create_topic("T", QUEUES)
    broker.create_group("g")
    body = b"x" * 128
    for i in range(n):
        broker.send(Message("T", body, tags="A", uniq_key=f"{i:032X}"), i % QUEUES)
        clock.advance(1)
    for i in range(n // 10):
        half = broker.send_half(Message("T", body, tags="T"), i % QUEUES, "pg")
        broker.end_transaction("pg", half.commitlog_offset, half.queue_offset, TxnAction.COMMIT, False)
    consumed = 0
    for q in range(QUEUES):
        mq = MessageQueue("T", q)
        offset = 0
        while True:
            got = broker.pull("g", mq, offset, 32)
            if not got.messages:
                break
            consumed += len(got.messages)
            offset = got.next_begin_offset
            broker.update_offset("g", mq, offset)
    broker.tick()
    return consumed


def raw_append(root: str, n: int, flush: str) -> int:
    store = MessageStore.open(root, config=StoreConfig(flush=flush))
    body = b"x" * 128
    props = {"TAGS": "A"}
    total = n + 2 * (n // 10)  # sends + halves + (commits and ops, counted once)
    for i in range(total):
        store.put(MessageRecord("T", i % QUEUES, body, props, store_ts=START_MS + i, born_ts=START_MS))
    store.close()
    return total


def timed(fn: Callable[[], int]) -> tuple[float, int]:
    start = time.perf_counter()
    count = fn()
    return time.perf_counter() - start, count


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench broker")
    parser.add_argument("-n", type=int, default=20000, help="messages sent (default 20000)")
    parser.add_argument("--sync", action="store_true", help="SYNC flush (msync every put)")
    args = parser.parse_args(argv)
    flush = "SYNC" if args.sync else "ASYNC"
    config = BrokerConfig(flush=flush)

    clock = ManualClock(START_MS)
    model_s, model_n = timed(lambda: workload(ModelBroker(clock, config), clock, args.n))
    with tempfile.TemporaryDirectory() as tmp:
        clock = ManualClock(START_MS)

        def run_mmap() -> int:
            broker = MmapBroker.open(tmp, clock, config)
            consumed = workload(broker, clock, args.n)
            broker.close()
            return consumed

        mmap_s, mmap_n = timed(run_mmap)
    with tempfile.TemporaryDirectory() as tmp:
        raw_s, raw_n = timed(lambda: raw_append(tmp, args.n, flush))
    if mmap_n != model_n:
        print(f"mismatch: mmap consumed {mmap_n}, model {model_n}")
        return 1
    print(f"workload: {args.n} sends + {args.n // 10} transactions, {flush} flush, {mmap_n} consumed")
    print(f"  model broker     {model_n / model_s:10.0f} msg/s  ({model_s:.2f} s)")
    print(f"  mmap broker      {mmap_n / mmap_s:10.0f} msg/s  ({mmap_s:.2f} s)")
    print(f"  raw store.put    {raw_n / raw_s:10.0f} rec/s  ({raw_s:.2f} s, append only)")
    print(f"  ratio mmap/model          {(mmap_n / mmap_s) / (model_n / model_s):.2f}")
    print(f"  ratio mmap/raw append     {(mmap_n / mmap_s) / (raw_n / raw_s):.2f}")
    return 0
