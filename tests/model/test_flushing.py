"""The ASYNC FlushRealTimeService (``model/flushing.py``): both brokers flush what 4.9.8's service would
at each tick, over what was written by the previous tick's pass — a full file, four dirty pages,
everything in the flushed file every 10.5 s — and a power loss takes exactly the rest; and after a
power loss that kept a rolled file's blank but none of the next file's records, recovery resumes at the
next file (recoverAbnormally steps over the blank)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rmqspec.impl import factory as mmap_factory
from rmqspec.model import BrokerConfig, ListRecorder, ManualClock, Message
from rmqspec.model import factory as model_factory
from rmqspec.model.flushing import OS_PAGE_SIZE, FlushRealTime, able_to_flush
from rmqspec.properties.brokerconf import broker_config_from_file

FACTORIES = {"model": model_factory, "mmap": mmap_factory}
START = 1_700_000_000_000


def test_able_to_flush_is_is_able_to_flush() -> None:
    size = 8 * OS_PAGE_SIZE
    assert able_to_flush(size, 0, size, 4)  # a full file always
    assert not able_to_flush(4 * OS_PAGE_SIZE - 1, 0, size, 4)  # three whole pages and a bit
    assert able_to_flush(4 * OS_PAGE_SIZE, 0, size, 4)
    # pages are counted by page number: 100 bytes past a page boundary make no page
    assert not able_to_flush(5 * OS_PAGE_SIZE + 100, OS_PAGE_SIZE + 100, size, 5)
    assert able_to_flush(1, 0, size, 0) and not able_to_flush(7, 7, size, 0)
    assert able_to_flush(1, 0, size, -3)  # <= 0 pages: whatever is written


def test_the_first_pass_at_the_start_is_thorough_then_every_interval() -> None:
    f = FlushRealTime(4, 10_000)
    assert f.least_for(START) == 0  # lastFlushTimestamp 0: the service's first pass is thorough
    assert f.least_for(START + 1) == 4
    f.restart(START, 0)  # a start has just made it
    # decided 10 s after the last, flushed after the loop's wait (500 ms): the model's is 10.5 s after
    assert f.least_for(START) == 4 and f.least_for(START + 10_499) == 4
    assert f.least_for(START + 10_500) == 0 and f.least_for(START + 10_501) == 4
    # a pass sees what the previous one saw written: nothing yet, then 4096 + 200
    assert f.pass_at(START + 20_000, 100, 4096 + 200, 4096) == 100
    # a thorough pass flushes the flushed file to its end; the next file waits for its pages
    assert f.pass_at(START + 30_000, 100, 4096 + 300, 4096) == 4096
    assert f.mark == 4096 + 300


def _broker(name: str, tmp_path: Path, clock: ManualClock, **config):
    rec = ListRecorder()
    broker = FACTORIES[name](clock, BrokerConfig(flush="ASYNC", **config), tmp_path / name, recorder=rec)
    broker.create_topic("T", 1)
    return broker, rec


def _crash_row(rec: ListRecorder) -> dict:
    return [e.as_row() for e in rec.events if e.event == "crash"][-1]


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_small_records_wait_for_the_thorough_pass(name: str, tmp_path: Path) -> None:
    clock = ManualClock(START)
    broker, rec = _broker(name, tmp_path, clock)
    broker.send(Message("T", b"a" * 100, uniq_key="AA" * 16), 0)
    clock.advance(9_000)
    broker.tick()  # 9 s after the start: one page dirty, no thorough pass yet
    broker.send(Message("T", b"b" * 100, uniq_key="BB" * 16), 0)
    clock.advance(1_500)
    broker.tick()  # 10.5 s: thorough, over what the 9 s pass saw (AA)
    broker.send(Message("T", b"c" * 100, uniq_key="CC" * 16), 0)
    clock.advance(10)
    broker.tick()
    broker.crash("power")
    row = _crash_row(rec)
    assert row["detail"]["flushed"] == 1 and row["detail"]["at_risk"] == ["BB" * 16, "CC" * 16]


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_four_dirty_pages_are_flushed_at_the_next_pass(name: str, tmp_path: Path) -> None:
    clock = ManualClock(START)
    broker, rec = _broker(name, tmp_path, clock)
    for i in range(6):  # 6 x ~3.2 KB: past four pages
        broker.send(Message("T", b"x" * 3000, uniq_key=f"{i:032X}"), 0)
    broker.send(Message("T", b"y" * 10, uniq_key="EE" * 16), 0)
    clock.advance(100)
    broker.tick()  # sees nothing yet (the start's pass saw an empty log)
    broker.send(Message("T", b"z" * 10, uniq_key="FF" * 16), 0)
    clock.advance(100)
    broker.tick()  # sees the seven records of the previous tick: four pages; FF came after
    broker.crash("power")
    assert _crash_row(rec)["detail"] == {"records": 8, "flushed": 7, "at_risk": ["FF" * 16]}


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_a_rolled_file_flushed_to_its_blank_resumes_recovery_in_the_next_file(name: str, tmp_path: Path) -> None:
    """File 0 is rolled (its blank written) and flushed through its end by the next pass, the record that
    rolled it is not (fewer than four pages in file 1): a power loss keeps file 0's blank and loses file 1's
    record; recovery steps over the blank, and the next put starts file 1 although it would fit file 0."""
    clock = ManualClock(START)
    broker, rec = _broker(name, tmp_path, clock, commitlog_file_size=4096)
    first = broker.send(Message("T", b"a" * 3600, uniq_key="AA" * 16), 0)
    broker.send(Message("T", b"b" * 1000, uniq_key="BB" * 16), 0)  # rolls to file 1
    clock.advance(100)
    broker.tick()  # sees nothing yet
    clock.advance(100)
    broker.tick()  # file 0 is full: flushed; file 1 has under four pages
    broker.crash("power")
    assert _crash_row(rec)["detail"]["at_risk"] == ["BB" * 16]
    if name == "model":
        broker.recover(survivors=1)
    else:
        broker.recover()
    small = broker.send(Message("T", b"c", uniq_key="CC" * 16), 0)
    assert first.commitlog_offset == 0 and small.commitlog_offset == 4096


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_a_restart_starts_a_new_service(name: str, tmp_path: Path) -> None:
    clock = ManualClock(START)
    broker, rec = _broker(name, tmp_path, clock)
    clock.advance(60_000)
    broker.close()
    broker.reopen()
    broker.send(Message("T", b"a", uniq_key="AA" * 16), 0)
    clock.advance(9_999)
    broker.tick()  # the reopened service's thorough pass was at the reopen: the next is 10 s after it
    broker.crash("power")
    assert _crash_row(rec)["detail"]["at_risk"] == ["AA" * 16]


def test_broker_conf_sets_the_thresholds(tmp_path: Path) -> None:
    path = tmp_path / "broker.conf"
    path.write_text("flushCommitLogLeastPages=0\nflushCommitLogThoroughInterval=-1\n")
    config = broker_config_from_file(path)
    assert (config.flush_commitlog_least_pages, config.flush_commitlog_thorough_interval_ms) == (0, -1)
    defaults = BrokerConfig()  # MessageStoreConfig's
    assert (defaults.flush_commitlog_least_pages, defaults.flush_commitlog_thorough_interval_ms) == (4, 10_000)


_step = st.one_of(
    st.tuples(st.just("send"), st.sampled_from([10, 700, 2500, 3800])),
    st.tuples(st.just("tick"), st.sampled_from([1, 300, 4_000, 10_000])),
    st.tuples(st.just("flush"), st.just(0)),
    st.tuples(st.just("power"), st.just(0)),
)


@given(steps=st.lists(_step, max_size=30), file_size=st.sampled_from([4096, 8192, 20480]),
       least=st.sampled_from([0, 1, 4]))
def test_both_brokers_flush_alike(tmp_path_factory, steps, file_size: int, least: int) -> None:
    """Drawn sends, ticks, flushes and power losses: the mmap broker's flushed records (its files' real
    flushed positions) are the model's at every crash, and the recovered offsets agree."""
    root = tmp_path_factory.mktemp("flush")
    clock = ManualClock(START)
    config = {"commitlog_file_size": file_size, "flush_commitlog_least_pages": least}
    model, model_rec = _broker("model", root, clock, **config)
    mmap, mmap_rec = _broker("mmap", root, clock, **config)
    for i, (what, arg) in enumerate(steps):
        if what == "send":
            msg = Message("T", b"m" * arg, uniq_key=f"{i:032X}")
            a, b = model.send(msg, 0), mmap.send(msg, 0)
            assert (a.commitlog_offset, a.queue_offset) == (b.commitlog_offset, b.queue_offset)
        elif what == "tick":
            clock.advance(arg)
            model.tick()
            mmap.tick()
        elif what == "flush":
            model.flush()
            mmap.flush()
        else:
            mmap.crash("power")
            model.crash("power")
            assert _crash_row(model_rec)["detail"] == _crash_row(mmap_rec)["detail"]
            mmap.recover()  # the real files decide what survived; the model keeps as many (no retention here)
            kept = [e.as_row() for e in mmap_rec.events if e.event == "recover"][-1]["detail"]["survivors"]
            assert kept in model.recovery_choices()
            model.recover(survivors=kept)
