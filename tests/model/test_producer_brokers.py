"""The producer across several brokers (issue 43): routes, lastBrokerName avoidance, latency fault tolerance.

Facts from the RocketMQ 4.9.8 client jar (javap): MQFaultStrategy, LatencyFaultToleranceImpl,
TopicPublishInfo, MQClientInstance.topicRouteData2TopicPublishInfo, DefaultMQProducerImpl.sendDefaultImpl.
The Hypothesis tests hold the producer to ``Reference`` (written here from the same facts, apart from the
model) and show that two broken producers are caught by ``properties/inv_route.py`` and by the comparison.
"""

from __future__ import annotations

import contextlib
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqspec.model.broker import ModelBroker
from rmqspec.model.clock import ManualClock
from rmqspec.model.config import BrokerConfig
from rmqspec.model.directory import Directory
from rmqspec.model.fault_strategy import (
    LATENCY_MAX,
    NOT_AVAILABLE_DURATION,
    FaultStrategy,
    FaultTable,
    iteration_bin,
    not_available_duration,
)
from rmqspec.model.ha import MASTER_ID, BrokerRole, HaConfig
from rmqspec.model.ha_pair import HaPair
from rmqspec.model.javahash import java_string_hash
from rmqspec.model.link import Link
from rmqspec.model.message import Message, MessageQueue
from rmqspec.model.producer import Producer, SendFailed
from rmqspec.model.results import BrokerError, ResponseCode, SendStatus
from rmqspec.model.routing import PERM_READ, Cluster, PublishInfo, QueueData, SendWhichQueue
from rmqspec.properties.codes import AuditParams
from rmqspec.properties.history import History
from rmqspec.properties.inv_route import (
    PRODUCER_FAULT_WINDOW,
    PRODUCER_RETRY_SAME_BROKER,
    ROUTE_INVARIANTS,
    check_fault_window,
    check_retry_other_broker,
)

T0 = 1_700_000_000_000


# -- the fault strategy's tables (MQFaultStrategy 4.9.8) -------------------------------------------

def test_the_tables_are_4_9_8s():
    assert LATENCY_MAX == (50, 100, 550, 1000, 2000, 3000, 15000)
    assert NOT_AVAILABLE_DURATION == (0, 0, 30000, 60000, 120000, 180000, 600000)
    expected = {0: 0, 49: 0, 50: 0, 100: 0, 549: 0, 550: 30000, 999: 30000, 1000: 60000, 1999: 60000,
                2000: 120000, 3000: 180000, 14999: 180000, 15000: 600000, 10**9: 600000}
    assert {lat: not_available_duration(lat) for lat in expected} == expected


def test_an_isolated_broker_is_out_for_600_s_not_30():
    s = FaultStrategy(enabled=True)
    s.update_fault_item("a", 3, True, T0)  # an attempt that threw: computeNotAvailableDuration(30000)
    assert not s.table.is_available("a", T0 + 599_999)
    assert s.table.is_available("a", T0 + 600_000)  # now - startTimestamp >= 0
    assert s.table.items["a"].latency == 3  # the latency kept is the attempt's own


def test_a_passed_strategy_is_not_changed_behind_the_callers_back():
    clock = ManualClock(T0)
    cluster, _ = _cluster(clock)
    with pytest.raises(ValueError, match="disabled fault_strategy"):
        _producer(clock, cluster, send_latency_fault_enable=True, fault_strategy=FaultStrategy())
    mine = FaultStrategy(enabled=True)
    assert _producer(clock, cluster, fault_strategy=mine).router.strategy is mine and mine.enabled


def test_a_disabled_strategy_keeps_no_table():
    s = FaultStrategy()
    s.update_fault_item("a", 20_000, True, T0)
    assert s.table.items == {}


def test_an_answered_attempt_sets_the_window_from_its_latency():
    s = FaultStrategy(enabled=True)
    s.update_fault_item("a", 600, False, T0)
    assert s.table.items["a"].start == T0 + 30_000
    s.update_fault_item("a", 40, False, T0 + 1)  # fast again: available at once
    assert s.table.is_available("a", T0 + 1)


def test_pick_one_at_least_takes_the_better_half_in_turn():
    t = FaultTable()
    assert t.pick_one_at_least(T0) is None
    t.update("a", 700, 30_000, T0)
    assert t.pick_one_at_least(T0) == "a"  # fewer than two items: the first
    t.update("b", 100, 30_000, T0)
    assert [t.pick_one_at_least(T0) for _ in range(3)] == ["b", "b", "b"]  # half 1: the best
    t.update("c", 200, 30_000, T0)
    t.update("d", 50, 0, T0)  # available: ranked first whatever its latency
    t.which_item_worst = 0
    assert [t.pick_one_at_least(T0) for _ in range(4)] == ["d", "b", "d", "b"]


def test_pick_one_at_least_breaks_ties_by_the_hash_maps_iteration_order():
    names = ["broker-a", "broker-b", "broker-c", "broker-d"]
    t = FaultTable()
    for name in names:
        t.update(name, 100, 1000, T0)  # all equal: Collections.sort keeps the iteration order
    order = sorted(names, key=lambda n: (((java_string_hash(n) & 0xFFFFFFFF) ^ ((java_string_hash(n) & 0xFFFFFFFF)
                                                                                >> 16)) & 31))
    assert [it.name for it in t.iteration_order()] == order
    assert [t.pick_one_at_least(T0) for _ in range(2)] == order[:2]
    assert all(0 <= iteration_bin(n) < 32 for n in names)


# -- the publish info and its selection (TopicPublishInfo 4.9.8) -----------------------------------

def test_the_queue_list_is_sorted_by_broker_and_skips_unwritable_and_masterless_brokers():
    route = [QueueData("broker-c", 2, 2), QueueData("broker-a", 1, 1), QueueData("broker-b", 3, 3, perm=PERM_READ),
             QueueData("broker-z", 2, 2)]
    info = PublishInfo.from_route("T", route, ["broker-a", "broker-b", "broker-c"], SendWhichQueue())
    assert info.queues == (MessageQueue("T", 0, "broker-a"), MessageQueue("T", 0, "broker-c"),
                           MessageQueue("T", 1, "broker-c"))
    assert info.brokers == ("broker-a", "broker-c")
    assert [info.write_queue_nums(n) for n in ("broker-a", "broker-b", "broker-c", None)] == [1, -1, 2, -1]


def test_a_retry_avoids_the_last_broker_bumping_the_index_per_queue_tried():
    route = [QueueData("a", 3, 3), QueueData("b", 1, 1)]
    info = PublishInfo.from_route("T", route, ["a", "b"], SendWhichQueue(0))
    assert info.select_avoiding("a") == MessageQueue("T", 0, "b")  # a0, a1, a2 skipped
    assert info.send_which_queue.value == 4
    only = PublishInfo.from_route("T", [QueueData("a", 2, 2)], ["a"], SendWhichQueue(0))
    assert only.select_avoiding("a") == MessageQueue("T", 0, "a")  # 2 bumps, then selectOneMessageQueue()
    assert only.send_which_queue.value == 3


def test_the_fault_path_takes_the_first_available_broker_from_the_index():
    info = PublishInfo.from_route("T", [QueueData("a", 2, 2), QueueData("b", 2, 2)], ["a", "b"], SendWhichQueue(0))
    s = FaultStrategy(enabled=True)
    s.update_fault_item("a", 0, True, T0)
    assert s.select(info, None, T0) == MessageQueue("T", 0, "b")  # a0, a1 out; the shared index bumped once
    assert info.send_which_queue.value == 1
    assert s.select(info, "b", T0) == MessageQueue("T", 0, "b")  # lastBrokerName is ignored when enabled


def test_no_broker_available_picks_one_at_least_with_its_own_queue_id():
    info = PublishInfo.from_route("T", [QueueData("a", 2, 2), QueueData("b", 3, 3)], ["a", "b"], SendWhichQueue(5))
    s = FaultStrategy(enabled=True)
    s.update_fault_item("a", 0, True, T0)
    s.update_fault_item("b", 2500, False, T0)  # out for 120 s; a (latency 0, isolated) ranks first
    mq = s.select(info, None, T0 + 1)
    # the loop bumps once (5), select_one once (6); the queue id is the next bump (7) % a's 2 write queues
    assert mq == MessageQueue("T", 7 % 2, "a") and info.send_which_queue.value == 8


def test_a_picked_broker_without_write_queues_is_removed_from_the_table():
    info = PublishInfo.from_route("T", [QueueData("a", 2, 2)], ["a"], SendWhichQueue(0))
    s = FaultStrategy(enabled=True)
    s.update_fault_item("a", 0, True, T0)
    s.update_fault_item("gone", 0, True, T0 - 10**6)  # available, lowest: picked, but not in the route
    assert s.select(info, None, T0) == MessageQueue("T", 1, "a")
    assert "gone" not in s.table.items


# -- the producer across a cluster ---------------------------------------------------------------

def _cluster(clock, names=("broker-a", "broker-b"), nums: Any = 2):
    links = {n: Link(ModelBroker(clock)) for n in names}
    cluster = Cluster(links)
    cluster.create_topic("T", nums)
    return cluster, links


def _producer(clock, cluster, history=None, **kw):
    return Producer(None, clock, Directory(), "P", cluster=cluster, broker_records_events=False,
                    recorder=history if history is not None else History(params=AuditParams()), **kw)


def test_a_retry_goes_to_another_broker_and_the_row_says_where():
    clock = ManualClock(T0)
    cluster, links = _cluster(clock)
    h = History(params=AuditParams())
    p = _producer(clock, cluster, h)
    links["broker-a"].fail("send", times=1)
    p.send(Message("T", b"x"))
    [row] = h.of("send")
    assert row.detail["broker"] == "broker-b" and row.queue_id == 0
    assert [(t["broker"], t["queue_id"], t["error"]) for t in row.detail["tries"]] == [
        ("broker-a", 0, "RequestLost"), ("broker-b", 0, None)]
    assert check_retry_other_broker(h) == [] and check_fault_window(h) == []


def test_a_lost_answer_is_a_no_response_row_naming_its_broker():
    clock = ManualClock(T0)
    cluster, links = _cluster(clock)
    h = History(params=AuditParams())
    p = _producer(clock, cluster, h)
    links["broker-a"].lose_response("send", times=1)
    p.send(Message("T", b"x"))
    assert [(e.status, e.detail["broker"]) for e in h.of("send")] == [("NO_RESPONSE", "broker-a"),
                                                                      ("SEND_OK", "broker-b")]


def test_a_slow_broker_is_avoided_for_its_window_then_used_again():
    clock = ManualClock(T0)
    cluster, _ = _cluster(clock, nums={"broker-a": 1, "broker-b": 1})
    cluster.set_latency("broker-a", 600)  # ≥ 550 ms: 30 s out
    h = History(params=AuditParams())
    p = _producer(clock, cluster, h, send_latency_fault_enable=True)
    p.send(Message("T", b"1"))
    cluster.set_latency("broker-a", 0)
    brokers = [p.send(Message("T", b"%d" % i)) and p.last_broker for i in range(3)]
    assert brokers == ["broker-b"] * 3
    clock.advance(30_000)
    assert [p.send(Message("T", b"x")) and p.last_broker for _ in range(2)] == ["broker-a", "broker-b"]
    assert check_fault_window(h) == []


def test_the_send_timeout_stops_the_retries():
    clock = ManualClock(T0)
    cluster, links = _cluster(clock)
    cluster.set_latency("broker-a", 3001)
    links["broker-a"].fail("send", times=1)
    p = _producer(clock, cluster)
    with pytest.raises(SendFailed):
        p.send(Message("T", b"x"))  # 3001 ms spent: "sendDefaultImpl call timeout" before attempt 2
    assert p.router is not None and len(p.router.pending) == 1


def test_a_refused_attempt_isolates_its_broker_and_a_retryable_code_is_retried():
    clock = ManualClock(T0)
    cluster, _ = _cluster(clock)
    cluster.create_topic("U", {"broker-b": 2})
    cluster.routes["U"] += (QueueData("broker-a", 2, 2),)  # the route names a broker without the topic
    h = History(params=AuditParams())
    p = _producer(clock, cluster, h, send_latency_fault_enable=True)
    p.send(Message("U", b"x"))
    [row] = h.of("send")
    assert [(t["broker"], t["error"]) for t in row.detail["tries"]] == [
        ("broker-a", f"BrokerError:{ResponseCode.TOPIC_NOT_EXIST.name}"), ("broker-b", None)]
    assert p.router is not None and not p.router.strategy.table.is_available("broker-a", clock.now() + 599_999)


def test_one_broker_keeps_its_api_and_rows_unchanged():
    clock = ManualClock(T0)
    broker = ModelBroker(clock)
    d = Directory()
    d.create_topic(broker, "T", 2)
    h = History(params=AuditParams())
    p = Producer(broker, clock, d, "P", broker_records_events=False, recorder=h)
    p.send(Message("T", b"x"))
    assert "broker" not in h.of("send")[0].detail and p.router is None


def test_routed_sends_to_a_chosen_queue_are_refused():
    clock = ManualClock(T0)
    cluster, _ = _cluster(clock)
    p = _producer(clock, cluster)
    with pytest.raises(TypeError):
        p.send_oneway(Message("T", b"x"), queue_id=0)
    with pytest.raises(TypeError):
        p.send_async(Message("T", b"x"), lambda r: None, lambda e: None, sharding_key="k")
    with pytest.raises(TypeError):
        p.send(Message("T", b"x"), queue_id=0)


# -- async and oneway across brokers (MB-7) ---------------------------------------------------------------

def _async(p, msg):
    got: list[Any] = []
    p.send_async(msg, got.append, got.append)
    [outcome] = got
    return outcome


def test_an_async_retry_resends_the_same_queue_id_to_the_broker_the_strategy_names():
    clock = ManualClock(T0)
    cluster, links = _cluster(clock, nums={"broker-a": 3, "broker-b": 3})
    h = History(params=AuditParams())
    p = _producer(clock, cluster, h, start_index=2)  # the first pick: queue 2 of broker-a
    links["broker-a"].fail("send", times=1)
    got = _async(p, Message("T", b"x"))
    assert got.status is SendStatus.SEND_OK and p.last_broker == "broker-b"
    [row] = h.of("send")
    assert row.detail["send_mode"] == "ASYNC" and row.queue_id == 2 and row.detail["attempts"] == 2
    assert [(t["broker"], t["queue_id"], t["error"]) for t in row.detail["tries"]] == [
        ("broker-a", 2, "RequestLost"), ("broker-b", 2, None)]
    assert violations(h) == []


def test_the_kept_queue_id_is_refused_by_a_broker_with_fewer_queues():
    clock = ManualClock(T0)
    cluster, links = _cluster(clock, nums={"broker-a": 3, "broker-b": 1})
    p = _producer(clock, cluster, start_index=2)
    links["broker-a"].fail("send", times=1)
    got = _async(p, Message("T", b"x"))  # queue 2 of broker-a lost; broker-b has no queue 2: no retry after it
    assert isinstance(got, BrokerError) and "queueId[2] is illegal" in str(got)
    assert p.router is not None and [(t.broker, t.queue_id) for t in p.router.pending] == [
        ("broker-a", 2), ("broker-b", 2)]


def test_an_async_refusal_is_not_retried_and_a_lost_request_is_retried_twice():
    clock = ManualClock(T0)
    cluster, links = _cluster(clock)
    p = _producer(clock, cluster)
    links["broker-a"].fail("send")
    links["broker-b"].fail("send")
    got = _async(p, Message("T", b"x"))
    assert isinstance(got, SendFailed) and len(got.errors) == 3  # retryTimesWhenSendAsyncFailed 2: three attempts
    assert p.router is not None and [t.broker for t in p.router.pending] == ["broker-a", "broker-b", "broker-a"]


def test_a_routed_oneway_is_one_attempt_and_its_try_rides_on_the_next_answer():
    clock = ManualClock(T0)
    cluster, links = _cluster(clock)
    h = History(params=AuditParams())
    p = _producer(clock, cluster, h)
    links["broker-a"].fail("send_oneway", times=1)
    p.send_oneway(Message("T", b"lost"))  # written, lost beyond the connection: the client never knows
    p.send(Message("T", b"x"))
    oneway, acked = h.of("send")
    assert (oneway.status, oneway.detail["broker"], "tries" in oneway.detail) == ("ONEWAY", "broker-a", False)
    assert [(t["broker"], t["queue_id"], t["attempt"], t["error"]) for t in acked.detail["tries"]] == [
        ("broker-a", 0, 1, None), ("broker-a", 1, 1, None)]  # one attempt each, the index moving on
    assert [m.body for m in cluster.brokers["broker-a"].broker.store.records] == [b"x"]  # the oneway: not stored
    assert violations(h) == []


def test_a_sharding_key_picks_among_every_brokers_queues_once():
    clock = ManualClock(T0)
    cluster, _ = _cluster(clock, nums={"broker-a": 2, "broker-b": 3})
    h = History(params=AuditParams())
    p = _producer(clock, cluster, h, selector=lambda key, n: n - 1)
    p.send(Message("T", b"x"), sharding_key="k")
    [row] = h.of("send")
    assert (row.detail["broker"], row.queue_id, row.detail["route_queues"]) == ("broker-b", 2, 5)


# -- an independent reference and Hypothesis ---------------------------------------------------

NAMES = ("broker-a", "broker-b", "broker-c")


@attrs.frozen
class Scenario:
    nums: tuple[tuple[str, int, bool], ...]  # broker, write queues, writable
    start_index: int
    fault: bool
    retry_times: int
    steps: tuple[tuple[Any, ...], ...]


@st.composite
def scenarios(draw, fault: bool | None = None) -> Scenario:
    k = draw(st.integers(2, 3))
    nums = tuple((n, draw(st.integers(1, 3)), i == 0 or draw(st.integers(0, 3)) > 0) for i, n in enumerate(NAMES[:k]))
    fail = st.tuples(st.just("fail"), st.sampled_from((*NAMES[:k], "*")), st.integers(1, 3))  # "*": every broker
    step = st.one_of(
        fail,
        st.just(("send",)),
        st.just(("send",)),
        fail,
        st.tuples(st.just("latency"), st.sampled_from(NAMES[:k]), st.sampled_from([0, 40, 120, 600, 1200, 2500, 3500])),
        st.tuples(st.just("advance"), st.sampled_from([0, 1000, 30_000, 60_000, 600_000])),
    )
    return Scenario(nums, draw(st.integers(0, 20)), draw(st.booleans()) if fault is None else fault,
                    draw(st.sampled_from((2, 3, 1, 0))), tuple(draw(st.lists(step, min_size=3, max_size=14))))


class Reference:
    """sendDefaultImpl over the scenario, from the 4.9.8 facts, apart from the model: what each attempt is."""

    def __init__(self, sc: Scenario) -> None:
        self.sc = sc
        self.queues = [(n, i) for n, q, w in sorted(sc.nums) if w for i in range(q)]
        self.write = {n: q for n, q, w in sc.nums if w}
        self.index = sc.start_index
        self.worst = 0
        self.table: dict[str, list[int]] = {}  # broker → [latency, available from, insertion]
        self.inserted = 0
        self.fails: dict[str, int] = {}
        self.latency: dict[str, int] = {}
        self.now = T0

    def bump(self) -> int:
        self.index += 1
        return self.index - 1

    def up(self, broker: str) -> bool:
        return broker not in self.table or self.now >= self.table[broker][1]

    def least(self) -> str | None:
        def hbin(name: str) -> int:
            h = java_string_hash(name) & 0xFFFFFFFF
            return (h ^ (h >> 16)) & 31
        items = sorted(self.table, key=lambda b: (hbin(b), self.table[b][2]))
        items.sort(key=lambda b: (not self.up(b), self.table[b][0], self.table[b][1]))
        if len(items) < 2:
            return items[0] if items else None
        self.worst += 1
        return items[(self.worst - 1) % (len(items) // 2)]

    def pick(self, last: str | None) -> tuple[str, int]:
        n = len(self.queues)
        if not self.sc.fault:
            if last is not None:
                for _ in range(n):
                    q = self.queues[self.bump() % n]
                    if q[0] != last:
                        return q
            return self.queues[self.bump() % n]
        start = self.bump()
        for i in range(n):
            if self.up(self.queues[(start + i) % n][0]):
                return self.queues[(start + i) % n]
        other = self.least()
        if other in self.write:
            self.bump()
            return other, self.bump() % self.write[other]
        self.table.pop(other, None)  # type: ignore[arg-type]
        return self.queues[self.bump() % n]

    def send(self) -> list[tuple[str, int, bool]]:
        out: list[tuple[str, int, bool]] = []
        first, last = self.now, None
        for _ in range(self.sc.retry_times + 1):
            broker, qid = self.pick(last)
            last = broker
            if self.now - first > 3000:
                break
            failed = self.fails.get(broker, 0) > 0
            if failed:
                self.fails[broker] -= 1
            lat = self.latency.get(broker, 0)
            self.now += lat
            out.append((broker, qid, failed))
            if self.sc.fault:
                if broker not in self.table:
                    self.inserted += 1
                    self.table[broker] = [0, 0, self.inserted]
                self.table[broker][:2] = [lat, self.now + not_available_duration(30000 if failed else lat)]
            if not failed:
                break
        return out

    def run(self) -> list[tuple[str, int, bool]]:
        out: list[tuple[str, int, bool]] = []
        for step in self.sc.steps:
            if step[0] == "send":
                out.extend(self.send())
            elif step[0] == "fail":
                for n, _, _ in self.sc.nums:
                    if step[1] in (n, "*"):
                        self.fails[n] = step[2]
            elif step[0] == "latency":
                self.latency[step[1]] = step[2]
            else:
                self.now += step[1]
        return out


Attempts = list[tuple[str, int, bool]]  # (broker, queue id, failed) per sendDefaultImpl attempt


def run_model(sc: Scenario, strategy: type[FaultStrategy] = FaultStrategy) -> tuple[History, Attempts]:
    clock = ManualClock(T0)
    links = {n: Link(ModelBroker(clock)) for n, _, _ in sc.nums}
    cluster = Cluster(links)
    cluster.create_topic("T", {n: q for n, q, _ in sc.nums})
    for n, _, w in sc.nums:
        if not w:
            cluster.set_perm("T", n, PERM_READ)
    h = History(params=AuditParams())
    p = Producer(None, clock, Directory(), "P", cluster=cluster, broker_records_events=False, recorder=h,
                 retry_times_when_send_failed=sc.retry_times, start_index=sc.start_index,
                 fault_strategy=strategy(enabled=sc.fault))
    for step in sc.steps:
        if step[0] == "send":
            with contextlib.suppress(SendFailed, BrokerError):
                p.send(Message("T", b"m"))
        elif step[0] == "fail":
            for n, link in links.items():
                if step[1] in (n, "*"):
                    link.fail("send", times=step[2])
        elif step[0] == "latency":
            cluster.set_latency(step[1], step[2])
        else:
            clock.advance(step[1])
    assert p.router is not None
    tries = [t for e in h.of("send") for t in e.detail.get("tries", [])] + [t.as_detail() for t in p.router.pending]
    return h, [(t["broker"], t["queue_id"], t["error"] is not None) for t in tries]


def violations(h: History) -> list[Any]:
    return [v for inv in ROUTE_INVARIANTS for v in inv.check(h)]


@given(scenarios())
def test_the_producer_routes_as_the_reference_and_breaks_no_rule(sc):
    h, tries = run_model(sc)
    assert tries == Reference(sc).run()
    assert violations(h) == []


@given(scenarios(fault=True))
def test_with_the_fault_strategy_the_producer_routes_as_the_reference(sc):
    h, tries = run_model(sc)
    assert tries == Reference(sc).run()
    assert violations(h) == []


class SameBrokerRetry(FaultStrategy):
    """Broken: a retry stays on the failed broker (its next queue) — "does not avoid a failed broker"."""

    def select(self, info: PublishInfo, last_broker: str | None, now: int) -> MessageQueue:
        mine = [mq for mq in info.queues if mq.broker_name == last_broker]
        if not mine:
            return super().select(info, last_broker, now)
        return mine[info.send_which_queue.increment_and_get() % len(mine)]


class IgnoresFaultTable(FaultStrategy):
    """Broken: keeps the fault table but selects as if it were disabled."""

    def select(self, info: PublishInfo, last_broker: str | None, now: int) -> MessageQueue:
        return info.select_avoiding(last_broker)


def _examples_until_caught(broken: type[FaultStrategy], fault: bool, judge) -> int:
    """How many examples the current profile's budget takes to find a scenario ``judge`` flags."""
    seen: list[int] = []
    first: list[int] = []

    @settings(database=None)
    @given(scenarios(fault=fault))
    def search(sc):
        seen.append(1)
        caught = judge(sc, broken)
        if caught and not first:
            first.append(len(seen))
        assert not caught, "caught"

    with pytest.raises(AssertionError, match="caught"):
        search()
    return first[0]


def _by_invariant(code: str):
    return lambda sc, broken: any(v.code == code for v in violations(run_model(sc, broken)[0]))


def _by_comparison(sc, broken) -> bool:
    return run_model(sc, broken)[1] != run_model(sc)[1]


@pytest.mark.parametrize(("broken", "fault", "code"), [
    (SameBrokerRetry, False, PRODUCER_RETRY_SAME_BROKER),
    (IgnoresFaultTable, True, PRODUCER_FAULT_WINDOW),
])
def test_a_producer_that_does_not_avoid_a_failed_broker_is_caught(broken, fault, code):
    assert _examples_until_caught(broken, fault, _by_invariant(code)) <= settings().max_examples
    assert _examples_until_caught(broken, fault, _by_comparison) <= settings().max_examples


def test_a_row_without_tries_is_not_judged():
    clock = ManualClock(T0)
    cluster, links = _cluster(clock)
    h = History(params=AuditParams())
    p = _producer(clock, cluster, h)
    links["broker-a"].fail("send", times=1)
    p.send(Message("T", b"x"))
    row = h.of("send")[0]
    bad = attrs.evolve(row, detail={**row.detail, "tries": [{**t, "broker": "broker-a"} for t in row.detail["tries"]]})
    h.events[0] = bad
    assert [v.code for v in check_retry_other_broker(h)] == [PRODUCER_RETRY_SAME_BROKER]
    h.events[0] = attrs.evolve(row, detail={k: v for k, v in bad.detail.items() if k != "tries"})
    assert check_retry_other_broker(h) == [] and check_fault_window(h) == []


def test_with_every_broker_out_the_client_may_send_into_a_window():
    clock = ManualClock(T0)
    cluster, links = _cluster(clock, nums=1)
    for link in links.values():
        link.fail("send", times=1)
    h = History(params=AuditParams())
    p = _producer(clock, cluster, h, send_latency_fault_enable=True)
    p.send(Message("T", b"x"))
    [row] = h.of("send")
    # a, then b (a is out), both isolated; the third attempt is pickOneAtLeast's: a broker in its window,
    # of two equal items the first the hash map enumerates (broker-b's bin comes before broker-a's)
    assert iteration_bin("broker-b") < iteration_bin("broker-a")
    assert [(t["broker"], t["error"]) for t in row.detail["tries"]] == [
        ("broker-a", "RequestLost"), ("broker-b", "RequestLost"), ("broker-b", None)]
    assert check_fault_window(h) == []  # 4.9.8 permits it: no broker of the route was available
    h.events[0] = attrs.evolve(row, detail={**row.detail, "tries": row.detail["tries"][1:]})
    assert check_fault_window(h) == []  # the first attempt missing: nothing judged (n starts at 2)


# -- retryAnotherBrokerWhenNotStoreOK (MB-8): SYNC_MASTER pairs whose HA link is cut ----------------------

def _pairs(clock, cut=("broker-a",)):
    """Two SYNC_MASTER pairs sharing the producer's clock; the named ones with their HA link cut."""
    pairs = {n: HaPair(HaConfig(broker_role=BrokerRole.SYNC_MASTER), BrokerConfig(broker_name=n), clock=clock)
             for n in ("broker-a", "broker-b")}
    cluster = Cluster(pairs)
    cluster.create_topic("T", 1)
    for n in cut:
        pairs[n].cut()
    return cluster, pairs


def _stored(pair: HaPair, key: str) -> bool:
    got = pair.pull(MASTER_ID, "g", MessageQueue("T", 0, pair.config.broker_name), 0)
    return key in [m.uniq_key for m in got.result.messages]


def test_by_default_a_flush_slave_timeout_is_the_sends_answer():
    clock = ManualClock(T0)
    cluster, _ = _pairs(clock)
    h = History(params=AuditParams())
    p = _producer(clock, cluster, h)
    got = p.send(Message("T", b"x"))
    assert got.status is SendStatus.FLUSH_SLAVE_TIMEOUT and p.last_broker == "broker-a"
    [row] = h.of("send")
    assert [(t["broker"], t["latency"], "status" in t) for t in row.detail["tries"]] == [("broker-a", 3000, False)]


def test_retry_another_broker_stores_the_message_twice_and_the_rows_say_why():
    clock = ManualClock(T0)
    cluster, pairs = _pairs(clock)
    h = History(params=AuditParams())
    p = _producer(clock, cluster, h, retry_another_broker_when_not_store_ok=True)
    msg = Message("T", b"x")
    got = p.send(msg)
    assert got.status is SendStatus.SEND_OK and p.last_broker == "broker-b"
    rows = h.of("send")
    assert [(e.status, e.detail["broker"]) for e in rows] == [("FLUSH_SLAVE_TIMEOUT", "broker-a"),
                                                             ("SEND_OK", "broker-b")]
    assert rows[0].msg_key == rows[1].msg_key
    assert [(t["broker"], t["error"], t.get("status"), t["latency"]) for t in rows[1].detail["tries"]] == [
        ("broker-a", None, "FLUSH_SLAVE_TIMEOUT", 3000), ("broker-b", None, None, 0)]
    assert all(_stored(pairs[n], rows[0].msg_key) for n in pairs)  # stored on both masters, by design
    assert violations(h) == []


def test_when_no_attempt_is_send_ok_the_last_answer_is_returned_even_past_the_timeout():
    clock = ManualClock(T0)
    cluster, _ = _pairs(clock, cut=("broker-a", "broker-b"))
    h = History(params=AuditParams())
    p = _producer(clock, cluster, h, retry_another_broker_when_not_store_ok=True)
    got = p.send(Message("T", b"x"))
    # attempt 1 waits 3000 ms (not past sendMsgTimeout: 3000 < 3000 is false), attempt 2 another 3000: the
    # third stops on the timeout, and the send returns attempt 2's answer instead of throwing
    assert got.status is SendStatus.FLUSH_SLAVE_TIMEOUT and p.last_broker == "broker-b"
    assert [(e.status, e.detail["broker"]) for e in h.of("send")] == [("FLUSH_SLAVE_TIMEOUT", "broker-a"),
                                                                      ("FLUSH_SLAVE_TIMEOUT", "broker-b")]
    assert p.router is not None and p.router.pending == []


def test_a_refusal_not_retried_after_a_retried_answer_returns_that_answer():
    clock = ManualClock(T0)
    cluster, pairs = _pairs(clock)
    pairs["broker-b"].master.hold_put_lock(10_000)  # busy once held past osPageCacheBusyTimeout: SYSTEM_BUSY
    h = History(params=AuditParams())
    p = _producer(clock, cluster, h, retry_another_broker_when_not_store_ok=True)
    got = p.send(Message("T", b"x"))  # broker-a waits 3000 ms for its slave; broker-b then refuses, not retried
    assert got.status is SendStatus.FLUSH_SLAVE_TIMEOUT and p.last_broker == "broker-a"
    [row] = h.of("send")  # one stored copy, one row
    assert [(t["broker"], t["error"], t.get("status")) for t in row.detail["tries"]] == [
        ("broker-a", None, "FLUSH_SLAVE_TIMEOUT"), ("broker-b", "BrokerError:SYSTEM_BUSY", None)]
    with pytest.raises(BrokerError) as refused:  # the same refusal with nothing to fall back on is thrown
        _producer(clock, cluster, start_index=1).send(Message("T", b"y"))
    assert refused.value.code is ResponseCode.SYSTEM_BUSY
