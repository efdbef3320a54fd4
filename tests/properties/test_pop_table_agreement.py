"""The model broker's pop (model/broker_pop.py) keeps to the pop lifecycle tables (model/lifecycle.py
``POP`` and ``POP_ORDER``) that the z3 theorems are proved over (properties/theorems_pop.py).

Hypothesis draws programs of sends, pops, acks (of any handle ever handed out: live, stale, revived),
changes of a live handle's invisible time, and clock advances with the broker's ticks (its revive
service). Every message the broker hands out, every ack and change, and every revive it records is
stepped through the table of that message (concurrent pop) or of its queue (orderly pop): a step the
table refuses is the model doing what the proofs say cannot happen — a message handed out again
while invisible or after its ack, a revive before pop time + invisible time or of an acked message,
a revived copy whose reconsume times are not one more, an orderly queue handed to another attempt
while its batch is in flight, or an orderly batch that skips the first message not acked. The same
rows, replayed by ``properties/inv_pop.py`` (the conformance machine's invariant), give no finding.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmqspec.model import lifecycle as lc
from rmqspec.model.broker import ModelBroker
from rmqspec.model.clock import ManualClock
from rmqspec.model.config import default_config
from rmqspec.model.events import ListRecorder
from rmqspec.model.message import Message
from rmqspec.model.pop import PopHandle
from rmqspec.properties.inv_pop import judge_pops
from rmqspec.properties.inv_tables import EventRow

T0 = 1_700_000_000_000
G, T = "G", "T"
INVISIBLE = (1_000, 3_000, 10_000)
ADVANCE = st.tuples(st.just("advance"), st.sampled_from((100, 700, 1_500, 4_000, 12_000)))
_POP = st.tuples(st.just("pop"), st.integers(1, 4), st.sampled_from(INVISIBLE), st.integers(0, 99))
# pops weigh most: what a table refuses shows only when a message is popped again
OPS = st.one_of(
    _POP, _POP,
    st.tuples(st.just("send"), st.integers(0, 1)),
    st.tuples(st.just("ack"), st.integers(0, 40)),
    st.tuples(st.just("change"), st.integers(0, 40), st.sampled_from(INVISIBLE)),
    ADVANCE,
)
_ORDER_POP = st.tuples(st.just("pop"), st.integers(1, 3), st.sampled_from(INVISIBLE), st.integers(1, 3))
ORDER_OPS = st.one_of(
    _ORDER_POP, _ORDER_POP, _ORDER_POP,
    st.tuples(st.just("send"), st.integers(1, 3)),
    st.tuples(st.just("ack"), st.integers(0, 40)),
    st.tuples(st.just("ack_batch"),),
    ADVANCE,
)


def _broker(queues: int) -> tuple[ManualClock, ModelBroker]:
    clock = ManualClock(T0)
    broker = ModelBroker(clock, default_config("rocketmq-5.2"), ListRecorder())
    broker.create_topic(T, queues)
    broker.create_group(G)
    return clock, broker


def _events(broker: ModelBroker) -> list[Any]:
    assert isinstance(broker.recorder, ListRecorder)
    return broker.recorder.events


def _ticks(clock: ManualClock, broker: ModelBroker, ms: int) -> None:
    end = clock.now() + ms
    while clock.now() < end:
        clock.advance(min(100, end - clock.now()))
        broker.tick()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(OPS, min_size=1, max_size=40))
def test_concurrent_pop_follows_the_pop_table(program: list[tuple]) -> None:
    clock, broker = _broker(2)
    program = [("send", 0), ("send", 1), *program]
    state: dict[str, tuple[str, lc.PopVars]] = {}  # msg_key -> the table's (state, vars)
    handles: list[tuple[PopHandle, str, int]] = []  # every handle handed out: (handle, key, its number)
    seen = 0
    sent = 0

    def step(key: str, action: str, **args: int) -> None:
        st_, v = state[key]
        try:
            state[key] = lc.POP.step(st_, v, action, {"now": clock.now(), **args})
        except lc.Refused as exc:
            raise AssertionError(f"the model did what the POP table refuses: {exc}; program {program}") from None

    for op in program:
        if op[0] == "send":
            key = f"K{sent}"
            broker.send(Message(T, b"m", uniq_key=key), op[1])
            state[key] = ("READY", lc.PopVars())
            sent += 1
        elif op[0] == "pop":
            broker.force_pop_random(op[3])
            result = broker.pop(G, T, -1, op[1], op[2])
            for m in result.messages:
                key = m.message.uniq_key
                assert key is not None
                assert m.message.reconsume_times == state[key][1].r, (key, program)  # revives so far
                step(key, "pop", invisible=result.invisible_time)
                handles.append((m.handle, key, state[key][1].h))
        elif op[0] == "ack" and handles:
            handle, key, number = handles[op[1] % len(handles)]
            broker.ack(G, T, handle)
            step(key, "ack", handle=number)
        elif op[0] == "change":
            live = [(h, k, n) for h, k, n in handles if state[k][0] == "POPPED" and state[k][1].h == n]
            if live:
                handle, key, number = live[op[1] % len(live)]
                new = broker.change_invisible_time(G, T, handle, op[2])
                step(key, "change", handle=number, invisible=op[2])
                assert new.revive_time == clock.now() + op[2]
                handles.append((new, key, state[key][1].h))
        elif op[0] == "advance":
            end = clock.now() + op[1]
            while clock.now() < end:
                clock.advance(min(100, end - clock.now()))
                broker.tick()
                events = _events(broker)
                revived, seen = [e for e in events[seen:] if e.event == "revive"], len(events)
                for ev in revived:
                    assert ev.msg_key is not None
                    step(ev.msg_key, "revive")
                    assert ev.reconsume_times == state[ev.msg_key][1].r, (ev, program)
    assert judge_pops(EventRow(e) for e in _events(broker)) == []  # the machine's invariant agrees


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ORDER_OPS, min_size=1, max_size=40))
def test_orderly_pop_follows_the_pop_order_table(program: list[tuple]) -> None:
    """One queue, popped with order=true by attempts 1..3: each batch the broker hands out is a step of
    the queue's POP_ORDER table (blocked for other attempts while in flight, from the first message not
    acked); acks reaching the batch's first messages commit them; a pop the table allows is not refused."""
    clock, broker = _broker(1)
    program = [("send", 3), *program]
    queue: tuple[str, lc.PopOrderVars] = ("IDLE", lc.PopOrderVars())
    batch: list[PopHandle] = []  # the handles of the batch in flight (the table's batch)
    acked: set[int] = set()
    sent = 0

    def step(action: str, **args: int) -> None:
        nonlocal queue
        try:
            queue = lc.POP_ORDER.step(*queue, action, {"now": clock.now(), **args})
        except lc.Refused as exc:
            raise AssertionError(f"the model did what the POP_ORDER table refuses: {exc}; program {program}") from None

    for op in program:
        if op[0] == "send":
            for _ in range(op[1]):
                broker.send(Message(T, b"m", uniq_key=f"K{sent}"), 0)
                sent += 1
        elif op[0] == "pop":
            result = broker.pop(G, T, 0, op[1], op[2], order=True, attempt_id=f"A{op[3]}")
            if result.messages:
                offsets = [m.handle.queue_offset for m in result.messages]
                step("pop", attempt=op[3], batch=len(offsets), invisible=result.invisible_time)
                assert offsets[0] == queue[1].off, (offsets, queue, program)  # from the first not acked
                assert offsets == list(range(offsets[0], offsets[0] + len(offsets)))
                batch, acked = [m.handle for m in result.messages], set()
            elif queue[0] == "INFLIGHT" and not lc.pop_order_blocked(queue[1].att, queue[1].pop_ts, queue[1].inv,
                                                                      clock.now(), op[3]):
                raise AssertionError(f"nothing handed out of a queue the table says is free: {queue}; {program}")
        elif op[0] in ("ack", "ack_batch") and batch:
            chosen = batch if op[0] == "ack_batch" else [batch[op[1] % len(batch)]]
            for handle in chosen:
                broker.ack(G, T, handle)
                acked.add(handle.queue_offset)
            count = 0
            while queue[0] == "INFLIGHT" and queue[1].off + count in acked:
                count += 1
            if count:  # commitAndNext: the offset moves to the first message not acked
                step("commit", count=count)
        elif op[0] == "advance":
            _ticks(clock, broker, op[1])


def test_the_tables_refuse_what_the_agreement_tests_look_for() -> None:
    """Not vacuous: the steps a faulty broker would make are refusals of the tables."""
    popped = lc.POP.step("READY", lc.PopVars(), "pop", {"now": 0, "invisible": 1000})
    for action, args in (("pop", {"now": 10, "invisible": 1000}), ("revive", {"now": 999})):
        try:
            lc.POP.step(*popped, action, args)
        except lc.Refused:
            continue
        raise AssertionError(f"{action} {args} accepted")
    inflight = lc.POP_ORDER.step("IDLE", lc.PopOrderVars(), "pop", {"now": 0, "invisible": 1000, "attempt": 1,
                                                                     "batch": 2})
    try:
        lc.POP_ORDER.step(*inflight, "pop", {"now": 999, "invisible": 1000, "attempt": 2, "batch": 1})
    except lc.Refused:
        return
    raise AssertionError("another attempt took the queue while its batch was in flight")
