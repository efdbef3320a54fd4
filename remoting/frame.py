"""Frames of RocketMQ 4.9's remoting protocol: pure functions from commands to bytes and back.

Theory of operation
-------------------
One frame, big endian (``RemotingCommand.encode`` / ``decode``, ``NettyDecoder``)::

    int32 total  = 4 + header_len + body_len      (does not count itself)
    int32 mark   = (serialize_type << 24) | header_len
    header bytes (JSON or the binary ROCKETMQ layout), body bytes

``encode_frame`` builds one; ``decode_frame`` parses the bytes after the
total; ``FrameDecoder`` is the incremental parser a socket feeds (it owns no
socket). Netty's ``LengthFieldBasedFrameDecoder(16777216, 0, 4, 0, 4)`` bounds
``total + 4`` by 16 MiB; so do we. Every malformed input raises
``FrameError`` naming the byte offset (from the start of the stream for the
incremental decoder), the field and the reason, and leaves the decoder
unusable (the connection must be closed: RocketMQ closes it too).

Headers:

- JSON (type 0): the fastjson object of ``RemotingCommand``'s fields. We write
  keys sorted, as fastjson does for the Java client; we read any order,
  absent fields take RocketMQ's defaults (version 0, flag 0, language JAVA),
  ``language`` by name or ordinal, ext values of any JSON scalar become
  strings.
- ROCKETMQ (type 1, ``RocketMQSerializable``): int16 code, int8 language
  ordinal, int16 version, int32 opaque, int32 flag, int32 remark length +
  UTF-8, int32 ext length + entries (int16 key length, key, int32 value
  length, value).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from typing import Any

from rmqspec.remoting.command import LanguageCode, RemotingCommand, SerializeType

MAX_FRAME = 16 * 1024 * 1024  # NettyDecoder FRAME_MAX_LENGTH (com.rocketmq.remoting.frameMaxLength)

_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_BIN_FIXED = struct.Struct(">hbhii")  # code, language, version, opaque, flag


class FrameError(ValueError):
    """A frame that cannot be parsed: where (byte offset), which field, why."""

    def __init__(self, offset: int, field: str, reason: str) -> None:
        super().__init__(f"byte {offset}: {field}: {reason}")
        self.offset = offset
        self.field = field
        self.reason = reason


# ----------------------------------------------------------------------------------------------
# headers


def encode_json_header(cmd: RemotingCommand) -> bytes:
    header: dict[str, Any] = {"code": cmd.code}
    if cmd.ext_fields:
        header["extFields"] = dict(cmd.ext_fields)
    header["flag"] = cmd.flag
    header["language"] = cmd.language.name
    header["opaque"] = cmd.opaque
    if cmd.remark is not None:
        header["remark"] = cmd.remark
    header["serializeTypeCurrentRPC"] = SerializeType(cmd.serialize_type).name
    header["version"] = cmd.version
    return json.dumps(header, ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode("utf-8")


def _int_field(header: dict[str, Any], name: str, default: int, base: int) -> int:
    value = header.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise FrameError(base, f"header.{name}", f"not an integer: {value!r}")
    try:
        number = int(value)
    except ValueError:
        raise FrameError(base, f"header.{name}", f"not an integer: {value!r}") from None
    if not -(1 << 31) <= number < (1 << 31):
        raise FrameError(base, f"header.{name}", f"out of int32 range: {number}")
    return number


def _language(value: Any, base: int) -> LanguageCode:
    if value is None:
        return LanguageCode.JAVA
    try:
        if isinstance(value, str) and not value.isdigit():
            return LanguageCode[value]
        return LanguageCode(int(value))
    except (KeyError, ValueError):
        raise FrameError(base, "header.language", f"unknown language {value!r}") from None


def _ext_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def decode_json_header(data: bytes, base: int = 0) -> dict[str, Any]:
    try:
        header = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise FrameError(base + exc.start, "header", "JSON header is not UTF-8") from None
    except json.JSONDecodeError as exc:
        raise FrameError(base + exc.pos, "header", f"bad JSON header: {exc.msg}") from None
    if not isinstance(header, dict):
        raise FrameError(base, "header", f"JSON header is a {type(header).__name__}, not an object")
    ext = header.get("extFields") or {}
    if not isinstance(ext, dict):
        raise FrameError(base, "header.extFields", "not an object")
    remark = header.get("remark")
    return {
        "code": _int_field(header, "code", 0, base),
        "language": _language(header.get("language"), base),
        "version": _int_field(header, "version", 0, base),
        "opaque": _int_field(header, "opaque", 0, base),
        "flag": _int_field(header, "flag", 0, base),
        "remark": None if remark is None else str(remark),
        "ext_fields": {str(k): _ext_value(v) for k, v in ext.items() if v is not None},
    }


def encode_binary_header(cmd: RemotingCommand) -> bytes:
    for name, value, bits in (("code", cmd.code, 16), ("version", cmd.version, 16), ("opaque", cmd.opaque, 32),
                              ("flag", cmd.flag, 32)):
        if not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
            raise FrameError(0, f"header.{name}", f"{value} does not fit the ROCKETMQ header's int{bits}")
    parts = [_BIN_FIXED.pack(cmd.code, int(cmd.language), cmd.version, cmd.opaque, cmd.flag)]
    remark = (cmd.remark or "").encode("utf-8")
    parts.append(_I32.pack(len(remark)) if cmd.remark is not None else _I32.pack(0))
    parts.append(remark)
    ext = b"".join(
        _U16.pack(len(k)) + k + _I32.pack(len(v)) + v
        for k, v in ((k.encode("utf-8"), v.encode("utf-8")) for k, v in cmd.ext_fields.items())
    )
    parts.append(_I32.pack(len(ext)))
    parts.append(ext)
    return b"".join(parts)


def _take(data: bytes, pos: int, n: int, base: int, field: str) -> tuple[bytes, int]:
    if n < 0:
        raise FrameError(base + pos, field, f"negative length {n}")
    if pos + n > len(data):
        raise FrameError(base + pos, field, f"length {n} runs past the header end ({len(data) - pos} bytes left)")
    return data[pos:pos + n], pos + n


def _utf8(raw: bytes, base: int, pos: int, field: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FrameError(base + pos + exc.start, field, "not UTF-8") from None


def decode_binary_header(data: bytes, base: int = 0) -> dict[str, Any]:
    if len(data) < _BIN_FIXED.size + 8:
        raise FrameError(base, "header", f"ROCKETMQ header of {len(data)} bytes is shorter than the fixed "
                                         f"{_BIN_FIXED.size + 8}")
    code, language, version, opaque, flag = _BIN_FIXED.unpack_from(data, 0)
    pos = _BIN_FIXED.size
    (remark_len,) = _I32.unpack_from(data, pos)
    raw, pos2 = _take(data, pos + 4, remark_len, base, "header.remark")
    remark = _utf8(raw, base, pos + 4, "header.remark") if remark_len > 0 else None
    pos = pos2
    if pos + 4 > len(data):
        raise FrameError(base + pos, "header.extFields", "ext length missing")
    (ext_len,) = _I32.unpack_from(data, pos)
    ext_raw, end = _take(data, pos + 4, ext_len, base, "header.extFields")
    if end != len(data):
        raise FrameError(base + end, "header", f"{len(data) - end} bytes after the ext fields")
    ext: dict[str, str] = {}
    p, ebase = 0, base + pos + 4
    while p < len(ext_raw):
        if p + 2 > len(ext_raw):
            raise FrameError(ebase + p, "header.extFields", "truncated key length")
        (klen,) = _U16.unpack_from(ext_raw, p)
        key_raw, p2 = _take(ext_raw, p + 2, klen, ebase, "header.extFields key")
        if p2 + 4 > len(ext_raw):
            raise FrameError(ebase + p2, "header.extFields", "truncated value length")
        (vlen,) = _I32.unpack_from(ext_raw, p2)
        val_raw, p = _take(ext_raw, p2 + 4, vlen, ebase, "header.extFields value")
        ext[_utf8(key_raw, ebase, p + 2, "header.extFields key")] = _utf8(val_raw, ebase, p2 + 4,
                                                                         "header.extFields value")
    try:
        lang = LanguageCode(language)
    except ValueError:
        raise FrameError(base + 2, "header.language", f"unknown language ordinal {language}") from None
    return {"code": code, "language": lang, "version": version, "opaque": opaque, "flag": flag,
            "remark": remark, "ext_fields": ext}


# ----------------------------------------------------------------------------------------------
# frames


def encode_frame(cmd: RemotingCommand) -> bytes:
    """The whole frame, length prefix included, with the header in ``cmd.serialize_type``."""
    stype = SerializeType(cmd.serialize_type)
    header = encode_json_header(cmd) if stype is SerializeType.JSON else encode_binary_header(cmd)
    total = 4 + len(header) + len(cmd.body)
    if total + 4 > MAX_FRAME:
        raise FrameError(0, "total", f"frame of {total + 4} bytes exceeds the {MAX_FRAME}-byte limit")
    return _I32.pack(total) + _I32.pack((int(stype) << 24) | len(header)) + header + cmd.body


def decode_frame(data: bytes, base: int = 0) -> RemotingCommand:
    """Parse one frame *without* its length prefix (``data`` = mark + header + body)."""
    if len(data) < 4:
        raise FrameError(base, "mark", f"frame of {len(data)} bytes has no header-length field")
    (mark,) = _I32.unpack_from(data, 0)
    stype_raw = (mark >> 24) & 0xFF
    header_len = mark & 0xFFFFFF
    try:
        stype = SerializeType(stype_raw)
    except ValueError:
        raise FrameError(base, "mark", f"unknown serialize type {stype_raw}") from None
    if 4 + header_len > len(data):
        raise FrameError(base, "mark", f"header length {header_len} exceeds the frame ({len(data) - 4} bytes)")
    header_bytes = data[4:4 + header_len]
    hbase = base + 4
    fields = (decode_json_header(header_bytes, hbase) if stype is SerializeType.JSON
              else decode_binary_header(header_bytes, hbase))
    return RemotingCommand(body=bytes(data[4 + header_len:]), serialize_type=stype, **fields)


class FrameDecoder:
    """Incremental frame parser: ``feed`` bytes as they arrive, get complete commands back."""

    def __init__(self, max_frame: int = MAX_FRAME) -> None:
        self._buf = bytearray()
        self._consumed = 0  # stream offset of _buf[0]
        self.max_frame = max_frame

    @property
    def pending(self) -> int:
        """Bytes received that do not make a complete frame yet (non-zero at EOF = truncated)."""
        return len(self._buf)

    @property
    def offset(self) -> int:
        return self._consumed

    def feed(self, data: bytes) -> list[RemotingCommand]:
        self._buf += data
        return list(self._frames())

    def feed_each(self, data: bytes) -> Iterator[RemotingCommand]:
        """Like ``feed``, one frame at a time: the frames before a bad one are yielded before the error."""
        self._buf += data
        yield from self._frames()

    def _frames(self) -> Iterator[RemotingCommand]:
        while len(self._buf) >= 4:
            (total,) = _I32.unpack_from(self._buf, 0)
            if total < 4:
                raise FrameError(self._consumed, "total", f"frame length {total} is smaller than the 4-byte mark")
            if total + 4 > self.max_frame:
                raise FrameError(self._consumed, "total",
                                 f"frame length {total} exceeds the {self.max_frame}-byte limit")
            if len(self._buf) < 4 + total:
                return
            data = bytes(self._buf[4:4 + total])
            base = self._consumed + 4
            del self._buf[:4 + total]
            self._consumed += 4 + total
            yield decode_frame(data, base)
