"""The push consumer's pull guards: suspend, cached count, cached size, span (RocketMQ 4.9.8).

Theory of operation
-------------------
``DefaultMQPushConsumerImpl.pullMessage`` (facts from ``javap -c -p`` of rocketmq-client-4.9.8.jar)
runs, in this order, before it sends a pull:

1. a dropped process queue: the request ends (no pull, no re-arm; the consumer does that itself);
2. ``setLastPullTimestamp(now)``, then ``makeSureStateOK`` (not running: the exception delay);
3. ``isPause()`` (``suspend()`` set it): the request again after ``PULL_TIME_DELAY_MILLS_WHEN_SUSPEND``,
   1000 ms;
4. ``msgCount > pullThresholdForQueue``: again after ``PULL_TIME_DELAY_MILLS_WHEN_CACHE_FLOW_CONTROL``,
   50 ms (``ConsumerConfig.flow_control_delay_ms``);
5. ``msgSize / (1024 * 1024) > pullThresholdSizeForQueue`` (whole MiB, so a 100 MiB threshold holds
   back from 101 MiB on; ``ProcessQueue.msg_size`` counts bodies only): 50 ms;
6. concurrent only, ``maxSpan > consumeConcurrentlyMaxSpan``: 50 ms (orderly then checks its lock).

``held_back`` answers the delay of the first guard of 3–6 that holds the pull back, or None.

The per-queue thresholds are the consumer's, not the frozen config's: ``RebalancePushImpl
.messageQueueChanged`` (run by ``rebalanceByTopic`` whenever ``updateProcessQueueTableInRebalance``
added or removed a queue of that topic) overwrites ``pullThresholdForQueue`` with
``max(1, pullThresholdForTopic / n)`` and ``pullThresholdSizeForQueue`` with
``max(1, pullThresholdSizeForTopic / n)`` (integer division), each only when its per-topic value is not
−1, where ``n`` is the size of the whole process-queue table (every subscribed topic's queues, the retry
topic's included), and only when ``n`` is not 0. ``FlowThresholds.on_queues_changed`` is that step; the
values stay until the next change. ``suspend`` also stops rebalancing (``DefaultMQPushConsumerImpl
.doRebalance`` does nothing while paused); ``resume`` clears the flag and rebalances at once.

Not modelled: the broker's FLOW_CONTROL answer to a pull (``PULL_TIME_DELAY_MILLS_WHEN_BROKER_FLOW_CONTROL``,
20 ms; the model brokers never answer it) and the flow-control log counters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from rmqspec.model.consumer import ConsumerConfig
    from rmqspec.model.process_queue import ProcessQueue

PULL_TIME_DELAY_MILLS_WHEN_SUSPEND = 1000  # DefaultMQPushConsumerImpl, 4.9.8
UNLIMITED = -1  # pullThresholdForTopic / pullThresholdSizeForTopic: no per-topic limit


class Suspendable:
    """``suspend()`` / ``resume()`` of DefaultMQPushConsumerImpl, mixed into ``PushConsumer``."""

    paused = False  # DefaultMQPushConsumerImpl.pause
    running: bool

    def suspend(self) -> None:
        """Pulls wait 1000 ms at a time and rebalancing stops until ``resume``."""
        self.paused = True

    def resume(self) -> None:
        """Pulls go on at their next turn; a rebalance runs now (``resume`` calls ``doRebalance``)."""
        self.paused = False
        if self.running:
            self.do_rebalance()

    def do_rebalance(self) -> None:
        """Rebalance every subscribed topic (``PushConsumer.do_rebalance``)."""


@attrs.define
class FlowThresholds:
    """The consumer's current ``pullThresholdForQueue`` (messages) and ``pullThresholdSizeForQueue`` (MiB)."""

    for_queue: int
    size_for_queue: int

    @classmethod
    def of(cls, config: ConsumerConfig) -> FlowThresholds:
        return cls(config.pull_threshold_for_queue, config.pull_threshold_size_for_queue)

    def on_queues_changed(self, config: ConsumerConfig, queue_count: int) -> None:
        """``messageQueueChanged``'s recomputation over ``queue_count`` process queues (module docstring)."""
        if queue_count == 0:
            return
        if config.pull_threshold_for_topic != UNLIMITED:
            self.for_queue = max(1, config.pull_threshold_for_topic // queue_count)
        if config.pull_threshold_size_for_topic != UNLIMITED:
            self.size_for_queue = max(1, config.pull_threshold_size_for_topic // queue_count)


def held_back(
    config: ConsumerConfig, thresholds: FlowThresholds, pq: ProcessQueue, *, paused: bool, orderly: bool
) -> int | None:
    """The delay before the pull request runs again when a guard holds it back, else None."""
    if paused:
        return PULL_TIME_DELAY_MILLS_WHEN_SUSPEND
    if pq.msg_count > thresholds.for_queue:
        return config.flow_control_delay_ms
    if pq.msg_size_mib > thresholds.size_for_queue:
        return config.flow_control_delay_ms
    if not orderly and pq.max_span() > config.consume_concurrently_max_span:
        return config.flow_control_delay_ms
    return None
