"""``RmqServer``: a RocketMQ 4.9 name server and broker in one process, serving a ``Broker`` object.

Theory of operation
-------------------
One asyncio event loop, one thread: every socket callback and every call
into the broker runs on it, so broker calls are serialized without locks
(``MmapBroker`` is not thread-safe). Two listening sockets: the name-server
port answers GET_ROUTEINFO_BY_TOPIC / GET_BROKER_CLUSTER_INFO (``namesrv``),
the broker port everything in ``BROKER_HANDLERS``; any other code gets
REQUEST_CODE_NOT_SUPPORTED (3, " request type N not supported").

With ``ha_role`` (``rmqspec serve --ha-role``) a third socket, the slave's port
(``settings.slave_port``), and the served broker is an ``MmapHaPair``: each broker
port has its own ``Ctx`` (clients, held pulls), whose broker is the master's or the
slave's view of the pair (``pair_views``, which also holds the two ports' handler
tables: the master's sends answered with the pair's replica codes, the slave's
pulls as a SLAVE answers them); a connection carries its port's ``Ctx``; the name
server lists both (brokerId 0 and 1); the tick runs each port's round.

Per connection (``_Conn``, an ``asyncio.Protocol``): bytes go into the pure
``FrameDecoder``; each complete frame is dispatched at once, in order; the
response (same opaque, flag 1, the request's serialize type) is written back.
Oneway requests (flag 2) are never answered; a response frame from a client
(flag 1) is ignored, as RocketMQ ignores responses it did not ask for.

Bad input (issue 10, item 5) never reaches the broker half-parsed and never
prints a traceback:

- a frame that cannot be decoded (length below 4 or above 16 MiB, unknown
  serialize type, a header that is not JSON / not a valid ROCKETMQ header):
  the frames before it are answered, then the connection is closed, as
  RocketMQ's ``NettyDecoder`` does — no opaque can be trusted to answer the
  bad one; one line is logged with the byte offset and reason;
- a client that disconnects mid-frame: the partial frame is dropped unseen;
- a missing or malformed ext field, a malformed body: SYSTEM_ERROR with a
  remark naming the field (``fields.command_error_remark``) or the body byte;
- a refusal of the broker (``BrokerError``): its code and remark;
- anything else a handler raises: SYSTEM_ERROR "<ExceptionType>: <message>",
  logged as one line.

A client that does not read its responses fills the transport's write buffer;
past asyncio's high-water mark (64 KiB) the server stops answering and reading
that connection (``pause_writing``; decoded requests wait in order) until the
buffer drains, so one slow client cannot grow the server's memory without bound.

Each frame is handled exactly once and its effects are complete before the
next is read, so a message is stored once per accepted send and never when a
send is refused or cut short.

Background (every ``settings.tick_ms``, 100 ms, or ``tick_period_ms``'s shorter period
for a fine timer wheel): ``broker.tick()`` runs the schedule, timer and
transaction-check services and the periodic persistence on the wall clock;
each ``CheckRequest`` goes as CHECK_TRANSACTION_STATE (oneway, the re-put half
in commitlog format with its real topic and queue) to a
connection of the half's producer group (``clients.producer_channel``; none
registered: the check is dropped, as RocketMQ drops it); held pulls whose
queue grew or whose deadline passed are answered (``longpoll``), held pops re-run
(``handlers_pop.rerun_pops``, also after every store); every 10 s
connections without a heartbeat for 120 s are forgotten and closed; the trace
is flushed.

``stop()`` (SIGTERM / SIGINT in ``rmqspec serve``): the listeners close, held
pulls and pops are dropped, connections closed, then ``broker.close()`` (the mmap
broker flushes, persists consumer offsets and delay progress, removes
``abort``) and the trace is closed.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import inspect
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from rmqspec.model.clock import Clock, WallClock
from rmqspec.model.config import BrokerConfig
from rmqspec.model.ha import BrokerRole
from rmqspec.model.message import InvalidMessage
from rmqspec.model.results import BrokerError, ResponseCode
from rmqspec.remoting.bodies import BodyError
from rmqspec.remoting.codes import RequestCode, unsupported_remark
from rmqspec.remoting.command import CommandError, RemotingCommand, response_to
from rmqspec.remoting.context import Ctx, Handler, ServeSettings, refuse
from rmqspec.remoting.fields import command_error_remark, missing_field
from rmqspec.remoting.frame import FrameDecoder, FrameError, encode_frame
from rmqspec.remoting.handlers_admin import (
    all_topic_config,
    broker_config,
    max_offset,
    min_offset,
    query_consume_queue,
    search_offset_by_timestamp,
    update_and_create_group,
    update_and_create_topic,
    view_message_by_id,
)
from rmqspec.remoting.handlers_assign import RequestModes, query_assignment, set_message_request_mode
from rmqspec.remoting.handlers_consume import (
    PULL_NOT_FOUND,
    PULL_RETRY_IMMEDIATELY,
    check_client_config,
    consumer_list,
    forget_departed,
    heart_beat,
    lock_batch,
    process_pull,
    pull_message,
    query_consumer_offset,
    unlock_batch,
    unregister_client,
    update_consumer_offset,
)
from rmqspec.remoting.handlers_pop import (
    POP_CODES,
    ack_message,
    batch_ack_message,
    change_invisible_time,
    pop_message,
    pops,
    rerun_pops,
)
from rmqspec.remoting.handlers_send import end_transaction, send_back, send_batch, send_message
from rmqspec.remoting.longpoll import HeldPull
from rmqspec.remoting.namesrv import cluster_info, route_info
from rmqspec.remoting.pair_views import master_handlers, open_pair, slave_handlers
from rmqspec.remoting.records import encode_stored
from rmqspec.remoting.served import ServedBroker
from rmqspec.remoting.trace_out import TraceWriter
from rmqspec.remoting.wire_events import NO_WIRE_EVENTS, WireEvents

log = logging.getLogger("rmqspec.serve")

NAMESRV_HANDLERS: dict[int, Handler] = {
    RequestCode.GET_ROUTEINFO_BY_TOPIC: route_info,
    RequestCode.GET_BROKER_CLUSTER_INFO: cluster_info,
}
BROKER_HANDLERS: dict[int, Handler] = {
    RequestCode.SEND_MESSAGE: send_message,
    RequestCode.SEND_MESSAGE_V2: send_message,
    RequestCode.SEND_BATCH_MESSAGE: send_batch,
    RequestCode.CONSUMER_SEND_MSG_BACK: send_back,
    RequestCode.END_TRANSACTION: end_transaction,
    RequestCode.PULL_MESSAGE: pull_message,
    RequestCode.QUERY_CONSUMER_OFFSET: query_consumer_offset,
    RequestCode.UPDATE_CONSUMER_OFFSET: update_consumer_offset,
    RequestCode.HEART_BEAT: heart_beat,
    RequestCode.CHECK_CLIENT_CONFIG: check_client_config,
    RequestCode.UNREGISTER_CLIENT: unregister_client,
    RequestCode.GET_CONSUMER_LIST_BY_GROUP: consumer_list,
    RequestCode.LOCK_BATCH_MQ: lock_batch,
    RequestCode.UNLOCK_BATCH_MQ: unlock_batch,
    RequestCode.UPDATE_AND_CREATE_TOPIC: update_and_create_topic,
    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: update_and_create_group,
    RequestCode.GET_ALL_TOPIC_CONFIG: all_topic_config,
    RequestCode.GET_BROKER_CONFIG: broker_config,
    RequestCode.GET_MAX_OFFSET: max_offset,
    RequestCode.GET_MIN_OFFSET: min_offset,
    RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: search_offset_by_timestamp,
    RequestCode.VIEW_MESSAGE_BY_ID: view_message_by_id,
    RequestCode.QUERY_CONSUME_QUEUE: query_consume_queue,
    RequestCode.POP_MESSAGE: pop_message,  # 5.x profiles whose broker pops; else 3 (handlers_pop)
    RequestCode.ACK_MESSAGE: ack_message,
    RequestCode.BATCH_ACK_MESSAGE: batch_ack_message,
    RequestCode.CHANGE_MESSAGE_INVISIBLETIME: change_invisible_time,
    RequestCode.QUERY_ASSIGNMENT: query_assignment,  # 5.x profiles; else 3 (handlers_assign)
    RequestCode.SET_MESSAGE_REQUEST_MODE: set_message_request_mode,
}
EXPIRE_SCAN_MS = 10_000  # ClientHousekeepingService period


def accepts_recorder(factory: Callable[..., Any]) -> bool:
    """Whether ``factory`` takes ``recorder=`` (then the broker records its own SPEC §8 events)."""
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return False
    return "recorder" in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


class _Conn(asyncio.Protocol):
    """One client connection (see the module docstring)."""

    def __init__(self, server: RmqServer, handlers: dict[int, Handler], ctx: Ctx | None = None) -> None:
        self.server = server
        self.handlers = handlers
        self.ctx = ctx  # the broker port's context (None: the name server's, the server's first)
        self.decoder = FrameDecoder()
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.closed = False
        self.paused = False
        self.backlog: collections.deque[RemotingCommand] = collections.deque()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.server.conns.add(self)

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        try:
            for cmd in self.decoder.feed_each(data):
                self.backlog.append(cmd)
        except FrameError as exc:
            log.warning("closing %s: bad frame at %s", self.peer, exc)
            self.paused = False  # the frames before the bad one are answered (as Netty would), then it closes
            self._work()
            self.close()
            return
        self._work()

    def _work(self) -> None:
        """Answer the decoded requests in order, stopping while the client does not read."""
        while self.backlog and not self.closed and not self.paused:
            self.server.dispatch(self, self.backlog.popleft())
        self.server.after_requests(self.ctx)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.decoder.pending:
            log.info("%s disconnected with %d bytes of an unfinished frame (dropped)", self.peer,
                     self.decoder.pending)
        self.closed = True
        self.server.connection_closed(self)

    def pause_writing(self) -> None:
        """The client does not read its responses: stop answering and reading until it does."""
        self.paused = True
        if self.transport is not None and not self.closed:
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        self.paused = False
        if self.transport is not None and not self.closed:
            self.transport.resume_reading()
            self._work()

    def send(self, cmd: RemotingCommand) -> None:
        if self.closed or self.transport is None:
            return
        try:
            frame = encode_frame(cmd)
        except FrameError as exc:
            log.warning("response to %s too large (%s): answering SYSTEM_ERROR", self.peer, exc.reason)
            frame = encode_frame(attrs.evolve(cmd, code=ResponseCode.SYSTEM_ERROR, body=b"", ext_fields={},
                                              remark=f"response too large: {exc.reason}"))
        self.transport.write(frame)

    def close(self) -> None:
        if not self.closed and self.transport is not None:
            self.closed = True
            self.transport.close()


class RmqServer:
    """See the module docstring. ``start()`` then ``stop()``, both on the loop that serves."""

    def __init__(
        self,
        factory: Callable[..., Any],
        config: BrokerConfig,
        settings: ServeSettings,
        workdir: str | Path,
        *,
        trace_dir: str | Path | None = None,
        clock: Clock | None = None,
        ha_role: BrokerRole | None = None,
    ) -> None:
        self.factory = factory
        self.ha_role = ha_role  # a master role: serve an MmapHaPair (pair_views), the slave on settings.slave_port
        self.config = config
        self.settings = settings
        self.workdir = Path(workdir)
        self.trace_dir = trace_dir
        self.clock = clock or WallClock()
        self.conns: set[_Conn] = set()
        self.ctx: Ctx | None = None  # the (master) broker port's
        self.slave_ctx: Ctx | None = None  # the slave port's, when serving a pair
        self.trace: TraceWriter | None = None
        self._servers: list[asyncio.base_events.Server] = []
        self._ticker: asyncio.Task[None] | None = None
        self._last_expire = 0
        self._stopped = False
        self.tick_errors = 0

    # -- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        s = self.settings
        namesrv = await loop.create_server(lambda: _Conn(self, NAMESRV_HANDLERS), s.host, s.namesrv_port,
                                           start_serving=False, reuse_address=True)
        handlers = BROKER_HANDLERS if self.ha_role is None else master_handlers(BROKER_HANDLERS)
        broker_srv = await loop.create_server(lambda: _Conn(self, handlers, self.ctx), s.host, s.port,
                                              start_serving=False, reuse_address=True)
        self._servers = [namesrv, broker_srv]
        ns_port = namesrv.sockets[0].getsockname()[1]
        port = broker_srv.sockets[0].getsockname()[1]
        self.settings = s = attrs.evolve(s, namesrv_port=ns_port, port=port)
        if self.ha_role is not None:
            on_slave = slave_handlers(BROKER_HANDLERS)
            slave_srv = await loop.create_server(lambda: _Conn(self, on_slave, self.slave_ctx), s.host,
                                                 s.slave_port or 0, start_serving=False, reuse_address=True)
            self._servers.append(slave_srv)
            self.settings = s = attrs.evolve(s, slave_port=slave_srv.sockets[0].getsockname()[1])
        self.config = attrs.evolve(self.config, store_host=s.broker_ip, store_port=port,
                                   broker_name=s.broker_name)
        if self.ha_role is not None:
            self._start_pair(s)
        else:
            self._start_broker(s)
        self._last_expire = self.clock.now()
        for srv in self._servers:
            await srv.start_serving()
        self._ticker = asyncio.create_task(self._tick_loop())

    def _start_pair(self, s: ServeSettings) -> None:
        assert self.ha_role is not None
        pair, master, slave = open_pair(self.ha_role, self.workdir, self.config, self.clock)
        self.ctx = Ctx(ServedBroker(master), self.config, s, self.clock, NO_WIRE_EVENTS)
        self.ctx.request_modes = RequestModes.load(str(pair.master.root))
        self.slave_ctx = Ctx(ServedBroker(slave), self.config, attrs.evolve(s, port=s.slave_port), self.clock,
                             NO_WIRE_EVENTS)
        self.slave_ctx.request_modes = RequestModes.load(str(pair.slave.root))

    def _start_broker(self, s: ServeSettings) -> None:
        recorder = None
        if self.trace_dir is not None:
            self.trace = TraceWriter(self.trace_dir, self.config)
            recorder = self.trace
        self_records = accepts_recorder(self.factory)
        self.workdir.mkdir(parents=True, exist_ok=True)
        if recorder is not None and self_records:
            broker = self.factory(self.clock, self.config, str(self.workdir), recorder=recorder)
        else:
            broker = self.factory(self.clock, self.config, str(self.workdir))
        wire = WireEvents(recorder, self.config) if recorder is not None and not self_records else NO_WIRE_EVENTS
        self.ctx = Ctx(ServedBroker(broker), self.config, s, self.clock, wire)
        self.ctx.request_modes = RequestModes.load(str(self.workdir))  # the store's messageRequestMode.json
        if self.trace is not None and self.trace.restarted:
            self.trace.emit("recover", self.clock.now(), actor="broker", status="RESTART",
                            detail={"trace": self.trace.path.name})

    async def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        for srv in self._servers:
            srv.close()
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker
        for ctx in self.contexts:
            ctx.held.all()
            ctx.held_pops = []
        for conn in list(self.conns):
            conn.close()
        for srv in self._servers:
            await srv.wait_closed()
        if self.ctx is not None:  # a pair: the master's view closes both stores
            try:
                self.ctx.broker.close()
            except Exception as exc:  # reported in one line; the trace is still closed
                log.error("broker close: %s: %s", type(exc).__name__, exc)
        if self.trace is not None:
            self.trace.close()

    @property
    def contexts(self) -> list[Ctx]:
        """The broker ports' contexts: the broker's (the master's), then the slave's."""
        return [ctx for ctx in (self.ctx, self.slave_ctx) if ctx is not None]

    @property
    def slave_addr(self) -> str | None:
        return self.settings.slave_addr

    @property
    def namesrv_addr(self) -> str:
        return f"{self.settings.broker_ip}:{self.settings.namesrv_port}"

    @property
    def broker_addr(self) -> str:
        return self.settings.broker_addr

    # -- requests --------------------------------------------------------------------------------

    def dispatch(self, conn: _Conn, cmd: RemotingCommand) -> None:
        if cmd.is_response:
            log.debug("%s sent a response (opaque %d) nobody asked for: ignored", conn.peer, cmd.opaque)
            return
        response = self.answer(conn, conn.handlers, cmd)
        if response is not None and not cmd.is_oneway:
            conn.send(response)

    def answer(self, conn: Any, handlers: dict[int, Handler], cmd: RemotingCommand) -> RemotingCommand | None:
        """The response to one request (None: none is sent), every failure mapped to a response."""
        ctx = getattr(conn, "ctx", None) or self.ctx
        assert ctx is not None
        handler = handlers.get(cmd.code)
        if handler is None or (cmd.code in POP_CODES and not pops(ctx)):  # 4.9: no pop processor
            return response_to(cmd, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, unsupported_remark(cmd.code))
        missing = missing_field(cmd)
        if missing is not None:
            return refuse(cmd, ResponseCode.SYSTEM_ERROR, command_error_remark(CommandError(missing,
                                                                                            "missing ext field")))
        return self._guarded(lambda: handler(ctx, conn, cmd), conn, cmd)

    def _guarded(self, call: Callable[[], RemotingCommand | None], conn: Any,
                 cmd: RemotingCommand) -> RemotingCommand | None:
        try:
            return call()
        except BrokerError as exc:
            return refuse(cmd, exc.code, exc.remark)
        except CommandError as exc:
            return refuse(cmd, ResponseCode.SYSTEM_ERROR, command_error_remark(exc))
        except BodyError as exc:
            return refuse(cmd, ResponseCode.SYSTEM_ERROR, f"request body: {exc}")
        except InvalidMessage as exc:
            return refuse(cmd, ResponseCode.MESSAGE_ILLEGAL, str(exc))
        except Exception as exc:  # a broker or handler bug: answered, logged in one line, server keeps serving
            log.error("%s from %s: %s: %s", cmd.describe(), getattr(conn, "peer", "?"), type(exc).__name__, exc)
            return refuse(cmd, ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")

    def after_requests(self, ctx: Ctx | None = None) -> None:
        ctx = ctx or self.ctx
        assert ctx is not None
        if ctx.stored and len(ctx.held):
            self._wake(ctx, self.clock.now())
        if ctx.stored and ctx.held_pops:
            rerun_pops(ctx, self.clock.now(), self._guarded)
        ctx.stored = False

    def connection_closed(self, conn: _Conn) -> None:
        self.conns.discard(conn)
        ctx = conn.ctx or self.ctx
        if ctx is None or self._stopped:
            return
        ctx.held.drop_connection(conn)
        ctx.held_pops = [h for h in ctx.held_pops if h.conn is not conn]
        for group in ctx.clients.closed(conn):
            ctx.notify_consumers(group)
        forget_departed(ctx)

    # -- background ------------------------------------------------------------------------------

    async def _tick_loop(self) -> None:
        period = tick_period_ms(self.settings.tick_ms, self.config) / 1000
        while True:
            await asyncio.sleep(period)
            self.tick()

    def tick(self) -> None:
        """One round of the background services (see the module docstring), on each broker port."""
        assert self.ctx is not None
        now = self.clock.now()
        expire = now - self._last_expire >= EXPIRE_SCAN_MS
        if expire:
            self._last_expire = now
        for ctx in self.contexts:
            self._tick_broker(ctx, expire)
        if self.trace is not None:
            self.trace.flush()

    def _tick_broker(self, ctx: Ctx, expire: bool) -> None:
        try:
            checks = ctx.broker.tick()
        except Exception as exc:
            self.tick_errors += 1
            if self.tick_errors <= 3:
                log.error("broker tick: %s: %s", type(exc).__name__, exc)
            checks = []
        now = self.clock.now()
        for check in checks:
            self._send_check(ctx, check, now)
        if len(ctx.held):
            self._wake(ctx, now)
        if ctx.held_pops:  # a revive may have made messages poppable: re-run the held pops
            rerun_pops(ctx, now, self._guarded)
        if expire:
            for conn in ctx.clients.expire(now):
                conn.close()  # type: ignore[attr-defined]
            forget_departed(ctx)

    def _send_check(self, ctx: Ctx, check: Any, now: int) -> None:
        ctx.wire.txn_check(now, check)
        conn = ctx.clients.producer_channel(check.producer_group)
        if conn is None:
            log.info("transaction check of %s: no connection of producer group %s", check.transaction_id,
                     check.producer_group)
            return
        msg = check.message
        ext = {"commitLogOffset": check.commitlog_offset, "tranStateTableOffset": check.tran_state_table_offset,
               "offsetMsgId": msg.msg_id}
        if check.transaction_id is not None:
            ext["msgId"] = ext["transactionId"] = check.transaction_id
        ctx.request_to(conn, RequestCode.CHECK_TRANSACTION_STATE, ext,
                       encode_stored(msg, ctx.store_host, ctx.born_host))

    def _wake(self, ctx: Ctx, now: int) -> None:
        served = ctx.served
        top: Callable[[str, int], int | None]
        if getattr(served.broker, "queue_range", None) is not None:
            top = lambda t, q: served.queue_range(t, q)[1]  # noqa: E731
        else:
            top = lambda t, q: None  # noqa: E731
        for pull in ctx.held.candidates(now, top):
            self._rerun(ctx, pull, now)

    def _rerun(self, ctx: Ctx, pull: HeldPull, now: int) -> None:
        conn = pull.conn
        if getattr(conn, "closed", False):
            return
        response = self._guarded(lambda: process_pull(ctx, conn, pull.request, allow_suspend=False), conn,
                                 pull.request)
        if response is None:
            return
        if response.code in (PULL_NOT_FOUND, PULL_RETRY_IMMEDIATELY) and now < pull.deadline:
            ctx.held.hold(pull)
            return
        conn.send(response)


def tick_period_ms(tick_ms: int, config: BrokerConfig) -> int:
    """The background period: ``tick_ms``, shortened for a 5.x timer wheel to its dequeue poll,
    ``100 × timerPrecisionMs / 1000`` ms (S/timer/TimerMessageStore.TimerDequeueGetService waits that
    long when no slot is due: 10 ms at precision 100, 100 ms at the default 1000), so a due copy is
    re-put about as promptly as RocketMQ does it (5.3.3 measured: 4-64 ms after its slot at precision
    100, 25-124 ms at 1000; ``interop/timer_probe.py``)."""
    if config.behaviour.timer_wheel and config.timer_wheel_enable:
        return max(1, min(tick_ms, 100 * config.timer_precision_ms // 1000))
    return tick_ms


# ----------------------------------------------------------------------------------------------
# running a server in a background thread (tests, benchmarks)


class ServerThread:
    """An ``RmqServer`` on its own event loop in a daemon thread: ``start()`` returns once it serves."""

    def __init__(self, server: RmqServer) -> None:
        self.server = server
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="rmqspec-serve", daemon=True)
        self._ready = threading.Event()
        self._error: BaseException | None = None

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self.server.start())
        except BaseException as exc:  # reported by start()
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        self.loop.run_forever()
        self.loop.run_until_complete(self.server.stop())
        self.loop.close()

    def start(self, timeout: float = 30.0) -> ServerThread:
        self._thread.start()
        if not self._ready.wait(timeout):
            raise TimeoutError("server did not start")
        if self._error is not None:
            raise self._error
        return self

    def call(self, fn: Callable[[], Any], timeout: float = 30.0) -> Any:
        """Run ``fn`` on the server's loop (e.g. to read broker state) and return its result."""
        async def run() -> Any:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout)

    def stop(self, timeout: float = 30.0) -> None:
        if self._thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout)
