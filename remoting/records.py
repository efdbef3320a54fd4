"""Message bytes the server puts on the wire, and the batch body it reads.

Theory of operation
-------------------
Three bodies carry messages (SPEC §5's record layout, RocketMQ 4.9.8's
``MessageDecoder``):

- PULL_MESSAGE, VIEW_MESSAGE_BY_ID and CHECK_TRANSACTION_STATE bodies are
  stored records back to back in commitlog format. ``encode_stored`` writes one
  from the ``StoredMessage`` a ``Broker`` returns, with ``impl``'s codec. For
  a copy read back from an mmap store (born host = the store host with port 0,
  as ``impl.broker_store`` writes it) the bytes equal the bytes on disk; a
  check request's copy carries the real topic and queue, as
  ``MessageDecoder.encode`` of the re-put half does in
  ``Broker2Client.checkProducerTransactionState``.
- SEND_BATCH_MESSAGE's body is ``MessageDecoder.encodeMessages``: per
  message ``int32 total, int32 magic (0), int32 bodyCRC (0), int32 flag,
  int32 bodyLen + body, int16 propsLen + props``. ``decode_batch`` reads it and
  names the byte offset of anything malformed (``BodyError``).

Nothing here does I/O.
"""

from __future__ import annotations

import struct

import attrs

from rmqspec.impl.codec import Host, MessageRecord, prepare
from rmqspec.model.message import StoredMessage, decode_properties, encode_properties
from rmqspec.remoting.bodies import BodyError

_BATCH_HEAD = struct.Struct(">iiiii")  # total, magic, bodyCRC, flag, bodyLen
_I16 = struct.Struct(">h")


def encode_stored(msg: StoredMessage, store_host: Host, born_host: Host) -> bytes:
    """``msg`` as one commitlog record (its queue offset and commitlog offset in the header)."""
    record = MessageRecord(
        topic=msg.topic,
        queue_id=msg.queue_id,
        body=msg.body,
        properties=msg.properties,
        sys_flag=msg.sys_flag,
        born_ts=msg.born_ts,
        store_ts=msg.store_ts,
        born_host=born_host,
        reconsume_times=msg.reconsume_times,
        prepared_txn_offset=msg.prepared_txn_offset,
        flag=msg.flag,
    )
    return prepare(record, store_host).pack(msg.queue_offset, msg.commitlog_offset)


def encode_many(messages: tuple[StoredMessage, ...] | list[StoredMessage], store_host: Host,
                born_host: Host) -> bytes:
    return b"".join(encode_stored(m, store_host, born_host) for m in messages)


@attrs.frozen
class BatchItem:
    """One message of a SEND_BATCH_MESSAGE body."""

    flag: int
    body: bytes
    properties: dict[str, str]


def decode_batch(body: bytes) -> list[BatchItem]:
    """``MessageDecoder.decodeMessages`` of a batch body; ``BodyError`` names the offset of a bad item."""
    items: list[BatchItem] = []
    pos = 0
    while pos < len(body):
        if len(body) - pos < _BATCH_HEAD.size:
            raise BodyError(pos, f"batch item header needs {_BATCH_HEAD.size} bytes, {len(body) - pos} left")
        total, _magic, _crc, flag, body_len = _BATCH_HEAD.unpack_from(body, pos)
        if body_len < 0 or pos + _BATCH_HEAD.size + body_len + 2 > len(body):
            raise BodyError(pos + 16, f"batch item body length {body_len} runs past the batch")
        start = pos + _BATCH_HEAD.size
        payload = body[start:start + body_len]
        (props_len,) = _I16.unpack_from(body, start + body_len)
        props_at = start + body_len + 2
        if props_len < 0 or props_at + props_len > len(body):
            raise BodyError(start + body_len, f"batch item properties length {props_len} runs past the batch")
        end = props_at + props_len
        if total != end - pos:
            raise BodyError(pos, f"batch item total size {total} does not match its parts ({end - pos})")
        try:
            text = body[props_at:end].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BodyError(props_at + exc.start, "batch item properties are not UTF-8") from None
        items.append(BatchItem(flag, payload, decode_properties(text)))
        pos = end
    if not items:
        raise BodyError(0, "empty batch")
    return items


def encode_batch(items: list[BatchItem]) -> bytes:
    """``MessageDecoder.encodeMessages`` (what the Java client sends; used by tests and the bench)."""
    out = []
    for item in items:
        props = encode_properties(item.properties).encode("utf-8")
        total = _BATCH_HEAD.size + len(item.body) + 2 + len(props)
        out.append(_BATCH_HEAD.pack(total, 0, 0, item.flag, len(item.body)) + item.body
                   + _I16.pack(len(props)) + props)
    return b"".join(out)
