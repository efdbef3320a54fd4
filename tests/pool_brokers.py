"""Deliberately broken TransientStorePool brokers (``tests/broken_brokers.py``'s pattern; ``model/committing.py``).

Kept apart from ``BROKEN``: they break a rule only a broker with ``transient_store_pool`` has, so they are run
under that configuration (``tests/properties/test_transient_store_pool_conform.py``).
"""

from __future__ import annotations

from typing import Any

from rmqspec.model.broker import ModelBroker
from rmqspec.model.queues import Record, Store


class _EagerStore(Store):
    """Dispatches every record at its append, committed or not."""

    def append(self, record: Record) -> Record:
        super().append(record)
        self.commit_to(self.write_pos)
        return record


class ServesBeforeCommit(ModelBroker):
    """A pooled broker that reads its write buffers: an acknowledged put is in its consume queue and found by
    offset at once, before the CommitRealTimeService commits it (4.9.8's getReadPosition is the committed
    position of a file with a buffer), and, being taken for committed, survives a kill."""

    def __init__(self, clock: Any, config: Any, workdir: Any = None) -> None:
        super().__init__(clock, config)
        self.store.__class__ = _EagerStore


def serves_before_commit(clock: Any, config: Any, workdir: Any = None) -> ServesBeforeCommit:
    return ServesBeforeCommit(clock, config, workdir)


class KillTakesCommitted(ModelBroker):
    """A pooled broker whose kill takes what was committed but not flushed, as a power loss would: it takes the
    committed bytes for its own, not the page cache's. 4.9.8's commit writes the write buffer into the file's
    channel (the page cache), which outlives the process, so a kill loses only what was not committed yet —
    never a record a consumer was served (reads end at the committed position)."""

    def __init__(self, clock: Any, config: Any, workdir: Any = None) -> None:
        super().__init__(clock, config)

    def recover(self, survivors: int | None = None) -> None:
        if survivors is None and self.durability.crash_kind == "kill" and self.store.buffered:
            self.durability.crash_kind = "power"  # recovery keeps what was flushed, not what was committed
            survivors = max(self.durability.flushed, self.store.removed_count())
        super().recover(survivors)


def kill_takes_committed(clock: Any, config: Any, workdir: Any = None) -> KillTakesCommitted:
    return KillTakesCommitted(clock, config, workdir)


POOL_BROKEN = {"serves_before_commit": serves_before_commit, "kill_takes_committed": kill_takes_committed}
