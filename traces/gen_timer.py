"""Timer messages (RocketMQ 5.x) in the trace generator, and the injected scenarios of the timer codes.

Theory of operation
-------------------
With ``GenConfig.p_timer`` > 0 (the 5.x switch: 4.9 has no timer wheel) a producer sends that share
of its messages as timer messages (``send_timer``): the put hook (``model/timer.py`` ``transform``,
after B/util/HookUtils.handleScheduleMessage) stores the copy in ``rmq_sys_wheel_timer`` queue 0 with
``TIMER_OUT_MS`` = the requested time rounded down to ``timerPrecisionMs`` (``PRECISION_MS``, the
default 1000) and answers SEND_OK with that copy's position; the trace shows the ``store`` of the
timer copy (``deliver_ts`` = its due time, ``TIMER_OUT_MS + precision``) and the ``send`` (the real
topic and queue, the timer copy's offsets, ``delay_level`` null, ``deliver_ts``). The wheel
(S/timer/TimerMessageStore) re-puts the copy into its real topic at its due time or up to 100 ms
later (``fire``): a ``store`` of the new copy, then a ``timer_fire`` naming it (``deliver_ts`` and
``detail = {from_queue_offset, from_commitlog_offset}``), as ``model/broker.py`` records them. The
checkpoint (TimerCheckpoint) is flushed every ``PRECISION_MS`` (timerFlushIntervalMs' default, taken
on whole seconds here): a crash loses the fires since the last flush (``lost_fires``) and the wheel
delivers those copies again at the restart (``Simulation._recover``), duplicates the consumers take.

The scenarios (one per timer code, ``traces/scenarios.py`` registers them) follow the conventions of
that module: their own topic and keys, one violation each, recorded as ground truth.
"""

from __future__ import annotations

from collections.abc import Generator
from functools import partial
from typing import TYPE_CHECKING

from rmqspec.model.timer import TIMER_TOPIC, due_ms, out_ms

if TYPE_CHECKING:
    from rmqspec.traces.generator import Simulation
    from rmqspec.traces.scenarios import _Ctx

PRECISION_MS = 1000  # timerPrecisionMs and timerFlushIntervalMs: RocketMQ 5.x's defaults
BROKER = "broker"
DUP = 2  # generator.DUP: a duplicate copy, always consumed successfully
Steps = Generator[int, None, None]

__all__ = ["PRECISION_MS", "fire", "lost_fires", "send_timer", "timer_duplicated", "timer_early", "timer_unfired"]


def _due(now: int, delay_ms: int) -> int:
    """When a copy asked for ``now + delay_ms`` is due (``model/timer.py``: out + precision)."""
    return due_ms(out_ms(now + delay_ms, PRECISION_MS), PRECISION_MS)


def _put_timer(sim: Simulation, actor: str, pgroup: str, topic: str, qid: int, key: str,
               delay_ms: int) -> tuple[tuple, int, int]:
    """The put hook's timer copy and its acknowledged send: (the timer copy, its due time, the
    send's seq)."""
    due = _due(sim.now, delay_ms)
    detail = f'{{"real_queue_id":{qid},"real_topic":"{topic}"}}'
    timer = sim.store(TIMER_TOPIC, 0, key, 0, pgroup, 0, None, due, detail)
    seq = sim.emit("send", actor=actor, group=pgroup, topic=topic, queue_id=qid, queue_offset=timer[3],
                   commitlog_offset=timer[4], msg_key=key, msg_id=timer[5], deliver_ts=due, status="SEND_OK")
    return timer, due, seq


def send_timer(sim: Simulation, producer: list) -> None:
    """A producer's timer message (1 ms to 10 s ahead) to a random topic and queue; the wheel's
    fire is scheduled at its due time plus up to 100 ms (the wheel's tick)."""
    rng = sim.rng
    topic = sim.topics[rng.randrange(len(sim.topics))]
    qid = rng.randrange(sim.cfg.queues)
    timer, due, _ = _put_timer(sim, producer[0], producer[1], topic, qid, sim._new_key(producer),
                               rng.randint(1, 10_000))
    sim.push(due + rng.randrange(100), partial(fire, sim), (timer, topic, qid, producer[1], due, 0))


def fire(sim: Simulation, arg: tuple) -> tuple:
    """The wheel re-puts a timer copy into its real topic: the new copy's ``store``, then the
    ``timer_fire``; the copy goes to its consumers. Returns the new copy."""
    timer, topic, qid, pgroup, due, flags = arg
    copy = sim.store(topic, qid, timer[0], 0, pgroup, flags | timer[7])
    sim.emit("timer_fire", actor=BROKER, group=pgroup, topic=topic, queue_id=qid, queue_offset=copy[3],
             commitlog_offset=copy[4], msg_key=timer[0], msg_id=copy[5], reconsume_times=0, deliver_ts=due,
             detail={"from_queue_offset": timer[3], "from_commitlog_offset": timer[4]})
    sim.dispatch(copy)
    fires = sim.recent_timer_fires
    fires.append((sim.now, arg))
    while fires and fires[0][0] < sim.now - PRECISION_MS:
        fires.popleft()
    return copy


def lost_fires(sim: Simulation, crash_ts: int) -> list[tuple]:
    """The fires since the checkpoint's last flush (on a whole ``PRECISION_MS``) before a crash at
    ``crash_ts``: delivered again, as duplicates, when the broker restarts."""
    flushed = crash_ts // PRECISION_MS * PRECISION_MS
    lost = [(*arg[:5], DUP) for ts, arg in sim.recent_timer_fires if ts >= flushed]
    sim.recent_timer_fires.clear()
    return lost


# -- the scenarios of the timer codes (``traces/scenarios.py``) -------------------------------------


def _timer_send(ctx: _Ctx, delay_ms: int) -> tuple[tuple, int, int]:
    """A timer message on the scenario topic: (its timer copy, due time, send seq)."""
    return _put_timer(ctx.sim, ctx.producer, ctx.pgroup, ctx.topic, 0, ctx.sim.inj_key(), delay_ms)


def _consumed(ctx: _Ctx, *copies: tuple) -> None:
    for copy in copies:
        ctx.deliver(copy)
        ctx.consume(copy)
    ctx.commit(ctx.topic, 0, copies[-1][3] + 1)


def timer_early(ctx: _Ctx) -> Steps:
    """Even instances: the wheel fires a copy halfway to its due time (fire clause). Odd ones: a
    client-side view (send with ``deliver_ts``, no broker rows) of a message delivered halfway
    (deliver clause)."""
    delay = 4 * PRECISION_MS
    if ctx.index % 2 == 0:
        timer, due, _ = _timer_send(ctx, delay)
        yield delay // 2
        copy = fire(ctx.sim, (timer, ctx.topic, 0, ctx.pgroup, due, 0))
        ctx.truth([ctx.seq - 1], f"timer copy fired at {ctx.sim.now}, due at {due}")
        yield due - ctx.sim.now + 10
        _consumed(ctx, copy)
        return
    key = ctx.sim.inj_key()
    due = ctx.sim.now + delay
    send = ctx.sim.emit("send", actor=ctx.producer, group=ctx.pgroup, topic=ctx.topic, queue_id=0, msg_key=key,
                        deliver_ts=due, status="SEND_OK")
    yield delay // 2
    copy = (key, ctx.topic, 0, 0, None, None, 0, 0)
    seq = ctx.deliver(copy)
    ctx.consume(copy)
    ctx.commit(ctx.topic, 0, 1)
    ctx.truth([send, seq], f"timer message delivered at {ctx.sim.now}, due at {due}")


def timer_duplicated(ctx: _Ctx) -> Steps:
    """The wheel delivers one timer copy twice, a second apart, with no crash (a crash-sensitive
    scenario: no generator crash while it runs)."""
    timer, due, _ = _timer_send(ctx, PRECISION_MS)
    yield due - ctx.sim.now
    first = fire(ctx.sim, (timer, ctx.topic, 0, ctx.pgroup, due, 0))
    fires = [ctx.seq - 1]
    yield PRECISION_MS
    second = fire(ctx.sim, (timer, ctx.topic, 0, ctx.pgroup, due, 0))
    fires.append(ctx.seq - 1)
    ctx.truth(fires, "the timer copy fired twice without a crash")
    yield 5
    _consumed(ctx, first, second)


def timer_unfired(ctx: _Ctx) -> Steps:
    """An acknowledged timer message the wheel never delivers; the scenario waits past its due time,
    so the drain comes after it. Nobody consumes the scenario topic: LOST has no group to judge."""
    _, due, send = _timer_send(ctx, 2 * PRECISION_MS)
    ctx.sim.add_truth_at_drain(ctx.code, [send], f"timer message due at {due} never fired")
    yield due - ctx.sim.now + 10
