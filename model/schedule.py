"""The schedule service: delayed and retry copies wait in SCHEDULE_TOPIC_XXXX.

Theory of operation
-------------------
Follows S/schedule/ScheduleMessageService (RocketMQ 4.9.8). Each delay level
``L`` has a queue ``L - 1`` in ``SCHEDULE_TOPIC_XXXX`` whose consume-queue
tagsCode is the deliver timestamp (``store_ts + delay(L)``, see
``queues.Store``) and a progress offset. On ``tick`` each level is scanned
from its progress offset, levels in ascending order (RocketMQ runs one timer
per level; the model fixes this order so runs are deterministic):

- ``deliver_ts`` is corrected to ``now`` when ``deliver_ts > now + delay(L)``
  (correctDeliverTimestamp: the clock went backwards);
- an entry not yet due (``lifecycle.is_due``) stops the scan of that level
  (FIFO per level);
- a due entry is rewritten (messageTimeup): topic/queue from REAL_TOPIC /
  REAL_QID, body, flag, sys_flag, born timestamp and reconsume_times kept,
  tagsCode = hash(TAGS). RocketMQ builds the properties string *before* it
  clears DELAY from the property map, so the delivered copy still carries
  DELAY, REAL_TOPIC and REAL_QID in its stored properties (an observable 4.9
  fact the model reproduces); the map's DELAY is gone, so the store does not
  schedule it again. The progress advances past the entry only after the
  write succeeded;
- a copy whose REAL_TOPIC is the half topic is discarded (progress advances).

Progress is persisted (``delayOffset.json``) every
``flush_delay_offset_interval_ms`` during ``tick`` and on clean shutdown; a
crash restores the last persisted progress, corrected into
``[min, max]`` of each schedule queue (correctDelayOffset), so a copy fired
after the last persist may fire again (at-least-once).

Deviation: RocketMQ's timers poll every 100 ms; the model delivers every due
entry at the ``tick`` that finds it due, across consume-queue files.
"""

from __future__ import annotations

from collections.abc import Callable

from rmqspec.model.lifecycle import is_due, needs_correction
from rmqspec.model.message import PROPERTY_REAL_QUEUE_ID, PROPERTY_REAL_TOPIC
from rmqspec.model.queues import HALF_TOPIC, SCHEDULE_TOPIC, PutError, PutRequest, Record, Store

# on_fire(source entry, new record or None when discarded, level, deliver_ts)
FireHook = Callable[[Record, Record | None, int, int], None]


def time_up_request(entry: Record) -> PutRequest:
    """ScheduleMessageService.messageTimeup: the copy to write to the real topic."""
    real_topic = entry.prop(PROPERTY_REAL_TOPIC) or ""
    real_qid = int(entry.prop(PROPERTY_REAL_QUEUE_ID) or "0")
    return PutRequest(
        topic=real_topic,
        queue_id=real_qid,
        body=entry.body,
        properties=entry.props,  # the string still has DELAY
        sys_flag=entry.sys_flag,
        born_ts=entry.born_ts,
        flag=entry.flag,
        reconsume_times=entry.reconsume_times,
        delay_level=0,  # DELAY was cleared from the map
    )


class ScheduleService:
    def __init__(self, delays: tuple[int, ...], now: int) -> None:
        self.delays = delays
        self.progress: dict[int, int] = {}
        self.persisted: dict[int, int] = {}
        self.last_persist = now

    def deliver_due(self, store: Store, now: int, on_fire: FireHook) -> None:
        for level in range(1, len(self.delays) + 1):
            self._deliver_level(store, now, level, on_fire)

    def _deliver_level(self, store: Store, now: int, level: int, on_fire: FireHook) -> None:
        queue_id = level - 1
        delay = self.delays[level - 1]
        # below the queue's min offset the task starts at the min (failScheduleOffset = cqMinOffset)
        offset = max(self.progress.get(level, 0), store.min_offset(SCHEDULE_TOPIC, queue_id))
        while offset < store.max_offset(SCHEDULE_TOPIC, queue_id):
            if store.unit_gone(SCHEDULE_TOPIC, queue_id, offset):
                return  # getIndexBuffer is null: the task retries the same offset (retention)
            entry = store.entry(SCHEDULE_TOPIC, queue_id, offset)
            deliver_ts = entry.tags_code
            if needs_correction(deliver_ts, now, delay):
                deliver_ts = now
            if not is_due(deliver_ts, now):
                return
            request = time_up_request(entry)
            if store.removed(entry.commitlog_offset):
                pass  # lookMessageByOffset is null: skipped (retention took it)
            elif request.topic == HALF_TOPIC:
                on_fire(entry, None, level, deliver_ts)
            else:
                try:
                    new = store.put(request, now)
                except PutError:
                    return  # retried at the next tick, progress unchanged
                on_fire(entry, new, level, deliver_ts)
            offset += 1
            self.progress[level] = offset

    def maybe_persist(self, now: int, interval_ms: int) -> None:
        if now < self.last_persist:
            self.last_persist = now  # timers run on elapsed time; re-anchor after a clock step
        if now - self.last_persist >= interval_ms:
            self.persist(now)

    def persist(self, now: int) -> None:
        self.persisted = dict(self.progress)
        self.last_persist = now

    def restore(self, store: Store, now: int) -> None:
        """load + correctDelayOffset after a restart."""
        self.progress = {}
        for level, offset in self.persisted.items():
            q = level - 1
            self.progress[level] = min(
                max(offset, store.min_offset(SCHEDULE_TOPIC, q)),
                store.max_offset(SCHEDULE_TOPIC, q),
            )
        # correctDelayOffset fixes the table in memory only; delayOffset.json
        # keeps the old value until the next persist (a second crash reads it again).
        self.last_persist = now
