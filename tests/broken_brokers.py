"""Deliberately broken brokers: each wraps a correct ``ModelBroker`` and breaks ONE rule.

They prove the conformance machine's power (STYLE lesson 7): every one must be
caught, and the test names which invariant or lockstep comparison caught it.
``BROKEN`` maps a name to ``(factory, what it breaks)``; a factory has the
conformance signature ``(clock, config, workdir) -> Broker``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import attrs

from rmqspec.model.broker import ModelBroker
from rmqspec.model.lifecycle import effective_max_reconsume_times
from rmqspec.model.message import MessageQueue
from rmqspec.model.results import PullResult, SendResult, TxnAction


class Wrapped:
    """Delegates every operation to a correct ModelBroker; subclasses override one."""

    def __init__(self, clock: Any, config: Any, workdir: Any = None) -> None:
        self.clock = clock
        self.inner = ModelBroker(clock, self.adjust(config))

    def adjust(self, config: Any) -> Any:
        return config

    @property
    def capabilities(self) -> frozenset:
        return self.inner.capabilities

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _original(self, commitlog_offset: int) -> Any:
        return self.inner.store.look(commitlog_offset)

    def _max(self, group: str, request_max: int | None) -> int | None:
        config = self.inner.groups.get(group)
        if config is None:
            return None
        return effective_max_reconsume_times(request_max, config.retry_max_times)


class DlqOneRetryEarly(Wrapped):
    """Routes to the DLQ when reconsume_times == max − 1 (one retry too few)."""

    def send_back(self, group, commitlog_offset, delay_level, origin_msg_id, max_reconsume_times):
        original, limit = self._original(commitlog_offset), self._max(group, max_reconsume_times)
        if original is not None and limit is not None and original.reconsume_times == limit - 1:
            delay_level = -1
        return self.inner.send_back(group, commitlog_offset, delay_level, origin_msg_id,
                                    max_reconsume_times)


class DelayOneSecondEarly(Wrapped):
    """The schedule service fires copies 1 s before their deliver timestamp."""

    def tick(self):
        now = self.clock.now()
        inner = self.inner
        inner.schedule.deliver_due(
            inner.store, now + 1000, lambda e, n, lv, ts: inner._fired(now, e, n, lv, ts))
        return inner.tick()


class LockStolenBeforeExpiry(Wrapped):
    """Another client takes a lock after 30 s instead of after the broker's 60 s."""

    def lock_batch(self, group, client_id, mqs):
        now = self.clock.now()
        return frozenset(mq for mq, ok in self.inner.locks.lock_batch(
            group, client_id, mqs, now, 30_000) if ok)


class LockNeverExpires(Wrapped):
    """An expired lock is never taken over."""

    def lock_batch(self, group, client_id, mqs):
        now = self.clock.now()
        return frozenset(mq for mq, ok in self.inner.locks.lock_batch(
            group, client_id, mqs, now, 10**15) if ok)


class RollbackCommits(Wrapped):
    """END_TRANSACTION ROLLBACK writes the real message (op written without the check)."""

    def end_transaction(self, producer_group, commitlog_offset, tsto, action, from_check):
        if action is TxnAction.ROLLBACK:
            action = TxnAction.COMMIT
        return self.inner.end_transaction(producer_group, commitlog_offset, tsto, action, from_check)


class CommitIgnored(Wrapped):
    """END_TRANSACTION COMMIT writes only the op message (the real message never appears)."""

    def end_transaction(self, producer_group, commitlog_offset, tsto, action, from_check):
        if action is TxnAction.COMMIT:
            action = TxnAction.ROLLBACK
        return self.inner.end_transaction(producer_group, commitlog_offset, tsto, action, from_check)


class OffsetPlusOne(Wrapped):
    """UPDATE_CONSUMER_OFFSET stores offset + 1 (past the lowest unacknowledged message)."""

    def update_offset(self, group, mq, offset):
        return self.inner.update_offset(group, mq, offset + 1)


class SyncSendLostOnPower(Wrapped):
    """A power loss drops the last record although SYNC flush acknowledged it."""

    def recover(self, survivors=None):
        inner = self.inner
        total = len(inner.store.records)
        if inner.durability.crash_kind == "power" and total:
            inner.durability.flushed = min(inner.durability.flushed, total - 1)
            return inner.recover(survivors=total - 1)
        return inner.recover()


class CheckBeforeTimeout(Wrapped):
    """Transaction checks start after 1 s instead of transactionTimeOut (6 s)."""

    def adjust(self, config):
        return attrs.evolve(config, transaction_timeout_ms=1000)


class OneCheckTooMany(Wrapped):
    """A half is checked transactionCheckMax + 1 times before it is discarded."""

    def adjust(self, config):
        return attrs.evolve(config, transaction_check_max=config.transaction_check_max + 1)


class RetryLevelOffByOne(Wrapped):
    """Level 0 send-backs use level 2 + reconsume_times instead of 3 + reconsume_times."""

    def send_back(self, group, commitlog_offset, delay_level, origin_msg_id, max_reconsume_times):
        original = self._original(commitlog_offset)
        if delay_level == 0 and original is not None:
            delay_level = 2 + original.reconsume_times
        return self.inner.send_back(group, commitlog_offset, delay_level, origin_msg_id,
                                    max_reconsume_times)


class TagFilterIgnored(Wrapped):
    """PULL_MESSAGE ignores the subscription's tags."""

    def pull(self, group, mq, offset, max_nums=32, subscription="*"):
        return self.inner.pull(group, mq, offset, max_nums, "*")


class QueueOffsetSkips(Wrapped):
    """Every third acknowledged send reports a queue offset one past where it is stored."""

    sends = 0

    def send(self, msg, queue_id):
        res: SendResult = self.inner.send(msg, queue_id)
        self.sends += 1
        if self.sends % 3 == 0:
            return attrs.evolve(res, queue_offset=res.queue_offset + 1)
        return res


class DlqWrongReconsumeTimes(Wrapped):
    """DLQ copies keep the failed copy's reconsume_times (no + 1)."""

    def pull(self, group, mq, offset, max_nums=32, subscription="*"):
        res: PullResult = self.inner.pull(group, mq, offset, max_nums, subscription)
        if not mq.topic.startswith("%DLQ%"):
            return res
        fixed = tuple(attrs.evolve(m, reconsume_times=m.reconsume_times - 1) for m in res.messages)
        return attrs.evolve(res, messages=fixed)


class DuplicateDelivery(Wrapped):
    """A pull that finds several messages answers a next offset one too small (redelivery)."""

    def pull(self, group, mq, offset, max_nums=32, subscription="*"):
        res: PullResult = self.inner.pull(group, mq, offset, max_nums, subscription)
        if len(res.messages) > 1:
            return attrs.evolve(res, next_begin_offset=res.next_begin_offset - 1)
        return res


def _factory(cls: type[Wrapped]) -> Callable[..., Any]:
    def make(clock: Any, config: Any, workdir: Any = None) -> Wrapped:
        return cls(clock, config, workdir)

    make.__name__ = f"{cls.__name__}_factory"
    make.__doc__ = cls.__doc__
    return make


BROKEN: dict[str, Callable[..., Any]] = {
    "check_before_timeout": _factory(CheckBeforeTimeout),
    "dlq_one_retry_early": _factory(DlqOneRetryEarly),
    "delay_one_second_early": _factory(DelayOneSecondEarly),
    "lock_stolen_before_expiry": _factory(LockStolenBeforeExpiry),
    "lock_never_expires": _factory(LockNeverExpires),
    "rollback_commits": _factory(RollbackCommits),
    "commit_ignored": _factory(CommitIgnored),
    "offset_plus_one": _factory(OffsetPlusOne),
    "sync_send_lost_on_power": _factory(SyncSendLostOnPower),
    "one_check_too_many": _factory(OneCheckTooMany),
    "retry_level_off_by_one": _factory(RetryLevelOffByOne),
    "tag_filter_ignored": _factory(TagFilterIgnored),
    "queue_offset_skips": _factory(QueueOffsetSkips),
    "dlq_wrong_reconsume_times": _factory(DlqWrongReconsumeTimes),
    "duplicate_delivery": _factory(DuplicateDelivery),
}

__all__ = ["BROKEN", "Iterable", "MessageQueue"]

# Importable as ``broken_brokers:commit_ignored`` for ``rmqspec check --broker`` (tests/cli/test_check_cli.py).
commit_ignored = BROKEN["commit_ignored"]
