"""The conformance machine's timer messages (properties/conform_timer.py): what one timer ladder sends and
observes under a 5.x profile, and the same draws under 4.9 (user properties, delivered at once)."""

from __future__ import annotations

from rmqspec.model.model_factory import factory as model_factory
from rmqspec.model.timer import TIMER_TOPIC
from rmqspec.properties.program import Op, replay

INIT = Op.of("init", flush="ASYNC", orderly_max=0, queues=1, retry_max=0, swarm=0)


def _events(machine, name: str) -> list:
    return [e for e in machine.history.events if e.event == name]


def test_the_ladder_under_5_2_stores_fires_and_refires_after_a_kill() -> None:
    m = replay([INIT, Op.of("timer_ladder", v=0)], model_factory, profile="rocketmq-5.2")
    timer_sends = [e for e in _events(m, "send") if e.deliver_ts is not None and not e.delay_level]
    copies = [e for e in _events(m, "store") if e.topic == TIMER_TOPIC]
    fires = _events(m, "timer_fire")
    assert len(timer_sends) == 4 and len(copies) == 4
    # every copy in the wheel is due at TIMER_OUT_MS + precision: the send's deliver_ts
    assert {(c.msg_key, c.deliver_ts) for c in copies} == {(s.msg_key, s.deliver_ts) for s in timer_sends}
    # each fired at or after its due time, into the send's topic; the one fired right before a kill fired again
    assert {f.msg_key for f in fires} == {s.msg_key for s in timer_sends}
    assert all(f.ts >= f.deliver_ts and f.topic == "T0" and f.reconsume_times == 0 for f in fires)
    assert len(fires) == len(timer_sends) + 1
    refired = [f for f in fires if sum(g.msg_key == f.msg_key for g in fires) == 2]
    crash = next(e.seq for e in _events(m, "crash") if e.seq > refired[0].seq)
    assert refired[0].seq < crash < refired[1].seq
    # the refusals and the other put rows: past the max (MESSAGE_ILLEGAL), now (at once), a level (DELAY wins)
    assert any(e.status == "FAILED" and (e.detail or {}).get("error") == "MESSAGE_ILLEGAL" for e in _events(m, "send"))
    assert any(e.delay_level and (e.detail or {}).get("timer") for e in _events(m, "send"))
    assert m.coverage["timer_refired"] == 1 and m.coverage["timer_retried"] == 1


def test_the_same_ladder_under_4_9_sends_user_properties() -> None:
    m = replay([INIT, Op.of("timer_ladder", v=0)], model_factory, profile="rocketmq-4.9")
    assert _events(m, "timer_fire") == []
    assert not [e for e in _events(m, "store") if e.topic == TIMER_TOPIC]
    sends = [e for e in _events(m, "send") if e.status == "SEND_OK"]
    assert sends and all(e.deliver_ts is None and "timer" not in (e.detail or {}) for e in sends)


def test_a_drawn_timer_send_replays() -> None:
    """``produce``'s timer kind records ``send_timer``: the op replays as it ran (the teardown drains)."""
    program = [INIT, Op.of("send_timer", topic=0, queue=0, prop="TIMER_DELIVER_MS", edge="minus1", span=2)]
    m = replay(program, model_factory, profile="rocketmq-5.2")
    (send,) = [e for e in _events(m, "send") if (e.detail or {}).get("timer")]
    (fire,) = _events(m, "timer_fire")
    assert fire.msg_key == send.msg_key and fire.ts >= send.deliver_ts == fire.deliver_ts
    assert send.deliver_ts == send.detail["timer"]["requested"] + 1  # 1 ms before a multiple: due at it
