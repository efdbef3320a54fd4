"""Queue allocation strategies: which consumer of a group gets which queues.

Theory of operation
-------------------
Follows RocketMQ 4.9 ``C/consumer/rebalance/AllocateMessageQueueAveragely``
and ``AllocateMessageQueueAveragelyByCircle``, called as
``RebalanceImpl.rebalanceByTopic`` calls them: both the queue list and the
consumer-id list are sorted first (``MessageQueue.compareTo``: topic, broker
name, queue id; client ids by string order), then each consumer computes its
own share from its index in the sorted id list. Strings are ordered as Java's
``String.compareTo`` orders them, by UTF-16 code units (``_java_order``): a
character beyond the BMP sorts before one in U+E000–U+FFFF, unlike Python's
code-point order (found by the client differential against the 4.9.8 jar,
``tests/interop/test_client_differential.py``).

- Averagely: contiguous ranges; the first ``len(mqs) % len(cids)``
  consumers get one extra queue; with more consumers than queues the extra
  consumers get nothing. 8 queues / 3 consumers → [0,1,2] [3,4,5] [6,7].
- By circle: queue ``i`` goes to consumer ``i % len(cids)``.
  8 queues / 3 consumers → [0,3,6] [1,4,7] [2,5].

A consumer id that is not in the list gets nothing (RocketMQ logs "[BUG]").
Empty inputs raise ``ValueError`` as RocketMQ raises IllegalArgumentException.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rmqspec.model.message import MessageQueue

AllocateStrategy = Callable[[str, Sequence[MessageQueue], Sequence[str]], list[MessageQueue]]


def _java_order(text: str) -> bytes:
    """A sort key in ``String.compareTo``'s order: big-endian UTF-16 compares unit by unit."""
    return text.encode("utf-16-be", "surrogatepass")


def _mq_order(mq: MessageQueue) -> tuple[bytes, bytes, int]:
    return (_java_order(mq.topic), _java_order(mq.broker_name), mq.queue_id)


def _checked(
    current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
) -> tuple[list[MessageQueue], list[str]]:
    if not current_cid:
        raise ValueError("currentCID is empty")
    if not mq_all:
        raise ValueError("mqAll is null or mqAll empty")
    if not cid_all:
        raise ValueError("cidAll is null or cidAll empty")
    return sorted(mq_all, key=_mq_order), sorted(cid_all, key=_java_order)


def allocate_averagely(
    current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
) -> list[MessageQueue]:
    """AllocateMessageQueueAveragely.allocate over the sorted inputs."""
    mqs, cids = _checked(current_cid, mq_all, cid_all)
    if current_cid not in cids:
        return []
    index = cids.index(current_cid)
    n, c = len(mqs), len(cids)
    mod = n % c
    if n <= c:
        average = 1
    elif mod > 0 and index < mod:
        average = n // c + 1
    else:
        average = n // c
    start = index * average if (mod > 0 and index < mod) else index * average + mod
    count = min(average, n - start)
    return [mqs[(start + i) % n] for i in range(count)]


def allocate_averagely_by_circle(
    current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
) -> list[MessageQueue]:
    """AllocateMessageQueueAveragelyByCircle.allocate over the sorted inputs."""
    mqs, cids = _checked(current_cid, mq_all, cid_all)
    if current_cid not in cids:
        return []
    index = cids.index(current_cid)
    return [mqs[i] for i in range(index, len(mqs)) if i % len(cids) == index]


STRATEGIES: dict[str, AllocateStrategy] = {
    "AVG": allocate_averagely,
    "AVG_BY_CIRCLE": allocate_averagely_by_circle,
}


def allocation_table(
    strategy: AllocateStrategy, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
) -> dict[str, list[MessageQueue]]:
    """Every consumer's share, keyed by client id (for tests and diagrams)."""
    return {cid: strategy(cid, mq_all, cid_all) for cid in sorted(cid_all)}
