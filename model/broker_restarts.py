"""``ModelBroker``'s durability and restarts (a mixin of ``model/broker.py``): ``flush`` (an ASYNC broker's),
``close`` / ``reopen`` (a clean shutdown persists everything; 5.1.0+'s op batch makes its last pass),
``crash`` (``kill``: the page cache survives; ``power``: records past the last flush may go, named in the
crash row's ``detail.at_risk``) and ``recover`` with the number of surviving records the lockstep forks
over (``recovery_choices``); a restart rebuilds the services from what persisted (``_restart``)."""

from __future__ import annotations

from collections.abc import Callable

from rmqspec.model.crash import CRASH_KINDS, BrokerState
from rmqspec.model.ghost import (
    Crashed,
)
from rmqspec.model.timer import TIMER_TOPIC
from rmqspec.model.transactions import (
    TransactionService,
)

# retry_queue_chooser(group, retry_queue_nums, sequence number) -> queue id
RetryQueueChooser = Callable[[str, int, int], int]

DLQ_NUMS_PER_GROUP = 1

class Restarts:
    """Mixin of ``ModelBroker``: flush, close, reopen, crash, recover (see the module docstring)."""


    def flush(self) -> None:
        """Make every written record durable (an ASYNC broker's flush)."""
        self._require_running()
        self._now()
        self.store.commit_all()  # a TransientStorePool's buffer first (model/committing.py)
        self.durability.flush(len(self.store.records), self.store.write_pos)

    def close(self) -> None:
        """Clean shutdown: records flushed, consumer offsets and delay progress persisted; 5.1.0+'s
        op batch service makes one last pass first (ops pending for less than its interval are lost)."""
        self._require_running()
        now = self._now()
        if self.config.behaviour.op_batch and not self.external_op_batches:
            self._write_ops(self.txn.take_ops(now, self.config.transaction_op_batch_interval_ms), now)
        self.store.commit_all()  # CommitRealTimeService's shutdown: everything committed (model/committing.py)
        self.durability.flush(len(self.store.records), self.store.write_pos)
        self.offsets.persist()
        self.pop_state.persist_revive_progress()
        self.pop_state.persist_orders(now)
        self.schedule.persist(now)
        if self.config.timer_running:
            self.timer.persist(now)
        self.state = BrokerState.CLOSED

    def reopen(self) -> None:
        """Restart after ``close()``: durable state back, the lock table empty."""
        if self.state is not BrokerState.CLOSED:
            raise RuntimeError(f"reopen() needs a closed broker, this one is {self.state.value}")
        now = self._now()
        if self.store.file_fault.uncreated is not None:  # a failed roll's blank (model/filefault.py)
            self.store.resume_before_blank()
            self.durability.where = self.store.write_pos
        self._restart(now)
        self._emit(
            "recover",
            now,
            actor="broker",
            status="REOPEN",
            detail={"survivors": len(self.store.records) - self.store.removed_count(), "lost": 0},
        )

    def crash(self, kind: str) -> None:
        """``kill`` (process dies) or ``power`` (machine loses power); down until ``recover``."""
        if kind not in CRASH_KINDS:
            raise ValueError(f"crash kind must be one of {CRASH_KINDS}, got {kind!r}")
        self._require_running()
        now = self._now()
        self.state = BrokerState.CRASHED
        self.durability.crash_kind = kind
        # the keys of the records a power loss may take (SPEC §8 crash detail.at_risk: not judged LOST); with a
        # TransientStorePool a kill takes what was not committed (model/committing.py)
        tail = self.store.records[self.durability.flushed:] if kind == "power" else []
        if kind == "kill" and self.store.buffered:
            tail = self.store.records[self.store.dispatched:]
        self._emit(
            "crash",
            now,
            actor="broker",
            status=kind,
            detail={"records": len(self.store.records) - self.store.removed_count(),
                    "flushed": max(0, self.durability.flushed - self.store.removed_count()),
                    "at_risk": sorted({r.uniq_key for r in tail if r.uniq_key})},
        )

    def recovery_choices(self) -> range:
        """The allowed numbers of surviving commitlog records after the current crash."""
        if self.state is not BrokerState.CRASHED:
            raise RuntimeError("recovery_choices() is defined only after crash()")
        allowed = self.durability.allowed_survivors(len(self.store.records),
                                                    self.store.dispatched if self.store.buffered else None)
        low = max(allowed.start, self.store.removed_count())  # deleted files are gone, not lost
        return range(low, max(allowed.stop, low + 1))

    def recover(self, survivors: int | None = None) -> None:
        """Restart after a crash keeping ``survivors`` records (default: all that may survive)."""
        choices = self.recovery_choices()
        if survivors is None:
            survivors = choices[-1]
        if survivors not in choices:
            raise ValueError(f"{survivors} surviving records is not allowed; allowed: {choices}")
        now = self._now()
        kind = self.durability.crash_kind or ""
        kept = self.store.records[survivors - 1].end if survivors else self.store.commitlog_min
        # a kill with a TransientStorePool keeps what was readable (committed, or in a file without a buffer)
        on_disk = self.store.readable_where if kind == "kill" and self.store.buffered else None
        reach = self.store.file_fault.reach(self.store.write_pos)  # no file after a failed roll's blank
        end = self.durability.recovered_end(kept, reach, self.config.commitlog_file_size, on_disk)
        lost = self.store.truncate(survivors, end)
        self.durability.after_recovery(survivors, self.store.write_pos)
        self._restart(now)
        self.ghost.note_crash(
            Crashed(now, kind, survivors, tuple(r.commitlog_offset for r in lost))
        )
        self._emit(
            "recover",
            now,
            actor="broker",
            status=kind,
            detail={"survivors": max(0, survivors - self.store.removed_count()), "lost": len(lost)},
        )

    def _restart(self, now: int) -> None:
        self.locks.clear()
        self.consumers.clear()
        self.offsets.restore()
        self.offsets_last_persist = now
        self.pop_state.restore(now)  # model/pop.py, "Crashes"
        self.schedule.restore(self.store, now)
        if self.config.timer_running:
            self.timer.restore(now, self.store.max_offset(TIMER_TOPIC, 0), self.store.timer_slot)
        self.txn = TransactionService(now, self.config.transaction_op_batch_interval_ms)
        self.cleaner.restart(now)
        self.durability.restarted(now)
        self.committer.restart()
        self.store.restarted()
        self.store.disk_full = False
        self.store.correct_min_offsets()  # recoverTopicQueueTable
        self.state = BrokerState.RUNNING
