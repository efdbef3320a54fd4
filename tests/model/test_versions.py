"""The RocketMQ version profiles (model/versions.py): each 5.x difference the model follows, held to the
4.9 profile's behaviour, through the model, the mmap broker and in-process conformance."""

from __future__ import annotations

import pytest

from rmqspec.impl.broker import MmapBroker
from rmqspec.impl.codec import decode_record
from rmqspec.model import ManualClock, Message, MessageQueue, ModelBroker
from rmqspec.model.config import BrokerConfig, default_config
from rmqspec.model.message import record_size
from rmqspec.model.versions import VERSIONS, version_named
from rmqspec.properties.brokerconf import broker_conf_from_text, broker_config_from_conf
from rmqspec.properties.conformance import PROFILES
from rmqspec.properties.runner import budget_settings, check_conformance

WIRE = {"UNIQ_KEY": "0A0000071092000000008B6D88E20000", "WAIT": "true", "TAGS": "TagA"}


def test_profiles_are_named_and_unknown_ones_refused() -> None:
    assert sorted(VERSIONS) == ["rocketmq-4.9", "rocketmq-5.0", "rocketmq-5.1", "rocketmq-5.2+"]
    assert {p.version for p in PROFILES.values()} == set(VERSIONS)
    assert PROFILES["strict"].version == "rocketmq-4.9"
    with pytest.raises(ValueError, match=r"unknown RocketMQ version profile 'rocketmq-6'.*rocketmq-4\.9"):
        version_named("rocketmq-6")
    with pytest.raises(ValueError):
        BrokerConfig(version="5.3.3")


def test_the_check_interval_default_follows_the_version_unless_the_file_sets_it() -> None:
    assert [default_config(v).transaction_check_interval_ms for v in VERSIONS] == [60_000, 60_000, 30_000, 30_000]
    conf = broker_conf_from_text("brokerName=broker-a\n")
    assert broker_config_from_conf(conf, "rocketmq-5.2+").transaction_check_interval_ms == 30_000
    assert broker_config_from_conf(conf).transaction_check_interval_ms == 60_000
    conf = broker_conf_from_text("transactionCheckInterval=3000\nregionId=HZ\ntraceOn=false\n")
    config = broker_config_from_conf(conf, "rocketmq-5.1")
    assert (config.transaction_check_interval_ms, config.version, config.region_id, config.trace_on) == \
        (3000, "rocketmq-5.1", "HZ", False)


@pytest.mark.parametrize("kind", ["model", "mmap"])
def test_what_a_send_stores_per_version(kind, tmp_path) -> None:
    """4.9: CLUSTER added, WAIT left out of a plain record; 5.x: MSG_REGION and TRACE_ON too, WAIT kept, a
    half also gets __transactionId__; 5.2+: one more byte per record (the trailing separator)."""
    offsets = {}
    for version in VERSIONS:
        config = default_config(version)
        clock = ManualClock(1_000)
        broker = ModelBroker(clock, config) if kind == "model" else \
            MmapBroker.open(tmp_path / version, clock, config)
        broker.create_topic("T", 1)
        first = broker.send(Message("T", b"body", tags="TagA", uniq_key=WIRE["UNIQ_KEY"], wait="true"), 0)
        second = broker.send(Message("T", b"body", tags="TagA", uniq_key=WIRE["UNIQ_KEY"], wait="true"), 0)
        half = broker.send_half(Message("T", b"half", tags="TagA", uniq_key=WIRE["UNIQ_KEY"], wait="true"), 0, "PG")
        (plain,) = broker.pull("G", MessageQueue("T", 0), 0, 1).messages
        offsets[version] = (second.commitlog_offset, half.commitlog_offset)
        base = {"TAGS": "TagA", "UNIQ_KEY": WIRE["UNIQ_KEY"], "CLUSTER": "DefaultCluster"}
        behaviour = version_named(version)
        if behaviour.region_properties:
            base |= {"MSG_REGION": "DefaultRegion", "TRACE_ON": "true", "WAIT": "true"}
        assert dict(plain.properties) == base, version
        size = record_size(len(b"body"), "T", plain.properties, 0,
                           trailing=behaviour.properties_trailing_separator)
        assert second.commitlog_offset - first.commitlog_offset == size
        if kind == "mmap":
            broker.close()
            raw = (tmp_path / version / "commitlog" / f"{0:020d}").read_bytes()[:size]
            record = decode_record(raw)
            assert dict(record.properties) == base
            assert raw.endswith(b"\x02") == behaviour.properties_trailing_separator
            assert ("__transactionId__" in _half_properties(tmp_path / version, half.commitlog_offset)) == \
                behaviour.half_transaction_id
    size49 = offsets["rocketmq-4.9"][0]
    assert offsets["rocketmq-5.0"][0] == offsets["rocketmq-5.1"][0] > size49
    assert offsets["rocketmq-5.2+"][0] == offsets["rocketmq-5.1"][0] + 1


def _half_properties(root, offset: int) -> dict:
    data = (root / "commitlog" / f"{0:020d}").read_bytes()
    return dict(decode_record(data[offset:], base_offset=offset).properties)


@pytest.mark.parametrize("version", ["rocketmq-5.1", "rocketmq-5.2+"])
def test_mmap_broker_conforms_to_the_model_under_a_5x_profile(version) -> None:
    from rmqspec.properties.adapters import load_factory

    result = check_conformance(load_factory("rmqspec.impl:factory"), profile=version,
                               settings=budget_settings(15, 30))
    assert result.passed, result.render()
