"""Master/slave replication (HA) of RocketMQ 4.9.8: roles, configuration and the pure decisions.

Theory of operation
-------------------
Pure rules only, no state: ``model/ha_pair.py`` holds a master and a slave ``ModelBroker`` and asks these
functions what to answer. Each rule cites the 4.9.8 code it follows (store jar 4.9.8, broker jar 4.9.7 as
the 4.9.8 distribution ships it; read with ``javap -c -p``):

- ``BrokerRole`` (S/config/BrokerRole): ASYNC_MASTER (the default), SYNC_MASTER, SLAVE.
- ``HaConfig``: the MessageStoreConfig / BrokerConfig / SubscriptionGroupConfig fields HA reads, with 4.9.8's
  defaults (MessageStoreConfig.<init>: haSendHeartbeatInterval 5000, haHousekeepingInterval 20000,
  haSlaveFallbehindMax 268435456, slaveTimeout 3000, syncFlushTimeout 5000, brokerRole ASYNC_MASTER; BrokerConfig
  slaveReadEnable false; MessageStoreConfig offsetCheckInSlave false, accessMessageInMemoryMaxRatio 40;
  SubscriptionGroupConfig whichBrokerWhenConsumeSlowly 1, brokerId 0). ``BROKER_CONF_KEYS`` names each field's
  broker.conf key (``SUBSCRIPTION_GROUP_KEYS`` the group's fields); ``ha_config_from_properties`` reads them as
  MixAll.properties2Object does (MessageStoreConfig.setBrokerRole(String) is BrokerRole.valueOf).
  NOTE: 4.9.8 has no ``haMaxGapNotInSync`` (a 5.x key); its gap bound is ``haSlaveFallbehindMax``.
- ``connection_alive``: HAConnection.ReadSocketService drops a slave's connection when nothing was read from it for
  more than haHousekeepingInterval (strict ``>``); the slave (HAService.HAClient) reports its max offset after every
  transfer it writes and at least every haSendHeartbeatInterval, so a live link never drops.
- ``is_slave_ok`` (HAService.isSlaveOK): a connection is counted (connectionCount > 0) and
  ``put_end - push2SlaveMaxOffset < haSlaveFallbehindMax`` where put_end is the new message's end
  (wroteOffset + wroteBytes).
- ``replica_status`` (CommitLog.submitReplicaRequest + HAService.GroupTransferService.doWaitTransfer): only a
  SYNC_MASTER and only a message that waits (``isWaitStoreMsgOK``: WAIT, true by default) waits for the slave;
  not ``is_slave_ok`` → SLAVE_NOT_AVAILABLE at once; else the request waits until push2SlaveMaxOffset reaches the
  message's end or ``slaveTimeout`` (NOT syncFlushTimeout) passed → PUT_OK / FLUSH_SLAVE_TIMEOUT. Either way the
  message stays stored on the master (nothing is rolled back).
- ``combine_put_status`` (CommitLog.lambda$asyncPutMessage$0): the flush status is set when not PUT_OK, then the
  replica status when not PUT_OK — a replica failure wins over FLUSH_DISK_TIMEOUT.
- ``suggest_pulling_from_slave`` (DefaultMessageStore.getMessage): the distance from the last scanned record's
  commitlog offset to the commitlog's max offset exceeds ``TOTAL_PHYSICAL_MEMORY_SIZE * ratio / 100``.
- ``suggest_broker_id`` (PullMessageProcessor.processRequest): with slaveReadEnable, whichBrokerWhenConsumeSlowly
  when the store suggests the slave, else the group's brokerId (0); without it always MASTER_ID (0) — on either
  role. A SLAVE without slaveReadEnable sets PULL_RETRY_IMMEDIATELY first, but the status switch that follows
  overwrites the code for EVERY GetMessageStatus (FOUND → SUCCESS): in 4.9.8 a slave serves reads whatever
  slaveReadEnable says (``SLAVE_READ_CODE_OVERWRITTEN``).
- ``slave_pull_status``: a pull a master answers PULL_OFFSET_MOVED (the client's OFFSET_ILLEGAL) is answered
  PULL_RETRY_IMMEDIATELY (the client's NO_MATCHED_MSG) by a SLAVE unless offsetCheckInSlave, with the group's
  brokerId suggested, and no offset-moved event is written.
- Writes on a SLAVE (DefaultMessageStore.checkStoreStatus): every put is refused with SERVICE_NOT_AVAILABLE
  ("broke role is slave, so putMessage is forbidden"); SendMessageProcessor answers code 14.

Simplifications, measured against a real 4.9.8 pair (docs/ha-facts.md; docs/fidelity.md HA- and HA-R rows): the
slave reconnects at once when the link heals (real: SEND_OK again 1.5-2.9 s later, its HAClient retrying every 5 s);
a link that is up replicates within slaveTimeout (real: 0.02 s); a fresh slave starts from the master's first
commitlog file (4.9.8 starts an empty slave at the master's LAST file: the model's logs fit one file);
TOTAL_PHYSICAL_MEMORY_SIZE is the ``total_physical_memory`` parameter. After a master's disk loss the pair stays
apart; real 4.9.8 acknowledges sends the slave never gets (its defect, HA-R9), which the HA invariants report.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping

import attrs

MASTER_ID = 0  # MixAll.MASTER_ID
SLAVE_ID = 1  # the usual brokerId of the first slave

# 4.9.8 really overwrites a SLAVE's PULL_RETRY_IMMEDIATELY with the GetMessageStatus's code (see the docstring)
SLAVE_READ_CODE_OVERWRITTEN = True


class BrokerRole(enum.Enum):
    ASYNC_MASTER = "ASYNC_MASTER"
    SYNC_MASTER = "SYNC_MASTER"
    SLAVE = "SLAVE"

    @property
    def is_master(self) -> bool:
        return self is not BrokerRole.SLAVE


class ReplicaStatus(enum.Enum):
    """The PutMessageStatus values the replica request can complete with."""

    PUT_OK = "PUT_OK"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


@attrs.frozen
class HaConfig:
    """HA settings with 4.9.8's defaults (``BROKER_CONF_KEYS``: the broker.conf keys)."""

    broker_role: BrokerRole = BrokerRole.ASYNC_MASTER
    ha_slave_fallbehind_max: int = 268_435_456
    slave_timeout_ms: int = 3000
    sync_flush_timeout_ms: int = 5000
    ha_housekeeping_interval_ms: int = 20_000
    ha_send_heartbeat_interval_ms: int = 5000
    slave_read_enable: bool = False
    offset_check_in_slave: bool = False
    access_message_in_memory_max_ratio: int = 40
    # StoreUtil.TOTAL_PHYSICAL_MEMORY_SIZE: the machine's memory (an assumption: 16 GiB)
    total_physical_memory: int = 16 * 1024**3
    which_broker_when_consume_slowly: int = SLAVE_ID
    group_broker_id: int = MASTER_ID
    # BrokerController: SlaveSynchronize.syncAll every 10 s on a SLAVE
    slave_sync_interval_ms: int = 10_000


BROKER_CONF_KEYS: dict[str, str] = {
    "broker_role": "brokerRole",
    "ha_slave_fallbehind_max": "haSlaveFallbehindMax",
    "slave_timeout_ms": "slaveTimeout",
    "sync_flush_timeout_ms": "syncFlushTimeout",
    "ha_housekeeping_interval_ms": "haHousekeepingInterval",
    "ha_send_heartbeat_interval_ms": "haSendHeartbeatInterval",
    "slave_read_enable": "slaveReadEnable",
    "offset_check_in_slave": "offsetCheckInSlave",
    "access_message_in_memory_max_ratio": "accessMessageInMemoryMaxRatio",
}
# not broker.conf keys: fields of a subscription group (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP); broker.conf's own
# ``brokerId`` is the broker's id (0 master, 1 slave)
SUBSCRIPTION_GROUP_KEYS: dict[str, str] = {
    "which_broker_when_consume_slowly": "whichBrokerWhenConsumeSlowly",
    "group_broker_id": "brokerId",
}


def ha_config_from_properties(props: Mapping[str, str], base: HaConfig | None = None) -> HaConfig:
    """The HA fields of a broker.conf as MixAll.properties2Object sets them: values untrimmed,
    ``Integer.parseInt`` / ``Boolean.parseBoolean`` (true in any case, anything else false) /
    ``BrokerRole.valueOf`` (exact); a value the parse refuses is swallowed and leaves the field as it was."""
    cfg = base if base is not None else HaConfig()
    changes: dict[str, object] = {}
    for field, key in BROKER_CONF_KEYS.items():
        text = props.get(key)
        if text is None:
            continue
        current = getattr(cfg, field)
        if isinstance(current, BrokerRole):
            if text in BrokerRole.__members__:
                changes[field] = BrokerRole[text]
        elif isinstance(current, bool):
            changes[field] = text.lower() == "true"
        elif re.fullmatch(r"[+-]?[0-9]+", text) and -(2**31) <= int(text) < 2**31:
            changes[field] = int(text)
    return attrs.evolve(cfg, **changes)  # type: ignore[arg-type]


def connection_alive(link_up: bool, now: int, last_report_ts: int, housekeeping_ms: int) -> bool:
    """HAConnection.ReadSocketService: alive while the link is up, else until ``housekeeping_ms`` passed
    (strictly) since the slave's last report."""
    return link_up or now - last_report_ts <= housekeeping_ms


def is_slave_ok(connected: bool, put_end: int, acked: int, fallbehind_max: int) -> bool:
    """HAService.isSlaveOK(masterPutWhere)."""
    return connected and put_end - acked < fallbehind_max


def replica_status(
    role: BrokerRole, waits: bool, connected: bool, link_up: bool, put_end: int, acked: int, fallbehind_max: int
) -> ReplicaStatus:
    """CommitLog.submitReplicaRequest + GroupTransferService: what the replica request completes with.
    ``link_up``: the slave can reach ``put_end`` before slaveTimeout (assumption: a live link always can)."""
    if role is not BrokerRole.SYNC_MASTER or not waits:
        return ReplicaStatus.PUT_OK
    if not is_slave_ok(connected, put_end, acked, fallbehind_max):
        return ReplicaStatus.SLAVE_NOT_AVAILABLE
    if acked >= put_end or link_up:
        return ReplicaStatus.PUT_OK
    return ReplicaStatus.FLUSH_SLAVE_TIMEOUT


def combine_put_status(flush_status: str, replica: ReplicaStatus) -> str:
    """CommitLog.asyncPutMessage's combination: a replica status other than PUT_OK wins."""
    if replica is not ReplicaStatus.PUT_OK:
        return replica.value
    return flush_status


def suggest_pulling_from_slave(max_phy_offset: int, last_scanned_offset: int | None, cfg: HaConfig) -> bool:
    """DefaultMessageStore.getMessage: ``maxOffsetPy - maxPhyOffsetPulling > memory * ratio / 100`` (false when
    no unit was scanned)."""
    if last_scanned_offset is None:
        return False
    memory = cfg.total_physical_memory * (cfg.access_message_in_memory_max_ratio / 100.0)
    return max_phy_offset - last_scanned_offset > memory


def suggest_broker_id(cfg: HaConfig, from_slave: bool) -> int:
    """PullMessageProcessor: suggestWhichBrokerId of an answer (either role)."""
    if not cfg.slave_read_enable:
        return MASTER_ID
    return cfg.which_broker_when_consume_slowly if from_slave else cfg.group_broker_id


def slave_pull_status(client_status: str, cfg: HaConfig) -> str:
    """A SLAVE's answer as the client sees it: OFFSET_ILLEGAL (code 21) becomes NO_MATCHED_MSG (code 20,
    PULL_RETRY_IMMEDIATELY) unless offsetCheckInSlave; every other status as a master answers it."""
    if client_status == "OFFSET_ILLEGAL" and not cfg.offset_check_in_slave:
        return "NO_MATCHED_MSG"
    return client_status


def parse_role(text: str) -> BrokerRole:
    """broker.conf's brokerRole value (BrokerRole.valueOf: exact, upper case)."""
    return BrokerRole(text.strip())
