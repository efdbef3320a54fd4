"""``HaPair``: a master ``ModelBroker`` and its slave, replicating over an HA link you can cut.

Theory of operation
-------------------
Two ``ModelBroker`` objects share one manual clock and one recorder; each writes through a ``PairRecorder``
that adds ``detail.broker`` (the broker name) and ``detail.broker_id`` (0 master, 1 slave) to its rows. The slave
is a ``ModelBroker`` whose store refuses every put (``Store.slave``: DefaultMessageStore.checkStoreStatus), so a
send, a send-back or an offset-moved event on it changes nothing; it holds a PREFIX of the master's commitlog
— the very ``Record`` values, so offsets, queue offsets and msg ids (the master's store host) are the master's —
appended by the pair (``_transfer``) and dispatched to its consume queues as they arrive. Pure decisions come from
``model/ha.py``; this module owns the state:

- ``link_up``: the network between the two (``cut`` / ``heal``);
- ``connected``: the master's HAConnection (counted by isSlaveOK). It is up while the link is; after a cut it
  drops once ``haHousekeepingInterval`` passed (strictly) since the slave's last report (``_housekeep``, run by
  every operation); ``heal`` reconnects at once (assumption: 4.9.8's HAClient retries every 5 s) and the slave
  reports its offset;
- ``acked``: push2SlaveMaxOffset, the slave's reported end. A transfer is reported at once (the HAClient reports
  after every write), so it is always the end of the slave's last record.

Actions (who acts / enabled when / effects):

- ``send(msg, queue_id, broker_id=0)``: the master stores as a single broker does, then ``ha.replica_status``:
  under SYNC_MASTER, a waiting message with the link up is replicated (everything before it with it) before the
  answer, SEND_OK; the link cut but the connection not yet dropped: the clock advances by ``slaveTimeout`` and the
  answer is FLUSH_SLAVE_TIMEOUT; no connection (or a gap ≥ haSlaveFallbehindMax): SLAVE_NOT_AVAILABLE at once.
  The message stays stored either way. ASYNC_MASTER answers SEND_OK and replicates later (``replicate``). To the
  slave: refused (SERVICE_NOT_AVAILABLE; TOPIC_NOT_EXIST first when its topic is not synced yet).
- ``replicate(n=None)``: enabled when the link is up, the master runs and the pair has not diverged: up to ``n``
  more records (all by default) go to the slave; one ``replicate`` row names them.
- ``cut()`` / ``heal()`` / ``advance(ms)``: the link and the clock; ``advance`` also runs the master's ``tick``.
- ``sync_metadata()``: SlaveSynchronize.syncAll (every 10 s on a real slave; explicit here): topics, consumer
  offsets (putAll on a table keyed by topic@group: the master's topic@group entries replace the slave's whole
  entries — its commits to other queues of them included —, the slave's other topic@groups stay), delay
  progress (written to the slave's delayOffset.json, ``slave_delay_offsets``; the slave's schedule service does
  not run) and subscription groups. Needs the link and the master.
- ``pull(broker_id, ...)``: from the master, or from the slave's prefix; with the suggested broker id
  (``PairPull``). ``update_offset`` / ``query_offset`` on either broker (ConsumerManageProcessor has no role check).
- ``crash_master(lose_disk)`` / ``restart_master()``: a kill keeps the master's written records; a disk loss
  restarts it empty. After a disk loss the pair is ``diverged``: the link never reconnects (assumption: 4.9.8's
  slave, ahead of an empty master, cannot resume; the operator rebuilds the pair), so SYNC sends answer
  SLAVE_NOT_AVAILABLE.
- ``crash_slave()`` / ``restart_slave()`` (docs/ha-facts.md "The slave crashes", fidelity HA-R3b): a kill keeps
  the slave's written records, its unflushed tail included (a process kill leaves the page cache: nothing of a
  slave's log is lost); its sockets close with it, so with the link up the master drops the connection at once
  (``ha_link`` DROPPED: a SYNC_MASTER answers SLAVE_NOT_AVAILABLE without waiting, an ASYNC_MASTER SEND_OK);
  with the link cut the close reaches the master only by housekeeping or at ``heal`` (a DROPPED row either way).
  While the slave is down, requests to it are refused as a down broker's are (SERVICE_NOT_AVAILABLE), nothing
  replicates and ``sync_metadata`` syncs nothing. Restarted on its store (``crash`` / ``recover`` rows of broker
  1, as the master's), it reconnects when the link is up, the master runs and the pair has not diverged —
  ``ha_link`` HEALED, its own end reported (push2SlaveMaxOffset stays: the slave kept its prefix) — and receives
  what it missed at the next transfer; otherwise it stays disconnected until a ``heal`` or the master's restart.

Trace rows the pair adds (docs/trace-schema.md): ``replicate`` (``commitlog_offset`` the slave's new end,
``detail.from``, ``detail.records`` [[commitlog offset, msg_key], ...]), ``ha_link`` (``status`` CUT, HEALED — the
link back, or a restarted slave reconnected —, DROPPED — by housekeeping, or the killed slave's sockets closed
—, DISK_LOST; ``commitlog_offset`` the slave's end then), ``crash`` / ``recover`` of broker 0 or 1, and on
the master's ``send`` rows ``detail.role``, ``detail.wait``, ``detail.end`` (the record's end) and
``detail.slave_acked`` at the answer.

Simplifications (docs/fidelity.md HA-): replication in record units, not 32 KiB byte chunks; the killed slave's
sockets close at once (real: with the JVM's last thread, ≈250 ms later — a send in between waits slaveTimeout,
docs/ha-facts.md); the restarted slave reconnects at once (real: ≈1 s); no batch or oneway send through the
pair; metadata sync only when asked; a slave's pull reports the last returned message as the last scanned unit.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import attrs

from rmqspec.model.broker import ModelBroker
from rmqspec.model.clock import ManualClock
from rmqspec.model.config import BrokerConfig
from rmqspec.model.crash import BrokerState
from rmqspec.model.events import ListRecorder, Recorder, TraceEvent
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
from rmqspec.model.message import Message, MessageQueue
from rmqspec.model.results import BrokerError, PullResult, PullStatus, ResponseCode, SendResult, SendStatus


class PairRecorder:
    """Adds ``detail.broker`` / ``detail.broker_id`` to a broker's rows; ``hold()`` keeps its ``send`` rows back
    until the pair knows the answer (``release``)."""

    def __init__(self, inner: Recorder, broker: str, broker_id: int) -> None:
        self.inner = inner
        self.broker = broker
        self.broker_id = broker_id
        self.held: list[tuple[str, int, dict[str, Any]]] | None = None

    def emit(self, event: str, ts: int, **fields: Any) -> TraceEvent:
        detail = dict(fields.pop("detail", None) or {})
        detail.setdefault("broker", self.broker)
        detail["broker_id"] = self.broker_id
        fields["detail"] = detail
        if self.held is not None and event == "send":
            self.held.append((event, ts, fields))
            return TraceEvent(seq=-1, ts=ts, event=event, **fields)
        return self.inner.emit(event, ts, **fields)

    @contextlib.contextmanager
    def hold(self) -> Iterator[list[tuple[str, int, dict[str, Any]]]]:
        self.held = []
        try:
            yield self.held
        finally:
            self.held = None

    def release(self, rows: list[tuple[str, int, dict[str, Any]]], status: str | None, **extra: Any) -> None:
        for event, ts, fields in rows:
            if status is not None and fields.get("status") in ("SEND_OK", "FLUSH_DISK_TIMEOUT"):
                fields["status"] = status
            fields["detail"] = {**fields["detail"], **extra}
            self.inner.emit(event, ts, **fields)


@attrs.frozen
class PairPull:
    """A pull's answer and the broker the answer suggests for the next pull (suggestWhichBrokerId)."""

    result: PullResult
    suggest_broker_id: int


class HaPair:
    """A master and its slave (see the module docstring)."""

    def __init__(
        self,
        ha: HaConfig | None = None,
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
        name = self.config.broker_name
        self.master_rec = PairRecorder(self.recorder, name, MASTER_ID)
        self.slave_rec = PairRecorder(self.recorder, name, SLAVE_ID)
        self.master = ModelBroker(self.clock, self.config, self.master_rec)
        self.slave = ModelBroker(self.clock, self.config, self.slave_rec)
        self.slave.store.slave = True
        now = self.clock.now()
        self.link_up = True
        self.connected = True
        self.last_report_ts = now
        self.acked = 0  # push2SlaveMaxOffset
        self.diverged = False
        self.disk_lost = False
        self.slave_delay_offsets: dict[int, int] = {}

    # -- helpers ----------------------------------------------------------

    @property
    def role(self) -> BrokerRole:
        return self.ha.broker_role

    def broker(self, broker_id: int) -> ModelBroker:
        if broker_id not in (MASTER_ID, SLAVE_ID):
            raise ValueError(f"broker id must be {MASTER_ID} or {SLAVE_ID}, got {broker_id}")
        return self.master if broker_id == MASTER_ID else self.slave

    def _emit(self, event: str, broker_id: int, **fields: Any) -> None:
        rec = self.master_rec if broker_id == MASTER_ID else self.slave_rec
        rec.emit(event, self.clock.now(), actor="broker", **fields)

    def _housekeep(self) -> None:
        """The master drops a silent slave's connection after haHousekeepingInterval (strict)."""
        now = self.clock.now()
        if self.link_up and self.connected:
            self.last_report_ts = now  # a live link reports at least every haSendHeartbeatInterval
        if self.connected and not connection_alive(self.link_up, now, self.last_report_ts,
                                                   self.ha.ha_housekeeping_interval_ms):
            self.connected = False
            self._emit("ha_link", MASTER_ID, status="DROPPED", commitlog_offset=self.acked)

    @property
    def both_running(self) -> bool:
        return self.master.state is BrokerState.RUNNING and self.slave.state is BrokerState.RUNNING

    @property
    def can_transfer(self) -> bool:
        return self.link_up and self.connected and not self.diverged and self.both_running

    def _drop(self) -> None:
        """The master's connection closes (the killed slave's sockets closed with it): a DROPPED row."""
        if self.connected:
            self.connected = False
            self._emit("ha_link", MASTER_ID, status="DROPPED", commitlog_offset=self.acked)

    def _reconnect(self) -> bool:
        """The slave connects when it can (link up, both running, not diverged) and reports its end."""
        if not (self.link_up and self.both_running and not self.diverged):
            return False
        self.connected = True
        self.last_report_ts = self.clock.now()
        return True

    @property
    def slave_records(self) -> int:
        return len(self.slave.store.records)

    def _transfer(self, n: int | None = None) -> int:
        """Up to ``n`` more master records to the slave, reported at once; one ``replicate`` row."""
        src = self.master.store.records
        start = self.slave_records
        stop = len(src) if n is None else min(len(src), start + n)
        if stop <= start:
            return 0
        before = self.acked
        for record in src[start:stop]:
            self.slave.store.append(record)
        self.acked = src[stop - 1].end
        self.last_report_ts = self.clock.now()
        self._emit("replicate", SLAVE_ID, commitlog_offset=self.acked,
                   detail={"from": before, "records": [[r.commitlog_offset, r.uniq_key] for r in src[start:stop]]})
        return stop - start

    # -- admin --------------------------------------------------------------

    def create_topic(self, topic: str, queue_nums: int) -> None:
        """On the master (the slave learns it at the next ``sync_metadata``)."""
        self.master.create_topic(topic, queue_nums)

    def create_group(self, group: str, retry_max_times: int = 16, retry_queue_nums: int = 1) -> None:
        self.master.create_group(group, retry_max_times, retry_queue_nums)

    # -- HA link and time ----------------------------------------------------

    def cut(self) -> None:
        """The network between master and slave fails."""
        if self.link_up:
            self._housekeep()
            self.link_up = False
            self._emit("ha_link", MASTER_ID, status="CUT", commitlog_offset=self.acked)

    def heal(self) -> None:
        """The network comes back; the slave reconnects and reports its offset (unless diverged)."""
        if self.link_up:
            return
        self.link_up = True
        if self.slave.state is not BrokerState.RUNNING:
            self._drop()  # the master's next write meets the dead slave's closed socket
        self._reconnect()
        self._emit("ha_link", MASTER_ID, status="HEALED", commitlog_offset=self.acked)

    def advance(self, ms: int) -> None:
        """Time passes; the master's background services run."""
        self.clock.advance(ms)
        self._housekeep()
        if self.master.state is BrokerState.RUNNING:
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
        s.store.topics.update(m.store.topics)
        # ConsumerOffsetManager's offsetTable is keyed by topic@group, each a map queue → offset: putAll replaces
        # the slave's whole entry of every topic@group the master has (its commits to other queues go too)
        synced = {(group, topic) for group, topic, _queue in m.offsets.table}
        for key in [k for k in s.offsets.table if (k[0], k[1]) in synced]:
            del s.offsets.table[key]
        s.offsets.table.update(m.offsets.table)
        s.offsets.persist()  # ConsumerOffsetManager.persist after the putAll
        self.slave_delay_offsets = dict(m.schedule.progress)
        s.groups.update(m.groups)
        return True

    # -- producing and consuming ---------------------------------------------

    def send(self, msg: Message, queue_id: int, broker_id: int = MASTER_ID) -> SendResult:
        """SEND_MESSAGE to the master (with the replica's answer) or to the slave (refused)."""
        self._housekeep()
        if broker_id == SLAVE_ID:
            return self._send_to_slave(msg, queue_id)
        with self.master_rec.hold() as rows:
            res = self.master.send(msg, queue_id)
        end = self.master.store.records[self.master.store.index[res.commitlog_offset]].end
        status, waited = self._replica_answer(msg, end)
        final = combine_put_status(res.status.value, status)
        self.master_rec.release(rows, final if status is not ReplicaStatus.PUT_OK else None,
                                role=self.role.value, wait=msg.waits_for_flush, end=end,
                                slave_acked=self.acked, **({"waited_ms": waited} if waited else {}))
        return attrs.evolve(res, status=SendStatus(final))

    def _send_to_slave(self, msg: Message, queue_id: int) -> SendResult:
        return self.slave.send(msg, queue_id)  # the store refuses: SERVICE_NOT_AVAILABLE

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
        from_slave = suggest_pulling_from_slave(b.store.write_pos, last, self.ha)
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

    def crash_master(self, lose_disk: bool = False) -> None:
        """The master's process dies (its written records survive) or its machine and disk are lost."""
        self._housekeep()
        self.master.crash("kill")
        self.connected = False
        if lose_disk:
            self.disk_lost = True
            self._emit("ha_link", MASTER_ID, status="DISK_LOST", commitlog_offset=self.acked,
                       detail={"role": self.role.value})

    def restart_master(self) -> None:
        """The master comes back: with its records after a kill, empty after a disk loss (pair diverged)."""
        if self.master.state is not BrokerState.CRASHED:
            raise BrokerError(ResponseCode.SYSTEM_ERROR, "the master is running")
        if self.disk_lost:
            self.master = ModelBroker(self.clock, self.config, self.master_rec)
            self.disk_lost = False
            self.diverged = True
            self._emit("recover", MASTER_ID, status="DISK_LOST", detail={"survivors": 0})
        else:
            self.master.recover()
        self._reconnect()

    # -- slave loss --------------------------------------------------------------

    def crash_slave(self) -> None:
        """The slave's process is killed (its written records survive: the page cache outlives a kill). Its
        sockets close with it: with the link up the master drops the connection at once (a DROPPED row); with
        the link cut nothing reaches the master, which drops it by housekeeping or when the link heals."""
        self._housekeep()
        self.slave.crash("kill")
        if self.link_up:
            self._drop()

    def restart_slave(self) -> None:
        """The slave comes back on its store (every record it had) and, when the link allows, reconnects and
        reports its own end (a HEALED row): it receives what it missed at the next transfer."""
        if self.slave.state is not BrokerState.CRASHED:
            raise BrokerError(ResponseCode.SYSTEM_ERROR, f"the slave is {self.slave.state.value.lower()}")
        self._housekeep()
        self.slave.recover()
        if self._reconnect():
            self._emit("ha_link", MASTER_ID, status="HEALED", commitlog_offset=self.acked)
