"""Consumer offsets of the mmap broker: in memory, persisted to ``config/consumerOffset.json``.

Theory of operation
-------------------
Follows B/offset/ConsumerOffsetManager (RocketMQ 4.9.8): the table
``"topic@group" → {queueId: offset}`` lives in memory; ``commitOffset`` stores
what the client sends (the broker does not enforce increase-only); the
BrokerController persists it every ``flushConsumerOffsetInterval`` (5 s) and
on shutdown. A crash loses what was not persisted: ``load`` reads the file back
(falling back to ``.bak``). The transaction check service keeps its half / op
progress here under the group ``CID_RMQ_SYS_TRANS``, as RocketMQ does.

``query`` answers −1 for a queue the group never committed (the protocol's
value, SPEC §3). The file is written atomically (``configfiles``).
"""

from __future__ import annotations

from pathlib import Path

from rmqspec.impl.configfiles import (
    TOPIC_GROUP_SEPARATOR,
    load_consumer_offsets,
    save_consumer_offsets,
)
from rmqspec.model.message import MessageQueue


class ConsumerOffsetTable:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.table: dict[str, dict[int, int]] = {}
        self.load()

    @staticmethod
    def key(group: str, topic: str) -> str:
        return f"{topic}{TOPIC_GROUP_SEPARATOR}{group}"

    def update(self, group: str, mq: MessageQueue, offset: int) -> None:
        self.table.setdefault(self.key(group, mq.topic), {})[mq.queue_id] = offset

    def query(self, group: str, mq: MessageQueue) -> int:
        return self.table.get(self.key(group, mq.topic), {}).get(mq.queue_id, -1)

    def persist(self) -> None:
        save_consumer_offsets(self.path, self.table)

    def load(self) -> None:
        loaded = load_consumer_offsets(self.path).table
        self.table = {k: dict(v) for k, v in loaded.items()}
