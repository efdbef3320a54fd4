"""A client's connection to a broker, with injectable request loss.

Theory of operation
-------------------
The reference client talks to any ``Broker`` directly; wrapping it in a
``Link`` lets a test or a state machine lose requests on the way, the way a
network partition or a timeout does in RocketMQ (a ``RemotingException`` on
the client). The broker behind the link is untouched: a lost request never
reaches it.

- ``fail(operation, times=None)`` loses the next ``times`` calls of that
  operation (``None``: until ``heal``). A lost call of an operation that
  returns a ``ResponseCode`` (``send_back``, ``end_transaction``) returns
  ``code`` (default SYSTEM_ERROR) — for the oneway END_TRANSACTION that is
  the "lost end-transaction" of SPEC §4.6; any other lost call raises
  ``RequestLost``.
- ``lose_response(operation, times=None)``: the next calls reach the broker, which does what
  they ask; then the answer is lost on the way back (a RemotingTimeoutException in RocketMQ):
  ``ResponseLost`` is raised. A producer's retry of a send whose answer was lost stores the message
  again — RocketMQ's commonest duplicate (issue 42).
- a oneway send (``send_oneway``) lost on the link raises nothing: the client wrote it and waits
  for no answer.
- ``lost`` counts the calls lost per operation, ``responses_lost`` the answers.

Everything else is delegated unchanged, so a ``Link`` satisfies the
``Broker`` protocol.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rmqspec.model.message import Message, MessageQueue
from rmqspec.model.results import CheckRequest, PullResult, ResponseCode, SendResult, TxnAction

OPERATIONS = frozenset(
    {
        "create_topic",
        "create_group",
        "send",
        "send_oneway",
        "send_batch",
        "send_half",
        "end_transaction",
        "pull",
        "send_back",
        "update_offset",
        "query_offset",
        "search_offset",
        "lock_batch",
        "unlock_batch",
    }
)
_CODE_OPERATIONS = frozenset({"send_back", "end_transaction"})


class RequestLost(ConnectionError):
    """The request did not reach the broker (injected by a ``Link``)."""

    def __init__(self, operation: str) -> None:
        super().__init__(f"{operation}: request lost on the link (injected fault)")
        self.operation = operation


class ResponseLost(ConnectionError):
    """The request reached the broker; its answer did not reach the client (injected by a ``Link``)."""

    def __init__(self, operation: str) -> None:
        super().__init__(f"{operation}: response lost on the link after the broker handled it (injected fault)")
        self.operation = operation


class Link:
    """Delegates to ``broker``; loses the calls it was told to lose."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker
        self._failing: dict[str, int | None] = {}
        self._codes: dict[str, ResponseCode] = {}
        self._answers_failing: dict[str, int | None] = {}
        self.lost: Counter[str] = Counter()
        self.responses_lost: Counter[str] = Counter()

    @property
    def capabilities(self) -> Any:
        return self.broker.capabilities

    def fail(
        self,
        operation: str,
        times: int | None = None,
        code: ResponseCode = ResponseCode.SYSTEM_ERROR,
    ) -> None:
        if operation not in OPERATIONS:
            raise ValueError(f"unknown operation {operation!r}; one of {sorted(OPERATIONS)}")
        if times is not None and times <= 0:
            raise ValueError(f"times must be positive or None, got {times}")
        self._failing[operation] = times
        self._codes[operation] = code

    def lose_response(self, operation: str, times: int | None = None) -> None:
        """Lose the answers of the next ``times`` calls of ``operation`` (None: until ``heal``)."""
        if operation not in OPERATIONS or operation == "send_oneway":
            raise ValueError(f"no answer to lose for {operation!r}; one of {sorted(OPERATIONS - {'send_oneway'})}")
        if times is not None and times <= 0:
            raise ValueError(f"times must be positive or None, got {times}")
        self._answers_failing[operation] = times

    def heal(self, operation: str | None = None) -> None:
        if operation is None:
            self._failing.clear()
            self._answers_failing.clear()
        else:
            self._failing.pop(operation, None)
            self._answers_failing.pop(operation, None)

    @staticmethod
    def _take(failing: dict[str, int | None], operation: str) -> bool:
        """Whether ``operation``'s next call fails by ``failing`` (a countdown, None: until healed)."""
        if operation not in failing:
            return False
        left = failing[operation]
        if left is not None:
            if left <= 1:
                del failing[operation]
            else:
                failing[operation] = left - 1
        return True

    def _answer(self, operation: str, value: Any) -> Any:
        """``value``, unless this answer is to be lost (then ``ResponseLost``)."""
        if not self._take(self._answers_failing, operation):
            return value
        self.responses_lost[operation] += 1
        raise ResponseLost(operation)

    def _lose(self, operation: str) -> bool:
        if not self._take(self._failing, operation):
            return False
        self.lost[operation] += 1
        if operation in _CODE_OPERATIONS:
            return True
        raise RequestLost(operation)

    def create_topic(self, topic: str, queue_nums: int) -> None:
        self._lose("create_topic")
        self.broker.create_topic(topic, queue_nums)
        self._answer("create_topic", None)

    def create_group(
        self, group: str, retry_max_times: int = 16, retry_queue_nums: int = 1
    ) -> None:
        self._lose("create_group")
        self.broker.create_group(group, retry_max_times, retry_queue_nums)
        self._answer("create_group", None)

    def send(self, msg: Message, queue_id: int) -> SendResult:
        self._lose("send")
        return self._answer("send", self.broker.send(msg, queue_id))

    def send_oneway(self, msg: Message, queue_id: int) -> None:
        try:
            self._lose("send_oneway")
        except RequestLost:
            return  # written to the connection, lost beyond it: the client never knows
        self.broker.send_oneway(msg, queue_id)

    def send_batch(self, msgs: Sequence[Message], queue_id: int) -> SendResult:
        self._lose("send_batch")
        return self._answer("send_batch", self.broker.send_batch(msgs, queue_id))

    def send_half(self, msg: Message, queue_id: int, producer_group: str) -> SendResult:
        self._lose("send_half")
        return self._answer("send_half", self.broker.send_half(msg, queue_id, producer_group))

    def end_transaction(
        self,
        producer_group: str,
        commitlog_offset: int,
        tran_state_table_offset: int,
        action: TxnAction,
        from_check: bool,
    ) -> ResponseCode:
        if self._lose("end_transaction"):
            return self._codes["end_transaction"]
        code = self.broker.end_transaction(
            producer_group, commitlog_offset, tran_state_table_offset, action, from_check
        )
        return self._answer("end_transaction", code)

    def pull(
        self,
        group: str,
        mq: MessageQueue,
        offset: int,
        max_nums: int = 32,
        subscription: str | None = "*",
        expression_type: str = "TAG",
        sub_version: int = 0,
    ) -> PullResult:
        self._lose("pull")
        result = self.broker.pull(group, mq, offset, max_nums, subscription, expression_type, sub_version)
        return self._answer("pull", result)

    def heartbeat(self, group: str, client_id: str, subscriptions: Mapping[str, tuple[str, str, int]]) -> None:
        self._lose("heartbeat")
        self.broker.heartbeat(group, client_id, subscriptions)

    def unregister_consumer(self, group: str, client_id: str) -> None:
        self._lose("unregister_consumer")
        self.broker.unregister_consumer(group, client_id)

    def send_back(
        self,
        group: str,
        commitlog_offset: int,
        delay_level: int,
        origin_msg_id: str | None,
        max_reconsume_times: int | None,
    ) -> ResponseCode:
        if self._lose("send_back"):
            return self._codes["send_back"]
        code = self.broker.send_back(
            group, commitlog_offset, delay_level, origin_msg_id, max_reconsume_times
        )
        return self._answer("send_back", code)

    def update_offset(self, group: str, mq: MessageQueue, offset: int) -> None:
        self._lose("update_offset")
        self.broker.update_offset(group, mq, offset)
        self._answer("update_offset", None)

    def query_offset(self, group: str, mq: MessageQueue) -> int:
        self._lose("query_offset")
        return self._answer("query_offset", self.broker.query_offset(group, mq))

    def search_offset(self, topic: str, queue_id: int, timestamp: int) -> int:
        self._lose("search_offset")
        return self._answer("search_offset", self.broker.search_offset(topic, queue_id, timestamp))

    def lock_batch(
        self, group: str, client_id: str, mqs: Iterable[MessageQueue]
    ) -> frozenset[MessageQueue]:
        self._lose("lock_batch")
        return self._answer("lock_batch", self.broker.lock_batch(group, client_id, mqs))

    def unlock_batch(self, group: str, client_id: str, mqs: Iterable[MessageQueue]) -> None:
        self._lose("unlock_batch")
        self.broker.unlock_batch(group, client_id, mqs)
        self._answer("unlock_batch", None)

    def tick(self) -> list[CheckRequest]:
        return self.broker.tick()

    def flush(self) -> None:
        self.broker.flush()

    def close(self) -> None:
        self.broker.close()
