"""SQL92 pulls on both brokers (ModelBroker and MmapBroker): filtering, refusals, retry topics, scan offsets.

What 4.9.8's PullMessageProcessor + ExpressionMessageFilter answer for a pull that carries its own
subscription (``model/pullfilter.py``); the two brokers must agree on every result.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmqspec.impl.broker import MmapBroker
from rmqspec.model import BrokerConfig, ManualClock, Message, MessageQueue, ModelBroker
from rmqspec.model.results import BrokerError, PullStatus, ResponseCode
from rmqspec.model.sql92 import FilterParseError, compile_filter, matches
from rmqspec.properties.brokerconf import ConfigError, broker_conf_from_text, broker_config_from_conf

START_MS = 1_700_000_000_000
ON = BrokerConfig(commitlog_file_size=1 << 20, enable_property_filter=True)
MQ = MessageQueue("T", 0)
SEED = "TAGS = 'logistics' AND region IN ('HZ','SH')"


@pytest.fixture(params=["model", "mmap"])
def make(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator:
    made = []

    def build(config: BrokerConfig = ON):
        clock = ManualClock(START_MS)
        if request.param == "model":
            broker = ModelBroker(clock, config)
        else:
            broker = MmapBroker.open(tmp_path / f"b{len(made)}", clock, config)
        made.append(broker)
        broker.create_topic("T", 1)
        broker.create_group("G")
        return broker

    yield build
    for b in made:
        b.close()


def _send(broker, tags: str | None, **props: str):
    return broker.send(Message("T", b"x", tags=tags, properties=props), 0)


def test_seed_expression_filters_on_tags_and_user_properties(make) -> None:
    b = make()
    _send(b, "logistics", region="HZ")
    _send(b, "logistics", region="BJ")
    _send(b, "food", region="SH")
    _send(b, "logistics")  # region missing: NULL, not delivered
    _send(b, "logistics", region="SH")
    res = b.pull("G", MQ, 0, 32, SEED, "SQL92")
    assert res.status is PullStatus.FOUND
    assert [m.queue_offset for m in res.messages] == [0, 4]
    assert res.next_begin_offset == 5
    none = b.pull("G", MQ, 1, 3, "region = 'XX'", "SQL92")
    assert none.status is PullStatus.NO_MATCHED_MSG and none.messages == () and none.next_begin_offset == 5


def test_system_properties_are_visible(make) -> None:
    b = make()
    sent = _send(b, "t", k="v")
    res = b.pull("G", MQ, 0, 32, f"UNIQ_KEY = '{sent.uniq_key}' AND CLUSTER = 'DefaultCluster'", "SQL92")
    assert [m.queue_offset for m in res.messages] == [0]


def test_refused_when_property_filter_disabled(make) -> None:
    b = make(attrs.evolve(ON, enable_property_filter=False))
    _send(b, "t")
    with pytest.raises(BrokerError) as exc:
        b.pull("G", MQ, 0, 32, "TAGS = 't'", "SQL92")
    assert exc.value.code is ResponseCode.SYSTEM_ERROR
    assert exc.value.remark == "The broker does not support consumer to filter message by SQL92"
    with pytest.raises(BrokerError) as exc:  # an empty expression fails first (FilterAPI.build)
        b.pull("G", MQ, 0, 32, "", "SQL92")
    assert exc.value.code is ResponseCode.SUBSCRIPTION_PARSE_FAILED
    assert b.pull("G", MQ, 0, 32, "t", "TAG").status is PullStatus.FOUND  # tags are still served


@pytest.mark.parametrize("expr", ["", "a =", "a > 'x'", "TRUE = 'x'", "a = 1 #"])
def test_bad_expression_is_subscription_parse_failed(make, expr: str) -> None:
    b = make()
    _send(b, "t")
    with pytest.raises(BrokerError) as exc:
        b.pull("G", MQ, 0, 32, expr, "SQL92")
    assert exc.value.code is ResponseCode.SUBSCRIPTION_PARSE_FAILED


def test_unknown_expression_type_is_refused(make) -> None:
    b = make()
    with pytest.raises(BrokerError) as exc:
        b.pull("G", MQ, 0, 32, "TAGS = 't'", "sql92")
    assert exc.value.code is ResponseCode.SUBSCRIPTION_PARSE_FAILED


def test_tag_type_keeps_hash_filtering(make) -> None:
    b = make()
    _send(b, "Aa")
    _send(b, "BB")  # "Aa".hashCode() == "BB".hashCode(): the broker returns both for tag "Aa"
    _send(b, "C")
    assert [m.tags for m in b.pull("G", MQ, 0, 32, "Aa", "TAG").messages] == ["Aa", "BB"]
    assert [m.tags for m in b.pull("G", MQ, 0, 32, "TAGS = 'Aa'", "SQL92").messages] == ["Aa"]


def test_retry_topic_is_filtered_by_the_pull_expression(make) -> None:
    """filterSupportRetry=false (4.9.8's default): a pull of %RETRY%G with a SQL92 expression evaluates it on
    the retry copies, which keep the user properties (and TAGS)."""
    b = make()
    a = _send(b, "t", region="HZ")
    c = _send(b, "t", region="BJ")
    for sent in (a, c):
        assert b.send_back("G", sent.commitlog_offset, -1 if sent is c else 1, None, None) is ResponseCode.SUCCESS
    b.clock.advance(2_000)
    b.tick()
    retry = MessageQueue("%RETRY%G", 0)
    got = b.pull("G", retry, 0, 32, "region = 'HZ'", "SQL92")
    assert [m.properties["region"] for m in got.messages] == ["HZ"]
    assert got.messages[0].properties["RETRY_TOPIC"] == "T"


_NAMES = st.sampled_from(["a", "b", "region"])
_VALS = st.sampled_from(["1", "2", "HZ", "SH", "true", "-1.5", " 7 "])
_EXPRS = st.sampled_from([
    "a > 1", "a = 'HZ' OR b IS NULL", "region IN ('HZ', 'SH')", "a BETWEEN 1 AND 2", "NOT (a = '1')",
    "a <> b", "b IS NOT NULL AND a < 2.5", "a = TRUE", SEED, "TRUE", "FALSE", "a",
])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(msgs=st.lists(st.tuples(st.sampled_from([None, "logistics", "x"]), st.dictionaries(_NAMES, _VALS)),
                     min_size=1, max_size=8),
       expr=_EXPRS, max_nums=st.integers(1, 4))
def test_pull_is_the_filter_over_the_queue(tmp_path_factory: pytest.TempPathFactory, msgs, expr: str,
                                           max_nums: int) -> None:
    """Both brokers deliver exactly the messages the expression matches, in order, ``max_nums`` at a time."""
    clock = ManualClock(START_MS)
    brokers = [ModelBroker(clock, ON), MmapBroker.open(tmp_path_factory.mktemp("sql"), clock, ON)]
    node = compile_filter(expr)
    try:
        for b in brokers:
            b.create_topic("T", 1)
            for tags, props in msgs:
                _send(b, tags, **props)
        want = []
        for i, (tags, props) in enumerate(msgs):
            full = dict(props) | ({"TAGS": tags} if tags else {})
            if matches(node, full):
                want.append(i)
        for b in brokers:
            got, offset = [], 0
            while True:
                res = b.pull("G", MQ, offset, max_nums, expr, "SQL92")
                if res.status is PullStatus.NO_NEW_MSG:
                    break
                assert res.status in (PullStatus.FOUND, PullStatus.NO_MATCHED_MSG)
                assert len(res.messages) <= max_nums
                got += [m.queue_offset for m in res.messages]
                offset = res.next_begin_offset
            assert got == want
    finally:
        for b in brokers:
            b.close()


def test_broker_conf_reads_enable_property_filter() -> None:
    conf = broker_conf_from_text("enablePropertyFilter=true\n", "broker.conf")
    assert broker_config_from_conf(conf).enable_property_filter is True
    assert broker_config_from_conf(broker_conf_from_text("", "b")).enable_property_filter is False
    with pytest.raises(ConfigError) as exc:
        broker_config_from_conf(broker_conf_from_text("x=1\nenablePropertyFilter=yes\n", "broker.conf"))
    assert "broker.conf:2" in str(exc.value) and "enablePropertyFilter" in str(exc.value)


def test_compile_errors_are_typed() -> None:
    with pytest.raises(FilterParseError):
        compile_filter("a >")
