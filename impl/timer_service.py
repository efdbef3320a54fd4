"""The timer wheel of the mmap broker (RocketMQ 5.x): ``rmq_sys_wheel_timer`` → real topics.

Theory of operation
-------------------
The wheel's logic is the model's (``model/timer.py``, whose docstring is the theory and
lists the RocketMQ 5.3.3 sources): the put hook ``transform`` runs in
``broker_store.BrokerLog.prepare``; ``DiskTimerService`` *is* the model's
``TimerService`` (its ``tick``, ``maybe_persist`` and ``restore`` run unchanged) with the
checkpoint made of files instead of memory:

- ``config/timercheck`` in the layout of S/timer/TimerCheckpoint (5.3.3): a 4096-byte file
  (``DefaultMappedFile.OS_PAGE_SIZE``, mapped and grown when created at start-up) whose
  first 56 bytes are seven big-endian i64: ``lastReadTimeMs`` @0 (every slot before it was
  delivered), ``lastTimerLogFlushPos`` @8 (0: there is no timer log), ``lastTimerQueueOffset``
  @16 (the next timer-queue offset to enqueue), ``masterTimerQueueOffset`` @24 (the same: a
  master, TimerMessageStore.prepareTimerCheckPoint), then the DataVersion: ``stateVersion``
  @32 (0: no controller), ``timestamp`` @40, ``counter`` @48. prepareTimerCheckPoint bumps
  the version (timestamp := now, counter + 1) when the read time or the queue offset
  differ from the last values it committed (0 and 0 after each start); a new file's
  version is (0, the start time, 0) in memory and zeros on disk. Written in place and
  fsynced (``flush``: ``putLong`` × 7 and ``force``) — one 512-byte sector, so a crash
  leaves the old or the new checkpoint — at the moments the model persists: every
  ``timer_flush_interval_ms`` in ``tick`` and at clean close, when its bytes changed
  (RocketMQ's TimerFlushService also writes it at once when it starts, and rewrites
  unchanged bytes). Like the model's wheel it exists on the 5.x profiles with
  ``timerWheelEnable`` (without it RocketMQ has no TimerMessageStore and no file). Read
  back at open; the restart then runs the model's ``restore`` (the wheel rebuilt from the
  surviving timer queue below the pointer, slots from the read time on).
- ``config/timerEnqueueTimes.json`` (rmqspec's own file; RocketMQ keeps these times in its
  timer log): ``{"enqueueTimeTable":{offset:ms}}``, the wheel write time at which each
  timer-queue offset was enqueued (TIMER_ENQUEUE_MS of its fired copy; Long.MAX_VALUE when
  it was due already), fastjson dialect, rewritten atomically (``configfiles``). The
  model keeps this table in memory across crashes, so the file must hold, after any
  crash, what the model's ``restore`` would use: every offset below the checkpoint's
  pointer whose slot is not below its read time, with its latest enqueue time. Hence it
  is written *before* the checkpoint (a crash between the two leaves a newer table,
  a superset for the older checkpoint: entries are pruned in memory only below the read
  time just made durable); again at a restart that dropped entries (a power loss cut
  timer copies the checkpoint had counted: the model forgets their times at once); and
  after a ``tick`` that enqueued an offset below the durable pointer (only after such a
  cut: the model keeps the new time even if no checkpoint follows).

Delivery (``fire``, TimerMessageStore's dequeue + convertMessage): the timer copy at a queue
offset is re-put to REAL_TOPIC / REAL_QID with body, flag, sys flag, born time and reconsume
times kept and ``fire_properties`` (TIMER_ENQUEUE_MS, TIMER_DEQUEUE_MS added, REAL_* still in
the string); a refused put leaves the copy in the wheel for the next tick. Deviation
(docs/fidelity.md): no ``timerlog`` / ``timerwheel`` files; the wheel is rebuilt from the
timer topic's consume queue, which is what the timer log holds for a master.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from rmqspec.impl import effects
from rmqspec.impl.broker_store import BrokerLog, Entry, PutSpec
from rmqspec.impl.configfiles import (
    ConfigFileError,
    Loaded,
    dump_fastjson,
    load_with_backup,
    write_atomically,
)
from rmqspec.impl.mappedfile import StoreError, fsync_dir
from rmqspec.model.message import PROPERTY_REAL_QUEUE_ID, PROPERTY_REAL_TOPIC
from rmqspec.model.results import BrokerError
from rmqspec.model.timer import (
    PROPERTY_TIMER_OUT_MS,
    TIMER_TOPIC,
    Deliver,
    RecordGone,
    SlotOf,
    TimerService,
    TimerSettings,
    due_ms,
    fire_properties,
    java_long,
)

TIMER_CHECK_FILE = "timercheck"
ENQUEUE_TIMES_FILE = "timerEnqueueTimes.json"
TIMER_CHECK_SIZE = 4096  # DefaultMappedFile.OS_PAGE_SIZE
_LAYOUT = struct.Struct(">7q")

# on_fire(timer copy, the copy written in the real topic, its due time)
FireHook = Callable[[Entry, Entry, int], None]


@attrs.frozen
class TimerCheck:
    """The fields of TimerCheckpoint, in file order."""

    last_read_time_ms: int = 0
    last_timer_log_flush_pos: int = 0
    last_timer_queue_offset: int = 0
    master_timer_queue_offset: int = 0
    state_version: int = 0
    timestamp: int = 0
    counter: int = 0

    def encode(self) -> bytes:
        return _LAYOUT.pack(*attrs.astuple(self))

    @classmethod
    def decode(cls, data: bytes) -> TimerCheck:
        """A short file reads zero-padded (RocketMQ maps 4096 bytes, growing the file)."""
        return cls(*_LAYOUT.unpack(data[: _LAYOUT.size].ljust(_LAYOUT.size, b"\0")))


def read_timer_check(path: Path) -> TimerCheck | None:
    """The checkpoint in ``path``; None when there is no file."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StoreError(path, None, f"cannot read: {exc.strerror}") from exc
    return TimerCheck.decode(data)


def write_timer_check(path: Path, check: TimerCheck | None) -> None:
    """Write ``check`` in place (None: only make sure the 4096-byte file exists) and fsync."""
    tap = effects.tap_for(path)
    existed = path.exists()
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if tap is not None and not existed:
            tap.create()
        if os.fstat(fd).st_size < TIMER_CHECK_SIZE:
            os.ftruncate(fd, TIMER_CHECK_SIZE)
            if tap is not None:
                tap.resize(TIMER_CHECK_SIZE)
        data = b"" if check is None else check.encode()
        if data:
            os.pwrite(fd, data, 0)
            if tap is not None:
                tap.write(0, data)
        os.fsync(fd)
        if tap is not None:
            tap.sync(0, len(data), meta=True)
    finally:
        os.close(fd)
    if not existed:
        fsync_dir(path.parent)


# -- the enqueue times ----------------------------------------------------------------------------


def decode_enqueue_times(doc: Any) -> dict[int, int]:
    """``{"enqueueTimeTable":{offset:ms}}`` → {offset: ms}."""
    table = doc.get("enqueueTimeTable", {}) if isinstance(doc, dict) else None
    if not isinstance(table, dict):
        raise ConfigFileError(None, 0, f"{ENQUEUE_TIMES_FILE}: enqueueTimeTable is not an object")
    out: dict[int, int] = {}
    for key, value in table.items():
        if not isinstance(key, int) or isinstance(key, bool) or key < 0:
            raise ConfigFileError(None, 0, f"enqueueTimeTable key {key!r} is not a queue offset")
        if not isinstance(value, int) or isinstance(value, bool):
            raise ConfigFileError(None, 0, f"enqueueTimeTable[{key}] {value!r} is not an integer")
        out[key] = value
    return out


def encode_enqueue_times(table: Mapping[int, int]) -> str:
    return dump_fastjson({"enqueueTimeTable": {int(k): int(v) for k, v in sorted(table.items())}})


def load_enqueue_times(path: Path) -> Loaded[dict[int, int]]:
    return load_with_backup(path, decode_enqueue_times, dict)


# -- the wheel --------------------------------------------------------------------------------------


def timer_slot(log: BrokerLog, offset: int) -> int | None:
    """TIMER_OUT_MS of the timer queue's entry at ``offset`` (the model's ``Store.timer_slot``); raises
    ``RecordGone`` when retention took its record or its unit."""
    if _gone(log, offset):
        raise RecordGone(f"timer-queue entry {offset}")
    return java_long(timer_entry(log, offset).prop(PROPERTY_TIMER_OUT_MS) or "")


def _gone(log: BrokerLog, offset: int) -> bool:
    """Retention took the timer-queue unit at ``offset`` or the record it points at."""
    store = log.store
    if offset < store.min_offset(TIMER_TOPIC, 0):
        return True
    (unit,) = store.queue_units(TIMER_TOPIC, 0, offset, 1)
    return unit.commitlog_offset < store.commitlog_min_offset


def timer_entry(log: BrokerLog, offset: int) -> Entry:
    (unit,) = log.store.queue_units(TIMER_TOPIC, 0, offset, 1)
    return log.entry(unit.commitlog_offset, unit.tags_code)


def fire_spec(entry: Entry, enqueue_ms: int, now: int) -> PutSpec:
    """TimerMessageStore.convertMessage: the copy for the real topic."""
    return PutSpec(
        topic=entry.prop(PROPERTY_REAL_TOPIC) or "",
        queue_id=int(entry.prop(PROPERTY_REAL_QUEUE_ID) or "0"),
        body=entry.body,
        properties=tuple(fire_properties(entry.props, enqueue_ms, now).items()),
        sys_flag=entry.sys_flag,
        born_ts=entry.born_ts,
        flag=entry.flag,
        reconsume_times=entry.reconsume_times,
    )


def fire(log: BrokerLog, offset: int, enqueue_ms: int, now: int, precision_ms: int, on_fire: FireHook) -> bool:
    """Deliver the timer copy at ``offset``; False when the real topic refused it (retried later). A copy whose
    record retention took is released, nothing re-put (``dequeue_get_msg_miss``, fidelity TW-6)."""
    if _gone(log, offset):
        return True
    entry = timer_entry(log, offset)
    try:
        new = log.put(fire_spec(entry, enqueue_ms, now), now)
    except BrokerError:
        return False
    on_fire(entry, new, due_ms(int(entry.prop(PROPERTY_TIMER_OUT_MS) or 0), precision_ms))
    return True


@attrs.define
class DiskTimerService(TimerService):
    """The model's ``TimerService`` whose checkpoint is ``config/timercheck`` (+ the enqueue times)."""

    config_dir: Path = Path()
    slots: dict[int, int] = attrs.Factory(dict)  # offset -> TIMER_OUT_MS, for the offsets in enqueue_times
    version: tuple[int, int] = (0, 0)  # DataVersion (timestamp, counter); stateVersion is 0
    last_commit: tuple[int, int] = (0, 0)  # (read time, queue offset) of the last version bump
    on_disk: TimerCheck | None = None
    times_on_disk: str | None = None

    @property
    def check_path(self) -> Path:
        return self.config_dir / TIMER_CHECK_FILE

    @property
    def times_path(self) -> Path:
        return self.config_dir / ENQUEUE_TIMES_FILE

    @classmethod
    def open(cls, settings: TimerSettings, config_dir: Path, log: BrokerLog, now: int) -> DiskTimerService:
        """TimerCheckpoint's constructor + TimerMessageStore.load/recover: read both files, rebuild."""
        service = cls(settings, last_persist=now, config_dir=config_dir)
        check = read_timer_check(service.check_path)
        if check is None or service.check_path.stat().st_size < TIMER_CHECK_SIZE:
            write_timer_check(service.check_path, None)  # created (or grown) with zeros, as mapping it does
        if check is None:
            service.version = (now, 0)
            service.on_disk = TimerCheck()
        else:
            service.on_disk = check
            # TimerMessageStore.recover: min(lastTimerQueueOffset, masterTimerQueueOffset) (equal when we wrote it)
            pointer = min(check.last_timer_queue_offset, check.master_timer_queue_offset)
            service.persisted = (pointer, check.last_read_time_ms)
            service.version = (check.timestamp, check.counter)
        found = load_enqueue_times(service.times_path)
        loaded = found.table
        # no file reads as the empty table (never written until it has an entry)
        fresh = found.source is None and found.main_error is None
        service.times_on_disk = encode_enqueue_times(loaded) if found.source == service.times_path or fresh else None
        service.enqueue_times = dict(loaded)
        service.restore(now, log.max_offset(TIMER_TOPIC, 0), lambda offset: timer_slot(log, offset))
        if len(service.enqueue_times) < len(loaded):
            service._write_times()  # the model forgot the times of the copies a power loss cut
        return service

    def _recording(self, slot_of: SlotOf) -> SlotOf:
        def slot(offset: int) -> int:
            out = slot_of(offset)
            self.slots[offset] = out
            return out

        return slot

    def restore(self, now: int, max_offset: int, slot_of: SlotOf) -> None:
        self.slots = {}
        super().restore(now, max_offset, self._recording(slot_of))
        self.slots = {o: s for o, s in self.slots.items() if o in self.enqueue_times}

    def tick(self, now: int, max_offset: int, slot_of: SlotOf, deliver: Deliver) -> None:
        start = self.queue_offset
        super().tick(now, max_offset, self._recording(slot_of), deliver)
        if start < min(self.queue_offset, self.persisted[0]):
            self._write_times()  # re-enqueued below the durable pointer: the new times must survive

    def run(self, log: BrokerLog, now: int, on_fire: FireHook) -> None:
        """The broker's ``tick``: enqueue, deliver, and persist when the flush interval elapsed."""
        precision = self.settings.precision_ms
        self.tick(now, log.max_offset(TIMER_TOPIC, 0), lambda offset: timer_slot(log, offset),
                  lambda offset, enqueue_ms: fire(log, offset, enqueue_ms, now, precision, on_fire))
        self.maybe_persist(now)

    def persist(self, now: int) -> None:
        """TimerFlushService: prepareTimerCheckPoint + timerCheckpoint.flush (the times file first)."""
        super().persist(now)
        queue_offset, read_ms = self.persisted
        if (read_ms, queue_offset) != self.last_commit:
            self.version = (now, self.version[1] + 1)
            self.last_commit = (read_ms, queue_offset)
        self._write_times()
        check = TimerCheck(read_ms, 0, queue_offset, queue_offset, 0, *self.version)
        if check != self.on_disk:
            write_timer_check(self.check_path, check)
            self.on_disk = check
        # below the durable read time no slot is read again: those times are never needed
        for offset in [o for o, s in self.slots.items() if s < read_ms]:
            del self.slots[offset]
            self.enqueue_times.pop(offset, None)

    def _write_times(self) -> None:
        text = encode_enqueue_times(self.enqueue_times)
        if text != self.times_on_disk:
            write_atomically(self.times_path, text)
            self.times_on_disk = text


__all__ = [
    "ENQUEUE_TIMES_FILE",
    "TIMER_CHECK_FILE",
    "TIMER_CHECK_SIZE",
    "DiskTimerService",
    "TimerCheck",
    "decode_enqueue_times",
    "encode_enqueue_times",
    "fire",
    "fire_spec",
    "read_timer_check",
    "timer_slot",
    "write_timer_check",
]
