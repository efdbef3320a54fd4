"""The key index of a state's tombstones: what an incremental run's pull reads instead of ``closed/``.

Theory of operation
-------------------
``spark/pull.py``'s ``local`` must find the closed keys a day touches: a tombstone's
(trace, msg_key), (trace, txn_id) or (trace, topic) that the day names. The tombstones grow with the
history (3.9 M rows after seven bench days), but the keys they hold are far fewer (a key has its
send, stores, retries and first consumes). So each ``closed/`` file has an index beside it:

```
STATE_DIR/closed_keys/<name>   Parquet (trace, msg_key, topic, txn_id): the distinct values of the
                               valid rows of closed/<name> that have a msg_key (``trace`` as
                               ``driver_read.valid_rows`` decodes it); its schema metadata holds the
                               fingerprint of closed/<name> it was computed from: the
                               file's byte size and a hash of its Parquet footer (the
                               row count, and every column chunk's offsets and statistics)
```

An index is written with its tombstones file (``write``) and linked or written anew with it when
the next state takes the file over (``spark/incremental.py``'s ``OldClosed``). ``read`` takes an index
only while its recorded fingerprint is the file's; else (a state written before the index, or a
file replaced by hand) it computes the index from the file, so an index changes a pull's time,
not its rows. Spark never reads ``closed_keys/`` (the audit reads ``closed/`` only through the pulled
rows). Pyarrow reads, groups and writes; nothing here is hand-rolled.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from rmqspec.spark import driver_read

KEY_COLUMNS = ("msg_key", "topic", "txn_id")
_FINGERPRINT = b"rmqspec.tombstones_fingerprint"


def index_dir(closed_dir: Path) -> Path:
    """The index directory beside a state's ``closed/``."""
    return closed_dir.with_name("closed_keys")


def _index_file(tombstones: Path) -> Path:
    return index_dir(tombstones.parent) / tombstones.name


def of_rows(rows: pa.Table) -> pa.Table:
    """The index of ``rows`` (valid tombstones with ``trace`` and ``KEY_COLUMNS``)."""
    keyed = rows.filter(pc.is_valid(rows["msg_key"])).select(["trace", *KEY_COLUMNS])
    return keyed.group_by(["trace", *KEY_COLUMNS]).aggregate([])


def _fingerprint(tombstones: Path) -> bytes:
    """The file's byte size and a hash of its Parquet footer (read from the end: its length is
    the 4 bytes before the closing ``PAR1``)."""
    with tombstones.open("rb") as f:
        size = f.seek(0, os.SEEK_END)
        if size < 12:
            return str(size).encode()
        f.seek(size - 8)
        length = int.from_bytes(f.read(4), "little")
        f.seek(max(0, size - 8 - length))
        footer = f.read(length)
    return f"{size}:{hashlib.blake2b(footer, digest_size=16).hexdigest()}".encode()


def _computed(tombstones: Path) -> pa.Table | None:
    rows = driver_read.valid_rows([tombstones], KEY_COLUMNS)
    return None if rows is None else of_rows(rows)


def write(tombstones: Path) -> None:
    """The index of the file ``tombstones``, computed from the file as ``read`` would; none when the
    driver cannot read the file as the audit does (``read`` then says None, and the pull takes its
    Spark way)."""
    index = _computed(tombstones)
    if index is None:
        return
    target = _index_file(tombstones)
    target.parent.mkdir(exist_ok=True)
    pq.write_table(index.replace_schema_metadata({_FINGERPRINT: _fingerprint(tombstones)}), target)


def link_or_copy(source: Path, target: Path) -> None:
    """``target`` as a hard link to ``source`` (state files are never changed in place, only
    replaced), or a copy where a link cannot be made (another file system, links not allowed)."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def link(tombstones: Path, taken_over: Path) -> None:
    """``taken_over`` (``tombstones`` linked or copied into another state) gets its index."""
    source = _index_file(tombstones)
    if not source.exists():
        return
    target = _index_file(taken_over)
    target.parent.mkdir(exist_ok=True)
    link_or_copy(source, target)


def read(tombstones: Path) -> pa.Table | None:
    """The index of ``tombstones``: the stored one while it matches the file, else computed from it;
    None when the driver cannot read the file as the audit does."""
    stored = _index_file(tombstones)
    if stored.exists():
        index = pq.read_table(stored)
        if (index.schema.metadata or {}).get(_FINGERPRINT) == _fingerprint(tombstones):
            return index.replace_schema_metadata(None)
    return _computed(tombstones)


__all__ = ["KEY_COLUMNS", "index_dir", "link", "link_or_copy", "of_rows", "read", "write"]
