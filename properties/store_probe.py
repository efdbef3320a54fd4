"""The store probe: the candidate's store directory read back by the pristine RocketMQ 4.9 reader.

Theory of operation
-------------------
A broker's answers show what it *serves*; they do not show what it *wrote*. A candidate that
writes a wrong checkpoint, forgets to persist consumer offsets or topics, leaves a record a
RocketMQ reader cannot parse, or a consume queue pointing at the wrong record, may answer every
request right until a restart it is never put through — and its own reader, mirroring its own
writer, may hide the damage even then. The promise of ``rmqspec.impl`` is RocketMQ's on-disk
format, so the conformance machine judges the store itself, with code the candidate cannot touch:
the *pristine* ``rmqspec.impl`` reader (``verify.verify_store``, ``checkpoint.read_checkpoint``,
``configfiles``/``metadata`` decoders), imported from the project's package. Under the mutation
harness the candidate is the private copy ``rmqspec_candidate`` and these modules are never
mutated (the isolation proof of ``bench/power/candidate.py`` still holds: nothing of the copy is
loaded here).

``probe_store(root, expect)`` returns ``None`` (not judged) when ``root`` holds no store (no
``commitlog`` directory: an in-process broker without files, the model, a remote broker), else the
list of ``StoreViolation`` values. What it judges:

- always: the ``checkpoint`` file exists (StoreCheckpoint creates its 4096 bytes when the store
  starts, so a broker that opened the store has one: ``STORE_CHECKPOINT``); every finding of
  ``verify_store`` (record layout, CRCs, physical offsets, file names and
  sizes, consume-queue units pointing at the right record with the right tags code, dense queue
  offsets, config files in fastjson's dialect with the right shape, a 4096-byte checkpoint) is a
  ``STORE_FORMAT`` violation. With the ``abort`` file present (running, or just recovered) verify
  tolerates an undispatched tail, as RocketMQ's recovery would;
- after a clean shutdown (``expect.closed``) the state only a shutdown persists:
  ``STORE_ABORT_LEFT`` (the ``abort`` file must be gone: a clean restart must not recover as after
  a crash); ``STORE_CHECKPOINT`` (``physicMsgTimestamp`` is the store timestamp of the last
  CommitLog record, ``logicsMsgTimestamp`` lies between that of the last record dispatched to a
  consume queue and the physic one, ``indexMsgTimestamp`` is 0 — no index file fills up at these
  sizes — and none is set on an empty CommitLog); ``STORE_OFFSETS`` (``config/consumerOffset.json``
  holds, for every (group, queue) the broker answered, the offset it answered — a positive answer
  must be there); ``STORE_TOPICS`` (``config/topics.json`` holds every topic created, with its
  queue count); in lockstep ``STORE_DELAY_OFFSETS`` (``config/delayOffset.json`` holds the delay
  progress per level of one of the reference's surviving forks: a clean shutdown persists it).

The expectations (``StoreExpectation``) come from the machine, not from the candidate's files:
the topics it created and the offsets the broker answered just before the shutdown (in lockstep
those answers were compared with the reference model's). The probe costs a read of small files
(the CommitLog's zero tail is not scanned: ``verify`` stops at the end of the data).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import attrs

from rmqspec.impl.checkpoint import read_checkpoint
from rmqspec.impl.codec import DEFAULT_DELAY_LEVELS_MS, CorruptRecord, DecodedRecord, is_txn_hidden
from rmqspec.impl.configfiles import (
    CONSUMER_OFFSET_FILE,
    DELAY_OFFSET_FILE,
    TOPIC_GROUP_SEPARATOR,
    ConfigFileError,
    decode_consumer_offsets,
    decode_delay_offsets,
    parse_fastjson,
)
from rmqspec.impl.metadata import TOPICS_FILE, decode_topics
from rmqspec.impl.reader import NotAStore, iter_file_records, list_segment_files
from rmqspec.impl.verify import verify_store

MAX_LISTED = 3  # findings named in one violation's text (the rest are counted)


@attrs.frozen
class StoreViolation:
    """One thing the pristine reader found wrong in the candidate's store."""

    code: str
    detail: str

    def render(self) -> str:
        return f"{self.code} {self.detail}"


@attrs.frozen
class StoreExpectation:
    """What the machine knows must be in the store (``closed``: right after a clean shutdown)."""

    closed: bool = False
    topics: Mapping[str, int] = attrs.field(factory=dict)
    offsets: Mapping[tuple[str, str, int], int] = attrs.field(factory=dict)  # (group, topic, queue) → answer
    delay_levels_ms: tuple[int, ...] = DEFAULT_DELAY_LEVELS_MS
    # lockstep: each surviving reference fork's delay progress (level → offset); None: not judged
    delay_progress: tuple[Mapping[int, int], ...] | None = None


def is_store(root: str | Path) -> bool:
    """Whether ``root`` holds a RocketMQ store (a ``commitlog`` directory) the probe can judge."""
    return (Path(root) / "commitlog").is_dir()


def probe_store(root: str | Path, expect: StoreExpectation) -> list[StoreViolation] | None:
    """The violations the pristine reader finds in the store at ``root``; ``None``: not judged."""
    root = Path(root)
    if not is_store(root):
        return None
    try:
        report = verify_store(root, delay_levels_ms=expect.delay_levels_ms)
    except NotAStore:
        return None
    out: list[StoreViolation] = []
    if report.findings:
        listed = "; ".join(f.line() for f in report.findings[:MAX_LISTED])
        more = len(report.findings) - MAX_LISTED
        out.append(StoreViolation("STORE_FORMAT", listed + (f" (+{more} more)" if more > 0 else "")))
    if not (root / "checkpoint").is_file():  # a wrong size is verify's BAD_CHECKPOINT
        out.append(StoreViolation("STORE_CHECKPOINT", "no checkpoint file in a store the broker opened "
                                  "(StoreCheckpoint maps its 4096 bytes when the store starts)"))
    if expect.closed:
        if (root / "abort").exists():
            out.append(StoreViolation("STORE_ABORT_LEFT", "the abort file survived a clean shutdown"))
        out += _judge_checkpoint(root)
        out += _judge_offsets(root, expect.offsets)
        out += _judge_topics(root, expect.topics)
        out += _judge_delay(root, expect.delay_progress)
    return out


def _last_timestamps(root: Path) -> tuple[int, int, int] | None:
    """(records, store ts of the last record, store ts of the last dispatched record); None when
    the CommitLog cannot be walked (``verify`` reports why)."""
    files, findings = list_segment_files(root, root / "commitlog")
    try:
        if findings:
            return None
        count, last, dispatched = 0, 0, 0
        for f in files:
            for item in iter_file_records(f, check_crc=False):
                if isinstance(item, DecodedRecord):
                    count += 1
                    last = item.store_ts
                    if not is_txn_hidden(item.sys_flag):
                        dispatched = item.store_ts
                elif isinstance(item, CorruptRecord):
                    return None
        return count, last, dispatched
    finally:
        for f in files:
            f.close()


def _judge_checkpoint(root: Path) -> list[StoreViolation]:
    walked = _last_timestamps(root)
    if walked is None:
        return []
    count, last, dispatched = walked
    try:
        cp = read_checkpoint(root / "checkpoint")
    except OSError as exc:
        return [StoreViolation("STORE_CHECKPOINT", f"unreadable: {exc}")]
    problems: list[str] = []
    if count == 0:
        if cp.physic_msg_timestamp or cp.logics_msg_timestamp:
            problems.append(f"timestamps set ({cp.physic_msg_timestamp}, {cp.logics_msg_timestamp}) "
                            "on an empty CommitLog")
    else:
        if cp.physic_msg_timestamp != last:
            problems.append(f"physicMsgTimestamp {cp.physic_msg_timestamp}, the last record was stored at {last}")
        if not dispatched <= cp.logics_msg_timestamp <= last:
            problems.append(f"logicsMsgTimestamp {cp.logics_msg_timestamp} outside [{dispatched}, {last}] "
                            "(the last dispatched record, the last record)")
    if cp.index_msg_timestamp != 0:
        problems.append(f"indexMsgTimestamp {cp.index_msg_timestamp}, no index file filled up")
    return [StoreViolation("STORE_CHECKPOINT", f"after a clean shutdown: {p}") for p in problems]


def _read_config(root: Path, name: str) -> tuple[object | None, str | None]:
    """The parsed ``config/name`` (None: absent) or why it cannot be read."""
    path = root / "config" / name
    if not path.is_file():
        return None, None
    try:
        return parse_fastjson(path.read_bytes().decode("utf-8")), None
    except (OSError, UnicodeDecodeError, ConfigFileError) as exc:
        return None, str(exc)


def _judge_offsets(root: Path, answered: Mapping[tuple[str, str, int], int]) -> list[StoreViolation]:
    if not answered:
        return []
    doc, error = _read_config(root, CONSUMER_OFFSET_FILE)
    if error is not None:
        return []  # verify reported it (STORE_FORMAT)
    try:
        table = decode_consumer_offsets(doc) if doc is not None else {}
    except ConfigFileError:
        return []
    out: list[StoreViolation] = []
    for (group, topic, queue_id), offset in sorted(answered.items()):
        stored = table.get(f"{topic}{TOPIC_GROUP_SEPARATOR}{group}", {}).get(queue_id)
        if stored is None and offset <= 0:
            continue  # never committed (or committed 0): the file need not name it
        if stored != offset:
            what = "missing" if stored is None else f"holds {stored}"
            out.append(StoreViolation("STORE_OFFSETS", f"{CONSUMER_OFFSET_FILE} {what} for {group} on "
                                      f"{topic}/{queue_id}; the broker answered {offset} before its shutdown"))
    return out[:1]


def _judge_topics(root: Path, topics: Mapping[str, int]) -> list[StoreViolation]:
    if not topics:
        return []
    doc, error = _read_config(root, TOPICS_FILE)
    if error is not None:
        return [StoreViolation("STORE_TOPICS", f"{TOPICS_FILE} unreadable: {error}")]
    try:
        table = decode_topics(doc) if doc is not None else {}
    except ConfigFileError as exc:
        return [StoreViolation("STORE_TOPICS", f"{TOPICS_FILE}: {exc}")]
    for topic, queues in sorted(topics.items()):
        if table.get(topic) != queues:
            what = "missing" if topic not in table else f"has {table[topic]} queues"
            return [StoreViolation("STORE_TOPICS", f"{TOPICS_FILE}: topic {topic} {what}; it was created "
                                   f"with {queues}")]
    return []


def _judge_delay(root: Path, alternatives: tuple[Mapping[int, int], ...] | None) -> list[StoreViolation]:
    if not alternatives:
        return []
    doc, error = _read_config(root, DELAY_OFFSET_FILE)
    if error is not None:
        return []  # verify reported it (STORE_FORMAT)
    try:
        table = decode_delay_offsets(doc) if doc is not None else {}
    except ConfigFileError:
        return []
    stored = {level: offset for level, offset in table.items() if offset}
    wanted = [{level: offset for level, offset in alt.items() if offset} for alt in alternatives]
    if stored in wanted:
        return []
    return [StoreViolation("STORE_DELAY_OFFSETS", f"{DELAY_OFFSET_FILE} holds {dict(sorted(stored.items()))}; "
                           f"the reference's delay progress at the shutdown is {dict(sorted(wanted[0].items()))}")]
