"""Results and response codes of broker operations (RocketMQ 4.9 names).

``ResponseCode`` values are RocketMQ's ``ResponseCode`` numbers, so a network
adapter can map them one-to-one. ``PROPERTIES_SIZE_EXCEEDED`` is the store's
``PutMessageStatus`` name for the properties limit (RocketMQ answers it with
MESSAGE_ILLEGAL on the wire); rmqspec keeps the precise name.
"""

from __future__ import annotations

import enum

import attrs

from rmqspec.model.message import StoredMessage


class ResponseCode(enum.IntEnum):
    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3
    TRANSACTION_FAILED = 4
    FLUSH_DISK_TIMEOUT = 10
    SLAVE_NOT_AVAILABLE = 11
    FLUSH_SLAVE_TIMEOUT = 12
    MESSAGE_ILLEGAL = 13
    SERVICE_NOT_AVAILABLE = 14
    VERSION_NOT_SUPPORTED = 15
    NO_PERMISSION = 16
    TOPIC_NOT_EXIST = 17
    TOPIC_EXIST_ALREADY = 18
    PULL_NOT_FOUND = 19
    PULL_RETRY_IMMEDIATELY = 20
    PULL_OFFSET_MOVED = 21
    QUERY_NOT_FOUND = 22
    SUBSCRIPTION_PARSE_FAILED = 23
    SUBSCRIPTION_NOT_EXIST = 24
    SUBSCRIPTION_NOT_LATEST = 25
    SUBSCRIPTION_GROUP_NOT_EXIST = 26
    FILTER_DATA_NOT_EXIST = 27
    FILTER_DATA_NOT_LATEST = 28
    INVALID_PARAMETER = 29  # 5.x: pop's maxMsgNums > 32 or queue id out of range
    NO_MESSAGE = 208  # 5.x: an ack or change of invisible time for an offset outside the queue
    POLLING_FULL = 209  # 5.x: pop's long-polling table is full
    POLLING_TIMEOUT = 210  # 5.x: a pop found nothing (the client's POLLING_NOT_FOUND)
    PROPERTIES_SIZE_EXCEEDED = 213


class BrokerError(Exception):
    """A request the broker refused; ``code`` is the response code."""

    def __init__(self, code: ResponseCode, remark: str) -> None:
        super().__init__(f"{code.name}: {remark}")
        self.code = code
        self.remark = remark


class SendStatus(enum.Enum):
    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


class PullStatus(enum.Enum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


class TxnAction(enum.Enum):
    """END_TRANSACTION's commitOrRollback (LocalTransactionState)."""

    COMMIT = "COMMIT"
    ROLLBACK = "ROLLBACK"
    UNKNOWN = "UNKNOWN"


@attrs.frozen
class SendResult:
    status: SendStatus
    msg_id: str
    uniq_key: str | None
    queue_offset: int
    commitlog_offset: int


@attrs.frozen
class PullResult:
    status: PullStatus
    messages: tuple[StoredMessage, ...]
    next_begin_offset: int
    min_offset: int
    max_offset: int


@attrs.frozen
class CheckRequest:
    """A transaction check the broker sends to a producer group.

    ``message`` is the re-put half as the producer sees it (topic restored
    from REAL_TOPIC, TRANSACTION_CHECK_TIMES set). ``commitlog_offset`` and
    ``tran_state_table_offset`` are what the producer echoes back in
    ``end_transaction`` (RocketMQ's ``commitLogOffset`` and
    ``tranStateTableOffset``).
    """

    producer_group: str
    message: StoredMessage
    transaction_id: str | None
    commitlog_offset: int
    tran_state_table_offset: int
