"""Timer messages across restarts: the mmap broker (``config/timercheck`` + the enqueue times
file) against the model (its in-memory checkpoint), in lockstep.

A clean ``close``/``reopen`` loses nothing and fires nothing twice; ``crash("kill")`` and
``crash("power")`` fire again what was delivered after the last checkpoint (a duplicate,
never a loss), with TIMER_ENQUEUE_MS byte for byte the model's — the enqueue time the
first delivery carried, read back from the file. Two power-loss cases pin the file's
extra writes (a restart that forgets cut copies; a re-enqueue below the durable pointer).
Last, random programs of every broker operation plus timer sends and restarts under the
5.2 profile, step by step (``test_broker_lockstep``'s machinery).
"""

from __future__ import annotations

import importlib
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqspec.impl import crashtest, crashwork, effects
from rmqspec.impl.configfiles import parse_fastjson
from rmqspec.impl.timer_service import ENQUEUE_TIMES_FILE, TIMER_CHECK_FILE, decode_enqueue_times
from rmqspec.impl.verify import verify_store
from rmqspec.model import BrokerConfig, Message, MessageQueue
from rmqspec.model.config import default_config
from rmqspec.model.timer import TIMER_TOPIC

sys.path.insert(0, str(Path(__file__).resolve().parent))
_pair = importlib.import_module("timer_pair")  # helpers beside this test
_lockstep = importlib.import_module("test_broker_lockstep")
Pair, config, restart, START_MS, T0 = _pair.Pair, _pair.config, _pair.restart, _pair.START_MS, _pair.T0


def fired_keys(pair: Any) -> Counter[str]:
    return Counter(e.msg_key for e in pair.events("timer_fire"))


def delivered(pair: Any, mq: MessageQueue) -> list[Any]:
    return list(pair.pull(mq).messages)


def _sends(pair: Any) -> list[str]:
    keys = []
    for i, delay in enumerate((1500, 2300, 4000, 6100, 9000)):
        keys.append(pair.send(i % 2, TIMER_DELAY_MS=str(delay)).uniq_key)
    return keys


def test_a_clean_restart_loses_no_timer_and_fires_none_twice(tmp_path: Path):
    pair = Pair(tmp_path, config(timer_flush_interval_ms=5000))
    keys = _sends(pair)
    pair.tick_at(START_MS + 100)
    pair.tick_at(START_MS + 3000)  # two delivered, no checkpoint since (5 s interval)
    restart(pair, "close")
    for ts in range(4000, 12_000, 700):
        pair.tick_at(START_MS + ts)
    restart(pair, "close")
    pair.tick_at(START_MS + 60_000)
    assert fired_keys(pair) == Counter(keys)
    assert verify_store(tmp_path).ok


def test_a_kill_fires_again_what_the_checkpoint_missed_with_the_same_enqueue_time(tmp_path: Path):
    pair = Pair(tmp_path, config(timer_flush_interval_ms=1000))
    key = pair.send(0, TIMER_DELAY_MS="1500").uniq_key  # out ...1000, due ...2000
    pair.tick_at(START_MS + 977)  # ...1100: enqueued at write time ...1000; nothing persisted yet
    pair.tick_at(START_MS + 1077)  # persisted: offset 0 pending, its enqueue time in the file
    times = decode_enqueue_times(parse_fastjson((tmp_path / "config" / ENQUEUE_TIMES_FILE).read_text()))
    assert times == {0: 1_700_000_001_000}
    pair.tick_at(START_MS + 1927)  # ...2050: delivered, not persisted (850 ms since the last)
    restart(pair, "kill")
    pair.clock.advance(3000)
    pair.both(lambda b: b.tick())
    assert fired_keys(pair) == Counter({key: 2})  # at-least-once: a duplicate, never a loss
    first, again = delivered(pair, T0)
    assert first.properties["TIMER_ENQUEUE_MS"] == again.properties["TIMER_ENQUEUE_MS"] == "1700000001000"
    assert first.properties["TIMER_DEQUEUE_MS"] != again.properties["TIMER_DEQUEUE_MS"]


def test_a_power_loss_keeps_every_flushed_timer(tmp_path: Path):
    pair = Pair(tmp_path, config(flush="ASYNC", timer_flush_interval_ms=1000))
    keys = _sends(pair)
    pair.both(lambda b: b.flush())
    pair.tick_at(START_MS + 1000)
    pair.tick_at(START_MS + 2500)  # one delivered (unflushed), checkpoint written
    pair.send(1, TIMER_DELAY_SEC="1")  # unflushed: lost
    restart(pair, "power")
    pair.tick_at(START_MS + 30_000)
    fired = fired_keys(pair)
    assert set(keys) <= set(fired)
    assert verify_store(tmp_path).ok


def test_a_restart_that_cuts_counted_timer_copies_forgets_their_enqueue_times(tmp_path: Path):
    """The checkpoint counted two timer copies a power loss took; the model forgets their times at
    once, so the file must too before the next (kill) restart reads it."""
    pair = Pair(tmp_path, config(flush="ASYNC", timer_flush_interval_ms=1000))
    pair.send(0, TIMER_DELAY_SEC="20")
    pair.send(1, TIMER_DELAY_SEC="20")
    pair.tick_at(START_MS + 1000)  # enqueued and persisted: pointer 2, both times in the file
    restart(pair, "power")  # nothing was flushed: both copies lost, the pointer is clamped to 0
    assert pair.mmap.commitlog_record_count() == 0
    path = tmp_path / "config" / ENQUEUE_TIMES_FILE
    assert decode_enqueue_times(parse_fastjson(path.read_text())) == {}
    pair.clock.advance(5000)
    pair.send(0, TIMER_DELAY_SEC="2")  # offset 0 again, not yet enqueued
    pair.both(lambda b: b.flush())
    restart(pair, "kill")  # pointer min(2, 1) = 1: offset 0 counts as enqueued, with no time kept
    pair.clock.advance(10_000)
    pair.both(lambda b: b.tick())
    (msg,) = delivered(pair, T0)
    assert msg.properties["TIMER_ENQUEUE_MS"] == str(pair.clock.now() - 10_000)  # the restart's time


def test_a_re_enqueue_below_the_durable_pointer_is_written_at_once(tmp_path: Path):
    pair = Pair(tmp_path, config(flush="ASYNC", timer_flush_interval_ms=1000))
    pair.send(0, TIMER_DELAY_SEC="20")
    pair.send(1, TIMER_DELAY_SEC="20")
    pair.tick_at(START_MS + 1000)
    restart(pair, "power")
    pair.send(0, TIMER_DELAY_SEC="2")
    pair.both(lambda b: b.flush())
    pair.clock.advance(300)
    pair.both(lambda b: b.tick())  # enqueued (offset 0 < durable pointer 2), no checkpoint (300 ms)
    enqueue_ms = pair.clock.now() // 1000 * 1000
    restart(pair, "kill")  # before any checkpoint
    pair.clock.advance(10_000)
    pair.both(lambda b: b.tick())
    (msg,) = delivered(pair, T0)
    assert msg.properties["TIMER_ENQUEUE_MS"] == str(enqueue_ms)


def test_crash_states_of_the_timer_workload_keep_every_timer(tmp_path: Path):
    """``impl/crashwork.py``'s ``timer`` workload: config/timercheck and the enqueue times written in
    the recorded run, and every sampled crash state recovers with each kept timer copy firing."""
    workload = crashwork.WORKLOADS["timer"]
    recording = crashwork.record(workload, tmp_path / "rec")
    written = {e.path for e in recording.effects if isinstance(e, effects.Write)}
    assert f"config/{TIMER_CHECK_FILE}" in written and f"config/{ENQUEUE_TIMES_FILE}.tmp" in written
    report = crashtest.explore([workload], states=300, seed=0)
    assert report.ok, "\n".join(report.lines())
    assert report.states == 300


# -- random programs ------------------------------------------------------------------------------

DELAYS = [("TIMER_DELAY_MS", "1"), ("TIMER_DELAY_MS", "999"), ("TIMER_DELAY_MS", "2500"),
          ("TIMER_DELAY_SEC", "7"), ("TIMER_DELAY_SEC", "61"), ("TIMER_DELAY_SEC", "0"),
          ("TIMER_DELAY_SEC", "300000"), ("TIMER_DELAY_MS", "x"), ("TIMER_DELIVER_MS", "+4000")]
_timer_send = st.tuples(st.just("timer"), st.integers(0, 1), st.integers(0, len(DELAYS) - 1),
                        st.sampled_from([0, 0, 0, 2]))
_legal_timer_send = st.tuples(st.just("timer"), st.integers(0, 1), st.integers(0, 4), st.just(0))
_timer_steps = st.one_of(_timer_send, _legal_timer_send,
                        st.tuples(st.just("advance"), st.sampled_from([300, 1000, 1700]), st.integers(0, 2)))
# a third of the steps are timer sends or short clock steps (one_of alone would flatten them
# among the lockstep test's dozen branches)
timer_ops = st.integers(0, 2).flatmap(lambda k: _lockstep.ops if k else _timer_steps)


class TimerPair(_lockstep.Pair):
    def step(self, op: tuple) -> None:
        if op[0] != "timer":
            super().step(op)
            return
        _, queue_id, which, level = op
        name, value = DELAYS[which]
        if name == "TIMER_DELIVER_MS":
            value = str(self.clock.now() + int(value))
        msg = Message("T", b"t", tags="A", properties={name: value}, delay_level=level)
        self.both(lambda b: b.send(msg, queue_id))


def _run(program: list[tuple], cfg: BrokerConfig) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        pair = TimerPair(Path(tmp), cfg)
        pair.both(lambda b: b.create_topic("T", 2))
        pair.both(lambda b: b.create_group("g", retry_max_times=2))
        for op in program:
            pair.step(op)
        for _ in range(3):  # drain: every delay, timer and check comes due
            pair.step(("advance", 3_600_000, 0))
        for mq in [*_lockstep.QUEUES, MessageQueue(TIMER_TOPIC, 0)]:
            pair.both(lambda b, mq=mq: b.pull("observer", mq, 0, 32, "*"))
        assert pair.mmap.commitlog_record_count() == len(pair.model.records())
        report = verify_store(tmp)
        assert report.ok, [f.line() for f in report.findings]
        pair.mmap.close()


def _v5(flush: str) -> BrokerConfig:
    return attrs.evolve(default_config("rocketmq-5.2"), flush=flush, commitlog_file_size=2048,
                        transaction_check_max=2)


@settings(max_examples=12, deadline=None)
@given(program=st.lists(timer_ops, min_size=15, max_size=40))
def test_sync_5x_broker_with_timers_matches_the_model_step_by_step(program):
    _run(program, _v5("SYNC"))


@settings(max_examples=12, deadline=None)
@given(program=st.lists(timer_ops, min_size=15, max_size=40))
def test_async_5x_broker_with_timers_matches_the_model_step_by_step(program):
    _run(program, _v5("ASYNC"))
