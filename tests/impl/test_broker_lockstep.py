"""MmapBroker against ModelBroker, step by step: results *and* SPEC §8 trace events.

Random programs over every protocol operation (sends plain / tagged / delayed,
halves and their ends, pulls of user and system queues with filters,
consumption with send-backs of delivered copies, locks, offsets, clock jumps with ticks and
check answers, flush, and restarts: ``close``+``reopen``, ``crash("kill")`` and
``crash("power")`` + ``recover``) run on both brokers sharing one clock. After
every step the observations and the full event lists must be equal. After a
power loss the model is recovered with the survivor count the mmap store
observed, which must be one the model allows (``recovery_choices``). The
store left behind must pass ``store verify``.

The conformance machine (``properties.conformance``) compares the events too
(``lockstep.EventTap``) on the programs it generates; this test drives the raw
operations without the machine's client discipline.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rmqspec.impl.broker import MmapBroker
from rmqspec.impl.verify import verify_store
from rmqspec.model import BrokerConfig, ListRecorder, ManualClock, Message, MessageQueue, ModelBroker
from rmqspec.model.results import BrokerError, TxnAction

START_MS = 1_700_000_000_000
QUEUES = [
    MessageQueue("T", 0),
    MessageQueue("T", 1),
    MessageQueue("%RETRY%g", 0),
    MessageQueue("%DLQ%g", 0),
    MessageQueue("SCHEDULE_TOPIC_XXXX", 2),
    MessageQueue("TRANS_CHECK_MAX_TIME_TOPIC", 0),
]
TAGS = [None, "A", "B"]
SUBS = ["*", "A", "A || B", "||"]
ACTIONS = [TxnAction.COMMIT, TxnAction.ROLLBACK, TxnAction.UNKNOWN]

CONSUMED = [MessageQueue("T", 0), MessageQueue("T", 1), MessageQueue("%RETRY%g", 0)]

# Weighted: producing, consuming (with send-backs) and moving time dominate.
ops = st.one_of(
    st.tuples(st.just("send"), st.integers(0, 1), st.integers(0, 2), st.sampled_from([0, 0, 1, 3])),
    st.tuples(st.just("send"), st.integers(0, 1), st.integers(0, 2), st.just(0)),
    st.tuples(st.just("half"), st.integers(0, 1)),
    st.tuples(st.just("end"), st.integers(0, 7), st.integers(0, 2), st.booleans()),
    st.tuples(st.just("consume"), st.integers(0, 2), st.integers(0, 2),
              st.sampled_from([0, 0, -1, 2]), st.sampled_from([None, None, 0, -1])),
    st.tuples(st.just("consume"), st.integers(0, 2), st.just(0), st.just(0), st.just(None)),
    st.tuples(st.just("pull"), st.integers(0, 5), st.integers(-1, 4), st.integers(0, 3)),
    st.tuples(st.just("advance"), st.sampled_from([1, 999, 5_000, 10_000, 30_000, 61_000]),
              st.integers(0, 2)),
    st.tuples(st.just("advance"), st.sampled_from([10_000, 61_000]), st.integers(0, 2)),
    st.tuples(st.just("lock"), st.sampled_from(["c1", "c2"]), st.integers(0, 1)),
    st.tuples(st.just("unlock"), st.sampled_from(["c1", "c2"]), st.integers(0, 1)),
    st.tuples(st.just("offset"), st.integers(0, 1), st.integers(0, 5)),
    st.tuples(st.just("flush")),
    st.tuples(st.just("restart"), st.sampled_from(["close", "kill", "power"])),
)


def _observe(fn: Any) -> Any:
    try:
        return fn()
    except BrokerError as e:
        return ("refused", e.code)


class Pair:
    def __init__(self, root: Path, config: BrokerConfig) -> None:
        self.clock = ManualClock(START_MS)
        self.model = ModelBroker(self.clock, config, ListRecorder())
        self.mmap = MmapBroker.open(root, self.clock, config, ListRecorder())
        self.halves: list[Any] = []
        self.next_offset: dict[MessageQueue, int] = {}

    def both(self, fn: Any) -> Any:
        actual = _observe(lambda: fn(self.mmap))
        expected = _observe(lambda: fn(self.model))
        assert actual == expected
        assert self.mmap.recorder.events == self.model.recorder.events
        return actual

    def step(self, op: tuple) -> None:
        kind = op[0]
        if kind == "send":
            _, q, tag, delay = op
            self.both(lambda b: b.send(Message("T", b"m", tags=TAGS[tag], delay_level=delay), q))
        elif kind == "half":
            r = self.both(lambda b: b.send_half(Message("T", b"h", tags="X"), op[1], "pg"))
            if not isinstance(r, tuple):  # refused (a busy store, a file that cannot be created): no half
                self.halves.append(r)
        elif kind == "end" and self.halves:
            h = self.halves[op[1] % len(self.halves)]
            action = ACTIONS[op[2]]
            self.both(lambda b: b.end_transaction("pg", h.commitlog_offset, h.queue_offset, action, op[3]))
        elif kind == "pull":
            mq, offset, sub = QUEUES[op[1]], op[2], SUBS[op[3]]
            self.both(lambda b: b.pull("g", mq, offset, 32, sub))
        elif kind == "consume":
            _, which, fail, level, max_times = op
            mq = CONSUMED[which]
            start = self.next_offset.get(mq, 0)
            r = self.both(lambda b: b.pull("g", mq, start, 4, "*"))
            if isinstance(r, tuple):
                return
            self.next_offset[mq] = r.next_begin_offset
            for i, m in enumerate(r.messages):
                if (i + fail) % 3 == 0:  # this one fails: send it back
                    self.both(lambda b, m=m: b.send_back("g", m.commitlog_offset, level, m.msg_id, max_times))
        elif kind == "advance":
            self.clock.advance(op[1])
            requests = self.both(lambda b: b.tick())
            for r in requests if isinstance(requests, list) else []:
                action = ACTIONS[op[2]]
                self.both(lambda b, r=r, action=action: b.end_transaction(
                    r.producer_group, r.commitlog_offset, r.tran_state_table_offset, action, True))
        elif kind == "lock":
            self.both(lambda b: b.lock_batch("og", op[1], [QUEUES[op[2]]]))
        elif kind == "unlock":
            self.both(lambda b: b.unlock_batch("og", op[1], [QUEUES[op[2]]]))
        elif kind == "offset":
            self.both(lambda b: b.update_offset("g", QUEUES[op[1]], op[2]))
            self.both(lambda b: b.query_offset("g", QUEUES[op[1]]))
        elif kind == "flush":
            self.both(lambda b: b.flush())
        elif kind == "restart":
            self.restart(op[1])

    def restart(self, kind: str) -> None:
        if kind == "close":
            self.both(lambda b: b.close())
            self.both(lambda b: b.reopen())
            return
        self.both(lambda b: b.crash(kind))
        self.mmap.recover()
        survivors = self.mmap.commitlog_record_count()
        assert survivors in self.model.recovery_choices()
        self.model.recover(survivors=survivors)
        assert self.mmap.recorder.events == self.model.recorder.events
        self.next_offset.clear()
        self.halves = [h for h in self.halves if self.model.store.look(h.commitlog_offset)]


def run_pair(program: list[tuple], config: BrokerConfig, commit_first: bool = False,
             pair_class: type[Pair] = Pair) -> None:
    """``program`` on both brokers step by step, drained and pulled; then the store is verified. With
    ``commit_first`` (a TransientStorePool) the brokers are flushed and pulled again before: while one runs,
    a file may be full in its write buffer and not yet on disk (no blank yet) with the next one created,
    which the verifier rightly reports as a cut; a flush commits every buffer first. ``pair_class``: a
    ``Pair`` that knows more operations (``test_file_create_fault.py``)."""
    with tempfile.TemporaryDirectory() as tmp:
        pair = pair_class(Path(tmp), config)
        pair.both(lambda b: b.create_topic("T", 2))
        pair.both(lambda b: b.create_group("g", retry_max_times=2))
        for op in program:
            pair.step(op)
        for _ in range(3):  # drain: every delay and every check comes due
            pair.step(("advance", 3_600_000, 0))
        for mq in QUEUES:
            pair.both(lambda b, mq=mq: b.pull("observer", mq, 0, 32, "*"))
        if commit_first:
            pair.both(lambda b: b.flush())
            for mq in QUEUES:
                pair.both(lambda b, mq=mq: b.pull("observer", mq, 0, 32, "*"))
        assert pair.mmap.commitlog_record_count() == len(pair.model.records())
        report = verify_store(tmp)
        assert report.ok, [f.line() for f in report.findings]
        pair.mmap.close()


@settings(max_examples=15, deadline=None)
@given(program=st.lists(ops, min_size=15, max_size=40))
def test_sync_broker_matches_the_model_step_by_step(program):
    run_pair(program, BrokerConfig(flush="SYNC", commitlog_file_size=2048, transaction_check_max=2))


@settings(max_examples=15, deadline=None)
@given(program=st.lists(ops, min_size=15, max_size=40))
def test_async_broker_matches_the_model_step_by_step(program):
    run_pair(program, BrokerConfig(flush="ASYNC", commitlog_file_size=2048, transaction_check_max=2))


def test_the_conformance_machine_accepts_the_mmap_broker_in_lockstep():
    """SPEC §7: the project's conformance machine drives MmapBroker beside the model."""
    from hypothesis.stateful import run_state_machine_as_test

    from rmqspec.impl.broker import factory
    from rmqspec.properties.conformance import conformance_machine

    machine = conformance_machine(factory)
    run_state_machine_as_test(
        machine, settings=settings(max_examples=6, stateful_step_count=30, deadline=None)
    )
    assert machine.coverage["crash_recover"] + machine.coverage["pull:FOUND"] > 0
