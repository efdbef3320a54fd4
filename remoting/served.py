"""``ServedBroker``: the ``Broker`` a server serves, plus the tables a wire server needs.

Theory of operation
-------------------
The ``Broker`` protocol (SPEC §3) has the operations a client drives; a wire
server also answers questions the protocol does not ask: which topics exist
and with how many queues (routes), whether a subscription group exists (auto
creation), a queue's min/max offset, the message at a commitlog offset, a
queue's consume-queue units. ``MmapBroker`` answers them itself
(``topic_queue_nums``, ``group_config``, ``queue_range``, ``message_at``,
``queue_units``); any other broker is served from a mirror this class keeps
of what went through it (topics and groups it created, topics the broker
reports through ``topic_exists``) and from probe pulls past the end of a
queue (which return min/max offsets and deliver nothing). What a generic
broker cannot answer (VIEW_MESSAGE_BY_ID, QUERY_CONSUME_QUEUE, and
SEARCH_OFFSET_BY_TIMESTAMP without ``search_offset``) is refused with a
remark that says so.

RocketMQ's auto-creation rules live here, as the broker does them with
``autoCreateTopicEnable`` / ``autoCreateSubscriptionGroup`` on
(B/topic/TopicConfigManager, B/subscription/SubscriptionGroupManager):
a group is created with the defaults (16 retries, 1 retry queue) the first
time it is named; a topic sent to with default topic ``TBW102`` is created
with ``min(defaultTopicQueueNums, 8)`` queues. ``TBW102`` itself is answered
by the name server (perm 7, 8 queues) but never created in the served broker.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rmqspec.model.message import MessageQueue, StoredMessage
from rmqspec.model.results import BrokerError

AUTO_CREATE_TOPIC = "TBW102"  # TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC
DEFAULT_TOPIC_QUEUE_NUMS = 8  # BrokerConfig.defaultTopicQueueNums
DEFAULT_GROUP = (16, 1)  # SubscriptionGroupConfig: retryMaxTimes, retryQueueNums
RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"
PROBE_GROUP = "rmqspec_serve_probe"
_PAST_END = 1 << 62


class ServedBroker:
    """One served broker; every call runs on the server's single broker thread."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker
        self._tables = callable(getattr(broker, "topic_queue_nums", None))
        self._topic_exists: Callable[[str], bool] | None = getattr(broker, "topic_exists", None)
        self._message_at = getattr(broker, "message_at", None)
        self._queue_units = getattr(broker, "queue_units", None)
        self._queue_range = getattr(broker, "queue_range", None)
        self._search_offset = getattr(broker, "search_offset", None)
        self._topics: dict[str, int] = {}  # mirror for brokers without topic_queue_nums
        self._groups: dict[str, tuple[int, int]] = {}

    # -- topics ------------------------------------------------------------------------------------

    def topics(self) -> dict[str, int]:
        """topic → queue count, every topic the broker is known to have."""
        if self._tables:
            return dict(self.broker.topic_queue_nums())
        return dict(self._topics)

    def queue_nums(self, topic: str) -> int | None:
        if self._tables:
            return self.broker.topic_queue_nums().get(topic)
        nums = self._topics.get(topic)
        if nums is None and self._topic_exists is not None and self._topic_exists(topic):
            nums = self._topics[topic] = 1
        return nums

    def create_topic(self, topic: str, queue_nums: int) -> None:
        self.broker.create_topic(topic, queue_nums)
        self._topics[topic] = queue_nums

    def ensure_topic(self, topic: str, queue_nums: int) -> int:
        """createTopicIn*Method: create with ``queue_nums`` only when absent; the queue count in force."""
        nums = self.queue_nums(topic)
        if nums is None:
            self.create_topic(topic, queue_nums)
            nums = queue_nums
        return nums

    # -- groups ------------------------------------------------------------------------------------

    def group(self, name: str) -> tuple[int, int] | None:
        """(retry_max_times, retry_queue_nums), or None when the group does not exist."""
        if self._tables:
            return self.broker.group_config(name)
        return self._groups.get(name)

    def create_group(self, name: str, retry_max_times: int, retry_queue_nums: int) -> None:
        self.broker.create_group(name, retry_max_times, retry_queue_nums)
        self._groups[name] = (retry_max_times, retry_queue_nums)

    def ensure_group(self, name: str) -> tuple[int, int]:
        """findSubscriptionGroupConfig with autoCreateSubscriptionGroup=true."""
        config = self.group(name)
        if config is None:
            self.create_group(name, *DEFAULT_GROUP)
            config = DEFAULT_GROUP
        return config

    # -- queues and messages -------------------------------------------------------------------------

    def queue_range(self, topic: str, queue_id: int) -> tuple[int, int]:
        """(min, max) queue offsets; (0, 0) for a queue never written."""
        if self._queue_range is not None:
            return self._queue_range(topic, queue_id)
        try:
            res = self.broker.pull(PROBE_GROUP, MessageQueue(topic, queue_id), _PAST_END, 1)
        except BrokerError:
            return 0, 0
        return res.min_offset, res.max_offset

    @property
    def can_look_up(self) -> bool:
        return self._message_at is not None

    def message_at(self, commitlog_offset: int) -> StoredMessage | None:
        if self._message_at is None:
            return None
        return self._message_at(commitlog_offset)

    @property
    def can_search(self) -> bool:
        return self._search_offset is not None

    def search_offset(self, topic: str, queue_id: int, timestamp: int) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP (``model.protocol.SearchBroker``); only when ``can_search``."""
        assert self._search_offset is not None
        return int(self._search_offset(topic, queue_id, timestamp))

    @property
    def can_list_units(self) -> bool:
        return self._queue_units is not None

    def queue_units(self, topic: str, queue_id: int, start: int, count: int) -> list[tuple[int, int, int]] | None:
        if self._queue_units is None:
            return None
        return self._queue_units(topic, queue_id, start, count)
