"""5.x pop consumption in the model (model/pop.py, model/broker_pop.py): each rule of the docstring."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqspec.model.broker import ModelBroker
from rmqspec.model.clock import ManualClock
from rmqspec.model.config import default_config
from rmqspec.model.events import ListRecorder
from rmqspec.model.message import Message, MessageQueue
from rmqspec.model.pop import (
    POP_ORDER_REVIVE_QUEUE,
    PROPERTY_FIRST_POP_TIME,
    PROPERTY_ORIGIN_GROUP,
    PROPERTY_POP_CK,
    REVIVE_MARGIN_MS,
    PopHandle,
    PopResult,
    PopStatus,
    normal_topic,
    pop_retry_topic,
    real_topic,
    retry_flag,
    spread_random,
)
from rmqspec.model.protocol import Capability, PopBroker
from rmqspec.model.results import BrokerError, ResponseCode

T0 = 1_700_000_000_000
G, T = "G", "T"
RETRY = pop_retry_topic(T, G, False)
NO_RETRY_FIRST = 50  # a randomQ above popFromRetryProbability (20): the topic first, the retry topic after


def _broker(version: str = "rocketmq-5.2", queues: int = 1, **config: object) -> tuple[ManualClock, ModelBroker]:
    clock = ManualClock(T0)
    broker = ModelBroker(clock, attrs.evolve(default_config(version), **config), ListRecorder())
    broker.create_topic(T, queues)
    broker.create_group(G)
    return clock, broker


def _send(broker: ModelBroker, n: int, queue_id: int = 0, tag: str | None = None) -> None:
    for i in range(n):
        broker.send(Message(T, f"m{i}".encode(), tags=tag), queue_id)


def _pop(broker: ModelBroker, n: int = 32, invisible: int = 10_000, queue_id: int = -1, **kw: object) -> PopResult:
    broker.force_pop_random(kw.pop("random_q", NO_RETRY_FIRST))  # type: ignore[arg-type]
    return broker.pop(G, T, queue_id, n, invisible, **kw)  # type: ignore[arg-type]


def _bodies(result: PopResult) -> list[bytes]:
    return [m.message.body for m in result.messages]


def _run(clock: ManualClock, broker: ModelBroker, ms: int, step: int = 100) -> None:
    end = clock.now() + ms
    while clock.now() < end:
        clock.advance(min(step, end - clock.now()))
        broker.tick()


def _events(broker: ModelBroker, name: str) -> list:
    assert isinstance(broker.recorder, ListRecorder)
    return broker.recorder.of(name)


# -- pure arithmetic -------------------------------------------------------------------------------------


def test_retry_topic_names_and_flags() -> None:
    assert pop_retry_topic("T", "G", False) == "%RETRY%G_T"
    assert pop_retry_topic("T", "G", True) == "%RETRY%G+T"
    assert [retry_flag(t) for t in ("T", "%RETRY%G_T", "%RETRY%G+T")] == ["0", "1", "2"]
    assert real_topic("T", "G", "1") == "%RETRY%G_T" and real_topic("T", "G", "2") == "%RETRY%G+T"
    assert normal_topic("%RETRY%G_T", "G") == "T" == normal_topic("%RETRY%G+T", "G") == normal_topic("T", "G")
    with pytest.raises(ValueError):
        real_topic("T", "G", "3")


def test_handle_round_trips_through_its_extra_info() -> None:
    handle = PopHandle(5, T0, 30_000, 3, "1", "broker-a", 0, 7)
    assert handle.extra_info() == f"5 {T0} 30000 3 1 broker-a 0 7"
    assert PopHandle.parse(handle.extra_info()) == handle
    assert handle.revive_time == T0 + 30_000 and not handle.order
    for bad in ("1 2 3", f"5 {T0} 30000 3 9 broker-a 0 7", f"x {T0} 30000 3 1 broker-a 0 7"):
        with pytest.raises(ValueError):
            PopHandle.parse(bad)


def test_spread_random_reads_the_retry_topic_first_one_pop_in_five() -> None:
    draws = [spread_random(i) for i in range(100)]
    assert sorted(draws) == list(range(100))
    assert sum(d < 20 for d in draws) == 20


# -- 4.9 refuses, capability --------------------------------------------------------------------------------


def test_4_9_answers_pop_requests_as_unknown_request_codes() -> None:
    _, broker = _broker("rocketmq-4.9")
    _send(broker, 1)
    assert isinstance(broker, PopBroker) and Capability.POP in broker.capabilities
    with pytest.raises(BrokerError) as e:
        broker.pop(G, T, -1, 1, 1000)
    assert e.value.code is ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert e.value.remark == " request type 200050 not supported"
    handle = PopHandle(0, T0, 1000, 0, "0", "broker-a", 0, 0)
    assert broker.ack(G, T, handle) is ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert broker.batch_ack(G, T, [handle]) is ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    with pytest.raises(BrokerError) as e:
        broker.change_invisible_time(G, T, handle, 1000)
    assert e.value.remark == " request type 200053 not supported"


@pytest.mark.parametrize(("kwargs", "code"), [
    ({"max_nums": 33}, ResponseCode.INVALID_PARAMETER),
    ({"topic": "nope"}, ResponseCode.TOPIC_NOT_EXIST),
    ({"queue_id": 1}, ResponseCode.INVALID_PARAMETER),
    ({"group": "unknown"}, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST),
    ({"expression": "a =", "expression_type": "SQL92"}, ResponseCode.SUBSCRIPTION_PARSE_FAILED),
])
def test_pop_refusals(kwargs: dict, code: ResponseCode) -> None:
    _, broker = _broker()
    request = {"group": G, "topic": T, "queue_id": -1, "max_nums": 1, "invisible_ms": 1000} | kwargs
    with pytest.raises(BrokerError) as e:
        broker.pop(**request)
    assert e.value.code is code


def test_pop_needs_the_timer_wheel() -> None:
    _, broker = _broker(timer_wheel_enable=False)
    with pytest.raises(BrokerError) as e:
        broker.pop(G, T, -1, 1, 1000)
    assert e.value.code is ResponseCode.SYSTEM_ERROR and "timerWheelEnable is false" in e.value.remark


# -- invisible time, ack, revive ----------------------------------------------------------------------------


def test_a_popped_message_is_not_popped_again_and_the_offset_moves_past_it() -> None:
    clock, broker = _broker()
    _send(broker, 3)
    first = _pop(broker, 2)
    assert first.status is PopStatus.FOUND and _bodies(first) == [b"m0", b"m1"]
    assert broker.query_offset(G, MessageQueue(T, 0)) == 2  # the pop offset is the group's consumer offset
    assert _bodies(_pop(broker)) == [b"m2"]
    clock.advance(5_000)
    empty = _pop(broker)
    assert empty.status is PopStatus.POLLING_NOT_FOUND and not empty.messages


def test_handle_names_the_checkpoint() -> None:
    _, broker = _broker()
    _send(broker, 2)
    result = _pop(broker, invisible=30_000)
    h = [m.handle for m in result.messages]
    assert h[0] == PopHandle(0, T0, 30_000, h[0].revive_qid, "0", "broker-a", 0, 0)
    assert h[1].queue_offset == 1 and h[1].ck_queue_offset == 0
    assert result.pop_time == T0 and result.invisible_time == 30_000 and result.revive_qid == h[0].revive_qid


def test_revive_queue_ids_rotate_over_revive_queue_num() -> None:
    _, broker = _broker(revive_queue_num=3)
    assert [_pop(broker).revive_qid for _ in range(4)] == [0, 1, 2, 0]


def test_unacked_message_is_revived_after_its_invisible_time_with_reconsume_plus_one() -> None:
    clock, broker = _broker()
    _send(broker, 1)
    popped = _pop(broker, invisible=5_000).messages[0]
    _run(clock, broker, 5_000 + REVIVE_MARGIN_MS)  # exactly the margin past the revive time: not yet
    assert not broker.topic_exists(RETRY)
    _run(clock, broker, 100)
    retry = broker.queue_messages(MessageQueue(RETRY, 0))
    assert len(retry) == 1 and retry[0].reconsume_times == 1 and retry[0].body == b"m0"
    assert retry[0].prop(PROPERTY_FIRST_POP_TIME) == str(T0)
    assert retry[0].uniq_key == popped.message.uniq_key
    (revive,) = _events(broker, "revive")
    assert revive.reconsume_times == 1 and revive.deliver_ts == T0 + 5_000
    assert broker.query_offset(G, MessageQueue(RETRY, 0)) == 0  # initPopRetryOffset


def test_revived_message_is_popped_under_the_original_topic_and_revived_again() -> None:
    clock, broker = _broker()
    _send(broker, 1)
    _pop(broker, invisible=1_000)
    _run(clock, broker, 1_000 + REVIVE_MARGIN_MS + 100)
    again = _pop(broker, invisible=1_000)  # the topic is empty: the retry topic is read after it
    (m,) = again.messages
    assert m.message.topic == T and m.message.reconsume_times == 1
    assert m.handle.retry == "1" and m.message.properties[PROPERTY_POP_CK] == m.handle.extra_info()
    _run(clock, broker, 1_000 + REVIVE_MARGIN_MS + 100)
    retry = broker.queue_messages(MessageQueue(RETRY, 0))
    assert [r.reconsume_times for r in retry] == [1, 2]  # into the same retry topic
    assert retry[1].prop(PROPERTY_FIRST_POP_TIME) == str(T0)  # kept from the first revive


def test_acked_message_is_never_revived() -> None:
    clock, broker = _broker()
    _send(broker, 2)
    result = _pop(broker, invisible=2_000)
    assert broker.ack(G, T, result.messages[0].handle) is ResponseCode.SUCCESS
    _run(clock, broker, 20_000)
    assert [r.body for r in broker.queue_messages(MessageQueue(RETRY, 0))] == [b"m1"]
    assert [e.status for e in _events(broker, "ack")] == ["ACKED"]


def test_late_ack_still_counts_until_the_revive_and_matches_nothing_after() -> None:
    clock, broker = _broker()
    _send(broker, 2)
    a, b = _pop(broker, invisible=1_000).messages
    clock.advance(1_500)  # past the invisible time, before the revive
    assert broker.ack(G, T, a.handle) is ResponseCode.SUCCESS
    _run(clock, broker, 3_000)
    assert [r.body for r in broker.queue_messages(MessageQueue(RETRY, 0))] == [b"m1"]
    assert broker.ack(G, T, b.handle) is ResponseCode.SUCCESS  # after the revive: SUCCESS, no effect
    unknown = attrs.evolve(a.handle, pop_time=T0 - 1)
    assert broker.ack(G, T, unknown) is ResponseCode.SUCCESS
    assert [e.status for e in _events(broker, "ack")] == ["ACKED", "LATE", "UNMATCHED"]


def test_ack_refusals() -> None:
    _, broker = _broker()
    _send(broker, 1)
    h = _pop(broker).messages[0].handle
    assert broker.ack(G, "nope", h) is ResponseCode.TOPIC_NOT_EXIST
    assert broker.ack(G, T, attrs.evolve(h, queue_id=4)) is ResponseCode.MESSAGE_ILLEGAL
    assert broker.ack(G, T, attrs.evolve(h, queue_offset=2)) is ResponseCode.NO_MESSAGE
    assert broker.ack(G, T, attrs.evolve(h, queue_offset=1)) is ResponseCode.SUCCESS  # max is inclusive
    assert broker.ack(G, T, attrs.evolve(h, retry="1")) is ResponseCode.TOPIC_NOT_EXIST  # no retry topic yet


def test_batch_ack_acks_each_and_skips_offsets_outside_the_queue() -> None:
    clock, broker = _broker()
    _send(broker, 3)
    handles = [m.handle for m in _pop(broker, invisible=1_000).messages]
    outside = attrs.evolve(handles[2], queue_offset=9)
    assert broker.batch_ack(G, T, [handles[0], handles[2], outside]) is ResponseCode.SUCCESS
    assert broker.batch_ack(G, T, []) is ResponseCode.NO_MESSAGE
    _run(clock, broker, 5_000)
    assert [r.body for r in broker.queue_messages(MessageQueue(RETRY, 0))] == [b"m1"]
    assert all(e.detail["batch"] for e in _events(broker, "ack"))


# -- change invisible time --------------------------------------------------------------------------------


def test_change_invisible_time_moves_the_revive_and_gives_a_new_handle() -> None:
    clock, broker = _broker()
    _send(broker, 2)
    _, b = _pop(broker, invisible=1_000).messages
    clock.advance(500)
    new = broker.change_invisible_time(G, T, b.handle, 10_000)
    assert new == PopHandle(1, T0 + 500, 10_000, b.handle.revive_qid, "0", "broker-a", 0, 1)
    _run(clock, broker, 5_000)
    assert [r.body for r in broker.queue_messages(MessageQueue(RETRY, 0))] == [b"m0"]
    assert broker.ack(G, T, b.handle) is ResponseCode.SUCCESS  # the old handle: already acked by the change
    _run(clock, broker, 10_000)
    assert [r.body for r in broker.queue_messages(MessageQueue(RETRY, 0))] == [b"m0", b"m1"]
    (row,) = _events(broker, "change_invisible")
    assert row.deliver_ts == T0 + 10_500


def test_changed_then_acked_with_the_new_handle_is_never_revived() -> None:
    clock, broker = _broker()
    _send(broker, 1)
    (m,) = _pop(broker, invisible=1_000).messages
    new = broker.change_invisible_time(G, T, m.handle, 2_000)
    assert broker.ack(G, T, new) is ResponseCode.SUCCESS
    _run(clock, broker, 20_000)
    assert not broker.topic_exists(RETRY)


def test_change_of_a_revived_handle_revives_the_message_again() -> None:
    clock, broker = _broker()
    _send(broker, 1)
    (m,) = _pop(broker, invisible=1_000).messages
    _run(clock, broker, 4_000)
    broker.change_invisible_time(G, T, m.handle, 1_000)
    _run(clock, broker, 4_000)
    assert len(broker.queue_messages(MessageQueue(RETRY, 0))) == 2


def test_change_in_the_pops_millisecond_revives_at_the_new_time() -> None:
    clock, broker = _broker()  # fidelity POP-9: the new checkpoint has the old one's merge key
    _send(broker, 1)
    (m,) = _pop(broker, invisible=1_000).messages
    new = broker.change_invisible_time(G, T, m.handle, 5_000)
    assert new.ck_queue_offset == m.handle.ck_queue_offset and new.pop_time == m.handle.pop_time
    _run(clock, broker, 5_000 + REVIVE_MARGIN_MS)
    assert not broker.topic_exists(RETRY)
    _run(clock, broker, 100)
    assert len(broker.queue_messages(MessageQueue(RETRY, 0))) == 1


def test_change_refuses_an_offset_at_the_queue_end() -> None:
    _, broker = _broker()
    _send(broker, 1)
    h = _pop(broker).messages[0].handle
    with pytest.raises(BrokerError) as e:
        broker.change_invisible_time(G, T, attrs.evolve(h, queue_offset=1), 1_000)
    assert e.value.code is ResponseCode.NO_MESSAGE


# -- the retry topic, queues ----------------------------------------------------------------------------------


def test_retry_topic_is_read_first_below_the_probability_else_after_a_short_topic() -> None:
    clock, broker = _broker()
    _send(broker, 1)
    _pop(broker, invisible=1_000)
    _run(clock, broker, 4_000)  # m0 revived into the retry topic
    _send(broker, 2)
    assert _bodies(_pop(broker, 2, random_q=50)) == [b"m0", b"m1"]  # topic first, full: no retry read
    _run(clock, broker, 4_000)  # both revived
    _send(broker, 1)
    first = _pop(broker, 1, random_q=5)  # retry topic first
    assert first.messages[0].handle.retry == "1" and first.messages[0].message.reconsume_times == 1


def test_retry_topic_v2_when_enabled() -> None:
    clock, broker = _broker(enable_retry_topic_v2=True, retrieve_message_from_pop_retry_topic_v1=False)
    _send(broker, 1)
    _pop(broker, invisible=1_000)
    _run(clock, broker, 4_000)
    v2 = pop_retry_topic(T, G, True)
    assert broker.topic_exists(v2) and not broker.topic_exists(RETRY)
    (m,) = _pop(broker).messages
    assert m.handle.retry == "2" and broker.ack(G, T, m.handle) is ResponseCode.SUCCESS


def test_every_queue_from_random_q_and_one_checkpoint_per_queue() -> None:
    _, broker = _broker(queues=3)
    for q in range(3):
        _send(broker, 1, q)
    result = _pop(broker, random_q=52)  # 52 % 3 == 1: queues 1, 2, 0
    assert [m.handle.queue_id for m in result.messages] == [1, 2, 0]
    assert len(broker.pop_state.pending) == 3
    assert [m.handle.queue_id for m in _pop(broker, queue_id=1).messages] == []


def test_tag_filter_skips_and_moves_the_offset() -> None:
    _, broker = _broker()
    _send(broker, 2, tag="a")
    _send(broker, 1, tag="b")
    assert _bodies(_pop(broker, expression="b")) == [b"m0"]
    assert broker.query_offset(G, MessageQueue(T, 0)) == 3


def test_init_mode_max_starts_at_the_last_message_unless_offset_zero_is_held() -> None:
    _, broker = _broker()
    _send(broker, 3)
    assert len(_pop(broker, init_mode=1).messages) == 3  # offset 0 still in the queue: from 0


# -- orderly pop ------------------------------------------------------------------------------------------------


def test_orderly_pop_blocks_the_queue_until_acked_and_commits_the_next_offset() -> None:
    _, broker = _broker()
    _send(broker, 3)
    first = _pop(broker, 2, order=True)
    assert _bodies(first) == [b"m0", b"m1"] and first.revive_qid == POP_ORDER_REVIVE_QUEUE
    assert all(m.order_count == 0 and m.handle.order for m in first.messages)
    assert _pop(broker, order=True).status is PopStatus.POLLING_NOT_FOUND  # blocked
    a, b = first.messages
    assert broker.ack(G, T, b.handle) is ResponseCode.SUCCESS
    assert broker.query_offset(G, MessageQueue(T, 0)) == 0  # m0 un-acked: still the first
    assert broker.ack(G, T, a.handle) is ResponseCode.SUCCESS
    assert broker.query_offset(G, MessageQueue(T, 0)) == 2
    assert _bodies(_pop(broker, order=True)) == [b"m2"]
    assert [e.status for e in _events(broker, "ack")] == ["COMMITTED", "COMMITTED"]


def test_orderly_pop_hands_an_expired_batch_out_again_with_its_count() -> None:
    clock, broker = _broker()
    _send(broker, 2)
    _pop(broker, order=True, invisible=1_000)
    clock.advance(999)
    assert not _pop(broker, order=True).messages
    clock.advance(1)
    again = _pop(broker, order=True)
    assert _bodies(again) == [b"m0", b"m1"] and [m.order_count for m in again.messages] == [1, 1]
    _run(clock, broker, 20_000)
    assert not broker.topic_exists(RETRY)  # no revive for an orderly pop


def test_orderly_attempt_id_reenters_the_blocked_queue() -> None:
    _, broker = _broker()
    _send(broker, 1)
    first = _pop(broker, order=True, attempt_id="A")
    assert _bodies(_pop(broker, order=True, attempt_id="A")) == _bodies(first)
    assert not _pop(broker, order=True, attempt_id="B").messages
    assert _pop(broker, order=True, attempt_id="A").messages[0].order_count == 0  # same attempt: not counted


def test_orderly_ack_refusals_and_stale_acks() -> None:
    clock, broker = _broker()
    _send(broker, 2)
    (m,) = _pop(broker, 1, order=True, invisible=1_000).messages
    assert broker.ack(G, T, attrs.evolve(m.handle, queue_offset=1)) is ResponseCode.MESSAGE_ILLEGAL
    assert broker.ack(G, T, attrs.evolve(m.handle, pop_time=T0 + 1)) is ResponseCode.SUCCESS  # another pop's
    clock.advance(1_000)
    (again,) = _pop(broker, 1, order=True).messages
    assert broker.ack(G, T, m.handle) is ResponseCode.SUCCESS  # the old pop time: nothing
    assert broker.query_offset(G, MessageQueue(T, 0)) == 0
    assert broker.ack(G, T, again.handle) is ResponseCode.SUCCESS
    assert broker.ack(G, T, again.handle) is ResponseCode.SUCCESS  # below the committed offset: nothing
    assert [e.status for e in _events(broker, "ack")] == ["ILLEGAL", "STALE", "STALE", "COMMITTED", "STALE"]


def test_orderly_change_invisible_time_extends_the_block() -> None:
    clock, broker = _broker()
    _send(broker, 1)
    (m,) = _pop(broker, order=True, invisible=1_000).messages
    clock.advance(500)
    new = broker.change_invisible_time(G, T, m.handle, 3_000)
    assert new.pop_time == T0 and new.invisible_time == 3_500 and new.revive_time == T0 + 3_500
    clock.advance(2_999)
    assert not _pop(broker, order=True).messages
    clock.advance(1)
    assert _bodies(_pop(broker, order=True)) == [b"m0"]


def test_orderly_pop_never_reads_the_retry_topic() -> None:
    clock, broker = _broker()
    _send(broker, 1)
    _pop(broker, invisible=1_000)
    _run(clock, broker, 4_000)
    assert not _pop(broker, order=True, random_q=0).messages


# -- crashes ------------------------------------------------------------------------------------------------------


def test_kill_keeps_checkpoints_and_acks_and_repops_from_the_persisted_offset() -> None:
    clock, broker = _broker()
    _send(broker, 2)
    a, _ = _pop(broker, invisible=2_000).messages
    broker.ack(G, T, a.handle)
    broker.crash("kill")
    broker.recover()
    clock.advance(1)  # a pop in the same ms from the same offset would replace the checkpoint (one merge key)
    assert _bodies(_pop(broker, invisible=60_000)) == [b"m0", b"m1"]  # the offset move was not persisted
    _run(clock, broker, 5_000)
    assert [r.body for r in broker.queue_messages(MessageQueue(RETRY, 0))] == [b"m1"]  # the ack survived


def test_a_revive_after_the_last_persist_is_revived_again_after_a_crash() -> None:
    clock, broker = _broker(flush_consumer_offset_interval_ms=5_000)
    _send(broker, 1)
    _pop(broker, invisible=1_000)
    _run(clock, broker, 3_100)  # revived; no persist since
    assert len(broker.queue_messages(MessageQueue(RETRY, 0))) == 1
    broker.crash("kill")
    broker.recover()
    broker.tick()
    assert len(broker.queue_messages(MessageQueue(RETRY, 0))) == 2
    _run(clock, broker, 5_000)  # persisted now
    broker.crash("kill")
    broker.recover()
    _run(clock, broker, 1_000)
    assert len(broker.queue_messages(MessageQueue(RETRY, 0))) == 2


def test_orderly_info_survives_a_crash_only_once_persisted() -> None:
    clock, broker = _broker()
    _send(broker, 1)
    _pop(broker, order=True, invisible=60_000)
    broker.crash("kill")
    broker.recover()
    assert _bodies(_pop(broker, order=True, invisible=60_000)) == [b"m0"]  # the block was not persisted
    _run(clock, broker, 10_000)
    broker.crash("kill")
    broker.recover()
    assert not _pop(broker, order=True).messages  # consumerOrderInfo.json holds the block


def test_close_and_reopen_keep_pop_state() -> None:
    clock, broker = _broker()
    _send(broker, 2)
    _pop(broker, 1, invisible=1_000)
    broker.close()
    broker.reopen()
    assert _bodies(_pop(broker, invisible=1_000)) == [b"m1"]
    _run(clock, broker, 4_000)
    assert [r.body for r in broker.queue_messages(MessageQueue(RETRY, 0))] == [b"m0", b"m1"]


def test_fork_copies_pop_state() -> None:
    _, broker = _broker()
    _send(broker, 1)
    fork = broker.fork()
    _pop(broker)
    assert _bodies(_pop(fork)) == [b"m0"]


# -- random programs against an independent reference ------------------------------------------------------------


@attrs.define
class _Item:
    """The reference's view of one handed-out message: visible again at ``visible_at`` unless acked."""

    body: bytes
    reconsume: int
    visible_at: int
    seq: tuple[int, int]  # (the checkpoint's creation order, the message's place in it)
    done: bool = False  # acked (or superseded by a change) or revived


class _Reference:
    """Concurrent pop of one queue, written from the rules alone: a pop reads the topic then its retry topic;
    an item not acked (nor changed) is re-queued into the retry topic with reconsume + 1 once more than
    REVIVE_MARGIN_MS past its visible time, in (visible time, creation) order."""

    def __init__(self, bodies: list[bytes]) -> None:
        self.topic = list(bodies)
        self.retry: list[tuple[bytes, int]] = []
        self.topic_off = self.retry_off = 0
        self.items: list[_Item] = []
        self.cks = 0

    def pop(self, now: int, n: int, invisible: int) -> list[_Item]:
        out: list[_Item] = []
        for source in ("topic", "retry"):
            queue = self.topic if source == "topic" else [b for b, _ in self.retry]
            off = self.topic_off if source == "topic" else self.retry_off
            take = queue[off:off + n - len(out)]
            if not take:
                continue
            ck, self.cks = self.cks, self.cks + 1
            for i, body in enumerate(take):
                times = 0 if source == "topic" else self.retry[off + i][1]
                out.append(_Item(body, times, now + invisible, (ck, i)))
            if source == "topic":
                self.topic_off += len(take)
            else:
                self.retry_off += len(take)
        self.items += out
        return out

    def change(self, now: int, item: _Item, invisible: int) -> _Item:
        new = _Item(item.body, item.reconsume, now + invisible, (self.cks, 0))
        self.cks += 1
        item.done = True
        self.items.append(new)
        return new

    def tick(self, now: int) -> None:
        due = sorted((i for i in self.items if not i.done and now - i.visible_at > REVIVE_MARGIN_MS),
                     key=lambda i: (i.visible_at, i.seq))
        for item in due:
            item.done = True
            self.retry.append((item.body, item.reconsume + 1))


_POP = st.tuples(st.just("pop"), st.integers(1, 4), st.sampled_from([1_000, 3_000, 8_000]))
_WAIT = st.tuples(st.just("wait"), st.sampled_from([0, 200, 1_500, 3_000, 6_000]), st.just(0))
_OPS = st.one_of(  # pops and waits twice as likely as acks and changes, so that revives happen
    _POP, _POP, _WAIT, _WAIT,
    st.tuples(st.just("ack"), st.integers(0, 50), st.just(0)),
    st.tuples(st.just("change"), st.integers(0, 50), st.sampled_from([500, 2_000, 6_000])),
)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 6), st.lists(_OPS, min_size=12, max_size=40))
def test_random_pop_programs_agree_with_the_reference(n: int, ops: list[tuple[str, int, int]]) -> None:
    clock, broker = _broker()
    _send(broker, n)
    ref = _Reference([f"m{i}".encode() for i in range(n)])
    held: list[tuple[PopHandle, _Item]] = []
    for op, a, b in ops:
        now = clock.now()
        if op == "pop":
            got = _pop(broker, a, invisible=b)
            want = ref.pop(now, a, b)
            assert [(m.message.body, m.message.reconsume_times) for m in got.messages] == [
                (i.body, i.reconsume) for i in want]
            held += [(m.handle, i) for m, i in zip(got.messages, want, strict=True)]
        elif op in ("ack", "change") and held:
            handle, item = held.pop(a % len(held))
            if op == "ack":
                assert broker.ack(G, T, handle) is ResponseCode.SUCCESS
                item.done = True
            else:
                new = broker.change_invisible_time(G, T, handle, b)
                held.append((new, ref.change(now, item, b)))
                assert new.revive_time == now + b
        elif op == "wait":
            clock.advance(a)
        broker.tick()
        ref.tick(clock.now())
        retry = [(r.body, r.reconsume_times) for r in broker.queue_messages(MessageQueue(RETRY, 0))]
        assert retry == ref.retry


# -- 5.5.x --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("version", "origin", "times"), [("rocketmq-5.2", None, 1), ("rocketmq-5.5", G, 0)])
def test_5_5_revives_with_origin_group_and_a_suspended_change_keeps_reconsume_times(
        version: str, origin: str | None, times: int) -> None:
    clock, broker = _broker(version)
    _send(broker, 2)
    _, b = _pop(broker, invisible=1_000).messages
    broker.change_invisible_time(G, T, b.handle, 1_000, suspend=True)  # 5.2 (5.3.3) ignores the flag
    _run(clock, broker, 4_000)
    ra, rb = broker.queue_messages(MessageQueue(RETRY, 0))
    assert ra.reconsume_times == 1 and rb.reconsume_times == times
    assert ra.prop(PROPERTY_ORIGIN_GROUP) == origin == rb.prop(PROPERTY_ORIGIN_GROUP)


def test_a_pop_offset_past_a_truncated_queue_is_corrected_to_its_end() -> None:
    clock, broker = _broker(flush="ASYNC")
    _send(broker, 4)
    assert len(_pop(broker, invisible=60_000).messages) == 4
    _run(clock, broker, 5_000)  # the pop offset 4 persisted; the records not flushed yet
    broker.crash("power")
    broker.recover(2)
    assert not _pop(broker).messages  # OFFSET_OVERFLOW_BADLY: committed to the queue's end, read again
    assert broker.query_offset(G, MessageQueue(T, 0)) == 2
    _send(broker, 1)
    assert _bodies(_pop(broker)) == [b"m0"]


@attrs.define
class _Batch:
    pop_time: int
    invisible: int
    offsets: list[int]
    attempt: str | None
    acked: set[int] = attrs.Factory(set)
    visible: dict[int, int] = attrs.Factory(dict)
    counts: dict[int, int] = attrs.Factory(dict)


class _OrderlyReference:
    """Orderly pop of one queue from the rules alone: the group's batch blocks the queue while one of its
    messages is un-acked and invisible (not for the same attempt id); a pop reads from the committed offset;
    an ack commits the first un-acked offset of the batch."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.committed = 0
        self.batch: _Batch | None = None

    def pop(self, now: int, k: int, invisible: int, attempt: str | None) -> list[tuple[int, int]]:
        b = self.batch
        if b is not None and not (b.attempt is not None and b.attempt == attempt) and any(
                now < b.visible.get(o, b.pop_time + b.invisible) for o in b.offsets if o not in b.acked):
            return []
        offsets = list(range(self.committed, min(self.n, self.committed + k)))
        if not offsets:
            return []
        new = _Batch(now, invisible, offsets, attempt)
        if b is not None:
            same = b.attempt is not None and b.attempt == attempt
            new.counts = dict(b.counts) if same else {o: b.counts.get(o, 0) + 1 for o in offsets if o in b.offsets}
        self.batch = new
        return [(o, new.counts.get(o, 0)) for o in offsets]

    def ack(self, offset: int, pop_time: int) -> ResponseCode:
        b = self.batch
        if offset < self.committed or b is None or pop_time != b.pop_time:
            return ResponseCode.SUCCESS
        if offset not in b.offsets:
            return ResponseCode.MESSAGE_ILLEGAL
        b.acked.add(offset)
        self.committed = next((o for o in b.offsets if o not in b.acked), b.offsets[-1] + 1)
        return ResponseCode.SUCCESS

    def change(self, now: int, offset: int, pop_time: int, invisible: int) -> None:
        b = self.batch
        if offset >= self.committed and b is not None and pop_time == b.pop_time:
            b.visible[offset] = now + invisible


_ORDERLY_OPS = st.one_of(
    st.tuples(st.just("pop"), st.integers(1, 3), st.sampled_from([1_000, 4_000]), st.sampled_from([None, "A", "B"])),
    st.tuples(st.just("ack"), st.integers(0, 50), st.just(0), st.none()),
    st.tuples(st.just("change"), st.integers(0, 50), st.sampled_from([500, 3_000]), st.none()),
    st.tuples(st.just("wait"), st.sampled_from([0, 300, 1_000, 5_000]), st.just(0), st.none()),
)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 5), st.lists(_ORDERLY_OPS, min_size=8, max_size=30))
def test_random_orderly_programs_agree_with_the_reference(n: int, ops: list) -> None:
    clock, broker = _broker()
    _send(broker, n)
    ref = _OrderlyReference(n)
    held: list[PopHandle] = []
    for op, a, b, attempt in ops:
        now = clock.now()
        if op == "pop":
            got = _pop(broker, a, invisible=b, order=True, attempt_id=attempt)
            assert [(m.handle.queue_offset, m.order_count) for m in got.messages] == ref.pop(now, a, b, attempt)
            held += [m.handle for m in got.messages]
        elif op == "ack" and held:
            handle = held[a % len(held)]
            assert broker.ack(G, T, handle) is ref.ack(handle.queue_offset, handle.pop_time)
        elif op == "change" and held:
            handle = held[a % len(held)]
            new = broker.change_invisible_time(G, T, handle, b)
            ref.change(now, handle.queue_offset, handle.pop_time, b)
            held.append(new)
        elif op == "wait":
            clock.advance(a)
        broker.tick()
        assert broker.query_offset(G, MessageQueue(T, 0)) == ref.committed


# -- what the wire showed (docs/fidelity.md POP-W1, POP-W2, R5-6) ----------------------------------------------


def test_a_handle_parses_as_the_java_client_reads_it():
    """PopHandle.parse is ExtraInfoUtil.split's reading: Java numbers only (no underscore, no blank), 7 fields
    (the ck offset is the message's) or 8; a field that is not of its kind is named."""
    h = PopHandle.parse("3 1000 5000 0 0 broker-a 1 4")
    assert (h.ck_queue_offset, h.queue_offset, h.revive_qid) == (3, 4, 0)
    assert PopHandle.parse("3 1000 5000 0 0 broker-a 1").queue_offset == 3
    for bad, field in (("1_0 1000 5000 0 0 b 1 4", "ck_queue_offset"), ("3 1000 + 0 0 b 1 4", "invisible_time"),
                       ("3 1000 5000 0 0  1 4", "broker_name"), ("3 x 5000 0 0 b 1 4", "pop_time")):
        with pytest.raises(ValueError, match=field):
            PopHandle.parse(bad)
    with pytest.raises(ValueError, match="7 or 8"):
        PopHandle.parse("3 1000 5000 0 0 b")


def test_refusal_remarks_are_the_releases_words():
    """A change of an offset outside the queue keeps RemotingCommand's "not set any response code" (5.3.3,
    measured); an unknown topic's remark suggests the release's FAQUrl.APPLY_TOPIC_URL."""
    for version, url in (("rocketmq-5.2", "https://rocketmq.apache.org/docs/bestPractice/06FAQ"),
                         ("rocketmq-5.5", "https://rocketmq.apache.org/docs/faq/")):
        _, broker = _broker(version)
        _send(broker, 1)
        handle = _pop(broker).messages[0].handle
        with pytest.raises(BrokerError) as far:
            broker.change_invisible_time(G, T, attrs.evolve(handle, queue_offset=9), 1000)
        assert (far.value.code, far.value.remark) == (ResponseCode.NO_MESSAGE, "not set any response code")
        with pytest.raises(BrokerError) as unknown:
            broker.pop(G, "Nope", -1, 1, 1000)
        assert unknown.value.remark == f"topic[Nope] not exist, apply first please! \nSee {url} for further details."


@pytest.mark.parametrize("version, code", [("rocketmq-4.9", ResponseCode.SYSTEM_ERROR),
                                           ("rocketmq-5.2", ResponseCode.INVALID_PARAMETER),
                                           ("rocketmq-5.5", ResponseCode.INVALID_PARAMETER)])
def test_a_queue_past_the_topics_is_refused_as_the_release_does(version, code):
    _, broker = _broker(version)
    with pytest.raises(BrokerError) as send:
        broker.send(Message(T, b"x"), 5)
    with pytest.raises(BrokerError) as pull:
        broker.pull(G, MessageQueue(T, 5), 0)
    assert send.value.code is code and pull.value.code is code and "queueId[5] is illegal" in pull.value.remark
