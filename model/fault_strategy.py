"""The producer's latency fault tolerance: MQFaultStrategy and LatencyFaultToleranceImpl of RocketMQ 4.9.8.

Theory of operation
-------------------
A producer with ``sendLatencyFaultEnable`` (default off) remembers, per broker name, how its last send
attempt went: ``updateFaultItem(brokerName, latency, isolation)`` runs after every attempt of
``sendDefaultImpl`` (a sync send), ``isolation`` false for an answered attempt, true for one that threw
(a RemotingException, an MQClientException or an MQBrokerException, retried or not). The attempt's
latency — or 30000 ms when isolated — is looked up in two tables (``computeNotAvailableDuration``:
the duration of the largest ``LATENCY_MAX`` step the latency reaches, else 0)::

    latency ≥      50   100    550   1000    2000    3000    15000 ms
    not available   0     0  30000  60000  120000  180000   600000 ms

so an isolated broker is not available for 600 s (30000 ≥ 15000), not 30 s. The fault item's
``startTimestamp`` is the attempt's end + that duration; the broker is available again when
``now - startTimestamp >= 0``. A broker with no item is available.

``select`` is ``MQFaultStrategy.selectOneMessageQueue``. Disabled: ``TopicPublishInfo``'s selection
avoiding the last attempt's broker (``model/routing.py``). Enabled — 4.9.8 ignores the last broker:

1. ``index = sendWhichQueue.incrementAndGet()``; for ``i`` in the queue list's size: the queue at
   ``abs(index++) % size`` is returned when its broker is available (the shared index is bumped once);
2. none is: ``pickOneAtLeast`` names a broker (below); if the route has write queues on it
   (``getQueueIdByBroker`` > 0), a round-robin queue is taken (one bump) and its broker and queue id
   replaced by that broker and ``sendWhichQueue.incrementAndGet() % writeQueueNums`` (a second bump);
   otherwise the item is removed and
3. a plain round-robin queue is returned.

``pickOneAtLeast`` lists the items in the table's iteration order, sorts them stably (available
first, then lower latency, then earlier ``startTimestamp``) and returns the first when there are fewer
than two, else the item at ``whichItemWorst.incrementAndGet() % (size / 2)``: one of the better half.
4.9.8 has no shuffle before the sort (older clients had one). The table is a
``ConcurrentHashMap(16)``: 32 bins, iterated bin by bin, each bin in insertion order; a bin is
``spread(hashCode) & 31`` — ``ITERATION_BINS`` (exact below 24 brokers, where the map would grow).

Deviations: ``ThreadLocalIndex`` starts at a random value per thread; here every index is one counter
starting at the value the producer is given (one sending thread). Time is the producer's clock.

Sources (4.9.8 client jar, javap): ``client/latency/MQFaultStrategy``, ``LatencyFaultToleranceImpl``
(and ``$FaultItem``), ``client/impl/producer/DefaultMQProducerImpl.sendDefaultImpl``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import attrs

from rmqspec.model.javahash import java_string_hash

if TYPE_CHECKING:
    from rmqspec.model.message import MessageQueue
    from rmqspec.model.routing import PublishInfo

# MQFaultStrategy.latencyMax / notAvailableDuration (4.9.8 defaults, ms)
LATENCY_MAX: tuple[int, ...] = (50, 100, 550, 1000, 2000, 3000, 15000)
NOT_AVAILABLE_DURATION: tuple[int, ...] = (0, 0, 30000, 60000, 120000, 180000, 600000)
# updateFaultItem's latency for an isolated broker (an attempt that threw)
ISOLATION_LATENCY = 30000
# LatencyFaultToleranceImpl's ConcurrentHashMap(16): tableSizeFor(16 + 8 + 1) bins
ITERATION_BINS = 32


def not_available_duration(
    latency: int,
    latency_max: Sequence[int] = LATENCY_MAX,
    durations: Sequence[int] = NOT_AVAILABLE_DURATION,
) -> int:
    """``computeNotAvailableDuration``: the duration of the largest step ``latency`` reaches, else 0."""
    for i in range(len(latency_max) - 1, -1, -1):
        if latency >= latency_max[i]:
            return durations[i]
    return 0


def iteration_bin(name: str) -> int:
    """The ConcurrentHashMap bin of a broker name: ``spread(hashCode) & (bins - 1)``."""
    h = java_string_hash(name) & 0xFFFFFFFF
    return ((h ^ (h >> 16)) & 0x7FFFFFFF) & (ITERATION_BINS - 1)


@attrs.define
class FaultItem:
    """One broker's last attempt: its latency and when the broker is available again."""

    name: str
    latency: int
    start: int  # startTimestamp: the attempt's end + its not-available duration
    inserted: int  # the item's place in its bin (insertion order)

    def available(self, now: int) -> bool:
        return now - self.start >= 0


@attrs.define
class FaultTable:
    """``LatencyFaultToleranceImpl``: fault items by broker name."""

    items: dict[str, FaultItem] = attrs.field(factory=dict)
    which_item_worst: int = 0  # the value whichItemWorst.incrementAndGet() returns next
    _inserted: int = 0

    def update(self, name: str, latency: int, duration: int, now: int) -> None:
        item = self.items.get(name)
        if item is None:
            self._inserted += 1
            self.items[name] = FaultItem(name, latency, now + duration, self._inserted)
        else:
            item.latency, item.start = latency, now + duration

    def is_available(self, name: str | None, now: int) -> bool:
        item = self.items.get(name) if name is not None else None
        return item is None or item.available(now)

    def remove(self, name: str | None) -> None:
        if name is not None:
            self.items.pop(name, None)

    def iteration_order(self) -> list[FaultItem]:
        return sorted(self.items.values(), key=lambda it: (iteration_bin(it.name), it.inserted))

    def pick_one_at_least(self, now: int) -> str | None:
        """``pickOneAtLeast``: a broker of the better half (available first, lower latency, earlier start)."""
        ranked = sorted(self.iteration_order(), key=lambda it: (not it.available(now), it.latency, it.start))
        if not ranked:
            return None
        half = len(ranked) // 2
        if half <= 0:
            return ranked[0].name
        index = self.which_item_worst
        self.which_item_worst += 1
        return ranked[index % half].name


@attrs.define
class FaultStrategy:
    """``MQFaultStrategy``: the fault table and the queue selection of sendDefaultImpl."""

    enabled: bool = False  # sendLatencyFaultEnable
    latency_max: tuple[int, ...] = LATENCY_MAX
    durations: tuple[int, ...] = NOT_AVAILABLE_DURATION
    table: FaultTable = attrs.field(factory=FaultTable)

    def update_fault_item(self, broker_name: str, latency: int, isolation: bool, now: int) -> None:
        """After an attempt (``now``: its end); nothing when disabled."""
        if not self.enabled:
            return
        duration = not_available_duration(
            ISOLATION_LATENCY if isolation else latency, self.latency_max, self.durations
        )
        self.table.update(broker_name, latency, duration, now)

    def select(self, info: PublishInfo, last_broker: str | None, now: int) -> MessageQueue:
        """``selectOneMessageQueue(tpInfo, lastBrokerName)``."""
        if not self.enabled:
            return info.select_avoiding(last_broker)
        queues = info.queues
        index = info.send_which_queue.increment_and_get()
        for _ in range(len(queues)):
            mq = queues[abs(index) % len(queues)]
            index += 1
            if self.table.is_available(mq.broker_name, now):
                return mq
        not_best = self.table.pick_one_at_least(now)
        write_queues = info.write_queue_nums(not_best)
        if not_best is not None and write_queues > 0:
            mq = info.select_one()
            return attrs.evolve(
                mq, broker_name=not_best, queue_id=info.send_which_queue.increment_and_get() % write_queues
            )
        self.table.remove(not_best)
        return info.select_one()
