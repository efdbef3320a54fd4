"""Send modes and lost answers (issue 42): sync retries after a lost answer store the message again,
async sends retry the same request, oneway sends are never answered — against the real ModelBroker
and the mmap broker, through an injecting ``Link``."""

from __future__ import annotations

import pytest

from rmqspec.impl import factory as mmap_factory
from rmqspec.model.broker import ModelBroker
from rmqspec.model.clock import ManualClock
from rmqspec.model.config import default_config
from rmqspec.model.directory import Directory
from rmqspec.model.events import ListRecorder
from rmqspec.model.link import Link, RequestLost, ResponseLost
from rmqspec.model.message import Message, MessageQueue
from rmqspec.model.producer import Producer, SendFailed
from rmqspec.model.protocol import OnewayBroker
from rmqspec.model.results import BrokerError, ResponseCode
from rmqspec.traces.checker import check
from tests.model.test_producer import visible as stored


@pytest.fixture(params=["model", "mmap"])
def world(request, tmp_path):
    clock = ManualClock(1_700_000_000_000)
    recorder = ListRecorder()
    if request.param == "model":
        broker = ModelBroker(clock, recorder=recorder)
    else:
        broker = mmap_factory(clock, default_config(), str(tmp_path), recorder=recorder)
    directory = Directory()
    directory.create_topic(broker, "T", 4)
    yield clock, broker, directory, recorder
    broker.close()


def test_a_lost_answer_is_retried_on_the_next_queue_and_stored_twice(world):
    clock, broker, directory, recorder = world
    link = Link(broker)
    p = Producer(link, clock, directory, "P")
    link.lose_response("send", times=1)
    result = p.send(Message("T", b"x"))
    copies = stored(broker)
    assert [(m.queue_id, m.uniq_key) for m in copies] == [(0, result.uniq_key), (1, result.uniq_key)]
    assert link.responses_lost["send"] == 1 and link.lost["send"] == 0
    # the broker recorded both as it answered them; nobody lost or invented anything
    sends = [e for e in recorder.events if e.event == "send"]
    assert [(e.queue_id, e.status) for e in sends] == [(0, "SEND_OK"), (1, "SEND_OK")]


def test_a_selector_send_whose_answer_is_lost_fails_after_one_store(world):
    clock, broker, directory, _ = world
    link = Link(broker)
    p = Producer(link, clock, directory, "P")
    link.lose_response("send", times=1)
    with pytest.raises(ResponseLost):
        p.send(Message("T", b"x"), sharding_key="order-7")
    assert len(stored(broker)) == 1  # stored once, never retried: the producer does not know


def test_every_answer_lost_fails_after_three_stores(world):
    clock, broker, directory, _ = world
    link = Link(broker)
    p = Producer(link, clock, directory, "P")
    link.lose_response("send")
    with pytest.raises(SendFailed) as info:
        p.send(Message("T", b"x"))
    assert len(info.value.errors) == 3 and all(isinstance(e, ResponseLost) for e in info.value.errors)
    assert sorted(m.queue_id for m in stored(broker)) == [0, 1, 2]


def test_async_retries_the_same_queue_when_no_answer_comes(world):
    clock, broker, directory, _ = world
    link = Link(broker)
    p = Producer(link, clock, directory, "P")
    link.lose_response("send", times=1)
    link.fail("send", times=1)
    ok, failed = [], []
    p.send_async(Message("T", b"x"), ok.append, failed.append)
    assert not failed and len(ok) == 1
    # attempt 1 stored (answer lost), attempt 2 lost on the way, attempt 3 stored and answered
    assert [m.queue_id for m in stored(broker)] == [0, 0]
    assert p.next_round_robin("T") == 1  # the retries did not move the caller's round robin


def test_async_hands_a_refusal_to_the_callback_without_retrying(world):
    clock, broker, directory, _ = world
    p = Producer(broker, clock, directory, "P")
    ok, failed = [], []
    p.send_async(Message("T", b"x"), ok.append, failed.append, queue_id=9)
    assert not ok and isinstance(failed[0], BrokerError)
    assert stored(broker) == []


def test_async_gives_up_after_its_retries(world):
    clock, broker, directory, _ = world
    link = Link(broker)
    p = Producer(link, clock, directory, "P", retry_times_when_send_async_failed=1)
    link.fail("send")
    ok, failed = [], []
    p.send_async(Message("T", b"x"), ok.append, failed.append)
    assert not ok and isinstance(failed[0], SendFailed) and len(failed[0].errors) == 2
    with pytest.raises(ValueError, match="retry_times_when_send_async_failed"):
        Producer(link, clock, directory, "P", retry_times_when_send_async_failed=-1)


def test_oneway_is_stored_answered_by_nothing_and_recorded_unacknowledged(world):
    clock, broker, directory, recorder = world
    assert isinstance(broker, OnewayBroker)
    p = Producer(broker, clock, directory, "P")
    assert p.send_oneway(Message("T", b"x")) is None
    [copy] = stored(broker)
    [send] = [e for e in recorder.events if e.event == "send"]
    assert (send.status, send.detail, send.msg_key) == ("ONEWAY", {"send_mode": "ONEWAY"}, copy.uniq_key)
    # a refusal is silent too, and a loss on the way
    assert p.send_oneway(Message("T", b"y"), queue_id=9) is None
    link = Link(broker)
    link.fail("send_oneway", times=1)
    Producer(link, clock, directory, "P").send_oneway(Message("T", b"z"))
    assert link.lost["send_oneway"] == 1 and len(stored(broker)) == 1


def test_a_producer_that_records_its_own_events_names_each_mode(world):
    clock, broker, directory, _ = world
    mine = ListRecorder()
    link = Link(broker)
    p = Producer(link, clock, directory, "P", recorder=mine, broker_records_events=False)
    link.lose_response("send", times=1)
    p.send(Message("T", b"a"))
    p.send_async(Message("T", b"b"), lambda r: None, lambda e: None)
    p.send_oneway(Message("T", b"c"))
    rows = [(e.status, e.detail.get("send_mode")) for e in mine.events]
    assert rows == [("NO_RESPONSE", "SYNC"), ("SEND_OK", "SYNC"), ("SEND_OK", "ASYNC"), ("ONEWAY", "ONEWAY")]


def test_a_broker_without_oneway_sends_is_named(world):
    clock, _, directory, _ = world

    class Plain:
        def send(self, msg, queue_id):  # pragma: no cover - never reached
            raise AssertionError

    with pytest.raises(TypeError, match="Plain takes no oneway sends"):
        Producer(Plain(), clock, directory, "P").send_oneway(Message("T", b"x"), queue_id=0)


def test_link_refuses_to_lose_what_has_no_answer(world):
    _, broker, _, _ = world
    link = Link(broker)
    for bad, times in (("send_oneway", None), ("nope", None), ("send", 0)):
        with pytest.raises(ValueError):
            link.lose_response(bad, times)
    link.lose_response("query_offset")
    with pytest.raises(ResponseLost, match="response lost"):
        link.query_offset("G", MessageQueue("T", 0))
    link.heal()
    assert link.query_offset("G", MessageQueue("T", 0)) in (-1, 0)
    assert issubclass(RequestLost, ConnectionError) and issubclass(ResponseLost, ConnectionError)
    link.lose_response("send_back", times=1)
    with pytest.raises(ResponseLost):
        link.send_back("G", 0, 0, None, None)
    assert link.send_back("G", 10**9, 0, None, None) != ResponseCode.SUCCESS  # answered: no such copy


def test_the_audit_judges_oneway_and_unanswered_sends(world):
    """A client-side trace: a oneway send nobody consumed is not LOST and its delivery is no RECOVERED; a
    send whose every answer was lost, then delivered, is RECOVERED; one acknowledged after a lost answer
    and delivered twice is DUPLICATED, not LOST."""
    clock, broker, directory, _ = world
    mine = ListRecorder()
    link = Link(broker)
    p = Producer(link, clock, directory, "P", recorder=mine, broker_records_events=False)
    p.send_oneway(Message("T", b"one"), queue_id=0)
    link.lose_response("send")
    with pytest.raises(SendFailed):
        p.send(Message("T", b"two"))
    link.heal()
    link.lose_response("send", times=1)
    p.send(Message("T", b"three"))
    rows = [e.as_row() for e in mine.events]
    oneway_key, lost_key, dup_key = rows[0]["msg_key"], rows[1]["msg_key"], rows[-1]["msg_key"]
    seq = len(rows)
    for q in range(4):
        for m in broker.pull("G", MessageQueue("T", q), 0, 32).messages:
            for event in ("deliver", "consume"):
                rows.append({"seq": seq, "ts": clock.now(), "event": event, "group": "G", "topic": "T",
                             "queue_id": q, "queue_offset": m.queue_offset, "msg_key": m.uniq_key,
                             "status": "SUCCESS" if event == "consume" else None})
                seq += 1
    rows.append({"seq": seq, "ts": clock.now(), "event": "drain"})
    assert any(r["event"] == "consume" and r["msg_key"] == oneway_key for r in rows)
    report = check(rows)
    found = {(f.code, f.keys.get("msg_key")) for f in (*report.violations, *report.observations)}
    assert found == {("RECOVERED", lost_key), ("DUPLICATED", lost_key), ("DUPLICATED", dup_key)}
    # delivered, never consumed: only the acknowledged send is LOST
    drained = [r for r in rows if r["event"] != "consume"]
    lost = {f.keys.get("msg_key") for f in check(drained).violations if f.code == "LOST"}
    assert lost == {dup_key}
