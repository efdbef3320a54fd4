"""Injected violations: one self-contained scenario per SPEC §8.1 code.

Each scenario is a generator driven by the simulation's clock: it emits rows
at ``sim.now`` and ``yield``s the milliseconds to wait before its next step,
so its rows interleave with the clean traffic while timestamps stay monotone.
It uses its own topic, groups, clients and UNIQ_KEYs (``Inj…`` names), so it
cannot disturb the clean traffic, and it is built to break exactly one rule
once: it records that one violation with ``sim.add_truth`` (or
``add_truth_at_drain`` for LOST / TXN_UNRESOLVED) using the seqs convention
of traces/README.md (proving events first, the offending row last). System
topics (schedule, half, DLQ) share the simulation's dense offset counters.

Variants: with ``inject_count`` > 1 the k-th instance of RETRY_EARLY,
ORDERLY_WITHOUT_LOCK and TIMER_EARLY alternates between the rule's cases. The
timer codes' scenarios are in ``gen_timer.py`` (with the generator's timer messages), a routed
producer's in ``gen_route.py``, the master/slave codes' in ``gen_ha.py``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING

from rmqspec.traces import gen_ha, gen_route, gen_timer

if TYPE_CHECKING:
    from rmqspec.traces.generator import Simulation

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"

# SPEC §8 violation codes (the same names as rmqspec.properties.codes.Code;
# traces may import only model, so they are listed here and a test keeps
# the two in step).
VIOLATION_CODES: tuple[str, ...] = (
    "ORDER_QUEUE_GAP",
    "ORDER_KEY_REORDERED",
    "LOST",
    "UNEXPECTED",
    "RETRY_EARLY",
    "DLQ_EARLY",
    "DLQ_MISSED",
    "DELAY_EARLY",
    "LOCK_OVERLAP",
    "ORDERLY_WITHOUT_LOCK",
    "ORDERLY_CONCURRENT",
    "OFFSET_OVERRUN",
    "TXN_VISIBLE_BEFORE_COMMIT",
    "TXN_ROLLBACK_VISIBLE",
    "TXN_DOUBLE_RESOLVED",
    "TXN_CHECK_EARLY",
    "TXN_CHECK_EXCEEDED",
    "TXN_UNRESOLVED",
    "TXN_CHECK_AFTER_RESOLVED",
    "TXN_DISCARD_EARLY",
    "DLQ_DELAYED",
    "SCHEDULE_DUPLICATED",
    "OFFSET_LOST",
    "FILTER_MISMATCH",
    "FILTER_SKIPPED",
    "MESSAGE_LIFECYCLE",
    "LOCK_LIFECYCLE",
    "TXN_LIFECYCLE",
    "TIMER_EARLY",
    "TIMER_DUPLICATED",
    "TIMER_UNFIRED",
    "ORDER_KEY_SPLIT",
    "ORDERLY_LOOP_OVERRUN",
    "PRODUCER_RETRY_SAME_BROKER",
    "PRODUCER_FAULT_WINDOW",
    # issue 43: master/slave replication (``gen_ha.py``)
    "HA_SYNC_ACK_UNREPLICATED",
    "HA_SYNC_ACK_LOST",
    "HA_SLAVE_SERVED_UNSTORED",
    "HA_SLAVE_BEYOND_REPLICATED",
    "HA_SLAVE_NOT_PREFIX",
    "HA_SLAVE_WROTE",
)
# observations that can be injected too (``rmqspec trace gen --inject``); never part of ``all``
OBSERVATION_CODES: tuple[str, ...] = ("SUBSCRIPTION_INCONSISTENT", "HA_ASYNC_TAIL_LOST")

Steps = Generator[int, None, None]


class _Ctx:
    """Names and small emit helpers of one scenario instance."""

    def __init__(self, sim: Simulation, code: str, index: int) -> None:
        self.sim = sim
        self.code = code
        self.index = index
        tag = "".join(w.capitalize() for w in code.split("_")) + str(index)
        self.topic = f"Inj{tag}"
        self.group = f"InjG{tag}"
        self.pgroup = f"InjPG{tag}"
        self.producer = f"inj-producer-{tag}"
        self.c1 = f"{self.group}@client-1"
        self.c2 = f"{self.group}@client-2"
        cfg = sim.cfg
        self.delays = cfg.delays_ms
        self.retry_max = cfg.retry_max

    @property
    def seq(self) -> int:
        """The seq the next row will get."""
        return self.sim.emitted

    def store(self, topic: str, qid: int, key: str, rt: int = 0, group: str | None = None,
              **kw: object) -> tuple[int, tuple]:
        seq = self.seq
        copy = self.sim.store(topic, qid, key, rt, group, 0, **kw)  # type: ignore[arg-type]
        return seq, copy

    def send(self, qid: int = 0) -> tuple[int, tuple]:
        """Store + acknowledged send of a fresh message on the scenario topic."""
        key = self.sim.inj_key()
        _, copy = self.store(self.topic, qid, key, 0, self.pgroup)
        seq = self.sim.emit(
            "send", actor=self.producer, group=self.pgroup, topic=self.topic, queue_id=qid,
            queue_offset=copy[3], commitlog_offset=copy[4], msg_key=key, msg_id=copy[5],
            status="SEND_OK",
        )
        return seq, copy

    def keyed_send(self, qid: int, sharding_key: str, route_queues: int) -> int:
        """Store + acknowledged ordered send (a selector's choice among ``route_queues`` queues)."""
        key = self.sim.inj_key()
        _, copy = self.store(self.topic, qid, key, 0, self.pgroup)
        return self.sim.emit(
            "send", actor=self.producer, group=self.pgroup, topic=self.topic, queue_id=qid,
            queue_offset=copy[3], commitlog_offset=copy[4], msg_key=key, msg_id=copy[5],
            status="SEND_OK", sharding_key=sharding_key, detail={"route_queues": route_queues},
        )

    def _copy_fields(self, copy: tuple, client: str) -> dict[str, object]:
        return {
            "actor": client, "client_id": client, "group": self.group, "topic": copy[1],
            "queue_id": copy[2], "queue_offset": copy[3], "commitlog_offset": copy[4],
            "msg_key": copy[0], "msg_id": copy[5], "reconsume_times": copy[6],
        }

    def deliver(self, copy: tuple, client: str | None = None) -> int:
        return self.sim.emit("deliver", **self._copy_fields(copy, client or self.c1))

    def consume(self, copy: tuple, status: str = "SUCCESS", client: str | None = None) -> int:
        return self.sim.emit("consume", status=status, **self._copy_fields(copy, client or self.c1))

    def commit(self, topic: str, qid: int, offset: int, client: str | None = None,
               status: str | None = None) -> int:
        cid = client or self.c1
        return self.sim.emit(
            "commit_offset", actor=cid, client_id=cid, group=self.group, topic=topic,
            queue_id=qid, queue_offset=offset, status=status,
        )

    def send_back(self, copy: tuple, status: str, rt: int, level: int,
                  deliver_ts: int | None = None) -> int:
        f = self._copy_fields(copy, self.c1)
        f["reconsume_times"] = rt
        return self.sim.emit("send_back", status=status, delay_level=level,
                             deliver_ts=deliver_ts, **f)

    def lock(self, client: str, status: str = "GRANTED", qid: int = 0) -> int:
        return self.sim.emit("lock", actor="broker", group=self.group, topic=self.topic,
                             queue_id=qid, client_id=client, status=status)

    def window(self, event: str, client: str, qid: int = 0, detail: dict[str, int] | None = None) -> int:
        return self.sim.emit(event, actor=client, client_id=client, group=self.group,
                             topic=self.topic, queue_id=qid, detail=detail)

    def half(self, positioned: bool = False) -> tuple[int, str]:
        """A half (``positioned``: its row carries the half-queue position, ``self.half_pos``)."""
        key = self.sim.inj_key()
        _, copy = self.store(HALF_TOPIC, 0, key, 0, self.pgroup, txn=key)
        self.half_pos = copy[3]
        seq = self.sim.emit(
            "txn_half", actor=self.producer, group=self.pgroup, topic=self.topic, queue_id=0,
            commitlog_offset=copy[4], msg_key=key, msg_id=copy[5], txn_id=key, status="SEND_OK",
            queue_offset=copy[3] if positioned else None,
        )
        return seq, key

    def txn(self, event: str, key: str, status: str | None = None,
            detail: dict[str, object] | None = None, position: int | None = None) -> int:
        actor = self.producer if event == "txn_end" else "broker"
        return self.sim.emit(event, actor=actor, group=self.pgroup, topic=self.topic,
                             queue_id=0, msg_key=key, txn_id=key, status=status, detail=detail,
                             queue_offset=position)

    def truth(self, seqs: list[int], reason: str) -> None:
        self.sim.add_truth(self.code, seqs, reason)

    @property
    def retry_topic(self) -> str:
        """The scenario group's ``%RETRY%`` topic."""
        return f"%RETRY%{self.group}"


def _failed_once(ctx: _Ctx) -> Generator[int, None, tuple]:
    """A fresh message on the scenario topic, delivered 5 ms later and consumed RECONSUME_LATER; its copy."""
    _, copy = ctx.send()
    yield 5
    ctx.deliver(copy)
    ctx.consume(copy, "RECONSUME_LATER")
    return copy


def _schedule_retry(ctx: _Ctx, key: str, rt: int, level: int, dts: int) -> tuple[int, tuple]:
    """The retry copy of ``key`` (reconsume_times ``rt``) stored in SCHEDULE_TOPIC_XXXX at delay ``level``,
    due at ``dts``, for the group's %RETRY% topic: (its seq, the schedule copy)."""
    detail = f'{{"real_queue_id":0,"real_topic":"{ctx.retry_topic}"}}'
    return ctx.store(SCHEDULE_TOPIC, level - 1, key, rt, ctx.group, dl=level, dts=dts, detail=detail)


def _fire_retry(ctx: _Ctx, sched: tuple, level: int, dts: int) -> Generator[int, None, tuple]:
    """Wait until ``dts``, then fire ``sched`` (``_schedule_retry``'s copy at ``level``) into %RETRY%;
    the copy stored there."""
    yield dts - ctx.sim.now
    key, rt = sched[0], sched[6]
    ctx.sim.emit("schedule_fire", actor="broker", group=ctx.group, topic=ctx.retry_topic, queue_id=0,
                 msg_key=key, msg_id=sched[5], reconsume_times=rt, delay_level=level, deliver_ts=dts)
    _, copy = ctx.store(ctx.retry_topic, 0, key, rt, ctx.group)
    return copy


def _retry_copy(ctx: _Ctx, failed: tuple, r: int) -> Generator[int, None, tuple]:
    """Send ``failed`` (reconsume_times r) back correctly and follow it to %RETRY%; the new copy."""
    level = min(3 + r, len(ctx.delays))
    dts = ctx.sim.now + ctx.delays[level - 1]
    ctx.send_back(failed, "RETRY", r + 1, level, dts)
    _, sched = _schedule_retry(ctx, failed[0], r + 1, level, dts)
    return (yield from _fire_retry(ctx, sched, level, dts))


# -- one scenario per code ---------------------------------------------------------


def order_queue_gap(ctx: _Ctx) -> Steps:
    s0, _ = ctx.send()
    seq = ctx.seq
    key = ctx.sim.inj_key()
    ctx.sim.next_off[(ctx.topic, 0)] += 1  # the broker skips offset 1
    ctx.store(ctx.topic, 0, key, 0, ctx.pgroup)
    ctx.truth([s0 - 1, seq], f"store on {ctx.topic}:0 at offset 2 after offset 0")
    yield 0


def order_key_reordered(ctx: _Ctx) -> Steps:
    _, k1 = ctx.send()
    _, k2 = ctx.send()
    yield 5
    ctx.lock(ctx.c1)
    ctx.window("orderly_start", ctx.c1)
    ctx.deliver(k2)
    first = ctx.consume(k2)
    ctx.deliver(k1)
    second = ctx.consume(k1)
    ctx.commit(ctx.topic, 0, 2)
    ctx.window("orderly_end", ctx.c1)
    ctx.truth([first, second], "orderly SUCCESS of offset 0 after offset 1 by the same owner")


def lost(ctx: _Ctx) -> Steps:
    _, k0 = ctx.send()
    yield 5
    ctx.deliver(k0)
    ctx.consume(k0)
    ctx.commit(ctx.topic, 0, 1)
    yield 5
    send, _ = ctx.send()
    ctx.sim.add_truth_at_drain(ctx.code, [send], f"acknowledged send never consumed by {ctx.group}")


def unexpected(ctx: _Ctx) -> Steps:
    key = ctx.sim.inj_key()
    ghost = (key, ctx.topic, 0, 0, 0, "7F00000100002A9FFFFFFFFFFFFFFFFF", 0, 0)
    seq = ctx.deliver(ghost)
    ctx.truth([seq], "delivered a msg_key that was never sent, stored or half-sent")
    yield 0


def retry_early(ctx: _Ctx) -> Steps:
    copy = yield from _failed_once(ctx)
    rtopic = ctx.retry_topic
    if ctx.index % 2 == 0:  # deliver case: the broker skipped the schedule topic
        dts = ctx.sim.now + ctx.delays[2]
        back = ctx.send_back(copy, "RETRY", 1, 3, dts)
        _, retry = ctx.store(rtopic, 0, copy[0], 1, ctx.group)
        ctx.commit(ctx.topic, 0, 1)
        yield 5
        seq = ctx.deliver(retry)
        ctx.truth([back, seq], "retry copy delivered before the send_back's deliver_ts")
    else:  # send_back case: deliver_ts shorter than level 3's delay
        dts = ctx.sim.now + ctx.delays[2] // 2
        back = ctx.send_back(copy, "RETRY", 1, 3, dts)
        _, sched = _schedule_retry(ctx, copy[0], 1, 3, dts)
        ctx.commit(ctx.topic, 0, 1)
        ctx.truth([back], "send_back RETRY at level 3 with deliver_ts - ts below the level's delay")
        retry = yield from _fire_retry(ctx, sched, 3, dts)
        yield 5
        ctx.deliver(retry)
    ctx.consume(retry)
    ctx.commit(rtopic, 0, retry[3] + 1)


def dlq_early(ctx: _Ctx) -> Steps:
    copy = yield from _failed_once(ctx)
    seq = ctx.send_back(copy, "DLQ", 1, 0)
    ctx.store(f"%DLQ%{ctx.group}", 0, copy[0], 1, ctx.group)
    ctx.commit(ctx.topic, 0, 1)
    ctx.truth([seq], "sent to the DLQ after 1 failure with delay_level 0")


def dlq_missed(ctx: _Ctx) -> Steps:
    """Fails retry_max + 1 times, lands in the DLQ correctly, then the DLQ copy is delivered."""
    _, copy = ctx.send()
    yield 5
    for r in range(ctx.retry_max + 1):
        ctx.deliver(copy)
        ctx.consume(copy, "RECONSUME_LATER")
        if r == ctx.retry_max:
            ctx.send_back(copy, "DLQ", r + 1, 0)
            _, dead = ctx.store(f"%DLQ%{ctx.group}", 0, copy[0], r + 1, ctx.group)
            ctx.commit(copy[1], copy[2], copy[3] + 1)
            break
        failed = copy
        copy = yield from _retry_copy(ctx, failed, r)
        ctx.commit(failed[1], failed[2], failed[3] + 1)
        yield 5
    yield 1000
    seq = ctx.deliver(dead)
    ctx.consume(dead)
    ctx.commit(dead[1], 0, dead[3] + 1)
    ctx.truth([seq], f"DLQ copy with reconsume_times {ctx.retry_max + 1} delivered again")


def delay_early(ctx: _Ctx) -> Steps:
    key = ctx.sim.inj_key()
    dts = ctx.sim.now + ctx.delays[1]
    detail = f'{{"real_queue_id":0,"real_topic":"{ctx.topic}"}}'
    st, sched = ctx.store(SCHEDULE_TOPIC, 1, key, 0, ctx.pgroup, dl=2, dts=dts, detail=detail)
    ctx.sim.emit("send", actor=ctx.producer, group=ctx.pgroup, topic=ctx.topic, queue_id=0,
                 msg_key=key, msg_id=sched[5], delay_level=2, status="SEND_OK")
    yield ctx.delays[1] // 2
    fire = ctx.sim.emit("schedule_fire", actor="broker", group=ctx.pgroup, topic=ctx.topic,
                        queue_id=0, msg_key=key, msg_id=sched[5], reconsume_times=0,
                        delay_level=2, deliver_ts=dts)
    _, copy = ctx.store(ctx.topic, 0, key, 0, ctx.pgroup)
    ctx.truth([st, fire], "delayed copy fired before its deliver_ts")
    yield dts - ctx.sim.now + 100
    ctx.deliver(copy)
    ctx.consume(copy)
    ctx.commit(ctx.topic, 0, 1)


def lock_overlap(ctx: _Ctx) -> Steps:
    first = ctx.lock(ctx.c1)
    yield ctx.sim.cfg.broker_lock_ms // 2
    second = ctx.lock(ctx.c2)
    ctx.truth([first, second], "granted to client-2 while client-1's lock is unexpired")


def orderly_without_lock(ctx: _Ctx) -> Steps:
    variant = ctx.index % 3
    if variant == 0:  # no grant at all
        seq = ctx.window("orderly_start", ctx.c1)
        ctx.truth([seq], "orderly_start without any lock")
    elif variant == 1:  # own grant older than the client lifetime
        grant = ctx.lock(ctx.c1)
        yield ctx.sim.cfg.client_lock_ms + 10_000
        seq = ctx.window("orderly_start", ctx.c1)
        ctx.truth([grant, seq], "orderly_start on a lock older than the client lifetime")
    else:  # superseded by another client's grant
        ctx.lock(ctx.c1)
        yield 1000
        ctx.window("unlock", ctx.c1)
        other = ctx.lock(ctx.c2)
        yield 1000
        seq = ctx.window("orderly_start", ctx.c1)
        ctx.truth([other, seq], "orderly_start after another client was granted the queue")
    yield 5
    ctx.window("orderly_end", ctx.c1)


def orderly_concurrent(ctx: _Ctx) -> Steps:
    # a client without its MessageQueueLock (lock 2): a second batch while its first runs. (Another
    # client granted the queue after client-1's broker lock expired, starting inside its window, is what
    # 4.9 permits: the observation ORDERLY_LOCK_OUTLIVED.)
    ctx.lock(ctx.c1)
    first = ctx.window("orderly_start", ctx.c1)
    yield 1000
    second = ctx.window("orderly_start", ctx.c1)
    ctx.truth([first, second], "client-1 started a second batch while its first was still running")
    yield 1000
    ctx.window("orderly_end", ctx.c1)


def offset_overrun(ctx: _Ctx) -> Steps:
    _, k0 = ctx.send()
    _, k1 = ctx.send()
    yield 5
    low = ctx.deliver(k0)
    ctx.deliver(k1)
    ctx.consume(k1)
    seq = ctx.commit(ctx.topic, 0, 2)
    ctx.truth([low, seq], "committed 2 while offset 0 is delivered and unacknowledged")
    yield 10
    ctx.consume(k0)
    ctx.commit(ctx.topic, 0, 2)


def txn_visible_before_commit(ctx: _Ctx) -> Steps:
    half, key = ctx.half()
    yield 10
    _, copy = ctx.store(ctx.topic, 0, key, 0, ctx.pgroup, txn=key)
    seq = ctx.deliver(copy)
    ctx.consume(copy)
    ctx.commit(ctx.topic, 0, 1)
    ctx.truth([half, seq], "delivered before the transaction's COMMIT")
    yield 100
    ctx.txn("txn_end", key, "COMMIT", {"from_check": False})


def txn_rollback_visible(ctx: _Ctx) -> Steps:
    _, key = ctx.half()
    yield 10
    rb = ctx.txn("txn_end", key, "ROLLBACK", {"from_check": False})
    yield 10
    _, copy = ctx.store(ctx.topic, 0, key, 0, ctx.pgroup, txn=key)
    seq = ctx.deliver(copy)
    ctx.consume(copy)
    ctx.commit(ctx.topic, 0, 1)
    ctx.truth([rb, seq], "delivered a transaction that was rolled back")


def txn_double_resolved(ctx: _Ctx) -> Steps:
    _, key = ctx.half()
    yield 10
    commit = ctx.txn("txn_end", key, "COMMIT", {"from_check": False})
    _, copy = ctx.store(ctx.topic, 0, key, 0, ctx.pgroup, txn=key)
    yield 5
    ctx.deliver(copy)
    ctx.consume(copy)
    ctx.commit(ctx.topic, 0, 1)
    yield 100
    rb = ctx.txn("txn_end", key, "ROLLBACK", {"from_check": False})
    ctx.truth([commit, rb], "ROLLBACK after COMMIT")


def txn_check_early(ctx: _Ctx) -> Steps:
    half, key = ctx.half()
    yield ctx.sim.cfg.transaction_timeout_ms // 6
    check = ctx.txn("txn_check", key, detail={"check_times": 1})
    ctx.truth([half, check], "checked before the transaction timeout")
    yield 5
    ctx.txn("txn_end", key, "ROLLBACK", {"from_check": True})


def txn_check_exceeded(ctx: _Ctx) -> Steps:
    cfg = ctx.sim.cfg
    half, key = ctx.half()
    t0 = ctx.sim.now
    for n in range(1, cfg.transaction_check_max + 2):
        yield t0 + cfg.transaction_timeout_ms + (n - 1) * cfg.transaction_check_interval_ms - ctx.sim.now
        check = ctx.txn("txn_check", key, detail={"check_times": n})
        yield 5
        if n <= cfg.transaction_check_max:
            ctx.txn("txn_end", key, "UNKNOWN", {"from_check": True})
    ctx.truth([half, check], f"check number {cfg.transaction_check_max + 1}")
    ctx.txn("txn_end", key, "ROLLBACK", {"from_check": True})


def txn_unresolved(ctx: _Ctx) -> Steps:
    half, key = ctx.half()
    yield ctx.sim.cfg.transaction_timeout_ms + 1000
    ctx.txn("txn_check", key, detail={"check_times": 1})
    yield 5
    ctx.txn("txn_end", key, "UNKNOWN", {"from_check": True})
    ctx.sim.add_truth_at_drain(ctx.code, [half], "half neither committed, rolled back nor discarded")


def txn_check_after_resolved(ctx: _Ctx) -> Steps:
    _, key = ctx.half(positioned=True)
    pos = ctx.half_pos
    yield ctx.sim.cfg.transaction_timeout_ms // 2
    end = ctx.txn("txn_end", key, "COMMIT", {"from_check": False}, position=pos)
    _, copy = ctx.store(ctx.topic, 0, key, 0, ctx.pgroup, txn=key)
    yield ctx.sim.cfg.transaction_check_interval_ms
    _, reput = ctx.store(HALF_TOPIC, 0, key, 0, ctx.pgroup, txn=key)
    check = ctx.txn("txn_check", key, detail={"check_times": 1}, position=reput[3])
    ctx.truth([end, check], "the half its COMMIT named was checked back")
    yield 5
    ctx.deliver(copy)
    ctx.consume(copy)
    ctx.commit(ctx.topic, 0, copy[3] + 1)


def txn_discard_early(ctx: _Ctx) -> Steps:
    half, key = ctx.half()
    yield ctx.sim.cfg.transaction_timeout_ms + 1000
    ctx.txn("txn_check", key, detail={"check_times": 1})
    yield 5
    ctx.txn("txn_end", key, "UNKNOWN", {"from_check": True})
    yield ctx.sim.cfg.transaction_check_interval_ms
    seq = ctx.txn("txn_discard", key)
    ctx.truth([half, seq], f"discarded after 1 check, transactionCheckMax is {ctx.sim.cfg.transaction_check_max}")


def dlq_delayed(ctx: _Ctx) -> Steps:
    copy = yield from _failed_once(ctx)
    back = ctx.send_back(copy, "DLQ", 1, -1)
    ctx.commit(ctx.topic, 0, 1)
    yield ctx.delays[0]
    seq, _ = ctx.store(f"%DLQ%{ctx.group}", 0, copy[0], 1, ctx.group)
    ctx.truth([back, seq], "DLQ copy stored a delay level after its send-back")


def schedule_duplicated(ctx: _Ctx) -> Steps:
    key = ctx.sim.inj_key()
    dts = ctx.sim.now + ctx.delays[0]
    detail = f'{{"real_queue_id":0,"real_topic":"{ctx.topic}"}}'
    _, sched = ctx.store(SCHEDULE_TOPIC, 0, key, 0, ctx.pgroup, dl=1, dts=dts, detail=detail)
    ctx.sim.emit("send", actor=ctx.producer, group=ctx.pgroup, topic=ctx.topic, queue_id=0,
                 msg_key=key, msg_id=sched[5], delay_level=1, status="SEND_OK")
    yield dts - ctx.sim.now
    fires = []
    for _ in range(2):
        fires.append(ctx.sim.emit("schedule_fire", actor="broker", group=ctx.pgroup, topic=ctx.topic,
                                  queue_id=0, msg_key=key, msg_id=sched[5], reconsume_times=0,
                                  delay_level=1, deliver_ts=dts))
        _, copy = ctx.store(ctx.topic, 0, key, 0, ctx.pgroup)
        if len(fires) == 1:
            first = copy
            yield 1000
    ctx.truth(fires, "the scheduled copy fired twice without a crash")
    yield 5
    ctx.deliver(first)
    ctx.consume(first)
    ctx.commit(ctx.topic, 0, copy[3] + 1)


def offset_lost(ctx: _Ctx) -> Steps:
    _, k0 = ctx.send()
    _, k1 = ctx.send()
    yield 5
    for copy in (k0, k1):
        ctx.deliver(copy)
        ctx.consume(copy)
    committed = ctx.commit(ctx.topic, 0, 2)
    yield 5
    # no other lock/orderly scenario may straddle the restart; scenarios waiting to restart
    # themselves do not count (two of them would wait for each other forever), one restarts at a time
    ctx.sim.restart_waiters += 1
    while ctx.sim.crash_guard - ctx.sim.restart_waiters > 0 or ctx.sim.restarting:
        yield 1000
    ctx.sim.restart_waiters -= 1
    ctx.sim.restarting = True
    ctx.sim.clean_restart()
    yield ctx.sim.cfg.crash_downtime_ms + 10
    ctx.sim.restarting = False
    seq = ctx.commit(ctx.topic, 0, 1, status="RESTORED")
    ctx.truth([committed, seq], "offset 1 restored after a clean restart, 2 was committed")


def _filtered_send(ctx: _Ctx, qid: int, props: dict[str, str], tags: str = "t") -> tuple[int, tuple]:
    """Store + acknowledged send carrying the message's tags and properties in ``detail``; (store seq, copy)."""
    key = ctx.sim.inj_key()
    attrs_ = {"tags": tags, "properties": props}
    store_seq, copy = ctx.store(ctx.topic, qid, key, 0, ctx.pgroup,
                                detail=json.dumps(attrs_, sort_keys=True, separators=(",", ":")))
    ctx.sim.emit("send", actor=ctx.producer, group=ctx.pgroup, topic=ctx.topic, queue_id=qid,
                 queue_offset=copy[3], commitlog_offset=copy[4], msg_key=key, msg_id=copy[5],
                 status="SEND_OK", detail=attrs_)
    return store_seq, copy


def _filtered(ctx: _Ctx, event: str, copy: tuple, client: str, sub: str, **kw: object) -> int:
    detail = {"subscription": sub, "expression_type": "SQL92"}
    return ctx.sim.emit(event, detail=detail, **kw, **ctx._copy_fields(copy, client))


def filter_mismatch(ctx: _Ctx) -> Steps:
    _, copy = _filtered_send(ctx, 0, {"region": "BJ"})
    yield 5
    sub = "region IN ('HZ', 'SH')"
    _filtered(ctx, "deliver", copy, ctx.c1, sub)
    seq = _filtered(ctx, "consume", copy, ctx.c1, sub, status="SUCCESS")
    ctx.commit(ctx.topic, 0, 1)
    ctx.truth([seq], f"SUCCESS consume of a message with region=BJ under {sub!r}")


def filter_skipped(ctx: _Ctx) -> Steps:
    _, a = _filtered_send(ctx, 0, {"region": "HZ"})
    skipped_seq, _b = _filtered_send(ctx, 0, {"region": "SH"})
    _, d = _filtered_send(ctx, 1, {"region": "SH"})
    yield 5
    _filtered(ctx, "deliver", d, ctx.c2, "region = 'SH'")
    _filtered(ctx, "consume", d, ctx.c2, "region = 'SH'", status="SUCCESS")
    ctx.commit(ctx.topic, 1, 1, client=ctx.c2)
    yield 5
    _filtered(ctx, "deliver", a, ctx.c1, "region = 'HZ'")
    _filtered(ctx, "consume", a, ctx.c1, "region = 'HZ'", status="SUCCESS")
    seq = ctx.commit(ctx.topic, 0, 2)
    ctx.truth([skipped_seq, seq], "client-1 (region = 'HZ') committed past a region=SH message of client-2's")


def subscription_inconsistent(ctx: _Ctx) -> Steps:
    _, a = _filtered_send(ctx, 0, {"region": "HZ"})
    _, d = _filtered_send(ctx, 1, {"region": "SH"})
    yield 5
    first = _filtered(ctx, "deliver", a, ctx.c1, "region = 'HZ'")
    _filtered(ctx, "consume", a, ctx.c1, "region = 'HZ'", status="SUCCESS")
    ctx.commit(ctx.topic, 0, 1)
    second = _filtered(ctx, "deliver", d, ctx.c2, "region IN ('HZ', 'SH')")
    _filtered(ctx, "consume", d, ctx.c2, "region IN ('HZ', 'SH')", status="SUCCESS")
    ctx.commit(ctx.topic, 1, 1, client=ctx.c2)
    ctx.truth([first, second], "two clients of one group subscribe the topic differently")


# -- issue 41: the lifecycle tables replayed (properties/inv_replay_*.py) -------------------------


def message_lifecycle(ctx: _Ctx) -> Steps:
    """A send-back's retry copy is scheduled one level later than the send-back routes it (the
    MESSAGE table's ``retry`` effect); fired at that level's due time, then consumed."""
    copy = yield from _failed_once(ctx)
    level, wrong = 3, 4
    dts = ctx.sim.now + ctx.delays[level - 1]
    back = ctx.send_back(copy, "RETRY", 1, level, dts)
    late = ctx.sim.now + ctx.delays[wrong - 1]
    seq, sched = _schedule_retry(ctx, copy[0], 1, wrong, late)
    ctx.commit(ctx.topic, 0, 1)
    ctx.truth([back, seq], f"the send-back routes level {level}, its retry copy is scheduled at level {wrong}")
    retry = yield from _fire_retry(ctx, sched, wrong, late)
    yield 5
    ctx.deliver(retry)
    ctx.consume(retry)
    ctx.commit(ctx.retry_topic, 0, retry[3] + 1)


def lock_lifecycle(ctx: _Ctx) -> Steps:
    """The broker denies a takeover although the holder's lock expired (the LOCK table's
    ``grant`` guard holds: a lock that never expires)."""
    grant = ctx.lock(ctx.c1)
    yield ctx.sim.cfg.broker_lock_ms + 1000
    denied = ctx.lock(ctx.c2, "DENIED")
    ctx.truth([grant, denied], "client-2 denied although client-1's lock expired")


def txn_lifecycle(ctx: _Ctx) -> Steps:
    """A second check carries the first one's TRANSACTION_CHECK_TIMES (the TRANSACTION table's
    ``checked`` effect not applied); then rolled back."""
    cfg = ctx.sim.cfg
    _, key = ctx.half()
    yield cfg.transaction_timeout_ms + 1000
    first = ctx.txn("txn_check", key, detail={"check_times": 1})
    yield 5
    ctx.txn("txn_end", key, "UNKNOWN", {"from_check": True})
    yield cfg.transaction_check_interval_ms
    second = ctx.txn("txn_check", key, detail={"check_times": 1})
    ctx.truth([first, second], "the second check repeats TRANSACTION_CHECK_TIMES 1")
    yield 5
    ctx.txn("txn_end", key, "ROLLBACK", {"from_check": True})


def order_key_split(ctx: _Ctx) -> Steps:
    """A producer whose selector is not a function of the key (SelectMessageQueueByRandom given an
    order id): the same key on one route goes to queue 0, then to queue 1."""
    skey = f"inj-order-{ctx.index}"
    first = ctx.keyed_send(0, skey, 2)
    yield 5
    ctx.keyed_send(0, skey, 2)
    yield 5
    second = ctx.keyed_send(1, skey, 2)
    ctx.truth([first, second], f"sharding key {skey} sent to queue 1 after queue 0 on one route")


def orderly_loop_overrun(ctx: _Ctx) -> Steps:
    """A consume request whose loop does not yield (seed 001, B10): batches 0, 30 s and 60 s into its loop
    (exactly the limit still takes one), then one 60.01 s in; lockAll renews the lock every 20 s."""
    ctx.lock(ctx.c1)
    seq = 0
    for age, lock_after, next_in in ((0, 19_995, 10_000), (30_000, 9_995, 20_000), (60_000, None, 5),
                                     (60_010, None, None)):
        seq = ctx.window("orderly_start", ctx.c1, detail={"loop_age_ms": age, "loop_max_ms": 60_000})
        yield 5
        ctx.window("orderly_end", ctx.c1)
        if lock_after is not None:
            yield lock_after
            ctx.lock(ctx.c1)
        if next_in is not None:
            yield next_in
    ctx.truth([seq], "client-1 took a batch 60010 ms into its consume request's loop")


SCENARIOS: dict[str, Callable[[_Ctx], Steps]] = {
    "ORDER_QUEUE_GAP": order_queue_gap,
    "ORDER_KEY_REORDERED": order_key_reordered,
    "LOST": lost,
    "UNEXPECTED": unexpected,
    "RETRY_EARLY": retry_early,
    "DLQ_EARLY": dlq_early,
    "DLQ_MISSED": dlq_missed,
    "DELAY_EARLY": delay_early,
    "LOCK_OVERLAP": lock_overlap,
    "ORDERLY_WITHOUT_LOCK": orderly_without_lock,
    "ORDERLY_CONCURRENT": orderly_concurrent,
    "OFFSET_OVERRUN": offset_overrun,
    "TXN_VISIBLE_BEFORE_COMMIT": txn_visible_before_commit,
    "TXN_ROLLBACK_VISIBLE": txn_rollback_visible,
    "TXN_DOUBLE_RESOLVED": txn_double_resolved,
    "TXN_CHECK_EARLY": txn_check_early,
    "TXN_CHECK_EXCEEDED": txn_check_exceeded,
    "TXN_UNRESOLVED": txn_unresolved,
    "TXN_CHECK_AFTER_RESOLVED": txn_check_after_resolved,
    "TXN_DISCARD_EARLY": txn_discard_early,
    "DLQ_DELAYED": dlq_delayed,
    "SCHEDULE_DUPLICATED": schedule_duplicated,
    "OFFSET_LOST": offset_lost,
    "FILTER_MISMATCH": filter_mismatch,
    "FILTER_SKIPPED": filter_skipped,
    "MESSAGE_LIFECYCLE": message_lifecycle,
    "LOCK_LIFECYCLE": lock_lifecycle,
    "TXN_LIFECYCLE": txn_lifecycle,
    "TIMER_EARLY": gen_timer.timer_early,
    "TIMER_DUPLICATED": gen_timer.timer_duplicated,
    "TIMER_UNFIRED": gen_timer.timer_unfired,
    "ORDER_KEY_SPLIT": order_key_split,
    "ORDERLY_LOOP_OVERRUN": orderly_loop_overrun,
    "PRODUCER_RETRY_SAME_BROKER": gen_route.retry_same_broker,
    "PRODUCER_FAULT_WINDOW": gen_route.fault_window,
    "HA_SYNC_ACK_UNREPLICATED": gen_ha.ha_sync_ack_unreplicated,
    "HA_SYNC_ACK_LOST": gen_ha.ha_sync_ack_lost,
    "HA_SLAVE_SERVED_UNSTORED": gen_ha.ha_slave_served_unstored,
    "HA_SLAVE_BEYOND_REPLICATED": gen_ha.ha_slave_beyond_replicated,
    "HA_SLAVE_NOT_PREFIX": gen_ha.ha_slave_not_prefix,
    "HA_SLAVE_WROTE": gen_ha.ha_slave_wrote,
    "SUBSCRIPTION_INCONSISTENT": subscription_inconsistent,
    "HA_ASYNC_TAIL_LOST": gen_ha.ha_async_tail_lost,
}
assert tuple(SCENARIOS) == VIOLATION_CODES + OBSERVATION_CODES


# Lock/orderly rules may be judged per epoch (the broker's lock table is lost
# in a crash), so no crash is simulated while one of these scenarios runs.
CRASH_SENSITIVE = frozenset(
    {"LOCK_OVERLAP", "ORDERLY_WITHOUT_LOCK", "ORDERLY_CONCURRENT", "ORDER_KEY_REORDERED",
     "SCHEDULE_DUPLICATED", "OFFSET_LOST", "LOCK_LIFECYCLE", "TXN_LIFECYCLE", "TIMER_DUPLICATED",
     "ORDERLY_LOOP_OVERRUN"}
)


def _guarded(sim: Simulation, steps: Steps) -> Steps:
    sim.crash_guard += 1
    try:
        yield from steps
    finally:
        sim.crash_guard -= 1


def parse_codes(text: str) -> tuple[str, ...]:
    """``A,B`` or ``all`` → codes; raises ``ValueError`` naming an unknown code."""
    if text.strip().lower() == "all":
        return VIOLATION_CODES
    codes = tuple(c.strip().upper() for c in text.split(",") if c.strip())
    unknown = [c for c in codes if c not in SCENARIOS]
    if unknown:
        raise ValueError(
            f"unknown violation code(s) {', '.join(unknown)}; known: {', '.join(VIOLATION_CODES + OBSERVATION_CODES)}"
        )
    return codes


def scenario_factories(
    codes: tuple[str, ...], count: int
) -> list[Callable[[Simulation], Steps]]:
    """One factory per (code, instance), interleaved code by code."""
    if codes:
        parse_codes(",".join(codes))
    out: list[Callable[[Simulation], Steps]] = []
    for index in range(count):
        for code in codes:
            out.append(lambda sim, c=code, i=index: _instance(sim, c, i))
    return out


def _instance(sim: Simulation, code: str, index: int) -> Steps:
    steps = SCENARIOS[code](_Ctx(sim, code, index))
    return _guarded(sim, steps) if code in CRASH_SENSITIVE else steps
