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


POOL_BROKEN = {"serves_before_commit": serves_before_commit}
