"""Deliberately broken master/slave pairs (issue 43), each breaking one HA rule of ``model/ha_pair.py``.

Each is an ``HaPair`` subclass with one guard removed; ``tests/model/test_ha.py`` drives it against the model
pair and expects a counterexample in lockstep (its answers differ from the model's) and by the invariants alone
(``properties/inv_ha.py`` over its own trace):

- ``sync_ack_before_replica``: a SYNC_MASTER answers SEND_OK without waiting for the slave (the message goes to
  the slave only at a later ``replicate``) — HA_SYNC_ACK_UNREPLICATED;
- ``slave_accepts_writes``: the slave's store takes puts (checkStoreStatus's SLAVE guard removed) —
  HA_SLAVE_WROTE;
- ``slave_serves_beyond_replica``: a pull to the slave reads records the slave never received (it copies the
  master's tail without a transfer) — HA_SLAVE_BEYOND_REPLICATED;
- ``slave_restarts_empty``: a killed slave restarts on an empty store and reports 0 (its log is not recovered),
  so the master sends everything again from 0 over the records it had — HA_SLAVE_NOT_PREFIX.
"""

from __future__ import annotations

from collections.abc import Callable

from rmqspec.model.broker import ModelBroker
from rmqspec.model.ha import HaConfig, ReplicaStatus
from rmqspec.model.ha_pair import HaPair, PairPull
from rmqspec.model.message import Message, MessageQueue


class SyncAckBeforeReplica(HaPair):
    """CHECK guard removed: the SYNC_MASTER's wait for push2SlaveMaxOffset ≥ the message's end."""

    def _replica_answer(self, msg: Message, end: int) -> tuple[ReplicaStatus, int]:
        return ReplicaStatus.PUT_OK, 0


class SlaveAcceptsWrites(HaPair):
    """CHECK guard removed: DefaultMessageStore.checkStoreStatus's refusal on a SLAVE."""

    def __init__(self, ha: HaConfig | None = None) -> None:
        super().__init__(ha)
        self.slave.store.slave = False


class SlaveServesBeyondReplica(HaPair):
    """CHECK guard removed: the slave serves only its replicated prefix."""

    def pull(self, broker_id: int, group: str, mq: MessageQueue, offset: int, max_nums: int = 32,
             subscription: str | None = "*") -> PairPull:
        if broker_id == 1 and self.master.store.records:
            for record in self.master.store.records[len(self.slave.store.records):]:
                self.slave.store.append(record)  # no transfer, no report: the slave reads ahead
        return super().pull(broker_id, group, mq, offset, max_nums, subscription)


class SlaveRestartsEmpty(HaPair):
    """CHECK guard removed: the restarted slave recovers its own store and reports its end."""

    def restart_slave(self) -> None:
        super().restart_slave()
        self.slave = ModelBroker(self.clock, self.config, self.slave_rec)
        self.slave.store.slave = True
        self.acked = 0


BROKEN_PAIRS: dict[str, Callable[[HaConfig], HaPair]] = {
    "sync_ack_before_replica": SyncAckBeforeReplica,
    "slave_accepts_writes": SlaveAcceptsWrites,
    "slave_serves_beyond_replica": SlaveServesBeyondReplica,
    "slave_restarts_empty": SlaveRestartsEmpty,
}

# the invariant code that catches each without the model beside it
CAUGHT_BY: dict[str, str] = {
    "sync_ack_before_replica": "HA_SYNC_ACK_UNREPLICATED",
    "slave_accepts_writes": "HA_SLAVE_WROTE",
    "slave_serves_beyond_replica": "HA_SLAVE_BEYOND_REPLICATED",
    "slave_restarts_empty": "HA_SLAVE_NOT_PREFIX",
}
