"""RocketMQ's MessageQueueSelectors for ordered sends (seed 001: ByHash, ByRandom, ByMachineRoom).

An ordered send (``send(msg, selector, arg)``, DefaultMQProducerImpl.sendSelectImpl) asks the
selector for one of the route's queues and tries it once. A selector here is a function of the
argument (the sharding key) and the route's number of queues (``mqs.size()``) to a queue index:

- ``by_hash``: ``SelectMessageQueueByHash``, ``abs(arg.hashCode()) % mqs.size()``
  (``model/javahash.py``): a key stays on one queue while the route does;
- ``ByRandom``: ``SelectMessageQueueByRandom``, ``random.nextInt(mqs.size())``: a key is scattered
  over the queues — the selector a user picks by mistake for ordered messages, and what
  ORDER_KEY_SPLIT (``properties/inv_keys.py``) reports. Seeded, so a run replays;
- ``SelectMessageQueueByMachineRoom`` returns null in RocketMQ 4.9 (a stub; the send then fails
  with "select message queue return null"): not modelled.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from rmqspec.model.javahash import select_queue_by_hash

__all__ = ["ByRandom", "Selector", "by_hash"]

# (the selector's argument, the route's number of queues) -> the queue index it chooses
Selector = Callable[[str, int], int]


def by_hash(arg: str, queue_nums: int) -> int:
    """``SelectMessageQueueByHash``."""
    return select_queue_by_hash(arg, queue_nums)


class ByRandom:
    """``SelectMessageQueueByRandom``: a queue drawn at random (seeded) whatever the argument."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = random.Random(seed)

    def __call__(self, arg: str, queue_nums: int) -> int:
        if queue_nums <= 0:
            raise ValueError(f"queue_nums must be positive, got {queue_nums}")
        return self.rng.randrange(queue_nums)
