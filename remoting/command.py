"""``RemotingCommand``: one request, response or oneway message of RocketMQ's remoting protocol.

Theory of operation
-------------------
A command is a value (frozen attrs): the header fields RocketMQ 4.9's
``RemotingCommand`` carries (``code``, ``language``, ``version``, ``opaque``,
``flag``, ``remark``, ``extFields``) plus the ``body`` bytes and the header's
serialize type. ``flag`` bit 0 marks a response, bit 1 a oneway request;
``opaque`` is the request id a response echoes. ``extFields`` values are
strings on the wire (numbers and booleans too: ``"true"``/``"false"``);
``ext_int`` / ``ext_bool`` read them with errors that name the field.

Nothing here does I/O; ``frame.py`` turns commands into bytes and back.
Source: ``remoting/protocol/RemotingCommand.java`` (4.9.8).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

import attrs

FLAG_RESPONSE = 1  # RemotingCommand.RPC_TYPE bit 0
FLAG_ONEWAY = 2  # RemotingCommand.RPC_ONEWAY bit 1

# MQVersion.Version ordinal of V4_9_8: what the 4.9.8 client and broker put in ``version``.
VERSION_4_9_8 = 409
# From V4_9_1 (ordinal 401) the name server quotes the integer keys of brokerAddrs.
VERSION_STANDARD_JSON = 401


class SerializeType(enum.IntEnum):
    """The header encoding, the top byte of the frame's second int32."""

    JSON = 0
    ROCKETMQ = 1


class LanguageCode(enum.IntEnum):
    """``LanguageCode`` in declaration order (the ROCKETMQ header stores the ordinal)."""

    JAVA = 0
    CPP = 1
    DOTNET = 2
    PYTHON = 3
    DELPHI = 4
    ERLANG = 5
    RUBY = 6
    OTHER = 7
    HTTP = 8
    GO = 9
    PHP = 10
    OMS = 11
    RUST = 12  # 4.9.8's too; rocketmq-rust answers with it


class CommandError(ValueError):
    """A command whose header is well-formed but whose fields are not (missing or malformed ext field)."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


def _ext(value: Mapping[str, Any] | None) -> dict[str, str]:
    if not value:
        return {}
    return {str(k): _ext_text(v) for k, v in value.items() if v is not None}


def _ext_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@attrs.frozen
class RemotingCommand:
    code: int
    opaque: int = 0
    flag: int = 0
    language: LanguageCode = LanguageCode.JAVA
    version: int = VERSION_4_9_8
    remark: str | None = None
    ext_fields: Mapping[str, str] = attrs.field(factory=dict, converter=_ext)
    body: bytes = b""
    serialize_type: SerializeType = SerializeType.JSON

    @property
    def is_response(self) -> bool:
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & FLAG_ONEWAY)

    def ext(self, name: str, default: str | None = None) -> str | None:
        return self.ext_fields.get(name, default)

    def ext_str(self, name: str) -> str:
        value = self.ext_fields.get(name)
        if value is None:
            raise CommandError(name, "missing ext field")
        return value

    def ext_int(self, name: str, default: int | None = None) -> int:
        value = self.ext_fields.get(name)
        if value is None:
            if default is not None:
                return default
            raise CommandError(name, "missing ext field")
        try:
            return int(value)
        except ValueError:
            raise CommandError(name, f"not an integer: {value!r}") from None

    def ext_bool(self, name: str, default: bool = False) -> bool:
        value = self.ext_fields.get(name)
        if value is None:
            return default
        return value.strip().lower() == "true"  # Boolean.parseBoolean

    def describe(self) -> str:
        kind = "response" if self.is_response else ("oneway" if self.is_oneway else "request")
        return f"{kind} code={self.code} opaque={self.opaque}"


def request(code: int, ext: Mapping[str, Any] | None = None, body: bytes = b"", *, opaque: int = 0,
            oneway: bool = False, language: LanguageCode = LanguageCode.JAVA,
            version: int = VERSION_4_9_8, serialize_type: SerializeType = SerializeType.JSON) -> RemotingCommand:
    """A request (or oneway) command."""
    return RemotingCommand(code=int(code), opaque=opaque, flag=FLAG_ONEWAY if oneway else 0, language=language,
                           version=version, ext_fields=ext or {}, body=body, serialize_type=serialize_type)


def response_to(req: RemotingCommand, code: int, remark: str | None = None,
                ext: Mapping[str, Any] | None = None, body: bytes = b"") -> RemotingCommand:
    """The response to ``req``: same opaque, flag 1, answered in the request's serialize type."""
    return RemotingCommand(code=int(code), opaque=req.opaque, flag=FLAG_RESPONSE, language=LanguageCode.JAVA,
                           version=VERSION_4_9_8, remark=remark, ext_fields=ext or {}, body=body,
                           serialize_type=req.serialize_type)
