"""Pop consumption of the mmap broker (RocketMQ 5.x; a mixin of ``impl/broker.py``): POP_MESSAGE, ACK_MESSAGE,
BATCH_ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME and the revive service ``tick`` runs.

Theory of operation
-------------------
Observably the model's ``model/broker_pop.py`` — the same answers, handles, revived copies and trace events
(``pop``, ``ack``, ``change_invisible``, ``revive``) — over the real store: the messages come from
``BrokerLog.get_message`` (the consume-queue files and the commitlog), the pop offset is the group's consumer
offset (``consumerOffset.json``), a revived copy is a commitlog record put into the pop retry topic, queue 0.
The decisions are ``model/pop.py``'s pure rules (request checks, ``randomQ``'s retry choice, the initial offset,
handles, checkpoints, ``revived_properties``) and its ``PopState`` — here ``pop_service.DiskPopState``, which
journals every checkpoint and ack to ``config/popCheckpoints.journal`` (fsynced before the answer), the revive
progress with the consumer offsets and the order infos to ``config/consumerOrderInfo.json`` every 10 s and at
close. ``randomQ`` is the model's ``37·n mod 100`` unless ``force_pop_random`` chose it.

Under a profile without pop (4.9) every request answers REQUEST_CODE_NOT_SUPPORTED, as the model does, and no
pop file is written; ``Capability.POP`` is declared only where the profile pops.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from rmqspec.impl.broker_events import BrokerEvents
from rmqspec.impl.broker_store import BrokerLog, Entry, GetStatus, PutSpec
from rmqspec.impl.metadata import Metadata
from rmqspec.impl.offsets import ConsumerOffsetTable
from rmqspec.impl.pop_service import DiskPopState
from rmqspec.impl.store import MessageStore
from rmqspec.model.clock import Clock
from rmqspec.model.config import BrokerConfig
from rmqspec.model.message import PROPERTY_DELAY_TIME_LEVEL, MessageQueue
from rmqspec.model.pop import (
    ACK_MESSAGE,
    BATCH_ACK_MESSAGE,
    CHANGE_MESSAGE_INVISIBLETIME,
    COMMIT_ILLEGAL,
    COMMIT_STALE,
    INIT_MIN,
    PARSE_FAILED,
    POP_MESSAGE,
    POP_ORDER_REVIVE_QUEUE,
    PROPERTY_POP_CK,
    RANDOM_Q_BOUND,
    CheckPoint,
    OrderInfo,
    PopHandle,
    PoppedMessage,
    PopResult,
    PopStatus,
    changed_checkpoint,
    changed_handle,
    check_handle_queue,
    check_pop_request,
    handle_key,
    init_pop_offset,
    normal_topic,
    real_topic,
    retry_choice,
    retry_flag,
    revive_target,
    revived_properties,
    rewritten_checkpoint,
)
from rmqspec.model.pullfilter import property_filter
from rmqspec.model.queues import SubscriptionError, tag_filter
from rmqspec.model.results import BrokerError, ResponseCode

_RELOCATED = (GetStatus.OFFSET_TOO_SMALL, GetStatus.OFFSET_OVERFLOW_BADLY, GetStatus.OFFSET_FOUND_NULL)
_SKIPPED = (GetStatus.NO_MATCHED_MESSAGE, GetStatus.OFFSET_FOUND_NULL, GetStatus.MESSAGE_WAS_REMOVING)


class PopRequests:
    """Mixin of ``MmapBroker``: pop, ack, batch ack, change invisible time, revive (module docstring)."""

    clock: Clock
    config: BrokerConfig
    events: BrokerEvents
    store: MessageStore | None
    log: BrokerLog
    meta: Metadata
    offsets: ConsumerOffsetTable
    pop_state: DiskPopState

    def _require_running(self) -> None: ...  # MmapBroker's

    def _written(self, entry: Entry, now: int) -> Entry: ...  # MmapBroker's

    # ------------------------------------------------------------------
    # the state's life (called by the facade)

    def _pop_start(self, now: int) -> None:
        """A (re)start: the pop state from its files (5.x), the broker object's counters carried on."""
        assert self.store is not None
        carry = getattr(self, "pop_state", None)
        self.pop_state = DiskPopState.load(self.store.config_dir if self.config.behaviour.pop else None, carry, now)

    def _pop_persist_progress(self) -> None:
        """The revive progress, persisted with the consumer offsets."""
        self.pop_state.persist_revive_progress()

    def _pop_close(self, now: int) -> None:
        self.pop_state.persist_revive_progress()
        self.pop_state.persist_orders(now)

    # ------------------------------------------------------------------
    # gates

    def _pop_gate(self, code: int) -> None:
        self._require_running()
        if not self.config.behaviour.pop:
            raise BrokerError(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {code} not supported")

    def _pop_code_gate(self, code: int) -> ResponseCode | None:
        """``_pop_gate`` for the requests that answer a code: the refusal returned, not raised."""
        try:
            self._pop_gate(code)
        except BrokerError as e:
            if e.code is ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
                return e.code
            raise
        return None

    def _topic_nums(self, topic: str) -> int | None:
        return self.meta.topics[topic] if self.meta.has_topic(topic) else None

    def force_pop_random(self, value: int | None) -> None:
        """Make the next pop's ``randomQ`` ``value`` (a lockstep driver's choice; 0 ≤ value < 100)."""
        if value is not None and not 0 <= value < RANDOM_Q_BOUND:
            raise ValueError(f"randomQ must be in [0, {RANDOM_Q_BOUND}), got {value}")
        self.pop_state.forced_random = value

    # ------------------------------------------------------------------
    # POP_MESSAGE

    def pop(self, group: str, topic: str, queue_id: int, max_nums: int, invisible_ms: int, order: bool = False,
            attempt_id: str | None = None, expression: str = "*", expression_type: str = "TAG",
            init_mode: int = INIT_MIN) -> PopResult:
        """POP_MESSAGE (no long polling); ``queue_id`` −1: every queue. Refusals raise ``BrokerError``."""
        self._pop_gate(POP_MESSAGE)
        now = self.clock.now()
        check_pop_request(self.config.store_host, max_nums, self.config.timer_wheel_enable, topic,
                          self._topic_nums(topic), queue_id, group, group in self.meta.groups,
                          self.config.behaviour.faq_url)
        try:
            props_match = property_filter(expression or "*", expression_type, True)
            matches = tag_filter(expression) if props_match is None else None
        except (BrokerError, SubscriptionError):
            raise BrokerError(ResponseCode.SUBSCRIPTION_PARSE_FAILED, PARSE_FAILED) from None
        settings = self.config.pop
        random_q = self.pop_state.random_q()
        revive_qid = POP_ORDER_REVIVE_QUEUE if order else self.pop_state.next_revive_qid(settings.revive_queue_num)
        choice = retry_choice(settings, random_q, topic, group)
        found: list[PoppedMessage] = []

        def read(t: str, queues: Iterable[int]) -> None:
            for q in queues:
                self._pop_queue(now, group, topic, t, q, max_nums, invisible_ms, order, attempt_id, init_mode,
                                revive_qid, matches, props_match, found)

        def read_all(t: str) -> None:
            n = self.meta.topics.get(t, 0)
            read(t, ((random_q + i) % n for i in range(n)))

        if choice.first and not order:
            read_all(choice.topic)
        if queue_id < 0:
            read_all(topic)
        else:
            read(topic, (queue_id,))
        if not choice.first and len(found) < max_nums and not order:
            read_all(choice.topic)
        self.pop_state.sync()
        status = PopStatus.FOUND if found else PopStatus.POLLING_NOT_FOUND
        return PopResult(status, tuple(found), now, invisible_ms, revive_qid)

    def _pop_offset(self, group: str, topic: str, queue_id: int, init_mode: int) -> int:
        """getPopOffset: the group's consumer offset, or the initial one (``init_pop_offset``), committed."""
        mq = MessageQueue(topic, queue_id)
        offset = self.offsets.query(group, mq)
        if offset >= 0:
            return offset
        offset = init_pop_offset(topic, self.log.min_offset(topic, queue_id), self.log.max_offset(topic, queue_id),
                                 init_mode)
        self.offsets.update(group, mq, offset)
        return offset

    def _pop_queue(self, now: int, group: str, topic: str, t: str, q: int, max_nums: int, invisible_ms: int,
                   order: bool, attempt_id: str | None, init_mode: int, revive_qid: int,
                   matches: Callable[[int], bool] | None, props_match: Callable[[Mapping[str, str]], bool] | None,
                   found: list[PoppedMessage]) -> None:
        """popMsgFromQueue for queue ``q`` of ``t`` (the topic or its retry topic)."""
        offset = self._pop_offset(group, t, q, init_mode)
        info = self.pop_state.order_info(t, group, q)
        if order and info is not None and info.need_block(attempt_id, now, invisible_ms):
            return
        if len(found) >= max_nums:
            return
        mq = MessageQueue(t, q)
        res = self.log.get_message(t, q, offset, max_nums - len(found), matches, props_match)
        if res.status in _RELOCATED:  # "Pop initial offset, because store is no correct"
            self.offsets.update(group, mq, res.next_begin_offset)
            res = self.log.get_message(t, q, res.next_begin_offset, max_nums - len(found), matches, props_match)
        if not res.entries:
            if res.status in _SKIPPED:
                self.offsets.update(group, mq, res.next_begin_offset)
            return
        offsets = tuple(e.queue_offset for e in res.entries)
        counts: dict[int, int] = {}
        if order:
            self.pop_state.update_order(t, group, q, OrderInfo(attempt_id, now, invisible_ms, offsets))
            counts = self.pop_state.orders[(t, group, q)].consumed
            self.offsets.update(group, mq, offset)
            after = offset
        else:
            self.pop_state.add(CheckPoint(group, t, q, offset, now, invisible_ms, revive_qid,
                                          self.config.broker_name, offsets))
            self.offsets.update(group, mq, res.next_begin_offset)  # PopBufferMergeService.commitOffset
            after = res.next_begin_offset
        flag = retry_flag(t)
        for e in res.entries:
            handle = PopHandle(offset, now, invisible_ms, revive_qid, flag, self.config.broker_name, q, e.queue_offset)
            stored = e.to_stored(self.config)
            if flag != "0":  # re-encoded under the original topic, POP_CK put if absent
                props = dict(stored.properties)
                props.setdefault(PROPERTY_POP_CK, handle.extra_info())
                stored = attrs.evolve(stored, topic=topic, properties=props)
            count = counts.get(e.queue_offset, 0) if order else None
            found.append(PoppedMessage(stored, handle, count))
            self.events.emit("pop", now, actor=group, group=group, **self.events._copy(e),
                             deliver_ts=handle.revive_time, status="ORDERLY" if order else "CONCURRENT",
                             detail={"handle": handle.extra_info(), "pop_offset": after, "attempt_id": attempt_id,
                                     "order_count": count})

    # ------------------------------------------------------------------
    # ACK_MESSAGE, BATCH_ACK_MESSAGE

    def _check_handle(self, topic: str, handle: PopHandle, change: bool) -> None:
        check_handle_queue(topic, handle, self._topic_nums(topic), self.log.min_offset(topic, handle.queue_id),
                           self.log.max_offset(topic, handle.queue_id), change, self.config.behaviour.faq_url)

    def ack(self, group: str, topic: str, handle: PopHandle) -> ResponseCode:
        """ACK_MESSAGE of one popped message; a refusal is returned as its code; anything else is SUCCESS."""
        if (refused := self._pop_code_gate(ACK_MESSAGE)) is not None:
            return refused
        now = self.clock.now()
        real = real_topic(topic, group, handle.retry)
        try:
            self._check_handle(real, handle, change=False)
        except BrokerError as e:
            return e.code
        code = self._ack_one(now, group, real, handle, batch=False)
        self.pop_state.sync()
        return code

    def batch_ack(self, group: str, topic: str, handles: Iterable[PopHandle]) -> ResponseCode:
        """BATCH_ACK_MESSAGE: as ``model/broker_pop.py``'s (offsets outside ``[min, max]`` skipped; none:
        NO_MESSAGE; an orderly ack the order info refuses makes the answer MESSAGE_ILLEGAL)."""
        if (refused := self._pop_code_gate(BATCH_ACK_MESSAGE)) is not None:
            return refused
        now = self.clock.now()
        handles = tuple(handles)
        if not handles:
            return ResponseCode.NO_MESSAGE
        code = ResponseCode.SUCCESS
        for handle in handles:
            real = real_topic(topic, group, handle.retry)
            lo, hi = self.log.min_offset(real, handle.queue_id), self.log.max_offset(real, handle.queue_id)
            if not lo <= handle.queue_offset <= hi:
                continue
            if self._ack_one(now, group, real, handle, batch=True) is not ResponseCode.SUCCESS:
                code = ResponseCode.MESSAGE_ILLEGAL
        self.pop_state.sync()
        return code

    def _ack_one(self, now: int, group: str, real: str, handle: PopHandle, batch: bool) -> ResponseCode:
        code = ResponseCode.SUCCESS
        if handle.order:
            status, code = self._ack_orderly(group, real, handle)
        else:
            matched = self.pop_state.ack(handle_key(real, group, handle), handle.queue_offset)
            status = "UNMATCHED" if matched is None else "LATE" if matched.revived else "ACKED"
        self.events.emit("ack", now, actor=group, group=group, topic=real, queue_id=handle.queue_id,
                         queue_offset=handle.queue_offset, status=status,
                         detail={"handle": handle.extra_info(), "batch": batch})
        return code

    def _ack_orderly(self, group: str, real: str, handle: PopHandle) -> tuple[str, ResponseCode]:
        """AckMessageProcessor.ackOrderly."""
        mq = MessageQueue(real, handle.queue_id)
        if handle.queue_offset < self.offsets.query(group, mq):
            return "STALE", ResponseCode.SUCCESS
        nxt = self.pop_state.commit_and_next(real, group, handle.queue_id, handle.queue_offset, handle.pop_time)
        if nxt == COMMIT_ILLEGAL:
            return "ILLEGAL", ResponseCode.MESSAGE_ILLEGAL
        if nxt == COMMIT_STALE:
            return "STALE", ResponseCode.SUCCESS
        self.offsets.update(group, mq, nxt)
        return "COMMITTED", ResponseCode.SUCCESS

    # ------------------------------------------------------------------
    # CHANGE_MESSAGE_INVISIBLETIME

    def change_invisible_time(self, group: str, topic: str, handle: PopHandle, invisible_ms: int,
                              suspend: bool = False) -> PopHandle:
        """CHANGE_MESSAGE_INVISIBLETIME: the handle the answer makes (``model/broker_pop.py``'s rule)."""
        self._pop_gate(CHANGE_MESSAGE_INVISIBLETIME)
        now = self.clock.now()
        real = real_topic(topic, group, handle.retry)
        self._check_handle(real, handle, change=True)
        if handle.order:
            if handle.queue_offset < self.offsets.query(group, MessageQueue(real, handle.queue_id)):
                return handle  # an empty answer: nothing changed
            info = self.pop_state.order_info(real, group, handle.queue_id)
            if info is not None and info.pop_time == handle.pop_time:
                info.next_visible[handle.queue_offset] = now + invisible_ms
        else:
            self.pop_state.add(changed_checkpoint(group, real, handle, now, invisible_ms,
                                                  suspend and self.config.behaviour.pop_suspend))
            self.pop_state.ack(handle_key(real, group, handle), handle.queue_offset)
            self.pop_state.sync()
        new = changed_handle(handle, now, invisible_ms)
        self.events.emit("change_invisible", now, actor=group, group=group, topic=real, queue_id=handle.queue_id,
                         queue_offset=handle.queue_offset, deliver_ts=new.revive_time,
                         status="ORDERLY" if handle.order else "CONCURRENT",
                         detail={"handle": handle.extra_info(), "new_handle": new.extra_info()})
        return new

    # ------------------------------------------------------------------
    # the revive service (run by ``tick``)

    def _revive(self, now: int) -> None:
        """PopReviveService: every due checkpoint's un-acked messages re-put into the pop retry topic."""
        v2 = self.config.pop.enable_retry_topic_v2
        for pending in self.pop_state.due(now):
            ck = pending.ck
            pending.revived = True
            if not self.meta.has_topic(normal_topic(ck.topic, ck.group)) or ck.group not in self.meta.groups:
                continue  # "can not get normal topic / cid, then continue": the checkpoint is dropped
            target = revive_target(ck, v2)
            for offset in pending.unacked():
                entry = self._biz_message(ck, offset)
                if entry is None:
                    continue  # "can not get biz msg": nothing to revive
                if not self._revive_one(now, ck, entry, target):
                    self.pop_state.add(rewritten_checkpoint(ck, offset))  # rePutCK
        self.pop_state.sync()

    def _biz_message(self, ck: CheckPoint, offset: int) -> Entry | None:
        if not self.log.min_offset(ck.topic, ck.queue_id) <= offset < self.log.max_offset(ck.topic, ck.queue_id):
            return None
        assert self.store is not None
        units = self.store.queue_units(ck.topic, ck.queue_id, offset, 1)
        if not units or self.store.removed(units[0].commitlog_offset):
            return None
        return self.log.entry(units[0].commitlog_offset, units[0].tags_code)

    def _revive_one(self, now: int, ck: CheckPoint, entry: Entry, target: str) -> bool:
        """reviveRetry: the copy of ``entry`` in ``target`` queue 0; False when the put was refused."""
        if not self.meta.has_topic(target):  # addRetryTopicIfNotExist + initPopRetryOffset
            self.meta.ensure_topic(target, 1)
            mq = MessageQueue(target, 0)
            if self.offsets.query(ck.group, mq) < 0:
                self.offsets.update(ck.group, mq, 0)
        props = revived_properties(entry.properties, entry.reconsume_times, ck.pop_time,
                                   ck.group if self.config.behaviour.pop_origin_group else None)
        level_text = props.get(PROPERTY_DELAY_TIME_LEVEL) or ""
        spec = PutSpec(topic=target, queue_id=0, body=entry.body, properties=tuple(props.items()),
                       sys_flag=entry.sys_flag, born_ts=entry.born_ts, flag=entry.flag,
                       reconsume_times=entry.reconsume_times + (0 if ck.suspend else 1),
                       delay_level=int(level_text) if level_text.isdigit() else 0)
        try:
            new = self._written(self.log.put(spec, now), now)
        except BrokerError:
            return False
        detail: dict[str, Any] = {"new_topic": new.topic, "new_queue_id": new.queue_id,
                                  "new_queue_offset": new.queue_offset, "new_commitlog_offset": new.commitlog_offset,
                                  "pop_time": ck.pop_time, "invisible_time": ck.invisible_time}
        row = {**self.events._copy(entry), "reconsume_times": new.reconsume_times}
        self.events.emit("revive", now, actor="broker", group=ck.group, **row, deliver_ts=ck.revive_time,
                         detail=detail)
        return True
