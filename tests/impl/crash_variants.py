"""Known-bad variants of the store, for crash-state exploration (test-only subclasses and patches).

Each variant breaks one durability rule of the real code and is installed with
pytest's ``monkeypatch`` for the duration of one test; crash-state exploration
must report it (``tests/impl/test_crash_exploration.py``). ``VARIANTS`` maps a
name to (installer, the property that must fail, the workloads that exercise
it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import attrs
import pytest

from rmqspec.impl import broker as broker_module
from rmqspec.impl import effects
from rmqspec.impl import offsets as offsets_module
from rmqspec.impl import store as store_module
from rmqspec.impl.checkpoint import read_checkpoint
from rmqspec.impl.codec import (
    MESSAGE_MAGIC,
    SYSFLAG_POSITION,
    CorruptRecord,
    DecodedRecord,
    MessageRecord,
    decode_at,
    peek_size,
)
from rmqspec.impl.commitlog import CommitLog, ScanStop
from rmqspec.impl.configfiles import encode_consumer_offsets, write_fsync
from rmqspec.impl.consumequeue import ConsumeQueue
from rmqspec.impl.store import MessageStore, PutResult
from rmqspec.impl.timer_service import DiskTimerService
from rmqspec.model.message import BORNHOST_V6_FLAG
from rmqspec.model.timer import Deliver, SlotOf


class TrustingCommitLog(CommitLog):
    """Recovery trusts the checkpoint past a torn record.

    A record whose header says it was stored at or before the checkpoint's
    physic timestamp is taken as written, unvalidated (its totalSize is
    believed); validation starts at the first younger record. Records stored in the same millisecond as a flush
    but after it are not covered by the checkpoint, and a torn one is kept.
    """

    def scan(
        self, start: int, *, limit: int | None = None, check_crc: bool = True
    ) -> Iterator[DecodedRecord | ScanStop]:
        offset = start
        if limit is None:  # recovery's scan
            trusted = read_checkpoint(self.files.dir.parent / "checkpoint").physic_msg_timestamp
            while (f := self.files.find(offset)) is not None:
                pos = offset - f.start
                if pos + 8 > f.size:
                    break
                size, magic = peek_size(f.mm, pos)
                if magic != MESSAGE_MAGIC or size <= 0 or pos + size > f.size:
                    break
                sys_flag = int.from_bytes(f.mm[pos + SYSFLAG_POSITION : pos + SYSFLAG_POSITION + 4], "big")
                at = pos + 48 + (20 if sys_flag & BORNHOST_V6_FLAG else 8)
                if not 0 < int.from_bytes(f.mm[at : at + 8], "big", signed=True) <= trusted:
                    break
                try:  # trusted: its size is believed; decoded leniently for dispatch when possible
                    item = decode_at(
                        f.mm, pos, base_offset=f.start, check_crc=False, check_physical=False, check_tail=False
                    )
                    if isinstance(item, DecodedRecord):
                        yield item
                except CorruptRecord:
                    pass
                offset += size
        yield from super().scan(offset, limit=limit, check_crc=check_crc)


class UntruncatedQueue(ConsumeQueue):
    """A consume queue rebuilt without truncation: units past the recovered CommitLog end stay."""

    def truncate_physical(self, phys_end: int) -> None:
        return None


def save_offsets_in_place(path: Path, table: Mapping[str, Mapping[int, int]]) -> None:
    """consumerOffset.json written in place (truncate, write, fsync): no tmp file, no rename, no .bak."""
    text = encode_consumer_offsets(table)
    log = effects.active()
    rel = None if log is None else log.rel(path)
    if log is not None and rel is not None:
        log.mark("config_write", file=rel, text=text)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_fsync(path, text.encode("utf-8"))
    if log is not None and rel is not None:
        log.mark("config_done", file=rel)


class EarlyAckStore(MessageStore):
    """SYNC acknowledged before the flush: a put returns at once; its msync comes with the next put."""

    def put(self, record: MessageRecord) -> PutResult:
        sync = self.config.flush == "SYNC"
        if sync:
            self.commitlog.flush()  # the previous put's bytes, late
        real = self.config
        self.config = attrs.evolve(real, flush="ASYNC")
        try:
            return super().put(record)
        finally:
            self.config = real


class EagerTimerService(DiskTimerService):
    """The timer checkpoint's read time is made durable before the due copies are delivered."""

    def tick(self, now: int, max_offset: int, slot_of: SlotOf, deliver: Deliver) -> None:
        precision = self.settings.precision_ms
        if any(p.out < now // precision * precision for p in self.wheel):
            self.read_ms = max(self.read_ms, now // precision * precision)
            self.persist(now)
        super().tick(now, max_offset, slot_of, deliver)


class EagerCleanStore(MessageStore):
    """The consume queues' clean pass deletes every file but the last, whatever their units point at (not
    only those whose units all lie below the commitlog's min offset)."""

    def clean_queues(self) -> None:
        super().clean_queues()
        for cq in self._queues.values():
            cq.files.delete_first(max(0, len(cq.files.files) - 1))


def _eager_clean(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(broker_module, "MessageStore", EagerCleanStore)


def _trusting(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(store_module, "CommitLog", TrustingCommitLog)


def _untruncated(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(store_module, "ConsumeQueue", UntruncatedQueue)


def _in_place(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(offsets_module, "save_consumer_offsets", save_offsets_in_place)


def _early_ack(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(broker_module, "MessageStore", EarlyAckStore)


def _eager_timer(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(broker_module, "DiskTimerService", EagerTimerService)


@attrs.frozen
class Variant:
    install: Callable[[pytest.MonkeyPatch], None]
    property: str  # crashoracle property that must fail
    workloads: tuple[str, ...]


VARIANTS = {
    "recovery-trusts-checkpoint-past-torn-record": Variant(_trusting, "CommitLogIsPrefix", ("async-sends",)),
    "consume-queue-rebuilt-without-truncation": Variant(_untruncated, "QueuesIndexPrefix", ("async-sends",)),
    "offset-file-written-in-place": Variant(_in_place, "ConfigOnceWritten", ("offsets",)),
    "sync-acknowledged-before-flush": Variant(_early_ack, "PromisedRecordsSurvive", ("sync-sends",)),
    "timercheck-ahead-of-delivery": Variant(_eager_timer, "TimerCopiesFire", ("timer",)),
    "consume-queue-files-deleted-with-kept-records": Variant(_eager_clean, "QueuesIndexPrefix", ("retention",)),
}
