"""Seed D9's lookup by time: the model and the mmap broker answer SEARCH_OFFSET_BY_TIMESTAMP alike, and the
model's answer is the one an independent statement of 4.9.8's rule allows (``tests/timesearch_rule.py``).

Both brokers share one manual clock and a configuration of 4 KiB commitlog files and 5-unit consume-queue
files, so lookups meet later files and, after drawn retention (the clock moves past the 72 h reserve into
deleteWhen's hour and both brokers tick), deleted commitlog files under kept units. The steps are drawn:
sends to two queues (small or large bodies), clock steps of 0 to 3 ms (equal store times, a lookup halfway)
or 2 s, clean restarts (the mmap broker reopens its files and their mtimes), at most one retention, and
lookups of a queue (or a topic never written) at a store time of one of its units, one millisecond either
side of it, or far before or after every unit. The mmap broker answers from its real files (the
consume-queue files' mtimes, their units, the commitlog's record bytes); the model from its records
(``model/timesearch.py``). Every clause of the rule is reached at the budget (``KINDS``).
"""

from __future__ import annotations

import tempfile

from hypothesis import given, settings
from hypothesis import strategies as st

from rmqspec.impl import factory as mmap_factory
from rmqspec.model import ManualClock, ModelBroker
from rmqspec.model.config import BrokerConfig
from rmqspec.model.message import Message
from rmqspec.model.timesearch import QueueFile, choose_file, offset_by_time
from tests.remoting.wire_pair import EXPIRED_AFTER_MS, T0
from tests.timesearch_rule import allowed, stamps

CONFIG = BrokerConfig(commitlog_file_size=4096, consume_queue_file_size=100)
KINDS = {"no_queue", "exact", "exact_tie", "before_all", "after_all", "nearer_after", "nearer_before", "tie_before",
         "later_file", "gone", "nothing_kept"}


def _lookup_time(data: st.DataObject, times: list[int]) -> int:
    if not times or data.draw(st.booleans(), label="far"):
        return data.draw(st.sampled_from((0, T0 - 1, T0 + 10 * EXPIRED_AFTER_MS)), label="far time")
    return data.draw(st.sampled_from(times), label="unit time") + data.draw(st.integers(-1, 1), label="delta")


def _run(data: st.DataObject, reached: set[str]) -> None:
    clock = ManualClock(T0)
    with tempfile.TemporaryDirectory(prefix="rmqspec-timesearch-") as root:
        mmap = mmap_factory(clock, CONFIG, root)
        model = ModelBroker(clock, CONFIG)
        try:
            for b in (model, mmap):
                b.create_topic("L", 2)
            expired = False
            for n in range(data.draw(st.integers(1, 40), label="steps")):
                step = data.draw(st.sampled_from(("send", "send", "send", "tick", "expire", "restart", "lookup")),
                                 label="step")
                if step == "send":
                    q = data.draw(st.integers(0, 1), label="queue")
                    body = b"x" * data.draw(st.sampled_from((1, 900)), label="body")
                    msg = Message(topic="L", body=body, uniq_key=f"L{n}")
                    ours, theirs = model.send(msg, q), mmap.send(msg, q)
                    assert (ours.queue_offset, ours.commitlog_offset) == (theirs.queue_offset, theirs.commitlog_offset)
                elif step == "tick":
                    clock.advance(data.draw(st.sampled_from((0, 1, 2, 3, 2000)), label="ms"))
                elif step == "restart":  # a clean shutdown and start: the files' mtimes are kept
                    for b in (model, mmap):
                        b.close()
                        b.reopen()
                elif step == "expire" and not expired:
                    expired = True
                    clock.advance(EXPIRED_AFTER_MS)
                    model.tick()
                    mmap.tick()
                else:
                    topic, q = data.draw(st.sampled_from((("L", 0), ("L", 1), ("N", 0))), label="queue")
                    timestamp = _lookup_time(data, stamps(model.store, topic, q))
                    ours = model.search_offset(topic, q, timestamp)
                    assert mmap.search_offset(topic, q, timestamp) == ours, (topic, q, timestamp)
                    answers, kind = allowed(model.store, topic, q, timestamp)
                    assert ours in answers, (topic, q, timestamp, kind, answers, ours)
                    reached.update(kind.split(":"))
        finally:
            mmap.close()


def test_both_brokers_look_up_by_time_as_the_rule_says() -> None:
    reached: set[str] = set()

    @settings(max_examples=300, deadline=None, derandomize=True, database=None)
    @given(st.data())
    def run(data: st.DataObject) -> None:
        _run(data, reached)

    run()
    reached.discard("")
    assert reached == KINDS, KINDS - reached


def test_the_search_edges_4_9_8_shows() -> None:
    """The clauses javap shows, on one file of units stored at 10, 20, 20, 20, 30 (commitlog offsets 0..400)."""
    units = [(k * 100, 100) for k in range(5)]
    ts = dict(zip((u[0] for u in units), (10, 20, 20, 20, 30), strict=True))
    f = QueueFile(5, 30, units)

    def at(timestamp: int, min_offset: int = 0, min_phy: int = 0) -> int:
        return offset_by_time([f], timestamp, min_offset, min_phy, lambda phy, _size: ts[phy])

    assert [at(t) for t in (5, 10, 15, 16, 20, 24, 26, 30, 99)] == [5, 5, 5, 6, 7, 8, 9, 9, 9]
    assert at(20) == 7  # equal times: the first probe (units 0..4: mid 2) hits, not the first unit
    assert at(5, min_offset=8) == 8  # the search starts at the queue's min offset inside the file
    assert at(15, min_phy=100) == 6  # a unit below the commitlog's min counts as "left" without a time
    assert at(15, min_phy=1000) == 4  # nothing readable: byte −1 → (100 − 1) / 20, the unit before the file
    assert offset_by_time([QueueFile(0, 1, [(0, 100)])], 5, 0, 1000, lambda *_: 0) == 0  # Java's −1 / 20 is 0
    assert offset_by_time([f], 15, 0, 0, lambda *_: -1) == 0  # a record it cannot read: 0 at once
    assert offset_by_time([], 15, 0, 0, lambda *_: 0) == 0
    later = QueueFile(10, 50, [(500, 100)])
    assert choose_file([f, later], 30) is f and choose_file([f, later], 31) is later
    assert choose_file([f, later], 99) is later  # after every file's mtime: the last file
