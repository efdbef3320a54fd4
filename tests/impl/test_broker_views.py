"""MmapBroker's read-only views for a wire server: topic table, group config, queue range, lookups, units."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmqspec.impl.broker import MmapBroker
from rmqspec.model import BrokerConfig, ManualClock, Message, MessageQueue
from rmqspec.model.results import BrokerError

START_MS = 1_700_000_000_000


def test_views_agree_with_what_was_done(tmp_path: Path) -> None:
    clock = ManualClock(START_MS)
    broker = MmapBroker.open(tmp_path, clock, BrokerConfig(commitlog_file_size=1 << 20))
    broker.create_topic("T", 2)
    broker.create_group("G", retry_max_times=3, retry_queue_nums=2)
    sent = [broker.send(Message("T", b"m%d" % i, tags="a"), 1) for i in range(3)]
    half = broker.send_half(Message("T", b"h"), 0, "PG")
    assert broker.topic_queue_nums()["T"] == 2 and "RMQ_SYS_TRANS_HALF_TOPIC" in broker.topic_queue_nums()
    assert broker.group_config("G") == (3, 2) and broker.group_config("nobody") is None
    assert broker.queue_range("T", 1) == (0, 3) and broker.queue_range("T", 0) == (0, 0)
    assert broker.queue_range("Nope", 0) == (0, 0)
    found = broker.message_at(sent[1].commitlog_offset)
    assert found is not None and found.body == b"m1" and found.msg_id == sent[1].msg_id
    assert found == broker.pull("G", MessageQueue("T", 1), 1, 1).messages[0]
    assert broker.message_at(sent[1].commitlog_offset + 1) is None and broker.message_at(-1) is None
    assert broker.message_at(half.commitlog_offset).topic == "RMQ_SYS_TRANS_HALF_TOPIC"
    units = broker.queue_units("T", 1, 1, 5)
    assert [u[0] for u in units] == [s.commitlog_offset for s in sent[1:]]
    assert all(size > 0 for _, size, _ in units)
    assert broker.queue_units("T", 0, 0, 5) is None  # never written: no consume queue
    assert broker.queue_units("T", 1, 0, 0) == []
    broker.close()
    with pytest.raises(BrokerError):
        broker.topic_queue_nums()
