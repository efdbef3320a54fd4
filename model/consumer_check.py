"""The push consumer's configuration ranges: ``DefaultMQPushConsumerImpl.checkConfig`` (4.9.8).

Theory of operation
-------------------
``start()`` refuses a consumer whose numbers are out of RocketMQ's ranges, one check after another in
a fixed order, with the first failure's message (``consumeThreadMin Out of range [1, 1000]``, read with
``javap -c`` from the 4.9.8 client jar). ``check_config`` makes the same checks in the same order on a
``ConsumerConfig`` (``model/consumer.py`` runs it when a config is built) and raises
``ConsumerConfigError`` naming the Java field; ``-1`` is allowed where RocketMQ allows it (the per-topic
thresholds: unlimited). The client differential (``tests/interop/test_client_differential.py``) holds it
to the real ``checkConfig`` for drawn configurations. The group name, the listener and the subscription
table, which ``checkConfig`` checks first, are the directory's and the consumer's own business here.
"""

from __future__ import annotations

from typing import Any

# (Java name, ConsumerConfig field, low, high, -1 allowed), in checkConfig's order; the thread counts'
# min <= max check comes right after consumeThreadMax
RANGES: tuple[tuple[str, str, int, int, bool], ...] = (
    ("consumeThreadMin", "consume_thread_min", 1, 1000, False),
    ("consumeThreadMax", "consume_thread_max", 1, 1000, False),
    ("consumeConcurrentlyMaxSpan", "consume_concurrently_max_span", 1, 65535, False),
    ("pullThresholdForQueue", "pull_threshold_for_queue", 1, 65535, False),
    ("pullThresholdForTopic", "pull_threshold_for_topic", 1, 6_553_500, True),
    ("pullThresholdSizeForQueue", "pull_threshold_size_for_queue", 1, 1024, False),
    ("pullThresholdSizeForTopic", "pull_threshold_size_for_topic", 1, 102_400, True),
    ("pullInterval", "pull_interval_ms", 0, 65535, False),
    ("consumeMessageBatchMaxSize", "consume_message_batch_max_size", 1, 1024, False),
    ("pullBatchSize", "pull_batch_size", 1, 1024, False),
)


class ConsumerConfigError(ValueError):
    """A configuration ``checkConfig`` refuses: ``field`` is the Java name."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field} {reason}")
        self.field = field


def check_config(config: Any) -> None:
    """Raise ``ConsumerConfigError`` for the first check 4.9.8's ``checkConfig`` fails (module docstring)."""
    for java, field, low, high, unlimited in RANGES:
        value = getattr(config, field)
        if not (unlimited and value == -1) and not low <= value <= high:
            raise ConsumerConfigError(java, f"Out of range [{low}, {high}]: {value}")
        if java == "consumeThreadMax" and config.consume_thread_min > config.consume_thread_max:
            raise ConsumerConfigError("consumeThreadMin", f"({config.consume_thread_min}) is larger than "
                                                          f"consumeThreadMax ({config.consume_thread_max})")
