"""Request and response bodies: fastjson objects and messages in commitlog format.

Theory of operation
-------------------
JSON bodies are what fastjson writes for RocketMQ's ``RemotingSerializable``
classes. fastjson writes a map with integer keys without quotes
(``{"brokerAddrs":{0:"127.0.0.1:10911"}}``); the name server does so for a
request ``version`` below 401 (V4_9_1) unless ``acceptStandardJsonOnly`` is
set, and always in GET_BROKER_CLUSTER_INFO. No JSON library on PyPI reads that
dialect (json5 / pyjson5 also accept it, but would accept much else fastjson
never writes, and write quoted keys), so ``loads`` quotes bare integer keys
outside string literals and hands the text to the standard ``json`` module,
and ``dumps`` writes them bare when asked.

Message bodies (PULL_MESSAGE, VIEW_MESSAGE_BY_ID, CHECK_TRANSACTION_STATE)
are stored records back to back in commitlog format; ``decode_messages``
reuses ``impl``'s codec record by record (sizes and magic checked, the CRC
too) and names the byte offset of a bad record.
"""

from __future__ import annotations

import json
import re
from typing import Any

import attrs

from rmqspec.impl.codec import CorruptRecord, DecodedRecord, decode_at, peek_size

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_BARE_KEY = re.compile(r"([{,]\s*)(-?\d+)(\s*:)")


class BodyError(ValueError):
    """A body that is not what its request code carries (offset into the body, reason)."""

    def __init__(self, offset: int, reason: str) -> None:
        super().__init__(f"body byte {offset}: {reason}")
        self.offset = offset
        self.reason = reason


def _quote_bare_keys(text: str) -> str:
    out, pos = [], 0
    for m in _STRING.finditer(text):
        out.append(_BARE_KEY.sub(r'\1"\2"\3', text[pos:m.start()]))
        out.append(m.group(0))
        pos = m.end()
    out.append(_BARE_KEY.sub(r'\1"\2"\3', text[pos:]))
    return "".join(out)


def loads(body: bytes) -> Any:
    """Parse a fastjson body (bare integer keys allowed)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BodyError(exc.start, "JSON body is not UTF-8") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    try:
        return json.loads(_quote_bare_keys(text))
    except json.JSONDecodeError as exc:
        raise BodyError(exc.pos, f"bad JSON body: {exc.msg}") from None


def loads_object(body: bytes, what: str) -> dict[str, Any]:
    value = loads(body)
    if not isinstance(value, dict):
        raise BodyError(0, f"{what} body is a {type(value).__name__}, not an object")
    return value


def _bare(value: Any) -> str:
    if isinstance(value, dict):
        items = ",".join(
            (str(k) if isinstance(k, int) and not isinstance(k, bool) else json.dumps(str(k), ensure_ascii=False))
            + ":" + _bare(v) for k, v in value.items())
        return "{" + items + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_bare(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def dumps(value: Any, *, bare_int_keys: bool = False) -> bytes:
    """fastjson-style compact JSON; integer keys of maps bare when ``bare_int_keys``."""
    if bare_int_keys:
        return _bare(value).encode("utf-8")
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def decode_messages(body: bytes) -> list[DecodedRecord]:
    """Stored messages back to back in commitlog format (each one's commitlog offset from its header)."""
    records: list[DecodedRecord] = []
    pos = 0
    while pos < len(body):
        if len(body) - pos < 8:
            raise BodyError(pos, f"{len(body) - pos} trailing bytes, less than a record header")
        size, _magic = peek_size(body, pos)
        if size <= 0 or pos + size > len(body):
            raise BodyError(pos, f"record size {size} runs past the body ({len(body) - pos} bytes left)")
        try:
            rec = decode_at(body, pos, base_offset=0, limit=pos + size, check_physical=False)
        except CorruptRecord as exc:
            raise BodyError(pos, f"{exc.code}: {exc}") from None
        if not isinstance(rec, DecodedRecord):
            raise BodyError(pos, "not a message record")
        records.append(_at_physical(rec))
        pos += size
    return records


def _at_physical(rec: DecodedRecord) -> DecodedRecord:
    """The record as read from its own commitlog offset (the physical offset in its header)."""
    return attrs.evolve(rec, commitlog_offset=rec.physical_offset)
