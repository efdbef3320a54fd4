"""SPEC §8 trace events of the mmap broker, field for field the ModelBroker's.

Theory of operation
-------------------
The conformance machine and the Spark audits read one trace schema, whichever
broker produced it, so the mmap broker emits the same events at the same
points with the same fields as ``model/broker.py`` (its ``_emit`` calls and the
check-service hooks). Each method here is one emission point:

- ``store``: every record appended in any topic (system topics included): the
  new copy's topic / queue / offsets, ``delay_level`` and ``deliver_ts`` (the
  consume-queue tagsCode) for ``SCHEDULE_TOPIC_XXXX`` copies; ``deliver_ts`` =
  TIMER_OUT_MS + precision (``model.timer.due_ms``) for ``rmq_sys_wheel_timer`` copies;
- ``send`` (SEND_MESSAGE acknowledged, and a COMMIT's real message), ``txn_half``,
  ``txn_end``, ``deliver`` (one per pulled message), ``send_back`` (names the
  copy that failed, carries the new copy's reconsume_times / level /
  deliver_ts), ``schedule_fire`` and ``timer_fire`` (name the destination), ``commit_offset``,
  ``lock`` / ``unlock``, ``txn_check`` / ``txn_discard``, ``crash`` /
  ``recover``.

Only the broker facade calls these; they never read broker state.
"""

from __future__ import annotations

from typing import Any

from rmqspec.impl.broker_store import SCHEDULE_TOPIC, Entry
from rmqspec.model.config import BrokerConfig
from rmqspec.model.events import Recorder
from rmqspec.model.message import PROPERTY_PRODUCER_GROUP, PROPERTY_REAL_TOPIC, MessageQueue
from rmqspec.model.queues import waiting_due
from rmqspec.model.results import SendStatus


class BrokerEvents:
    def __init__(self, recorder: Recorder, config: BrokerConfig) -> None:
        self.recorder = recorder
        self.config = config

    def emit(self, event: str, ts: int, **fields: Any) -> None:
        self.recorder.emit(event, ts, **fields)

    def _id(self, entry: Entry) -> str:
        return entry.msg_id(self.config)

    def _copy(self, entry: Entry) -> dict[str, Any]:
        """The columns naming one stored copy: where it is and who it is."""
        return {
            "topic": entry.topic,
            "queue_id": entry.queue_id,
            "queue_offset": entry.queue_offset,
            "commitlog_offset": entry.commitlog_offset,
            "msg_key": entry.uniq_key,
            "msg_id": self._id(entry),
            "reconsume_times": entry.reconsume_times,
        }

    def deliver_ts(self, entry: Entry) -> int | None:
        return waiting_due(entry, self.config.timer_precision_ms)

    def store(self, entry: Entry, now: int) -> None:
        scheduled = entry.topic == SCHEDULE_TOPIC
        self.emit(
            "store",
            now,
            actor="broker",
            **self._copy(entry),
            delay_level=entry.queue_id + 1 if scheduled else None,
            deliver_ts=self.deliver_ts(entry),
        )

    def send(
        self,
        entry: Entry,
        now: int,
        topic: str,
        queue_id: int,
        uniq: str | None,
        *,
        group: str | None = None,
        txn_id: str | None = None,
        oneway: bool = False,
        batch: tuple[int, int] | None = None,
        status: SendStatus = SendStatus.SEND_OK,
    ) -> None:
        delayed = entry.topic == SCHEDULE_TOPIC
        deliver_ts = self.deliver_ts(entry)
        fields: dict[str, Any] = {}
        if group is not None:
            fields["group"] = group
        if txn_id is not None:
            fields["txn_id"] = txn_id
        if oneway:  # nobody saw it acknowledged (SendMessageProcessor answers no oneway request)
            fields["detail"] = {"send_mode": "ONEWAY"}
        if batch is not None:  # an item of SEND_BATCH_MESSAGE
            fields["detail"] = {"batch_index": batch[0], "batch_size": batch[1]}
        self.emit(
            "send",
            now,
            actor="broker",
            topic=topic,
            queue_id=queue_id,
            queue_offset=entry.queue_offset,
            commitlog_offset=entry.commitlog_offset,
            msg_key=uniq,
            msg_id=self._id(entry),
            reconsume_times=entry.reconsume_times,
            delay_level=entry.queue_id + 1 if delayed else None,
            deliver_ts=deliver_ts,
            status="ONEWAY" if oneway else status.value,
            **fields,
        )

    def txn_half(self, entry: Entry, now: int, group: str, topic: str, queue_id: int, uniq: str,
                 status: str = "SEND_OK") -> None:
        self.emit(
            "txn_half",
            now,
            actor="broker",
            group=group,
            topic=topic,
            queue_id=queue_id,
            queue_offset=entry.queue_offset,
            commitlog_offset=entry.commitlog_offset,
            msg_key=uniq,
            msg_id=self._id(entry),
            txn_id=uniq,
            status=status,
        )

    def txn_end(
        self, now: int, group: str, txn_id: str | None, offset: int, action: str, from_check: bool
    ) -> None:
        self.emit(
            "txn_end",
            now,
            actor="broker",
            group=group,
            commitlog_offset=offset,
            msg_key=txn_id,
            txn_id=txn_id,
            status=action,
            detail={"from_check": from_check},
        )

    def deliver(self, entry: Entry, now: int, group: str) -> None:
        self.emit(
            "deliver",
            now,
            actor=group,
            group=group,
            **self._copy(entry),
        )

    def send_back(
        self,
        original: Entry,
        copy: Entry,
        now: int,
        group: str,
        route: str,
        level: int,
        deliver_ts: int | None,
        destination: tuple[str, int],
        max_times: int,
    ) -> None:
        """``destination``: the retry / DLQ queue asked for (a retry copy is stored in the schedule topic);
        ``max_times``: the max reconsume times in force (the request's or the group's)."""
        self.emit(
            "send_back",
            now,
            actor=group,
            group=group,
            topic=original.topic,
            queue_id=original.queue_id,
            queue_offset=original.queue_offset,
            commitlog_offset=original.commitlog_offset,
            msg_key=original.uniq_key,
            msg_id=self._id(original),
            reconsume_times=copy.reconsume_times,
            delay_level=level,
            deliver_ts=deliver_ts,
            status=route,
            detail={
                "new_topic": destination[0],
                "new_queue_id": destination[1],
                "new_commitlog_offset": copy.commitlog_offset,
                "max": max_times,
            },
        )

    def schedule_fire(self, entry: Entry, new: Entry, now: int, level: int, deliver_ts: int) -> None:
        self.emit(
            "schedule_fire",
            now,
            actor="broker",
            **self._copy(new),
            delay_level=level,
            deliver_ts=deliver_ts,
            detail={
                "from_queue_offset": entry.queue_offset,
                "from_commitlog_offset": entry.commitlog_offset,
            },
        )

    def timer_fire(self, entry: Entry, new: Entry, now: int, deliver_ts: int) -> None:
        """5.x: the timer wheel re-put ``entry`` (in rmq_sys_wheel_timer) as ``new``."""
        self.emit(
            "timer_fire",
            now,
            actor="broker",
            **self._copy(new),
            deliver_ts=deliver_ts,
            detail={
                "from_queue_offset": entry.queue_offset,
                "from_commitlog_offset": entry.commitlog_offset,
            },
        )

    def commit_offset(self, now: int, group: str, mq: MessageQueue, offset: int, actor: str) -> None:
        self.emit(
            "commit_offset",
            now,
            actor=actor,
            group=group,
            topic=mq.topic,
            queue_id=mq.queue_id,
            queue_offset=offset,
        )

    def lock(self, now: int, group: str, mq: MessageQueue, client_id: str, status: str) -> None:
        self.emit(
            "lock",
            now,
            actor=client_id,
            group=group,
            topic=mq.topic,
            queue_id=mq.queue_id,
            client_id=client_id,
            status=status,
        )

    def unlock(self, now: int, group: str, mq: MessageQueue, client_id: str) -> None:
        self.emit(
            "unlock",
            now,
            actor=client_id,
            group=group,
            topic=mq.topic,
            queue_id=mq.queue_id,
            client_id=client_id,
        )

    def txn_check(self, old: Entry, new: Entry, now: int, times: int) -> None:
        self.emit(
            "txn_check",
            now,
            actor="broker",
            group=old.prop(PROPERTY_PRODUCER_GROUP),
            topic=old.prop(PROPERTY_REAL_TOPIC),
            queue_offset=new.queue_offset,
            commitlog_offset=new.commitlog_offset,
            msg_key=old.uniq_key,
            msg_id=self._id(new),
            txn_id=old.uniq_key,
            detail={"check_times": times},
        )

    def txn_discard(self, half: Entry, now: int) -> None:
        self.emit(
            "txn_discard",
            now,
            actor="broker",
            group=half.prop(PROPERTY_PRODUCER_GROUP),
            topic=half.prop(PROPERTY_REAL_TOPIC),
            commitlog_offset=half.commitlog_offset,
            msg_key=half.uniq_key,
            msg_id=self._id(half),
            txn_id=half.uniq_key,
        )

    def crash(self, now: int, kind: str, records: int, flushed: int, at_risk: list[str]) -> None:
        """``at_risk``: the keys of the records a power loss may take (SPEC §8: not judged LOST)."""
        self.emit(
            "crash", now, actor="broker", status=kind,
            detail={"records": records, "flushed": flushed, "at_risk": at_risk},
        )

    def recover(self, now: int, status: str, survivors: int, lost: int) -> None:
        self.emit(
            "recover", now, actor="broker", status=status, detail={"survivors": survivors, "lost": lost}
        )
