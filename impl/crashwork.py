"""Recorded workloads for crash-state exploration: ``MmapBroker`` driven with the durable effects recorded.

Theory of operation
-------------------
A workload is a short script of broker operations (``Driver`` methods) over
one store directory; ``record(workload, directory)`` runs it with an
``effects`` recorder installed and returns the ``Recording``: the broker
configuration and every durable effect in program order. The driver is the
client: it adds the promise marks the oracle checks —

- ``ack`` after every acknowledged SYNC send and half send (the record must
  survive any later crash; a send-back, a commit and its op are answered before
  the flush, WAIT=false: ``model/crash.py``), and
- ``flushed`` after ``flush()`` and ``close()`` returned, and the store's own after
  a SYNC broker's group commit at each tick (every record written before must
  survive);

and it turns ``crash("power")`` into a ``PowerCut`` (the store's own
power-loss simulation rewrites files; those rewrites are not recorded, the
model drops its page cache instead).

Workloads (``WORKLOADS``; commitlog files of 8 KiB so they roll):

========================= ===============================================================
``sync-sends``            SYNC sends with tags to 3 queues, offsets persisted, files roll
``async-sends``           ASYNC sends and flushes, same-millisecond sends after a flush
``delayed``               delayed messages fired by the schedule service, delayOffset.json
``retries``               consumption with failures: send-back, retry copies, a DLQ
``transactions``          halves committed, rolled back, and checked after the timeout
``offsets``               consumer offsets committed and persisted, a clean restart
``restarts``              clean, kill and power restarts between SYNC and ASYNC sends
``mixed``                 a bit of everything
``timer``                 5.x timer messages (rocketmq-5.0 profile): sends with TIMER_DELAY_MS /
                          TIMER_DELIVER_MS fired by the wheel, config/timercheck and the
                          enqueue times persisted, kill / power / clean restarts (SYNC)
``retention``             files roll (10-unit consume-queue files too), disk pressure over 0.85:
                          clean passes delete commitlog and consume-queue files; power, kill
                          and clean restarts between them (SYNC)
``pool``                  ASYNC with a TransientStorePool (1-page commits): ticks that commit by
                          pages, by the thorough interval and full files, flushes, kill / power /
                          clean restarts with acknowledged sends still in the write buffer
========================= ===============================================================

``random_workload(ops, seed)`` draws ``ops`` operations of every kind.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import attrs

from rmqspec.impl import effects
from rmqspec.impl.broker import MmapBroker
from rmqspec.model.clock import ManualClock
from rmqspec.model.config import BrokerConfig
from rmqspec.model.message import Message, MessageQueue
from rmqspec.model.results import SendResult, TxnAction

START_MS = 1_700_000_000_000
COMMITLOG_FILE_SIZE = 8192
TOPICS = {"TopicA": 2, "TopicB": 1}
GROUPS = {"GroupA": 2, "GroupB": 16}  # group -> retry max times
PRODUCER_GROUP = "PG"
DELAY_LEVELS = "1s 2s 3s 5s 10s"


def workload_config(flush: str, **changes: object) -> BrokerConfig:
    """The broker configuration of the recorded workloads (small files, short intervals)."""
    base = BrokerConfig(
        flush=flush,
        commitlog_file_size=COMMITLOG_FILE_SIZE,
        message_delay_level=DELAY_LEVELS,
        transaction_timeout_ms=3000,
        transaction_check_interval_ms=4000,
        transaction_check_max=2,
        flush_consumer_offset_interval_ms=5000,
        flush_delay_offset_interval_ms=5000,
    )
    return attrs.evolve(base, **changes)  # type: ignore[arg-type]


@attrs.frozen
class Recording:
    """A workload's durable effects (paths relative to the store root)."""

    name: str
    config: BrokerConfig
    effects: tuple[effects.Effect, ...]
    end_ms: int


class Driver:
    """The client of one recorded workload: broker operations plus promise marks."""

    def __init__(self, root: Path, config: BrokerConfig, log: effects.EffectLog) -> None:
        self.root = root
        self.config = config
        self.log = log
        self.clock = ManualClock(START_MS)
        self.broker = MmapBroker.open(root, self.clock, config)
        self.sync = config.flush == "SYNC"
        self.count = 0
        self.committed: dict[tuple[str, str, int], int] = {}

    # -- promises ------------------------------------------------------------------------------

    def _ack(self) -> None:
        if self.sync:
            self.log.mark("ack")

    def _body(self, tag: str) -> bytes:
        self.count += 1
        return (f"{tag}-{self.count:04d}|" * (3 + self.count % 5)).encode()

    # -- operations ------------------------------------------------------------------------------

    def setup(self) -> None:
        for topic, nums in TOPICS.items():
            self.broker.create_topic(topic, nums)
        for group, retries in GROUPS.items():
            self.broker.create_group(group, retry_max_times=retries)

    def send(
        self, topic: str, queue: int, *, tags: str | None = "TagA", delay: int = 0, timer_ms: int = 0
    ) -> SendResult:
        """``timer_ms`` > 0: a 5.x timer message (TIMER_DELAY_MS; odd ones as TIMER_DELIVER_MS)."""
        props = {}
        if timer_ms:
            props = ({"TIMER_DELAY_MS": str(timer_ms)} if self.count % 2 else
                     {"TIMER_DELIVER_MS": str(self.clock.now() + timer_ms)})
        msg = Message(topic, self._body(topic), tags=tags, keys=(f"k{self.count}",), delay_level=delay,
                      properties=props)
        result = self.broker.send(msg, queue)
        self._ack()
        return result

    def half(self, topic: str, queue: int) -> SendResult:
        msg = Message(topic, self._body("half"), tags="TagT")
        result = self.broker.send_half(msg, queue, PRODUCER_GROUP)
        self._ack()
        return result

    def end(self, half: SendResult, action: TxnAction, *, from_check: bool = False) -> None:
        self.broker.end_transaction(PRODUCER_GROUP, half.commitlog_offset, half.queue_offset, action, from_check)

    def consume(self, group: str, topic: str, queue: int, *, fail_every: int = 0, max_nums: int = 8) -> int:
        """Pull from the committed offset, send back every ``fail_every``-th message, commit."""
        mq = MessageQueue(topic, queue)
        start = self.committed.get((group, topic, queue), 0)
        result = self.broker.pull(group, mq, start, max_nums)
        for i, msg in enumerate(result.messages):
            if fail_every and i % fail_every == 0:
                # answered before the flush (WAIT=false): promised only by the next tick's group commit
                self.broker.send_back(group, msg.commitlog_offset, 0, msg.msg_id, None)
        if result.messages:
            self.committed[(group, topic, queue)] = result.next_begin_offset
            self.broker.update_offset(group, mq, result.next_begin_offset)
        return len(result.messages)

    def tick(self, ms: int) -> None:
        self.clock.advance(ms)
        for check in self.broker.tick():
            # the producer answers: commit even transactions, roll back odd ones
            action = TxnAction.COMMIT if check.tran_state_table_offset % 2 == 0 else TxnAction.ROLLBACK
            self.broker.end_transaction(
                check.producer_group, check.commitlog_offset, check.tran_state_table_offset, action, True
            )

    def flush(self) -> None:
        self.broker.flush()
        self.log.mark("flushed")

    def disk(self, ratio: float) -> None:
        """The disk usage the clean service sees from its next pass (``Capability.DISK_USAGE``)."""
        self.broker.set_disk_usage(ratio)

    def restart(self, kind: str) -> None:
        """``clean`` (close + reopen), ``kill`` (process crash) or ``power`` (power loss) and recover."""
        if kind == "clean":
            self.broker.close()
            self.log.mark("flushed")
            self.clock.advance(1000)
            self.broker.reopen()
        elif kind == "kill":
            self.broker.crash("kill")
            self.clock.advance(1000)
            self.broker.recover()
        elif kind == "power":
            with self.log.pause():
                self.broker.crash("power")
            self.log.add(effects.PowerCut())
            self.clock.advance(1000)
            self.broker.recover()
        else:
            raise ValueError(f"restart kind must be clean, kill or power, got {kind!r}")
        self.committed = {}


Script = Callable[[Driver], None]


@attrs.frozen
class Workload:
    name: str
    config: BrokerConfig
    script: Script = attrs.field(repr=False)
    about: str = ""


def _sync_sends(d: Driver) -> None:
    d.setup()
    for i in range(90):
        topic, queue = (("TopicA", i % 2), ("TopicB", 0))[i % 3 == 2]
        d.send(topic, queue, tags=("TagA", "TagB")[i % 2])
        d.clock.advance(300 if i % 4 else 0)
        if i % 11 == 10:
            d.consume("GroupA", "TopicA", 0)
            d.tick(5000)


def _async_sends(d: Driver) -> None:
    d.setup()
    for i in range(60):
        d.send(("TopicA", "TopicB")[i % 2], i % 2 if i % 2 == 0 else 0, tags=("TagA", "TagB")[i % 3 == 0])
        if i % 9 == 8:
            d.flush()
            d.send("TopicA", 1, tags="TagC")  # same millisecond as the flush
        d.clock.advance(250)
    d.flush()
    d.send("TopicB", 0)


def _delayed(d: Driver) -> None:
    d.setup()
    for i in range(24):
        d.send("TopicA", i % 2, tags="TagD", delay=1 + i % 3)
        d.send("TopicB", 0, tags="TagA")
        d.tick(700)
    for _ in range(6):
        d.tick(1500)
    d.consume("GroupB", "TopicA", 0)
    d.tick(5000)


def _retries(d: Driver) -> None:
    d.setup()
    for _ in range(20):
        d.send("TopicA", 0, tags="TagR")
        d.send("TopicB", 0, tags="TagS")
        d.clock.advance(100)
    for _ in range(4):
        d.consume("GroupA", "TopicA", 0, fail_every=2)
        d.consume("GroupA", "TopicB", 0, fail_every=3)
        d.tick(11_000)
        d.consume("GroupA", "%RETRY%GroupA", 0, fail_every=1)
        d.tick(6000)


def _transactions(d: Driver) -> None:
    d.setup()
    halves = []
    for i in range(16):
        halves.append(d.half("TopicA", i % 2))
        d.send("TopicB", 0, tags="TagX")
        d.clock.advance(200)
    for i, half in enumerate(halves[:10]):
        d.end(half, (TxnAction.COMMIT, TxnAction.ROLLBACK, TxnAction.UNKNOWN)[i % 3])
    for _ in range(4):
        d.tick(4500)
        d.send("TopicA", 1, tags="TagY")


def _offsets(d: Driver) -> None:
    d.setup()
    for round_ in range(6):
        for i in range(8):
            d.send("TopicA", i % 2, tags="TagO")
        for group in GROUPS:
            d.consume(group, "TopicA", 0, max_nums=3)
            d.consume(group, "TopicA", 1, max_nums=3)
        d.tick(5000)
        if round_ == 3:
            d.restart("clean")


def _restarts(d: Driver) -> None:
    d.setup()
    for kind in ("clean", "kill", "power", "kill"):
        for i in range(9):
            d.send(("TopicA", "TopicB")[i % 2], 0, tags="TagZ")
            d.clock.advance(150)
        if kind == "power":
            d.flush()
            d.send("TopicA", 1)
        d.consume("GroupB", "TopicA", 0)
        d.tick(5000)
        d.restart(kind)
    for _ in range(6):
        d.send("TopicA", 1, tags="TagZ")


def _mixed(d: Driver) -> None:
    d.setup()
    half = d.half("TopicA", 0)
    for i in range(30):
        d.send("TopicA", i % 2, tags="TagM", delay=(0, 0, 1, 0, 2)[i % 5])
        d.clock.advance(400)
        if i % 10 == 9:
            d.consume("GroupA", "TopicA", 0, fail_every=2)
            d.tick(4000)
    d.end(half, TxnAction.COMMIT)
    d.restart("kill")
    for _ in range(10):
        d.send("TopicB", 0, tags="TagN")
    d.tick(6000)
    d.restart("clean")
    d.send("TopicA", 1)


def _retention(d: Driver) -> None:
    """Files roll (10-unit consume-queue files roll too), then disk pressure over 0.85: a clean pass deletes the
    oldest commitlog files and the consume-queue files after them (``model/retention.py``); sends, restarts of
    every kind and another pass follow. Acknowledged records a pass took are no loss; what it kept must be."""
    d.setup()
    for round_, kind in enumerate(("power", "kill", "clean")):
        for i in range(45):
            topic, queue = (("TopicA", i % 2), ("TopicB", 0))[i % 3 == 2]
            d.send(topic, queue, tags=("TagA", "TagB")[i % 2])
            d.clock.advance(100)
        d.tick(61_000 if round_ == 0 else 10_001)  # the first pass waits 60 s after a start
        d.disk(0.86)  # over 0.85: the next pass deletes every file but the last, expired or not (at most 10)
        d.tick(10_001)
        d.disk(0.30)
        d.consume("GroupA", "TopicA", 0)
        d.send("TopicA", 1, tags="TagC")
        if kind == "power":
            d.flush()
            d.send("TopicB", 0)
        d.restart(kind)
    d.send("TopicA", 0)


def _timer(d: Driver) -> None:
    d.setup()
    for i in range(18):
        d.send("TopicA", i % 2, tags="TagT", timer_ms=(400, 1300, 2500)[i % 3])
        if i % 4 == 3:
            d.send("TopicB", 0, tags="TagA")
        d.tick(600)
        if i == 8:
            d.restart("kill")
        if i == 13:
            d.restart("power")
    d.tick(3000)
    d.consume("GroupB", "TopicA", 0)
    d.restart("clean")
    d.send("TopicA", 1, timer_ms=1000)
    d.tick(2000)


def _pool(d: Driver) -> None:
    """Records reach the page cache only when committed: a kill takes the acknowledged ones still in the
    write buffer (ASYNC: none was promised), a ``flush()`` commits everything first (promised)."""
    d.setup()
    for kind in ("kill", "power", "kill", "clean", "kill"):
        for i in range(16):
            d.send(("TopicA", "TopicB")[i % 2], (i // 2) % 2 if i % 2 == 0 else 0, tags=("TagP", "TagQ")[i % 3 == 0])
            d.clock.advance(70)
            if i % 6 == 5:
                d.tick((120, 450)[i % 12 == 5])  # within the thorough interval (pages) / past it (all)
        if kind == "power":
            d.flush()
            d.send("TopicA", 1)
        d.consume("GroupB", "TopicA", 0)
        d.send("TopicB", 0, tags="TagU")  # acknowledged, still in the write buffer at the restart
        d.restart(kind)
        d.tick(100)
    for _ in range(5):
        d.send("TopicA", 1, tags="TagP")


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload("sync-sends", workload_config("SYNC"), _sync_sends, "SYNC sends to 3 queues, files roll"),
        Workload("async-sends", workload_config("ASYNC"), _async_sends, "ASYNC sends and flushes"),
        Workload("delayed", workload_config("SYNC"), _delayed, "delayed messages and delayOffset.json"),
        Workload("retries", workload_config("SYNC"), _retries, "send-back, retry copies, DLQ"),
        Workload("transactions", workload_config("SYNC"), _transactions, "halves, commits, rollbacks, checks"),
        Workload("offsets", workload_config("ASYNC"), _offsets, "consumer offsets persisted, clean restart"),
        Workload("restarts", workload_config("ASYNC"), _restarts, "clean, kill and power restarts"),
        Workload("mixed", workload_config("SYNC"), _mixed, "a bit of everything"),
        Workload("timer", workload_config("SYNC", version="rocketmq-5.0"), _timer, "5.x timer messages, timercheck"),
        Workload("retention", workload_config("SYNC", consume_queue_file_size=200), _retention,
                 "files deleted by the clean service under disk pressure, restarts"),
        Workload("pool", workload_config("ASYNC", transient_store_pool=True, commit_commitlog_least_pages=1), _pool,
                 "TransientStorePool: commits, kills that take the write buffer"),
    )
}


def random_workload(ops: int, seed: int) -> Workload:
    """``ops`` random operations (sends of every kind, consumption, ticks, flushes, restarts)."""
    rng = random.Random(seed)
    flush = ("SYNC", "ASYNC")[rng.randrange(2)]
    plan = [rng.choices(_OP_KINDS, _OP_WEIGHTS)[0] for _ in range(ops)]

    def script(d: Driver) -> None:
        d.setup()
        halves: list[SendResult] = []
        r = random.Random(seed + 1)
        for kind in plan:
            if kind == "send":
                topic = r.choice(list(TOPICS))
                d.send(topic, r.randrange(TOPICS[topic]), tags=r.choice(["TagA", "TagB", None]))
            elif kind == "delay":
                d.send("TopicA", r.randrange(2), delay=r.randint(1, 3))
            elif kind == "half":
                halves.append(d.half("TopicB", 0))
            elif kind == "end" and halves:
                d.end(halves.pop(0), r.choice(list(TxnAction)))
            elif kind == "consume":
                group = r.choice(list(GROUPS))
                d.consume(group, "TopicA", r.randrange(2), fail_every=r.choice([0, 0, 2]))
            elif kind == "tick":
                d.tick(r.choice([100, 1500, 5000]))
            elif kind == "flush":
                d.flush()
            elif kind == "restart":
                d.restart(r.choice(["clean", "kill", "power"]))
            d.clock.advance(r.choice([0, 50, 300]))

    return Workload(f"random-{ops}-{seed}", workload_config(flush), script, f"{ops} random operations, {flush}")


_OP_KINDS = ("send", "delay", "half", "end", "consume", "tick", "flush", "restart")
_OP_WEIGHTS = (10, 2, 1, 1, 2, 2, 1, 0.3)


def record(workload: Workload, directory: str | Path) -> Recording:
    """Run ``workload`` on a fresh store in ``directory`` with the effects recorded."""
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    with effects.recording(root) as log:
        driver = Driver(root, workload.config, log)
        try:
            workload.script(driver)
        finally:
            log.paused += 1  # the release below is not part of the workload
            if driver.broker.state == "RUNNING":
                driver.broker.crash("kill")
    return Recording(workload.name, workload.config, tuple(log.effects), driver.clock.now())
