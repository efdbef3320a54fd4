"""Abstract crash semantics: which records survive, what in-memory state is lost.

Theory of operation
-------------------
RocketMQ's store (S/CommitLog, FlushDiskType, S/DefaultMessageStore.recover)
gives these guarantees, which the model states as a *set of allowed
outcomes* rather than one outcome:

- SYNC flush: every record is durable once written (GroupCommitService; the
  model does not distinguish puts that wait for the flush from background
  puts that only wake it up). ASYNC flush: records are durable up to the last
  ``flush()`` / ``close()``.
- ``kill`` (process dies, the OS keeps its page cache): every written record
  survives.
- ``power`` (machine loses power): a prefix of the commitlog survives, at least
  up to the flushed position; anything after may be lost (a torn record is a
  lost record in the abstract model).
- In-memory state is lost on any crash: consumer offsets and delay progress
  not yet persisted (the last persisted snapshots are restored), the lock
  table, and the transaction check service's unpersisted progress (it lives in
  the consumer offsets).

``allowed_survivors`` is that set as a ``range`` of record counts; a lockstep
checker forks one model per choice (``ModelBroker.fork``) and keeps those the
candidate agrees with. ``recover`` takes a choice (default: the maximum) and
rebuilds consume queues and next offsets from the surviving prefix.
"""

from __future__ import annotations

import enum

CRASH_KINDS = ("kill", "power")
# a crash kind a broker may add to its ``crash_kinds`` (the mmap broker does): a power loss after the
# page cache wrote back some unflushed bytes, tearing a record — SPEC's "a torn tail is possible"; to
# the model (which allows every prefix of the unflushed records) it is a power loss
TORN = "torn"


class BrokerState(enum.Enum):
    RUNNING = "RUNNING"
    CRASHED = "CRASHED"
    CLOSED = "CLOSED"


class Durability:
    """How many commitlog records are durable (flushed)."""

    def __init__(self, sync: bool) -> None:
        self.sync = sync
        self.flushed = 0
        self.crash_kind: str | None = None

    def on_append(self, total: int) -> None:
        if self.sync:
            self.flushed = total

    def flush(self, total: int) -> None:
        self.flushed = total

    def allowed_survivors(self, total: int) -> range:
        if self.crash_kind is None:
            raise RuntimeError("recovery choices exist only after a crash")
        if self.crash_kind == "kill":
            return range(total, total + 1)
        return range(self.flushed, total + 1)

    def after_recovery(self, survivors: int) -> None:
        self.flushed = survivors
        self.crash_kind = None
