"""A broadcasting client's offsets file: RocketMQ 4.9.8's ``LocalFileOffsetStore`` on disk.

Facts (``javap -c`` of 4.9.8's LocalFileOffsetStore, OffsetSerializeWrapper and MixAll, and the text the
4.9.8 client writes, measured in ``tests/interop/test_send_modes_real.py``):

- the file is ``<localOffsetStoreDir>/<clientId>/<group>/offsets.json``; the directory is the system
  property ``rocketmq.client.localOffsetStoreDir`` (default ``~/.rocketmq_offsets``);
- its text is fastjson's pretty ``toJson(true)`` of ``{"offsetTable": {MessageQueue: offset}}``: each key is
  the MessageQueue written as a JSON object (brokerName, queueId, topic, tab-indented) — not JSON, since an
  object key is not a string — in the order a Java ConcurrentHashMap iterates them;
- ``persistAll`` reads the file, overwrites the entries of the queues it persists and keeps the others, then
  ``MixAll.string2File``: write ``offsets.json.tmp``, copy the current ``offsets.json`` (if any) to
  ``offsets.json.bak``, delete ``offsets.json``, rename the tmp to it;
- ``readLocalOffset`` reads ``offsets.json``; when it is missing, empty or does not parse it reads
  ``offsets.json.bak``; a ``.bak`` that does not parse is an error (MQClientException), a missing or empty
  one is no offsets at all (the client then starts at the queue's max offset, CONSUME_FROM_LAST_OFFSET).

So a client killed between the delete and the rename restarts from the ``.bak``: the offsets of the
persist before, and the messages since are consumed again (DUPLICATED per client, never LOST).

The parser is hand-written: fastjson's object-keyed maps are not JSON, and no Python library reads them.
Each ``{…}:offset`` entry is matched (a topic or broker name holds no brace), replaced by a string key,
and the rest must then be the JSON object ``{"offsetTable": {…}}``, so a damaged file is refused whole.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path

from rmqspec.model.javahash import java_string_hash
from rmqspec.model.message import MessageQueue

FILE_NAME = "offsets.json"
STORE_DIR_PROPERTY = "rocketmq.client.localOffsetStoreDir"
_ENTRY = re.compile(r"\{([^{}]*)\}\s*:\s*(-?\d+)")


class OffsetsFileError(ValueError):
    """An offsets file that does not parse (names the file and the reason)."""


def offsets_path(root: Path, client_id: str, group: str) -> Path:
    """Where a client keeps a group's offsets: ``<root>/<clientId>/<group>/offsets.json``."""
    return root / client_id / group / FILE_NAME


def _mq_hash(mq: MessageQueue) -> int:
    """``MessageQueue.hashCode`` (31-based over brokerName, queueId, topic), a signed 32-bit int."""
    h = 1
    for part in (java_string_hash(mq.broker_name), mq.queue_id, java_string_hash(mq.topic)):
        h = (31 * h + part) & 0xFFFFFFFF
    return h - 0x1_0000_0000 if h & 0x8000_0000 else h


def chm_order(keys: list[MessageQueue]) -> list[MessageQueue]:
    """``keys`` (in insertion order) as a ConcurrentHashMap of them iterates: by bin (the spread hash
    masked by the table size: 16, doubled while the count reaches three quarters of it), then in
    insertion order within a bin."""
    size = 16
    while len(keys) >= size * 3 // 4:
        size *= 2

    def bin_of(mq: MessageQueue) -> int:
        h = _mq_hash(mq) & 0xFFFFFFFF
        return ((h ^ (h >> 16)) & 0x7FFFFFFF) & (size - 1)

    return sorted(keys, key=bin_of)  # stable: insertion order within a bin


def render(table: Mapping[MessageQueue, int]) -> str:
    """``OffsetSerializeWrapper.toJson(true)`` of ``table`` (insertion order decides within a bin)."""
    entries = [
        "{\n"
        f"\t\t\t\"brokerName\":{json.dumps(mq.broker_name)},\n"
        f"\t\t\t\"queueId\":{mq.queue_id},\n"
        f"\t\t\t\"topic\":{json.dumps(mq.topic)}\n"
        f"\t\t}}:{table[mq]}"
        for mq in chm_order(list(table))
    ]
    return "{\n\t\"offsetTable\":{" + ",".join(entries) + "\n\t}\n}"


def parse(text: str, source: str = FILE_NAME) -> dict[MessageQueue, int]:
    """The offset table of an offsets file's text; ``OffsetsFileError`` when it is not one."""
    keys: list[tuple[MessageQueue, int]] = []

    def entry(match: re.Match[str]) -> str:
        try:
            fields = json.loads("{" + match.group(1) + "}")
        except ValueError as e:
            at = match.start()
            raise OffsetsFileError(f"{source}: a queue key at character {at} is not an object: {e}") from None
        topic, queue_id, broker = fields.get("topic"), fields.get("queueId"), fields.get("brokerName")
        if not isinstance(topic, str) or not isinstance(queue_id, int) or isinstance(queue_id, bool):
            raise OffsetsFileError(f"{source}: the queue key at character {match.start()} lacks topic or queueId")
        mq = MessageQueue(topic, queue_id) if not isinstance(broker, str) else MessageQueue(topic, queue_id, broker)
        keys.append((mq, int(match.group(2))))
        return f'"{len(keys) - 1}":0'

    try:
        shape = json.loads(_ENTRY.sub(entry, text))
    except ValueError as e:
        raise OffsetsFileError(f"{source}: not an offsets file: {e}") from None
    if not isinstance(shape, dict) or not isinstance(shape.get("offsetTable", {}), dict):
        raise OffsetsFileError(f"{source}: no offsetTable object")
    return dict(keys)


def write(path: Path, text: str) -> None:
    """``MixAll.string2File``: the tmp file, the current file copied to ``.bak``, then delete and rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp, bak = path.with_name(path.name + ".tmp"), path.with_name(path.name + ".bak")
    tmp.write_text(text, encoding="utf-8")
    if path.exists():
        bak.write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    path.unlink(missing_ok=True)
    os.replace(tmp, path)


def _text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (FileNotFoundError, UnicodeDecodeError):
        return None


def read(path: Path) -> dict[MessageQueue, int] | None:
    """``readLocalOffset``: the file's table; the ``.bak``'s when the file is missing, empty or damaged;
    None when neither exists or both are empty; ``OffsetsFileError`` when the ``.bak`` is damaged."""
    text = _text(path)
    if text:
        try:
            return parse(text, str(path))
        except OffsetsFileError:
            pass
    bak = path.with_name(path.name + ".bak")
    text = _text(bak)
    return parse(text, str(bak)) if text else None
