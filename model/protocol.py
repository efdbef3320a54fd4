"""The ``Broker`` protocol: the conformance contract (SPEC §3).

Operations mirror RocketMQ request codes one-to-one so a network adapter is a
thin mapping. Brokers declare optional capabilities; the conformance machine
skips rules a broker cannot drive.

Errors: a refused request raises ``BrokerError(code)`` where the protocol
returns a result object (``send``, ``send_half``, ``pull``), and is returned as
a ``ResponseCode`` where the protocol returns a code (``end_transaction``,
``send_back``). Invalid messages raise ``InvalidMessage``. Optional operations are declared by
protocols of their own: ``CrashableBroker`` (with the ``crash`` capability), ``OnewayBroker``,
``BatchBroker``, ``SearchBroker``, ``DiskBroker`` (with the ``disk_usage`` capability), ``PopBroker``
(with the ``pop`` capability).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol, runtime_checkable

from rmqspec.model.message import Message, MessageQueue
from rmqspec.model.pop import INIT_MIN, PopHandle, PopResult
from rmqspec.model.results import CheckRequest, PullResult, ResponseCode, SendResult, TxnAction


class Capability(enum.Enum):
    CRASH = "crash"  # crash(kind) and recover()
    EXACT_TIME = "exact_time"  # honours an injected clock to the millisecond
    CLOSE_REOPEN = "close_reopen"  # close() then reopen() keeps durable state
    # its workdir holds a RocketMQ 4.9 store (commitlog/, consumequeue/, config/, checkpoint): the
    # conformance machine reads it back after shutdowns and restarts (properties/store_probe.py)
    ROCKETMQ_STORE = "rocketmq_store"
    # set_disk_usage(ratio): the disk usage the clean service sees (model/retention.py), injected
    DISK_USAGE = "disk_usage"
    # stall_disk(ms): from now no flush completes for ms (a hung disk): a SYNC put that waits is answered
    # FLUSH_DISK_TIMEOUT, stored; nothing written meanwhile is durable until the stall ends
    DISK_STALL = "disk_stall"
    # block_next_file() / unblock_next_file(): the next commitlog file cannot be created (CREATE_MAPEDFILE_FAILED:
    # a put needing it is answered SYSTEM_ERROR, nothing stored; model/filefault.py)
    FILE_CREATE_FAULT = "file_create_fault"
    # hold_put_lock(ms): a slow put holds the put lock from now for ms; past osPageCacheBusyTimeOutMills sends are
    # answered SYSTEM_BUSY and puts reaching the store OS_PAGECACHE_BUSY (model/putlock.py)
    PUT_LOCK_HOLD = "put_lock_hold"
    # pop(...), ack(...), batch_ack(...), change_invisible_time(...): 5.x pop consumption (PopBroker; model/pop.py);
    # a broker whose profile has no pop (4.9) answers them REQUEST_CODE_NOT_SUPPORTED, as 4.9.8 does
    POP = "pop"


@runtime_checkable
class Broker(Protocol):
    """One RocketMQ broker as rmqspec drives it. All times come from the injected clock."""

    capabilities: frozenset[Capability]

    def create_topic(self, topic: str, queue_nums: int) -> None: ...

    def create_group(
        self, group: str, retry_max_times: int = 16, retry_queue_nums: int = 1
    ) -> None: ...

    def send(self, msg: Message, queue_id: int) -> SendResult: ...

    def send_half(self, msg: Message, queue_id: int, producer_group: str) -> SendResult: ...

    def end_transaction(
        self,
        producer_group: str,
        commitlog_offset: int,
        tran_state_table_offset: int,
        action: TxnAction,
        from_check: bool,
    ) -> ResponseCode: ...

    def pull(
        self,
        group: str,
        mq: MessageQueue,
        offset: int,
        max_nums: int = 32,
        subscription: str | None = "*",
        expression_type: str = "TAG",
        sub_version: int = 0,
    ) -> PullResult: ...

    def heartbeat(
        self, group: str, client_id: str, subscriptions: Mapping[str, tuple[str, str, int]]
    ) -> None: ...

    def unregister_consumer(self, group: str, client_id: str) -> None: ...

    def send_back(
        self,
        group: str,
        commitlog_offset: int,
        delay_level: int,
        origin_msg_id: str | None,
        max_reconsume_times: int | None,
    ) -> ResponseCode: ...

    def update_offset(self, group: str, mq: MessageQueue, offset: int) -> None: ...

    def query_offset(self, group: str, mq: MessageQueue) -> int: ...

    def lock_batch(
        self, group: str, client_id: str, mqs: Iterable[MessageQueue]
    ) -> frozenset[MessageQueue]: ...

    def unlock_batch(self, group: str, client_id: str, mqs: Iterable[MessageQueue]) -> None: ...

    def tick(self) -> list[CheckRequest]: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...


@runtime_checkable
class OnewayBroker(Broker, Protocol):
    """A broker that takes oneway sends: SEND_MESSAGE with the oneway flag (``sendOneway``). The broker
    stores the message as ``send`` would and answers nothing, a refusal included; a broker that records
    trace events records it as a ``send`` with status ONEWAY (nobody saw it acknowledged)."""

    def send_oneway(self, msg: Message, queue_id: int) -> None: ...


@runtime_checkable
class BatchBroker(Broker, Protocol):
    """A broker that takes batches: SEND_BATCH_MESSAGE (``DefaultMQProducer.send(Collection)``), stored as
    one append — consecutive offsets in one commitlog file, one born and one store timestamp; the answer
    names the first item's offsets and every item's msgId and UNIQ_KEY joined by commas."""

    def send_batch(self, msgs: Sequence[Message], queue_id: int) -> SendResult: ...


@runtime_checkable
class SearchBroker(Broker, Protocol):
    """A broker that answers lookups by time: SEARCH_OFFSET_BY_TIMESTAMP (request code 29,
    ``MQAdminImpl.searchOffset``), the queue offset ``DefaultMessageStore.getOffsetInQueueByTime`` gives
    (``model/timesearch.py``): 0 for a queue never written, else the unit stored at ``timestamp`` or the
    nearer of its neighbours in the consume-queue file the timestamp selects. CONSUME_FROM_TIMESTAMP asks it."""

    def search_offset(self, topic: str, queue_id: int, timestamp: int) -> int: ...


@runtime_checkable
class CrashableBroker(Broker, Protocol):
    """A broker with the ``crash`` capability."""

    def crash(self, kind: str) -> None: ...

    def recover(self) -> None: ...


@runtime_checkable
class DiskBroker(Broker, Protocol):
    """A broker with the ``disk_usage`` capability: the partition's usage its clean service sees
    (a fraction in [0, 1]; over diskMaxUsedSpaceRatio it deletes expired files outside deleteWhen,
    over 0.85 at once, over 0.90 it refuses puts) is set, not measured."""

    def set_disk_usage(self, ratio: float) -> None: ...

    def commitlog_min_offset(self) -> int:
        """The commitlog's first byte kept (GET_BROKER_RUNTIME_INFO's ``commitLogMinOffset``)."""
        ...


@runtime_checkable
class StallBroker(Broker, Protocol):
    """A broker with ``Capability.DISK_STALL``: ``stall_disk(ms)`` hangs its disk for ``ms`` from now. No
    flush completes meanwhile (the group commit, the FlushRealTimeService, a waiting put's); a SYNC_FLUSH
    put that waits is answered FLUSH_DISK_TIMEOUT (its ``syncFlushTimeout`` passes; the message is
    stored); the first group commit after the stall flushes what it left. A restart, ``flush`` and
    ``close`` end the stall (they wait for the disk)."""

    def stall_disk(self, ms: int) -> None: ...


@runtime_checkable
class FileFaultBroker(Broker, Protocol):
    """A broker with ``Capability.FILE_CREATE_FAULT``: ``block_next_file()`` makes the commitlog file after the
    one holding the write position uncreatable (returns its start offset) until ``unblock_next_file()`` or a
    restart. A put whose record would start in it is answered SYSTEM_ERROR ("create mapped file failed, server
    is busy or broken."; END_TRANSACTION's commit: SYSTEM_ERROR), nothing stored; a roll first writes the old
    file's blank end, so later puts all need the file until it can be created (``model/filefault.py``)."""

    def block_next_file(self) -> int: ...

    def unblock_next_file(self) -> None: ...


@runtime_checkable
class PutLockBroker(Broker, Protocol):
    """A broker with ``Capability.PUT_LOCK_HOLD``: ``hold_put_lock(ms)`` is a slow put holding the put lock from
    now for ``ms``. Held longer than ``os_page_cache_busy_timeout_ms`` the store is busy: a send (a batch, a
    half, a send-back) is answered SYSTEM_BUSY "[REJECTREQUEST]system busy, start flow control for a while", a
    put that reaches the store (END_TRANSACTION's commit, the services' re-puts) SYSTEM_ERROR; before that a
    put would wait for the lock, which is caller misuse (``putlock.PutWouldWait``). A restart ends the hold
    (``model/putlock.py``)."""

    def hold_put_lock(self, ms: int) -> None: ...


@runtime_checkable
class PopBroker(Broker, Protocol):
    """A broker with ``Capability.POP``: RocketMQ 5.x pop consumption (``model/pop.py`` has the rules and their
    5.3.3 sources). ``pop`` hands ``group`` up to ``max_nums`` (≤ 32) messages of ``topic`` (``queue_id`` −1:
    any queue; its pop retry topic too, unless ``order``), each invisible to the group for ``invisible_ms``
    unless acked; an un-acked one is revived into the pop retry topic with reconsume times + 1. An orderly
    pop (``order``) hands out nothing of a queue while a popped message of it is neither acked nor visible
    again, except to the same ``attempt_id``. ``ack`` / ``batch_ack`` return a response code (a refusal
    included); ``change_invisible_time`` returns the new handle. Refusals raise ``BrokerError``."""

    def pop(self, group: str, topic: str, queue_id: int, max_nums: int, invisible_ms: int, order: bool = False,
            attempt_id: str | None = None, expression: str = "*", expression_type: str = "TAG",
            init_mode: int = INIT_MIN) -> PopResult: ...

    def ack(self, group: str, topic: str, handle: PopHandle) -> ResponseCode: ...

    def batch_ack(self, group: str, topic: str, handles: Iterable[PopHandle]) -> ResponseCode: ...

    def change_invisible_time(self, group: str, topic: str, handle: PopHandle, invisible_ms: int,
                              suspend: bool = False) -> PopHandle: ...
