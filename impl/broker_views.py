"""Read-only views of the mmap broker (a mixin of ``impl/broker.py``): what tests, the lockstep checkers and a wire
server (``rmqspec serve``) read beyond the ``Broker`` protocol — record counts, retry-queue choices, topics and
groups, queue ranges, a message by commitlog offset and consume-queue units. Every view reads the live tables or
the files; none writes."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from rmqspec.impl.broker_store import BrokerLog, Entry
from rmqspec.impl.metadata import Metadata
from rmqspec.impl.store import MessageStore
from rmqspec.model.config import BrokerConfig
from rmqspec.model.message import StoredMessage
from rmqspec.model.queues import DLQ_PREFIX, NOT_ALLOWED_SEND_TOPICS, RETRY_PREFIX


class BrokerViews:
    """Mixin of ``MmapBroker``: inspection and read-only views."""

    config: BrokerConfig
    store: MessageStore | None
    log: BrokerLog
    meta: Metadata
    _records: int

    def _require_running(self) -> None: ...  # MmapBroker's

    # inspection (tests, lockstep checkers)

    def commitlog_record_count(self) -> int:
        """Message records in the commitlog (after ``recover``: how many survived)."""
        return self._records

    def retry_queue_choices(self, group: str) -> range:
        """The retry queues RocketMQ may pick for ``group``'s next send-back (random % nums)."""
        config = self.meta.groups.get(group)
        return range(max(config.retry_queue_nums, 1) if config else 1)

    def topic_exists(self, topic: str) -> bool:
        return self.meta.has_topic(topic)

    def records(self) -> tuple[Entry, ...]:
        """Every record in commitlog order (read back from disk)."""
        self._require_running()
        assert self.store is not None
        return tuple(self.log.all_entries())

    @staticmethod
    def is_system_topic(topic: str) -> bool:
        return topic in NOT_ALLOWED_SEND_TOPICS or topic.startswith((RETRY_PREFIX, DLQ_PREFIX))

    # read-only views a wire server needs (rmqspec serve), beyond the Broker protocol

    def topic_queue_nums(self) -> Mapping[str, int]:
        """Every topic the broker knows (topics.json) → its queue count (a live read-only view)."""
        self._require_running()
        return MappingProxyType(self.meta.topics)

    def group_config(self, group: str) -> tuple[int, int] | None:
        """(retry_max_times, retry_queue_nums) of a subscription group, or None if unknown."""
        self._require_running()
        config = self.meta.groups.get(group)
        return None if config is None else (config.retry_max_times, config.retry_queue_nums)

    def queue_range(self, topic: str, queue_id: int) -> tuple[int, int]:
        """(min, max) queue offsets of a queue; max is one past the last unit, (0, 0) if never written."""
        self._require_running()
        return self.log.min_offset(topic, queue_id), self.log.max_offset(topic, queue_id)

    def message_at(self, commitlog_offset: int) -> StoredMessage | None:
        """The stored copy starting at ``commitlog_offset`` in any topic (lookMessageByOffset), or None."""
        self._require_running()
        entry = self.log.look(commitlog_offset)
        return None if entry is None else entry.to_stored(self.config)

    def queue_units(self, topic: str, queue_id: int, start: int, count: int) -> list[tuple[int, int, int]] | None:
        """Consume-queue units ``(commitlog offset, size, tagsCode)`` from ``start``; None if no such queue."""
        self._require_running()
        assert self.store is not None
        if not self.store.has_queue(topic, queue_id):
            return None
        units = self.store.queue_units(topic, queue_id, start, max(count, 0))
        return [(u.commitlog_offset, u.size, u.tags_code) for u in units]

