"""``MessageStore``: CommitLog + consume queues + checkpoint + abort file, with crash and recovery.

Theory of operation
-------------------
The store is RocketMQ's ``DefaultMessageStore`` reduced to what the semantics
need, single-threaded and deterministic:

- ``put(record)`` validates and encodes the record, assigns its queue offset
  (dense per (topic, queue); PREPARED and ROLLBACK records get 0 and no unit),
  appends it to the CommitLog, dispatches its consume-queue unit at once (so it
  is readable right after ``put``; with ``transient_store_pool`` the record goes
  to the file's write buffer and its unit waits for ``commit_real_time``, the
  CommitRealTimeService at a tick, or a ``flush``: ``model/committing.py``) and,
  with flush ``SYNC``, msyncs the
  CommitLog before returning when the put waits. The flush services
  (``flushing``: impl/flushing.py) run at the broker's ticks: SYNC's group
  commit takes what puts that did not wait left, ASYNC's FlushRealTimeService
  flushes by its page thresholds; ``flush()`` makes everything durable.
- ``flush()`` msyncs the CommitLog, then every consume queue, then writes the
  checkpoint (physic = storeTs of the last record flushed, logics = storeTs of
  the last record dispatched to a consume queue, index = 0, as a real 4.9.8
  store leaves them after a clean shutdown).
- ``close()`` flushes, writes the checkpoint and removes ``abort``.
- ``crash("kill")`` drops the process: every written byte survives (the
  page cache outlives the process) but the write buffers' uncommitted bytes, ``abort`` stays. ``crash("power")`` also
  zeroes every byte past each file's flushed position; ``torn=True`` keeps the
  first half of the first unflushed record (a torn record), an int keeps that
  many bytes (``torn_tail``: the unflushed records but the last whole, the last
  torn); ``keep_queues`` keeps the consume queues' unflushed units, which may
  then point past the CommitLog's recovered end.
- ``open`` recovers (``recovery.py``): normal or abnormal by the abort file.
  After an abnormal recovery everything it kept is msynced: a process crash
  leaves written bytes in the page cache, and a later flush (which starts at
  the recovered end) and checkpoint must not stand on bytes that are not on
  disk yet (RocketMQ marks them flushed without syncing them).

Durability guarantee (what the tests check): after any crash and reopen the
CommitLog is a prefix of what was appended that contains every record
acknowledged under SYNC, and every record appended before the last ``flush()``;
the consume queues index exactly that prefix.

Deviation (safety, not behaviour): RocketMQ assumes store timestamps grow.
When a record whose storeTs is at or below the durable checkpoint's
``min_timestamp()`` opens a new CommitLog file (a clock that went backwards),
the store first lowers the checkpoint's logics timestamp so abnormal recovery
can never start re-dispatching after units that were not yet flushed.

Single process: while open, byte 0 of a ``lock`` file in the root is held with an
exclusive open-file-description record lock, and the file holds the text ``lock``.
RocketMQ's ``DefaultMessageStore.start`` takes ``FileChannel.tryLock(0, 1, false)``,
a POSIX record lock (fcntl ``F_SETLK``) on Linux, and refuses to start without it;
an OFD lock conflicts with that one (so neither a RocketMQ broker nor a second
``MessageStore`` opens a store in use), and unlike a classic POSIX lock it is not
released when the process closes some other descriptor of the file. ``index/`` is
created empty (rmqspec builds no index files), as in a real store directory.

Durable effects: with a recorder installed for the root (``effects``), the
store marks every append (``append``: offset, size; and ``data``, the record's bytes,
when they went to a TransientStorePool's write buffer: no ``Write`` carries them
until a commit, and a kill takes them) and the end of recovery
(``recovered``: the CommitLog end it kept), besides the file effects its
components report.
"""

from __future__ import annotations

import fcntl
import os
import re
import struct
from collections.abc import Sequence
from pathlib import Path

import attrs

from rmqspec.impl import effects
from rmqspec.impl.checkpoint import CHECKPOINT_SIZE, Checkpoint, read_checkpoint, write_checkpoint
from rmqspec.impl.codec import (
    DEFAULT_DELAY_LEVELS_MS,
    CorruptRecord,
    DecodedRecord,
    MessageRecord,
    encode_host,
    is_txn_hidden,
    peek_size,
    prepare,
)
from rmqspec.impl.codec import tags_code as compute_tags_code
from rmqspec.impl.commitlog import CommitLog
from rmqspec.impl.configfiles import CONSUMER_OFFSET_FILE, DELAY_OFFSET_FILE
from rmqspec.impl.consumequeue import DEFAULT_CQ_FILE_SIZE, UNIT_SIZE, ConsumeQueue, CQUnit
from rmqspec.impl.flushing import FlushServices
from rmqspec.impl.mappedfile import StoreError, fsync_dir
from rmqspec.impl.recovery import RecoveryReport, recover
from rmqspec.model.committing import CommitRealTime, buffered_from
from rmqspec.model.limits import MAX_TOPIC_CHARS
from rmqspec.model.message import java_length

DEFAULT_COMMITLOG_FILE_SIZE = 1024 * 1024 * 1024
FLUSH_MODES = ("SYNC", "ASYNC")
CRASH_KINDS = ("kill", "power")
# struct flock (Linux, 64-bit off_t): F_WRLCK on byte 0 from SEEK_SET, l_pid 0 (an OFD lock needs it)
_LOCK_BYTE_0 = struct.pack("@hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET, 0, 1, 0)


def _positive(_inst: object, attr: attrs.Attribute, value: int) -> None:
    if not isinstance(value, int) or value <= 0:
        raise ValueError(f"{attr.name} must be a positive int, got {value!r}")


def _cq_size(inst: object, attr: attrs.Attribute, value: int) -> None:
    _positive(inst, attr, value)
    if value % 20:
        raise ValueError(f"{attr.name} must be a multiple of 20 (one unit), got {value}")


@attrs.frozen
class StoreConfig:
    """File sizes, flush policy, delay table and the store's address (msgId, storeHost)."""

    commitlog_file_size: int = attrs.field(default=DEFAULT_COMMITLOG_FILE_SIZE, validator=_positive)
    cq_file_size: int = attrs.field(default=DEFAULT_CQ_FILE_SIZE, validator=_cq_size)
    flush: str = attrs.field(default="ASYNC", validator=attrs.validators.in_(FLUSH_MODES))
    delay_levels_ms: tuple[int, ...] = attrs.field(default=DEFAULT_DELAY_LEVELS_MS, converter=tuple)
    store_host: str = "127.0.0.1"
    store_port: int = 10911
    check_crc_on_recover: bool = True
    # 5.2.0+ (model/versions.py): the stored properties string keeps its last separator
    properties_trailing_separator: bool = False
    # ASYNC: flushCommitLogLeastPages and flushCommitLogThoroughInterval (model/flushing.py)
    flush_least_pages: int = 4
    flush_thorough_interval_ms: int = 10_000
    flush_interval_ms: int = 500
    # TransientStorePool (ASYNC only; model/committing.py): write buffers committed by the CommitRealTimeService
    transient_store_pool: bool = False
    commit_least_pages: int = 4
    commit_thorough_interval_ms: int = 200
    commit_interval_ms: int = 200

    def __attrs_post_init__(self) -> None:
        if not self.delay_levels_ms or any(d < 0 for d in self.delay_levels_ms):
            raise ValueError(f"delay_levels_ms must be non-empty and ≥ 0, got {self.delay_levels_ms}")
        encode_host(self.store_host, self.store_port)
        if self.transient_store_pool and self.flush != "ASYNC":
            raise ValueError("transient_store_pool needs flush ASYNC")


@attrs.frozen
class PutResult:
    commitlog_offset: int
    queue_offset: int
    size: int
    store_ts: int
    msg_id: str


class MessageStore:
    """A RocketMQ 4.9 store directory, open for reading and appending."""

    def __init__(self, root: Path, config: StoreConfig) -> None:
        # Use MessageStore.open(); __init__ only sets fields.
        self.root = root
        self.config = config
        self.commitlog = CommitLog(root / "commitlog", config.commitlog_file_size)
        self._queues: dict[tuple[str, int], ConsumeQueue] = {}
        self._next: dict[tuple[str, int], int] = {}
        self._lock_fd: int | None = None
        self._closed = False
        self._durable_cp = Checkpoint()
        self._last_dispatched_ts = 0
        self.disk_full = False  # the clean service's flag (model/retention.py): puts refused
        self._cleaned_at = 0  # the commitlog min the consume queues were last cleaned at
        self._id_prefix = encode_host(config.store_host, config.store_port).hex().upper()
        self.recovery: RecoveryReport | None = None
        log = effects.active()
        self._effects = log if log is not None and log.rel(root) == "" else None
        # the GroupCommitService (SYNC) and the FlushRealTimeService (ASYNC): impl/flushing.py
        self.flushing = FlushServices(self.commitlog, config.flush, config.flush_least_pages,
                                      config.flush_thorough_interval_ms, config.flush_interval_ms, self._effects)
        # TransientStorePool: the CommitRealTimeService and the units of records not yet committed (the reput
        # dispatches only committed records): (key, queue offset, commitlog offset, size, tagsCode, storeTs)
        self.committer = CommitRealTime(config.commit_least_pages, config.commit_thorough_interval_ms,
                                        interval_ms=config.commit_interval_ms)
        self._undispatched: list[tuple[tuple[str, int], int, int, int, int, int]] = []
        self._buffered_writes: list[tuple[int, int]] = []  # (end, storeTs) of the records in write buffers

    # -- paths ------------------------------------------------------------------------------

    @property
    def abort_path(self) -> Path:
        return self.root / "abort"

    @property
    def checkpoint_path(self) -> Path:
        return self.root / "checkpoint"

    @property
    def config_dir(self) -> Path:
        return self.root / "config"

    @property
    def consumer_offset_path(self) -> Path:
        return self.config_dir / CONSUMER_OFFSET_FILE

    @property
    def delay_offset_path(self) -> Path:
        return self.config_dir / DELAY_OFFSET_FILE

    # -- open / recover -----------------------------------------------------------------------

    @classmethod
    def open(cls, root: str | os.PathLike[str], *, config: StoreConfig | None = None) -> MessageStore:
        """Open (creating if needed) and recover the store at ``root``.

        Raises ``StoreError`` for a directory that is locked, holds foreign files
        or files of another size.
        """
        store = cls(Path(root), config or StoreConfig())
        try:
            store._open()
        except BaseException:
            store._release(flush=False)
            raise
        return store

    def _open(self) -> None:
        root = self.root
        for d in (root, root / "commitlog", root / "consumequeue", root / "index", self.config_dir):
            try:
                d.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(d, None, f"cannot create directory: {exc.strerror}") from exc
        self._lock()
        abnormal = self.abort_path.exists()
        self.commitlog.files.load()
        self._load_queues()
        self._durable_cp = read_checkpoint(self.checkpoint_path)
        self.recovery = recover(
            self.commitlog,
            self._queues.values(),
            self._durable_cp,
            abnormal=abnormal,
            dispatch=self._dispatch,
            check_crc=self.config.check_crc_on_recover,
        )
        if abnormal:
            # What recovery kept may still sit only in the page cache (a process crash does not
            # write it back): make it durable before anything later is flushed and checkpointed
            # on top of it. RocketMQ marks it flushed without syncing it.
            self.commitlog.files.sync_all()
            for cq in self._queues.values():
                cq.files.sync_all()
        self._next = {key: cq.max_offset for key, cq in self._queues.items()}
        if self.config.transient_store_pool:  # files created from here on get a write buffer (model/committing.py)
            files = self.commitlog.files
            files.committed_where = self.commitlog.max_offset  # recovery's setCommittedWhere
            files.buffered_from = buffered_from(self.commitlog.max_offset, self.config.commitlog_file_size)
            last = files.last()
            if last is not None and last.start >= files.buffered_from and last.wrote == 0:
                last.give_buffer()  # an empty file at the recovered end: treated as new (fidelity TS2)
        for cq in self._queues.values():  # recoverTopicQueueTable: from min offset 0
            cq.correct_min(self.commitlog.min_offset, 0)
        last = self.recovery.last_store_ts
        self.commitlog.last_store_ts = last
        self._last_dispatched_ts = last
        if self._effects is not None:
            self._effects.mark("recovered", end=self.commitlog.max_offset)
        if not self.checkpoint_path.exists() or self.checkpoint_path.stat().st_size < CHECKPOINT_SIZE:
            write_checkpoint(self.checkpoint_path, self._durable_cp)  # missing, or cut short by a crash
        if self._effects is not None and not self.abort_path.exists():
            self._effects.add(effects.Create("abort"))
        self.abort_path.touch()
        fsync_dir(root)

    def _lock(self) -> None:
        path = self.root / "lock"
        if self._effects is not None and not path.exists():
            self._effects.add(effects.Create("lock"))
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.fcntl(fd, fcntl.F_OFD_SETLK, _LOCK_BYTE_0)
        except OSError as exc:
            os.close(fd)
            raise StoreError(path, None, "store is locked by another open MessageStore") from exc
        self._lock_fd = fd
        os.pwrite(fd, b"lock", 0)  # DefaultMessageStore.start writes "lock" into the file it locks
        if self._effects is not None:  # never read back: recorded as durable, so it adds no crash states
            self._effects.add(effects.Resize("lock", max(4, os.fstat(fd).st_size)))
            self._effects.add(effects.Write("lock", 0, b"lock"))
            self._effects.add(effects.Sync("lock", 0, 4, True))

    def _load_queues(self) -> None:
        base = self.root / "consumequeue"
        for topic_dir in sorted(base.iterdir()):
            topic = topic_dir.name
            if not topic_dir.is_dir() or java_length(topic) > MAX_TOPIC_CHARS or len(topic.encode()) > MAX_TOPIC_CHARS:
                raise StoreError(topic_dir, None, "not a consume-queue topic directory")
            for qdir in sorted(topic_dir.iterdir()):
                if not qdir.is_dir() or not re.fullmatch(r"0|[1-9][0-9]{0,9}", qdir.name):
                    raise StoreError(qdir, None, "not a consume-queue id directory")
                cq = ConsumeQueue(qdir, topic, int(qdir.name), self.config.cq_file_size)
                cq.files.load()
                self._queues[(topic, int(qdir.name))] = cq

    def _queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        key = (topic, queue_id)
        cq = self._queues.get(key)
        if cq is None:
            path = self.root / "consumequeue" / topic / str(queue_id)
            cq = ConsumeQueue(path, topic, queue_id, self.config.cq_file_size)
            self._queues[key] = cq
        return cq

    def _dispatch(self, record: DecodedRecord, commitlog_min: int | None = None) -> bool:
        """Build the consume-queue unit of ``record`` (CommitLogDispatcherBuildConsumeQueue). Only
        recovery calls it, with the CommitLog's min offset when it reads from the first kept record
        (``ConsumeQueue.redispatch``); ``_open`` then sets the last dispatched time from recovery's report."""
        if is_txn_hidden(record.sys_flag):
            return False
        cq = self._queue(record.topic, record.queue_id)
        code = compute_tags_code(record.topic, record.properties, record.store_ts, self.config.delay_levels_ms)
        return cq.redispatch(record.queue_offset, record.commitlog_offset, record.size, code, record.store_ts,
                            commitlog_min=commitlog_min)

    # -- writing -----------------------------------------------------------------------------

    def put(self, record: MessageRecord) -> PutResult:
        """Append ``record``; raises ``PutError`` (codec) for what RocketMQ refuses."""
        self._check_open()
        prepared = prepare(
            record,
            (self.config.store_host, self.config.store_port),
            self.config.delay_levels_ms,
            self.config.commitlog_file_size,
            trailing=self.config.properties_trailing_separator,
        )
        _offset, new_file = self.commitlog.next_position(prepared)
        if new_file:
            self._guard_checkpoint(record.store_ts)
        key = (record.topic, record.queue_id)
        hidden = is_txn_hidden(prepared.sys_flag)
        queue_offset = 0 if hidden else self._next.get(key, 0)
        offset = self.commitlog.append(prepared, queue_offset)
        buffered = self.commitlog.files.buffered_from
        if buffered is not None and offset >= buffered:
            self._buffered_writes.append((offset + prepared.size, record.store_ts))
        if self._effects is not None:
            held = self.commitlog.files.find(offset)
            if held is not None and held.pending is not None:  # in a write buffer: the file sees it at a commit
                data = held.content(offset - held.start, prepared.size)
                self._effects.mark("append", offset=offset, size=prepared.size, data=data)
            else:
                self._effects.mark("append", offset=offset, size=prepared.size)
        if not hidden:
            self._next[key] = queue_offset + 1
            props = record.properties
            code = compute_tags_code(record.topic, props, record.store_ts, self.config.delay_levels_ms)
            self._undispatched.append((key, queue_offset, offset, prepared.size, code, record.store_ts))
        self._dispatch_committed()
        if self.config.flush == "SYNC" and record.wait and not self.flushing.stalled(record.store_ts):
            self.commitlog.flush()
        return PutResult(
            commitlog_offset=offset,
            queue_offset=queue_offset,
            size=prepared.size,
            store_ts=record.store_ts,
            msg_id=f"{self._id_prefix}{offset:016X}",
        )

    def _dispatch_committed(self) -> None:
        """The reput: the consume-queue units of the records below the read position (all, without a pool)."""
        files = self.commitlog.files
        readable = files.readable_offset if self.config.transient_store_pool else files.max_offset
        if self._buffered_writes:
            self._buffered_writes = [w for w in self._buffered_writes if w[0] > readable]
        done = 0
        for key, queue_offset, offset, size, code, store_ts in self._undispatched:
            if offset + size > readable:
                break
            self._queue(*key).put(queue_offset, offset, size, code, store_ts)
            self._last_dispatched_ts = store_ts
            done += 1
        del self._undispatched[:done]

    def append_data(self, start: int, data: bytes) -> list[DecodedRecord]:
        """A SLAVE's replication write (DefaultMessageStore.appendToCommitLog → CommitLog.appendData, then the
        ReputMessageService): the master's commitlog bytes ``data`` from ``start`` (within one file) go to the
        write position — into a new file at ``start`` for an empty log (getLastMappedFile(startOffset)) — and the
        whole records they complete are dispatched to the consume queues at once; returns those records. Raises
        ``ValueError`` for bytes that do not continue the log (impl/ha.py's client refuses such a frame first)."""
        self._check_open()
        if self.config.transient_store_pool:
            raise ValueError("a replica's store takes no TransientStorePool")
        files = self.commitlog.files
        old_end = files.max_offset
        last = files.last()
        if last is None:
            if start % self.commitlog.file_size:
                raise ValueError(f"an empty commitlog starts at a file start, not at {start}")
            last, old_end = files.create_next(start), start
        elif start != old_end:
            raise ValueError(f"replicated bytes at {start} do not continue the commitlog at {old_end}")
        elif last.remaining == 0:
            last = files.create_next()
        if len(data) > last.remaining:
            raise ValueError(f"{len(data)} replicated bytes at {start} cross the end of file {last.start}")
        last.append(data)
        records: list[DecodedRecord] = []
        low = self.commitlog.min_offset  # a log that starts past 0: a queue's first unit after pre-blanks
        for item in self.commitlog.scan(old_end, limit=files.max_offset, check_crc=False):
            if not isinstance(item, DecodedRecord):
                break
            if not is_txn_hidden(item.sys_flag):
                self._next[(item.topic, item.queue_id)] = item.queue_offset + 1
                if self._dispatch(item, low) and low > 0:
                    self._queue(item.topic, item.queue_id).correct_min(low, 0)
            self._last_dispatched_ts = self.commitlog.last_store_ts = item.store_ts
            records.append(item)
        return records

    def commit_real_time(self, now: int) -> None:
        """The CommitRealTimeService's iterations at ``now`` (``model/committing.py``), then the reput."""
        if not self.config.transient_store_pool:
            return
        files = self.commitlog.files
        cutoff, due = now - self.committer.catch_up_ms, 0
        for end, store_ts in self._buffered_writes:  # committed since the last tick (model/committing.py)
            if end <= files.readable_offset:
                continue
            if store_ts > cutoff:
                break
            due = end
        if due:
            files.commit_through(due)
        least = self.committer.least_for(now)
        while files.commit_least(least):
            self.committer.last_commit, least = now, self.committer.least_pages
        self._dispatch_committed()

    def commit_all(self) -> None:
        """Every write buffer committed, then the reput (a flush, a clean shutdown)."""
        self.commitlog.files.commit_all()
        self._dispatch_committed()

    @property
    def committed_offset(self) -> int:
        """One past the last committed (readable) commitlog byte."""
        return self.commitlog.files.readable_offset

    def make_room(self, size: int) -> None:
        """The file a record of ``size`` bytes goes to, rolled to (its old file's blank end written) or created
        now, before anything else of the request is done; raises ``FileCreateFailed`` (CREATE_MAPEDFILE_FAILED)."""
        self._check_open()
        self.commitlog.reserve(size)

    def put_batch(self, records: Sequence[MessageRecord]) -> list[PutResult]:
        """Append ``records`` as one batch (CommitLog.putMessages): in one file, the next one when they do
        not fit before the last one's end marker."""
        self._check_open()
        host = (self.config.store_host, self.config.store_port)
        total = sum(prepare(r, host, self.config.delay_levels_ms, self.config.commitlog_file_size,
                            trailing=self.config.properties_trailing_separator).size for r in records)
        self.commitlog.reserve(total)
        return [self.put(r) for r in records]

    def _guard_checkpoint(self, store_ts: int) -> None:
        """Lower the durable checkpoint if ``store_ts`` would let recovery start too late."""
        cp = self._durable_cp
        if store_ts != 0 and store_ts <= cp.min_timestamp():
            lowered = attrs.evolve(cp, logics_msg_timestamp=store_ts + 2999)
            write_checkpoint(self.checkpoint_path, lowered)
            self._durable_cp = lowered

    def flush(self) -> None:
        """Make everything written so far durable (CommitLog, consume queues, checkpoint)."""
        self._check_open()
        self.flushing.stalled_until = None  # waited for the disk
        self.commit_all()
        self.commitlog.flush()
        for cq in self._queues.values():
            cq.flush()
        # physic: storeTs of the last record flushed; logics: of the last unit dispatched; index: 0,
        # as the real store leaves it (no index file ever filled up, see checkpoint.py).
        cp = Checkpoint(self.commitlog.last_store_ts, self._last_dispatched_ts, 0)
        if cp != self._durable_cp:
            write_checkpoint(self.checkpoint_path, cp)
            self._durable_cp = cp

    # -- reading --------------------------------------------------------------------------------

    def read(self, commitlog_offset: int) -> DecodedRecord:
        """The record at ``commitlog_offset``; raises ``CorruptRecord`` (code NOT_FOUND) if none."""
        self._check_open()
        return self.commitlog.read(commitlog_offset)

    def queue_units(self, topic: str, queue_id: int, start_offset: int, max_units: int) -> list[CQUnit]:
        self._check_open()
        cq = self._queues.get((topic, queue_id))
        return [] if cq is None else cq.units(start_offset, max_units)

    def read_queue(self, topic: str, queue_id: int, start_offset: int, max_units: int) -> list[DecodedRecord]:
        """The records of ``queue_units`` (same order)."""
        return [
            self.commitlog.read(u.commitlog_offset) for u in self.queue_units(topic, queue_id, start_offset, max_units)
        ]

    def offset_by_time(self, topic: str, queue_id: int, timestamp: int) -> int:
        """getOffsetInQueueByTime: 0 without a consume queue; store times read from the commitlog's record
        bytes (pickupStoreTimestamp: −1 below the commitlog's min offset or where no record starts)."""
        self._check_open()
        cq = self._queues.get((topic, queue_id))
        if cq is None:
            return 0

        def store_ts_at(offset: int, _size: int) -> int:
            if offset < self.commitlog.min_offset:
                return -1
            try:
                return self.commitlog.read(offset).store_ts
            except CorruptRecord:
                return -1

        return cq.offset_by_time(timestamp, self.commitlog.min_offset, store_ts_at)

    def has_queue(self, topic: str, queue_id: int) -> bool:
        """Whether (topic, queue) has a consume queue (it was ever written)."""
        return (topic, queue_id) in self._queues

    def min_offset(self, topic: str, queue_id: int) -> int:
        cq = self._queues.get((topic, queue_id))
        return 0 if cq is None else cq.min_logic

    # -- retention (model/retention.py's RetainingStore) ------------------------------------

    def queue_mins(self) -> dict[tuple[str, int], int]:
        return {key: cq.min_logic for key, cq in self._queues.items()}

    def removed(self, commitlog_offset: int) -> bool:
        """Whether the record at ``commitlog_offset`` went with a deleted commitlog file."""
        return commitlog_offset < self.commitlog.min_offset

    def queue_first_unit(self, topic: str, queue_id: int) -> int:
        """The first queue offset the queue's kept files hold (0 for a queue never written)."""
        cq = self._queues.get((topic, queue_id))
        return 0 if cq is None else cq.min_offset

    def unit_gone(self, topic: str, queue_id: int, offset: int) -> bool:
        """Whether the consume-queue file holding ``offset`` was deleted."""
        cq = self._queues.get((topic, queue_id))
        return cq is not None and offset * UNIT_SIZE < cq.files.min_offset

    def file_rolls(self) -> list[int | None]:
        """Each commitlog file's age reference: the store time of the next file's first record."""
        files = self.commitlog.files.files
        return [self.commitlog.first_store_ts(files[i + 1]) if i + 1 < len(files) else None
                for i in range(len(files))]

    def delete_files(self, count: int) -> None:
        """Delete the ``count`` oldest CommitLog files. The consume queues are synced first: a unit whose
        record goes must not be lost to a later power cut, which would let the queue's offsets be handed
        out again (RocketMQ flushes them on their own schedule: docs/fidelity.md R7)."""
        self._check_open()
        if count > 0:
            for cq in self._queues.values():
                cq.flush()
        self.commitlog.files.delete_first(count)

    def clean_queues(self) -> None:
        """CleanConsumeQueueService: only when the commitlog's min offset grew."""
        low = self.commitlog.min_offset
        if low <= self._cleaned_at:
            return
        self._cleaned_at = low
        for cq in self._queues.values():
            cq.delete_expired(low)

    def max_offset(self, topic: str, queue_id: int) -> int:
        """One past the last queue offset (0 for a queue never written)."""
        cq = self._queues.get((topic, queue_id))
        return 0 if cq is None else cq.max_offset

    def queues(self) -> list[tuple[str, int]]:
        """Every (topic, queue id) with a consume queue, sorted."""
        return sorted(self._queues)

    @property
    def commitlog_min_offset(self) -> int:
        return self.commitlog.min_offset

    @property
    def commitlog_max_offset(self) -> int:
        return self.commitlog.max_offset

    @property
    def flushed_offset(self) -> int:
        return self.commitlog.flushed_offset

    @property
    def closed(self) -> bool:
        return self._closed

    # -- shutdown --------------------------------------------------------------------------------

    def close(self) -> None:
        """Clean shutdown: flush, checkpoint, remove ``abort``."""
        if self._closed:
            return
        self.flush()
        self._release(flush=True)
        if self._effects is not None and self.abort_path.exists():
            self._effects.add(effects.Unlink("abort"))
        self.abort_path.unlink(missing_ok=True)
        fsync_dir(self.root)

    def crash(self, kind: str, torn: bool | int = False, keep_queues: bool = False) -> None:
        """Simulate ``kill`` (every written byte survives) or ``power`` (unflushed bytes lost;
        ``keep_queues``: but the consume queues' were written back, units past a torn CommitLog
        included)."""
        if kind not in CRASH_KINDS:
            raise ValueError(f"crash kind must be one of {CRASH_KINDS}, got {kind!r}")
        self._check_open()
        if kind == "power":
            keep = 0
            if torn:
                start = self.commitlog.flushed_offset
                unflushed = self.commitlog.files.readable_offset - start
                if isinstance(torn, bool):
                    # half of the first unflushed record (its header gives its size)
                    head = self.commitlog.files.read(start, 4)
                    size = int.from_bytes(head, "big", signed=True) if len(head) == 4 else 0
                    keep = size // 2 if size > 8 else 4
                else:
                    keep = int(torn)
                keep = min(keep, unflushed)
            self.commitlog.files.lose_unflushed(keep)
            for cq in self._queues.values() if not keep_queues else ():
                cq.files.lose_unflushed(0)
        self._release(flush=False)

    def torn_tail(self) -> int:
        """For ``crash("power", torn=n)``: the ``n`` that keeps every whole record past the flushed
        position of the first file holding unflushed bytes but the last, and half of that one (a
        power loss after the page cache wrote some of them back, tearing the last); 0 when
        nothing is unflushed."""
        f = next((f for f in self.commitlog.files.files if f.flushed < f.readable), None)
        if f is None:
            return 0
        pos, last = f.flushed, None
        while pos + 8 <= f.readable:
            size, _magic = peek_size(f.mm, pos)
            if size <= 8 or pos + size > f.readable:
                break
            last, pos = (pos, size), pos + size
        return 0 if last is None else last[0] - f.flushed + last[1] // 2

    def _release(self, *, flush: bool) -> None:
        self.commitlog.unblock_next_file()  # the fault ends with the process (model/filefault.py)
        self.commitlog.files.close(flush=flush)
        for cq in self._queues.values():
            cq.close(flush=flush)
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(self.root, None, "store is closed")

    def __enter__(self) -> MessageStore:
        return self

    def __exit__(self, *exc: object) -> None:
        if not self._closed:
            self.close()


def open_store(
    root: str | os.PathLike[str],
    *,
    commitlog_file_size: int = DEFAULT_COMMITLOG_FILE_SIZE,
    cq_file_size: int = DEFAULT_CQ_FILE_SIZE,
    flush: str = "ASYNC",
    delay_levels_ms: Sequence[int] = DEFAULT_DELAY_LEVELS_MS,
) -> MessageStore:
    """Shorthand for ``MessageStore.open(root, config=StoreConfig(...))``."""
    return MessageStore.open(
        root,
        config=StoreConfig(
            commitlog_file_size=commitlog_file_size,
            cq_file_size=cq_file_size,
            flush=flush,
            delay_levels_ms=tuple(delay_levels_ms),
        ),
    )
