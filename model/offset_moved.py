"""The OFFSET_MOVED_EVENT record a master broker writes when it answers a pull PULL_OFFSET_MOVED.

Theory of operation
-------------------
B/processor/PullMessageProcessor (4.9.8): a pull whose offset the queue cannot
serve (beyond its end by more than one, below its minimum, or any offset but 0
of an empty queue) is answered PULL_OFFSET_MOVED — ``OFFSET_ILLEGAL`` to the
client — and, on a master, ``generateOffsetMovedEvent`` stores a message in the
system topic ``OFFSET_MOVED_EVENT`` (queue 0, no topic config: it cannot be
pulled): tags and keys = the consumer group, DELAY=0, body = the fastjson
``OffsetMovedEvent`` (keys sorted, compact). It is a CommitLog record like any
other, so every later record's offset moves by its size; both brokers write it
so they stay byte-compatible with a real store (found by wall-clock conformance
against the real broker; ``docs/fidelity.md``).
"""

from __future__ import annotations

import json

from rmqspec.model.message import PROPERTY_DELAY_TIME_LEVEL, PROPERTY_KEYS, PROPERTY_TAGS

OFFSET_MOVED_TOPIC = "OFFSET_MOVED_EVENT"


def offset_moved_body(group: str, broker_name: str, topic: str, queue_id: int, requested: int,
                      next_offset: int) -> bytes:
    event = {"consumerGroup": group,
             "messageQueue": {"brokerName": broker_name, "queueId": queue_id, "topic": topic},
             "offsetNew": next_offset, "offsetRequest": requested}
    return json.dumps(event, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def offset_moved_properties(group: str) -> tuple[tuple[str, str], ...]:
    """setTags, setDelayTimeLevel(0), setKeys — stored in the map's (HashMap) order."""
    return ((PROPERTY_KEYS, group), (PROPERTY_DELAY_TIME_LEVEL, "0"), (PROPERTY_TAGS, group))
