"""The RocketMQ version profiles (model/versions.py): each 5.x difference the model follows, held to the
4.9 profile's behaviour, through the model, the mmap broker and in-process conformance."""

from __future__ import annotations

import attrs
import pytest

from rmqspec.impl.broker import MmapBroker
from rmqspec.impl.codec import decode_record
from rmqspec.model import ManualClock, Message, MessageQueue, ModelBroker
from rmqspec.model.config import BrokerConfig, default_config
from rmqspec.model.message import record_size
from rmqspec.model.queues import OP_TOPIC
from rmqspec.model.results import BrokerError, ResponseCode, TxnAction
from rmqspec.model.versions import VERSIONS, version_named
from rmqspec.properties.brokerconf import broker_conf_from_text, broker_config_from_conf
from rmqspec.properties.conformance import PROFILES
from rmqspec.properties.runner import budget_settings, check_conformance
from tests.untraced import budget_run

WIRE = {"UNIQ_KEY": "0A0000071092000000008B6D88E20000", "WAIT": "true", "TAGS": "TagA"}


def test_profiles_are_named_and_unknown_ones_refused() -> None:
    assert sorted(VERSIONS) == ["rocketmq-4.9", "rocketmq-5.0", "rocketmq-5.1", "rocketmq-5.2", "rocketmq-5.5"]
    assert {p.version for p in PROFILES.values()} == set(VERSIONS)
    assert PROFILES["strict"].version == "rocketmq-4.9"
    with pytest.raises(ValueError, match=r"unknown RocketMQ version profile 'rocketmq-6'.*rocketmq-4\.9"):
        version_named("rocketmq-6")
    with pytest.raises(ValueError):
        BrokerConfig(version="5.3.3")


def test_the_check_interval_default_follows_the_version_unless_the_file_sets_it() -> None:
    assert [default_config(v).transaction_check_interval_ms for v in VERSIONS] == [60_000, 60_000, 30_000, 30_000,
                                                                                 30_000]
    conf = broker_conf_from_text("brokerName=broker-a\n")
    assert broker_config_from_conf(conf, "rocketmq-5.2").transaction_check_interval_ms == 30_000
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
    assert offsets["rocketmq-5.2"][0] == offsets["rocketmq-5.1"][0] + 1


def _half_properties(root, offset: int) -> dict:
    data = (root / "commitlog" / f"{0:020d}").read_bytes()
    return dict(decode_record(data[offset:], base_offset=offset).properties)


@budget_run
@pytest.mark.parametrize("version", ["rocketmq-5.1", "rocketmq-5.2"])
def test_mmap_broker_conforms_to_the_model_under_a_5x_profile(version) -> None:
    from rmqspec.properties.adapters import load_factory

    result = check_conformance(load_factory("rmqspec.impl:factory"), profile=version,
                               settings=budget_settings(15, 30))
    assert result.passed, result.render()


def _broker(kind: str, version: str, clock: ManualClock, root, **config):
    timing = {"transaction_timeout_ms": 2000, "transaction_check_interval_ms": 3000,
              "transaction_op_batch_interval_ms": 700}
    config = attrs.evolve(default_config(version), **(timing | config))
    return ModelBroker(clock, config) if kind == "model" else MmapBroker.open(root, clock, config)


def _ops(broker) -> list[bytes]:
    """The op messages' bodies (none before the op topic exists)."""
    try:
        res = broker.pull("G", MessageQueue(OP_TOPIC, 0), 0, 32)
    except BrokerError:
        return []
    return [m.body for m in res.messages]


def _key(i: int) -> str:
    return f"{i:032X}"


@pytest.mark.parametrize("kind", ["model", "mmap"])
def test_5_1_writes_op_messages_in_batches_and_checks_ended_halves_meanwhile(kind, tmp_path) -> None:
    """TransactionalOpBatchService (5.1.0+): an END's op is written at the batch thread's first pass at least
    one period after the queue's last write (the context's creation for the first), every pending offset of
    the queue in one op, ``offset,`` each; until then a check round checks the ended half (fidelity V7)."""
    clock = ManualClock(0)
    broker = _broker(kind, "rocketmq-5.2", clock, tmp_path / "b")
    broker.create_topic("T", 1)
    halves = [broker.send_half(Message("T", b"h", uniq_key=_key(i)), 0, "PG") for i in range(3)]
    clock.set(100)
    for h in halves[:2]:
        assert broker.end_transaction("PG", h.commitlog_offset, h.queue_offset, TxnAction.COMMIT, False) \
            is ResponseCode.SUCCESS
    assert _ops(broker) == []
    clock.set(700)  # the thread's first pass: the context, created at 100, is 600 ms old
    broker.tick()
    assert _ops(broker) == []
    clock.set(1400)
    broker.tick()
    assert _ops(broker) == [b"0,1,"]
    clock.set(1500)
    assert broker.end_transaction("PG", halves[2].commitlog_offset, halves[2].queue_offset, TxnAction.ROLLBACK,
                                  False) is ResponseCode.SUCCESS
    clock.set(2000)  # between passes
    broker.tick()
    assert _ops(broker) == [b"0,1,"]
    clock.set(2100)  # the next pass: the last write was a period ago
    broker.tick()
    assert _ops(broker) == [b"0,1,", b"2,"]
    if kind == "mmap":
        broker.close()


@pytest.mark.parametrize("kind", ["model", "mmap"])
def test_a_half_ended_while_its_op_waits_is_checked_like_an_open_one(kind, tmp_path) -> None:
    clock = ManualClock(0)
    broker = _broker(kind, "rocketmq-5.1", clock, tmp_path / "b", transaction_op_batch_interval_ms=5000)
    broker.create_topic("T", 1)
    half = broker.send_half(Message("T", b"h", uniq_key=_key(7)), 0, "PG")
    clock.set(2500)
    broker.end_transaction("PG", half.commitlog_offset, half.queue_offset, TxnAction.COMMIT, False)
    clock.set(3000)  # the check round; the op is due at the batch pass of 10000
    assert [c.transaction_id for c in broker.tick()] == [_key(7)]
    clock.set(10_000)
    broker.tick()
    assert _ops(broker) == [b"0,"]
    if kind == "mmap":
        broker.close()


@pytest.mark.parametrize("kind", ["model", "mmap"])
def test_pending_ops_die_with_the_broker_and_4_9_writes_them_at_the_end(kind, tmp_path) -> None:
    for version, expected in (("rocketmq-4.9", [b"0"]), ("rocketmq-5.1", [])):
        clock = ManualClock(0)
        broker = _broker(kind, version, clock, tmp_path / version)
        broker.create_topic("T", 1)
        half = broker.send_half(Message("T", b"h", uniq_key=_key(1)), 0, "PG")
        broker.end_transaction("PG", half.commitlog_offset, half.queue_offset, TxnAction.COMMIT, False)
        assert _ops(broker) == expected
        broker.crash("kill")
        broker.recover()
        clock.set(10_000)
        broker.tick()
        assert _ops(broker) == expected, version
        if kind == "mmap":
            broker.close()


def test_a_clean_close_writes_only_the_ops_due(tmp_path) -> None:
    clock = ManualClock(0)
    broker = _broker("model", "rocketmq-5.1", clock, None)
    broker.create_topic("T", 1)
    first, second = (broker.send_half(Message("T", b"h", uniq_key=_key(i)), 0, "PG") for i in range(2))
    broker.end_transaction("PG", first.commitlog_offset, first.queue_offset, TxnAction.COMMIT, False)
    clock.set(800)
    broker.close()
    broker.reopen()
    assert _ops(broker) == [b"0,"]
    broker.end_transaction("PG", second.commitlog_offset, second.queue_offset, TxnAction.COMMIT, False)
    broker.flush_ops()
    assert _ops(broker) == [b"0,", b"1,"]


@pytest.mark.parametrize("kind", ["model", "mmap"])
def test_5_5_stores_a_committed_message_without_its_real_queue(kind, tmp_path) -> None:
    """EndTransactionProcessor.endMessageTransaction: up to 5.3.3 the committed message stores the half's
    string (REAL_TOPIC / REAL_QID in it); 5.5.0+ rebuilds it after clearing them (TRAN_MSG, cleared later,
    stays in both)."""
    seen = {}
    for version in ("rocketmq-5.2", "rocketmq-5.5"):
        clock = ManualClock(0)
        broker = _broker(kind, version, clock, tmp_path / version)
        broker.create_topic("T", 1)
        half = broker.send_half(Message("T", b"h", uniq_key=_key(1)), 0, "PG")
        broker.end_transaction("PG", half.commitlog_offset, half.queue_offset, TxnAction.COMMIT, False)
        (committed,) = broker.pull("G", MessageQueue("T", 0), 0, 1).messages
        seen[version] = set(committed.properties)
        if kind == "mmap":
            broker.close()
    assert {"REAL_TOPIC", "REAL_QID", "TRAN_MSG"} <= seen["rocketmq-5.2"]
    assert seen["rocketmq-5.2"] - seen["rocketmq-5.5"] == {"REAL_TOPIC", "REAL_QID"}
    assert "TRAN_MSG" in seen["rocketmq-5.5"]


@pytest.mark.parametrize("kind", ["model", "mmap"])
def test_5_2_stores_no_offset_moved_event(kind, tmp_path) -> None:
    """DefaultPullMessageResultHandler (5.3.3 broker jar, `javap -c`; fidelity V10): a pull answered
    PULL_OFFSET_MOVED is logged and no longer stored as an OFFSET_MOVED_EVENT record, so the CommitLog does
    not move (4.9.8 and the 5.1 profile store it: B13)."""
    gaps = {}
    for version in ("rocketmq-5.1", "rocketmq-5.2", "rocketmq-5.5"):
        clock = ManualClock(0)
        broker = _broker(kind, version, clock, tmp_path / version)
        broker.create_topic("T", 2)
        a = broker.send(Message("T", b"x", uniq_key=_key(1)), 0)
        b = broker.send(Message("T", b"x", uniq_key=_key(2)), 0)
        assert broker.pull("G", MessageQueue("T", 1), 1000).status.name == "OFFSET_ILLEGAL"  # an empty queue
        assert broker.pull("G", MessageQueue("T", 0), 1000).status.name == "OFFSET_ILLEGAL"  # past its end
        c = broker.send(Message("T", b"x", uniq_key=_key(3)), 0)
        gaps[version] = (c.commitlog_offset - b.commitlog_offset) - (b.commitlog_offset - a.commitlog_offset)
        if kind == "mmap":
            broker.close()
    assert gaps["rocketmq-5.2"] == gaps["rocketmq-5.5"] == 0
    assert gaps["rocketmq-5.1"] > 0
