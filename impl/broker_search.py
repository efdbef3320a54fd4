"""The mmap broker's lookup by time (a mixin of ``impl/broker.py``): SEARCH_OFFSET_BY_TIMESTAMP answered from the
real files — the queue's consume-queue files, their mtimes and their units, and the store timestamps in the
commitlog's record bytes (``MessageStore.offset_by_time``, ``ConsumeQueue.offset_by_time``), by the rule of
``model/timesearch.py``."""

from __future__ import annotations

from rmqspec.impl.store import MessageStore


class TimeSearch:
    """Mixin of ``MmapBroker``: ``search_offset`` (``model.protocol.SearchBroker``)."""

    store: MessageStore | None

    def _require_running(self) -> None: ...  # MmapBroker's

    def search_offset(self, topic: str, queue_id: int, timestamp: int) -> int:
        """getOffsetInQueueByTime: 0 for a queue never written."""
        self._require_running()
        assert self.store is not None
        return self.store.offset_by_time(topic, queue_id, timestamp)
