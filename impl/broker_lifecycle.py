"""Durability, shutdown and crashes of the mmap broker (a mixin of ``impl/broker.py``).

``flush`` makes every written record durable; ``close`` is RocketMQ's clean shutdown (the op batch's last pass,
consumer offsets and delay progress persisted, on 5.x the records flushed before the timer checkpoint, the store
closed and ``abort`` removed); ``reopen`` starts again from the files. ``crash`` drops the process (``kill``: every
written byte survives) or the machine (``power``: bytes past the flushed position go; ``torn``: some of them were
written back by the page cache, the last torn) and traces the records at risk; ``recovery_choices`` is the range
of record counts that may survive, ``recover`` restarts on what did (store recovery, SPEC §5)."""

from __future__ import annotations

from collections.abc import Callable

from rmqspec.impl.broker_events import BrokerEvents
from rmqspec.impl.offsets import ConsumerOffsetTable
from rmqspec.impl.schedule_service import ScheduleService
from rmqspec.impl.store import MessageStore
from rmqspec.impl.timer_service import DiskTimerService
from rmqspec.impl.txn_service import OpBatcher
from rmqspec.model.clock import Clock
from rmqspec.model.config import BrokerConfig
from rmqspec.model.crash import TORN

CRASH_KINDS = ("kill", "power")
RUNNING, CLOSED, CRASHED = "RUNNING", "CLOSED", "CRASHED"


class Lifecycle:
    """Mixin of ``MmapBroker``: flush, close, reopen, crash, recover."""

    clock: Clock
    config: BrokerConfig
    events: BrokerEvents
    state: str
    store: MessageStore | None
    offsets: ConsumerOffsetTable
    schedule: ScheduleService
    timer: DiskTimerService | None
    ops: OpBatcher
    crash_kinds: tuple[str, ...] = (*CRASH_KINDS, TORN)
    _records: int
    _flushed: int
    _unflushed: list[tuple[int, str | None]]
    _committed: int  # at a crash: the records committed (all, without a TransientStorePool)
    _crash_kind: str | None
    _pop_close: Callable[[int], None]  # broker_pop's (an annotation only: a stub here would hide it in the MRO)

    def _require_running(self) -> None: ...  # MmapBroker's

    def _start(self, now: int) -> None: ...  # MmapBroker's

    def _write_ops(self, ops: list[tuple[int, str]], now: int, wait: bool = True) -> None: ...  # MmapBroker's

    # durability, shutdown, crashes

    def flush(self) -> None:
        """Make every written record durable (an ASYNC broker's flush)."""
        self._require_running()
        assert self.store is not None
        self.store.flush()
        self._flushed = self._records
        self._unflushed.clear()

    def close(self) -> None:
        """Clean shutdown: records flushed; consumer offsets, delay progress, (5.x) timer checkpoint persisted."""
        self._require_running()
        assert self.store is not None
        now = self.clock.now()
        if self.config.behaviour.op_batch:  # the op batch service's last pass
            self._write_ops(self.ops.drain(now), now)
        self.offsets.persist()
        self._pop_close(now)  # the revive progress and consumerOrderInfo.json (impl/pop_service.py)
        self.schedule.persist(now)
        if self.timer is not None:  # the records first, then the wheel's checkpoint (TimerMessageStore.shutdown)
            self.store.flush()
            self.timer.persist(now)
        self.store.close()
        self._flushed = self._records
        self._unflushed.clear()
        self.store = None
        self.state = CLOSED

    def reopen(self) -> None:
        """Restart after ``close()``: durable state back, the lock table empty."""
        if self.state != CLOSED:
            raise RuntimeError(f"reopen() needs a closed broker, this one is {self.state}")
        now = self.clock.now()
        self._start(now)
        self.events.recover(now, "REOPEN", self._records, 0)

    def crash(self, kind: str) -> None:
        """``kill`` (process dies) or ``power`` (machine loses power); down until ``recover``.
        ``torn``: a power loss after the page cache wrote back some unflushed records, the last of
        them torn (``MessageStore.torn_tail``), and the consume queues' units, those of the lost
        records too; traced as ``power``, as SPEC's power allows it."""
        if kind not in self.crash_kinds:
            raise ValueError(f"crash kind must be one of {self.crash_kinds}, got {kind!r}")
        self._require_running()
        assert self.store is not None
        now = self.clock.now()
        torn = self.store.torn_tail() if kind == TORN else 0
        kind = "power" if kind == TORN else kind
        # a TransientStorePool: the records past the committed position live only in the write buffers, which a
        # kill takes (model/committing.py)
        committed = self.store.committed_offset
        uncommitted = [key for end, key in self._unflushed if end > committed]
        self._committed = self._records - len(uncommitted)
        self.store.crash(kind, torn=torn, keep_queues=torn > 0)
        self.store = None
        self.state = CRASHED
        self._crash_kind = kind
        at_risk = sorted({key for _, key in self._unflushed if key}) if kind == "power" else []
        if kind == "kill" and self.config.transient_store_pool:
            at_risk = sorted({key for key in uncommitted if key})
        self._unflushed.clear()
        self.events.crash(now, kind, self._records, self._flushed, at_risk)

    def recovery_choices(self) -> range:
        """The numbers of commitlog records that may survive the current crash (as the model's)."""
        if self.state != CRASHED:
            raise RuntimeError("recovery_choices() is defined only after crash()")
        if self._crash_kind == "kill":  # at least the committed records (all, without a TransientStorePool)
            return range(self._committed, self._committed + 1)
        return range(self._flushed, self._records + 1)

    def recover(self) -> None:
        """Restart after a crash with exactly the records that survived (store recovery)."""
        if self.state != CRASHED:
            raise RuntimeError("recover() is defined only after crash()")
        now = self.clock.now()
        kind = self._crash_kind or ""
        before = self._records
        self._start(now)
        self.events.recover(now, kind, self._records, before - self._records)

