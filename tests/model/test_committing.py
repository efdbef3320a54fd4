"""TransientStorePool (seed D10, ``model/committing.py``): the commit rule and what the model makes of it.

The rule is 4.9.8's ``MappedFile.isAbleToCommit`` and ``CommitLog.CommitRealTimeService.run`` (read with
``javap -c -p`` from rocketmq-store-4.9.8.jar): a full file, ``wrote/4096 - committed/4096 >= leastPages``,
anything when 0 pages; 0 pages once ``commitCommitLogThoroughInterval`` (200 ms) passed since the last commit.
"""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rmqspec.model import BrokerConfig, ListRecorder, ManualClock, Message, MessageQueue, ModelBroker
from rmqspec.model.committing import CommitRealTime, able_to_commit, buffered_from
from rmqspec.model.results import PullStatus
from rmqspec.properties.brokerconf import ConfigError, broker_conf_from_text, broker_config_from_conf

PAGE = 4096
MQ = MessageQueue("T", 0)
POOLED = BrokerConfig(flush="ASYNC", transient_store_pool=True)


def test_able_to_commit_counts_whole_pages():
    assert not able_to_commit(3 * PAGE + 4095, 0, 1 << 30, 4)
    assert able_to_commit(4 * PAGE, 0, 1 << 30, 4)
    assert not able_to_commit(5 * PAGE - 1, PAGE + 1, 1 << 30, 4)  # whole pages: 4 - 1 = 3
    assert able_to_commit(5 * PAGE, PAGE + 1, 1 << 30, 4)  # 5 - 1 = 4
    assert able_to_commit(100, 0, 100, 4)  # a full file
    assert able_to_commit(1, 0, 1 << 30, 0) and not able_to_commit(7, 7, 1 << 30, 0)


@given(wrote=st.integers(0, 1 << 20), committed=st.integers(0, 1 << 20), least=st.integers(-2, 6))
def test_able_to_commit_is_the_flush_rule_over_the_committed_position(wrote, committed, least):
    """isAbleToCommit and isAbleToFlush are the same test over different positions (javap)."""
    from rmqspec.model.flushing import able_to_flush

    size = 1 << 21
    assert able_to_commit(wrote, committed, size, least) == able_to_flush(wrote, committed, size, least)


def test_the_first_pass_is_thorough_then_pages_until_200_ms_pass():
    service = CommitRealTime()
    assert service.pass_at(0, 0, 100, 1 << 30) == 100  # lastCommitTimestamp 0: thorough
    assert service.pass_at(199, 100, 200, 1 << 30) == 100  # under four pages, 199 ms later
    assert service.pass_at(199, 100, 4 * PAGE + 1, 1 << 30) == 4 * PAGE + 1  # four dirty pages
    assert service.pass_at(398, 4 * PAGE + 1, 4 * PAGE + 9, 1 << 30) == 4 * PAGE + 1  # the commit noted 199
    assert service.pass_at(399, 4 * PAGE + 1, 4 * PAGE + 9, 1 << 30) == 4 * PAGE + 9  # 200 ms after it


def test_one_file_per_iteration_a_full_one_always_commits():
    service = CommitRealTime(last_commit=0)
    # at 10 ms: not thorough; the first file is full (its blank), the second holds 100 bytes
    assert service.pass_at(10, 50, 1100, 1000) == 1000
    assert service.last_commit == 10


def test_a_file_without_a_buffer_commits_whatever_the_threshold():
    """MappedFile.commit of a file loaded at the start (no writeBuffer) answers its write position."""
    service = CommitRealTime(last_commit=0)
    assert service.pass_at(10, 500, 700, 1000, buffered=1000) == 700
    assert service.last_commit == 10  # committedWhere moved: a commit


def test_buffered_from_is_the_file_after_the_recovered_end():
    assert buffered_from(0, 1000) == 0
    assert buffered_from(1, 1000) == 1000
    assert buffered_from(1000, 1000) == 1000
    assert buffered_from(1500, 1000) == 2000


def test_the_flag_needs_async():
    with pytest.raises(ValueError, match="ASYNC"):
        BrokerConfig(transient_store_pool=True)
    assert attrs.evolve(POOLED, commit_commitlog_least_pages=0).transient_store_pool


def test_broker_conf_keys():
    conf = broker_conf_from_text("flushDiskType=ASYNC_FLUSH\ntransientStorePoolEnable=true\n"
                                 "commitCommitLogLeastPages=2\ncommitCommitLogThoroughInterval=50\n", "b.conf")
    cfg = broker_config_from_conf(conf)
    assert (cfg.transient_store_pool, cfg.commit_commitlog_least_pages,
            cfg.commit_commitlog_thorough_interval_ms) == (True, 2, 50)
    with pytest.raises(ConfigError, match="ASYNC_FLUSH"):
        broker_config_from_conf(broker_conf_from_text("flushDiskType=SYNC_FLUSH\ntransientStorePoolEnable=true\n",
                                                      "b.conf"))


def _broker(config: BrokerConfig = POOLED) -> tuple[ManualClock, ModelBroker]:
    clock = ManualClock(1_000_000)
    broker = ModelBroker(clock, config, ListRecorder())
    broker.create_topic("T", 1)
    return clock, broker


def test_acknowledged_but_neither_consumable_nor_found_until_committed():
    clock, broker = _broker()
    sent = broker.send(Message("T", b"a"), 0)
    assert sent.status.name == "SEND_OK" and sent.queue_offset == 0
    assert broker.pull("g", MQ, 0).status is PullStatus.NO_NEW_MSG
    assert broker.store.look(sent.commitlog_offset) is None
    second = broker.send(Message("T", b"b"), 0)
    assert second.queue_offset == 1  # queue offsets are assigned at the put (topicQueueTable)
    clock.advance(1)
    broker.tick()
    assert [m.body for m in broker.pull("g", MQ, 0).messages] == [b"a", b"b"]


def test_a_kill_loses_the_uncommitted_acknowledged_record_and_keeps_the_committed_one():
    clock, broker = _broker()
    kept = broker.send(Message("T", b"kept"), 0)
    clock.advance(1)
    broker.tick()
    clock.advance(10)
    broker.tick()  # 10 ms after the commit, under four pages: nothing to commit
    lost = broker.send(Message("T", b"lost"), 0)
    broker.crash("kill")
    assert broker.recorder.events[-1].detail["at_risk"] == [lost.uniq_key]
    assert broker.recovery_choices() == range(1, 2)
    broker.recover()
    assert [m.uniq_key for m in broker.pull("g", MQ, 0).messages] == [kept.uniq_key]


def test_without_the_pool_a_kill_keeps_everything():
    _clock, broker = _broker(BrokerConfig(flush="ASYNC"))
    broker.send(Message("T", b"a"), 0)
    assert broker.pull("g", MQ, 0).status is PullStatus.FOUND
    broker.crash("kill")
    assert broker.recovery_choices() == range(1, 2)


def test_a_power_loss_loses_at_least_what_a_kill_loses():
    clock, broker = _broker()
    broker.send(Message("T", b"a"), 0)
    clock.advance(1)
    broker.tick()  # committed, not flushed (under four pages, the flush's first pass saw nothing)
    broker.send(Message("T", b"b"), 0)
    broker.crash("power")
    choices = broker.recovery_choices()
    assert choices.start <= 1 and choices.stop == 3


def test_flush_and_close_commit_everything():
    _clock, broker = _broker()
    broker.send(Message("T", b"a"), 0)
    broker.flush()
    assert broker.pull("g", MQ, 0).status is PullStatus.FOUND
    broker.send(Message("T", b"b"), 0)
    broker.close()
    broker.reopen()
    assert len(broker.pull("g", MQ, 0).messages) == 2


def test_after_a_restart_the_loaded_file_has_no_buffer():
    """Files loaded at a start are mapped without a write buffer: what is appended there is readable at once,
    until the next file (created with a buffer)."""
    _clock, broker = _broker(attrs.evolve(POOLED, commitlog_file_size=4096))
    broker.send(Message("T", b"a"), 0)
    broker.close()
    broker.reopen()
    broker.send(Message("T", b"b"), 0)
    assert len(broker.pull("g", MQ, 0).messages) == 2
    while broker.store.write_pos < 4096:
        broker.send(Message("T", b"x" * 200), 0)
    before = broker.pull("g", MQ, 0).max_offset
    assert before == broker.store.next_queue_offset("T", 0) - 1  # the record in the new file waits


def test_what_was_written_400_ms_before_a_tick_is_committed_whatever_the_rule():
    """Between ticks the real service kept iterating (every commitIntervalCommitLog, thorough every 200 ms):
    a pass first takes as committed what was written catch_up_ms before it (a prefix, by store time)."""
    service = CommitRealTime(last_commit=1000)
    assert service.catch_up_ms == 400
    # at 1100 the rule commits nothing (not thorough, under four pages), but the first 300 bytes are due
    assert service.pass_at(1100, 0, 500, 1 << 30, due=300) == 300
    clock, broker = _broker(attrs.evolve(POOLED, commitlog_file_size=4096))
    clock.advance(1)
    broker.tick()  # thorough, nothing written: the time noted
    for _ in range(25):  # more than a file: the first rolls, the second holds a few records
        broker.send(Message("T", b"x" * 200), 0)
    clock.advance(60_000)
    assert broker.store.written_by(clock.now() - 400) == broker.store.write_pos
    broker.tick()  # thorough: its first iteration commits the full file; the rest is 60 s old, so committed too
    assert broker.pull("g", MQ, 0, 32).max_offset == 25
    for _ in range(25):
        broker.send(Message("T", b"y" * 200), 0)
    clock.advance(1)
    broker.tick()  # 1 ms later: the full file only
    assert 25 < broker.pull("g", MQ, 25, 32).max_offset < 50


def test_commit_interval_key():
    conf = broker_conf_from_text("transientStorePoolEnable=true\ncommitIntervalCommitLog=50\n", "b.conf")
    cfg = broker_config_from_conf(conf)
    assert cfg.commit_interval_commitlog_ms == 50
    assert ModelBroker(ManualClock(0), cfg).committer.catch_up_ms == 250


def test_a_kill_after_a_rolled_blank_in_a_loaded_file_resumes_in_the_next_file():
    """After a restart the last file has no buffer: the blank that rolls it is in the page cache at once, the
    record in the new file only in its buffer. A kill keeps the blank; recovery steps over it into the next
    file (recoverAbnormally), so the next put starts there (conformance seed 11)."""
    _clock, broker = _broker(attrs.evolve(POOLED, commitlog_file_size=4096))
    broker.send(Message("T", b"a"), 0)
    broker.close()
    broker.reopen()
    while broker.store.write_pos < 4096:
        broker.send(Message("T", b"x" * 1000), 0)
    broker.crash("kill")
    broker.recover()
    assert broker.store.write_pos == 4096
    assert broker.send(Message("T", b"b"), 0).commitlog_offset == 4096
    from rmqspec.model.wellformed import commitlog_layout

    assert commitlog_layout(broker) == []
