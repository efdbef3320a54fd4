"""What every request handler of the server sees: settings, the served broker, clients, held pulls.

Theory of operation
-------------------
Handlers are plain functions ``handler(ctx, conn, request) -> response | None``
(None: no response — a oneway request, a held pull, an END_TRANSACTION of
type NOT). They run one at a time on the server's single thread, so nothing
here is locked. ``Ctx`` carries:

- ``settings`` (addresses, names, the broker configuration text GET_BROKER_CONFIG
  answers) and ``config`` (the ``BrokerConfig`` the broker runs with);
- ``served`` (``ServedBroker``), ``clients`` (``ClientRegistry``), ``held``
  (``HeldPulls``), ``wire`` (trace events the server emits for a broker that
  records none itself; ``NO_WIRE_EVENTS`` otherwise);
- the server's side of the protocol: ``request_to(conn, ...)`` sends a
  oneway request on a client's connection with the server's own opaque
  counter (RocketMQ's ``RemotingCommand.requestId``), ``notify_consumers``
  (NOTIFY_CONSUMER_IDS_CHANGED to every member of a group) and ``mark_stored``
  (a request may have stored messages: the server re-checks held pulls).

Responses are built with ``ok`` / ``refuse``; a handler refuses by raising
``BrokerError(code, remark)`` (or a ``CommandError`` / ``BodyError`` for a
bad field or body, answered SYSTEM_ERROR by the dispatcher).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Mapping
from typing import Any, Protocol

import attrs

from rmqspec.model.clock import Clock
from rmqspec.model.config import BrokerConfig
from rmqspec.model.ha import MASTER_ID, SLAVE_ID
from rmqspec.remoting.clients import ClientRegistry
from rmqspec.remoting.codes import RequestCode
from rmqspec.remoting.command import FLAG_ONEWAY, RemotingCommand, response_to
from rmqspec.remoting.longpoll import HeldPulls
from rmqspec.remoting.served import ServedBroker
from rmqspec.remoting.wire_events import WireEvents

NOT_SET = "not set any response code"  # RemotingCommand.createResponseCommand's default remark
V3_4_9 = 121  # MQVersion.Version.V3_4_9.ordinal(): maxReconsumeTimes in requests is honoured from here


class Connection(Protocol):
    """The server side of one client connection."""

    peer: str

    def send(self, cmd: RemotingCommand) -> None: ...

    def close(self) -> None: ...


@attrs.frozen
class ServeSettings:
    """Where and as whom the server answers (broker.conf's brokerName, brokerIP1, ...)."""

    host: str = "127.0.0.1"
    namesrv_port: int = 9876
    port: int = 10911
    broker_ip: str = "127.0.0.1"
    broker_name: str = "broker-a"
    cluster: str = "DefaultCluster"
    region: str = "DefaultRegion"
    tick_ms: int = 100
    store_dir: str = ""
    # extra broker.conf keys shown by GET_BROKER_CONFIG (key -> value), besides the ones the server derives
    extra_properties: tuple[tuple[str, str], ...] = ()
    # ``serve --ha-role``: the slave's port (0 = any free port); None: one broker, no pair
    slave_port: int | None = None

    @property
    def broker_addr(self) -> str:
        return f"{self.broker_ip}:{self.port}"

    @property
    def slave_addr(self) -> str | None:
        return None if self.slave_port is None else f"{self.broker_ip}:{self.slave_port}"

    @property
    def broker_addrs(self) -> dict[int, str]:
        """BrokerData.brokerAddrs: brokerId → address (0 the master, 1 its slave when serving a pair)."""
        addrs = {MASTER_ID: self.broker_addr}
        if self.slave_addr is not None:
            addrs[SLAVE_ID] = self.slave_addr
        return addrs

    @property
    def namesrv_addr(self) -> str:
        return f"{self.broker_ip}:{self.namesrv_port}"


class Ctx:
    """Shared state of one server (see the module docstring)."""

    def __init__(
        self,
        served: ServedBroker,
        config: BrokerConfig,
        settings: ServeSettings,
        clock: Clock,
        wire: WireEvents,
    ) -> None:
        self.served = served
        self.broker: Any = served.broker
        self.config = config
        self.settings = settings
        self.clock = clock
        self.wire = wire
        self.clients = ClientRegistry()
        self.held = HeldPulls()
        self.stored = False  # set by requests that may have stored a message
        self.pop_revives_seen: set[tuple[str, int, int]] = set()  # retry copies popped (handlers_pop)
        self.held_pops: list[Any] = []  # handlers_pop.HeldPop: empty pops held until a re-run finds messages
        self.request_modes: Any = None  # handlers_assign.RequestModes, read from the store on first use
        self._opaque = itertools.count(1)
        self.topic_version = itertools.count(1)  # dataVersion.counter of GET_ALL_TOPIC_CONFIG
        self.started_ms = clock.now()
        self.on_log: Callable[[str], None] = lambda _msg: None

    @property
    def store_host(self) -> tuple[str, int]:
        return self.config.store_host, self.config.store_port

    @property
    def born_host(self) -> tuple[str, int]:
        """The born host the mmap store writes (the store host, port 0): pulled bytes equal the disk's."""
        return self.config.store_host, 0

    @property
    def faq(self) -> str:
        """FAQUrl.suggestTodo's line for the served release (``Version.suggest_todo``)."""
        return self.config.behaviour.suggest_todo()

    def now(self) -> int:
        return self.clock.now()

    def mark_stored(self) -> None:
        self.stored = True

    def request_to(self, conn: Hashable, code: RequestCode, ext: Mapping[str, Any], body: bytes = b"") -> None:
        """A oneway request from the broker on a client's connection (flag 2, our opaque)."""
        cmd = RemotingCommand(code=int(code), opaque=next(self._opaque), flag=FLAG_ONEWAY, ext_fields=ext,
                              body=body)
        conn.send(cmd)  # type: ignore[attr-defined]

    def notify_consumers(self, group: str) -> None:
        """NOTIFY_CONSUMER_IDS_CHANGED to every connection of ``group`` (DefaultConsumerIdsChangeListener)."""
        for conn in self.clients.consumer_channels(group):
            self.request_to(conn, RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": group})


def ok(req: RemotingCommand, ext: Mapping[str, Any] | None = None, body: bytes = b"",
       remark: str | None = None) -> RemotingCommand:
    return response_to(req, 0, remark, ext, body)


def refuse(req: RemotingCommand, code: int, remark: str | None,
           ext: Mapping[str, Any] | None = None) -> RemotingCommand:
    return response_to(req, code, remark, ext)


Handler = Callable[[Ctx, Any, RemotingCommand], RemotingCommand | None]
