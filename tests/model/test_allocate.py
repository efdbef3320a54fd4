"""Queue allocation matches RocketMQ's AllocateMessageQueueAveragely(ByCircle)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rmqspec.model.allocate import (
    allocate_averagely,
    allocate_averagely_by_circle,
    allocation_table,
)
from rmqspec.model.message import MessageQueue


def ids(table):
    return [[mq.queue_id for mq in share] for _, share in sorted(table.items())]


def queues(n, topic="T"):
    return [MessageQueue(topic, i) for i in range(n)]


CIDS3 = ["cid-0", "cid-1", "cid-2"]
CIDS5 = [f"cid-{i}" for i in range(5)]


def test_averagely_8_queues_3_consumers():
    assert ids(allocation_table(allocate_averagely, queues(8), CIDS3)) == [
        [0, 1, 2], [3, 4, 5], [6, 7]
    ]


def test_by_circle_8_queues_3_consumers():
    assert ids(allocation_table(allocate_averagely_by_circle, queues(8), CIDS3)) == [
        [0, 3, 6], [1, 4, 7], [2, 5]
    ]


@pytest.mark.parametrize("strategy", [allocate_averagely, allocate_averagely_by_circle])
def test_3_queues_5_consumers_leaves_two_idle(strategy):
    assert ids(allocation_table(strategy, queues(3), CIDS5)) == [[0], [1], [2], [], []]


def test_inputs_are_sorted_before_allocation():
    shuffled = [MessageQueue("T", i) for i in (5, 2, 7, 0, 1, 6, 3, 4)]
    assert [q.queue_id for q in allocate_averagely("cid-0", shuffled, list(reversed(CIDS3)))] == [
        0, 1, 2
    ]


def test_consumer_not_in_list_gets_nothing():
    assert allocate_averagely("ghost", queues(4), CIDS3) == []
    assert allocate_averagely_by_circle("ghost", queues(4), CIDS3) == []


@pytest.mark.parametrize(
    "args", [("", queues(2), CIDS3), ("cid-0", [], CIDS3), ("cid-0", queues(2), [])]
)
def test_empty_inputs_raise_like_rocketmq(args):
    with pytest.raises(ValueError):
        allocate_averagely(*args)


@given(st.integers(1, 40), st.integers(1, 12))
def test_both_strategies_partition_the_queues(n_queues, n_consumers):
    cids = [f"c{i:02d}" for i in range(n_consumers)]
    for strategy in (allocate_averagely, allocate_averagely_by_circle):
        shares = allocation_table(strategy, queues(n_queues), cids).values()
        flat = [q for share in shares for q in share]
        assert sorted(q.queue_id for q in flat) == list(range(n_queues))
        sizes = [len(s) for s in shares]
        assert max(sizes) - min(sizes) <= 1
