"""Routes across several brokers and the producer's sendDefaultImpl over them (RocketMQ 4.9.8).

Theory of operation
-------------------
A ``Cluster`` is the model's name server for producers of several brokers: each broker (a model
``Broker``, one per brokerName, each a master) and, per topic, its ``QueueData`` (brokerName, read and
write queue numbers, perm). ``create_topic`` creates the topic on each broker named and records the
route. ``set_latency(name, ms)`` makes every attempt to that broker take ``ms`` on the producer's
(manual) clock: the broker handles the request at the attempt's start, the answer — or the failure —
comes back ``ms`` later. Wrap a broker in ``model/link.py``'s ``Link`` to lose requests or answers.

``PublishInfo`` is ``MQClientInstance.topicRouteData2TopicPublishInfo`` for a topic without
orderTopicConf: the queue datas sorted by brokerName (``QueueData.compareTo``); each writable one
(``PermName.isWriteable``: perm & 2) whose broker has a master contributes its write queues ``0 ..
writeQueueNums - 1`` in order. ``write_queue_nums(name)`` is ``getQueueIdByBroker`` (−1 when the
broker has no writable queue data). ``select_one`` is ``selectOneMessageQueue()``: the queue at
``abs(sendWhichQueue.incrementAndGet()) % size``; ``select_avoiding(last)`` is
``selectOneMessageQueue(lastBrokerName)``: up to ``size`` bumps for a queue on another broker than
``last``, then ``select_one`` (so a retry goes to another broker whenever the route has one).

``Router.send_default`` is ``DefaultMQProducerImpl.sendDefaultImpl`` for a sync send: up to
``1 + retryTimesWhenSendFailed`` attempts; before each, the attempt stops when the time since the
first attempt's start exceeds ``sendMsgTimeout`` (3000 ms: "call timeout"); the queue is
``MQFaultStrategy.selectOneMessageQueue(info, lastBrokerName)`` (``model/fault_strategy.py``), the
last broker being the previous attempt's. After each attempt ``updateFaultItem(broker, latency,
isolation)``: isolation false for an answer, true for an exception — a lost request or answer
(RemotingException) is retried, a broker's refusal (MQBrokerException) is retried only for
``retryResponseCodes`` and otherwise thrown (after the update). ``send_select`` is sendSelectImpl: the
selector picks among the publish info's whole queue list, tried once, no fault item updated.

Every sendDefaultImpl attempt is a ``Try`` (numbered ``n`` per producer, ``attempt`` within its send),
kept until the producer's next acknowledged ``send`` row carries them (``detail.tries``): the attempts
of failed sends ride on the next row, so a producer's rows list all its attempts (a gap in ``n`` says
one is missing). ``properties/inv_route.py`` judges them.

Deviations: one sending thread, so one ``sendWhichQueue`` counter per topic starting at the
producer's ``start_index`` (ThreadLocalIndex: random per thread) and kept across route changes (4.9.8
builds a new TopicPublishInfo, a new index, when the route changed); no orderTopicConf routes, no
slaves in the route (a broker may be a ``model/ha_pair.HaPair``: its master answers); an attempt's own
latency past the remaining timeout is no RemotingTimeoutException here.

``retryAnotherBrokerWhenNotStoreOK`` (default false, ``send_default``'s keyword): a SYNC answer other than
SEND_OK — FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE: the message IS stored — is retried
like a failure (on another broker when the route has one), so the message is stored twice by design; the
retried attempt's ``Try`` names the answer (``status``), its fault item is an answer's (isolation false).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from rmqspec.model.clock import Clock
from rmqspec.model.fault_strategy import FaultStrategy
from rmqspec.model.message import MessageQueue
from rmqspec.model.results import BrokerError, SendResult, SendStatus
from rmqspec.model.selectors import Selector

PERM_WRITE = 2  # PermName.PERM_WRITE
PERM_READ = 4  # PermName.PERM_READ
SEND_MSG_TIMEOUT = 3000  # DefaultMQProducer.sendMsgTimeout, ms


@attrs.frozen
class QueueData:
    """One broker's part of a topic's route (``QueueData``)."""

    broker_name: str
    write_queue_nums: int
    read_queue_nums: int
    perm: int = PERM_READ | PERM_WRITE

    @property
    def writable(self) -> bool:
        return bool(self.perm & PERM_WRITE)


@attrs.define
class SendWhichQueue:
    """``ThreadLocalIndex`` of one thread: ``increment_and_get`` returns ``value`` and moves it on."""

    value: int = 0

    def increment_and_get(self) -> int:
        value = self.value
        self.value += 1
        return value


@attrs.define
class PublishInfo:
    """``TopicPublishInfo`` of one topic (no orderTopicConf)."""

    topic: str
    queues: tuple[MessageQueue, ...]
    queue_datas: tuple[QueueData, ...]
    send_which_queue: SendWhichQueue

    @classmethod
    def from_route(
        cls, topic: str, queue_datas: Iterable[QueueData], masters: Iterable[str], counter: SendWhichQueue
    ) -> PublishInfo:
        datas = tuple(sorted(queue_datas, key=lambda qd: qd.broker_name))
        with_master = set(masters)
        queues = tuple(
            MessageQueue(topic, i, qd.broker_name)
            for qd in datas
            if qd.writable and qd.broker_name in with_master
            for i in range(qd.write_queue_nums)
        )
        return cls(topic, queues, datas, counter)

    @property
    def brokers(self) -> tuple[str, ...]:
        """The brokers of the queue list, in its order."""
        return tuple(dict.fromkeys(mq.broker_name for mq in self.queues))

    def write_queue_nums(self, broker_name: str | None) -> int:
        """``getQueueIdByBroker``: the writable queue data's writeQueueNums, −1 without one."""
        for qd in self.queue_datas:
            if qd.writable and qd.broker_name == broker_name:
                return qd.write_queue_nums
        return -1

    def select_one(self) -> MessageQueue:
        return self.queues[abs(self.send_which_queue.increment_and_get()) % len(self.queues)]

    def select_avoiding(self, last_broker: str | None) -> MessageQueue:
        if last_broker is None:
            return self.select_one()
        for _ in range(len(self.queues)):
            mq = self.queues[abs(self.send_which_queue.increment_and_get()) % len(self.queues)]
            if mq.broker_name != last_broker:
                return mq
        return self.select_one()


class Cluster:
    """Brokers by name and the topics' routes over them: the producer's name server."""

    def __init__(self, brokers: Mapping[str, Any]) -> None:
        if not brokers:
            raise ValueError("a cluster needs at least one broker")
        self.brokers: dict[str, Any] = dict(brokers)
        self.routes: dict[str, tuple[QueueData, ...]] = {}
        self.latency: dict[str, int] = {}

    def create_topic(self, topic: str, queue_nums: int | Mapping[str, int]) -> None:
        """UPDATE_AND_CREATE_TOPIC on each broker named (an int: every broker, that many queues)."""
        nums = dict.fromkeys(self.brokers, queue_nums) if isinstance(queue_nums, int) else dict(queue_nums)
        unknown = sorted(set(nums) - set(self.brokers))
        if unknown:
            raise ValueError(f"topic {topic!r}: no broker named {unknown}")
        for name, n in nums.items():
            if n <= 0:
                raise ValueError(f"topic {topic!r} on {name}: queue_nums must be positive, got {n}")
            self.brokers[name].create_topic(topic, n)
        self.routes[topic] = tuple(QueueData(name, n, n) for name, n in nums.items())

    def set_perm(self, topic: str, broker_name: str, perm: int) -> None:
        """The route's perm for one broker (``wipeWritePermOfBroker`` leaves perm 4: not writable)."""
        self.routes[topic] = tuple(
            attrs.evolve(qd, perm=perm) if qd.broker_name == broker_name else qd for qd in self.routes[topic]
        )

    def set_latency(self, broker_name: str, ms: int) -> None:
        if broker_name not in self.brokers or ms < 0:
            raise ValueError(f"set_latency({broker_name!r}, {ms}): a broker of the cluster and ms ≥ 0")
        self.latency[broker_name] = ms

    def publish_info(self, topic: str, counter: SendWhichQueue) -> PublishInfo:
        if topic not in self.routes:
            raise LookupError(f"no route for topic {topic!r}: create it with Cluster.create_topic")
        return PublishInfo.from_route(topic, self.routes[topic], self.brokers, counter)


@attrs.frozen
class Try:
    """One sendDefaultImpl attempt: where it went, when, how long it took, what it threw."""

    n: int  # the producer's attempt number (1, 2, …)
    attempt: int  # within its send (1 = the first)
    broker: str
    queue_id: int
    start: int
    latency: int
    error: str | None  # the exception's name (a BrokerError with its code); None: answered
    brokers: tuple[str, ...]  # the route's brokers (its queue list's) when the queue was chosen
    # an answer other than SEND_OK that retryAnotherBrokerWhenNotStoreOK retried (the message stored there)
    status: str | None = None

    def as_detail(self) -> dict[str, Any]:
        detail = {"n": self.n, "attempt": self.attempt, "broker": self.broker, "queue_id": self.queue_id,
                  "start": self.start, "latency": self.latency, "error": self.error, "brokers": list(self.brokers)}
        if self.status is not None:
            detail["status"] = self.status
        return detail


class SendFailedAll(Exception):
    """Every attempt failed (or the send's time ran out); ``errors`` in order."""

    def __init__(self, topic: str, errors: list[BaseException], timed_out: bool = False) -> None:
        shown = "; ".join(f"{type(e).__name__}: {e}" for e in errors)
        why = "call timeout" if timed_out else f"{len(errors)} attempt(s)"
        super().__init__(f"send to {topic!r} failed after {why}: {shown}")
        self.errors = errors
        self.timed_out = timed_out


def _error_name(exc: BaseException) -> str:
    return f"BrokerError:{exc.code.name}" if isinstance(exc, BrokerError) else type(exc).__name__


Call = Callable[[Any, int], SendResult]  # (broker, queue id) → the broker's answer


class Router:
    """A producer's routes and fault strategy across a ``Cluster``."""

    def __init__(
        self,
        cluster: Cluster,
        clock: Clock,
        *,
        strategy: FaultStrategy | None = None,
        start_index: int = 0,
        send_msg_timeout: int = SEND_MSG_TIMEOUT,
    ) -> None:
        self.cluster = cluster
        self.clock = clock
        self.strategy = strategy if strategy is not None else FaultStrategy()
        self.start_index = start_index
        self.send_msg_timeout = send_msg_timeout
        self._counters: dict[str, SendWhichQueue] = {}
        self._n = 0
        self.pending: list[Try] = []

    def publish_info(self, topic: str) -> PublishInfo:
        counter = self._counters.setdefault(topic, SendWhichQueue(self.start_index))
        return self.cluster.publish_info(topic, counter)

    def take_tries(self) -> list[dict[str, Any]]:
        tries, self.pending = self.pending, []
        return [t.as_detail() for t in tries]

    def _attempt(self, mq: MessageQueue, call: Call) -> tuple[SendResult | None, BaseException | None, int, int]:
        """One request to ``mq``'s broker: (answer, exception, start, latency); the clock moves by the
        broker's latency. The latency is the time the attempt took (4.9.8: ``endTimestamp -
        beginTimestampPrev``), which includes any wait of a broker on the producer's clock (a SYNC_MASTER pair
        sharing it waits slaveTimeout for its slave)."""
        start = self.clock.now()
        latency = self.cluster.latency.get(mq.broker_name, 0)
        try:
            result, error = call(self.cluster.brokers[mq.broker_name], mq.queue_id), None
        except (BrokerError, ConnectionError) as exc:
            result, error = None, exc
        if latency:
            self.clock.advance(latency)  # type: ignore[attr-defined]  # a ManualClock
        return result, error, start, self.clock.now() - start

    def send_default(
        self,
        topic: str,
        call: Call,
        retry_times: int,
        retryable: Callable[[BaseException], bool],
        on_unanswered: Callable[[MessageQueue, BaseException], None],
        *,
        retry_another_broker_when_not_store_ok: bool = False,
        on_not_ok: Callable[[MessageQueue, SendResult], None] | None = None,
    ) -> tuple[SendResult, MessageQueue, int]:
        """sendDefaultImpl (SYNC): (answer, queue, attempts), or ``SendFailedAll`` / the refusal.

        ``retry_another_broker_when_not_store_ok``: an answer other than SEND_OK (the message stored, its
        flush or replication not confirmed) is retried like a failure (``on_not_ok`` told first), and the last
        such answer is what the send returns when no later attempt is SEND_OK — also when the send's time runs
        out or a later refusal is not retried (4.9.8: ``if (sendResult != null) return sendResult``)."""
        info = self.publish_info(topic)
        if not info.queues:
            raise LookupError(f"topic {topic!r}: no writable queue on any broker")
        first = self.clock.now()
        last: MessageQueue | None = None
        errors: list[BaseException] = []
        not_ok: tuple[SendResult, MessageQueue, int] | None = None  # the last answer retried
        for attempt in range(1, retry_times + 2):
            mq = self.strategy.select(info, last.broker_name if last is not None else None, self.clock.now())
            last = mq
            if self.send_msg_timeout < self.clock.now() - first:
                if not_ok is not None:
                    return not_ok
                raise SendFailedAll(topic, errors, timed_out=True)
            result, error, start, latency = self._attempt(mq, call)
            retried = (error is None and retry_another_broker_when_not_store_ok and result is not None
                       and result.status is not SendStatus.SEND_OK)
            self._record(attempt, mq, start, latency, error, info)
            if retried:
                assert result is not None
                self.pending[-1] = attrs.evolve(self.pending[-1], status=result.status.value)
            if error is None:
                assert result is not None
                if not retried:
                    return result, mq, attempt
                if on_not_ok is not None:
                    on_not_ok(mq, result)
                not_ok = (result, mq, attempt)
                continue
            if not retryable(error):
                if not_ok is not None:
                    return not_ok
                raise error
            on_unanswered(mq, error)
            errors.append(error)
        if not_ok is not None:
            return not_ok
        raise SendFailedAll(topic, errors)

    def _record(self, attempt: int, mq: MessageQueue, start: int, latency: int, error: BaseException | None,
                info: PublishInfo) -> None:
        self._n += 1
        self.pending.append(Try(self._n, attempt, mq.broker_name, mq.queue_id, start, latency,
                                None if error is None else _error_name(error), info.brokers))
        self.strategy.update_fault_item(mq.broker_name, latency, error is not None, self.clock.now())

    def _first_queue(self, topic: str) -> tuple[PublishInfo, MessageQueue]:
        info = self.publish_info(topic)
        if not info.queues:
            raise LookupError(f"topic {topic!r}: no writable queue on any broker")
        return info, self.strategy.select(info, None, self.clock.now())

    def send_async(
        self,
        topic: str,
        call: Call,
        retry_times: int,
        on_unanswered: Callable[[MessageQueue, BaseException], None],
    ) -> tuple[SendResult | None, BaseException | None, MessageQueue, int]:
        """An ASYNC send: (answer, or the exception its callback gets; the last queue tried; attempts).

        sendDefaultImpl picks the first queue and returns; MQClientAPIImpl's callback retries a request that got
        no answer (onExceptionImpl, needRetry true) up to ``retry_times`` more times, each on the broker of
        ``selectOneMessageQueue(info, brokerName)`` — the SAME request, so the first pick's queue id on that
        broker (a broker with fewer queues refuses it) —, while a broker's refusal goes to the callback at once
        (needRetry false). Each attempt's fault item: isolation for an exception, the latency for an answer."""
        info, mq = self._first_queue(topic)
        errors: list[BaseException] = []
        for attempt in range(1, retry_times + 2):
            result, error, start, latency = self._attempt(mq, call)
            self._record(attempt, mq, start, latency, error, info)
            if error is None or isinstance(error, BrokerError):
                return result, error, mq, attempt
            on_unanswered(mq, error)
            errors.append(error)
            if attempt <= retry_times:
                broker = self.strategy.select(info, mq.broker_name, self.clock.now()).broker_name
                mq = MessageQueue(topic, mq.queue_id, broker)
        return None, SendFailedAll(topic, errors), mq, retry_times + 1

    def send_oneway(self, topic: str, call: Call) -> MessageQueue:
        """A ONEWAY send: sendDefaultImpl's one attempt (timesTotal 1) on the strategy's queue; nothing comes back,
        a failure to write it is silent (its fault item isolates the broker)."""
        info, mq = self._first_queue(topic)
        _result, error, start, latency = self._attempt(mq, call)
        self._record(1, mq, start, latency, error, info)
        return mq

    def send_select(
        self,
        topic: str,
        selector: Selector,
        sharding_key: str,
        call: Call,
        on_unanswered: Callable[[MessageQueue, BaseException], None],
    ) -> tuple[SendResult, MessageQueue]:
        """sendSelectImpl: the selector's queue among the whole queue list, tried once."""
        info = self.publish_info(topic)
        mq = info.queues[selector(sharding_key, len(info.queues))]
        result, error, _start, _latency = self._attempt(mq, call)
        if error is not None:
            if isinstance(error, ConnectionError):
                on_unanswered(mq, error)
            raise error
        assert result is not None
        return result, mq
