"""Model well-formedness: conditions on the model's own state (not broker guarantees).

Theory of operation
-------------------
These predicates say the *model* is internally consistent; a violation is a
bug in the model, never a finding about a broker (STYLE lesson 5: keep
well-formedness apart from guarantees, which live in ``rmqspec.properties``).
``check(broker)`` returns a list of problems (empty = well-formed); the
lockstep runner calls it on every model fork after every operation.

- ``commitlog_layout``: records are in commitlog order, each at the previous
  end or — when it did not fit (size + 8 > room left; a batch's first item: the
  batch's size) — at the next multiple of ``commitlog_file_size``; each size is
  ``record_size`` of its contents.
- ``dense_queues``: each consume queue holds offsets 0..n-1, entry k is a
  record of that topic/queue with queue_offset k, in commitlog order.
- ``one_place``: every NOT/COMMIT record is in exactly one consume queue (its
  own); no record is in two places at once.
- ``schedule_entries``: schedule-topic records carry DELAY = queue + 1 and
  tagsCode = store_ts + delay(level); progress offsets lie in [0, max].
- ``time_high_water``: no timestamp in the state (store_ts, lock updates,
  timers) exceeds the broker's time high-water mark; callers that keep the
  previous mark also check it never decreases (``check(b, previous_high_water)``).
- ``durability``: the flushed count never exceeds the record count and equals
  it under SYNC flush.
"""

from __future__ import annotations

from typing import Any

from rmqspec.model.crash import BrokerState
from rmqspec.model.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    record_size,
    transaction_type,
)
from rmqspec.model.queues import END_FILE_MIN_BLANK_LENGTH, SCHEDULE_TOPIC


def commitlog_layout(broker: Any) -> list[str]:
    problems = []
    store = broker.store
    fs = broker.config.commitlog_file_size
    trailing = broker.config.behaviour.properties_trailing_separator
    end = 0
    # records are immutable: a size already checked for this very record object is not recomputed
    # (``record_size`` encodes the properties; re-checking every record after every operation was
    # quadratic in a long run)
    sized = getattr(broker, "_wf_sized", None)
    if not isinstance(sized, dict):
        sized = {}
    for i, r in enumerate(store.records):
        expected = end
        if max(r.size, r.batch_bytes) + END_FILE_MIN_BLANK_LENGTH > fs - end % fs \
                or (end, end + (fs - end % fs)) in getattr(store, "resumed_at", ()):  # a batch moves whole; a recovery
            expected = end + (fs - end % fs)  # that stepped over a blank resumes in the next file
        if r.commitlog_offset != expected:
            problems.append(
                f"record {i} at commitlog offset {r.commitlog_offset}, expected {expected}"
            )
        if sized.get(id(r)) is not r:
            size = record_size(len(r.body), r.topic, r.props, r.sys_flag, trailing=trailing)
            if r.size != size:
                problems.append(f"record {i} size {r.size} != record_size {size}")
            else:
                sized[id(r)] = r
        if store.index.get(r.commitlog_offset) != i:
            problems.append(f"record {i} not indexed at {r.commitlog_offset}")
        end = r.commitlog_offset + r.size
    if len(sized) > 2 * len(store.records) + 64:  # forget records truncated away
        live = {id(r) for r in store.records}
        sized = {k: v for k, v in sized.items() if k in live}
    broker._wf_sized = sized
    if store.write_pos != end and (end, store.write_pos) not in getattr(store, "resumed_at", ()):
        problems.append(f"write position {store.write_pos} != end of last record {end}")
    if len(store.index) != len(store.records):
        problems.append("commitlog index has stale entries")
    return problems


def dense_queues(broker: Any) -> list[str]:
    problems = []
    store = broker.store
    for (topic, queue_id), units in store.queues.items():
        previous = -1
        for k, index in enumerate(units):
            r = store.records[index]
            if (r.topic, r.queue_id, r.queue_offset) != (topic, queue_id, k):
                problems.append(
                    f"{topic}:{queue_id} unit {k} is record {r.topic}:{r.queue_id}@{r.queue_offset}"
                )
            if index <= previous:
                problems.append(f"{topic}:{queue_id} unit {k} out of commitlog order")
            previous = index
    return problems


def one_place(broker: Any) -> list[str]:
    problems = []
    seen: dict[int, tuple[str, int]] = {}
    for key, units in broker.store.queues.items():
        for index in units:
            if index in seen:
                problems.append(f"record {index} in {seen[index]} and {key}")
            seen[index] = key
    dispatched = broker.store.dispatched  # a TransientStorePool's uncommitted records are not yet (committing.py)
    for i, r in enumerate(broker.store.records):
        queued = transaction_type(r.sys_flag) in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE)
        if queued and i < dispatched and i not in seen:
            problems.append(f"record {i} ({r.topic}:{r.queue_id}) is in no consume queue")
        if i >= dispatched and i in seen:
            problems.append(f"record {i} ({r.topic}:{r.queue_id}) is in a consume queue before it is readable")
        if not queued and (i in seen or r.queue_offset != 0):
            problems.append(f"prepared/rollback record {i} has a queue entry or offset")
    return problems


def schedule_entries(broker: Any) -> list[str]:
    problems = []
    delays = broker.config.delay_levels_ms
    for r in broker.store.records:
        if r.topic != SCHEDULE_TOPIC:
            continue
        level = r.queue_id + 1
        if r.prop(PROPERTY_DELAY_TIME_LEVEL) != str(level):
            problems.append(
                f"schedule record at {r.commitlog_offset} has DELAY "
                f"{r.prop(PROPERTY_DELAY_TIME_LEVEL)} in queue {r.queue_id}"
            )
        elif r.tags_code != r.store_ts + delays[level - 1]:
            problems.append(
                f"schedule record at {r.commitlog_offset} deliver_ts {r.tags_code} "
                f"!= store_ts + delay({level})"
            )
    for level, offset in broker.schedule.progress.items():
        hi = broker.store.max_offset(SCHEDULE_TOPIC, level - 1)
        if not 0 <= offset <= hi:
            problems.append(f"delay level {level} progress {offset} outside [0, {hi}]")
    return problems


def time_high_water(broker: Any, previous_high_water: int | None = None) -> list[str]:
    problems = []
    hwm = broker.high_water_ts
    if previous_high_water is not None and hwm < previous_high_water:
        problems.append(f"time high-water mark went back from {previous_high_water} to {hwm}")
    for r in broker.store.records:
        if r.store_ts > hwm:
            problems.append(f"record at {r.commitlog_offset} stored at {r.store_ts} > {hwm}")
    for (group, mq), entry in broker.locks.entries.items():
        if entry.last_update > hwm:
            problems.append(f"lock {group}/{mq} updated at {entry.last_update} > {hwm}")
    timers = {
        "offset persist": broker.offsets_last_persist,
        "delay persist": broker.schedule.last_persist,
        "transaction check": broker.txn.last_check,
    }
    for name, ts in timers.items():
        if ts > hwm:
            problems.append(f"{name} timer at {ts} > {hwm}")
    return problems


def durability(broker: Any) -> list[str]:
    problems = []
    total = len(broker.store.records)
    flushed = broker.durability.flushed
    if flushed > total:
        problems.append(f"{flushed} records flushed of {total}")
    unwaited = broker.durability.unwaited
    if broker.durability.sync and broker.state is BrokerState.RUNNING and flushed + unwaited != total:
        problems.append(f"SYNC flush but only {flushed} of {total} records durable and {unwaited} answered unflushed")
    if (broker.state is BrokerState.CRASHED) != (broker.durability.crash_kind is not None):
        problems.append(f"state {broker.state} with crash kind {broker.durability.crash_kind}")
    return problems


CHECKS = (commitlog_layout, dense_queues, one_place, schedule_entries, durability)


def check(broker: Any, previous_high_water: int | None = None) -> list[str]:
    """Every well-formedness problem of ``broker`` (empty list = well-formed)."""
    problems: list[str] = []
    for predicate in CHECKS:
        problems.extend(f"{predicate.__name__}: {p}" for p in predicate(broker))
    problems.extend(f"time_high_water: {p}" for p in time_high_water(broker, previous_high_water))
    return problems
