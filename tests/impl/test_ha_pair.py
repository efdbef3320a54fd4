"""The mmap broker as a master/slave pair (issue 43): ``impl/ha_pair.MmapHaPair`` driven by the model pair's
Hypothesis machine (``HaMachine`` of tests/model/test_ha.py, imported) in lockstep and by the HA invariants
alone, at the ci budget; and direct tests of the HA transfer over its real TCP connection (``impl/ha.py``): the
slave's commitlog a byte-for-byte prefix of the master's, a frame at a wrong offset closing the connection, a
slave restarted on its store resuming from its own max offset, a killed slave (``crash_slave``: its socket closed,
the master dropping the connection at once; restarted, a new connection from its own end) answering and tracing
as the model pair, an empty slave starting at the master's last
commitlog file, the 32 KiB frames, the heartbeat, the sockets on 127.0.0.1.
"""

from __future__ import annotations

import importlib.util
import socket
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis.stateful import invariant, run_state_machine_as_test

from rmqspec.impl.ha import (
    HA_TRANSFER_BATCH_SIZE,
    HaClient,
    HaProtocolError,
    accept_frame,
    decode_header,
    decode_report,
    encode_frame,
    encode_report,
    first_transfer_offset,
    plan_frames,
)
from rmqspec.impl.ha_pair import MmapHaPair
from rmqspec.impl.store import MessageStore, StoreConfig
from rmqspec.model.config import BrokerConfig
from rmqspec.model.ha import MASTER_ID, SLAVE_ID, BrokerRole, HaConfig
from rmqspec.model.message import Message, MessageQueue
from rmqspec.model.results import BrokerError, ResponseCode, SendStatus
from rmqspec.properties.inv_ha import check_pair
from rmqspec.properties.runner import budget_settings

pytestmark = pytest.mark.filterwarnings("error::ResourceWarning", "error::pytest.PytestUnraisableExceptionWarning")

_spec = importlib.util.spec_from_file_location(
    "rmqspec_tests_model_test_ha", Path(__file__).resolve().parents[1] / "model" / "test_ha.py")
assert _spec is not None and _spec.loader is not None
_ha = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_ha)
HaMachine: Any = _ha.HaMachine
SOMETIMES: set[tuple[str, str | None]] = _ha.SOMETIMES

SYNC, ASYNC = BrokerRole.SYNC_MASTER, BrokerRole.ASYNC_MASTER
T, G = "T", "g"
MQ = MessageQueue(T, 0)
SMALL = BrokerConfig(commitlog_file_size=4096, consume_queue_file_size=20 * 50)


def _rows(pair: Any) -> list[tuple[Any, ...]]:
    return [(e.event, e.status, e.msg_key, e.commitlog_offset, e.queue_offset, e.ts,
             sorted((k, repr(v)) for k, v in (e.detail or {}).items())) for e in pair.recorder.events]


class MmapHaMachine(HaMachine):  # type: ignore[misc, valid-type]
    """``HaMachine`` whose candidate is closed (sockets, stores, its scratch directory) after each example; in
    lockstep its trace rows are also the model pair's, row for row (event, status, key, offsets, time, detail)."""

    factory: ClassVar[Any] = MmapHaPair

    @invariant()
    def same_rows_as_the_model(self) -> None:
        if not type(self).lockstep or self.model is None or self.cand is None:
            return
        want, got = _rows(self.model), _rows(self.cand)
        diff = next((i for i, (w, g) in enumerate(zip(want, got, strict=False)) if w != g), min(len(want), len(got)))
        assert got == want, f"row {diff}: candidate {got[diff:diff + 1]}, model {want[diff:diff + 1]}"

    def teardown(self) -> None:
        try:
            super().teardown()
        finally:
            if isinstance(self.cand, MmapHaPair):
                self.cand.close()


def _run(lockstep: bool) -> tuple[type, BaseException | None]:
    # named as tests/model/test_ha.py names its run: a derandomized run's seed is the machine's digest (its
    # name), so the mmap pair meets exactly the programs the model pair's own machine draws
    machine = type("HaRun", (MmapHaMachine,), {"lockstep": lockstep, "examples": 0, "seen": set()})
    try:
        run_state_machine_as_test(machine, settings=budget_settings(None, shrink=False))
    except AssertionError as e:
        return machine, e
    return machine, None


@pytest.mark.parametrize("lockstep", [True, False], ids=["lockstep", "invariants"])
def test_mmap_pair_passes_the_model_pairs_machine(lockstep: bool) -> None:
    machine, failure = _run(lockstep)
    assert failure is None, failure
    seen = machine.seen  # type: ignore[attr-defined]
    assert seen >= SOMETIMES, f"never reached: {sorted(SOMETIMES - seen, key=str)}"
    print(f"mmap pair {'lockstep' if lockstep else 'invariants'}: {machine.examples} examples")  # type: ignore


# -- direct tests --------------------------------------------------------------------------------------------


def _pair(tmp_path: Path, role: BrokerRole = SYNC, config: BrokerConfig | None = None) -> MmapHaPair:
    p = MmapHaPair(HaConfig(broker_role=role), tmp_path, config=config)
    p.create_topic(T, 2)
    p.create_group(G)
    assert p.sync_metadata()
    return p


def _log_bytes(root: Path) -> dict[str, bytes]:
    return {f.name: f.read_bytes() for f in sorted((root / "commitlog").iterdir())}


def test_wire_format_is_4_9_8s() -> None:
    frame = encode_frame(4096, b"abc")
    assert frame == (4096).to_bytes(8, "big") + (3).to_bytes(4, "big") + b"abc"
    assert decode_header(frame[:12]) == (4096, 3)
    assert encode_report(257) == b"\0\0\0\0\0\0\x01\x01" and decode_report(encode_report(257)) == 257
    with pytest.raises(HaProtocolError):
        decode_header(b"short")
    # WriteSocketService: a slave reporting 0 starts at the master's LAST file; any other offset as reported
    assert first_transfer_offset(0, 3 * 4096 + 10, 4096) == 3 * 4096
    assert first_transfer_offset(0, 0, 4096) == 0 and first_transfer_offset(77, 9999, 4096) == 77
    # HAClient.dispatchReadRequest: an empty slave takes any offset, any other only its own max
    assert accept_frame(0, 8192) and accept_frame(100, 100) and not accept_frame(100, 101)


def test_slave_log_is_the_masters_prefix_byte_for_byte(tmp_path: Path) -> None:
    with _pair(tmp_path, ASYNC, SMALL) as p:
        for i in range(30):  # ~3.5 files of 4 KiB: rolled files with their blank tails
            assert p.send(Message(T, bytes([i]) * 50), i % 2).status is SendStatus.SEND_OK
        assert p.replicate(7) == 7
        end = p.acked
        master, slave = _log_bytes(tmp_path / "master"), _log_bytes(tmp_path / "slave")
        first = master["00000000000000000000"]
        assert slave["00000000000000000000"][:end] == first[:end] and not any(slave["00000000000000000000"][end:])
        assert p.replicate() == 23
        master, slave = _log_bytes(tmp_path / "master"), _log_bytes(tmp_path / "slave")
        assert slave == master  # every file, blank tails and all
        got = p.pull(SLAVE_ID, G, MQ, 0).result
        want = p.pull(MASTER_ID, G, MQ, 0).result
        assert [(m.msg_id, m.body, m.queue_offset) for m in got.messages] == \
            [(m.msg_id, m.body, m.queue_offset) for m in want.messages]
        assert check_pair(p.recorder.events) == []


def test_frames_are_whole_records_of_at_most_32_kib(tmp_path: Path) -> None:
    with _pair(tmp_path, ASYNC) as p:
        for _ in range(5):
            p.send(Message(T, b"x" * 10_000), 0)
        p.send(Message(T, b"y" * 40_000), 1)  # larger than a frame: alone in one
        assert p.master.store is not None
        log = p.master.store.commitlog
        frames = plan_frames(log, 0, log.max_offset, None)
        assert [f.records for f in frames] == [3, 2, 1]
        assert all(f.size <= HA_TRANSFER_BATCH_SIZE for f in frames[:2]) and frames[2].size > HA_TRANSFER_BATCH_SIZE
        assert sum(f.size for f in frames) == log.max_offset
        assert [f.records for f in plan_frames(log, 0, log.max_offset, 4)] == [3, 1]
        assert p.replicate() == 6 and p.acked == log.max_offset


def test_a_frame_at_a_wrong_offset_closes_the_connection(tmp_path: Path) -> None:
    with _pair(tmp_path, SYNC) as p:
        assert p.send(Message(T, b"a"), 0).status is SendStatus.SEND_OK
        end = p.acked
        assert p.conn is not None and p.conn.sock is not None
        p.conn.sock.sendall(encode_frame(end + 8, b"not the slave's end"))
        with pytest.raises(HaProtocolError):
            p.client.dispatch(1, end, p.slave.append_replica)
        assert not p.client.open
        p._read_reports(1)  # the master reads the end of the stream: CLOSED
        assert not p.connected and p.slave_records == 1
        assert p.send(Message(T, b"b"), 0).status is SendStatus.SLAVE_NOT_AVAILABLE
        p.cut()
        p.heal()  # a new connection: the slave reports its own end and gets the rest
        assert p.connected and p.conn is not None and p.conn.slave_request_offset == end
        assert p.replicate() == 1 and p.send(Message(T, b"c"), 0).status is SendStatus.SEND_OK
        assert check_pair(p.recorder.events) == []


def test_a_slave_restarted_on_its_store_resumes_from_its_own_max_offset(tmp_path: Path) -> None:
    with _pair(tmp_path, ASYNC) as p:
        for b in (b"a", b"b", b"c"):
            p.send(Message(T, b), 0)
        assert p.replicate(2) == 2
        end = p.acked
        p.client.close()  # the slave's process stops: its connection with it
        p.slave.close()
        p.slave.reopen()  # on its own store, still a SLAVE
        with pytest.raises(BrokerError) as e:
            p.send(Message(T, b"x"), 0, SLAVE_ID)
        assert e.value.code is ResponseCode.SERVICE_NOT_AVAILABLE
        assert p.slave_records == 2
        p.cut()
        p.heal()
        assert p.conn is not None and p.conn.slave_request_offset == end == p.conn.next_transfer_from
        p.send(Message(T, b"d"), 0)
        assert p.replicate() == 2
        assert [m.body for m in p.pull(SLAVE_ID, G, MQ, 0).result.messages] == [b"a", b"b", b"c", b"d"]
        assert check_pair(p.recorder.events) == []


def _slave_crash_script(p: Any) -> list[Any]:
    """A slave's crashes with the link up and cut, the master down, both roles' answers: what each step returned."""
    out: list[Any] = [p.send(Message(T, b"a"), 0).status]
    p.crash_slave()
    out += [p.send(Message(T, b"b"), 0).status, p.clock.now(), p.replicate(), p.sync_metadata()]
    for call in (lambda: p.pull(SLAVE_ID, G, MQ, 0), lambda: p.query_offset(SLAVE_ID, G, MQ)):
        with pytest.raises(BrokerError) as e:
            call()
        out.append(e.value.code)
    p.restart_slave()
    out += [p.connected, p.slave_records, p.replicate(), p.send(Message(T, b"c"), 0).status]
    p.cut()
    p.crash_slave()
    out += [p.connected, p.send(Message(T, b"d"), 0).status]
    p.restart_slave()
    out.append(p.connected)
    p.heal()
    out += [p.connected, p.replicate()]
    p.crash_master()
    p.crash_slave()
    p.restart_slave()
    out.append(p.connected)
    p.restart_master()
    out += [p.connected, p.send(Message(T, b"e"), 0).status, p.slave_records, p.acked]
    out.append([m.body for m in p.pull(SLAVE_ID, G, MQ, 0).result.messages])
    return out


def test_a_killed_slave_closes_its_socket_and_resumes_on_a_new_connection(tmp_path: Path) -> None:
    with _pair(tmp_path, SYNC, SMALL) as p:
        assert p.send(Message(T, b"a"), 0).status is SendStatus.SEND_OK
        end = p.acked
        assert p.conn is not None and p.client.sock is not None
        old_port = p.client.sock.getsockname()[1]
        p.crash_slave()  # the store killed, its socket closed: the master reads the end of the stream
        assert not p.client.open and not p.connected and p.slave.store is None
        assert p.send(Message(T, b"b"), 0).status is SendStatus.SLAVE_NOT_AVAILABLE and p.clock.now() == 0
        with pytest.raises(BrokerError):
            p.restart_master()  # running
        p.restart_slave()  # the store recovered, a new TCP connection reporting the slave's own end
        assert p.client.sock is not None and p.client.sock.getsockname()[1] != old_port
        assert p.conn is not None and p.conn.slave_request_offset == end == p.conn.next_transfer_from
        with pytest.raises(BrokerError) as e:
            p.send(Message(T, b"x"), 0, SLAVE_ID)
        assert e.value.code is ResponseCode.SERVICE_NOT_AVAILABLE  # still a SLAVE
        assert p.replicate() == 1 and p.send(Message(T, b"c"), 0).status is SendStatus.SEND_OK
        assert _log_bytes(tmp_path / "slave") == _log_bytes(tmp_path / "master")
        with pytest.raises(BrokerError):
            p.restart_slave()  # running
        assert check_pair(p.recorder.events) == []


@pytest.mark.parametrize("role", [SYNC, ASYNC], ids=["sync", "async"])
def test_slave_crashes_answer_and_trace_as_the_model_pair(tmp_path: Path, role: BrokerRole) -> None:
    model = _ha.HaPair(HaConfig(broker_role=role))
    model.create_topic(T, 2)
    model.create_group(G)
    model.sync_metadata()
    with _pair(tmp_path, role) as p:
        assert _slave_crash_script(p) == _slave_crash_script(model)
        assert _rows(p) == _rows(model)
        assert check_pair(p.recorder.events) == []
    assert ("ha_link", "DROPPED") in {(e.event, e.status) for e in model.recorder.events}


def test_an_empty_slave_starts_at_the_masters_last_file(tmp_path: Path) -> None:
    with _pair(tmp_path, ASYNC, SMALL) as p:
        p.cut()
        for i in range(30):
            p.send(Message(T, bytes([i]) * 50), 0)
        p.advance(20_001)  # dropped by the master's housekeeping
        assert not p.connected
        p.heal()  # the slave (max offset 0) reports 0
        assert p.master.store is not None
        log = p.master.store.commitlog
        last = log.files.files[-1].start
        assert last > 0 and p.conn is not None and p.conn.slave_request_offset == 0
        moved = p.replicate()
        assert p.conn.next_transfer_from == log.max_offset
        assert [f.name for f in sorted((tmp_path / "slave" / "commitlog").iterdir())] == [f"{last:020d}"]
        assert moved == p.slave_records and 0 < moved < 30
        assert _log_bytes(tmp_path / "slave")[f"{last:020d}"] == _log_bytes(tmp_path / "master")[f"{last:020d}"]


def test_heartbeat_frame_when_idle(tmp_path: Path) -> None:
    with _pair(tmp_path, ASYNC) as p:
        p.send(Message(T, b"a"), 0)
        assert p.replicate() == 1
        p.advance(5001)
        assert p.conn is not None and p.conn.heartbeat_due(p.clock.now(), 5000)
        assert p.replicate() == 0  # a size-0 frame at the slave's end, accepted
        assert p.connected and p.client.open and not p.conn.heartbeat_due(p.clock.now(), 5000)


def test_the_connection_is_on_127_0_0_1_and_closes_with_the_master(tmp_path: Path) -> None:
    with _pair(tmp_path, SYNC) as p:
        assert p.address is not None and p.address[0] == "127.0.0.1" and p.address[1] > 0
        assert p.client.sock is not None and p.client.sock.getpeername() == p.address
        assert p.conn is not None and p.conn.sock is not None
        assert p.conn.sock.getsockname() == p.address and p.conn.sock.getpeername()[0] == "127.0.0.1"
        assert p.conn.sock.type is socket.SOCK_STREAM
        p.send(Message(T, b"a"), 0)
        p.crash_master()
        assert not p.connected and not p.client.open and p.address is None
        p.restart_master()
        assert p.connected and p.client.open and p.address is not None
        p.crash_master(lose_disk=True)
        p.restart_master()  # a fresh directory; the pair diverged: no connection again
        assert p.diverged and not p.connected and (tmp_path / "master-1" / "commitlog").is_dir()
        p.cut()
        p.heal()
        assert not p.connected and p.replicate() == 0
        with pytest.raises(BrokerError):
            p.restart_master()  # running


def test_pair_refuses_a_slave_role_and_unknown_broker_ids(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        MmapHaPair(HaConfig(broker_role=BrokerRole.SLAVE), tmp_path)
    with MmapHaPair(None, tmp_path) as p:  # the model pair's default: SYNC_MASTER
        with pytest.raises(ValueError):
            p.broker(2)
        assert p.role is SYNC


def test_a_temporary_root_is_removed_at_close() -> None:
    p = MmapHaPair(HaConfig(broker_role=ASYNC))
    root = p.root
    assert (root / "slave").is_dir()
    p.close()
    assert not root.exists()


class _AckBeforeReplica(MmapHaPair):
    """CHECK guard removed: the SYNC_MASTER answers without waiting for the slave."""

    def _replica_answer(self, msg: Message, end: int) -> tuple[Any, int]:
        return _ha.ReplicaStatus.PUT_OK, 0


class _SlaveWrites(MmapHaPair):
    """CHECK guard removed: the slave's store takes puts."""

    def __init__(self, ha: HaConfig | None = None) -> None:
        super().__init__(ha)
        self.slave.slave = self.slave.log.slave = False


@pytest.mark.parametrize("lockstep", [True, False], ids=["lockstep", "invariants"])
@pytest.mark.parametrize(("broken", "code"), [(_AckBeforeReplica, "HA_SYNC_ACK_UNREPLICATED"),
                                              (_SlaveWrites, "HA_SLAVE_WROTE")], ids=["ack", "slave_writes"])
def test_the_machine_catches_a_broken_mmap_pair(broken: type, code: str, lockstep: bool) -> None:
    machine = type("HaRun", (MmapHaMachine,), {"factory": broken, "lockstep": lockstep, "examples": 0,
                                                "seen": set()})
    with pytest.raises(AssertionError) as e:
        run_state_machine_as_test(machine, settings=budget_settings(None, shrink=False))
    if not lockstep:
        assert code in str(e.value)


def test_a_replicas_store_takes_only_bytes_continuing_its_log(tmp_path: Path) -> None:
    with _pair(tmp_path, ASYNC, SMALL) as p:
        with pytest.raises(ValueError, match="file start"):
            p.slave.append_replica(5, b"x")  # an empty log starts at a file start
        p.send(Message(T, b"a"), 0)
        assert p.replicate() == 1
        end = p.acked
        with pytest.raises(ValueError, match="do not continue"):
            p.slave.append_replica(end + 1, b"x")
        with pytest.raises(ValueError, match="cross the end"):
            p.slave.append_replica(end, b"x" * 4096)
        assert p.slave_records == 1 and p.replicate() == 0
    pooled = MessageStore.open(tmp_path / "pooled", config=StoreConfig(transient_store_pool=True))
    try:
        with pytest.raises(ValueError, match="TransientStorePool"):
            pooled.append_data(0, b"x")
    finally:
        pooled.close()


def test_the_master_closes_a_connection_reporting_past_its_end(tmp_path: Path) -> None:
    with _pair(tmp_path, SYNC) as p:
        p.send(Message(T, b"a"), 0)
        p.client.report(1 << 40)  # not the connection's first report: ReadSocketService returns false
        p._read_reports(1)
        assert not p.connected
        p._read_reports(1)  # nothing to read from a closed connection
        assert p.send(Message(T, b"b"), 0).status is SendStatus.SLAVE_NOT_AVAILABLE


def test_the_master_writes_nothing_before_the_first_report(tmp_path: Path) -> None:
    with _pair(tmp_path, ASYNC) as p:
        p.send(Message(T, b"a"), 0)
        assert p.master.store is not None and p.address is not None
        log = p.master.store.commitlog
        client = HaClient()
        client.connect(p.address, 0)
        assert p.server is not None
        conn = p.server.accept(p.clock.now())
        try:
            assert conn.write_frames(log, log.max_offset, None, 0) == [] and conn.next_transfer_from == -1
            assert not client.at_eof()  # nothing to read, the stream open
            conn.close()
            conn.close()
            assert client.at_eof() and not client.open and client.at_eof()
        finally:
            client.close()
            conn.close()
