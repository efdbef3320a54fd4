"""The oracle of one crash state: what recovery must keep, and the checks that say whether it did.

Theory of operation
-------------------
``promises(recording, points)`` walks the recorded effects once and gives
every crash point its ``Promises`` — what was written and what was promised
when the power went out (the marks right after a crash point belong to it:
a crash just after an acknowledgement leaves the same disk):

- ``written``: the CommitLog records of the current epoch, in order, with
  their bytes (the ``Write`` that precedes each ``append`` mark, or the
  mark's own ``data`` when the record went to a TransientStorePool's write
  buffer) and the consume-queue unit each one needs; a ``recovered`` mark
  drops the records recovery cut off (a kill takes the uncommitted ones);
- ``required_end``: every record ending at or before it must survive (an
  ``ack`` or ``flushed`` mark promises everything written so far; with a pool
  there are no ``ack`` marks, ASYNC only, and ``flush()`` commits first);
- per config file, the texts written (``config_write``) and how many of those
  rewrites completed durably (``config_done``).

``check(state, …)`` materializes the state, opens ``MmapBroker`` on it (the
real recovery) and checks the properties below; results are ``Violation``
values, never exceptions. Each property is one predicate
(``commitlog_is_prefix``, ``promised_records_survive``, ``queues_index_prefix``,
``new_writes_in_place``; the config check, the recovery itself and
``store verify`` in ``check``):

=========================== ===============================================================
``RecoveryNeverFails``      the broker opens (config files load, recovery completes)
``ConfigOnceWritten``       each config table loaded is a version once written, no older
                            than the ``.bak`` of the last completed rewrite
``CommitLogIsPrefix``       the recovered CommitLog is byte for byte a prefix of the
                            records written (blank end-of-file records between them)
``PromisedRecordsSurvive``  every SYNC-acknowledged record, and every record written
                            before the last completed flush, is in that prefix
``QueuesIndexPrefix``       every consume queue holds exactly the units of the prefix's
                            records of its queue (none dangling, none missing), from the
                            first file retention left, with correctMinOffset's min offset
``VerifyClean``             ``store verify`` finds nothing and nothing is undispatched
``NewWritesInPlace``        a new send lands at the recovered end (or the next file)
                            with the next queue offset
``TimerCopiesFire``         (5.x, SYNC) once every timer is due, each timer copy kept in
                            ``rmq_sys_wheel_timer`` has a fired copy: ``config/timercheck``
                            never runs ahead of what was delivered
=========================== ===============================================================
"""

from __future__ import annotations

import functools
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

from rmqspec.impl import effects
from rmqspec.impl.broker import MmapBroker
from rmqspec.impl.codec import Blank, DecodedRecord, decode_at, is_txn_hidden
from rmqspec.impl.codec import tags_code as compute_tags_code
from rmqspec.impl.configfiles import (
    ConfigFileError,
    decode_consumer_offsets,
    decode_delay_offsets,
    load_with_backup,
    parse_fastjson,
)
from rmqspec.impl.consumequeue import UNIT_SIZE
from rmqspec.impl.crashfs import CrashPoint, CrashState, materialize
from rmqspec.impl.crashwork import Recording
from rmqspec.impl.metadata import decode_groups, decode_topics
from rmqspec.impl.store import MessageStore
from rmqspec.impl.timer_service import ENQUEUE_TIMES_FILE, decode_enqueue_times
from rmqspec.impl.verify import verify_store
from rmqspec.model.clock import ManualClock
from rmqspec.model.message import Message
from rmqspec.model.retention import corrected_min
from rmqspec.model.timer import PROPERTY_TIMER_OUT_MS, TIMER_TOPIC

PROPERTIES = {
    "RecoveryNeverFails": "the broker opens: config files load and recovery completes",
    "ConfigOnceWritten": "each config table is a version once written, no older than the last rewrite's .bak",
    "CommitLogIsPrefix": "the recovered CommitLog is byte for byte a prefix of the records written",
    "PromisedRecordsSurvive": "every SYNC-acknowledged or flushed record survives",
    "QueuesIndexPrefix": "the consume queues index exactly the records of that prefix",
    "VerifyClean": "store verify finds nothing after recovery",
    "NewWritesInPlace": "a new send lands at the recovered end with the next queue offset",
    "TimerCopiesFire": "every timer copy kept fires once due (5.x, SYNC)",
}

# config file -> decoder of its parsed document (what the broker loads)
CONFIG_DECODERS: dict[str, Callable[[Any], Any]] = {
    "config/consumerOffset.json": decode_consumer_offsets,
    "config/delayOffset.json": decode_delay_offsets,
    "config/topics.json": decode_topics,
    "config/subscriptionGroup.json": decode_groups,
    f"config/{ENQUEUE_TIMES_FILE}": decode_enqueue_times,
}
PROBE_TOPIC = "TopicA"
PROBE_BODY = b"written-after-recovery"


@attrs.frozen
class Violation:
    """One property a recovered state breaks."""

    code: str
    reason: str

    def line(self) -> str:
        return f"{self.code}: {self.reason}"


@attrs.frozen
class Written:
    """A CommitLog record the workload wrote (current epoch)."""

    offset: int
    data: bytes = attrs.field(repr=False)
    topic: str
    queue_id: int
    queue_offset: int
    unit: tuple[int, int, int] | None  # (commitlog offset, size, tagsCode); None: no unit

    @property
    def end(self) -> int:
        return self.offset + len(self.data)


@attrs.frozen
class ConfigHistory:
    file: str
    texts: tuple[str, ...]
    done: int  # rewrites completed durably (texts[done - 1] is the last one)


@attrs.frozen
class Promises:
    written: tuple[Written, ...]
    required_end: int
    configs: tuple[ConfigHistory, ...]
    lost_in_workload: str | None = None  # the recorded run itself lost a promised record


class _Builder:
    def __init__(self, delay_levels_ms: Sequence[int]) -> None:
        self.delays = tuple(delay_levels_ms)
        self.written: list[Written] = []
        self.required_end = 0
        self.texts: dict[str, list[str]] = {}
        self.done: dict[str, int] = {}
        self.last_write: effects.Write | None = None
        self.lost: str | None = None

    def apply(self, index: int, effect: effects.Effect) -> None:
        if isinstance(effect, effects.Write):
            if effect.path.startswith("commitlog/"):
                self.last_write = effect
            return
        if not isinstance(effect, effects.Mark):
            return
        kind = effect.kind
        if kind == "append":
            self._append(index, effect.get("offset"), effect.get("size"), effect.get("data"))
        elif kind in ("ack", "flushed"):
            if self.written:
                self.required_end = max(self.required_end, self.written[-1].end)
        elif kind == "recovered":
            end = effect.get("end")
            if self.required_end > end and self.lost is None:
                self.lost = (
                    f"recovery in the recorded run (effect #{index}) kept [.., {end}), promised {self.required_end}"
                )
            self.written = [w for w in self.written if w.end <= end]
        elif kind == "config_write":
            self.texts.setdefault(effect.get("file"), []).append(effect.get("text"))
        elif kind == "config_done":
            file = effect.get("file")
            self.done[file] = len(self.texts.get(file, []))

    def _append(self, index: int, offset: int, size: int, buffered: bytes | None) -> None:
        """``buffered``: the record went to a write buffer (TransientStorePool); its bytes reach the file
        only with a later commit's ``Write``, and a kill before that takes them."""
        if buffered is not None:
            if len(buffered) != size:
                raise ValueError(f"effect #{index}: append mark at {offset} carries {len(buffered)} bytes, not {size}")
            data = buffered
        else:
            w = self.last_write
            start = None if w is None else int(w.path.rsplit("/", 1)[1]) + w.offset
            if w is None or start != offset or len(w.data) != size:
                raise ValueError(f"effect #{index}: append mark at {offset} does not follow its record's write")
            data = w.data
        record = decode_at(data, 0, base_offset=offset, check_crc=False)
        assert isinstance(record, DecodedRecord)
        unit = None
        if not is_txn_hidden(record.sys_flag):
            code = compute_tags_code(record.topic, record.properties, record.store_ts, self.delays)
            unit = (offset, size, code)
        self.written.append(Written(offset, data, record.topic, record.queue_id, record.queue_offset, unit))

    def snapshot(self) -> Promises:
        configs = tuple(
            ConfigHistory(file, tuple(texts), self.done.get(file, 0)) for file, texts in sorted(self.texts.items())
        )
        return Promises(tuple(self.written), self.required_end, configs, self.lost)


def promises(recording: Recording, points: Sequence[CrashPoint]) -> list[Promises]:
    """The promises in force at each crash point (the marks right after a point count for it)."""
    builder = _Builder(recording.config.delay_levels_ms)
    out: list[Promises] = []
    next_point = 1
    for index, effect in enumerate(recording.effects):
        while next_point < len(points) and points[next_point].index == index:
            out.append(builder.snapshot())  # for the point before this effect
            next_point += 1
        builder.apply(index, effect)
    while len(out) < len(points):
        out.append(builder.snapshot())
    return out


# -- the checks -------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=4096)
def _decoded(file: str, text: str) -> Any:
    return CONFIG_DECODERS[file](parse_fastjson(text))


def _config_violations(root: Path, histories: Sequence[ConfigHistory]) -> list[Violation]:
    out = []
    for h in histories:
        decode = CONFIG_DECODERS.get(h.file)
        if decode is None:
            continue
        try:
            loaded = load_with_backup(root / h.file, decode, dict).table
        except ConfigFileError as exc:
            out.append(Violation("RecoveryNeverFails", f"{h.file} and its .bak cannot be read: {exc}"))
            continue
        oldest = max(h.done - 1, 0)  # the .bak of the last completed rewrite
        allowed = [_decoded(h.file, text) for text in h.texts[oldest:]]
        if h.done <= 1:
            allowed.append({})  # nothing (or only the first version) was durable: no file, no .bak
        if loaded not in allowed:
            out.append(
                Violation(
                    "ConfigOnceWritten",
                    f"{h.file} loads as {loaded!r}: not one of the {len(allowed)} versions allowed "
                    f"({h.done} of {len(h.texts)} rewrites completed)",
                )
            )
    return out


def check(
    state: CrashState,
    promised: Promises,
    recording: Recording,
    scratch: Path,
    *,
    verify: bool = True,
) -> list[Violation]:
    """Materialize ``state`` in ``scratch`` (emptied first), recover it and check every property."""
    if scratch.exists():
        shutil.rmtree(scratch)
    materialize(state, scratch)
    violations = _config_violations(scratch, promised.configs)
    config = recording.config
    try:
        broker = MmapBroker.open(scratch, ManualClock(recording.end_ms + 1000), config)
    except Exception as exc:  # any failure to start is the finding
        return [*violations, Violation("RecoveryNeverFails", f"{type(exc).__name__}: {exc}")]
    try:
        violations += _check_recovered(broker, promised, config.commitlog_file_size)
        if verify:
            report = verify_store(scratch, delay_levels_ms=config.delay_levels_ms)
            violations += [Violation("VerifyClean", f.line()) for f in report.findings[:5]]
            if report.stats["undispatched"]:
                violations.append(
                    Violation("VerifyClean", f"{report.stats['undispatched']} records have no consume-queue unit")
                )
    finally:
        if broker.state == "RUNNING":
            broker.crash("kill")
    return violations


def _check_recovered(broker: MmapBroker, promised: Promises, file_size: int) -> list[Violation]:
    assert broker.store is not None
    store = broker.store
    end = store.commitlog_max_offset
    written = promised.written
    kept = 0
    while kept < len(written) and written[kept].end <= end:
        kept += 1
    expected: Units = {}
    for w in written[:kept]:
        if w.unit is not None:
            expected.setdefault((w.topic, w.queue_id), []).append(w.unit)
    return [
        *commitlog_is_prefix(store, written, kept, file_size),
        *promised_records_survive(promised, kept, end),
        *queues_index_prefix(store, expected, broker.config.consume_queue_file_size),
        *new_writes_in_place(broker, end, file_size, len(expected.get((PROBE_TOPIC, 0), []))),
        *timer_copies_fire(broker),
    ]


def commitlog_is_prefix(store: MessageStore, written: Sequence[Written], kept: int, file_size: int) -> list[Violation]:
    """CommitLogIsPrefix: the recovered CommitLog is byte for byte the first ``kept`` records written."""
    out = []
    end = store.commitlog_max_offset
    files = store.commitlog.files
    low = store.commitlog_min_offset  # below it, files retention deleted: nothing to compare
    for w in written[:kept]:
        if w.offset >= low and files.read(w.offset, len(w.data)) != w.data:
            out.append(Violation("CommitLogIsPrefix", f"the record at {w.offset} ({len(w.data)} bytes) differs"))
            break
    tail_from = written[kept - 1].end if kept else store.commitlog_min_offset
    if kept < len(written) and written[kept].offset < end:
        out.append(
            Violation("CommitLogIsPrefix", f"recovery kept [.., {end}): part of the record at {written[kept].offset}")
        )
    elif end > tail_from and not _is_blank(files.read(tail_from, end - tail_from), tail_from, end, file_size):
        out.append(Violation("CommitLogIsPrefix", f"recovery kept [{tail_from}, {end}) that no record wrote"))
    return out


def promised_records_survive(promised: Promises, kept: int, end: int) -> list[Violation]:
    """PromisedRecordsSurvive: every record ending at or before the promised end is among those kept."""
    required = sum(1 for w in promised.written if w.end <= promised.required_end)
    if kept >= required:
        return []
    w = promised.written[kept]
    return [
        Violation(
            "PromisedRecordsSurvive",
            f"the record at {w.offset} ({w.topic}/{w.queue_id} queue offset {w.queue_offset}) was promised "
            f"(everything before {promised.required_end}) but recovery ends at {end}",
        )
    ]


Units = dict[tuple[str, int], list[tuple[int, int, int]]]  # (topic, queue) -> (offset, size, tagsCode)


def queues_index_prefix(store: MessageStore, expected: Units, cq_file_size: int) -> list[Violation]:
    """QueuesIndexPrefix: each consume queue holds exactly the units of the kept records of its queue — from
    its first file retention left (whole files, each of whose units point below the commitlog's min,
    ``consume_queue_files_to_delete``) — and its min offset is what ``correctMinOffset`` gives at a start."""
    out = []
    low = store.commitlog_min_offset
    per_file = cq_file_size // UNIT_SIZE
    for key in sorted(set(expected) | set(store.queues())):
        want = expected.get(key, [])
        first = store.queue_first_unit(*key)
        gone = want[:first]
        if first % per_file or any(clo >= low for clo, _size, _tags in gone):
            out.append(Violation("QueuesIndexPrefix", f"{key[0]}/{key[1]}: its files before unit {first} went, "
                                                      "though a record they index is kept"))
            continue
        want = want[first:]
        got = [(u.commitlog_offset, u.size, u.tags_code) for u in store.queue_units(*key, first, len(want) + 1)]
        wanted_min = corrected_min([clo for clo, _size, _tags in want[:per_file]], first, low, 0)
        if got != want or store.min_offset(*key) != wanted_min:
            detail = _unit_diff(want, got) if got != want else (
                f"min offset {store.min_offset(*key)}, correctMinOffset gives {wanted_min}")
            out.append(Violation("QueuesIndexPrefix", f"{key[0]}/{key[1]}: {detail}"))
    return out


def _is_blank(data: bytes, start: int, end: int, file_size: int) -> bool:
    """``[start, end)`` is the end-of-file blank record of ``start``'s file."""
    if end % file_size or end - start > file_size or not data:
        return False
    item = decode_at(data, 0, base_offset=start, limit=len(data), check_crc=False)
    return isinstance(item, Blank) and item.remaining == end - start


def _unit_diff(want: list[tuple[int, int, int]], got: list[tuple[int, int, int]]) -> str:
    for i, (a, b) in enumerate(zip(want, got, strict=False)):
        if a != b:
            return f"queue offset {i}: unit {b}, expected {a}"
    if len(got) > len(want):
        return f"{len(got) - len(want)}+ unit(s) past the {len(want)} expected, first {got[len(want)]}"
    if len(got) < len(want):
        return f"{len(got)} units, expected {len(want)} (first missing {want[len(got)]})"
    return "min offset is not 0"


TIMER_DRAIN_MS = 4 * 24 * 3600 * 1000  # past timerMaxDelaySec (3 days): every timer copy is due


def timer_copies_fire(broker: MmapBroker) -> list[Violation]:
    """TimerCopiesFire (5.x, SYNC): after one tick with every timer due, each timer copy kept has a
    copy in its real topic (same UNIQ_KEY, TIMER_OUT_MS kept). Under ASYNC a power loss may take
    fired copies the checkpoint already counted (as in RocketMQ), so it is not checked there."""
    if broker.timer is None or broker.config.flush != "SYNC" or not isinstance(broker.clock, ManualClock):
        return []
    broker.clock.advance(TIMER_DRAIN_MS)
    broker.tick()
    entries = broker.records()
    fired = {e.uniq_key for e in entries if e.topic != TIMER_TOPIC and e.prop(PROPERTY_TIMER_OUT_MS) is not None}
    for e in entries:
        if e.topic == TIMER_TOPIC and e.uniq_key not in fired:
            return [
                Violation(
                    "TimerCopiesFire",
                    f"the timer copy at {e.commitlog_offset} (queue offset {e.queue_offset}, "
                    f"{PROPERTY_TIMER_OUT_MS} {e.prop(PROPERTY_TIMER_OUT_MS)}) never fired",
                )
            ]
    return []


def new_writes_in_place(broker: MmapBroker, end: int, file_size: int, queue_offset: int) -> list[Violation]:
    """NewWritesInPlace: a new send lands at the recovered end (or the next file) with the next queue offset."""
    assert broker.store is not None
    if not broker.topic_exists(PROBE_TOPIC):
        broker.create_topic(PROBE_TOPIC, 2)
    try:
        result = broker.send(Message(PROBE_TOPIC, PROBE_BODY, tags="TagA"), 0)
    except Exception as exc:  # a refused write is the finding
        return [Violation("NewWritesInPlace", f"a new send failed: {type(exc).__name__}: {exc}")]
    if broker.store.config.transient_store_pool:  # the probe sits in a write buffer until a commit
        broker.store.commit_all()
    size = broker.store.read(result.commitlog_offset).size
    pos = end % file_size
    expected = end if pos == 0 or size + 8 <= file_size - pos else end - pos + file_size
    if (result.commitlog_offset, result.queue_offset) != (expected, queue_offset):
        return [
            Violation(
                "NewWritesInPlace",
                f"a new send went to commitlog {result.commitlog_offset} queue offset {result.queue_offset}, "
                f"expected {expected} and {queue_offset}",
            )
        ]
    return []
