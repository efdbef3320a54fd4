"""Master/slave replication (issue 43): the rules of ``model/ha.py`` against 4.9.8's code, the pair of
``model/ha_pair.py`` on hand-written scenarios, and a Hypothesis machine driving a candidate pair beside the model
pair — in lockstep (every answer compared) or by the invariants alone (``properties/inv_ha.py`` over the
candidate's trace) — which passes the honest pair and catches each broken pair of ``tests/ha_brokers.py`` at the
ci profile's default budget (40 examples × 30 steps, no shrinking).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

from rmqspec.model.crash import BrokerState
from rmqspec.model.events import ListRecorder, TraceEvent
from rmqspec.model.ha import (
    MASTER_ID,
    SLAVE_ID,
    BrokerRole,
    HaConfig,
    ReplicaStatus,
    combine_put_status,
    connection_alive,
    ha_config_from_properties,
    is_slave_ok,
    replica_status,
    slave_pull_status,
    suggest_broker_id,
    suggest_pulling_from_slave,
)
from rmqspec.model.ha_pair import HaPair, PairPull
from rmqspec.model.message import Message, MessageQueue
from rmqspec.model.results import BrokerError, ResponseCode, SendResult, SendStatus
from rmqspec.properties.inv_ha import HA_INVARIANTS, INVARIANT_CODES, OBSERVATION_CODES, check_pair, observations
from rmqspec.properties.runner import budget_settings

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
_hb = importlib.import_module("ha_brokers")
BROKEN_PAIRS, CAUGHT_BY = _hb.BROKEN_PAIRS, _hb.CAUGHT_BY

SYNC, ASYNC = BrokerRole.SYNC_MASTER, BrokerRole.ASYNC_MASTER
T, G = "T", "g"
MQ = MessageQueue(T, 0)


# -- the rules (4.9.8 sources in model/ha.py's docstring) ---------------------------------------------


def test_defaults_are_4_9_8s() -> None:
    cfg = HaConfig()
    assert cfg.broker_role is ASYNC
    assert (cfg.ha_slave_fallbehind_max, cfg.slave_timeout_ms, cfg.sync_flush_timeout_ms) == (268435456, 3000, 5000)
    assert (cfg.ha_housekeeping_interval_ms, cfg.ha_send_heartbeat_interval_ms) == (20000, 5000)
    assert not cfg.slave_read_enable and not cfg.offset_check_in_slave
    assert (cfg.which_broker_when_consume_slowly, cfg.group_broker_id) == (1, 0)


def test_broker_conf_keys_as_properties2object_sets_them() -> None:
    cfg = ha_config_from_properties({"brokerRole": "SYNC_MASTER", "slaveReadEnable": "TRUE", "slaveTimeout": "1500",
                                     "haHousekeepingInterval": "20000 ", "brokerId": "1"})
    assert cfg.broker_role is SYNC and cfg.slave_read_enable and cfg.slave_timeout_ms == 1500
    assert cfg.ha_housekeeping_interval_ms == 20000  # "20000 " fails parseInt: the default stays
    assert cfg.group_broker_id == 0  # broker.conf's brokerId is the broker's id, not a group's field
    assert ha_config_from_properties({"brokerRole": "sync_master"}).broker_role is ASYNC  # valueOf is exact
    assert ha_config_from_properties({"slaveReadEnable": "yes"}).slave_read_enable is False


def test_is_slave_ok_needs_a_connection_and_a_gap_below_fallbehind_max() -> None:
    assert is_slave_ok(True, 100, 0, 101)
    assert not is_slave_ok(True, 101, 0, 101)  # strict <
    assert not is_slave_ok(False, 0, 0, 101)


def test_connection_drops_strictly_after_housekeeping() -> None:
    assert connection_alive(False, 20_000, 0, 20_000)
    assert not connection_alive(False, 20_001, 0, 20_000)
    assert connection_alive(True, 99_999, 0, 20_000)


def test_replica_status_per_role_and_link() -> None:
    m = 1 << 28
    assert replica_status(ASYNC, True, False, False, 10, 0, m) is ReplicaStatus.PUT_OK
    assert replica_status(SYNC, False, False, False, 10, 0, m) is ReplicaStatus.PUT_OK  # WAIT=false never waits
    assert replica_status(SYNC, True, True, True, 10, 0, m) is ReplicaStatus.PUT_OK
    assert replica_status(SYNC, True, True, False, 10, 0, m) is ReplicaStatus.FLUSH_SLAVE_TIMEOUT
    assert replica_status(SYNC, True, False, False, 10, 0, m) is ReplicaStatus.SLAVE_NOT_AVAILABLE
    assert replica_status(SYNC, True, True, True, 10, 0, 5) is ReplicaStatus.SLAVE_NOT_AVAILABLE
    # the replica's failure wins over the flush's (CommitLog.asyncPutMessage)
    assert combine_put_status("FLUSH_DISK_TIMEOUT", ReplicaStatus.FLUSH_SLAVE_TIMEOUT) == "FLUSH_SLAVE_TIMEOUT"
    assert combine_put_status("FLUSH_DISK_TIMEOUT", ReplicaStatus.PUT_OK) == "FLUSH_DISK_TIMEOUT"


def test_suggestions() -> None:
    small = HaConfig(total_physical_memory=1000, slave_read_enable=True)
    assert suggest_pulling_from_slave(1000, 500, small) is True  # 500 > 1000 * 40 %
    assert suggest_pulling_from_slave(1000, 700, small) is False
    assert suggest_pulling_from_slave(1000, None, small) is False
    assert suggest_broker_id(small, True) == 1 and suggest_broker_id(small, False) == 0
    assert suggest_broker_id(HaConfig(total_physical_memory=1000), True) == MASTER_ID  # slaveReadEnable false
    assert slave_pull_status("OFFSET_ILLEGAL", HaConfig()) == "NO_MATCHED_MSG"
    assert slave_pull_status("OFFSET_ILLEGAL", HaConfig(offset_check_in_slave=True)) == "OFFSET_ILLEGAL"
    assert slave_pull_status("FOUND", HaConfig()) == "FOUND"  # FOUND overwrites PULL_RETRY_IMMEDIATELY


# -- the pair on scenarios ---------------------------------------------------------------------------------


def _pair(role: BrokerRole = SYNC, **kw: Any) -> HaPair:
    p = HaPair(HaConfig(broker_role=role, **kw))
    p.create_topic(T, 2)
    p.create_group(G)
    assert p.sync_metadata()
    return p


def test_sync_master_replicates_before_send_ok() -> None:
    p = _pair()
    res = p.send(Message(T, b"a"), 0)
    assert res.status is SendStatus.SEND_OK and p.slave_records == 1
    assert p.pull(SLAVE_ID, G, MQ, 0).result.messages[0].msg_id == res.msg_id
    assert check_pair(p.recorder.events) == []


def test_cut_link_times_out_then_slave_not_available_message_kept() -> None:
    p = _pair()
    p.cut()
    r1 = p.send(Message(T, b"a"), 0)
    assert r1.status is SendStatus.FLUSH_SLAVE_TIMEOUT and p.clock.now() == 3000
    p.advance(17_000)  # 20 000 ms since the last report: still connected (strict >)
    assert p.send(Message(T, b"b"), 0).status is SendStatus.FLUSH_SLAVE_TIMEOUT
    assert p.send(Message(T, b"c"), 0).status is SendStatus.SLAVE_NOT_AVAILABLE
    assert len(p.master.store.records) == 3 and p.slave_records == 0  # stored on the master either way
    p.heal()
    assert p.replicate(1) == 1 and p.replicate() == 2
    assert check_pair(p.recorder.events) == []


def test_slave_refuses_writes_and_serves_its_prefix_only() -> None:
    p = _pair(ASYNC)
    with pytest.raises(BrokerError) as e:
        p.send(Message(T, b"x"), 0, SLAVE_ID)
    assert e.value.code is ResponseCode.SERVICE_NOT_AVAILABLE
    for b in (b"a", b"b", b"c"):
        assert p.send(Message(T, b), 0).status is SendStatus.SEND_OK
    p.replicate(2)
    got = p.pull(SLAVE_ID, G, MQ, 0).result
    assert [m.body for m in got.messages] == [b"a", b"b"] and got.max_offset == 2
    beyond = p.pull(SLAVE_ID, G, MQ, 3)  # the master would answer OFFSET_ILLEGAL and write an event
    assert beyond.result.status.value == "NO_MATCHED_MSG" and beyond.suggest_broker_id == MASTER_ID
    assert p.slave_records == 2


def test_slave_without_synced_topic_answers_topic_not_exist() -> None:
    p = HaPair(HaConfig(broker_role=ASYNC))
    p.create_topic(T, 1)
    p.send(Message(T, b"a"), 0)
    p.replicate()
    with pytest.raises(BrokerError) as e:
        p.pull(SLAVE_ID, G, MQ, 0)
    assert e.value.code is ResponseCode.TOPIC_NOT_EXIST


def test_offsets_synced_by_put_all() -> None:
    p = _pair(ASYNC)
    p.update_offset(MASTER_ID, G, MQ, 5)
    p.update_offset(SLAVE_ID, G, MessageQueue(T, 1), 7)  # the slave takes commits (no role check)
    p.sync_metadata()
    assert p.query_offset(SLAVE_ID, G, MQ) == 5 and p.query_offset(SLAVE_ID, G, MessageQueue(T, 1)) == 7


def test_async_master_disk_loss_loses_exactly_the_unreplicated_tail() -> None:
    p = _pair(ASYNC)
    keys = [p.send(Message(T, bytes([i])), 0).uniq_key for i in range(4)]
    p.replicate(1)
    p.crash_master(lose_disk=True)
    p.restart_master()
    assert check_pair(p.recorder.events) == []
    [obs] = observations(p.recorder.events)
    assert obs.code == "HA_ASYNC_TAIL_LOST" and obs.actual == ",".join(sorted(keys[1:]))
    assert p.slave_records == 1 and p.replicate() == 0  # diverged: never again


def test_sync_master_disk_loss_loses_no_acknowledged_send() -> None:
    p = _pair(SYNC)
    for i in range(3):
        p.send(Message(T, bytes([i])), 0)
    p.crash_master(lose_disk=True)
    assert check_pair(p.recorder.events) == [] and observations(p.recorder.events) == []
    assert len(p.pull(SLAVE_ID, G, MQ, 0).result.messages) == 3  # reads fail over to the slave
    p.restart_master()
    p.create_topic(T, 2)
    assert p.send(Message(T, b"new"), 0).status is SendStatus.SLAVE_NOT_AVAILABLE


def test_master_kill_keeps_everything_and_reconnects() -> None:
    p = _pair(ASYNC)
    p.send(Message(T, b"a"), 0)
    p.crash_master()
    p.restart_master()
    assert p.replicate() == 1 and check_pair(p.recorder.events) == []


# -- the invariants on hand-made rows ----------------------------------------------------------------------


def _rows(*specs: tuple[str, int, dict[str, Any]]) -> list[TraceEvent]:
    rec = ListRecorder()
    for event, bid, fields in specs:
        detail = {"broker": "b", "broker_id": bid, **fields.pop("detail", {})}
        rec.emit(event, 0, detail=detail, **fields)
    return rec.events


def test_a_single_brokers_trace_has_no_ha_finding() -> None:
    rec = ListRecorder()
    rec.emit("send", 0, status="SEND_OK", msg_key="k", commitlog_offset=0)
    rec.emit("deliver", 0, msg_key="k", commitlog_offset=0)
    assert check_pair(rec.events) == [] and observations(rec.events) == []


def test_a_send_without_end_or_role_is_not_judged() -> None:
    assert check_pair(_rows(("send", 0, {"status": "SEND_OK", "msg_key": "k", "detail": {"role": "SYNC_MASTER"}}),
                            ("send", 0, {"status": "SEND_OK", "msg_key": "j", "detail": {"end": 9}}))) == []


def test_not_prefix_unstored_and_lost_are_found() -> None:
    rows = _rows(
        ("store", 0, {"commitlog_offset": 0, "msg_key": "a", "queue_offset": 0}),
        ("replicate", 1, {"commitlog_offset": 10, "detail": {"from": 0, "records": [[0, "zz"]]}}),
        ("deliver", 1, {"commitlog_offset": 0, "msg_key": "b", "queue_offset": 0}),
        ("store", 0, {"commitlog_offset": 10, "msg_key": "c", "queue_offset": 1}),
        ("send", 0, {"status": "SEND_OK", "msg_key": "c", "detail": {"role": "SYNC_MASTER", "wait": True, "end": 20}}),
        ("ha_link", 0, {"status": "DISK_LOST", "commitlog_offset": 10, "detail": {"role": "SYNC_MASTER"}}),
    )
    assert [v.code for v in check_pair(rows)] == [
        "HA_SLAVE_NOT_PREFIX", "HA_SLAVE_SERVED_UNSTORED", "HA_SYNC_ACK_UNREPLICATED", "HA_SYNC_ACK_LOST"]


def test_named_invariants_cover_every_code() -> None:
    assert {i.code for i in HA_INVARIANTS} == set(INVARIANT_CODES) | set(OBSERVATION_CODES)


# -- the machine -------------------------------------------------------------------------------------------

PairFactory = Callable[[HaConfig], HaPair]


def _outcome(fn: Callable[[], Any]) -> Any:
    try:
        out = fn()
    except BrokerError as e:
        return ("error", e.code.name)
    if isinstance(out, SendResult):
        return (out.status.value, out.msg_id, out.queue_offset, out.commitlog_offset)
    if isinstance(out, PairPull):
        r = out.result
        return (r.status.value, tuple((m.uniq_key, m.queue_offset, m.commitlog_offset) for m in r.messages),
                r.next_begin_offset, r.min_offset, r.max_offset, out.suggest_broker_id)
    return out


class HaMachine(RuleBasedStateMachine):
    """The model pair and a candidate pair, same operations; lockstep compares answers, else invariants only."""

    factory: ClassVar[PairFactory] = HaPair
    lockstep: ClassVar[bool] = True
    examples: ClassVar[int] = 0
    seen: ClassVar[set[tuple[str, str | None]]] = set()

    def __init__(self) -> None:
        super().__init__()
        self.model: HaPair | None = None
        self.cand: HaPair | None = None

    @initialize(role=st.sampled_from([SYNC, ASYNC]), read=st.booleans())
    def start(self, role: BrokerRole, read: bool) -> None:
        type(self).examples += 1
        cfg = HaConfig(broker_role=role, slave_read_enable=read)
        self.model, self.cand = HaPair(cfg), type(self).factory(cfg)
        for p in (self.model, self.cand):
            p.create_topic(T, 2)
            p.create_group(G)
            p.sync_metadata()

    def _both(self, op: Callable[[HaPair], Any]) -> None:
        assert self.model is not None and self.cand is not None
        want = _outcome(lambda: op(self.model))  # type: ignore[arg-type]
        got = _outcome(lambda: op(self.cand))  # type: ignore[arg-type]
        if type(self).lockstep:
            assert got == want, f"candidate answered {got}, model {want}"

    # one rule drawing its operation from a weighted table: no swarm of disabled rules, so the chains that matter
    # (a send during a partition, an unreplicated tail before a disk loss) come at the ci budget
    OPS: ClassVar[tuple[str, ...]] = (
        "send", "send", "send", "send", "send_slave", "pull", "pull", "pull_slave", "pull_slave", "replicate",
        "cut", "heal", "advance", "partition", "sync", "commit", "crash", "crash",
    )

    @rule(data=st.data())
    def act(self, data: st.DataObject) -> None:
        assert self.model is not None
        op = data.draw(st.sampled_from(self.OPS), label="op")
        q = data.draw(st.integers(0, 1), label="queue")
        if op in ("send", "send_slave"):
            wait = data.draw(st.sampled_from(["true", "true", "false"]), label="wait")
            to = MASTER_ID if op == "send" else SLAVE_ID
            self._both(lambda p: p.send(Message(T, b"m", wait=wait), q, to))
        elif op in ("pull", "pull_slave"):
            offset = data.draw(st.sampled_from([0, 0, 1, 2, 4]), label="offset")
            frm = MASTER_ID if op == "pull" else SLAVE_ID
            self._both(lambda p: p.pull(frm, G, MessageQueue(T, q), offset))
        elif op == "replicate":
            n = data.draw(st.one_of(st.none(), st.integers(1, 2)), label="n")
            self._both(lambda p: p.replicate(n))
        elif op in ("cut", "heal"):
            self._both(lambda p: p.cut() if op == "cut" else p.heal())
        elif op in ("advance", "partition"):
            ms = data.draw(st.sampled_from([1000, 5000, 20_001]), label="ms")
            self._both(lambda p: self._advance(p, ms, op == "partition"))
        elif op == "sync":
            self._both(lambda p: p.sync_metadata())
        elif op == "commit":
            broker = data.draw(st.sampled_from([MASTER_ID, SLAVE_ID]), label="broker")
            offset = data.draw(st.integers(0, 3), label="offset")
            self._both(lambda p: p.update_offset(broker, G, MessageQueue(T, q), offset))
            self._both(lambda p: p.query_offset(broker, G, MessageQueue(T, q)))
        elif self.model.master.state is BrokerState.RUNNING:
            lose_disk = data.draw(st.booleans(), label="lose_disk")
            self._both(lambda p: p.crash_master(lose_disk))
        else:
            self._both(self._restart)

    @staticmethod
    def _advance(p: HaPair, ms: int, partition: bool) -> None:
        if partition:  # the link cut for ``ms`` (still cut after it)
            p.cut()
        p.advance(ms)

    @staticmethod
    def _restart(p: HaPair) -> None:
        p.restart_master()
        if p.diverged:
            p.create_topic(T, 2)  # the operator recreates the topic on the empty master

    def teardown(self) -> None:
        if self.model is not None:  # what the model's trace reached (the "sometimes" properties)
            type(self).seen.update((e.event, e.status) for e in self.model.recorder.events)  # type: ignore[attr-defined]
            type(self).seen.update(("observation", o.code) for o in observations(
                self.model.recorder.events))  # type: ignore[attr-defined]

    @invariant()
    def ha_invariants(self) -> None:
        if type(self).lockstep or self.cand is None:
            return
        found = check_pair(self.cand.recorder.events)  # type: ignore[attr-defined]
        assert not found, found[0].render()


def _machine(factory: PairFactory, lockstep: bool) -> type[HaMachine]:
    return type("HaRun", (HaMachine,), {"factory": factory, "lockstep": lockstep, "examples": 0, "seen": set()})


def _run(factory: PairFactory, lockstep: bool, examples: int | None = None
         ) -> tuple[type[HaMachine], BaseException | None]:
    machine = _machine(factory, lockstep)
    try:
        run_state_machine_as_test(machine, settings=budget_settings(examples, shrink=False))
    except AssertionError as e:
        return machine, e
    return machine, None


# every answer and row the honest machine must reach at the ci budget (an unreached one is a test gap)
SOMETIMES = {
    ("send", "SEND_OK"), ("send", "FLUSH_SLAVE_TIMEOUT"), ("send", "SLAVE_NOT_AVAILABLE"), ("replicate", None),
    ("ha_link", "CUT"), ("ha_link", "HEALED"), ("ha_link", "DROPPED"), ("ha_link", "DISK_LOST"),
    ("recover", "kill"), ("recover", "DISK_LOST"), ("deliver", None), ("observation", "HA_ASYNC_TAIL_LOST"),
}


@pytest.mark.parametrize("lockstep", [True, False], ids=["lockstep", "invariants"])
def test_honest_pair_passes(lockstep: bool) -> None:
    machine, failure = _run(HaPair, lockstep)
    assert failure is None, failure
    assert machine.seen >= SOMETIMES, f"never reached: {sorted(SOMETIMES - machine.seen, key=str)}"


@pytest.mark.parametrize("lockstep", [True, False], ids=["lockstep", "invariants"])
@pytest.mark.parametrize("name", sorted(BROKEN_PAIRS))
def test_broken_pair_caught(name: str, lockstep: bool) -> None:
    machine, failure = _run(BROKEN_PAIRS[name], lockstep)
    assert failure is not None, f"{name} not caught in {machine.examples} examples"
    if not lockstep:
        assert CAUGHT_BY[name] in str(failure), failure
    print(f"{name} {'lockstep' if lockstep else 'invariants'}: caught in example {machine.examples}")
