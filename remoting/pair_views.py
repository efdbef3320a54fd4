"""``rmqspec serve --ha-role``: the master's and the slave's ``Broker``-shaped views of one ``MmapHaPair``.

Theory of operation
-------------------
A served pair is one ``impl/ha_pair.MmapHaPair`` (stores in ``DIR/master`` and ``DIR/slave``, the HA link a
real 127.0.0.1 TCP connection in 4.9.8's framing) behind two broker ports of one ``RmqServer``. Each port has
its own ``Ctx`` (clients, held pulls: a 4.9.8 slave is a broker process of its own) whose broker is a view:

- ``MasterView`` is the master ``MmapBroker`` with ``send`` going through ``MmapHaPair.send(…, MASTER_ID)``: a
  SYNC_MASTER answers after the pair replicated the message (``SEND_OK``), or with the pair's
  FLUSH_SLAVE_TIMEOUT / SLAVE_NOT_AVAILABLE, which the master port's SEND_MESSAGE(_V2) answers as codes 12 / 11
  with SEND_OK's header (``send_through_pair``; the message is stored on the master). Everything else (pulls,
  offsets, admin, transactions, batches, the schedule service) is the master broker's, as a single ``serve``
  does it. ``tick`` runs the master's
  services, then replicates whatever is outstanding (**every tick, both roles**: 4.9.8's HAConnection
  WriteSocketService transfers continuously, so an ASYNC_MASTER's slave catches up within a tick, and the
  records a SYNC_MASTER did not wait for — batches, oneway sends, schedule re-puts, transaction commits — reach
  the slave the same way), and runs SlaveSynchronize (``sync_metadata``: topics, groups, consumer offsets,
  delay progress) first ``SYNC_FIRST_MS`` after start, then every ``HaConfig.slave_sync_interval_ms``
  (10 s), as 4.9.8's ``BrokerController`` schedules it.
- ``SlaveView`` is the slave ``MmapBroker`` (``slave`` set: its store refuses every put with
  SERVICE_NOT_AVAILABLE and 4.9.8's remark, so sends, batches, sends back and transaction ends to it are
  refused and nothing is written); pulls are served from its replicated prefix with 4.9.8's slave answer
  (``pull_on_slave``: where a master moves the offset, 20 PULL_RETRY_IMMEDIATELY, the offset kept; a pull's
  commit bit ignored); UPDATE_CONSUMER_OFFSET / QUERY_CONSUMER_OFFSET commit and read the slave's own
  table. A 4.9.8 slave runs no schedule or transaction-check service: ``tick`` runs nothing; ``close``
  closes nothing (the master's view closes the pair: both stores).

The wall clock cannot be moved: ``ServeClock`` is the server's clock with an ``advance`` that does not
move it, so a FLUSH_SLAVE_TIMEOUT is answered at once rather than after slaveTimeout (unreachable in serve:
nothing cuts the link; docs/fidelity.md HA-17). suggestWhichBrokerId is 0 on both ports, which is what
4.9.8 answers with slaveReadEnable false (the only setting served).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from rmqspec.impl.ha_pair import MmapHaPair
from rmqspec.model.clock import Clock
from rmqspec.model.config import BrokerConfig
from rmqspec.model.events import NullRecorder
from rmqspec.model.ha import MASTER_ID, SLAVE_ID, BrokerRole, HaConfig, slave_pull_status
from rmqspec.model.message import Message
from rmqspec.model.results import PullStatus, ResponseCode, SendResult, SendStatus
from rmqspec.remoting.codes import PULL_FLAG_COMMIT_OFFSET, RequestCode
from rmqspec.remoting.command import RemotingCommand
from rmqspec.remoting.context import Ctx, Handler
from rmqspec.remoting.handlers_consume import PULL_OFFSET_MOVED, PULL_RETRY_IMMEDIATELY, pull_message
from rmqspec.remoting.handlers_send import send_message

SYNC_FIRST_MS = 3000  # BrokerController: SlaveSynchronize's first syncAll 3 s after start
# SendMessageProcessor.handlePutMessageResult: sendOK with these codes (the header still names the message)
REPLICA_CODES: dict[SendStatus | None, int] = {
    SendStatus.FLUSH_SLAVE_TIMEOUT: ResponseCode.FLUSH_SLAVE_TIMEOUT,
    SendStatus.SLAVE_NOT_AVAILABLE: ResponseCode.SLAVE_NOT_AVAILABLE,
}


class ServeClock:
    """The server's clock for the pair: ``now`` is the server's; ``advance`` leaves it where it is."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock

    def now(self) -> int:
        return self.clock.now()

    def advance(self, ms: int) -> int:
        return self.clock.now()


class _View:
    """A broker of the pair, with every attribute the served ``MmapBroker`` has (see the docstring)."""

    def __init__(self, pair: MmapHaPair, broker_id: int) -> None:
        self.pair = pair
        self.broker_id = broker_id

    def __getattr__(self, name: str) -> Any:
        return getattr(self.pair.broker(self.broker_id), name)

    def send(self, msg: Message, queue_id: int) -> SendResult:
        return self.pair.send(msg, queue_id, self.broker_id)


class MasterView(_View):
    def __init__(self, pair: MmapHaPair) -> None:
        super().__init__(pair, MASTER_ID)
        self.next_sync = pair.clock.now() + SYNC_FIRST_MS
        self.last_status: SendStatus | None = None  # of the last send: ``send_through_pair`` reads it

    def send(self, msg: Message, queue_id: int) -> SendResult:
        result = super().send(msg, queue_id)
        self.last_status = result.status
        return result

    def tick(self) -> list[Any]:
        checks = self.pair.master.tick()
        self.pair.replicate()
        now = self.pair.clock.now()
        if now >= self.next_sync:
            self.pair.sync_metadata()
            self.next_sync = now + self.pair.ha.slave_sync_interval_ms
        return list(checks)

    def close(self) -> None:
        self.pair.close()


class SlaveView(_View):
    def __init__(self, pair: MmapHaPair) -> None:
        super().__init__(pair, SLAVE_ID)

    def tick(self) -> list[Any]:
        return []

    def close(self) -> None:
        """The pair is closed by the master's view."""


def open_pair(role: BrokerRole, root: Path, config: BrokerConfig,
              clock: Clock) -> tuple[MmapHaPair, MasterView, SlaveView]:
    """The pair of ``role`` on ``root/master`` and ``root/slave`` (recovered when they exist), and its views."""
    root.mkdir(parents=True, exist_ok=True)
    pair = MmapHaPair(HaConfig(broker_role=role), root, config=config, clock=ServeClock(clock),  # type: ignore[arg-type]
                      recorder=NullRecorder())
    return pair, MasterView(pair), SlaveView(pair)


def send_through_pair(ctx: Ctx, conn: Any, req: RemotingCommand) -> RemotingCommand:
    """SEND_MESSAGE(_V2) on the master's port: ``send_message``, answered with the code of the pair's replica
    status (12 FLUSH_SLAVE_TIMEOUT / 11 SLAVE_NOT_AVAILABLE, msgId and offsets as for SEND_OK: the message is
    stored on the master) when the send was not replicated as SYNC_MASTER promises."""
    view = ctx.broker
    view.last_status = None
    response = send_message(ctx, conn, req)
    code = REPLICA_CODES.get(view.last_status)
    if response.code == ResponseCode.SUCCESS and code is not None:
        response = attrs.evolve(response, code=code)
    return response


def master_handlers(handlers: dict[int, Handler]) -> dict[int, Handler]:
    """The broker port's handler table for the master of a pair."""
    return {**handlers, RequestCode.SEND_MESSAGE: send_through_pair, RequestCode.SEND_MESSAGE_V2: send_through_pair}


def pull_on_slave(ctx: Ctx, conn: Any, req: RemotingCommand) -> RemotingCommand | None:
    """PULL_MESSAGE on the slave's port (PullMessageProcessor with brokerRole SLAVE): the commit bit is ignored
    (``storeOffsetEnable`` excludes a SLAVE), and a PULL_OFFSET_MOVED becomes PULL_RETRY_IMMEDIATELY with the
    store's remark and nextBeginOffset the offset asked (``ha.slave_pull_status``; nextOffsetCorrection keeps
    the old offset unless offsetCheckInSlave): a slave never moves a consumer."""
    flag = req.ext_fields.get("sysFlag")
    if flag is not None and flag.lstrip("-").isdigit() and int(flag) & PULL_FLAG_COMMIT_OFFSET:
        req = attrs.evolve(req, ext_fields={**req.ext_fields, "sysFlag": str(int(flag) & ~PULL_FLAG_COMMIT_OFFSET)})
    response = pull_message(ctx, conn, req)
    view = ctx.broker
    moved = slave_pull_status(PullStatus.OFFSET_ILLEGAL.value, view.pair.ha) != PullStatus.OFFSET_ILLEGAL.value
    if response is not None and response.code == PULL_OFFSET_MOVED and moved:
        ext = {**response.ext_fields, "nextBeginOffset": req.ext_fields["queueOffset"]}
        response = attrs.evolve(response, code=PULL_RETRY_IMMEDIATELY, ext_fields=ext)
    return response


def slave_handlers(handlers: dict[int, Handler]) -> dict[int, Handler]:
    """The broker port's handler table for the slave of a pair."""
    return {**handlers, RequestCode.PULL_MESSAGE: pull_on_slave}
