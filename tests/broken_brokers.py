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
from rmqspec.model.crash import BrokerState
from rmqspec.model.lifecycle import effective_max_reconsume_times
from rmqspec.model.message import TRANSACTION_COMMIT_TYPE, TRANSACTION_NOT_TYPE, MessageQueue, transaction_type
from rmqspec.model.queues import OP_TOPIC, PutRequest, Record, Store, client_pull_status
from rmqspec.model.results import PullResult, ResponseCode, SendResult, TxnAction
from rmqspec.model.sql92 import FilterEvalError, compile_filter, evaluate
from rmqspec.model.timer import PROPERTY_TIMER_OUT_MS, TIMER_TOPIC, is_timer_request, requested_ms
from rmqspec.model.transactions import TransactionService

try:
    from tests.pop_brokers import POP_BROKEN
except ModuleNotFoundError as missing:  # imported as a top-level module (``rmqspec conform --broker
    if missing.name not in ("tests", "tests.pop_brokers"):  # broken_brokers:…`` with this folder on the
        raise  # path): the one beside it
    from pop_brokers import POP_BROKEN  # type: ignore[no-redef]

# the Broker protocol's requests: a subclass's override of one refuses while the broker is down, as the
# wrapped broker does (each broker breaks one rule, not also "answers while crashed")
REQUESTS = ("send", "send_half", "end_transaction", "pull", "heartbeat", "unregister_consumer", "send_back",
            "update_offset", "query_offset", "lock_batch", "unlock_batch", "tick", "flush", "create_topic",
            "create_group")


def _while_up(fn: Callable[..., Any]) -> Callable[..., Any]:
    def request(self: Wrapped, *args: Any, **kwargs: Any) -> Any:
        self.inner._require_running()
        return fn(self, *args, **kwargs)

    request.__name__, request.__doc__ = fn.__name__, fn.__doc__
    return request


class Wrapped:
    """Delegates every operation to a correct ModelBroker; subclasses override one (``REQUESTS``'
    overrides refuse while the broker is down, as the wrapped broker does)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in REQUESTS:
            if name in cls.__dict__:
                setattr(cls, name, _while_up(cls.__dict__[name]))

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


class LockHalfLife(Wrapped):
    """A lock looks expired to another client half its lifetime after the holder's last grant or
    renewal (``now − last_update > lockMaxLiveTime / 2``); renewals and free queues as 4.9.8."""

    def lock_batch(self, group, client_id, mqs):
        now = self.clock.now()
        return frozenset(mq for mq, ok in self.inner.locks.lock_batch(
            group, client_id, mqs, now, self.inner.config.broker_lock_max_live_ms // 2) if ok)


class LockHalfLifeUnrenewed(Wrapped):
    """A lock its holder never renewed looks expired to another client half its lifetime after the
    grant; a renewed one lives lockMaxLiveTime from the last renewal, as in 4.9.8."""

    def __init__(self, clock: Any, config: Any, workdir: Any = None) -> None:
        super().__init__(clock, config, workdir)
        self.unrenewed: set[tuple[str, MessageQueue]] = set()

    def lock_batch(self, group, client_id, mqs):
        table, now = self.inner.locks, self.clock.now()
        half = self.inner.config.broker_lock_max_live_ms // 2
        for mq in set(mqs):
            entry = table.entries.get((group, mq))
            if entry is not None and entry.client_id != client_id and (group, mq) in self.unrenewed \
                    and now - entry.last_update > half:
                del table.entries[(group, mq)]
        before = {mq: table.entries.get((group, mq)) for mq in mqs}
        granted = self.inner.lock_batch(group, client_id, mqs)
        for mq in granted:
            prev = before.get(mq)
            if prev is not None and prev.client_id == client_id:
                self.unrenewed.discard((group, mq))
            else:
                self.unrenewed.add((group, mq))
        return granted


class UnlockFreesHalfExpired(Wrapped):
    """UNLOCK_BATCH_MQ by a client that does not hold the queue frees it when the holder's last
    grant or renewal is older than half the lock's lifetime (the lock "looks expired")."""

    def unlock_batch(self, group, client_id, mqs):
        table, now = self.inner.locks, self.clock.now()
        half = self.inner.config.broker_lock_max_live_ms // 2
        for mq in set(mqs):
            entry = table.entries.get((group, mq))
            if entry is not None and entry.client_id != client_id and now - entry.last_update > half:
                del table.entries[(group, mq)]
        return self.inner.unlock_batch(group, client_id, mqs)


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

    def pull(self, group, mq, offset, max_nums=32, subscription="*", expression_type="TAG", sub_version=0):
        if subscription is None:  # the same bug on the group's heartbeated subscription
            self.inner.pull(group, mq, offset, max_nums, None, expression_type, sub_version)  # its refusals
            subscription, expression_type = self.inner.consumers.resolve(
                group, mq.topic, sub_version, self.inner.config.behaviour.suggest_todo())
        return self.inner.pull(group, mq, offset, max_nums, "*") if expression_type == "TAG" \
            else self.inner.pull(group, mq, offset, max_nums, subscription, expression_type)


class SqlFilterIgnored(Wrapped):
    """A SQL92 pull that compiles returns what a ``*`` pull returns (the expression is checked, not applied)."""

    def pull(self, group, mq, offset, max_nums=32, subscription="*", expression_type="TAG", sub_version=0):
        if subscription is None:  # the same bug on the group's heartbeated subscription
            self.inner.pull(group, mq, offset, max_nums, None, expression_type, sub_version)  # its refusals
            subscription, expression_type = self.inner.consumers.resolve(
                group, mq.topic, sub_version, self.inner.config.behaviour.suggest_todo())
        if expression_type == "TAG":
            return self.inner.pull(group, mq, offset, max_nums, subscription)
        self.inner.pull(group, mq, offset, max_nums, subscription, expression_type)  # refusals as the model's
        return self.inner.pull(group, mq, offset, max_nums, "*")


class SqlNullIsTrue(Wrapped):
    """SQL92 evaluation treats an unknown (NULL) result as a match: `region = 'HZ'` selects messages
    without a region."""

    def pull(self, group, mq, offset, max_nums=32, subscription="*", expression_type="TAG", sub_version=0):
        if subscription is None:  # the same bug on the group's heartbeated subscription
            self.inner.pull(group, mq, offset, max_nums, None, expression_type, sub_version)  # its refusals
            subscription, expression_type = self.inner.consumers.resolve(
                group, mq.topic, sub_version, self.inner.config.behaviour.suggest_todo())
        if expression_type == "TAG":
            return self.inner.pull(group, mq, offset, max_nums, subscription)
        self.inner.pull(group, mq, offset, max_nums, subscription, expression_type)  # refusals as the model's
        node = compile_filter(subscription)

        def null_true(props):
            try:
                return evaluate(node, props) is not False
            except FilterEvalError:
                return False

        res = self.inner.store.get_message(mq.topic, mq.queue_id, offset, max_nums, None, null_true)
        messages = tuple(r.to_stored(self.inner.config) for r in res.records)
        status = client_pull_status(res.status, offset)
        return PullResult(status, messages, res.next_begin_offset, res.min_offset, res.max_offset)


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

    def pull(self, group, mq, offset, max_nums=32, subscription="*", expression_type="TAG", sub_version=0):
        res: PullResult = self.inner.pull(group, mq, offset, max_nums, subscription, expression_type, sub_version)
        if not mq.topic.startswith("%DLQ%"):
            return res
        fixed = tuple(attrs.evolve(m, reconsume_times=m.reconsume_times - 1) for m in res.messages)
        return attrs.evolve(res, messages=fixed)


class DuplicateDelivery(Wrapped):
    """A pull that finds several messages answers a next offset one too small (redelivery)."""

    def pull(self, group, mq, offset, max_nums=32, subscription="*", expression_type="TAG", sub_version=0):
        res: PullResult = self.inner.pull(group, mq, offset, max_nums, subscription, expression_type, sub_version)
        if len(res.messages) > 1:
            return attrs.evolve(res, next_begin_offset=res.next_begin_offset - 1)
        return res


class PullsExclusivePerGroup(Wrapped):
    """PULL_MESSAGE of a group with two or more registered clients (heartbeated, not unregistered) never
    returns a message it already returned to that group since the broker started: a pull from an offset at
    or below the last one returned is served from the one after (the broker takes a group's clients for
    sharers of its queues, as clustering clients are). Only broadcasting shows it: each client of a
    broadcasting group pulls every queue from its own offsets, so the second client to pull a message never
    gets it (issue 42); a lone puller, or clients of disjoint queues that commit what they pulled, never
    pull an offset their group already got."""

    def __init__(self, clock: Any, config: Any, workdir: Any = None) -> None:
        super().__init__(clock, config, workdir)
        self.returned: dict[tuple[str, str, int], int] = {}  # (group, topic, queue) -> last offset returned

    def pull(self, group, mq, offset, max_nums=32, subscription="*", expression_type="TAG", sub_version=0):
        key = (group, mq.topic, mq.queue_id)
        last = self.returned.get(key)
        info = self.inner.consumers.groups.get(group)
        if last is not None and info is not None and len(info.clients) > 1 and 0 <= offset <= last:
            offset = last + 1  # what one client got is not returned to another
        res: PullResult = self.inner.pull(group, mq, offset, max_nums, subscription, expression_type, sub_version)
        if res.messages:
            self.returned[key] = max(-1 if last is None else last, res.messages[-1].queue_offset)
        return res

    def recover(self, survivors=None):  # the table lives in memory: a restart empties it
        self.returned.clear()
        return self.inner.recover(survivors)

    def reopen(self):
        self.returned.clear()
        return self.inner.reopen()


# ---------------------------------------------------------------------------
# Replicas of real, reported Apache RocketMQ bugs (issue 14): each breaks the model the way the
# cited issue describes the real broker misbehaving, so the suite shows what rmqspec would have
# caught. ``REPLICAS`` maps a name to its factory; ``ISSUES`` to the issue it replicates.


class DlqThroughSchedule(Wrapped):
    """apache/rocketmq#2724 (4.x): a message that reached its max reconsume times keeps its delay
    level on the way to the DLQ, so it detours through SCHEDULE_TOPIC_XXXX and lands in %DLQ%
    that delay later (PRs #2723/#3008/#3318)."""

    def __init__(self, clock: Any, config: Any, workdir: Any = None) -> None:
        super().__init__(clock, config, workdir)
        self.pending: list[tuple[int, tuple]] = []

    def send_back(self, group, commitlog_offset, delay_level, origin_msg_id, max_reconsume_times):
        original, limit = self._original(commitlog_offset), self._max(group, max_reconsume_times)
        if original is not None and limit is not None and delay_level >= 0 and original.reconsume_times >= limit:
            level = min(3 + original.reconsume_times, self.inner.config.max_delay_level)
            due = self.clock.now() + self.inner.config.delay_ms(level)
            self.pending.append((due, (group, commitlog_offset, -1, origin_msg_id, max_reconsume_times)))
            return ResponseCode.SUCCESS
        return self.inner.send_back(group, commitlog_offset, delay_level, origin_msg_id, max_reconsume_times)

    def tick(self):
        now = self.clock.now()
        for item in [p for p in self.pending if p[0] <= now]:
            self.pending.remove(item)
            self.inner.send_back(*item[1])
        return self.inner.tick()


class OrderlyDlqRetriedForever(Wrapped):
    """apache/rocketmq#6163 (5.0.0): an orderly consumer past setMaxReconsumeTimes is never
    dead-lettered; the broker keeps putting the message back to %RETRY% (here: a send-back with
    a negative level, the client's "straight to the DLQ", is retried like level 0)."""

    def send_back(self, group, commitlog_offset, delay_level, origin_msg_id, max_reconsume_times):
        if delay_level < 0:
            original = self._original(commitlog_offset)
            limit = self._max(group, max_reconsume_times)
            if original is not None and limit is not None and original.reconsume_times < limit:
                delay_level = 0
        return self.inner.send_back(group, commitlog_offset, delay_level, origin_msg_id, max_reconsume_times)


class _StaleOps(TransactionService):
    """fillOpRemoveMap misses the ops written in the last three check intervals."""

    def check(self, store, offsets, config, now, hooks, reput_visible=True):
        self.now, self.interval = now, 3 * config.transaction_check_interval_ms
        return super().check(store, offsets, config, now, hooks, reput_visible)

    def _fill_op_remove_map(self, store, offsets, op_mq, pull_offset, mini_offset, remove_map, done, hooks,
                            op_sets, batched):
        fresh = {op.queue_offset for op in store.get_message(OP_TOPIC, op_mq.queue_id, pull_offset, 32).records
                 if op.born_ts > self.now - self.interval}
        kept: dict[int, int] = {}
        out = super()._fill_op_remove_map(store, offsets, op_mq, pull_offset, mini_offset, kept, done, hooks,
                                          op_sets, batched)
        remove_map.update({half: op for half, op in kept.items() if op not in fresh})
        return out


class _DoubleCounted(TransactionService):
    """needDiscard bumps TRANSACTION_CHECK_TIMES once more than the checks really sent."""

    def _put_back(self, store, half, times, now, config, hooks):
        return super()._put_back(store, half, times + 1, now, config, hooks)


class _TxnServiceSwapped(ModelBroker):
    service: type = TransactionService

    def __init__(self, clock: Any, config: Any, workdir: Any = None) -> None:
        super().__init__(clock, config)
        self.txn = self.service(clock.now())

    def _restart(self, now: int) -> None:
        super()._restart(now)
        self.txn = self.service(now)


class CheckAfterResolution(_TxnServiceSwapped):
    """apache/rocketmq#1517 (4.5.2) and #8003 (4.3.2): halves already committed or rolled back
    are checked back: the check round does not see the op written shortly before it."""

    service = _StaleOps


class DiscardBeforeCheckMax(_TxnServiceSwapped):
    """apache/rocketmq#8311 (4.4.0 ~ develop, bug 2): TRANSACTION_CHECK_TIMES grows on passes
    that send no check, so a half is discarded to TRANS_CHECK_MAX_TIME_TOPIC before
    transactionCheckMax checks were really sent (here: each check counts twice)."""

    service = _DoubleCounted


class DelayProgressNotPersistedOnShutdown(ModelBroker):
    """apache/rocketmq#3473: the schedule offsets are not persisted when ScheduleMessageService
    shuts down, so a clean restart delivers delayed messages again (fixed by PR #3478)."""

    def __init__(self, clock: Any, config: Any, workdir: Any = None) -> None:
        super().__init__(clock, config)

    def tick(self):
        # the persist timer runs on its own schedule, before the deliveries due at this instant
        self.schedule.maybe_persist(self.clock.now(), self.config.flush_delay_offset_interval_ms)
        return super().tick()

    def close(self) -> None:
        saved = self.schedule.persist
        self.schedule.persist = lambda now: None  # type: ignore[method-assign]
        try:
            super().close()
        finally:
            self.schedule.persist = saved  # type: ignore[method-assign]


class DelayReplayedAfterRestart(ModelBroker):
    """apache/rocketmq#6881 (4.9.1 → 5.1.1): the periodic persist ran before the delay offsets
    were loaded and overwrote delayOffset.json, so after the restart every delayed message
    was replayed (here: the reopened broker finds the delay progress empty)."""

    def __init__(self, clock: Any, config: Any, workdir: Any = None) -> None:
        super().__init__(clock, config)

    def reopen(self) -> None:
        self.schedule.persisted = {}
        super().reopen()


class OffsetsLostOnRestart(ModelBroker):
    """alibaba/rocketmq#28 (3.1.9): restarting the broker master made consumers consume again
    what they had consumed: the committed offsets did not survive the restart (here: the
    shutdown does not persist them, the last periodic persist comes back)."""

    def __init__(self, clock: Any, config: Any, workdir: Any = None) -> None:
        super().__init__(clock, config)

    def close(self) -> None:
        saved = self.offsets.persist
        self.offsets.persist = lambda: None  # type: ignore[method-assign]
        try:
            super().close()
        finally:
            self.offsets.persist = saved  # type: ignore[method-assign]


class DelayOffsetNotCorrected(ModelBroker):
    """apache/rocketmq#1869 (fixed by PR #3358, correctDelayOffset): a delay offset in
    delayOffset.json past its schedule queue is used as is, so the delayed messages stored
    at the positions below it are never delivered (here: after a power loss truncated a
    schedule queue)."""

    def __init__(self, clock: Any, config: Any, workdir: Any = None) -> None:
        super().__init__(clock, config)

    def recover(self, survivors: int | None = None) -> None:
        # the power loss takes everything not flushed (the case where the saved progress is past the queue)
        super().recover(self.recovery_choices()[0] if survivors is None else survivors)

    def _restart(self, now: int) -> None:
        super()._restart(now)
        self.schedule.progress = dict(self.schedule.persisted)


class FlushFailureAcked(ModelBroker):
    """apache/rocketmq#2706 (4.8.0, still in 4.9.3 per #4306): a failed force() is only logged,
    the flushed position still advances and SEND_OK (SYNC_FLUSH) is still returned, so messages
    acknowledged as durable — or flushed — are lost when the power fails (here: from the 3rd
    record on the disk silently stops persisting)."""

    FAIL_FROM = 3

    def __init__(self, clock: Any, config: Any, workdir: Any = None) -> None:
        super().__init__(clock, config)

    def recover(self, survivors: int | None = None) -> None:
        if survivors is None and self.durability.crash_kind == "power":  # SYNC, or ASYNC after a flush()
            # (records in files retention deleted are gone, not lost: at least those count as survivors)
            keep = max(min(len(self.store.records), self.FAIL_FROM - 1), self.store.removed_count())
            self.durability.flushed = min(self.durability.flushed, keep)
            super().recover(survivors=keep)
            return
        super().recover(survivors)


class _PowerTakesTheUnflushed(ModelBroker):
    """A ModelBroker whose power loss takes every record it left unflushed (the fewest survivors its own
    durability allows): a broken flush then loses what the model says is on disk."""

    def __init__(self, clock: Any, config: Any, workdir: Any = None) -> None:
        super().__init__(clock, config)

    def recover(self, survivors: int | None = None) -> None:
        if survivors is None and self.durability.crash_kind == "power":
            super().recover(survivors=self.recovery_choices()[0])
            return
        super().recover(survivors)


class FlushServiceIdle(_PowerTakesTheUnflushed):
    """An ASYNC broker whose FlushRealTimeService never flushes (model/flushing.py: no full file, no four
    pages, no thorough pass — a flush thread that died): only an explicit flush or a clean shutdown
    writes the page cache, so a power loss takes messages sent long before it."""

    def __init__(self, clock: Any, config: Any, workdir: Any = None) -> None:
        super().__init__(clock, config)
        self.durability.on_async_pass = lambda *args: None  # type: ignore[method-assign]


class GroupCommitWaitsForARequest(_PowerTakesTheUnflushed):
    """A GroupCommitService that flushes only for a put that waits: a send-back's copy, a committed
    message and its op, a WAIT=false send stay in the page cache until a waiting put comes (4.9.8's
    ``doCommit`` flushes every written byte at each pass, ``flush(0)`` when no request waits), so a power
    loss after the pass takes them."""

    def __init__(self, clock: Any, config: Any, workdir: Any = None) -> None:
        super().__init__(clock, config)
        self.durability.on_tick = lambda *args: None  # type: ignore[method-assign]


class StalledFlushAnsweredOk(_PowerTakesTheUnflushed):
    """A SYNC_FLUSH broker that answers SEND_OK to a put whose flush a hung disk holds (4.9.8 answers
    FLUSH_DISK_TIMEOUT once syncFlushTimeout passes, the message stored but not on disk): the producer takes
    for durable what a power loss during the stall takes."""

    def __init__(self, clock: Any, config: Any, workdir: Any = None) -> None:
        super().__init__(clock, config)
        on_append = self.durability.on_append
        self.durability.on_append = lambda *args, **kwargs: on_append(*args, **kwargs) or True  # type: ignore[method-assign]


class GroupCommitParkedAfterStall(_PowerTakesTheUnflushed):
    """A GroupCommitService that, once a flush timed out on a hung disk, stays parked until the next
    waiting put: what the stall left (the FLUSH_DISK_TIMEOUT answers) stays in the page cache after the disk
    came back (4.9.8's next pass flushes every written byte), so a power loss after that pass takes them."""

    def __init__(self, clock: Any, config: Any, workdir: Any = None) -> None:
        super().__init__(clock, config)
        durability, on_tick = self.durability, self.durability.on_tick

        def parked(total: int, now: int | None = None) -> None:
            if durability.stalled_until is None:
                on_tick(total, now)

        durability.on_tick = parked  # type: ignore[method-assign]


class LockRenewalNotRecorded(Wrapped):
    """rocketmq-client-go#1080: lockAll renewed the lock but not its last-lock timestamp, so a
    lock the holder kept renewing expired (here, on the broker: a renewal by the holder does not
    refresh last_update, and another client takes the queue 60 s after the first grant)."""

    def lock_batch(self, group, client_id, mqs):
        table = self.inner.locks
        before = {mq: table.entries.get((group, mq)) for mq in mqs}
        granted = self.inner.lock_batch(group, client_id, mqs)
        for mq in granted:
            prev = before.get(mq)
            if prev is not None and prev.client_id == client_id:
                table.entries[(group, mq)] = prev  # the renewal is not recorded
        return granted


# -- 5.x timer messages (model/timer.py), judged under --profile rocketmq-5.2 ---------------------------


class _TimerBroken(ModelBroker):
    """A 5.x ModelBroker with one timer rule broken (a no-op under a profile without the wheel)."""

    def __init__(self, clock: Any, config: Any, workdir: Any = None) -> None:
        super().__init__(clock, config)
        store = self.store_class()
        if store is not None:
            self.store.__class__ = store

    def store_class(self) -> type[Store] | None:
        return None

    @property
    def wheel(self) -> bool:
        return self.config.behaviour.timer_wheel


class TimerFiresEarly(_TimerBroken):
    """The timer wheel reads a slot one precision early: a copy is delivered at TIMER_OUT_MS, before
    the requested time (TimerMessageStore's dequeue compares with the write time one slot ahead)."""

    def tick(self):
        if self.wheel and self.state is BrokerState.RUNNING:
            now = self.clock.now()
            self.timer.tick(now + self.config.timer_precision_ms, self.store.max_offset(TIMER_TOPIC, 0),
                            self.store.timer_slot, lambda offset, enqueue_ms: self._timer_fire(now, offset, enqueue_ms))
        return super().tick()


class TimerLostAfterCrash(_TimerBroken):
    """After a crash the wheel is rebuilt empty: the copies that were pending in it (enqueued before
    the last checkpoint) are forgotten and never delivered (TimerMessageStore.recover skipping the
    timer log)."""

    def recover(self, survivors: int | None = None) -> None:
        super().recover(survivors)
        if self.wheel:
            self.timer.wheel = []


class _RoundsToNearest(Store):
    def prepare(self, req: PutRequest, now: int) -> Record:
        record = super().prepare(req, now)
        requested = requested_ms(dict(req.properties), now)
        if record.topic != TIMER_TOPIC or requested is None or PROPERTY_TIMER_OUT_MS in dict(req.properties):
            return record
        p = self.config.timer_precision_ms
        wrong = (requested + p // 2) // p * p - p  # the nearest multiple, minus one precision
        props = tuple((k, str(wrong) if k == PROPERTY_TIMER_OUT_MS else v) for k, v in record.props)
        return attrs.evolve(record, props=props)


class TimerRoundsUp(_TimerBroken):
    """transformTimerMessage rounds the requested time to the nearest multiple of the precision (half
    up) instead of up to the next one: TIMER_OUT_MS = round(T / p) · p − p, so a time in the lower half
    of a slot is delivered up to p / 2 early (T = k·p + 1: at k·p)."""

    def store_class(self) -> type[Store] | None:
        return _RoundsToNearest


class _TimerBeatsLevel(Store):
    def prepare(self, req: PutRequest, now: int) -> Record:
        if req.delay_level > 0 and self.config.behaviour.timer_wheel and is_timer_request(dict(req.properties)) \
                and transaction_type(req.sys_flag) in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE):
            req = attrs.evolve(req, delay_level=0)
        return super().prepare(req, now)


class TimerIgnoresDelayLevel(_TimerBroken):
    """A message with both a delay level and TIMER_* properties is a timer message (the timer wins; in
    HookUtils.checkIfTimerMessage the level wins and the TIMER_* properties are dropped)."""

    def store_class(self) -> type[Store] | None:
        return _TimerBeatsLevel


class RetentionIgnoresReserve(ModelBroker):
    """CleanCommitLogService deletes every commitlog file but the last whenever it deletes at all
    (deleteWhen's hour, or the disk over diskMaxUsedSpaceRatio), young or not: fileReservedTime is never
    consulted (issue 42, retention)."""

    def __init__(self, clock: Any, config: Any, workdir: Any = None) -> None:
        super().__init__(clock, config)
        self.cleaner.policy = attrs.evolve(self.cleaner.policy, reserved_ms=0)


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
    "lock_half_life": _factory(LockHalfLife),
    "lock_half_life_unrenewed": _factory(LockHalfLifeUnrenewed),
    "unlock_frees_half_expired": _factory(UnlockFreesHalfExpired),
    "rollback_commits": _factory(RollbackCommits),
    "commit_ignored": _factory(CommitIgnored),
    "offset_plus_one": _factory(OffsetPlusOne),
    "sync_send_lost_on_power": _factory(SyncSendLostOnPower),
    "flush_service_idle": _factory(FlushServiceIdle),
    "group_commit_waits_for_a_request": _factory(GroupCommitWaitsForARequest),
    "stalled_flush_answered_ok": _factory(StalledFlushAnsweredOk),
    "group_commit_parked_after_stall": _factory(GroupCommitParkedAfterStall),
    "one_check_too_many": _factory(OneCheckTooMany),
    "retry_level_off_by_one": _factory(RetryLevelOffByOne),
    "tag_filter_ignored": _factory(TagFilterIgnored),
    "queue_offset_skips": _factory(QueueOffsetSkips),
    "dlq_wrong_reconsume_times": _factory(DlqWrongReconsumeTimes),
    "duplicate_delivery": _factory(DuplicateDelivery),
    "sql_filter_ignored": _factory(SqlFilterIgnored),
    "sql_null_is_true": _factory(SqlNullIsTrue),
    "pulls_exclusive_per_group": _factory(PullsExclusivePerGroup),
    "retention_ignores_reserve": _factory(RetentionIgnoresReserve),  # type: ignore[arg-type]
}
# 5.x timer messages: caught under --profile rocketmq-5.2 (tests/test_broken_brokers.py: TIMER_PROFILE)
TIMER_BROKEN: dict[str, Callable[..., Any]] = {
    "timer_fires_early": _factory(TimerFiresEarly),
    "timer_lost_after_crash": _factory(TimerLostAfterCrash),
    "timer_rounds_up": _factory(TimerRoundsUp),
    "timer_ignores_delay_level": _factory(TimerIgnoresDelayLevel),
}
BROKEN.update(TIMER_BROKEN)
# 5.x pop: caught under --profile rocketmq-5.2 too (tests/pop_brokers.py)
BROKEN.update(POP_BROKEN)

REPLICAS: dict[str, Callable[..., Any]] = {
    "dlq_through_schedule": _factory(DlqThroughSchedule),
    "orderly_dlq_retried_forever": _factory(OrderlyDlqRetriedForever),
    "check_after_resolution": _factory(CheckAfterResolution),
    "discard_before_check_max": _factory(DiscardBeforeCheckMax),
    "delay_progress_not_persisted_on_shutdown": _factory(DelayProgressNotPersistedOnShutdown),
    "delay_replayed_after_restart": _factory(DelayReplayedAfterRestart),
    "offsets_lost_on_restart": _factory(OffsetsLostOnRestart),
    "delay_offset_not_corrected": _factory(DelayOffsetNotCorrected),
    "flush_failure_acked": _factory(FlushFailureAcked),
    "lock_renewal_not_recorded": _factory(LockRenewalNotRecorded),
}
ISSUES: dict[str, str] = {
    "dlq_through_schedule": "apache/rocketmq#2724",
    "orderly_dlq_retried_forever": "apache/rocketmq#6163",
    "check_after_resolution": "apache/rocketmq#1517, #8003",
    "discard_before_check_max": "apache/rocketmq#8311",
    "delay_progress_not_persisted_on_shutdown": "apache/rocketmq#3473",
    "delay_replayed_after_restart": "apache/rocketmq#6881",
    "offsets_lost_on_restart": "alibaba/rocketmq#28",
    "delay_offset_not_corrected": "apache/rocketmq#1869",
    "flush_failure_acked": "apache/rocketmq#2706",
    "lock_renewal_not_recorded": "apache/rocketmq-client-go#1080",
}

__all__ = ["BROKEN", "ISSUES", "REPLICAS", "TIMER_BROKEN", "Iterable", "MessageQueue"]

# Importable as ``broken_brokers:commit_ignored`` for ``rmqspec check --broker`` (tests/cli/test_check_cli.py).
commit_ignored = BROKEN["commit_ignored"]
lock_half_life = BROKEN["lock_half_life"]  # issue 41's yardstick: ``rmqspec conform --broker broken_brokers:…``
lock_half_life_unrenewed = BROKEN["lock_half_life_unrenewed"]
unlock_frees_half_expired = BROKEN["unlock_frees_half_expired"]
# ``rmqspec conform --broker tests.broken_brokers:timer_fires_early --profile rocketmq-5.2`` and the others
timer_fires_early = BROKEN["timer_fires_early"]
timer_lost_after_crash = BROKEN["timer_lost_after_crash"]
timer_rounds_up = BROKEN["timer_rounds_up"]
timer_ignores_delay_level = BROKEN["timer_ignores_delay_level"]
pulls_exclusive_per_group = BROKEN["pulls_exclusive_per_group"]  # issue 42: only a broadcasting group shows it
