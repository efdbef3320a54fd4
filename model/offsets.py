"""Consumer offsets as the broker keeps them (ConsumerOffsetManager).

Theory of operation
-------------------
``update`` stores whatever the client sends (RocketMQ 4.9's broker does not
enforce increase-only; the client does). ``query`` answers −1 when the group
never committed on that queue (SPEC §3; RocketMQ's broker would answer 0 for
an in-memory queue starting at 0 and QUERY_NOT_FOUND otherwise — the model
keeps the protocol's −1 and leaves the CONSUME_FROM_* policy to the client).

The table is in memory; ``persist`` copies it to the durable snapshot, which
the broker does every ``flush_consumer_offset_interval_ms`` during ``tick``
and on clean shutdown (BrokerController's scheduled
``consumerOffsetManager.persist()`` and ``shutdown``). A crash restores the
last snapshot. The transaction check service keeps its half/op progress here
too, under group ``CID_RMQ_SYS_TRANS``.
"""

from __future__ import annotations

from rmqspec.model.message import MessageQueue

Key = tuple[str, str, int]  # group, topic, queue_id


class ConsumerOffsets:
    def __init__(self) -> None:
        self.table: dict[Key, int] = {}
        self.persisted: dict[Key, int] = {}

    def update(self, group: str, mq: MessageQueue, offset: int) -> None:
        self.table[(group, mq.topic, mq.queue_id)] = offset

    def query(self, group: str, mq: MessageQueue) -> int:
        return self.table.get((group, mq.topic, mq.queue_id), -1)

    def persist(self) -> None:
        self.persisted = dict(self.table)

    def restore(self) -> None:
        self.table = dict(self.persisted)
