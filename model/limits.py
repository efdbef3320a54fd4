"""The store's size limits, in RocketMQ 4.9.8's order, shared by both brokers.

Theory of operation
-------------------
``put_refusal`` answers what the real store answers for a record, or None:

1. S/DefaultMessageStore.checkMessage, on the message as the caller built it:
   a topic longer than 127 Java chars or a properties string longer than 32767
   Java chars (``String.length()``: UTF-16 code units) → MESSAGE_ILLEGAL;
2. S/CommitLog.asyncPutMessage then routes a delayed message (the string grows by
   REAL_TOPIC/REAL_QID) and MessageExtEncoder.encode refuses a properties string
   over 32767 UTF-8 bytes → PROPERTIES_SIZE_EXCEEDED, a body over maxMessageSize
   (4 MiB) → MESSAGE_ILLEGAL, a record over 4 MiB + 64 KiB → MESSAGE_ILLEGAL
   (headers are not counted against the 4 MiB: a 4 MiB body with properties is
   stored, verified with ``oracle.sh write``).

rmqspec adds two refusals where real 4.9.8 has a defect (docs/fidelity.md):
a topic of at most 127 chars but more than 127 UTF-8 bytes (the real store writes
``(byte) topicLength`` and its own reader then cannot parse the record) and a
record that cannot fit an empty CommitLog file (the real store answers PUT_OK and
writes nothing; reachable only with files smaller than 4 MiB + 64 KiB).
"""

from __future__ import annotations

from rmqspec.model.message import MAX_BODY_BYTES, java_length
from rmqspec.model.results import ResponseCode

MAX_TOPIC_CHARS = 127  # Byte.MAX_VALUE
MAX_PROPERTIES_LENGTH = 32767  # Short.MAX_VALUE, in chars (checkMessage) and in bytes (encode)
MAX_RECORD_BYTES = MAX_BODY_BYTES + 64 * 1024  # MessageExtEncoder: maxMessageBodySize + 64 KiB
END_FILE_MIN_BLANK_LENGTH = 8

Refusal = tuple[ResponseCode, str, str]  # (code, field, reason)


def check_message(topic: str, properties_text: str) -> Refusal | None:
    """DefaultMessageStore.checkMessage (before any routing)."""
    if java_length(topic) > MAX_TOPIC_CHARS:
        return ResponseCode.MESSAGE_ILLEGAL, "topic", f"{java_length(topic)} chars > {MAX_TOPIC_CHARS}"
    chars = java_length(properties_text)
    if chars > MAX_PROPERTIES_LENGTH:
        return ResponseCode.MESSAGE_ILLEGAL, "properties", f"{chars} chars > {MAX_PROPERTIES_LENGTH}"
    return None


def check_encode(topic: str, properties_text: str, body_len: int, record_size: int, file_size: int) -> Refusal | None:
    """MessageExtEncoder.encode (after routing), then rmqspec's two refusals."""
    props_bytes = len(properties_text.encode("utf-8", "surrogatepass"))
    if props_bytes > MAX_PROPERTIES_LENGTH:
        reason = f"{props_bytes} UTF-8 bytes > {MAX_PROPERTIES_LENGTH}"
        return ResponseCode.PROPERTIES_SIZE_EXCEEDED, "properties", reason
    if body_len > MAX_BODY_BYTES:
        return ResponseCode.MESSAGE_ILLEGAL, "body", f"{body_len} bytes > {MAX_BODY_BYTES}"
    if record_size > MAX_RECORD_BYTES:
        return ResponseCode.MESSAGE_ILLEGAL, "record", f"{record_size} bytes > {MAX_RECORD_BYTES}"
    topic_bytes = len(topic.encode("utf-8", "surrogatepass"))
    if topic_bytes > MAX_TOPIC_CHARS:
        return ResponseCode.MESSAGE_ILLEGAL, "topic", f"{topic_bytes} UTF-8 bytes > {MAX_TOPIC_CHARS} (rmqspec)"
    if record_size + END_FILE_MIN_BLANK_LENGTH > file_size:
        reason = f"{record_size} bytes + 8 > a commitlog file of {file_size} (rmqspec)"
        return ResponseCode.MESSAGE_ILLEGAL, "record", reason
    return None
