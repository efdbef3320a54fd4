"""Reading request ext fields the way ``RemotingCommand.decodeCommandCustomHeader`` does.

Theory of operation
-------------------
RocketMQ decodes a request's ext fields into a ``*RequestHeader`` object:
a ``@CFNotNull`` field that is absent throws ``RemotingCommandException("the
custom field <name> is null")``, an ``int``/``long`` field is
``Integer.parseInt`` / ``Long.parseLong`` of the text (a bad number throws),
a ``boolean`` is ``Boolean.parseBoolean`` (anything but "true" is false). The
exception reaches ``NettyRemotingAbstract``, which answers SYSTEM_ERROR with
the exception text as the remark. ``missing_field`` (driven by the request
table in ``codes.py``) and the readers here raise ``CommandError`` naming the
field; the dispatcher turns it into that SYSTEM_ERROR answer.
"""

from __future__ import annotations

import re

from rmqspec.remoting.codes import spec_of
from rmqspec.remoting.command import CommandError, RemotingCommand

INT32 = (-(1 << 31), (1 << 31) - 1)
INT64 = (-(1 << 63), (1 << 63) - 1)
_JAVA_INT = re.compile(r"[+-]?[0-9]+")


def missing_field(req: RemotingCommand) -> str | None:
    """The first required ext field of the request's code that is absent, or None."""
    spec = spec_of(req.code)
    if spec is None:
        return None
    missing = spec.missing(dict(req.ext_fields))
    return missing[0] if missing else None


def _number(name: str, text: str, bounds: tuple[int, int]) -> int:
    if not _JAVA_INT.fullmatch(text):
        raise CommandError(name, f"not an integer: {text!r}")
    value = int(text)
    if not bounds[0] <= value <= bounds[1]:
        raise CommandError(name, f"{text} is out of range for a Java {'int' if bounds == INT32 else 'long'}")
    return value


def get_int(req: RemotingCommand, name: str, default: int | None = None, *, bounds: tuple[int, int] = INT32) -> int:
    """An int field (``Integer.parseInt``); ``default`` when absent, else the field is required."""
    text = req.ext_fields.get(name)
    if text is None:
        if default is None:
            raise CommandError(name, "missing ext field")
        return default
    return _number(name, text, bounds)


def get_long(req: RemotingCommand, name: str, default: int | None = None) -> int:
    return get_int(req, name, default, bounds=INT64)


def opt_int(req: RemotingCommand, name: str) -> int | None:
    text = req.ext_fields.get(name)
    return None if text is None else _number(name, text, INT32)


def get_str(req: RemotingCommand, name: str) -> str:
    text = req.ext_fields.get(name)
    if text is None:
        raise CommandError(name, "missing ext field")
    return text


def get_bool(req: RemotingCommand, name: str) -> bool:
    return req.ext_bool(name)


def command_error_remark(exc: CommandError) -> str:
    """The SYSTEM_ERROR remark for a bad ext field, worded as RocketMQ's RemotingCommandException."""
    if exc.reason == "missing ext field":
        return f"RemotingCommandException: the custom field <{exc.field}> is null"
    return f"RemotingCommandException: the custom field <{exc.field}>: {exc.reason}"
