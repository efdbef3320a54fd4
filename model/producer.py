"""The reference producer: UNIQ_KEY, queue selection, retries, transactions.

Theory of operation
-------------------
Follows RocketMQ 4.9 ``C/impl/producer/DefaultMQProducerImpl`` (sendDefaultImpl,
sendSelectImpl, sendMessageInTransaction, endTransaction,
checkTransactionState), ``TopicPublishInfo.selectOneMessageQueue``
(round robin), the MessageQueueSelectors (``model/selectors.py``: ByHash by default) and
``MessageClientIDSetter`` (UNIQ_KEY, assigned once per message and kept
across retries).

Sending: a message without a UNIQ_KEY gets one from the producer's
``UniqKeyFactory`` at ``clock.now()`` (its born time; the broker reads the
same clock). The queue is explicit, chosen by the producer's selector on a
sharding key (the ``send``'s ``detail.route_queues`` names the route's number of queues it chose
among), or round robin per topic. A round-robin send is retried on
another queue up to ``retry_times_when_send_failed`` (2) more times when the
request is lost or the broker answers SYSTEM_ERROR, SERVICE_NOT_AVAILABLE,
TOPIC_NOT_EXIST or NO_PERMISSION (4.9.8's ``retryResponseCodes``; SYSTEM_BUSY is
not among them: it throws at once; 5.3.3 added it); explicit-queue and
selector sends are tried once, as in RocketMQ. A ``send`` event is emitted
once the broker acknowledged the message. An answer lost after the broker
stored the message (``link.ResponseLost``, a RemotingTimeoutException) is
retried like a lost request: the message is stored again under the same
UNIQ_KEY — RocketMQ's commonest duplicate.

Send modes (``detail.send_mode`` of the ``send`` event, issue 42):

- ``send`` is SYNC (above);
- ``send_async`` (CommunicationMode.ASYNC) is tried once by sendDefaultImpl;
  MQClientAPIImpl.onExceptionImpl retries it when no answer came (the request
  failed or timed out) up to ``retry_times_when_send_async_failed`` (2) more
  times, re-sending the same request — so to the same queue, with one broker
  — while a broker's refusal goes to the callback's ``on_exception`` at once
  (needRetry false); the callback runs when the answer arrives (here: before
  ``send_async`` returns);
- ``send_oneway`` (CommunicationMode.ONEWAY) is written once and never
  answered: the broker's refusal and a loss on the way are both silent. Its
  ``send`` event has status ONEWAY: never acknowledged, so never LOST, and its
  delivery is no RECOVERED.

An attempt whose answer never came is a ``send`` with status NO_RESPONSE when
the producer emits events itself.

Transactions (``TransactionProducer``): ``send_in_transaction`` clears the
delay level, sends the half (``send_half``, retried like a plain send), runs
the local-transaction function (COMMIT / ROLLBACK / UNKNOWN; an exception
or ``None`` is UNKNOWN; a half that was not SEND_OK is rolled back) and
sends END_TRANSACTION with the half's commitlog offset and queue offset.
END_TRANSACTION is oneway in RocketMQ: ``lose_end=True`` (or a ``Link``
losing it) models the request that never arrives, and the broker's check
(``broker.tick()`` → CheckRequest) is answered by ``answer_checks`` through
the check listener with ``end_transaction(…, from_check=True)``.

Event split: ``send`` (acknowledged sends, committed transactions
included), ``txn_half`` and ``txn_end`` (COMMIT / ROLLBACK / UNKNOWN,
``detail.from_check``) describe what the broker accepted. The ModelBroker
records them itself, so by default (``broker_records_events=True``) the
producer emits nothing and the trace holds each exactly once. Against a
broker that records nothing (a network adapter for a real RocketMQ), pass
``broker_records_events=False`` and the producer emits them from the
answers it got: ``send`` and ``txn_half`` once acknowledged, ``txn_end``
when END_TRANSACTION was answered SUCCESS (a lost one emits nothing). The
broker side alone emits ``store``, ``txn_check`` and ``txn_discard``.

``send_batch`` sends messages as one SEND_BATCH_MESSAGE, tried like a sync
send (sendDefaultImpl); the broker stores them as one append.

Every other send goes out as ``_wire`` makes it: a body of ``compress_over`` (4096) bytes or more is
compressed (tryToCompressMessage; ``model/compression.py``), the request's sysFlag says so; a batch
never is. Events and listeners see the message as the application made it.

Several brokers (issue 43): ``Producer(None, …, cluster=Cluster({...}))`` routes sync sends and batches
across the cluster's brokers (``model/routing.py``: the publish info, ``lastBrokerName`` avoidance on a
retry, the send timeout) with ``send_latency_fault_enable`` (``model/fault_strategy.py``:
MQFaultStrategy); its client-side ``send`` rows name the attempt's broker (``detail.broker``) and the
acknowledged ones carry the attempts since the previous such row (``detail.tries``, ``detail.fault``).
With ``retry_another_broker_when_not_store_ok`` a sync send answered other than SEND_OK (stored, its flush or
replication unconfirmed) is retried on another broker: the answer retried gets a client-side ``send`` row of
its own (with its status), and the message is stored twice by design.
Async sends are routed as 4.9.8 routes them (``Router.send_async``: the first queue from the strategy, a
request without an answer re-sent with its queue id to the broker ``selectOneMessageQueue(info, brokerName)``
names, a refusal to the callback at once), oneway sends get sendDefaultImpl's one attempt; async and oneway
sends to a chosen queue or by sharding key, explicit-queue sync sends and transactional sends are not modelled
across brokers (TypeError).

Simplifications: with one broker, "another broker" on retry is the next queue and there is no
latency fault tolerance; an async send's
callback runs on the caller's thread (RocketMQ: the callback executor).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs

from rmqspec.model.clock import Clock
from rmqspec.model.compression import COMPRESS_OVER, compress, uncompressed
from rmqspec.model.directory import Directory
from rmqspec.model.events import NullRecorder, Recorder
from rmqspec.model.fault_strategy import LATENCY_MAX, NOT_AVAILABLE_DURATION, FaultStrategy
from rmqspec.model.ids import UniqKeyFactory
from rmqspec.model.link import ResponseLost
from rmqspec.model.message import Message, StoredMessage, batch_topic
from rmqspec.model.results import (
    BrokerError,
    CheckRequest,
    ResponseCode,
    SendResult,
    SendStatus,
    TxnAction,
)
from rmqspec.model.routing import Cluster, Router, SendFailedAll
from rmqspec.model.selectors import Selector, by_hash

# DefaultMQProducer.retryResponseCodes of 4.9.8 (javap: 17, 14, 1, 16, 204, 205; NO_BUYER_ID and
# NOT_IN_CURRENT_UNIT are never answered by a broker rmqspec models). SYSTEM_BUSY (2) is not retried by a
# 4.9.8 sync send: sendDefaultImpl throws the MQBrokerException at once (5.3.3's set adds 2).
RETRY_RESPONSE_CODES = frozenset(
    {
        ResponseCode.TOPIC_NOT_EXIST,
        ResponseCode.SERVICE_NOT_AVAILABLE,
        ResponseCode.SYSTEM_ERROR,
        ResponseCode.NO_PERMISSION,
    }
)


class SendFailed(Exception):
    """Every attempt of a send failed; ``errors`` lists them in order."""

    def __init__(self, topic: str, errors: list[BaseException]) -> None:
        shown = "; ".join(f"{type(e).__name__}: {e}" for e in errors)
        super().__init__(f"send to {topic!r} failed after {len(errors)} attempt(s): {shown}")
        self.errors = errors


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, BrokerError):
        return exc.code in RETRY_RESPONSE_CODES
    return isinstance(exc, ConnectionError)


class Producer:
    """DefaultMQProducer against one broker, or (``cluster``) across several (``model/routing.py``)."""

    def __init__(
        self,
        broker: Any,
        clock: Clock,
        directory: Directory,
        group: str,
        *,
        producer_id: str | None = None,
        recorder: Recorder | None = None,
        uniq_keys: UniqKeyFactory | None = None,
        retry_times_when_send_failed: int = 2,
        retry_times_when_send_async_failed: int = 2,
        start_index: int = 0,
        broker_records_events: bool = True,
        selector: Selector = by_hash,
        compress_over: int = COMPRESS_OVER,
        cluster: Cluster | None = None,
        send_latency_fault_enable: bool = False,
        fault_strategy: FaultStrategy | None = None,
        retry_another_broker_when_not_store_ok: bool = False,
    ) -> None:
        if retry_times_when_send_failed < 0:
            raise ValueError(
                f"retry_times_when_send_failed must be ≥ 0, got {retry_times_when_send_failed}"
            )
        self.broker = broker
        self.clock = clock
        self.directory = directory
        self.group = group
        self.producer_id = producer_id or group
        self.recorder: Recorder = recorder if recorder is not None else NullRecorder()
        self.uniq_keys = uniq_keys or UniqKeyFactory()
        if retry_times_when_send_async_failed < 0:
            raise ValueError(
                f"retry_times_when_send_async_failed must be ≥ 0, got {retry_times_when_send_async_failed}"
            )
        self.compress_over = compress_over  # compressMsgBodyOverHowmuch
        self.retry_times_when_send_failed = retry_times_when_send_failed
        self.retry_times_when_send_async_failed = retry_times_when_send_async_failed
        self._start_index = start_index
        self._round_robin: dict[str, int] = {}
        self.broker_records_events = broker_records_events
        self.selector = selector  # the MessageQueueSelector of sends with a sharding key
        # several brokers: the routes and the fault strategy (None: the one broker ``broker``)
        self.router: Router | None = None
        if fault_strategy is not None and send_latency_fault_enable and not fault_strategy.enabled:
            raise ValueError("send_latency_fault_enable=True with a disabled fault_strategy: enable the strategy "
                             "itself (FaultStrategy(enabled=True)) or pass only the flag")
        if cluster is not None:
            strategy = fault_strategy if fault_strategy is not None else FaultStrategy(
                enabled=send_latency_fault_enable)
            self.router = Router(cluster, clock, strategy=strategy, start_index=start_index)
        self.last_broker: str | None = None  # the broker of the last acknowledged routed send
        # retryAnotherBrokerWhenNotStoreOK: a routed sync send's answer other than SEND_OK is retried
        self.retry_another_broker_when_not_store_ok = retry_another_broker_when_not_store_ok

    # -- producers are Driver participants without timers ----------------
    def next_due(self) -> int | None:
        return None

    def step(self) -> int:
        return 0

    # -- queue selection -------------------------------------------------
    def next_round_robin(self, topic: str) -> int:
        """``selectOneMessageQueue``: the per-topic index, incremented per call."""
        n = self.directory.queue_nums(topic)
        index = self._round_robin.get(topic, self._start_index)
        self._round_robin[topic] = index + 1
        return abs(index) % n

    def select_queue(self, topic: str, sharding_key: str | None = None) -> int:
        if sharding_key is not None:
            return self.selector(sharding_key, self.directory.queue_nums(topic))
        return self.next_round_robin(topic)

    def _routed(self, topic: str, sharding_key: str | None, detail: dict[str, Any]) -> dict[str, Any]:
        """``detail`` of a ``send``, with ``route_queues`` (the number of queues the selector chose
        among: ORDER_KEY_SPLIT judges a key per route) when it was an ordered send."""
        if sharding_key is not None and self.router is not None:
            detail["route_queues"] = len(self.router.publish_info(topic).queues)
        elif sharding_key is not None:
            detail["route_queues"] = self.directory.queue_nums(topic)
        return detail

    def stamp(self, msg: Message) -> Message:
        """Assign UNIQ_KEY (once; kept across retries)."""
        if msg.uniq_key is not None:
            return msg
        return attrs.evolve(msg, uniq_key=self.uniq_keys.next(self.clock.now()))

    def _wire(self, msg: Message) -> Message:
        """The message as the request carries it: a large body compressed (``tryToCompressMessage``)."""
        body, sys_flag = compress(msg.body, msg.sys_flag, over=self.compress_over)
        return msg if body is msg.body else attrs.evolve(msg, body=body, sys_flag=sys_flag)

    # -- sending ---------------------------------------------------------
    def send(
        self, msg: Message, *, queue_id: int | None = None, sharding_key: str | None = None
    ) -> SendResult:
        """Send and wait for the broker's answer; raises ``SendFailed`` or ``BrokerError``."""
        msg = self.stamp(msg)
        result, qid, attempts = self._send_with_retry(
            msg, queue_id, sharding_key, lambda b, m, q: b.send(self._wire(m), q)
        )
        self._emit_acked(msg, qid, result, sharding_key, "SYNC", attempts)
        return result

    def send_batch(self, msgs: Sequence[Message], *, queue_id: int | None = None) -> SendResult:
        """``send(Collection<Message>)``: one SEND_BATCH_MESSAGE (the broker needs ``send_batch``,
        ``BatchBroker``), tried and retried as a sync send; each message gets its UNIQ_KEY first."""
        brokers = self.router.cluster.brokers.values() if self.router is not None else [self.broker]
        for broker in brokers:
            if not callable(getattr(broker, "send_batch", None)):
                raise TypeError(f"{type(broker).__name__} takes no batches (no send_batch)")
        stamped = [self.stamp(m) for m in msgs]
        topic = batch_topic(stamped)
        batch = Message(topic, b"")  # only its topic routes the batch
        result, qid, attempts = self._send_with_retry(
            batch, queue_id, None, lambda b, _m, q: b.send_batch(stamped, q), plain=False
        )
        for i, msg in enumerate(stamped):
            detail = {"attempts": attempts, "send_mode": "SYNC", "batch_index": i, "batch_size": len(stamped)}
            self._emit_client_side(
                "send", topic=topic, queue_id=qid, queue_offset=result.queue_offset + i, msg_key=msg.uniq_key,
                status=result.status.value, detail=self._brokered(detail, tries=i == 0),
            )
        return result

    def send_async(
        self,
        msg: Message,
        on_success: Callable[[SendResult], None],
        on_exception: Callable[[BaseException], None],
        *,
        queue_id: int | None = None,
        sharding_key: str | None = None,
    ) -> None:
        """Send without waiting (``send(msg, callback)``); the callback gets the outcome."""
        if self.router is not None:
            self._send_async_routed(msg, on_success, on_exception, queue_id, sharding_key)
            return
        msg = self.stamp(msg)
        qid = queue_id if queue_id is not None else self.select_queue(msg.topic, sharding_key)
        errors: list[BaseException] = []
        wire = self._wire(msg)
        for attempt in range(1, self.retry_times_when_send_async_failed + 2):
            try:
                result = self.broker.send(wire, qid)
            except BrokerError as exc:  # an answer, but a refusal: no retry (onExceptionImpl, needRetry false)
                on_exception(exc)
                return
            except ConnectionError as exc:  # no answer: the same request again
                self._emit_unanswered(msg, qid, sharding_key, "ASYNC", exc)
                errors.append(exc)
                continue
            self._emit_acked(msg, qid, result, sharding_key, "ASYNC", attempt)
            on_success(result)
            return
        on_exception(SendFailed(msg.topic, errors))

    def _send_async_routed(
        self,
        msg: Message,
        on_success: Callable[[SendResult], None],
        on_exception: Callable[[BaseException], None],
        queue_id: int | None,
        sharding_key: str | None,
    ) -> None:
        """``send_async`` across the cluster (``Router.send_async``)."""
        assert self.router is not None
        if queue_id is not None or sharding_key is not None:
            raise TypeError("an async send to a chosen queue is not modelled across several brokers")
        msg = self.stamp(msg)
        wire = self._wire(msg)

        def unanswered(mq: Any, exc: BaseException) -> None:
            self._emit_unanswered(msg, mq.queue_id, None, "ASYNC", exc, broker_name=mq.broker_name)

        result, error, mq, attempts = self.router.send_async(
            msg.topic, lambda b, q: b.send(wire, q), self.retry_times_when_send_async_failed, unanswered)
        if error is not None:  # the attempts ride on the producer's next acknowledged row
            on_exception(SendFailed(msg.topic, error.errors) if isinstance(error, SendFailedAll) else error)
            return
        assert result is not None
        self.last_broker = mq.broker_name
        self._emit_acked(msg, mq.queue_id, result, None, "ASYNC", attempts)
        on_success(result)

    def send_oneway(
        self, msg: Message, *, queue_id: int | None = None, sharding_key: str | None = None
    ) -> None:
        """``sendOneway``: written once, no answer; the broker needs ``send_oneway`` (``OnewayBroker``)."""
        brokers = self.router.cluster.brokers.values() if self.router is not None else [self.broker]
        for broker in brokers:
            if not callable(getattr(broker, "send_oneway", None)):
                raise TypeError(f"{type(broker).__name__} takes no oneway sends (no send_oneway)")
        msg = self.stamp(msg)
        wire = self._wire(msg)
        if self.router is not None:  # sendDefaultImpl's one attempt; its Try rides on the next acknowledged row
            if queue_id is not None or sharding_key is not None:
                raise TypeError("a oneway send to a chosen queue is not modelled across several brokers")
            mq = self.router.send_oneway(msg.topic, lambda b, q: b.send_oneway(wire, q))
            qid, detail = mq.queue_id, {"send_mode": "ONEWAY", "broker": mq.broker_name}
        else:
            qid = queue_id if queue_id is not None else self.select_queue(msg.topic, sharding_key)
            with contextlib.suppress(BrokerError, ConnectionError):  # nothing comes back either way
                self.broker.send_oneway(wire, qid)
            detail = self._routed(msg.topic, sharding_key, {"send_mode": "ONEWAY"})
        self._emit_client_side(
            "send", topic=msg.topic, queue_id=qid, msg_key=msg.uniq_key, delay_level=msg.delay_level or None,
            status="ONEWAY", sharding_key=sharding_key, detail=detail,
        )

    def _emit_acked(
        self, msg: Message, qid: int, result: SendResult, sharding_key: str | None, mode: str, attempts: int
    ) -> None:
        self._emit_client_side(
            "send", topic=msg.topic, queue_id=qid, queue_offset=result.queue_offset,
            commitlog_offset=result.commitlog_offset, msg_key=msg.uniq_key, msg_id=result.msg_id,
            delay_level=msg.delay_level or None, status=result.status.value, sharding_key=sharding_key,
            detail=self._brokered(self._routed(msg.topic, sharding_key,
                                               {"born_ts": self.clock.now(), "attempts": attempts, "send_mode": mode}),
                                  tries=sharding_key is None),
        )

    def _one_broker(self, what: str) -> None:
        if self.router is not None:
            raise TypeError(f"{what} is not modelled across several brokers (a Producer with a cluster)")

    def _brokered(self, detail: dict[str, Any], *, tries: bool = True) -> dict[str, Any]:
        """``detail`` of a routed send's row: its broker, and (``tries``) the attempts since the last such row."""
        if self.router is None:
            return detail
        detail["broker"] = self.last_broker
        if tries:
            detail["tries"] = self.router.take_tries()
            strategy = self.router.strategy
            detail["fault"] = strategy.enabled
            if (strategy.latency_max, strategy.durations) != (LATENCY_MAX, NOT_AVAILABLE_DURATION):
                detail["latency_max"], detail["not_available_duration"] = (
                    list(strategy.latency_max), list(strategy.durations))
        return detail

    def _emit_unanswered(
        self, msg: Message, qid: int, sharding_key: str | None, mode: str, exc: BaseException,
        broker_name: str | None = None,
    ) -> None:
        """An attempt no answer came for: NO_RESPONSE when it reached the broker (its answer was lost),
        nothing when the request itself was lost (the trace of the broker has nothing of it either)."""
        if isinstance(exc, ResponseLost):
            self._emit_client_side(
                "send", topic=msg.topic, queue_id=qid, msg_key=msg.uniq_key,
                delay_level=msg.delay_level or None, status="NO_RESPONSE", sharding_key=sharding_key,
                detail=self._routed(msg.topic, sharding_key, {"send_mode": mode}
                                    | ({} if broker_name is None else {"broker": broker_name})),
            )

    def _send_with_retry(
        self,
        msg: Message,
        queue_id: int | None,
        sharding_key: str | None,
        op: Callable[[Any, Message, int], SendResult],
        plain: bool = True,
    ) -> tuple[SendResult, int, int]:
        """``op`` (broker, message, queue id) tried as RocketMQ's sendDefaultImpl / sendSelectImpl try it;
        ``plain``: a send's unanswered attempts are ``send`` events (a half's are not)."""
        if self.router is not None:
            return self._send_routed(msg, queue_id, sharding_key, op, plain)
        if queue_id is not None or sharding_key is not None:
            qid = queue_id if queue_id is not None else self.select_queue(msg.topic, sharding_key)
            try:
                return op(self.broker, msg, qid), qid, 1
            except ConnectionError as exc:
                if plain:
                    self._emit_unanswered(msg, qid, sharding_key, "SYNC", exc)
                raise
        errors: list[BaseException] = []
        for attempt in range(1, self.retry_times_when_send_failed + 2):
            qid = self.next_round_robin(msg.topic)
            try:
                return op(self.broker, msg, qid), qid, attempt
            except (BrokerError, ConnectionError) as exc:
                if not _retryable(exc):
                    raise
                if plain:
                    self._emit_unanswered(msg, qid, None, "SYNC", exc)
                errors.append(exc)
        raise SendFailed(msg.topic, errors)

    def _send_routed(
        self,
        msg: Message,
        queue_id: int | None,
        sharding_key: str | None,
        op: Callable[[Any, Message, int], SendResult],
        plain: bool,
    ) -> tuple[SendResult, int, int]:
        """``_send_with_retry`` across the cluster (``model/routing.py``)."""
        assert self.router is not None
        if queue_id is not None:
            raise TypeError("an explicit queue id names no broker: not modelled across several brokers")

        def unanswered(mq: Any, exc: BaseException) -> None:
            if plain:
                self._emit_unanswered(msg, mq.queue_id, sharding_key, "SYNC", exc, broker_name=mq.broker_name)

        if sharding_key is not None:
            result, mq = self.router.send_select(
                msg.topic, self.selector, sharding_key, lambda b, q: op(b, msg, q), unanswered)
            self.last_broker = mq.broker_name
            return result, mq.queue_id, 1

        retried: list[tuple[Any, SendResult]] = []  # answers other than SEND_OK, retried (stored)
        try:
            result, mq, attempts = self.router.send_default(
                msg.topic, lambda b, q: op(b, msg, q), self.retry_times_when_send_failed, _retryable, unanswered,
                retry_another_broker_when_not_store_ok=self.retry_another_broker_when_not_store_ok,
                on_not_ok=lambda mq, r: retried.append((mq, r)))
        except SendFailedAll as exc:
            raise SendFailed(msg.topic, exc.errors) from None
        for where, answer in retried:  # each stored copy a row; the one returned gets the caller's row
            if plain and answer is not result:
                self._emit_client_side(
                    "send", topic=msg.topic, queue_id=where.queue_id, queue_offset=answer.queue_offset,
                    commitlog_offset=answer.commitlog_offset, msg_key=msg.uniq_key, msg_id=answer.msg_id,
                    delay_level=msg.delay_level or None, status=answer.status.value,
                    detail={"send_mode": "SYNC", "broker": where.broker_name})
        self.last_broker = mq.broker_name
        return result, mq.queue_id, attempts

    def _emit_client_side(self, event: str, **fields: Any) -> None:
        """Emit an event the broker also records, unless the broker records it."""
        if self.broker_records_events:
            return
        self.recorder.emit(
            event, self.clock.now(), actor=self.producer_id, group=self.group, **fields
        )


@attrs.frozen
class TransactionSendResult:
    """``TransactionSendResult``: the half's send result and what happened next.

    ``end_code`` is the broker's answer to END_TRANSACTION, or ``None`` when
    the request was lost (never reached the broker).
    """

    send_result: SendResult
    transaction_id: str | None
    local_state: TxnAction
    end_code: ResponseCode | None
    queue_id: int


LocalTransaction = Callable[[Message], TxnAction | None]
CheckListener = Callable[[StoredMessage], TxnAction | None]


class TransactionProducer(Producer):
    """TransactionMQProducer: half, local transaction, END_TRANSACTION, check answers."""

    def __init__(
        self,
        broker: Any,
        clock: Clock,
        directory: Directory,
        group: str,
        *,
        check_listener: CheckListener | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(broker, clock, directory, group, **kwargs)
        self.check_listener = check_listener
        self.checks_answered: list[tuple[CheckRequest, TxnAction, ResponseCode | None]] = []

    def send_in_transaction(
        self,
        msg: Message,
        local_transaction: LocalTransaction,
        *,
        queue_id: int | None = None,
        lose_end: bool = False,
    ) -> TransactionSendResult:
        """sendMessageInTransaction; ``lose_end`` drops the oneway END_TRANSACTION."""
        if msg.delay_level:
            msg = attrs.evolve(msg, delay_level=0)
        msg = self.stamp(msg)
        self._one_broker("send_in_transaction")
        result, qid, _ = self._send_with_retry(
            msg, queue_id, None, lambda b, m, q: b.send_half(self._wire(m), q, self.group), plain=False
        )
        txn_id = msg.uniq_key
        if result.status is SendStatus.SEND_OK:
            self._emit_client_side(
                "txn_half", topic=msg.topic, queue_id=qid, queue_offset=result.queue_offset,
                commitlog_offset=result.commitlog_offset, msg_key=msg.uniq_key,
                msg_id=result.msg_id, txn_id=txn_id, status=result.status.value,
            )
            try:
                state = local_transaction(msg)
            except Exception:
                state = None
            if not isinstance(state, TxnAction):
                state = TxnAction.UNKNOWN
        else:
            state = TxnAction.ROLLBACK
        code = self.end_transaction(
            result.commitlog_offset, result.queue_offset, state,
            msg_key=msg.uniq_key, txn_id=txn_id, lose=lose_end,
        )
        return TransactionSendResult(result, txn_id, state, code, qid)

    def end_transaction(
        self,
        commitlog_offset: int,
        tran_state_table_offset: int,
        action: TxnAction,
        *,
        from_check: bool = False,
        msg_key: str | None = None,
        txn_id: str | None = None,
        lose: bool = False,
    ) -> ResponseCode | None:
        """END_TRANSACTION (oneway in RocketMQ); ``None`` when lost."""
        if lose:
            return None
        try:
            code = self.broker.end_transaction(
                self.group, commitlog_offset, tran_state_table_offset, action, from_check
            )
        except (BrokerError, ConnectionError):
            return None
        if code == ResponseCode.SUCCESS:
            self._emit_client_side(
                "txn_end", commitlog_offset=commitlog_offset, msg_key=msg_key, txn_id=txn_id,
                status=action.value, detail={"from_check": from_check},
            )
        return code

    def answer_checks(self, requests: Iterable[CheckRequest]) -> list[ResponseCode | None]:
        """checkTransactionState for each request of this group, answered from_check."""
        codes: list[ResponseCode | None] = []
        for req in requests:
            if req.producer_group != self.group:
                continue
            state: Any = None
            if self.check_listener is not None:
                try:
                    state = self.check_listener(uncompressed(req.message))
                except Exception:
                    state = None
            if not isinstance(state, TxnAction):
                state = TxnAction.UNKNOWN
            msg_key = req.message.uniq_key
            code = self.end_transaction(
                req.commitlog_offset, req.tran_state_table_offset, state, from_check=True,
                msg_key=msg_key, txn_id=req.transaction_id or msg_key,
            )
            self.checks_answered.append((req, state, code))
            codes.append(code)
        return codes
