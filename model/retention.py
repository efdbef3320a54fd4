"""Retention: expired commitlog files deleted, consume-queue files after them, the min offsets moved.

Theory of operation
-------------------
Both brokers (the model's list of records and the mmap broker's real files) ask the functions here
what to delete, so they decide alike; each applies the decision to its own store.

Facts followed (RocketMQ 4.9.8, S = store/src/main/java/org/apache/rocketmq/store; read with
``javap -c`` from the release jar):

- S/DefaultMessageStore.addScheduleTask: ``cleanFilesPeriodically`` runs 60 s after start, then every
  ``cleanResourceInterval`` (10 s): CleanCommitLogService, then CleanConsumeQueueService.
- CleanCommitLogService.deleteExpiredFiles: a pass deletes when it is the hour of ``deleteWhen``
  (``"04"``; hours separated by ``;``, the JVM's local time — rmqspec uses UTC), or the disk is over
  ``diskMaxUsedSpaceRatio`` (75 %, clamped to [10, 95]). Over ``diskSpaceCleanForciblyRatio`` (0.85) it
  deletes at once, expired or not (``cleanFileForciblyEnable``, true); over
  ``diskSpaceWarningLevelRatio`` (0.90) the store is marked disk-full (puts refused with
  SERVICE_NOT_AVAILABLE) until a pass finds the disk at or under 0.85 again.
- S/MappedFileQueue.deleteExpiredFileByTime: every file but the last, oldest first, while
  ``now >= lastModified + fileReservedTime`` (or at once); at most 10 files a pass
  (DELETE_FILES_BATCH_MAX); the first file that may not go ends the pass (no holes).
- CleanConsumeQueueService: when the commitlog's min offset grew, each consume queue deletes its files
  but the last while the file's last unit points below it (deleteExpiredFileByOffset), then
  ``correctMinOffset``: the queue's min offset is the first unit of its *first* file pointing at or
  above the commitlog's min offset — unchanged when that file has none. A restart (recoverTopicQueueTable)
  corrects every queue from min offset 0.
- S/DefaultMessageStore.getMessage: below the min offset OFFSET_TOO_SMALL (PULL_OFFSET_MOVED, next = the
  min); a unit whose record's file is gone is skipped, MESSAGE_WAS_REMOVING when nothing was found
  (PULL_RETRY_IMMEDIATELY); an offset whose consume-queue file is gone OFFSET_FOUND_NULL (PULL_NOT_FOUND,
  next = the start of the next consume-queue file).

Each tick runs the pass due before the other services (the real service is a thread of its own), so
a pass never takes what the same tick wrote. rmqspec ages a file by the store time of the put that
rolled it (the first record of the next file, which wrote the file's blank end); 4.9.8 reads the
file's mtime, set by that same write (docs/fidelity.md R1). A file no later record has rolled is not
aged. The disk's usage is injected (``Capability.DISK_USAGE``), never measured.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import attrs

Emit = Callable[..., Any]  # a recorder's emit(event, ts, **fields)

CLEAN_FIRST_DELAY_MS = 60_000  # addScheduleTask's initial delay
CLEAN_INTERVAL_MS = 10_000  # cleanResourceInterval
DELETE_FILES_BATCH_MAX = 10
CLEAN_FORCIBLY_RATIO = 0.85  # diskSpaceCleanForciblyRatio (system property rocketmq.broker.diskSpaceCleanForciblyRatio)
WARNING_LEVEL_RATIO = 0.90  # diskSpaceWarningLevelRatio (rocketmq.broker.diskSpaceWarningLevelRatio)


def parse_delete_when(text: str) -> tuple[int, ...]:
    """``deleteWhen``: hours of the day separated by ``;`` (UtilAll.isItTimeToDo parses each)."""
    hours = []
    for part in text.split(";"):
        try:
            hour = int(part)
        except ValueError:
            raise ValueError(f"deleteWhen: {part!r} is not an hour (hours 0-23 separated by ';')") from None
        if not 0 <= hour <= 23:
            raise ValueError(f"deleteWhen: {hour} is not an hour of the day (0-23)")
        hours.append(hour)
    return tuple(hours)


@attrs.frozen
class Policy:
    """What a clean pass decides by: BrokerConfig's retention keys."""

    reserved_ms: int  # fileReservedTime, hours → ms
    delete_hours: tuple[int, ...]  # deleteWhen
    max_used_ratio: float  # diskMaxUsedSpaceRatio / 100, clamped to [0.10, 0.95]
    clean_forcibly: bool = True  # cleanFileForciblyEnable

    @classmethod
    def of(cls, file_reserved_hours: int, delete_when: str, disk_max_used_space_ratio: int,
           clean_file_forcibly_enable: bool = True) -> Policy:
        ratio = min(95, max(10, disk_max_used_space_ratio)) / 100.0
        return cls(file_reserved_hours * 3_600_000, parse_delete_when(delete_when), ratio,
                   clean_file_forcibly_enable)


@attrs.frozen
class PassOutcome:
    """One clean pass: how many of the oldest commitlog files go, and the disk-full flag after it
    (None: the pass left it as it was)."""

    delete: int
    disk_full: bool | None
    cause: str = "reserved"  # "reserved": past fileReservedTime; "forcibly": the disk over 0.85, at once


def pass_due(now: int, started: int, last_pass: int | None) -> int | None:
    """The latest clean pass in (the last pass, now], if any: passes run at ``started + 60 s + k·10 s``.
    A clock that jumps over several runs one, at ``now`` (docs/fidelity.md R2)."""
    first = started + CLEAN_FIRST_DELAY_MS
    if now < first:
        return None
    latest = first + (now - first) // CLEAN_INTERVAL_MS * CLEAN_INTERVAL_MS
    return latest if last_pass is None or latest > last_pass else None


def commitlog_pass(policy: Policy, now: int, disk_ratio: float,
                   rolled_at: Sequence[int | None] | Callable[[], Sequence[int | None]]) -> PassOutcome:
    """CleanCommitLogService.deleteExpiredFiles at ``now``. ``rolled_at``: each commitlog file's age
    reference, oldest first (None: not aged), or what computes them — called only when the pass
    deletes at all; the last file is never deleted."""
    hour = datetime.datetime.fromtimestamp(now / 1000, datetime.UTC).hour
    at_once = disk_ratio > CLEAN_FORCIBLY_RATIO
    disk_full = True if disk_ratio > WARNING_LEVEL_RATIO else None if at_once else False
    if not (hour in policy.delete_hours or disk_ratio > policy.max_used_ratio):
        return PassOutcome(0, disk_full)
    at_once = at_once and policy.clean_forcibly
    cause = "forcibly" if at_once else "reserved"
    rolls = rolled_at() if callable(rolled_at) else rolled_at
    count = 0
    for rolled in rolls[:-1]:
        if rolled is None or not (at_once or now >= rolled + policy.reserved_ms):
            break
        count += 1
        if count >= DELETE_FILES_BATCH_MAX:
            break
    return PassOutcome(count, disk_full, cause)


def consume_queue_files_to_delete(last_unit_offsets: Sequence[int | None], commitlog_min: int) -> int:
    """deleteExpiredFileByOffset: how many of a consume queue's oldest files go; ``last_unit_offsets``
    is each file's last unit's commitlog offset (None: not written), oldest first."""
    count = 0
    for last in last_unit_offsets[:-1]:
        if last is None or last >= commitlog_min:
            break
        count += 1
    return count


def corrected_min(first_file_units: Sequence[int], first_file_start: int, commitlog_min: int,
                  current: int) -> int:
    """correctMinOffset: the queue offset of the first unit of the first file pointing at or above the
    commitlog's min offset; ``current`` when it has none."""
    for i, commitlog_offset in enumerate(first_file_units):
        if commitlog_offset >= commitlog_min:
            return first_file_start + i
    return current


class RetainingStore(Protocol):
    """What ``Cleaner`` needs of a store (the model's ``Store``, the mmap broker's ``MessageStore``)."""

    disk_full: bool  # puts are refused while set

    @property
    def commitlog_min_offset(self) -> int: ...

    def queue_mins(self) -> Mapping[tuple[str, int], int]: ...

    def file_rolls(self) -> list[int | None]: ...

    def delete_files(self, count: int) -> None: ...

    def clean_queues(self) -> None: ...


@attrs.define
class Cleaner:
    """The clean service of one broker run: its passes, the injected disk usage and the disk-full flag
    (``DefaultMessageStore.runningFlags``: puts are refused while it is set)."""

    policy: Policy
    started: int
    last_pass: int | None = None
    disk_ratio: float = 0.0
    disk_full: bool = False

    def restart(self, now: int) -> None:
        """A new process: its first pass 60 s after ``now``; the flag starts clear."""
        self.started, self.last_pass, self.disk_full = now, None, False

    def run(self, now: int, store: RetainingStore, emit: Emit) -> PassOutcome | None:
        """The pass due at ``now``, if any (its outcome): files deleted, the store's disk-full flag set,
        an ``expire`` row for the commitlog and one for each queue whose min offset moved."""
        at = pass_due(now, self.started, self.last_pass)
        if at is None:
            return None
        self.last_pass = at
        out = commitlog_pass(self.policy, now, self.disk_ratio, store.file_rolls)
        if out.disk_full is not None:
            self.disk_full = out.disk_full
        store.disk_full = self.disk_full
        before_cl, before = store.commitlog_min_offset, dict(store.queue_mins())
        if out.delete:
            store.delete_files(out.delete)
        store.clean_queues()
        if store.commitlog_min_offset != before_cl:
            detail = {"cause": out.cause, "files": out.delete}
            emit("expire", now, actor="broker", commitlog_offset=store.commitlog_min_offset, detail=detail)
            for (topic, queue_id), low in sorted(store.queue_mins().items()):
                if low != before.get((topic, queue_id), 0):
                    emit("expire", now, actor="broker", topic=topic, queue_id=queue_id, queue_offset=low,
                         detail=detail)
        return out


def check_disk_ratio(ratio: float) -> float:
    """An injected disk usage: a fraction of the partition in [0, 1]."""
    if not 0.0 <= ratio <= 1.0:
        raise ValueError(f"disk usage must be a fraction in [0, 1], got {ratio}")
    return float(ratio)
