"""Differential store tier with a TransientStorePool: real RocketMQ 4.9.8 and rmqspec, ``transientStorePoolEnable``.

The same generated messages (``test_store_differential.generated_messages``, unrouted, 1 MiB files that roll)
go through the real ``DefaultMessageStore`` (``real-rocketmq oracle write`` with ``-Doracle.transientStorePool=true``,
ASYNC_FLUSH, 5 buffers) and through rmqspec's ``MessageStore`` with ``transient_store_pool``, each way twice:

- **clean**: written, then a clean shutdown (its CommitRealTimeService commits everything). The pool changes
  nothing that is kept: the real store keeps what it keeps without the pool, ours the same files byte for
  byte, and once the real store committed, its consume queues and records agree with ours (fidelity TS1).
- **kill**: the commit rule held at "full files only" (``commitCommitLogLeastPages`` 1,000,000, a thorough
  interval of 2·10⁹ ms: 4.9.8's ``isAbleToCommit`` then commits a file only once it is full), the real JVM
  halted without shutdown after its services settled (``-Doracle.exit=kill``). What each store serves before
  the kill is bounded by the committed position (the real ``getMaxOffset`` and consume queues, rmqspec's
  ``committed_offset`` and queues), and a kill keeps exactly the committed prefix: the acknowledged records of
  the last file, still in its write buffer, are gone on both sides (TS1, TS2).

Both sides' stores are also read by both readers (``real_views`` / ``our_view``: the same recovery).
Store timestamps differ (the real store stamps the wall clock), so the cross-writer comparisons leave them out.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from rmqspec.cli.workload import T0
from rmqspec.impl.store import MessageStore, StoreConfig
from tests.interop.realrmq import RealRocketMQ
from tests.interop.test_store_differential import (
    FILE,
    _copy,
    disagreements,
    generated_messages,
    message_record,
    our_view,
    real_views,
    write_ours,
)

pytestmark = pytest.mark.cpu_heavy

POOL = "-Doracle.transientStorePool=true"
LEAST_PAGES, THOROUGH_MS = 1_000_000, 2_000_000_000  # only a full file commits (isAbleToCommit)
HELD = f"{POOL} -Doracle.commitLeastPages={LEAST_PAGES} -Doracle.commitThoroughInterval={THOROUGH_MS}"
POOLED = StoreConfig(commitlog_file_size=FILE, transient_store_pool=True)
MESSAGES = generated_messages(5, 200, routed=False)


def _real_write(realrmq: RealRocketMQ, root: Path, lines: list[dict[str, Any]], opts: str) -> list[dict[str, Any]]:
    src = root.parent / f"{root.name}.jsonl"
    src.write_text("".join(json.dumps(line) + "\n" for line in lines))
    proc = subprocess.run(realrmq.oracle("write", str(root), str(src)), capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, ORACLE_OPTS=opts))
    assert proc.returncode == 0, proc.stderr[-2000:]
    return [json.loads(line) for line in proc.stdout.splitlines()]


def _our_kill(root: Path, lines: list[dict[str, Any]]) -> dict[str, Any]:
    """rmqspec's pooled store under the held rule: the service's first (thorough) pass before the puts, a pass
    after each put (the put wakes it), then a kill. Returns what it served before the kill."""
    config = StoreConfig(commitlog_file_size=FILE, transient_store_pool=True, commit_least_pages=LEAST_PAGES,
                         commit_thorough_interval_ms=THOROUGH_MS)
    store = MessageStore.open(root, config=config)
    store.commit_real_time(T0)
    for i, line in enumerate(lines):
        store.put(message_record(line, i))
        store.commit_real_time(T0 + i)
    held = {
        "commitlog_max_offset": store.committed_offset,
        "max_wrote_position": store.commitlog_max_offset,
        "queues": {key: store.max_offset(*key) for key in store.queues() if store.max_offset(*key)},
    }
    store.crash("kill")
    return held


def _real_held(rows: list[dict[str, Any]]) -> dict[str, Any]:
    (held,) = [r for r in rows if r.get("kind") == "held"]
    assert not any(r.get("kind") == "shutdown" for r in rows)  # halted: no shutdown, no final commit
    return {
        "commitlog_max_offset": held["commitlog_max_offset"],
        "max_wrote_position": held["max_wrote_position"],
        "queues": {(q["topic"], q["queue_id"]): q["max_offset"] for q in held["queues"] if q["max_offset"]},
    }


def _without_store_ts(view: dict[str, Any]) -> dict[str, Any]:
    def strip(message: dict[str, Any] | None) -> dict[str, Any] | None:
        return None if message is None else {**message, "store_ts": None}

    return {
        **view,
        "cq": [(key, unit, strip(message)) for key, unit, message in view["cq"]],
        "cl": [(strip(message), tags) for message, tags in view["cl"]],
    }


@pytest.fixture(scope="module")
def stores(realrmq: RealRocketMQ, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("pool")
    written = {
        "real-pool": _real_write(realrmq, base / "real-pool", MESSAGES, POOL),
        "real-plain": _real_write(realrmq, base / "real-plain", MESSAGES, ""),
        "real-kill": _real_write(realrmq, base / "real-kill", MESSAGES, f"{HELD} -Doracle.exit=kill"),
        "real-kill-plain": _real_write(realrmq, base / "real-kill-plain", MESSAGES,
                                       f"{HELD.removeprefix(POOL)} -Doracle.exit=kill"),
    }
    write_ours(base / "ours-pool", MESSAGES, POOLED)
    write_ours(base / "ours-plain", MESSAGES)
    ours_held = _our_kill(base / "ours-kill", MESSAGES)
    pooled = ("real-pool", "real-kill", "ours-pool", "ours-kill")
    plain = ("real-plain", "real-kill-plain", "ours-plain")
    real = dict(zip(pooled, real_views(realrmq, [_copy(base / n, base / f"r-{n}") for n in pooled], opts=POOL)))
    real.update(zip(plain, real_views(realrmq, [_copy(base / n, base / f"r-{n}") for n in plain])))
    names = (*pooled, *plain)
    ours = {n: our_view(_copy(base / n, base / f"o-{n}")) for n in names}
    return {"base": base, "written": written, "real": real, "ours": ours, "ours_held": ours_held}


def test_the_real_store_took_every_message_with_the_pool(stores: dict[str, Any]) -> None:
    for name in ("real-pool", "real-kill"):
        rows = [r for r in stores["written"][name] if "i" in r]
        assert len(rows) == len(MESSAGES) and all(r["status"] == "PUT_OK" for r in rows), name
    assert stores["written"]["real-pool"][-1] == {"failures": 0, "kind": "shutdown", "normal": True}


@pytest.mark.parametrize("name", ["real-pool", "real-kill", "ours-pool", "ours-kill", "real-plain", "real-kill-plain",
                                  "ours-plain"])
def test_real_and_rmqspec_recover_the_same_pooled_store(stores: dict[str, Any], name: str) -> None:
    real, ours = stores["real"][name], stores["ours"][name]
    assert "error" not in real and real["cl"], name
    assert disagreements(real, ours) == []


def test_a_clean_shutdown_with_the_pool_keeps_what_it_keeps_without(stores: dict[str, Any]) -> None:
    base = stores["base"]
    for sub in ("commitlog", "consumequeue"):
        ours_pool = sorted(p.relative_to(base / "ours-pool") for p in (base / "ours-pool" / sub).rglob("*"))
        ours_plain = sorted(p.relative_to(base / "ours-plain") for p in (base / "ours-plain" / sub).rglob("*"))
        assert ours_pool == ours_plain
        for rel in ours_pool:
            if (base / "ours-pool" / rel).is_file():
                assert (base / "ours-pool" / rel).read_bytes() == (base / "ours-plain" / rel).read_bytes(), rel
    real_pool, real_plain = stores["real"]["real-pool"], stores["real"]["real-plain"]
    assert disagreements(_without_store_ts(real_pool), _without_store_ts(real_plain)) == []
    assert len(real_pool["cl"]) == len(MESSAGES)
    assert real_pool["range"][1] > 2 * FILE  # the records rolled files: buffers borrowed and returned


def test_once_committed_the_real_queues_and_records_are_ours(stores: dict[str, Any]) -> None:
    real, ours = stores["real"]["real-pool"], stores["ours"]["ours-pool"]
    assert disagreements(_without_store_ts(real), _without_store_ts(ours)) == []
    assert real["cq"] and all(message is not None for _key, _unit, message in real["cq"])


def test_a_kill_keeps_exactly_the_committed_prefix(stores: dict[str, Any]) -> None:
    real_held = _real_held(stores["written"]["real-kill"])
    ours_held = stores["ours_held"]
    # before the kill: reads (getMaxOffset, the reput's queues) stop at the committed end, a file boundary
    assert real_held == ours_held
    committed, wrote = real_held["commitlog_max_offset"], real_held["max_wrote_position"]
    assert committed % FILE == 0 and FILE <= committed < wrote
    # after it: both recover the committed prefix; what the last file's write buffer held is gone
    real, ours = stores["real"]["real-kill"], stores["ours"]["ours-kill"]
    assert real["range"] == ours["range"] == (0, committed)
    assert disagreements(_without_store_ts(real), _without_store_ts(ours)) == []
    acknowledged = [r for r in stores["written"]["real-kill"] if r.get("status") == "PUT_OK"]
    lost = [r for r in acknowledged if r["wrote_offset"] >= committed]
    assert lost and len(real["cl"]) == len(acknowledged) - len(lost)
    kept = {m["commitlog_offset"] for m, _tags in real["cl"]}
    assert all(r["wrote_offset"] in kept for r in acknowledged if r["wrote_offset"] < committed)


def test_without_the_pool_the_same_kill_keeps_everything(stores: dict[str, Any]) -> None:
    """The control: the same held run without ``transientStorePoolEnable`` serves every record at once and a
    kill keeps them all (the page cache holds them): the losses above are the write buffer's."""
    held = _real_held(stores["written"]["real-kill-plain"])
    assert held["commitlog_max_offset"] == held["max_wrote_position"] == stores["real"]["real-pool"]["range"][1]
    real, ours = stores["real"]["real-kill-plain"], stores["ours"]["real-kill-plain"]
    assert len(real["cl"]) == len(MESSAGES) and disagreements(real, ours) == []
