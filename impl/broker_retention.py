"""The mmap broker's clean service (a mixin of ``impl/broker.py``): retention as ``model/retention.py``
decides it, applied to the real files — commitlog files unlinked oldest first, consume-queue files after
them, the queues' min offsets corrected — and the injected disk usage (``Capability.DISK_USAGE``)."""

from __future__ import annotations

from rmqspec.impl.broker_store import BrokerLog
from rmqspec.impl.store import MessageStore
from rmqspec.model.events import Recorder
from rmqspec.model.retention import Cleaner, check_disk_ratio


class Retention:
    """Mixin of ``MmapBroker``: ``cleaner`` lives as long as the broker object (the injected disk usage
    survives restarts); each start restarts its passes."""

    cleaner: Cleaner
    store: MessageStore | None
    log: BrokerLog
    recorder: Recorder
    _records: int  # the message records in the commitlog, and how many of them are durable
    _flushed: int

    def _require_running(self) -> None: ...  # MmapBroker's

    def _clean(self, now: int) -> None:
        """The pass due; the record counts the trace states are of the records kept."""
        assert self.store is not None
        before = self.store.commitlog_min_offset
        self.cleaner.run(now, self.store, self.recorder.emit)
        if self.store.commitlog_min_offset != before:
            kept = self.log.count_records()
            self._flushed = max(0, self._flushed - (self._records - kept))
            self._records = kept

    def set_disk_usage(self, ratio: float) -> None:
        """``Capability.DISK_USAGE``: the usage the clean service sees from its next pass."""
        self.cleaner.disk_ratio = check_disk_ratio(ratio)

    def commitlog_min_offset(self) -> int:
        """GET_BROKER_RUNTIME_INFO's ``commitLogMinOffset``: the first byte retention kept."""
        self._require_running()
        assert self.store is not None
        return self.store.commitlog_min_offset
