"""Per-key order (issue 42, seed 001's producer half): one queue per sharding key and route.

Theory of operation
-------------------
RocketMQ keeps a sharding key's messages in order only on one queue: an ordered send asks a
``MessageQueueSelector`` for the queue (``SelectMessageQueueByHash``: ``abs(key.hashCode()) %
mqs.size()``, ``model/javahash.py``), and an orderly consumer reads each queue in offset order. A
selector that is not a function of the key and the route (``SelectMessageQueueByRandom`` given an
order id, a round robin) scatters a key across queues, and its messages are consumed out of send order
by whoever owns those queues, with no broker at fault. The route is told by the number of queues the
selector chose among (``detail.route_queues`` of the ``send``): a topic that grew is a new route, and a
key may move once.

``check_key_split`` is the invariant (``KeyRoutedOnceProperty``); ``traces/checks_order.detect_key_split``
and the Spark audit's keyed pass (``spark/rules_keyed.py``) judge the same on traces.
"""

from __future__ import annotations

from rmqspec.properties.codes import Code
from rmqspec.properties.history import History
from rmqspec.properties.inv_base import Invariant, Violation, _detail, _v


def check_key_split(h: History) -> list[Violation]:
    """One producer group's sends of one sharding key on one route (its number of queues) go to one
    queue: a send to another queue than an earlier such send's is ORDER_KEY_SPLIT."""
    out: list[Violation] = []
    first: dict[tuple, dict[int, int]] = {}
    for ev in h.of("send"):
        route = _detail(ev, "route_queues")
        if ev.sharding_key is None or not isinstance(route, int) or ev.queue_id is None:
            continue
        queues = first.setdefault((ev.group, ev.topic, ev.sharding_key, route), {})
        others = sorted(q for q in queues if q != ev.queue_id)
        if others:
            out.append(_v(h, Code.ORDER_KEY_SPLIT, ev,
                          f"sharding key {ev.sharding_key!r} of {ev.group} on {ev.topic} sent to two queues "
                          f"of one route ({route} queues)", f"queue {others[0]}", f"queue {ev.queue_id}"))
        queues.setdefault(ev.queue_id, ev.seq)
    return out


KEY_INVARIANTS: tuple[Invariant, ...] = (
    Invariant("KeyRoutedOnceProperty", Code.ORDER_KEY_SPLIT, "always",
              "One route sends a producer group's sharding key to one queue.",
              "MessageQueueSelector (SelectMessageQueueByHash) in DefaultMQProducerImpl.sendSelectImpl",
              check_key_split),
)
