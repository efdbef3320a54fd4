"""A reference push consumer subscribed with ``MessageSelector.by_sql`` (seed E3), on ModelBroker and on the
mmap broker (``enablePropertyFilter=true``): it consumes exactly the messages its expression selects (user
properties, TAGS as a property, SQL's NULL rules), its pulls and heartbeat carry the expression with type
SQL92 and its subVersion, nothing is filtered client-side, and its %RETRY% subscription stays ``*`` by TAG.
Broken clients (filtering SQL92 by tags client-side, sending the expression as TAG, dropping the
selector) are caught. The 4.9.8 facts: ``model/subscription_data.py``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from rmqspec.impl import factory as mmap_factory
from rmqspec.model.broker import ModelBroker
from rmqspec.model.client_timers import Driver
from rmqspec.model.clock import ManualClock
from rmqspec.model.config import BrokerConfig
from rmqspec.model.consumer import ConsumeFromWhere, ConsumerConfig
from rmqspec.model.consumer_concurrent import ConcurrentConsumer, ConsumeConcurrentlyStatus
from rmqspec.model.directory import Directory
from rmqspec.model.events import ListRecorder
from rmqspec.model.filterapi import build_subscription
from rmqspec.model.message import Message, MessageQueue, StoredMessage
from rmqspec.model.producer import Producer
from rmqspec.model.pullfilter import subscription_matches
from rmqspec.model.subscription_data import MessageSelector, Subscription, SubscriptionBuildError
from rmqspec.traces.checker import check

T0 = 1_700_000_000_000
OK = ConsumeConcurrentlyStatus.CONSUME_SUCCESS
LATER = ConsumeConcurrentlyStatus.RECONSUME_LATER

# (tags, user properties) of the messages sent, in order (bodies are b"m<i>")
MESSAGES: tuple[tuple[str | None, dict[str, str]], ...] = (
    ("A", {"region": "HZ", "price": "10"}),
    ("A", {"region": "BJ"}),
    ("B", {"region": "HZ"}),
    ("A", {}),
    (None, {"region": "SH"}),
    ("A", {"region": "SH", "price": "5"}),
)

# an expression and the messages (indexes) it selects, written out by hand
SELECTED = {
    "TAGS = 'A' AND region IN ('HZ', 'SH')": {0, 5},
    "price > 6": {0},  # no price: NULL, not selected
    "region IS NULL": {3},
    "TAGS IS NULL OR region = 'BJ'": {1, 4},
    "TAGS IN ('A', 'B') AND NOT (region = 'HZ')": {1, 5},  # region NULL: NOT NULL is NULL
}


@attrs.define
class World:
    clock: ManualClock
    broker: Any
    directory: Directory
    driver: Driver
    producer: Producer
    recorder: ListRecorder
    consumed: dict[str, list[StoredMessage]] = attrs.field(factory=dict)

    def consumer(self, cid: str, group: str = "G", fail: frozenset[bytes] = frozenset()) -> ConcurrentConsumer:
        self.directory.create_group(self.broker, group)
        seen = self.consumed.setdefault(cid, [])

        def listener(msgs: list[StoredMessage], ctx: Any) -> ConsumeConcurrentlyStatus:
            seen.extend(msgs)
            return LATER if any(m.body in fail and m.reconsume_times == 0 for m in msgs) else OK

        c = ConcurrentConsumer(self.broker, self.clock, self.directory, group, cid, listener, recorder=self.recorder,
                               config=ConsumerConfig(consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                                                     long_polling_recheck_ms=100))
        self.driver.add(c)
        return c

    def send_all(self) -> None:
        for i, (tags, props) in enumerate(MESSAGES):
            self.producer.send(Message("T", f"m{i}".encode(), tags=tags, properties=props))

    def bodies(self, cid: str) -> set[int]:
        return {int(m.body[1:]) for m in self.consumed.get(cid, [])}

    def rows(self) -> list[dict]:
        self.recorder.emit("drain", self.clock.now(), actor="test")
        return [e.as_row() for e in self.recorder.events]


@pytest.fixture(params=["model", "mmap"])
def world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[World]:
    yield from _world(request.param, tmp_path, BrokerConfig(enable_property_filter=True))


def _world(kind: str, tmp_path: Path, config: BrokerConfig) -> Iterator[World]:
    clock = ManualClock(T0)
    broker = ModelBroker(clock, config) if kind == "model" else mmap_factory(clock, config, str(tmp_path / "mmap"))
    directory = Directory()
    directory.create_topic(broker, "T", 2)
    recorder = ListRecorder()
    producer = Producer(broker, clock, directory, "P", recorder=recorder, broker_records_events=False)
    yield World(clock, broker, directory, Driver(clock, broker, [producer], max_step_ms=100), producer, recorder)
    broker.close()


def _matching(expression: str) -> set[int]:
    return {i for i, (tags, props) in enumerate(MESSAGES) if subscription_matches(expression, "SQL92", tags, props)}


# ---------------------------------------------------------------------------
# what the client builds (FilterAPI.build, MessageSelector)


def test_a_sql92_selector_is_kept_as_given_with_an_empty_tags_set() -> None:
    sub = Subscription.build("T", MessageSelector.by_sql(" a > 1 || b "), 42)
    assert (sub.expression, sub.tags, sub.expression_type) == (" a > 1 || b ", frozenset(), "SQL92")
    assert not sub.tag_type and sub.heartbeat_entry() == (" a > 1 || b ", "SQL92", 42)


def test_by_tag_and_a_null_selector_are_the_tag_subscribe() -> None:
    assert Subscription.build("T", MessageSelector.by_tag("A || B "), 7) == Subscription.parse("T", "A || B ", 7)
    assert Subscription.build("T", None, 7) == Subscription.parse("T", "*", 7)
    assert Subscription.build("T", MessageSelector.by_tag(None), 7).expression == "*"


@pytest.mark.parametrize("expression", [None, ""])
def test_a_sql92_selector_without_an_expression_is_refused(expression: str | None) -> None:
    with pytest.raises(SubscriptionBuildError, match="Expression can't be null!SQL92"):
        Subscription.build("T", MessageSelector.by_sql(expression))


def test_the_expression_table_is_what_the_sql92_evaluator_says() -> None:
    assert {e: _matching(e) for e in SELECTED} == SELECTED


# ---------------------------------------------------------------------------
# consuming on both brokers


def test_sql92_consumers_receive_exactly_what_their_expression_selects(world: World) -> None:
    for n, expression in enumerate(SELECTED):
        world.consumer(f"c{n}", group=f"G{n}").subscribe("T", MessageSelector.by_sql(expression))
    for c in world.driver.participants[1:]:
        c.start()
    world.driver.run_for(1_000)
    world.send_all()
    world.driver.run_for(10_000)
    assert {e: world.bodies(f"c{n}") for n, e in enumerate(SELECTED)} == SELECTED
    report = check(world.rows())
    # no LOST, FILTER_MISMATCH or FILTER_SKIPPED: the brokers' deliver rows name only the group, and FILTER_SKIPPED
    # counts the client's SUCCESS consume as its delivery (traces/checks_filter.py)
    assert (report.violations, report.observations) == ((), ())


def test_a_tag_filtering_client_states_its_subscription_and_its_run_audits_clean(world: World) -> None:
    """A TAG subscription other than ``*`` is stated on the client's consume rows too: the messages it filtered
    out are no LOST (the audit's filter exemption), those it consumed no FILTER_SKIPPED. Without the statement
    the same rows lose exactly the filtered-out messages."""
    world.consumer("c1").subscribe("T", "A")
    world.driver.participants[1].start()
    world.driver.run_for(1_000)
    world.send_all()
    world.driver.run_for(10_000)
    assert world.bodies("c1") == {i for i, (tags, _) in enumerate(MESSAGES) if tags == "A"}
    rows = world.rows()
    stated = [r for r in rows if r["event"] == "consume"]
    assert stated and all(r["detail"]["subscription"] == "A" for r in stated)
    report = check(rows)
    assert (report.violations, report.observations) == ((), ())
    unstated = [{**r, "detail": {k: v for k, v in (r["detail"] or {}).items()
                                 if k not in ("subscription", "expression_type", "tags", "properties")}}
                if r["event"] == "consume" else r for r in rows]
    lost = [f for f in check(unstated).violations if f.code == "LOST"]
    assert len(lost) == sum(1 for tags, _ in MESSAGES if tags != "A")


def test_pulls_and_heartbeat_carry_sql92_and_the_retry_topic_stays_tag(world: World) -> None:
    expression = "TAGS = 'A' AND region IN ('HZ', 'SH')"
    c = world.consumer("c1", fail=frozenset({b"m0"}))
    world.clock.set(T0 + 5)
    c.subscribe("T", MessageSelector.by_sql(expression))
    world.clock.set(T0 + 9)
    c.start()
    assert c.heartbeat_subscriptions() == {"%RETRY%G": ("*", "TAG", T0 + 9), "T": (expression, "SQL92", T0 + 5)}
    world.driver.run_for(1_000)
    world.send_all()
    world.driver.run_for(30_000)  # m0 fails once: its retry copy (delay level 3, 10 s) comes back by TAG "*"
    assert sorted(int(m.body[1:]) for m in world.consumed["c1"]) == [0, 0, 5]
    rows = world.rows()
    retried = [r for r in rows if r["event"] == "consume" and r["reconsume_times"] == 1]
    assert [r["topic"] for r in retried] == ["%RETRY%G"]  # pulled by "*", TAG: no subscription stated
    assert "subscription" not in retried[0]["detail"]
    # the heartbeat the client would send makes a pull without the subscription flag filter the same way
    world.broker.heartbeat("H", "c1", c.heartbeat_subscriptions())
    flagless = [world.broker.pull("H", MessageQueue("T", q), 0, 32, None, "SQL92", T0 + 5) for q in (0, 1)]
    carried = [world.broker.pull("H", MessageQueue("T", q), 0, 32, expression, "SQL92", T0 + 5) for q in (0, 1)]
    assert [[m.body for m in r.messages] for r in flagless] == [[m.body for m in r.messages] for r in carried]
    assert sorted(m.body for r in flagless for m in r.messages) == [b"m0", b"m5"]
    consumes = [r for r in rows if r["event"] == "consume" and r["topic"] == "T"]
    assert consumes and all(r["detail"]["subscription"] == expression for r in consumes)
    assert all(r["detail"]["expression_type"] == "SQL92" for r in consumes)


def test_a_broker_without_property_filter_serves_a_sql92_client_nothing(tmp_path: Path) -> None:
    for kind in ("model", "mmap"):
        for w in _world(kind, tmp_path / kind, BrokerConfig(enable_property_filter=False)):
            w.consumer("sql").subscribe("T", MessageSelector.by_sql("region = 'HZ'"))
            w.consumer("tag", group="GT").subscribe("T", MessageSelector.by_tag("A || B"))
            w.consumer("str", group="GS").subscribe("T", "A")
            for c in w.driver.participants[1:]:
                c.start()
            w.driver.run_for(1_000)
            w.send_all()
            w.driver.run_for(10_000)
            assert (w.bodies("sql"), w.bodies("tag"), w.bodies("str")) == (set(), {0, 1, 2, 3, 5}, {0, 1, 3, 5})


# ---------------------------------------------------------------------------
# broken clients


@attrs.frozen
class FiltersByTags(Subscription):
    """Broken: re-checks a SQL92 expression's text as a tag set client-side."""

    def matches(self, msg: StoredMessage) -> bool:
        return build_subscription(self.sub_string).client_keeps(msg.tags)


@attrs.frozen
class SentAsTag(Subscription):
    """Broken: sends the SQL92 expression as a TAG expression."""

    @property
    def tag_type(self) -> bool:
        return True


@attrs.frozen
class DropsSelector(Subscription):
    """Broken: pulls everything ("*" by TAG), still stating its SQL92 subscription."""

    @property
    def tag_type(self) -> bool:
        return True

    @property
    def expression(self) -> str:
        return "*"


@pytest.mark.parametrize("broken", [FiltersByTags, SentAsTag, DropsSelector])
def test_broken_sql92_clients_are_caught(world: World, broken: type[Subscription]) -> None:
    expression = "TAGS = 'A' AND region IN ('HZ', 'SH')"
    good, bad = world.consumer("good", group="G1"), world.consumer("bad", group="G2")
    good.subscribe("T", MessageSelector.by_sql(expression))
    bad.subscribe("T", MessageSelector.by_sql(expression))
    sub = bad.subscriptions["T"]
    bad.subscriptions["T"] = broken(sub.sub_string, sub.tags, sub.topic, sub.expression_type, sub.sub_version)
    good.start()
    bad.start()
    world.driver.run_for(1_000)
    world.send_all()
    world.driver.run_for(10_000)
    assert world.bodies("good") == SELECTED[expression]
    assert world.bodies("bad") != SELECTED[expression]
    if broken is DropsSelector:  # its consume rows state the SQL92 subscription: the audit judges them
        assert "FILTER_MISMATCH" in {v.code for v in check(world.rows()).violations}
