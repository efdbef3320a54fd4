"""Random operation sequences keep the model broker well-formed after every step.

Well-formedness is about the model's own state (``rmqspec.model.wellformed``);
broker guarantees are checked elsewhere (``rmqspec.properties``).
"""

from __future__ import annotations

import contextlib

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from rmqspec.model import (
    BrokerConfig,
    ManualClock,
    Message,
    MessageQueue,
    ModelBroker,
    TxnAction,
    wellformed,
)
from rmqspec.model.crash import BrokerState
from rmqspec.model.queues import HALF_TOPIC, SCHEDULE_TOPIC
from rmqspec.model.results import BrokerError

START = 1_700_000_000_000
QUEUES = [
    MessageQueue("T", 0),
    MessageQueue("T", 1),
    MessageQueue("U", 0),
    MessageQueue("%RETRY%g", 0),
    MessageQueue("%DLQ%h", 0),
    MessageQueue(SCHEDULE_TOPIC, 0),
    MessageQueue(SCHEDULE_TOPIC, 2),
    MessageQueue(HALF_TOPIC, 0),
]


class ModelBrokerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = ManualClock(START)
        self.broker: ModelBroker | None = None
        self.high_water = START

    @initialize(
        flush=st.sampled_from(["SYNC", "ASYNC"]), file_size=st.sampled_from([1 << 30, 2048])
    )
    def start(self, flush: str, file_size: int) -> None:
        config = BrokerConfig(
            flush=flush,
            commitlog_file_size=file_size,
            transaction_check_interval_ms=10_000,
            transaction_timeout_ms=2_000,
            transaction_check_max=3,
        )
        self.broker = ModelBroker(self.clock, config)
        self.broker.create_topic("T", 2)
        self.broker.create_topic("U", 1)
        self.broker.create_group("g")
        self.broker.create_group("h", retry_max_times=2)

    def running(self) -> bool:
        return self.broker is not None and self.broker.state is BrokerState.RUNNING

    def _offset_of(self, index: int) -> int:
        records = self.broker.records()
        return records[index % len(records)].commitlog_offset if records else 0

    @precondition(running)
    @rule(
        topic=st.sampled_from(["T", "U"]),
        queue=st.integers(0, 1),
        tags=st.sampled_from([None, "A", "B"]),
        delay=st.integers(0, 20),
        body=st.integers(0, 600),
    )
    def send(self, topic: str, queue: int, tags: str | None, delay: int, body: int) -> None:
        with contextlib.suppress(BrokerError):
            self.broker.send(Message(topic, b"b" * body, tags=tags, delay_level=delay), queue)

    @precondition(running)
    @rule(queue=st.integers(0, 1), body=st.integers(0, 100))
    def send_half(self, queue: int, body: int) -> None:
        self.broker.send_half(Message("T", b"h" * body), queue, "pg")

    @precondition(running)
    @rule(
        index=st.integers(0, 1000),
        action=st.sampled_from(list(TxnAction)),
        group=st.sampled_from(["pg", "other"]),
        from_check=st.booleans(),
    )
    def end_transaction(self, index: int, action: TxnAction, group: str, from_check: bool) -> None:
        records = self.broker.records()
        if not records:
            return
        record = records[index % len(records)]
        self.broker.end_transaction(
            group, record.commitlog_offset, record.queue_offset, action, from_check
        )

    @precondition(running)
    @rule(
        mq=st.sampled_from(QUEUES),
        offset=st.integers(-1, 12),
        max_nums=st.integers(1, 40),
        sub=st.sampled_from(["*", "A", "A || B", "C"]),
        group=st.sampled_from(["g", "h"]),
    )
    def pull(self, mq: MessageQueue, offset: int, max_nums: int, sub: str, group: str) -> None:
        with contextlib.suppress(BrokerError):
            self.broker.pull(group, mq, offset, max_nums, sub)

    @precondition(running)
    @rule(
        index=st.integers(0, 1000),
        level=st.integers(-1, 20),
        group=st.sampled_from(["g", "h", "nobody"]),
        max_times=st.sampled_from([None, -1, 0, 1, 16]),
    )
    def send_back(self, index: int, level: int, group: str, max_times: int | None) -> None:
        self.broker.send_back(group, self._offset_of(index), level, None, max_times)

    @precondition(running)
    @rule(mq=st.sampled_from(QUEUES), offset=st.integers(0, 20))
    def update_offset(self, mq: MessageQueue, offset: int) -> None:
        self.broker.update_offset("g", mq, offset)

    @precondition(running)
    @rule(
        client=st.sampled_from(["c1", "c2"]),
        mqs=st.lists(st.sampled_from(QUEUES[:3]), max_size=3),
        unlock=st.booleans(),
    )
    def lock(self, client: str, mqs: list[MessageQueue], unlock: bool) -> None:
        if unlock:
            self.broker.unlock_batch("g", client, mqs)
        else:
            self.broker.lock_batch("g", client, mqs)

    @rule(ms=st.sampled_from([0, 1, 999, 1_000, 5_000, 10_000, 60_001, 3_600_000, 7_200_000]))
    def advance(self, ms: int) -> None:
        self.clock.advance(ms)

    @rule(ms=st.integers(1, 30_000))
    def step_back(self, ms: int) -> None:
        self.clock.set(self.clock.now() - ms)

    @precondition(running)
    @rule()
    def tick(self) -> None:
        self.broker.tick()

    @precondition(running)
    @rule()
    def flush(self) -> None:
        self.broker.flush()

    @precondition(running)
    @rule()
    def close_reopen(self) -> None:
        self.broker.close()
        self.broker.reopen()

    @precondition(running)
    @rule(kind=st.sampled_from(["kill", "power"]), pick=st.integers(0, 100))
    def crash_recover(self, kind: str, pick: int) -> None:
        self.broker.crash(kind)
        choices = self.broker.recovery_choices()
        self.broker.recover(choices[pick % len(choices)])

    @invariant()
    def well_formed(self) -> None:
        if self.broker is None:
            return
        problems = wellformed.check(self.broker, self.high_water)
        assert problems == [], problems
        self.high_water = self.broker.high_water_ts


TestModelBrokerWellFormed = ModelBrokerMachine.TestCase
