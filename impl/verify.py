"""``store verify``: check a store directory byte for byte against RocketMQ 4.9's format.

Theory of operation
-------------------
Three passes, each producing ``Finding`` values (never exceptions):

1. **Consume-queue files** (``consumequeue/{topic}/{queue}/``): names and sizes,
   then each queue's units: a run of valid units (offset ≥ 0, size > 0; leading
   ``fillPreBlank`` units allowed) followed by zeros. A unit after a hole is
   ``CQ_GAP``. Each valid unit must point at a record start (``CQ_DANGLING``)
   of the right size, topic, queue id and queue offset, not a PREPARED or
   ROLLBACK record (``CQ_MISMATCH``), with the right tagsCode
   (``BAD_TAGS_CODE``). Units pointing below the CommitLog's first file are
   expired, not findings.
2. **CommitLog** (``commitlog/``): names (``BAD_FILE_NAME``) and sizes
   (``BAD_FILE_SIZE``); every record (``BAD_MAGIC``, ``BAD_CRC``, ``BAD_SIZE``,
   ``TRUNCATED``, ``BAD_PHYSICAL_OFFSET``, ``BAD_TOPIC``: not a topic a store may hold, a client's
   or a retry/DLQ topic of any group name, ``check_stored_topic``); blank records only
   at file ends (a non-last file ending in zeros is ``TRUNCATED``). The
   zero-filled region after the last record of the last file is normal. Per
   (topic, queue) the queue offsets of NOT/COMMIT records must be dense
   (``CQ_GAP``) and each must have its unit (``CQ_MISSING``). With the
   ``abort`` file present (the broker is running or crashed), a corrupt tail
   of the last file is reported as ``TRUNCATED`` and records after the last
   dispatched one are counted as ``undispatched`` instead of missing.
3. **Config files**: every ``config/*.json`` parses in fastjson's dialect
   (``BAD_JSON`` with the character offset); consumerOffset.json and
   delayOffset.json (and 5.x's timerEnqueueTimes.json and consumerOrderInfo.json) also have the right
   shape; the checkpoint is 4096 bytes (``BAD_CHECKPOINT``), and so is 5.x's
   ``config/timercheck`` when present (``BAD_CHECKPOINT``); 5.x's pop journal
   ``config/popCheckpoints.journal`` decodes frame by frame (``BAD_JOURNAL`` at the frame's byte offset).

Offsets in findings are byte offsets inside ``file`` (relative to the root).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

from rmqspec.impl.checkpoint import CHECKPOINT_SIZE
from rmqspec.impl.codec import (
    DEFAULT_DELAY_LEVELS_MS,
    Blank,
    CorruptRecord,
    DecodedRecord,
    End,
    is_txn_hidden,
    tags_code,
)
from rmqspec.impl.configfiles import (
    CONSUMER_OFFSET_FILE,
    DELAY_OFFSET_FILE,
    ConfigFileError,
    decode_consumer_offsets,
    decode_delay_offsets,
    parse_fastjson,
)
from rmqspec.impl.consumequeue import PRE_BLANK_SIZE, UNIT_SIZE
from rmqspec.impl.mappedfile import StoreError
from rmqspec.impl.pop_service import JOURNAL_FILE, ORDER_INFO_FILE, DiskPopState, decode_order_infos
from rmqspec.impl.reader import (
    CommitLogReader,
    Finding,
    NotAStore,
    ReadOnlyFile,
    iter_file_records,
    list_segment_files,
    rel,
)
from rmqspec.impl.timer_service import ENQUEUE_TIMES_FILE, TIMER_CHECK_FILE, TIMER_CHECK_SIZE, decode_enqueue_times
from rmqspec.model.message import InvalidMessage, check_stored_topic

_UNIT = struct.Struct(">qiq")
ProgressFn = Callable[[int, int], None]


@attrs.frozen
class VerifyReport:
    findings: tuple[Finding, ...]
    stats: dict[str, Any]

    @property
    def ok(self) -> bool:
        return not self.findings

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "findings": [f.to_dict() for f in self.findings],
            "stats": self.stats,
        }


@attrs.define
class _Queue:
    """One consume queue as read from disk."""

    topic: str
    queue_id: int
    files: list[ReadOnlyFile]
    min_offset: int = 0  # first queue offset with a (non-blank) unit
    end_offset: int = 0  # one past the last valid unit


def _check_store_dir(root: Path) -> None:
    if not root.exists():
        raise NotAStore(f"{root}: no such directory")
    if not root.is_dir():
        raise NotAStore(f"{root}: not a directory")
    cl = root / "commitlog"
    try:
        if not cl.is_dir():
            raise NotAStore(f"{root}: not a store (no commitlog directory)")
        next(iter(cl.iterdir()), None)
    except PermissionError as exc:
        raise NotAStore(f"{root}: cannot read: {exc.strerror}") from exc


def verify_store(
    root: str | Path,
    *,
    delay_levels_ms: Sequence[int] = DEFAULT_DELAY_LEVELS_MS,
    on_progress: ProgressFn | None = None,
) -> VerifyReport:
    """Verify the store at ``root``; raises ``NotAStore`` if it has no readable commitlog dir."""
    root = Path(root)
    _check_store_dir(root)
    findings: list[Finding] = []
    stats: dict[str, Any] = {
        "abort": (root / "abort").exists(),
        "commitlog_files": 0,
        "records": 0,
        "blank_records": 0,
        "commitlog_min_offset": 0,
        "commitlog_max_offset": 0,
        "consume_queues": 0,
        "cq_units": 0,
        "expired_units": 0,
        "undispatched": 0,
        "config_files": 0,
    }
    cl_files, cl_findings = list_segment_files(root, root / "commitlog")
    findings += cl_findings
    queues, cq_findings = _load_queues(root)
    findings += cq_findings
    total = sum(f.size for f in cl_files) + sum(f.size for q in queues for f in q.files)
    done = 0

    def progress(n: int) -> None:
        nonlocal done
        done += n
        if on_progress is not None:
            on_progress(done, total)

    reader = CommitLogReader(cl_files)
    try:
        stats["commitlog_files"] = len(cl_files)
        stats["consume_queues"] = len(queues)
        by_key = {(q.topic, q.queue_id): q for q in queues}
        max_dispatched = reader.min_offset
        for q in queues:
            max_dispatched = max(max_dispatched, _verify_queue(root, q, reader, delay_levels_ms, findings, stats))
            progress(sum(f.size for f in q.files))
        _verify_commitlog(root, cl_files, by_key, max_dispatched, delay_levels_ms, findings, stats, progress)
    finally:
        for f in cl_files:
            f.close()
        for q in queues:
            for f in q.files:
                f.close()
    _verify_config(root, findings, stats)
    return VerifyReport(tuple(findings), stats)


# -- consume queues ---------------------------------------------------------------------------


def _load_queues(root: Path) -> tuple[list[_Queue], list[Finding]]:
    base = root / "consumequeue"
    findings: list[Finding] = []
    queues: list[_Queue] = []
    if not base.is_dir():
        return queues, findings
    try:
        topics = sorted(base.iterdir())
    except OSError as exc:
        return queues, [Finding("UNREADABLE", rel(root, base), 0, f"cannot list: {exc.strerror}")]
    for tdir in topics:
        if not tdir.is_dir():
            findings.append(Finding("BAD_FILE_NAME", rel(root, tdir), 0, "not a topic directory"))
            continue
        try:
            check_stored_topic(tdir.name)
        except InvalidMessage as exc:
            findings.append(Finding("BAD_FILE_NAME", rel(root, tdir), 0, exc.reason))
            continue
        try:
            qdirs = sorted(tdir.iterdir())
        except OSError as exc:
            findings.append(Finding("UNREADABLE", rel(root, tdir), 0, f"cannot list: {exc.strerror}"))
            continue
        for qdir in qdirs:
            if not qdir.is_dir() or not qdir.name.isdigit() or len(qdir.name) > 10:
                findings.append(Finding("BAD_FILE_NAME", rel(root, qdir), 0, "not a queue-id directory"))
                continue
            files, f2 = list_segment_files(root, qdir, unit=UNIT_SIZE)
            findings += f2
            queues.append(_Queue(tdir.name, int(qdir.name), files))
    return queues, findings


def _verify_queue(
    root: Path,
    q: _Queue,
    reader: CommitLogReader,
    delay_levels_ms: Sequence[int],
    findings: list[Finding],
    stats: dict[str, Any],
) -> int:
    """Check one queue's units; return the highest CommitLog end offset it covers."""
    max_phys = 0
    ended_at: tuple[ReadOnlyFile, int] | None = None
    leading_blank = True
    first = True
    for f in q.files:
        name = rel(root, f.path)
        usable = f.size - f.size % UNIT_SIZE
        if first:
            q.min_offset = f.start // UNIT_SIZE
            first = False
        done = 0  # units before this byte position were checked (or lie in a hole: zeros)
        for lo, hi in _unit_ranges(f.extents, usable):
            if lo > done and ended_at is None:
                ended_at = (f, done)  # a hole: zero units
            for index, (clo, size, tags) in enumerate(_UNIT.iter_unpack(f.buf[lo:hi])):
                pos = lo + index * UNIT_SIZE
                queue_offset = (f.start + pos) // UNIT_SIZE
                if clo == 0 and size == 0 and tags == 0:
                    if ended_at is None:
                        ended_at = (f, pos)
                    continue
                if ended_at is not None:
                    hf, hpos = ended_at
                    findings.append(
                        Finding(
                            "CQ_GAP",
                            name,
                            pos,
                            f"unit for queue offset {queue_offset} after a hole at {rel(root, hf.path)}@{hpos}",
                        )
                    )
                    ended_at = None
                if leading_blank and clo == 0 and size == PRE_BLANK_SIZE and tags == 0:
                    q.min_offset = queue_offset + 1
                    continue
                leading_blank = False
                if clo < 0 or size <= 0:
                    findings.append(Finding("CQ_GAP", name, pos, f"invalid unit (offset {clo}, size {size})"))
                    ended_at = (f, pos)
                    continue
                q.end_offset = queue_offset + 1
                stats["cq_units"] += 1
                max_phys = max(max_phys, clo + size)
                if clo < reader.min_offset:
                    stats["expired_units"] += 1
                    continue
                _check_unit(q, name, pos, queue_offset, clo, size, tags, reader, delay_levels_ms, findings)
            done = hi
        if done < usable and ended_at is None:
            ended_at = (f, done)
        if ended_at is None and f.size % UNIT_SIZE:
            findings.append(Finding("TRUNCATED", name, usable, f"{f.size % UNIT_SIZE} bytes of a partial unit"))
    q.end_offset = max(q.end_offset, q.min_offset)
    return max_phys


def _unit_ranges(extents: list[tuple[int, int]], usable: int) -> list[tuple[int, int]]:
    """The unit-aligned byte ranges of ``[0, usable)`` that may hold non-zero units."""
    out: list[tuple[int, int]] = []
    for lo, hi in extents:
        lo -= lo % UNIT_SIZE
        hi = min(usable, hi + (-hi) % UNIT_SIZE)
        if lo >= hi:
            continue
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def _check_unit(
    q: _Queue,
    name: str,
    pos: int,
    queue_offset: int,
    clo: int,
    size: int,
    tags: int,
    reader: CommitLogReader,
    delay_levels_ms: Sequence[int],
    findings: list[Finding],
) -> None:
    try:
        record = reader.decode(clo)
    except CorruptRecord as exc:
        findings.append(
            Finding(
                "CQ_DANGLING",
                name,
                pos,
                f"queue offset {queue_offset} points at commitlog offset {clo}, "
                f"which is not a record start ({exc.reason})",
            )
        )
        return
    problems = []
    if record.size != size:
        problems.append(f"size {size} != record size {record.size}")
    if record.topic != q.topic:
        problems.append(f"record topic {record.topic!r}")
    if record.queue_id != q.queue_id:
        problems.append(f"record queue id {record.queue_id}")
    if record.queue_offset != queue_offset:
        problems.append(f"record queue offset {record.queue_offset}")
    if is_txn_hidden(record.sys_flag):
        problems.append(f"record sysFlag 0x{record.sys_flag:X} is PREPARED/ROLLBACK (no unit)")
    if problems:
        findings.append(
            Finding(
                "CQ_MISMATCH",
                name,
                pos,
                f"{q.topic}/{q.queue_id} queue offset {queue_offset} -> commitlog {clo}: " + "; ".join(problems),
            )
        )
        return
    expected = tags_code(record.topic, record.properties, record.store_ts, delay_levels_ms)
    if tags != expected:
        findings.append(
            Finding(
                "BAD_TAGS_CODE",
                name,
                pos,
                f"{q.topic}/{q.queue_id} queue offset {queue_offset}: tagsCode {tags}, expected {expected}",
            )
        )


# -- commitlog --------------------------------------------------------------------------------


def _verify_commitlog(
    root: Path,
    files: list[ReadOnlyFile],
    queues: dict[tuple[str, int], _Queue],
    max_dispatched: int,
    delay_levels_ms: Sequence[int],
    findings: list[Finding],
    stats: dict[str, Any],
    progress: Callable[[int], None],
) -> None:
    abort = stats["abort"]
    last_queue_offset: dict[tuple[str, int], int] = {}
    data_end = files[0].start if files else 0
    stats["commitlog_min_offset"] = data_end
    for index, f in enumerate(files):
        name = rel(root, f.path)
        is_last = index == len(files) - 1
        for item in iter_file_records(f):
            if isinstance(item, CorruptRecord):
                pos = item.offset - f.start
                code, reason = item.code, item.reason
                if abort and is_last and code != "BAD_PHYSICAL_OFFSET":
                    code = "TRUNCATED"
                    reason = f"torn tail of a store that was not shut down cleanly ({reason})"
                findings.append(Finding(code, name, pos, f"commitlog offset {item.offset}: {reason}"))
                if item.record is not None and item.record.has_queue_entry():
                    key = (item.record.topic, item.record.queue_id)
                    last_queue_offset[key] = item.record.queue_offset
                elif item.record is None:
                    last_queue_offset.clear()  # the rest of the file is unseen: no gap claims
                continue
            if isinstance(item, End):
                if not is_last:
                    findings.append(
                        Finding(
                            "TRUNCATED",
                            name,
                            item.commitlog_offset - f.start,
                            "file ends without an end-of-file blank record; the following files are unreachable",
                        )
                    )
                data_end = max(data_end, item.commitlog_offset)
                continue
            if isinstance(item, Blank):
                stats["blank_records"] += 1
                data_end = max(data_end, f.end)
                continue
            data_end = max(data_end, item.end_offset)
            _check_record(
                root,
                name,
                f,
                item,
                queues,
                last_queue_offset,
                max_dispatched,
                abort,
                findings,
                stats,
            )
        progress(f.size)
    stats["commitlog_max_offset"] = data_end


def _check_record(
    root: Path,
    name: str,
    f: ReadOnlyFile,
    record: DecodedRecord,
    queues: dict[tuple[str, int], _Queue],
    last_queue_offset: dict[tuple[str, int], int],
    max_dispatched: int,
    abort: bool,
    findings: list[Finding],
    stats: dict[str, Any],
) -> None:
    stats["records"] += 1
    pos = record.commitlog_offset - f.start
    try:
        check_stored_topic(record.topic)
    except InvalidMessage as exc:
        findings.append(Finding("BAD_TOPIC", name, pos, f"topic {record.topic!r}: {exc.reason}"))
        return
    if not record.has_queue_entry():
        return
    key = (record.topic, record.queue_id)
    prev = last_queue_offset.get(key)
    if prev is not None and record.queue_offset != prev + 1:
        findings.append(
            Finding(
                "CQ_GAP",
                name,
                pos,
                f"{record.topic}/{record.queue_id}: queue offset {record.queue_offset} follows {prev}",
            )
        )
    last_queue_offset[key] = record.queue_offset
    q = queues.get(key)
    if q is not None and record.queue_offset < q.min_offset:
        return  # its unit expired with an old consume-queue file
    if q is not None and record.queue_offset < q.end_offset:
        return  # the unit exists; pass 1 checked that it points here
    if abort and record.commitlog_offset >= max_dispatched:
        stats["undispatched"] += 1
        return
    where = "no consume queue" if q is None else f"consume queue ends at {q.end_offset}"
    findings.append(
        Finding(
            "CQ_MISSING",
            name,
            pos,
            f"{record.topic}/{record.queue_id} queue offset {record.queue_offset} has no unit ({where})",
        )
    )


# -- config files ------------------------------------------------------------------------------

_SHAPES: dict[str, Callable[[Any], Any]] = {
    CONSUMER_OFFSET_FILE: decode_consumer_offsets,
    DELAY_OFFSET_FILE: decode_delay_offsets,
    ENQUEUE_TIMES_FILE: decode_enqueue_times,
    ORDER_INFO_FILE: decode_order_infos,
}


def _verify_config(root: Path, findings: list[Finding], stats: dict[str, Any]) -> None:
    cp = root / "checkpoint"
    if cp.is_file():
        size = cp.stat().st_size
        if size != CHECKPOINT_SIZE:
            findings.append(Finding("BAD_CHECKPOINT", "checkpoint", 0, f"{size} bytes, expected {CHECKPOINT_SIZE}"))
    cdir = root / "config"
    if not cdir.is_dir():
        return
    timercheck = cdir / TIMER_CHECK_FILE
    if timercheck.is_file() and (size := timercheck.stat().st_size) != TIMER_CHECK_SIZE:
        name = f"config/{TIMER_CHECK_FILE}"
        findings.append(Finding("BAD_CHECKPOINT", name, 0, f"{size} bytes, expected {TIMER_CHECK_SIZE}"))
    journal = cdir / JOURNAL_FILE
    if journal.is_file():
        try:
            DiskPopState.load(cdir, None, 0, orders=False)
        except StoreError as exc:
            findings.append(Finding("BAD_JOURNAL", f"config/{JOURNAL_FILE}", exc.offset or 0, exc.reason))
    try:
        paths = sorted(p for p in cdir.iterdir() if p.is_file())
    except OSError as exc:
        findings.append(Finding("UNREADABLE", "config", 0, f"cannot list: {exc.strerror}"))
        return
    for path in paths:
        base = path.name.removesuffix(".bak")
        if not base.endswith(".json"):
            continue
        stats["config_files"] += 1
        name = rel(root, path)
        try:
            text = path.read_bytes().decode("utf-8")
        except OSError as exc:
            findings.append(Finding("UNREADABLE", name, 0, f"cannot read: {exc.strerror}"))
            continue
        except UnicodeDecodeError as exc:
            findings.append(Finding("BAD_JSON", name, exc.start, "not UTF-8"))
            continue
        if not text.strip():
            findings.append(Finding("BAD_JSON", name, 0, "file is empty"))
            continue
        try:
            doc = parse_fastjson(text)
            shape = _SHAPES.get(base)
            if shape is not None:
                shape(doc)
        except ConfigFileError as exc:
            findings.append(Finding("BAD_JSON", name, exc.offset, exc.reason))
