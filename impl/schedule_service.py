"""The schedule service of the mmap broker: SCHEDULE_TOPIC_XXXX → real topics.

Theory of operation
-------------------
Follows S/schedule/ScheduleMessageService (RocketMQ 4.9.8):

- Level ``L`` owns queue ``L − 1`` of ``SCHEDULE_TOPIC_XXXX``; each consume-queue
  unit's tagsCode is the deliver timestamp (``store_ts + delay(L)``, computed by
  the store's dispatch). The progress table ``offsetTable`` (level → next queue
  offset) lives in memory.
- ``deliver_due`` (DeliverDelayedMessageTimerTask.executeOnTimeup) scans each
  level from its progress offset, levels in ascending order (RocketMQ runs one
  timer per level; a fixed order keeps runs deterministic and equal to the
  model's): the deliver timestamp is read from the *consume-queue unit*,
  corrected to ``now`` when it lies more than one delay ahead
  (correctDeliverTimestamp, ``lifecycle.needs_correction``); an entry not yet
  due (``lifecycle.is_due``) stops that level; a due entry's record is read
  from the CommitLog by the unit's offset and rewritten (messageTimeup): topic
  and queue from REAL_TOPIC / REAL_QID, body, flag, sys_flag, born timestamp
  and reconsume_times kept; the properties *string* is built before DELAY is
  cleared from the map, so the stored copy still carries DELAY, REAL_TOPIC and
  REAL_QID while the map's DELAY is gone (no second scheduling). The progress
  moves past the entry only after the write succeeded; a refused write stops
  the level until the next tick. A copy whose REAL_TOPIC is the half topic is
  dropped (progress advances).
- Persistence (``ConfigManager.persist`` → ``config/delayOffset.json``,
  ``{"offsetTable":{1:5,2:0}}``): every ``flush_delay_offset_interval_ms`` during
  ``tick`` and on clean shutdown. ``load`` reads it back and applies
  correctDelayOffset (clamp each level into ``[min, max]`` of its queue) in
  memory only — the file keeps the old value until the next persist. So a copy
  fired after the last persist fires again after a crash (at-least-once), and
  never after a clean restart.

Deviation: RocketMQ's timers poll every 100 ms; here every due entry is
delivered at the ``tick`` that finds it due.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rmqspec.impl.broker_store import SCHEDULE_TOPIC, BrokerLog, Entry, PutSpec
from rmqspec.impl.configfiles import load_delay_offsets, save_delay_offsets
from rmqspec.model.lifecycle import is_due, needs_correction
from rmqspec.model.message import PROPERTY_REAL_QUEUE_ID, PROPERTY_REAL_TOPIC
from rmqspec.model.results import BrokerError

HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"

# on_fire(source entry, written copy or None when dropped, level, deliver_ts)
FireHook = Callable[[Entry, Entry | None, int, int], None]


def time_up_spec(entry: Entry) -> PutSpec:
    """ScheduleMessageService.messageTimeup: the copy for the real topic."""
    return PutSpec(
        topic=entry.prop(PROPERTY_REAL_TOPIC) or "",
        queue_id=int(entry.prop(PROPERTY_REAL_QUEUE_ID) or "0"),
        body=entry.body,
        properties=entry.props,  # the string still has DELAY / REAL_TOPIC / REAL_QID
        sys_flag=entry.sys_flag,
        born_ts=entry.born_ts,
        flag=entry.flag,
        reconsume_times=entry.reconsume_times,
        delay_level=0,  # DELAY was cleared from the map
    )


class ScheduleService:
    def __init__(self, delays: tuple[int, ...], path: Path, now: int) -> None:
        self.delays = delays
        self.path = path
        self.offsets: dict[int, int] = {}
        self.last_persist = now

    def deliver_due(self, log: BrokerLog, now: int, on_fire: FireHook) -> None:
        for level in range(1, len(self.delays) + 1):
            self._deliver_level(log, now, level, on_fire)

    def _deliver_level(self, log: BrokerLog, now: int, level: int, on_fire: FireHook) -> None:
        queue_id = level - 1
        delay = self.delays[level - 1]
        store = log.store
        offset = max(self.offsets.get(level, 0), store.min_offset(SCHEDULE_TOPIC, queue_id))  # failScheduleOffset
        while offset < store.max_offset(SCHEDULE_TOPIC, queue_id):
            units = store.queue_units(SCHEDULE_TOPIC, queue_id, offset, 1)
            if not units:
                return  # its consume-queue file was deleted: the task retries the same offset
            deliver_ts = units[0].tags_code
            if needs_correction(deliver_ts, now, delay):
                deliver_ts = now
            if not is_due(deliver_ts, now):
                return
            if not store.removed(units[0].commitlog_offset):  # else lookMessageByOffset is null: skipped
                entry = log.entry(units[0].commitlog_offset, units[0].tags_code)
                spec = time_up_spec(entry)
                if spec.topic == HALF_TOPIC:
                    on_fire(entry, None, level, deliver_ts)
                else:
                    try:
                        new = log.put(spec, now)
                    except BrokerError:
                        return  # retried at the next tick; progress unchanged
                    on_fire(entry, new, level, deliver_ts)
            offset += 1
            self.offsets[level] = offset

    def maybe_persist(self, now: int, interval_ms: int) -> None:
        if now < self.last_persist:
            self.last_persist = now  # the timer counts elapsed time; re-anchor after a clock step
        if now - self.last_persist >= interval_ms:
            self.persist(now)

    def persist(self, now: int) -> None:
        save_delay_offsets(self.path, self.offsets)
        self.last_persist = now

    def load(self, log: BrokerLog, now: int) -> None:
        """load + correctDelayOffset (in memory only)."""
        self.offsets = {}
        for level, offset in load_delay_offsets(self.path).table.items():
            q = level - 1
            self.offsets[level] = min(
                max(offset, log.min_offset(SCHEDULE_TOPIC, q)), log.max_offset(SCHEDULE_TOPIC, q)
            )
        self.last_persist = now
