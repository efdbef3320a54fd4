"""Retention, then a power loss, recovered by the real RocketMQ 4.9.8 ``DefaultMessageStore`` (fidelity R7; 4.9.8
only): the defect rmqspec's store avoids by syncing its consume queues before it deletes a CommitLog file.

The state is built by hand the way RocketMQ leaves it (rmqspec's ``MessageStore`` writes the records;
its own sync before the deletion is skipped, as RocketMQ has none): 4 KiB CommitLog files and 10-unit
consume-queue files; queue ``D/0`` gets two records and ``T/0`` one in file 0, ``T/0`` a second (queue
offset 1) in file 1; the CommitLog reaches the disk, the consume queues never do; retention deletes file 0;
the power goes. The real store (``real-rocketmq oracle dump``) then recovers it, and rmqspec's store
recovers a copy:

- ``T/0``: 4.9.8 writes the unit of the record whose QUEUEOFFSET is 1 at queue offset 0 ("[BUG]logic queue
  order maybe wrong": ConsumeQueue.putMessagePositionInfo appends at the queue's end) and the queue's max
  offset is 1, so the next message there is given queue offset 1 again; rmqspec's queue has a pre-blank at 0
  and the record at 1 (max offset 2);
- ``D/0``: 4.9.8's queue comes back empty (max offset 0): its offsets 0 and 1 will be handed out again;
  rmqspec's queue kept its units — here, recovering RocketMQ's state, it cannot either: both stores agree
  that D/0 is empty, which is why rmqspec's broker syncs before deleting (``MessageStore.delete_files``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from rmqspec.impl.codec import MessageRecord
from rmqspec.impl.store import MessageStore, StoreConfig
from tests.interop.realrmq import RealRocketMQ

CONFIG = StoreConfig(commitlog_file_size=4096, cq_file_size=200, flush="ASYNC")


def _build(root: Path) -> dict[str, Any]:
    with MessageStore.open(root, config=CONFIG) as store:
        gone = [store.put(MessageRecord("D", 0, f"gone-{i}".encode(), {}, store_ts=1_000 + i)) for i in range(2)]
        first = store.put(MessageRecord("T", 0, b"first", {}, store_ts=1_002))
        while store.commitlog_max_offset < 4096 - 600:
            store.put(MessageRecord("F", 0, b"f" * 300, {}, store_ts=1_003))
        store.put(MessageRecord("F", 0, b"f" * 1000, {}, store_ts=1_004))  # rolls into file 1
        second = store.put(MessageRecord("T", 0, b"second", {}, store_ts=1_005))
        store.commitlog.files.flush()  # the CommitLog reached the disk, the consume queues did not
        store.commitlog.files.delete_first(1)  # retention, as RocketMQ deletes (no sync of the queues first)
        store.crash("power")
    assert [r.queue_offset for r in gone] == [0, 1] and first.queue_offset == 0
    assert second.queue_offset == 1 and second.commitlog_offset >= 4096
    return {"second": second.commitlog_offset}


def _dump(realrmq: RealRocketMQ, root: Path) -> tuple[dict[tuple[str, int], dict], list[dict]]:
    env = dict(os.environ, ORACLE_OPTS="-Doracle.clFileSize=4096 -Doracle.cqFileSize=200")
    done = subprocess.run(realrmq.oracle("dump", str(root)), capture_output=True, text=True, env=env, timeout=180,
                          check=False)
    lines = [json.loads(x) for x in done.stdout.splitlines() if x.startswith("{")]
    recovery = next((x for x in lines if x["kind"] == "recovery"), None)
    assert recovery is not None, done.stderr[-3000:]
    queues = {(q["topic"], q["queue_id"]): q for q in recovery["queues"]}
    return queues, [x for x in lines if x["kind"] == "cq"]


def test_real_4_9_8_misplaces_and_reissues_queue_offsets_after_retention_and_a_power_loss(
        realrmq: RealRocketMQ, tmp_path: Path) -> None:
    built = _build(tmp_path / "theirs")
    shutil.copytree(tmp_path / "theirs", tmp_path / "ours")
    queues, units = _dump(realrmq, tmp_path / "theirs")
    # T/0: the record whose QUEUEOFFSET is 1 is served at queue offset 0, and the queue's max offset is 1
    t = [u for u in units if u["cq_topic"] == "T"]
    assert [(u["cq_offset"], u["cq_phy_offset"], u.get("queue_offset")) for u in t] == [(0, built["second"], 1)], t
    assert (queues[("T", 0)]["min_offset"], queues[("T", 0)]["max_offset"]) == (0, 1), queues
    # D/0: empty again, its offsets 0 and 1 to be handed out a second time
    assert queues.get(("D", 0), {"max_offset": 0})["max_offset"] == 0, queues
    # rmqspec's store on the same state: T/0's record at its own offset, below it a pre-blank under the min
    with MessageStore.open(tmp_path / "ours", config=CONFIG) as store:
        assert (store.min_offset("T", 0), store.max_offset("T", 0)) == (1, 2)
        [record] = store.read_queue("T", 0, 1, 32)
        assert (record.body, record.queue_offset) == (b"second", 1)
        assert store.max_offset("D", 0) == 0
