"""What a broker holds of its store (``properties/store_hold.py``) and the machine's two invariants.

RocketMQ's lock is a POSIX record lock on byte 0 of ``lock`` (``FileChannel.tryLock(0, 1, false)``):
the mmap store's lock must exclude it — a process taking that very lock (``lockf``, the same
``F_SETLK``) is refused while the store is open and gets it once the store closed. A running broker
without the lock is STORE_UNLOCKED; one that keeps a file mapped after its shutdown, or after its
crash, is STORE_HELD; the honest broker is neither.
"""

from __future__ import annotations

import mmap
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from rmqspec.impl.broker import MmapBroker
from rmqspec.impl.store import MessageStore, open_store
from rmqspec.model import ManualClock
from rmqspec.properties.runner import budget_settings, check_conformance
from rmqspec.properties.store_hold import held_under, lock_held

# what DefaultMessageStore.start does, from another process: tryLock(0, 1, false) = F_SETLK on byte 0
_ROCKETMQ_TRYLOCK = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
try:
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
except OSError:
    print("Lock failed,MQ already started")
else:
    print("locked")
"""


def _rocketmq_trylock(root: Path) -> str:
    out = subprocess.run([sys.executable, "-c", _ROCKETMQ_TRYLOCK, str(root / "lock")],
                         capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_an_open_store_excludes_rocketmqs_lock_and_a_closed_one_releases_it(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    assert lock_held(tmp_path) is True
    assert _rocketmq_trylock(tmp_path) == "Lock failed,MQ already started"
    assert held_under(tmp_path)  # its lock file and mapped files, while it runs
    store.close()
    assert lock_held(tmp_path) is False
    assert held_under(tmp_path) == []
    assert _rocketmq_trylock(tmp_path) == "locked"


def test_a_crashed_store_holds_nothing(tmp_path: Path) -> None:
    store = open_store(tmp_path, flush="ASYNC")
    store.crash("power")
    assert lock_held(tmp_path) is False and held_under(tmp_path) == []


def test_a_file_left_mapped_is_named(tmp_path: Path) -> None:
    path = tmp_path / "commitlog" / "00000000000000000000"
    path.parent.mkdir()
    path.write_bytes(bytes(4096))
    with open(path, "r+b") as f:
        leaked = mmap.mmap(f.fileno(), 0)
    try:
        # Python's mmap keeps a duplicate of the descriptor: the file is both mapped and open
        assert held_under(tmp_path) == [f"{path} (mapped)", f"{path} (open)"]
    finally:
        leaked.close()
    assert held_under(tmp_path) == []


def test_no_store_is_not_judged_and_a_store_without_its_lock_file_is_unlocked(tmp_path: Path) -> None:
    assert lock_held(tmp_path) is None
    assert held_under(tmp_path) == []
    (tmp_path / "commitlog").mkdir()
    assert lock_held(tmp_path) is False


class _Unlocked(MmapBroker):
    """Opens its store without RocketMQ's lock: a second broker would start on the same files."""

    def _start(self, now: int) -> None:
        original = MessageStore._lock
        MessageStore._lock = lambda self: None  # type: ignore[method-assign]
        try:
            super()._start(now)
        finally:
            MessageStore._lock = original  # type: ignore[method-assign]


class _LeavesQueuesMapped(MmapBroker):
    """Shuts down (and dies) without unmapping its consume queues."""

    def close(self) -> None:
        self._keep_queues()
        super().close()

    def crash(self, kind: str) -> None:
        self._keep_queues()
        super().crash(kind)

    def _keep_queues(self) -> None:
        assert self.store is not None
        for cq in self.store._queues.values():
            cq.close = lambda flush=True: None  # type: ignore[method-assign]


def _factory(cls: type[MmapBroker]) -> Callable[..., MmapBroker]:
    def make(clock: ManualClock, config: object = None, workdir: object = None,
             recorder: object = None) -> MmapBroker:
        return cls.open(workdir, clock, config, recorder)  # type: ignore[arg-type]
    return make


def test_conform_finds_a_broker_without_the_lock() -> None:
    run = check_conformance(_factory(_Unlocked), lockstep=False, settings=budget_settings(4, 8, shrink=False),
                            shrink_budget=0)
    assert not run.passed and run.failure is not None and "STORE_UNLOCKED" in run.failure


def test_conform_finds_a_broker_that_leaves_files_mapped() -> None:
    run = check_conformance(_factory(_LeavesQueuesMapped), lockstep=False,
                            settings=budget_settings(8, 12, shrink=False), shrink_budget=0)
    assert not run.passed and run.failure is not None and "STORE_HELD" in run.failure


def test_the_honest_broker_holds_its_lock_and_releases_everything() -> None:
    run = check_conformance(_factory(MmapBroker), lockstep=False, settings=budget_settings(8, 12, shrink=False),
                            shrink_budget=0)
    assert run.passed, run.failure
    assert run.coverage["store_lock:judged"] > 0 and run.coverage["store_held:judged"] > 0

