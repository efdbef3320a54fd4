"""The answers judged without the model (``properties/oracles.py``) catch what no trace invariant does.

Each broken broker below breaks one rule whose wrong answer breaks no invariant (nothing is lost,
nothing unexpected is delivered): before ``oracles.py`` only lockstep saw them. Each run is
``rmqspec conform --no-lockstep`` at the default budget and must fail with the oracle's finding.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from rmqspec.model.broker import ModelBroker
from rmqspec.model.message import TRANSACTION_COMMIT_TYPE, MessageQueue, transaction_type
from rmqspec.model.queues import SCHEDULE_TOPIC, PutRequest, Record, Store
from rmqspec.model.results import PullStatus, ResponseCode
from rmqspec.model.schedule import ScheduleService
from rmqspec.model.subscriptions import ConsumerTable
from rmqspec.model.transactions import TransactionService
from rmqspec.properties.runner import budget_settings, check_conformance
from tests.untraced import budget_run


class _FiresOneTickLate(ScheduleService):
    def _deliver_level(self, store: Any, now: int, level: int, on_fire: Any) -> None:
        offset = self.progress.get(level, 0)
        if offset < store.max_offset(SCHEDULE_TOPIC, level - 1) \
                and store.entry(SCHEDULE_TOPIC, level - 1, offset).tags_code == now:
            return  # the head is due exactly now: this service waits for the next tick
        super()._deliver_level(store, now, level, on_fire)


def _props(req: PutRequest, drop: str = "", **values: str) -> PutRequest:
    props = tuple((k, values.get(k, v)) for k, v in req.properties if k != drop)
    return attrs.evolve(req, properties=props)


class _DlqKeepsDelay(Store):
    def prepare(self, req: PutRequest, now: int) -> Record:
        if req.topic.startswith("%DLQ%"):
            req = _props(req, DELAY="5")
        return super().prepare(req, now)


class _RetryWithoutOrigin(Store):
    def prepare(self, req: PutRequest, now: int) -> Record:
        if req.topic.startswith(("%RETRY%", "%DLQ%")):
            req = _props(req, drop="ORIGIN_MESSAGE_ID")
        return super().prepare(req, now)


class _RebornOnSendBack(Store):
    def prepare(self, req: PutRequest, now: int) -> Record:
        if req.topic.startswith(("%RETRY%", "%DLQ%")):
            req = attrs.evolve(req, born_ts=now)
        return super().prepare(req, now)


class _CommitDropsTranMsg(Store):
    def prepare(self, req: PutRequest, now: int) -> Record:
        if transaction_type(req.sys_flag) == TRANSACTION_COMMIT_TYPE:
            req = _props(req, drop="TRAN_MSG")
        return super().prepare(req, now)


class _DiscardReborn(Store):
    def prepare(self, req: PutRequest, now: int) -> Record:
        if req.topic == "TRANS_CHECK_MAX_TIME_TOPIC":
            req = attrs.evolve(req, born_ts=req.born_ts + 1)
        return super().prepare(req, now)


class _StoreHostV6(Store):
    def prepare(self, req: PutRequest, now: int) -> Record:
        self._store_v6 = True
        return super().prepare(req, now)


class _LateCheck(TransactionService):
    def check_due(self, now: int, interval_ms: int) -> bool:
        return super().check_due(now, interval_ms + 1)


class _KeepsGroupInfo(ConsumerTable):
    def unregister(self, group: str, client_id: str) -> bool:
        info = self.groups.get(group)
        if info is not None and info.clients == {client_id}:
            return True  # the last client leaves, its group info stays
        return super().unregister(group, client_id)


class _Broken(ModelBroker):
    store_class: type[Store] | None = None
    schedule_class: type[ScheduleService] | None = None

    def __init__(self, clock: Any, config: Any, workdir: Any = None) -> None:
        super().__init__(clock, config)
        if self.store_class is not None:
            self.store.__class__ = self.store_class
        if self.schedule_class is not None:
            self.schedule.__class__ = self.schedule_class


class FiresOneTickLate(_Broken):
    """The schedule service fires a copy only once its deliver time has passed (``<``, not ``<=``)."""

    schedule_class = _FiresOneTickLate


class DlqKeepsDelay(_Broken):
    """consumerSendMsgBack leaves the failed copy's DELAY on its way to the DLQ (no setDelayTimeLevel(0))."""

    store_class = _DlqKeepsDelay


class RetryWithoutOrigin(_Broken):
    """consumerSendMsgBack stores the retry and DLQ copies without ORIGIN_MESSAGE_ID."""

    store_class = _RetryWithoutOrigin


class RebornOnSendBack(_Broken):
    """consumerSendMsgBack stamps the retry and DLQ copies with the time of the send-back as their born
    timestamp instead of keeping the original's."""

    store_class = _RebornOnSendBack


class PullAtEndIllegal(_Broken):
    """A pull at the queue's max offset answers OFFSET_ILLEGAL (as OFFSET_OVERFLOW_BADLY) instead of
    NO_NEW_MSG; the next offset it names is the same, so a consumer just pulls again."""

    def pull(self, group: str, mq: MessageQueue, offset: int, *args: Any, **kwargs: Any) -> Any:
        res = super().pull(group, mq, offset, *args, **kwargs)
        if offset == res.max_offset and res.status is PullStatus.NO_NEW_MSG:
            res = attrs.evolve(res, status=PullStatus.OFFSET_ILLEGAL)
        return res


class SendPastLastQueue(ModelBroker):
    """SEND_MESSAGE to the queue after the topic's last stores into queue 0 instead of refusing it."""

    def __init__(self, clock: Any, config: Any, workdir: Any = None) -> None:
        super().__init__(clock, config)
        self.nums: dict[str, int] = {}

    def create_topic(self, topic: str, queue_nums: int) -> Any:
        self.nums[topic] = queue_nums
        return super().create_topic(topic, queue_nums)

    def send(self, msg: Any, queue_id: int) -> Any:
        return super().send(msg, 0 if queue_id >= self.nums.get(msg.topic, queue_id + 1) else queue_id)


class PullPastLastQueue(SendPastLastQueue):
    """PULL_MESSAGE of the queue after the topic's last answers as queue 0 does."""

    def send(self, msg: Any, queue_id: int) -> Any:
        return ModelBroker.send(self, msg, queue_id)

    def pull(self, group: str, mq: MessageQueue, *args: Any, **kwargs: Any) -> Any:
        if mq.queue_id >= self.nums.get(mq.topic, mq.queue_id + 1):
            mq = MessageQueue(mq.topic, 0)
        return super().pull(group, mq, *args, **kwargs)


class SendBackRefused(_Broken):
    """CONSUMER_SEND_MSG_BACK answers SYSTEM_ERROR for every message of a known group (the client then
    consumes it again locally: nothing is lost)."""

    def send_back(self, group: str, *args: Any, **kwargs: Any) -> Any:
        if group in self.groups:
            self._require_running()
            return ResponseCode.SYSTEM_ERROR  # as if it found no message at the offset
        return super().send_back(group, *args, **kwargs)


class OffsetsPersistedOnlyAtShutdown(_Broken):
    """The periodic consumer-offset persist never runs (its timer is reset at every tick): a kill
    loses every offset committed since the last clean shutdown (consumed again: only duplicates)."""

    def tick(self) -> Any:
        self.offsets_last_persist = self.clock.now()
        return super().tick()


class CommitDropsTranMsg(_Broken):
    """END_TRANSACTION's COMMIT writes the half's properties without TRAN_MSG (the message is delivered
    all the same)."""

    store_class = _CommitDropsTranMsg


class DiscardReborn(_Broken):
    """A half discarded after too many checks is written to TRANS_CHECK_MAX_TIME_TOPIC 1 ms younger."""

    store_class = _DiscardReborn


class StoreHostV6(_Broken):
    """Every record is written with the STOREHOST_V6 bit (and a 16-byte store host) on an IPv4 host."""

    store_class = _StoreHostV6


class CheckRoundLate(_Broken):
    """The transaction check service runs its rounds 1 ms after the interval (``>`` for ``>=``)."""

    def tick(self) -> Any:
        if type(self.txn) is TransactionService:  # a restart builds the service anew
            self.txn.__class__ = _LateCheck
        return super().tick()


class KeepsGroupInfo(_Broken):
    """UNREGISTER_CLIENT of a group's last client keeps the group's info (and its subscription)."""

    def __init__(self, clock: Any, config: Any, workdir: Any = None) -> None:
        super().__init__(clock, config)
        self.consumers.__class__ = _KeepsGroupInfo


CASES = {
    "fires_one_tick_late": (FiresOneTickLate, "did not fire the scheduled copy"),
    "dlq_keeps_delay": (DlqKeepsDelay, "carries DELAY 5"),
    "retry_without_origin": (RetryWithoutOrigin, "carries ORIGIN_MESSAGE_ID None"),
    "send_past_last_queue": (SendPastLastQueue, "the queue past the topic's last"),
    "pull_past_last_queue": (PullPastLastQueue, "the queue past the topic's last"),
    "send_back_refused": (SendBackRefused, "refused (SYSTEM_ERROR) the send-back"),
    "offsets_persisted_only_at_shutdown": (OffsetsPersistedOnlyAtShutdown, "at its last persist"),
    "reborn_on_send_back": (RebornOnSendBack, "has born timestamp"),
    "pull_at_end_illegal": (PullAtEndIllegal, "the queue's max offset, was answered OFFSET_ILLEGAL"),
    "commit_drops_tran_msg": (CommitDropsTranMsg, "TRAN_MSG=None (expected 'true')"),
    "discard_reborn": (DiscardReborn, "has born timestamp"),
    "store_host_v6": (StoreHostV6, "STOREHOST_V6 must be clear"),
    "check_round_late": (CheckRoundLate, "when no check round was due"),
    "keeps_group_info": (KeepsGroupInfo, "its pull without the subscription flag was served"),
}


@budget_run
@pytest.mark.parametrize("name", sorted(CASES))
def test_the_oracles_catch_without_the_model(name: str) -> None:
    cls, needle = CASES[name]
    result = check_conformance(cls, lockstep=False, settings=budget_settings(None, None, shrink=False))
    assert not result.passed, f"{name} passed conform --no-lockstep"
    assert needle in (result.failure or ""), (result.failure or "")[:2000]
