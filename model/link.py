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
- ``lost`` counts the calls lost per operation.

Everything else is delegated unchanged, so a ``Link`` satisfies the
``Broker`` protocol.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from rmqspec.model.message import Message, MessageQueue
from rmqspec.model.results import CheckRequest, PullResult, ResponseCode, SendResult, TxnAction

OPERATIONS = frozenset(
    {
        "create_topic",
        "create_group",
        "send",
        "send_half",
        "end_transaction",
        "pull",
        "send_back",
        "update_offset",
        "query_offset",
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


class Link:
    """Delegates to ``broker``; loses the calls it was told to lose."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker
        self._failing: dict[str, int | None] = {}
        self._codes: dict[str, ResponseCode] = {}
        self.lost: Counter[str] = Counter()

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

    def heal(self, operation: str | None = None) -> None:
        if operation is None:
            self._failing.clear()
        else:
            self._failing.pop(operation, None)

    def _lose(self, operation: str) -> bool:
        if operation not in self._failing:
            return False
        left = self._failing[operation]
        if left is not None:
            if left <= 1:
                del self._failing[operation]
            else:
                self._failing[operation] = left - 1
        self.lost[operation] += 1
        if operation in _CODE_OPERATIONS:
            return True
        raise RequestLost(operation)

    def create_topic(self, topic: str, queue_nums: int) -> None:
        self._lose("create_topic")
        self.broker.create_topic(topic, queue_nums)

    def create_group(
        self, group: str, retry_max_times: int = 16, retry_queue_nums: int = 1
    ) -> None:
        self._lose("create_group")
        self.broker.create_group(group, retry_max_times, retry_queue_nums)

    def send(self, msg: Message, queue_id: int) -> SendResult:
        self._lose("send")
        return self.broker.send(msg, queue_id)

    def send_half(self, msg: Message, queue_id: int, producer_group: str) -> SendResult:
        self._lose("send_half")
        return self.broker.send_half(msg, queue_id, producer_group)

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
        return self.broker.end_transaction(
            producer_group, commitlog_offset, tran_state_table_offset, action, from_check
        )

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
        return self.broker.pull(group, mq, offset, max_nums, subscription, expression_type, sub_version)

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
        return self.broker.send_back(
            group, commitlog_offset, delay_level, origin_msg_id, max_reconsume_times
        )

    def update_offset(self, group: str, mq: MessageQueue, offset: int) -> None:
        self._lose("update_offset")
        self.broker.update_offset(group, mq, offset)

    def query_offset(self, group: str, mq: MessageQueue) -> int:
        self._lose("query_offset")
        return self.broker.query_offset(group, mq)

    def lock_batch(
        self, group: str, client_id: str, mqs: Iterable[MessageQueue]
    ) -> frozenset[MessageQueue]:
        self._lose("lock_batch")
        return self.broker.lock_batch(group, client_id, mqs)

    def unlock_batch(self, group: str, client_id: str, mqs: Iterable[MessageQueue]) -> None:
        self._lose("unlock_batch")
        self.broker.unlock_batch(group, client_id, mqs)

    def tick(self) -> list[CheckRequest]:
        return self.broker.tick()

    def flush(self) -> None:
        self.broker.flush()

    def close(self) -> None:
        self.broker.close()
