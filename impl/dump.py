"""``store dump``: every record of a store directory, in CommitLog order.

Reads the CommitLog files read-only (any file size) with ``reader.py`` and
yields ``DumpRow`` values for the records that match the filters, and
``Finding`` values for what cannot be read (a corrupt record, a foreign
file), so the caller can print the records and report the damage instead of
silently stopping. After a corrupt record whose header is intact the dump
continues with the next record; otherwise with the next file.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs

from rmqspec.impl.codec import CorruptRecord, DecodedRecord, End
from rmqspec.impl.reader import (
    Finding,
    NotAStore,
    iter_file_records,
    list_segment_files,
    rel,
)


@attrs.frozen
class DumpRow:
    record: DecodedRecord

    def to_dict(self) -> dict[str, Any]:
        r = self.record
        return {
            "commitlog_offset": r.commitlog_offset,
            "size": r.size,
            "topic": r.topic,
            "queue_id": r.queue_id,
            "queue_offset": r.queue_offset,
            "sys_flag": r.sys_flag,
            "born_ts": r.born_ts,
            "store_ts": r.store_ts,
            "reconsume_times": r.reconsume_times,
            "prepared_txn_offset": r.prepared_txn_offset,
            "body_crc": r.body_crc,
            "msg_id": r.msg_id,
            "tags": r.tags,
            "keys": list(r.keys),
            "properties": dict(r.properties),
            "body_b64": base64.b64encode(r.body).decode("ascii"),
        }

    def line(self) -> str:
        r = self.record
        body = r.body[:48]
        shown = repr(body)[2:-1] + ("…" if len(r.body) > 48 else "")
        return (
            f"{r.commitlog_offset} size={r.size} topic={r.topic} queue={r.queue_id} "
            f"qoffset={r.queue_offset} sysflag=0x{r.sys_flag:X} store_ts={r.store_ts} "
            f"msgId={r.msg_id} tags={r.tags} keys={','.join(r.keys)} "
            f"reconsume={r.reconsume_times} body[{len(r.body)}]={shown}"
        )


def dump_store(
    root: str | Path,
    *,
    topic: str | None = None,
    queue_id: int | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> Iterator[DumpRow | Finding]:
    """Yield the matching records and the findings met on the way; raises ``NotAStore``."""
    root = Path(root)
    cl = root / "commitlog"
    if not root.is_dir():
        raise NotAStore(f"{root}: no such directory")
    if not cl.is_dir():
        raise NotAStore(f"{root}: not a store (no commitlog directory)")
    files, findings = list_segment_files(root, cl)
    yield from findings
    total = sum(f.size for f in files)
    done = 0
    try:
        for index, f in enumerate(files):
            name = rel(root, f.path)
            for item in iter_file_records(f):
                if isinstance(item, CorruptRecord):
                    yield Finding(
                        item.code,
                        name,
                        item.offset - f.start,
                        f"commitlog offset {item.offset}: {item.reason}",
                    )
                elif isinstance(item, End):
                    if index != len(files) - 1:
                        yield Finding(
                            "TRUNCATED",
                            name,
                            item.commitlog_offset - f.start,
                            "file ends without an end-of-file blank record",
                        )
                elif (
                    isinstance(item, DecodedRecord)
                    and (topic is None or item.topic == topic)
                    and (queue_id is None or item.queue_id == queue_id)
                ):
                    yield DumpRow(item)
            done += f.size
            if on_progress is not None:
                on_progress(done, total)
    finally:
        for f in files:
            f.close()
