"""``MmapHaPair``: two ``MmapBroker`` stores, a master and its slave, replicating over a real TCP connection.

Theory of operation
-------------------
The pair has ``model/ha_pair.HaPair``'s interface and answers; its state is real: two store directories
(``master``, ``slave`` under ``root``; a temporary directory removed by ``close`` when ``root`` is None), the
master's HA port (``impl/ha.HaServer`` on 127.0.0.1, an ephemeral port), the accepted ``HaConnection`` and the
slave's ``HaClient`` — the bytes between them are 4.9.8's HA framing (``impl/ha.py``). The rules are the model's
pure decisions (``model/ha.py``: ``connection_alive``, ``replica_status``, ``combine_put_status``,
``suggest_pulling_from_slave``, ``suggest_broker_id``, ``slave_pull_status``); the rows the pair writes are the
model pair's (``PairRecorder``: ``detail.broker`` / ``detail.broker_id`` on every row, the master's ``send`` rows
held until the replica's answer, ``replicate`` and ``ha_link`` rows).

- The slave is an ``MmapBroker`` with ``slave`` set: its store refuses every put (``BrokerLog._check_writable``,
  DefaultMessageStore.checkStoreStatus: SERVICE_NOT_AVAILABLE with the model's ``SLAVE_PUT_REMARK``; a send to it
  answers TOPIC_NOT_EXIST first when its topic is not synced yet, as the model's does). Its records arrive only
  through the connection: ``MmapBroker.append_replica`` appends the master's bytes at their offset and
  dispatches them to its consume queues (``MessageStore.append_data``: the store's own dispatch), so its
  commitlog is a byte-for-byte prefix of the master's and its msg ids are the master's.
- ``connected``: the master's HAConnection is open (isSlaveOK's connectionCount). A link ``cut`` stops every byte
  (nothing is written to the sockets while it is cut) but closes nothing; ``_housekeep`` (run by every operation)
  has the slave report while the link is up, and the master close a connection it read nothing from for more
  than haHousekeepingInterval (``ha.connection_alive``: CLOSED, an ``ha_link`` DROPPED row). ``heal`` reconnects:
  the slave drops a closed connection and connects again (a new socket, accepted by the master), or keeps the
  open one, and reports its max offset.
- ``acked``: push2SlaveMaxOffset, the largest offset the master read from the slave.
- ``replicate(n)``: the master writes the frames moving up to ``n`` more records (``ha.plan_frames``: whole
  records, 32 KiB frames), the slave reads and appends them and reports after each; the master reads the reports.
  One ``replicate`` row names the records (``[commitlog offset, msg_key]``) as the slave dispatched them.
- ``crash_master(lose_disk)``: the master's store killed as ``MmapBroker.crash("kill")`` does (every written byte
  survives) and its sockets closed with the process; the slave sees the stream end and closes its side. A disk
  loss: the master restarts on a fresh empty directory (``master-<n>``) and the pair is ``diverged`` (the link
  never reconnects: the model's choice, fidelity HA-6). ``restart_master``: the store recovered, a new HA port,
  the slave reconnects when the link is up.
- ``crash_slave`` / ``restart_slave`` (the model pair's, docs/ha-facts.md "The slave crashes"): the slave's store
  killed as ``MmapBroker.crash("kill")`` does (every written byte survives, its unflushed tail included: the
  page cache outlives a process kill) and its socket closed; with the link up the master reads the end of the
  stream at once and closes the connection (DROPPED), with the link cut it reads nothing until housekeeping or
  ``heal``. ``restart_slave``: the store recovered (``MmapBroker.recover``, still a SLAVE) and, when the link is
  up, the master runs and the pair has not diverged, a new TCP connection whose first report is the slave's
  own max offset (HEALED): the master's WriteSocketService resumes there; else it connects at ``heal`` or at
  the master's restart.
- ``sync_metadata``: SlaveSynchronize.syncAll as the model does it — topics and groups set on the slave's
  metadata files, consumer offsets put over the slave's table per queue then persisted, the master's delay
  progress written to the slave's ``config/delayOffset.json`` (and kept as ``slave_delay_offsets``).

Simplifications: those of ``impl/ha.py`` (frames at record boundaries, a report at every operation while the
link is up) and of the model pair (the killed slave's socket closes at once, no batch or oneway send through the
pair, metadata only when asked); docs/fidelity.md HA-11..HA-14.
"""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path
from typing import Any

import attrs

from rmqspec.impl.broker import MmapBroker
from rmqspec.impl.broker_lifecycle import CRASHED, RUNNING
from rmqspec.impl.codec import DecodedRecord
from rmqspec.impl.configfiles import save_delay_offsets
from rmqspec.impl.ha import HaClient, HaConnection, HaProtocolError, HaServer
from rmqspec.impl.scratch import scratch_dir
from rmqspec.model.clock import ManualClock
from rmqspec.model.config import BrokerConfig
from rmqspec.model.events import ListRecorder, Recorder
from rmqspec.model.ha import (
    MASTER_ID,
    SLAVE_ID,
    BrokerRole,
    HaConfig,
    ReplicaStatus,
    combine_put_status,
    connection_alive,
    replica_status,
    slave_pull_status,
    suggest_broker_id,
    suggest_pulling_from_slave,
)
from rmqspec.model.ha_pair import PairPull, PairRecorder
from rmqspec.model.message import PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, Message, MessageQueue
from rmqspec.model.results import BrokerError, PullStatus, ResponseCode, SendResult, SendStatus


class MmapHaPair:
    """A master ``MmapBroker`` and its slave over a real HA connection (see the module docstring)."""

    def __init__(
        self,
        ha: HaConfig | None = None,
        root: Path | None = None,
        *,
        config: BrokerConfig | None = None,
        clock: ManualClock | None = None,
        recorder: Recorder | None = None,
    ) -> None:
        self.ha = ha if ha is not None else HaConfig(broker_role=BrokerRole.SYNC_MASTER)
        if not self.ha.broker_role.is_master:
            raise ValueError("the pair's role is its master's: ASYNC_MASTER or SYNC_MASTER")
        self.config = config if config is not None else BrokerConfig()
        self.clock = clock if clock is not None else ManualClock()
        self.recorder: Recorder = recorder if recorder is not None else ListRecorder()
        self._own_root = root is None
        self.root = scratch_dir("rmqspec-mmap-ha-pair-scratch-") if root is None else Path(root)
        name = self.config.broker_name
        self.master_rec = PairRecorder(self.recorder, name, MASTER_ID)
        self.slave_rec = PairRecorder(self.recorder, name, SLAVE_ID)
        self.master_dirs = 0  # a disk loss moves the master to a fresh directory
        self.master = MmapBroker.open(self._master_root(), self.clock, self.config, self.master_rec)
        slave_dir = self.root / BrokerRole.SLAVE.value.lower()  # root/slave
        self.slave = MmapBroker.open(slave_dir, self.clock, self.config, self.slave_rec)
        self.slave.slave = self.slave.log.slave = True  # brokerRole SLAVE: every put refused
        self.server: HaServer | None = HaServer()
        self.conn: HaConnection | None = None
        self.client = HaClient()
        self.link_up = True
        self.acked = 0  # push2SlaveMaxOffset
        self.diverged = False
        self.disk_lost = False
        self.slave_delay_offsets: dict[int, int] = {}
        self._connect()

    # -- helpers ----------------------------------------------------------

    def _master_root(self) -> Path:
        return self.root / ("master" if self.master_dirs == 0 else f"master-{self.master_dirs}")

    @property
    def role(self) -> BrokerRole:
        return self.ha.broker_role

    @property
    def connected(self) -> bool:
        return self.conn is not None and self.conn.open

    @property
    def master_running(self) -> bool:
        return self.master.state == RUNNING

    @property
    def both_running(self) -> bool:
        return self.master.state == RUNNING and self.slave.state == RUNNING

    @property
    def slave_records(self) -> int:
        return self.slave.commitlog_record_count()

    @property
    def address(self) -> tuple[str, int] | None:
        """The master's HA port (None while the master is down)."""
        return self.server.address if self.server is not None else None

    def broker(self, broker_id: int) -> MmapBroker:
        if broker_id not in (MASTER_ID, SLAVE_ID):
            raise ValueError(f"broker id must be {MASTER_ID} or {SLAVE_ID}, got {broker_id}")
        return self.master if broker_id == MASTER_ID else self.slave

    def _emit(self, event: str, broker_id: int, **fields: Any) -> None:
        rec = self.master_rec if broker_id == MASTER_ID else self.slave_rec
        rec.emit(event, self.clock.now(), actor="broker", **fields)

    def _slave_max(self) -> int:
        assert self.slave.store is not None
        return self.slave.store.commitlog.max_offset

    def _connect(self) -> None:
        """connectMaster + the first report: a new connection the master accepts and reads."""
        assert self.server is not None
        self.client.connect(self.server.address, self._slave_max())
        self.conn = self.server.accept(self.clock.now())
        self.client.report(self._slave_max())
        self._read_reports(1)

    def _read_reports(self, count: int) -> None:
        """The master reads ``count`` reports; a broken stream closes the connection."""
        for _ in range(count):
            if not self.connected:
                return
            assert self.conn is not None
            try:
                assert self.master.store is not None
                offset = self.conn.read_report(self.clock.now(), self.master.store.commitlog)
            except (HaProtocolError, OSError):
                self.conn.close()
                return
            self.acked = max(self.acked, offset)  # notifyTransferSome

    def _drop_connection(self) -> None:
        if self.conn is not None:
            self.conn.close()

    def _drop_dead_slave(self) -> None:
        """The master reads the killed slave's end of stream (its socket closed): the connection closes, a
        DROPPED row."""
        if self.connected:
            self._read_reports(1)  # reads the closed stream: CLOSED
            self._drop_connection()
            self._emit("ha_link", MASTER_ID, status="DROPPED", commitlog_offset=self.acked)

    def _can_connect(self) -> bool:
        return self.link_up and self.both_running and not self.diverged and self.server is not None

    def _housekeep(self) -> None:
        """A live link reports; the master closes a connection silent for more than haHousekeepingInterval."""
        now = self.clock.now()
        if self.link_up and self.connected and self.client.open:
            assert self.conn is not None
            if now != self.conn.last_read_ts:
                self.client.report(self.client.current_reported_offset)
                self._read_reports(1)
        if self.connected:
            assert self.conn is not None
            if not connection_alive(self.link_up, now, self.conn.last_read_ts, self.ha.ha_housekeeping_interval_ms):
                self._drop_connection()
                self._emit("ha_link", MASTER_ID, status="DROPPED", commitlog_offset=self.acked)

    @property
    def can_transfer(self) -> bool:
        return self.link_up and self.connected and self.client.open and not self.diverged and self.both_running

    def _transfer(self, n: int | None = None) -> int:
        """Up to ``n`` more records over the connection, reported; one ``replicate`` row."""
        assert self.conn is not None and self.master.store is not None
        now = self.clock.now()
        commitlog = self.master.store.commitlog
        before = self.acked
        frames = self.conn.write_frames(commitlog, commitlog.files.readable_offset, n, now)
        if not frames and self.conn.heartbeat_due(now, self.ha.ha_send_heartbeat_interval_ms):
            frames = [self.conn.write_heartbeat(now)]
        records: list[DecodedRecord] = []
        reports = self.client.reports
        with contextlib.suppress(HaProtocolError):  # the client closed the connection (dispatchReadRequest false)
            records = self.client.dispatch(len(frames), self._slave_max(), self.slave.append_replica)
        self._read_reports(self.client.reports - reports)
        if not self.client.open:
            self._read_reports(1)  # the master reads the end of the stream: the connection closes
        if not records:
            return 0
        self._emit("replicate", SLAVE_ID, commitlog_offset=self.acked,
                   detail={"from": before, "records": [
                       [r.commitlog_offset, r.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)]
                       for r in records]})
        return len(records)

    # -- admin --------------------------------------------------------------

    def create_topic(self, topic: str, queue_nums: int) -> None:
        """On the master (the slave learns it at the next ``sync_metadata``)."""
        self.master.create_topic(topic, queue_nums)

    def create_group(self, group: str, retry_max_times: int = 16, retry_queue_nums: int = 1) -> None:
        self.master.create_group(group, retry_max_times, retry_queue_nums)

    # -- HA link and time ----------------------------------------------------

    def cut(self) -> None:
        """The network between master and slave fails: no byte passes, no socket closes."""
        if self.link_up:
            self._housekeep()
            self.link_up = False
            self._emit("ha_link", MASTER_ID, status="CUT", commitlog_offset=self.acked)

    def heal(self) -> None:
        """The network comes back; the slave reconnects (or keeps its open connection) and reports."""
        if self.link_up:
            return
        self.link_up = True
        if self.slave.state != RUNNING:
            self._drop_dead_slave()  # the master's next write meets the dead slave's closed socket
        if self._can_connect():
            if self.connected and self.client.open:
                self.client.report(self._slave_max())
                self._read_reports(1)
            else:
                self._drop_connection()
                self._connect()
        self._emit("ha_link", MASTER_ID, status="HEALED", commitlog_offset=self.acked)

    def advance(self, ms: int) -> None:
        """Time passes; the master's background services run."""
        self.clock.advance(ms)
        self._housekeep()
        if self.master_running:
            self.master.tick()

    def replicate(self, n: int | None = None) -> int:
        """Transfer up to ``n`` more records (all by default) when the link allows; the count moved."""
        self._housekeep()
        if not self.can_transfer:
            return 0
        return self._transfer(n)

    def sync_metadata(self) -> bool:
        """SlaveSynchronize.syncAll; False (nothing synced) when the master is unreachable."""
        self._housekeep()
        if not self.link_up or not self.both_running:
            return False
        m, s = self.master, self.slave
        for topic, nums in m.meta.topics.items():
            if s.meta.topics.get(topic) != nums:
                s.meta.set_topic(topic, nums)
        for key, queues in m.offsets.table.items():  # putAll: the master's topic@group entries replace the slave's
            s.offsets.table[key] = dict(queues)
        s.offsets.persist()
        self.slave_delay_offsets = dict(m.schedule.offsets)
        assert s.store is not None
        save_delay_offsets(s.store.delay_offset_path, self.slave_delay_offsets)
        for group, cfg in m.meta.groups.items():
            if s.meta.groups.get(group) != cfg:
                s.meta.set_group(group, cfg)
        return True

    # -- producing and consuming ---------------------------------------------

    def send(self, msg: Message, queue_id: int, broker_id: int = MASTER_ID) -> SendResult:
        """SEND_MESSAGE to the master (with the replica's answer) or to the slave (refused)."""
        self._housekeep()
        if broker_id == SLAVE_ID:
            return self.slave.send(msg, queue_id)  # the store refuses: SERVICE_NOT_AVAILABLE
        with self.master_rec.hold() as rows:
            res = self.master.send(msg, queue_id)
        assert self.master.store is not None
        end = res.commitlog_offset + self.master.store.read(res.commitlog_offset).size
        status, waited = self._replica_answer(msg, end)
        final = combine_put_status(res.status.value, status)
        self.master_rec.release(rows, final if status is not ReplicaStatus.PUT_OK else None,
                                role=self.role.value, wait=msg.waits_for_flush, end=end,
                                slave_acked=self.acked, **({"waited_ms": waited} if waited else {}))
        return attrs.evolve(res, status=SendStatus(final))

    def _replica_answer(self, msg: Message, end: int) -> tuple[ReplicaStatus, int]:
        """What the replica request completes with, replicating / waiting as it does; (status, ms waited)."""
        status = replica_status(self.role, msg.waits_for_flush, self.connected, self.can_transfer, end,
                                self.acked, self.ha.ha_slave_fallbehind_max)
        if status is ReplicaStatus.PUT_OK and self.role is BrokerRole.SYNC_MASTER and msg.waits_for_flush:
            self._transfer()
        if status is ReplicaStatus.FLUSH_SLAVE_TIMEOUT:
            self.clock.advance(self.ha.slave_timeout_ms)
            self._housekeep()
            return status, self.ha.slave_timeout_ms
        return status, 0

    def pull(self, broker_id: int, group: str, mq: MessageQueue, offset: int, max_nums: int = 32,
             subscription: str | None = "*") -> PairPull:
        """PULL_MESSAGE to one broker of the pair, with its suggestWhichBrokerId."""
        self._housekeep()
        b = self.broker(broker_id)
        res = b.pull(group, mq, offset, max_nums, subscription)
        last = res.messages[-1].commitlog_offset if res.messages else None
        assert b.store is not None
        from_slave = suggest_pulling_from_slave(b.store.commitlog.max_offset, last, self.ha)
        suggest = suggest_broker_id(self.ha, from_slave)
        if broker_id == SLAVE_ID:
            status = slave_pull_status(res.status.value, self.ha)
            if status != res.status.value:
                res = attrs.evolve(res, status=PullStatus(status))
                suggest = self.ha.group_broker_id
        return PairPull(res, suggest)

    def update_offset(self, broker_id: int, group: str, mq: MessageQueue, offset: int) -> None:
        self._housekeep()
        self.broker(broker_id).update_offset(group, mq, offset)

    def query_offset(self, broker_id: int, group: str, mq: MessageQueue) -> int:
        self._housekeep()
        return self.broker(broker_id).query_offset(group, mq)

    # -- master loss -------------------------------------------------------------

    def _master_down(self) -> None:
        """The master's process is gone: its sockets close; the slave reads the end of the stream."""
        self._drop_connection()
        if self.server is not None:
            self.server.close()
            self.server = None
        self.client.at_eof()

    def crash_master(self, lose_disk: bool = False) -> None:
        """The master's process dies (its written records survive) or its machine and disk are lost."""
        self._housekeep()
        self.master.crash("kill")
        self._master_down()
        if lose_disk:
            self.disk_lost = True
            self._emit("ha_link", MASTER_ID, status="DISK_LOST", commitlog_offset=self.acked,
                       detail={"role": self.role.value})

    def restart_master(self) -> None:
        """The master comes back: with its records after a kill, empty after a disk loss (pair diverged)."""
        if self.master.state != CRASHED:
            raise BrokerError(ResponseCode.SYSTEM_ERROR, "the master is running")
        if self.disk_lost:
            self.master_dirs += 1
            self.master = MmapBroker.open(self._master_root(), self.clock, self.config, self.master_rec)
            self.disk_lost = False
            self.diverged = True
            self._emit("recover", MASTER_ID, status="DISK_LOST", detail={"survivors": 0})
        else:
            self.master.recover()
        self.server = HaServer()
        if self._can_connect():
            self._connect()

    # -- slave loss --------------------------------------------------------------

    def crash_slave(self) -> None:
        """The slave's process is killed as ``MmapBroker.crash("kill")`` kills a store (every written byte
        survives) and its socket closes with it: with the link up the master reads the end of the stream at once
        (DROPPED); with the link cut it reads nothing until housekeeping or ``heal``."""
        self._housekeep()
        self.slave.crash("kill")
        self.client.close()
        if self.link_up:
            self._drop_dead_slave()

    def restart_slave(self) -> None:
        """The slave's store recovered (still a SLAVE); when the link allows, a new TCP connection reporting the
        slave's own max offset (HEALED): the master resumes from there at the next transfer."""
        if self.slave.state != CRASHED:
            raise BrokerError(ResponseCode.SYSTEM_ERROR, f"the slave is {self.slave.state.lower()}")
        self._housekeep()
        self.slave.recover()
        if self._can_connect():
            self._drop_connection()  # a connection the cut kept open on the master is the dead process's
            self._connect()
            self._emit("ha_link", MASTER_ID, status="HEALED", commitlog_offset=self.acked)

    # -- teardown ----------------------------------------------------------------

    def close(self) -> None:
        """Close the sockets and both stores (a crashed master's store is already released); remove a
        temporary root."""
        self._master_down()
        self.client.close()
        for b in (self.master, self.slave):
            if b.state == RUNNING:
                b.close()
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> MmapHaPair:
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):
            self.close()
