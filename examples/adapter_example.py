"""An example broker adapter for ``rmqspec conform`` (see properties/README.md).

Run from this directory:  rmqspec conform --broker adapter_example:factory

A real adapter maps each ``Broker`` operation onto its broker's API (a
RocketMQ remoting client, a proxy, a storage engine). This one forwards to
the reference ``ModelBroker`` so that it passes; replace the bodies with
calls to your broker. The factory gets the machine's clock (a ManualClock:
use ``clock.now()`` for every timestamp your broker needs), the default
``BrokerConfig`` and a fresh empty ``workdir`` for files.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from rmqspec.model import (
    BrokerConfig,
    Capability,
    CheckRequest,
    Clock,
    Message,
    MessageQueue,
    PullResult,
    ResponseCode,
    SendResult,
    TxnAction,
)
from rmqspec.model.broker import ModelBroker


class ExampleAdapter:
    """Implements rmqspec.model.Broker by delegation."""

    # Declare what the conformance machine may drive; without CRASH the crash rule is skipped. DISK_USAGE
    # (set_disk_usage, commitlog_min_offset): the machine's clock passes days (transaction discards, retention),
    # and a broker whose retention then deletes files must say how far, or what it took is judged LOST.
    capabilities = frozenset({Capability.EXACT_TIME, Capability.CRASH, Capability.DISK_USAGE})

    def __init__(self, clock: Clock, config: BrokerConfig, workdir: str) -> None:
        self._b = ModelBroker(clock, config)
        self.workdir = workdir

    def create_topic(self, topic: str, queue_nums: int) -> None:
        self._b.create_topic(topic, queue_nums)

    def create_group(self, group: str, retry_max_times: int = 16, retry_queue_nums: int = 1) -> None:
        self._b.create_group(group, retry_max_times, retry_queue_nums)

    def send(self, msg: Message, queue_id: int) -> SendResult:
        return self._b.send(msg, queue_id)

    def send_half(self, msg: Message, queue_id: int, producer_group: str) -> SendResult:
        return self._b.send_half(msg, queue_id, producer_group)

    def end_transaction(self, producer_group: str, commitlog_offset: int,
                        tran_state_table_offset: int, action: TxnAction,
                        from_check: bool) -> ResponseCode:
        return self._b.end_transaction(producer_group, commitlog_offset, tran_state_table_offset,
                                       action, from_check)

    def pull(self, group: str, mq: MessageQueue, offset: int, max_nums: int = 32,
             subscription: str | None = "*", expression_type: str = "TAG", sub_version: int = 0) -> PullResult:
        return self._b.pull(group, mq, offset, max_nums, subscription, expression_type, sub_version)

    def heartbeat(self, group: str, client_id: str, subscriptions: Mapping[str, tuple[str, str, int]]) -> None:
        self._b.heartbeat(group, client_id, subscriptions)

    def unregister_consumer(self, group: str, client_id: str) -> None:
        self._b.unregister_consumer(group, client_id)

    def send_back(self, group: str, commitlog_offset: int, delay_level: int,
                  origin_msg_id: str | None, max_reconsume_times: int | None) -> ResponseCode:
        return self._b.send_back(group, commitlog_offset, delay_level, origin_msg_id,
                                 max_reconsume_times)

    def update_offset(self, group: str, mq: MessageQueue, offset: int) -> None:
        self._b.update_offset(group, mq, offset)

    def query_offset(self, group: str, mq: MessageQueue) -> int:
        return self._b.query_offset(group, mq)

    def lock_batch(self, group: str, client_id: str,
                   mqs: Iterable[MessageQueue]) -> frozenset[MessageQueue]:
        return self._b.lock_batch(group, client_id, mqs)

    def unlock_batch(self, group: str, client_id: str, mqs: Iterable[MessageQueue]) -> None:
        self._b.unlock_batch(group, client_id, mqs)

    def tick(self) -> list[CheckRequest]:
        return self._b.tick()

    def flush(self) -> None:
        self._b.flush()

    def close(self) -> None:
        self._b.close()

    def set_disk_usage(self, ratio: float) -> None:
        self._b.set_disk_usage(ratio)

    def commitlog_min_offset(self) -> int:
        return self._b.commitlog_min_offset()

    def crash(self, kind: str) -> None:
        self._b.crash(kind)

    def recover(self) -> None:
        self._b.recover()


def factory(clock: Clock, config: BrokerConfig, workdir: str) -> ExampleAdapter:
    return ExampleAdapter(clock, config, workdir)
