"""``RemoteBroker``: the ``Broker`` protocol (SPEC §3) over the wire, against a running name server + broker.

Theory of operation
-------------------
``RemoteBroker(namesrv, clock)`` asks the name server (GET_BROKER_CLUSTER_INFO)
for the master (broker id 0) of the broker named ``config.broker_name``
(``broker-a``; a cluster with a single broker of another name is accepted),
opens one ``RemotingClient`` to it and one to the name server, and maps each
operation to one request built and parsed by ``client_ops`` (SPEC §3's table):

- ``create_topic`` → UPDATE_AND_CREATE_TOPIC 17, then polls
  GET_ROUTEINFO_BY_TOPIC 105 (bounded by ``route_wait_ms``) until the name
  server shows the topic on our broker with the requested queue counts (the
  broker re-registers after the update); ``create_group`` →
  UPDATE_AND_CREATE_SUBSCRIPTIONGROUP 200.
- ``send`` → SEND_MESSAGE_V2 310 as the Java producer sends it: properties =
  ``Message.wire_properties()`` with a UNIQ_KEY we assign when the message
  has none (``UniqKeyFactory``: our IP, pid), ``bornTimestamp`` from the
  injected clock (the only use of the clock: the remote broker keeps its own
  time), producer group ``producer_group``. ``send_half`` adds sysFlag 4,
  TRAN_MSG=true and PGROUP, and drops DELAY, as the transactional producer.
- ``end_transaction`` → END_TRANSACTION 37 *as a request*, where the Java
  client sends it oneway: so the broker's answer code (e.g. SYSTEM_ERROR "The
  transaction state table offset wrong") is observable. Exception: UNKNOWN
  (commitOrRollback 0) is sent oneway and answers SUCCESS, because the 4.9.8
  ``EndTransactionProcessor`` returns no response at all for it. ``msgId``
  is the half's UNIQ_KEY when this adapter sent the half or received its
  check, otherwise the offset msg id.
- ``pull`` → PULL_MESSAGE 11, never suspended (sysFlag 4 = subscription in
  the request, suspendTimeoutMillis 0, expressionType TAG): the broker answers
  at once; records decode with ``impl``'s codec.
- ``pull(..., subscription=None, sub_version=v)`` → PULL_MESSAGE without the
  subscription flag (sysFlag 0, a push consumer's default): the broker filters
  with the group's heartbeated subscription. ``heartbeat(group, client_id,
  {topic: (expression, type, version)})`` → HEART_BEAT 34 of a push consumer
  on a connection of its own per client id (Java's ``SubscriptionData`` with
  ``tagsSet`` / ``codeSet`` as ``FilterAPI.build`` fills them), re-sent by
  ``tick``; a group heartbeated this way leaves the adapter's own heartbeat;
  ``unregister_consumer`` → UNREGISTER_CLIENT 35 on that connection. A crash
  or ``close`` drops these connections (the broker forgets them anyway).
- ``send_oneway`` → SEND_MESSAGE with the oneway flag, between two GET_MAX_OFFSET 30 of its queue: the
  call returns once the queue grew (bounded by ``ONEWAY_WAIT_MS``) and the dispatch barrier passed.
- ``send_back`` → CONSUMER_SEND_MSG_BACK 36; ``max_reconsume_times`` −1 is
  sent as 16, as the Java consumer's ``getMaxReconsumeTimes`` does.
  ``update_offset`` / ``query_offset`` → 15 / 14 (as requests);
  ``lock_batch`` / ``unlock_batch`` → 41 / 42 with our broker's name in mqSet.
- ``tick()`` drains the requests the broker sent on our connection:
  CHECK_TRANSACTION_STATE 39 becomes a ``CheckRequest``; NOTIFY_CONSUMER_IDS_
  CHANGED 40 is dropped (counted in ``notifications``). It also sends
  HEART_BEAT 34 when ``heartbeat_interval_ms`` of wall time have passed. The
  heartbeat carries every producer group used for halves (the broker sends
  checks only to a channel registered for the half's group, so a new group
  is heartbeated *before* its first half) and the consumer groups created
  through ``create_group`` (with the topics they pulled). A consumer heartbeat
  makes the broker create ``%RETRY%<group>`` at once, as for a Java
  consumer; ``heartbeat_consumers=False`` leaves consumer groups out.
- After every write (send, half, end-transaction, send-back) a *dispatch
  barrier*: GET_BROKER_RUNTIME_INFO 28 until ``dispatchBehindBytes`` is 0
  (bounded by ``dispatch_wait_ms``), because a 4.9 broker builds its consume
  queues in a background thread (a pull right after the send's answer may
  not see the message: docs/fidelity.md, wire row 4). A broker that does not
  support code 28 is not asked again; a refusal is asked again.
- ``flush()`` sends nothing: a remote broker flushes by its own
  ``flushDiskType``; the protocol has no flush request.
- ``close()`` sends UNREGISTER_CLIENT 35 per group (best effort) and closes
  both connections.

Pop (5.x profiles, ``Capability.POP``): POP_MESSAGE, ACK_MESSAGE, BATCH_ACK_MESSAGE,
CHANGE_MESSAGE_INVISIBLETIME, returning the model's types; ``force_pop_random`` is recorded, not
applied; with a ``recorder`` the pop rows of SPEC §8 — ``adapter_pop.py``.

Crash capability: only when both ``crash_cmd`` and ``restart_cmd`` are given
(shell commands). ``crash("kill")`` runs ``crash_cmd`` (e.g. ``kill -9`` of
the broker pid) and drops the connections; ``recover()`` runs ``restart_cmd``
and then waits, bounded by ``recover_timeout_ms``, until the name server
lists the broker again and the broker answers a heartbeat; then it is used
as before. A remote broker can be killed, not power-cut: ``crash_kinds`` is
``("kill",)``. No ``EXACT_TIME``: the broker runs on its own wall clock.

Flow control: a broker answers SYSTEM_BUSY to a request it dropped unprocessed (4.9/5.x
``BrokerFastFailure``: a request that waited in its thread pool's queue longer than e.g.
``waitTimeMillsInSendQueue``, 200 ms by default, or any while the page cache is busy;
``NettyRemotingAbstract``: a processor that rejects requests, or a full pool). The Java producer
sends again on SYSTEM_BUSY; so does every request of this adapter, after 10, 20, 40 ... ms (at most
``busy_wait_ms`` in all), and counts it in ``busy_retries``. Only when the broker stays busy past that
bound does the refusal reach the caller. Why: on a loaded machine (two brokers and the checker on two
cores) a real broker sheds a probe send now and then; that is load, not semantics.

Errors: refusals as the protocol says (``BrokerError`` / a ``ResponseCode``);
the wire's failures as ``RemotingError`` subclasses (address, code, opaque);
a malformed answer as ``client_ops.ResponseMalformed``; setup problems
(unreachable name server, no such broker) as ``RemoteSetupError``; a crash or
restart command that fails, or a broker that does not come back, as
``CrashCommandError``. After a connection is lost outside a crash, the
failing call raises and the next call reconnects (and re-heartbeats).
"""

from __future__ import annotations

import itertools
import os
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from rmqspec.model.clock import Clock
from rmqspec.model.config import BrokerConfig
from rmqspec.model.events import Recorder
from rmqspec.model.ids import UniqKeyFactory, offset_msg_id
from rmqspec.model.message import (
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    Message,
    MessageQueue,
    batch_topic,
    check_topic,
)
from rmqspec.model.protocol import Capability
from rmqspec.model.results import (
    BrokerError,
    CheckRequest,
    PullResult,
    ResponseCode,
    SendResult,
    TxnAction,
)
from rmqspec.model.sql92 import is_tag_type
from rmqspec.remoting import client_ops as ops
from rmqspec.remoting.adapter_pop import RemotePop
from rmqspec.remoting.client import RemotingClient, RemotingError, parse_address
from rmqspec.remoting.codes import RequestCode
from rmqspec.remoting.command import RemotingCommand
from rmqspec.remoting.records import BatchItem
from rmqspec.remoting.wire_events import WireEvents

DEFAULT_TIMEOUT_MS = 5000
DEFAULT_PRODUCER_GROUP = "rmqspec_producer"
HEARTBEAT_INTERVAL_MS = 10_000  # re-heartbeat period (the Java client's heartbeatBrokerInterval is 30 s)
ROUTE_WAIT_MS = 15_000
DISPATCH_WAIT_MS = 2_000
ONEWAY_WAIT_MS = 5_000  # how long send_oneway watches the queue's max offset grow
BUSY_WAIT_MS = 10_000  # how long a SYSTEM_BUSY (flow-controlled) request is sent again
RECOVER_TIMEOUT_MS = 180_000
MASTER_ID = 0  # MixAll.MASTER_ID
DEFAULT_MAX_RECONSUME_TIMES = 16  # DefaultMQPushConsumer.getMaxReconsumeTimes for -1

_instances = itertools.count(1)


class RemoteSetupError(Exception):
    """The remote broker cannot be reached or found (address and reason)."""


class CrashCommandError(Exception):
    """A crash or restart command failed, or the broker did not come back in time."""


def find_broker(cluster: dict[str, dict[int, str]], wanted: str | None) -> tuple[str, str]:
    """(broker name, master address) of ``wanted``, or of the only broker when ``wanted`` is absent."""
    if wanted is not None and wanted in cluster:
        name = wanted
    elif len(cluster) == 1:
        name = next(iter(cluster))
    else:
        listed = ", ".join(sorted(cluster)) or "none"
        raise RemoteSetupError(f"no broker named {wanted!r} registered (brokers: {listed})")
    addrs = cluster[name]
    if MASTER_ID not in addrs:
        raise RemoteSetupError(f"broker {name!r} has no master (broker id 0) registered: {addrs}")
    return name, addrs[MASTER_ID]


def locate_broker(namesrv_addr: str, broker_name: str | None, timeout_ms: int) -> tuple[str, str]:
    """Ask the name server where the broker is; ``RemoteSetupError`` naming the address and the reason."""
    try:
        with RemotingClient.connect(namesrv_addr, connect_timeout_ms=timeout_ms, timeout_ms=timeout_ms) as ns:
            cluster = ops.parse_cluster_info(ns.invoke(ops.cluster_info_request()))
    except RemotingError as exc:
        raise RemoteSetupError(f"name server {namesrv_addr}: {exc.what}: {exc.reason}") from None
    except (BrokerError, ops.ResponseMalformed) as exc:
        raise RemoteSetupError(f"name server {namesrv_addr}: {exc}") from None
    try:
        return find_broker(cluster, broker_name)
    except RemoteSetupError as exc:
        raise RemoteSetupError(f"name server {namesrv_addr}: {exc}") from None


def _run(command: str, what: str, timeout_ms: int) -> None:
    try:
        done = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=timeout_ms / 1000,
                              check=False)
    except subprocess.TimeoutExpired:
        raise CrashCommandError(f"{what} command {command!r} did not finish within {timeout_ms} ms") from None
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise CrashCommandError(f"{what} command {command!r} exited with {done.returncode}: {' | '.join(tail)}")


class RemoteBroker(RemotePop):
    """A broker reached over RocketMQ 4.9's remoting protocol (and 5.x's pop: ``RemotePop``); see the module
    docstring."""

    crash_kinds: tuple[str, ...] = ("kill",)

    def __init__(self, namesrv_addr: str, clock: Clock, config: BrokerConfig | None = None, *,
                 crash_cmd: str | None = None, restart_cmd: str | None = None, client_id: str | None = None,
                 timeout_ms: int = DEFAULT_TIMEOUT_MS, producer_group: str = DEFAULT_PRODUCER_GROUP,
                 heartbeat_interval_ms: int = HEARTBEAT_INTERVAL_MS, route_wait_ms: int = ROUTE_WAIT_MS,
                 recover_timeout_ms: int = RECOVER_TIMEOUT_MS, broker_name: str | None = None,
                 heartbeat_consumers: bool = True, dispatch_wait_ms: int = DISPATCH_WAIT_MS,
                 busy_wait_ms: int = BUSY_WAIT_MS, recorder: Recorder | None = None) -> None:
        self.namesrv_addr = namesrv_addr
        self.clock = clock
        self.config = config if config is not None else BrokerConfig()
        self.crash_cmd = crash_cmd
        self.restart_cmd = restart_cmd
        self.client_id = client_id or f"127.0.0.1@rmqspec-{os.getpid()}-{next(_instances)}"
        self.timeout_ms = timeout_ms
        self.producer_group = producer_group
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.route_wait_ms = route_wait_ms
        self.recover_timeout_ms = recover_timeout_ms
        self.heartbeat_consumers = heartbeat_consumers
        self.dispatch_wait_ms = dispatch_wait_ms  # 0: no dispatch barrier
        self.dispatch_waits = 0  # writes after which the broker had not yet dispatched everything
        self.dispatch_refused = 0  # GET_BROKER_RUNTIME_INFO refusals (asked again)
        self.busy_wait_ms = busy_wait_ms
        self.busy_retries = 0  # requests answered SYSTEM_BUSY and sent again
        self.capabilities: frozenset[Capability] = (
            frozenset({Capability.CRASH}) if crash_cmd and restart_cmd else frozenset())
        if self.config.behaviour.pop:  # a 5.x profile: pop over the wire (adapter_pop.py)
            self.capabilities |= {Capability.POP}
        self.wire = WireEvents(recorder, self.config)  # SPEC §8 rows of what it does (pop only, so far)
        self._pop_init()
        self.notifications = 0  # NOTIFY_CONSUMER_IDS_CHANGED received
        self.other_requests: list[RemotingCommand] = []  # any other request the broker sent us
        self._wanted_name = broker_name or self.config.broker_name
        self._uniq = UniqKeyFactory("127.0.0.1", os.getpid())
        self._producer_groups: set[str] = set()
        self._consumer_groups: dict[str, set[str]] = {}
        # heartbeat(): per client id its own connection and {group: {topic: (expression, type, version)}}
        self._members: dict[str, RemotingClient] = {}
        self._member_subs: dict[str, dict[str, dict[str, tuple[str, str, int]]]] = {}
        self._checked: dict[tuple[str, str], BrokerError | bool] = {}
        self._half_keys: dict[int, str] = {}  # commitlog offset of a half → its UNIQ_KEY
        # commitlog offset of a pulled message → the topic its consumer saw (RETRY_TOPIC for a retry
        # copy: the Java client's resetRetryAndNamespace), sent back as originTopic
        self._origin_topics: dict[int, str] = {}
        self._carried: list[tuple[int, RemotingCommand]] = []  # (arrival ms, request) on a connection since lost
        self._crashed = False
        self._closed = False
        self._last_heartbeat = float("-inf")
        self._namesrv: RemotingClient | None = None
        self._broker: RemotingClient | None = None
        self.broker_name, self.broker_addr = locate_broker(namesrv_addr, self._wanted_name, timeout_ms)
        self._connect()

    # ------------------------------------------------------------------ connections

    def _connect(self) -> None:
        self._broker = RemotingClient.connect(self.broker_addr, connect_timeout_ms=self.timeout_ms,
                                              timeout_ms=self.timeout_ms)
        self._heartbeat()

    def _conn(self) -> RemotingClient:
        if self._closed:
            raise RuntimeError("RemoteBroker is closed")
        if self._crashed:
            raise BrokerError(ResponseCode.SERVICE_NOT_AVAILABLE, "the broker was crashed; call recover()")
        if self._broker is None or self._broker.closed:
            if self._broker is not None:  # keep what the lost connection had received for tick()
                self._carried += self._broker.drain_server_requests_timed()
            self._connect()
        assert self._broker is not None
        return self._broker

    def _ns(self) -> RemotingClient:
        if self._namesrv is None or self._namesrv.closed:
            self._namesrv = RemotingClient.connect(self.namesrv_addr, connect_timeout_ms=self.timeout_ms,
                                                   timeout_ms=self.timeout_ms)
        return self._namesrv

    def _invoke(self, cmd: RemotingCommand) -> RemotingCommand:
        return self._ask(self._conn(), cmd)

    def ask(self, conn: RemotingClient, cmd: RemotingCommand) -> RemotingCommand:
        """``cmd`` on a connection of the caller's own, sent again while the broker sheds it with
        SYSTEM_BUSY, as every request of this adapter is (module docstring: flow control)."""
        return self._ask(conn, cmd)

    def _ask(self, conn: RemotingClient, cmd: RemotingCommand) -> RemotingCommand:
        """``cmd`` on ``conn``, sent again while the broker sheds it with SYSTEM_BUSY (module docstring)."""
        deadline = time.monotonic() + self.busy_wait_ms / 1000
        pause = 0.01
        while True:
            resp = conn.invoke(cmd)
            if resp.code != ResponseCode.SYSTEM_BUSY.value or time.monotonic() + pause > deadline:
                return resp
            self.busy_retries += 1
            time.sleep(pause)
            pause = min(2 * pause, 0.5)

    def _heartbeat(self) -> None:
        assert self._broker is not None
        consumers = self._consumer_groups if self.heartbeat_consumers else {}
        members = {g for groups in self._member_subs.values() for g in groups}
        consumers = {g: t for g, t in consumers.items() if g not in members}  # the members' subscriptions rule
        resp = self._ask(self._broker, ops.heartbeat_request(self.client_id, self._producer_groups, consumers))
        ops.expect_success(resp, "HEART_BEAT")
        self._last_heartbeat = time.monotonic()

    def wait_dispatched(self) -> None:
        """The dispatch barrier (below), for a caller that wrote on a connection of its own."""
        self._dispatched()

    def _dispatched(self) -> None:
        """The dispatch barrier after a write: a 4.9 broker builds its consume queues in a background
        thread (ReputMessageService, every 1 ms), so a pull right after an acknowledged send may not
        see the message yet. Poll GET_BROKER_RUNTIME_INFO until ``dispatchBehindBytes`` is 0 (and, on
        5.3.0+ under SYNC_FLUSH, ``remainHowManyDataToFlush`` too: it dispatches only what is flushed)
        (bounded by ``dispatch_wait_ms``); a broker that does not answer it (e.g. ``rmqspec
        serve``, which dispatches as it writes) is never asked again; a refusal (a 4.9.8 broker's first
        second after boot) is asked again until the bound."""
        if self.dispatch_wait_ms <= 0:
            return
        deadline = time.monotonic() + self.dispatch_wait_ms / 1000
        waited = False
        # 5.3.0+ under SYNC_FLUSH: dispatched only once flushed (model/versions.py dispatch_after_flush)
        after_flush = self.config.behaviour.dispatch_after_flush and self.config.flush == "SYNC"
        while True:
            try:
                resp = self._invoke(ops.runtime_info_request())
                behind = ops.parse_dispatch_behind(resp, after_flush)
            except BrokerError:
                self.dispatch_refused += 1
                behind = 1  # unknown: ask again
            if behind is None:
                self.dispatch_wait_ms = 0
                return
            if behind <= 0 or time.monotonic() >= deadline:
                self.dispatch_waits += waited
                return
            waited = True
            time.sleep(0.001)

    # ------------------------------------------------------------------ admin

    def create_topic(self, topic: str, queue_nums: int) -> None:
        check_topic(topic)
        if queue_nums <= 0:
            raise ValueError(f"queue_nums must be positive, got {queue_nums}")
        ops.expect_success(self._invoke(ops.create_topic_request(topic, queue_nums)), "UPDATE_AND_CREATE_TOPIC")
        self.wait_for_route(topic, queue_nums)

    def wait_for_route(self, topic: str, queue_nums: int) -> None:
        """Poll the name server until ``topic`` has ``queue_nums`` read and write queues on our broker."""
        deadline = time.monotonic() + self.route_wait_ms / 1000
        seen: tuple[int, int] | None = None
        while True:
            seen = ops.parse_route_queues(self._ns().invoke(ops.route_request(topic)), self.broker_name)
            if seen == (queue_nums, queue_nums):
                return
            if time.monotonic() >= deadline:
                raise BrokerError(ResponseCode.TOPIC_NOT_EXIST,
                                  f"name server {self.namesrv_addr} does not show topic {topic} with {queue_nums} "
                                  f"queues on {self.broker_name} within {self.route_wait_ms} ms "
                                  f"(last seen read/write queues: {seen})")
            time.sleep(0.1)

    def create_group(self, group: str, retry_max_times: int = 16, retry_queue_nums: int = 1) -> None:
        resp = self._invoke(ops.create_group_request(group, retry_max_times, retry_queue_nums))
        ops.expect_success(resp, "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP")
        if group not in self._consumer_groups:
            self._consumer_groups[group] = set()
            if self.heartbeat_consumers:
                self._heartbeat()

    # ------------------------------------------------------------------ producing

    def _properties(self, msg: Message) -> tuple[dict[str, str], str]:
        props = msg.wire_properties()
        uniq = msg.uniq_key
        if uniq is None:
            uniq = self._uniq.next(self.clock.now())
            props[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = uniq
        return props, uniq

    def send(self, msg: Message, queue_id: int) -> SendResult:
        props, uniq = self._properties(msg)
        cmd = ops.send_request(self.producer_group, msg, queue_id, props, self.clock.now(), self.broker_name)
        result = ops.parse_send(self._invoke(cmd), uniq)
        self._dispatched()
        return result

    def send_batch(self, msgs: Sequence[Message], queue_id: int) -> SendResult:
        """SEND_BATCH_MESSAGE (``send(Collection)`` of the Java client): one request, one answer."""
        topic = batch_topic(msgs)
        items, keys = [], []
        for msg in msgs:
            props, uniq = self._properties(msg)
            items.append(BatchItem(msg.flag, bytes(msg.body), props))
            keys.append(uniq)
        cmd = ops.send_batch_request(self.producer_group, topic, queue_id, items, self.clock.now(), self.broker_name)
        result = ops.parse_send_batch(self._invoke(cmd), keys)
        self._dispatched()
        return result

    def send_oneway(self, msg: Message, queue_id: int) -> None:
        """SEND_MESSAGE with the oneway flag (``sendOneway``): nothing is answered. The broker says nothing
        of when, or whether, it stored it, so the adapter watches: GET_MAX_OFFSET of the queue before the
        request, then again until it grew (bounded by ``ONEWAY_WAIT_MS``), then the dispatch barrier.
        For a caller that is the queue's only writer (the conformance machine) the call returns once the
        message is stored and pullable; a queue that did not grow in time is left unjudged here."""
        props, _ = self._properties(msg)
        mq = MessageQueue(msg.topic, queue_id)
        before = self._max_offset(mq)
        cmd = ops.send_request(self.producer_group, msg, queue_id, props, self.clock.now(), self.broker_name)
        self._conn().invoke_oneway(cmd)
        if before is None:
            return
        deadline = time.monotonic() + ONEWAY_WAIT_MS / 1000
        while time.monotonic() < deadline:
            now = self._max_offset(mq)
            if now is None or now > before:
                break
            time.sleep(0.001)
        self._dispatched()

    def _max_offset(self, mq: MessageQueue) -> int | None:
        """GET_MAX_OFFSET; None when the broker refuses it (a topic it does not know)."""
        try:
            return ops.parse_max_offset(self._invoke(ops.max_offset_request(mq)))
        except BrokerError:
            return None

    def send_half(self, msg: Message, queue_id: int, producer_group: str) -> SendResult:
        conn = self._conn()
        if producer_group not in self._producer_groups:
            self._producer_groups.add(producer_group)
            self._heartbeat()  # the broker checks a half only through a channel registered for its group
        props, uniq = self._properties(msg)
        cmd = ops.send_request(producer_group, msg, queue_id, ops.half_properties(props, producer_group),
                               self.clock.now(), self.broker_name, sys_flag=ops.HALF_SYS_FLAG)
        result = ops.parse_send(self._ask(conn, cmd), uniq)
        self._half_keys[result.commitlog_offset] = uniq
        self._dispatched()
        return result

    def end_transaction(self, producer_group: str, commitlog_offset: int, tran_state_table_offset: int,
                        action: TxnAction, from_check: bool) -> ResponseCode:
        uniq = self._half_keys.get(commitlog_offset)
        msg_id = uniq or self._offset_msg_id(commitlog_offset)
        cmd = ops.end_transaction_request(producer_group, commitlog_offset, tran_state_table_offset, action,
                                          from_check, msg_id, uniq if from_check else None)
        if action is TxnAction.UNKNOWN:
            self._conn().invoke_oneway(cmd)  # EndTransactionProcessor answers nothing for UNKNOWN
            return ResponseCode.SUCCESS
        code = ops.parse_code(self._invoke(cmd))
        self._dispatched()
        return code

    def _offset_msg_id(self, commitlog_offset: int) -> str:
        host, _, port = self.broker_addr.rpartition(":")
        try:
            return offset_msg_id(host.strip("[]"), int(port), commitlog_offset)
        except ValueError:
            return f"{commitlog_offset:032X}"

    # ------------------------------------------------------------------ consuming

    def pull(self, group: str, mq: MessageQueue, offset: int, max_nums: int = 32,
             subscription: str | None = "*", expression_type: str = "TAG", sub_version: int = 0) -> PullResult:
        if subscription is None:  # no subscription flag: the group's heartbeated subscription filters
            return self._pull_registered(group, mq, offset, max_nums, sub_version, expression_type)
        topics = self._consumer_groups.get(group)
        if topics is not None:
            topics.add(mq.topic)
        if not is_tag_type(expression_type) and subscription:
            self._check_client_config(group, mq.topic, subscription, expression_type)
        cmd = ops.pull_request(group, mq, offset, max_nums, subscription, expression_type)
        return self._pulled(ops.parse_pull(self._invoke(cmd)))

    def _pull_registered(self, group: str, mq: MessageQueue, offset: int, max_nums: int, sub_version: int,
                         expression_type: str) -> PullResult:
        cmd = ops.pull_registered_request(group, mq, offset, max_nums, sub_version, expression_type)
        return self._pulled(ops.parse_pull(self._invoke(cmd)))

    def _pulled(self, result: PullResult) -> PullResult:
        for m in result.messages:
            self._origin_topics[m.commitlog_offset] = m.properties.get("RETRY_TOPIC") or m.topic
        return result

    def heartbeat(self, group: str, client_id: str, subscriptions: Mapping[str, tuple[str, str, int]]) -> None:
        """HEART_BEAT of consumer client ``client_id`` on its own connection (one channel per client, as a
        Java MQClientInstance has), with every group that client heartbeated so far; re-sent by ``tick``."""
        self._conn()
        if not any(group in g for g in self._member_subs.values()) and group in self._consumer_groups \
                and self.heartbeat_consumers:  # our own channel leaves the group: the members rule it
            ops.expect_success(self._invoke(ops.unregister_request(self.client_id, consumer_group=group)),
                               "UNREGISTER_CLIENT")
        groups = self._member_subs.setdefault(client_id, {})
        groups[group] = dict(subscriptions)
        self._member_heartbeat(client_id)

    def _member_heartbeat(self, client_id: str) -> None:
        conn = self._members.get(client_id)
        if conn is None or conn.closed:
            conn = self._members[client_id] = RemotingClient.connect(
                self.broker_addr, connect_timeout_ms=self.timeout_ms, timeout_ms=self.timeout_ms)
        resp = self._ask(conn, ops.consumer_heartbeat_request(client_id, self._member_subs[client_id]))
        ops.expect_success(resp, "HEART_BEAT")

    def unregister_consumer(self, group: str, client_id: str) -> None:
        """UNREGISTER_CLIENT of ``client_id`` from ``group`` on its connection (closed when it has no group left)."""
        self._conn()
        groups = self._member_subs.get(client_id, {})
        conn = self._members.get(client_id)
        if groups.pop(group, None) is None or conn is None:
            return
        ops.expect_success(self._ask(conn, ops.unregister_request(client_id, consumer_group=group)),
                           "UNREGISTER_CLIENT")
        if not groups:
            del self._member_subs[client_id]
            self._members.pop(client_id).close()

    def _drop_members(self) -> None:
        """The broker went away: its consumer tables are gone, so are the members' connections."""
        for conn in self._members.values():
            conn.close()
        self._members.clear()
        self._member_subs.clear()

    def _check_client_config(self, group: str, topic: str, subscription: str, expression_type: str) -> None:
        """A non-TAG expression is compiled by CHECK_CLIENT_CONFIG first, as a real consumer's start does:
        4.9.8's PULL_MESSAGE with an expression that does not compile serves every message
        (ConsumerFilterManager.build returns null); the check answers SUBSCRIPTION_PARSE_FAILED.
        Answers are cached per (type, expression): the broker's answer depends on nothing else."""
        key = (expression_type, subscription)
        answer = self._checked.get(key)
        if answer is None:
            resp = self._invoke(ops.check_client_config_request(self.client_id, group, topic, subscription,
                                                                expression_type))
            answer = None if resp.code == ResponseCode.SUCCESS else ops.refusal(resp, "CHECK_CLIENT_CONFIG")
            self._checked[key] = answer or False
        if answer:
            raise BrokerError(answer.code, answer.remark)

    def send_back(self, group: str, commitlog_offset: int, delay_level: int, origin_msg_id: str | None,
                  max_reconsume_times: int | None) -> ResponseCode:
        if max_reconsume_times == -1:
            max_reconsume_times = DEFAULT_MAX_RECONSUME_TIMES
        cmd = ops.send_back_request(group, commitlog_offset, delay_level, origin_msg_id, max_reconsume_times,
                                    self._origin_topics.get(commitlog_offset))
        code = ops.parse_code(self._invoke(cmd))
        self._dispatched()
        return code

    def update_offset(self, group: str, mq: MessageQueue, offset: int) -> None:
        ops.expect_success(self._invoke(ops.update_offset_request(group, mq, offset)), "UPDATE_CONSUMER_OFFSET")

    def query_offset(self, group: str, mq: MessageQueue) -> int:
        return ops.parse_query_offset(self._invoke(ops.query_offset_request(group, mq)))

    def search_offset(self, topic: str, queue_id: int, timestamp: int) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP (``model.protocol.SearchBroker``)."""
        request = ops.search_offset_request(MessageQueue(topic, queue_id), timestamp)
        return ops.parse_search_offset(self._invoke(request))

    def lock_batch(self, group: str, client_id: str, mqs: Iterable[MessageQueue]) -> frozenset[MessageQueue]:
        asked = list(mqs)
        five = self.config.behaviour.lock_only_this_broker
        return ops.parse_lock(self._invoke(ops.lock_request(group, client_id, asked, self.broker_name, five)), asked)

    def unlock_batch(self, group: str, client_id: str, mqs: Iterable[MessageQueue]) -> None:
        resp = self._invoke(ops.unlock_request(group, client_id, list(mqs), self.broker_name,
                                               self.config.behaviour.lock_only_this_broker))
        ops.expect_success(resp, "UNLOCK_BATCH_MQ")

    # ------------------------------------------------------------------ background

    def tick(self) -> list[CheckRequest]:
        """The transaction checks received since the last tick; re-heartbeats when one is due."""
        return [check for _, check in self.tick_timed()]

    def tick_timed(self) -> list[tuple[int, CheckRequest]]:
        """``tick`` with the wall-clock ms each check arrived (a wall-clock run tells the broker's
        check rounds apart by it)."""
        conn = self._conn()
        if (time.monotonic() - self._last_heartbeat) * 1000 >= self.heartbeat_interval_ms:
            self._heartbeat()
            for client_id in list(self._member_subs):
                self._member_heartbeat(client_id)
        checks: list[tuple[int, CheckRequest]] = []
        now = time.time_ns() // 1_000_000
        received, self._carried = [*self._carried, *conn.drain_server_requests_timed()], []
        for arrived, cmd in received:
            if cmd.code == RequestCode.CHECK_TRANSACTION_STATE:
                check = ops.parse_check(cmd)
                self._half_keys.setdefault(check.commitlog_offset, check.transaction_id or check.message.msg_id)
                checks.append((arrived or now, check))
            elif cmd.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED:
                self.notifications += 1
            else:
                self.other_requests.append(cmd)
        return checks

    def flush(self) -> None:
        """Nothing on the wire: the remote broker flushes by its own ``flushDiskType``."""

    def close(self) -> None:
        """UNREGISTER_CLIENT per group (best effort: a dead connection is just closed), then close both."""
        if self._closed:
            return
        broker, self._broker = self._broker, None
        if broker is not None and not broker.closed and not self._crashed:
            requests = [ops.unregister_request(self.client_id, producer_group=g)
                        for g in sorted(self._producer_groups | {self.producer_group})]
            requests += [ops.unregister_request(self.client_id, consumer_group=g)
                         for g in sorted(self._consumer_groups)]
            for cmd in requests:
                try:
                    broker.invoke(cmd)
                except RemotingError:
                    break
        for conn in (broker, self._namesrv):
            if conn is not None:
                conn.close()
        self._drop_members()
        self._namesrv = None
        self._closed = True

    # ------------------------------------------------------------------ crash capability

    def crash(self, kind: str) -> None:
        """Run ``crash_cmd`` (``kind`` must be "kill") and drop the connections."""
        if kind not in self.crash_kinds:
            raise ValueError(f"a remote broker can only be crashed with {self.crash_kinds}, not {kind!r}")
        if not self.crash_cmd or not self.restart_cmd:
            raise RuntimeError("crash() needs crash_cmd and restart_cmd (Capability.CRASH is not declared)")
        _run(self.crash_cmd, "crash", self.recover_timeout_ms)
        self._crashed = True
        self._drop_members()
        for conn in (self._broker, self._namesrv):
            if conn is not None:
                conn.close()
        self._broker = self._namesrv = None

    def recover(self) -> None:
        """Run ``restart_cmd``, wait until the broker is registered and answers, reconnect, re-heartbeat."""
        if not self._crashed:
            raise RuntimeError("recover() is defined only after crash()")
        assert self.restart_cmd is not None
        started = time.monotonic()
        _run(self.restart_cmd, "restart", self.recover_timeout_ms)
        deadline = started + self.recover_timeout_ms / 1000
        last = "no attempt"
        while time.monotonic() < deadline:
            try:
                name, addr = locate_broker(self.namesrv_addr, self._wanted_name, self.timeout_ms)
                self.broker_name, self.broker_addr = name, addr
                self._broker = RemotingClient.connect(addr, connect_timeout_ms=self.timeout_ms,
                                                      timeout_ms=self.timeout_ms)
                self._heartbeat()
            except (RemoteSetupError, RemotingError, BrokerError) as exc:
                last = str(exc)
                if self._broker is not None:
                    self._broker.close()
                    self._broker = None
                time.sleep(0.5)
                continue
            self._crashed = False
            return
        raise CrashCommandError(f"broker {self._wanted_name} did not come back within {self.recover_timeout_ms} ms "
                                f"after {self.restart_cmd!r} (last: {last})")

    def __repr__(self) -> str:
        return f"RemoteBroker({self.namesrv_addr} → {self.broker_name}@{self.broker_addr})"


BrokerFactory = Callable[..., RemoteBroker]


def remote_factory(namesrv_addr: str, *, crash_cmd: str | None = None, restart_cmd: str | None = None,
                   client_id: str | None = None, timeout_ms: int = DEFAULT_TIMEOUT_MS,
                   **options: Any) -> BrokerFactory:
    """``factory(clock, config, workdir) -> RemoteBroker`` for the name server at ``namesrv_addr``.

    The name server is asked for the broker now, so an unreachable address fails here
    (``RemoteSetupError``), before any test work. ``workdir`` is ignored (the store is remote);
    ``config`` only names the broker (``broker_name``) and is kept as ``broker.config``.
    ``options`` go to ``RemoteBroker`` (``producer_group``, ``heartbeat_interval_ms``, ...).
    """
    if bool(crash_cmd) != bool(restart_cmd):
        raise RemoteSetupError("crash and restart commands go together: give both or neither")
    # the broker RemoteBroker will pick: the one named, else config's default name (broker-a), else the only one
    locate_broker(namesrv_addr, options.get("broker_name") or BrokerConfig().broker_name, timeout_ms)

    def factory(clock: Clock, config: BrokerConfig | None = None, workdir: Any = None,
                **_ignored: Any) -> RemoteBroker:
        return RemoteBroker(namesrv_addr, clock, config, crash_cmd=crash_cmd, restart_cmd=restart_cmd,
                            client_id=client_id, timeout_ms=timeout_ms, **options)

    return factory


def parse_url(spec: str) -> str:
    """``rocketmq://HOST:PORT`` → ``HOST:PORT`` (``ValueError`` naming what is wrong)."""
    prefix = "rocketmq://"
    if not spec.startswith(prefix):
        raise ValueError(f"{spec!r} does not start with {prefix}")
    address = spec[len(prefix):].rstrip("/")
    parse_address(address)
    return address


__all__ = ["CrashCommandError", "RemoteBroker", "RemoteSetupError", "find_broker", "locate_broker", "parse_url",
           "remote_factory"]
