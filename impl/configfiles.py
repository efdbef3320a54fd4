"""``config/consumerOffset.json`` and ``config/delayOffset.json`` in RocketMQ's format.

Theory of operation
-------------------
RocketMQ serialises its offset tables with fastjson, which writes integer map
keys UNQUOTED: ``{"offsetTable":{"topic@group":{0:12,1:7}}}`` and
``{"offsetTable":{1:5,2:0}}``. That is not JSON, so rmqspec parses and writes
it itself: ``parse_fastjson`` accepts standard JSON plus unquoted integer (and
identifier) keys and single-quoted strings, and tolerates any whitespace;
``dump_fastjson`` writes unquoted integer keys. Unknown top-level fields (later
RocketMQ versions add ``dataVersion``) are ignored on read.

Writes follow ``MixAll.string2File`` (new content under the name, the
previous content kept as ``{file}.bak``), made crash-safe: write
``{file}.tmp`` and fsync it, rename the previous file to ``{file}.bak``, rename
the tmp file over the name, fsync the directory. No file is ever written in
place, so none can be torn; between the two renames the name is missing and a
reader falls back to ``.bak``, the previous complete content (RocketMQ writes
the ``.bak`` in place and fsyncs nothing). With a durable-effects recorder
installed (``effects``) each step is reported, between the marks
``config_write`` (the new text) and ``config_done``.
Reads follow ``ConfigManager.load``:
if the file is missing, empty or unparsable, fall back to ``{file}.bak``; a
missing ``.bak`` then means an empty table; an unparsable ``.bak`` is an error.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Generic, TypeVar

import attrs

from rmqspec.impl import effects
from rmqspec.impl.mappedfile import fsync_dir

CONSUMER_OFFSET_FILE = "consumerOffset.json"
DELAY_OFFSET_FILE = "delayOffset.json"
TOPIC_GROUP_SEPARATOR = "@"

T = TypeVar("T")


class ConfigFileError(ValueError):
    """A config file that cannot be parsed: ``offset`` is the character offset of the problem."""

    def __init__(self, path: str | os.PathLike[str] | None, offset: int, reason: str) -> None:
        where = f"{path}: " if path is not None else ""
        super().__init__(f"{where}character {offset}: {reason}")
        self.path = None if path is None else str(path)
        self.offset = offset
        self.reason = reason


# -- the fastjson dialect -------------------------------------------------------------------

_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_IDENT = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_WS = re.compile(r"\s*")
_PLAIN_DQ = re.compile(r'[^"\\]*')
_PLAIN_SQ = re.compile(r"[^'\\]*")
_ESCAPES = {
    '"': '"',
    "'": "'",
    "\\": "\\",
    "/": "/",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
}


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.surrogates = False  # a \u escape produced half of a surrogate pair

    def fail(self, reason: str, pos: int | None = None) -> ConfigFileError:
        return ConfigFileError(None, self.pos if pos is None else pos, reason)

    def ws(self) -> None:
        self.pos = _WS.match(self.text, self.pos).end()  # type: ignore[union-attr]

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def expect(self, ch: str) -> None:
        self.ws()
        if self.peek() != ch:
            found = self.peek() or "end of input"
            raise self.fail(f"expected {ch!r}, found {found!r}")
        self.pos += 1

    def document(self) -> Any:
        value = self.value()
        self.ws()
        if self.pos != len(self.text):
            raise self.fail(f"unexpected {self.peek()!r} after the document")
        return value

    def value(self) -> Any:
        self.ws()
        ch = self.peek()
        if ch == "{":
            return self.obj()
        if ch == "[":
            return self.array()
        if ch and ch in "\"'":
            return self.string()
        m = _NUMBER.match(self.text, self.pos)
        if m:
            self.pos = m.end()
            token = m.group(0)
            return float(token) if any(c in token for c in ".eE") else int(token)
        for word, val in (("true", True), ("false", False), ("null", None)):
            if self.text.startswith(word, self.pos):
                self.pos += len(word)
                return val
        raise self.fail(f"unexpected {ch!r}" if ch else "unexpected end of input")

    def key(self) -> Any:
        self.ws()
        ch = self.peek()
        if ch in "\"'" and ch:
            return self.string()
        m = _NUMBER.match(self.text, self.pos)
        if m and not any(c in m.group(0) for c in ".eE"):
            self.pos = m.end()
            return int(m.group(0))
        m = _IDENT.match(self.text, self.pos)
        if m:
            self.pos = m.end()
            return m.group(0)
        raise self.fail(f"expected a key, found {ch!r}" if ch else "unexpected end of input")

    def obj(self) -> dict[Any, Any]:
        self.pos += 1
        result: dict[Any, Any] = {}
        self.ws()
        if self.peek() == "}":
            self.pos += 1
            return result
        while True:
            k = self.key()
            self.expect(":")
            result[k] = self.value()
            self.ws()
            ch = self.peek()
            if ch == ",":
                self.pos += 1
                continue
            if ch == "}":
                self.pos += 1
                return result
            raise self.fail(f"expected ',' or '}}', found {ch!r}" if ch else "unterminated object")

    def array(self) -> list[Any]:
        self.pos += 1
        result: list[Any] = []
        self.ws()
        if self.peek() == "]":
            self.pos += 1
            return result
        while True:
            result.append(self.value())
            self.ws()
            ch = self.peek()
            if ch == ",":
                self.pos += 1
                continue
            if ch == "]":
                self.pos += 1
                return result
            raise self.fail(f"expected ',' or ']', found {ch!r}" if ch else "unterminated array")

    def string(self) -> str:
        quote = self.text[self.pos]
        start = self.pos
        self.pos += 1
        out: list[str] = []
        text = self.text
        plain = _PLAIN_DQ if quote == '"' else _PLAIN_SQ
        while True:
            m = plain.match(text, self.pos)  # a run of ordinary characters
            if m.end() > self.pos:  # type: ignore[union-attr]
                out.append(m.group(0))  # type: ignore[union-attr]
                self.pos = m.end()  # type: ignore[union-attr]
            if self.pos >= len(text):
                raise self.fail("unterminated string", start)
            ch = text[self.pos]
            if ch == quote:
                self.pos += 1
                return "".join(out)
            # a backslash
            esc = text[self.pos + 1 : self.pos + 2]
            if esc == "u":
                digits = text[self.pos + 2 : self.pos + 6]
                if not re.fullmatch(r"[0-9a-fA-F]{4}", digits):
                    raise self.fail("bad \\u escape")
                code = int(digits, 16)
                if 0xD800 <= code <= 0xDFFF:
                    self.surrogates = True
                out.append(chr(code))
                self.pos += 6
                continue
            if esc not in _ESCAPES:
                raise self.fail(f"bad escape \\{esc}")
            out.append(_ESCAPES[esc])
            self.pos += 2


def parse_fastjson(text: str) -> Any:
    """Parse fastjson output (JSON plus unquoted integer keys). Raises ``ConfigFileError``."""
    fast = _parse_fast(text)
    if fast is not _NO_FAST_PATH:
        return fast
    p = _Parser(text)
    result = p.document()
    # Surrogate pairs written as two \u escapes become one character.
    return _join_surrogates(result) if p.surrogates else result


# The fast path: quote the bare keys outside strings, then the C JSON decoder. Anything it
# does not take (single quotes, odd whitespace, control characters, errors) goes to _Parser,
# which gives the same value or the precise error.
_NO_FAST_PATH = object()
_INT_KEY = "\ufdd0"  # a noncharacter marks keys that were bare integers
_CHUNKS = re.compile(r'"(?:[^"\\]|\\.)*"|[^"]+', re.S)
_BARE_KEY = re.compile(r"([{,]\s*)(-?[0-9]+|[A-Za-z_$][A-Za-z0-9_$]*)(\s*:)")
_DECODER = json.JSONDecoder(object_pairs_hook=lambda pairs: _fast_object(pairs), parse_constant=lambda c: _reject(c))


def _reject(constant: str) -> Any:
    raise ValueError(f"{constant} is not a fastjson number")


def _fast_object(pairs: list[tuple[str, Any]]) -> dict[Any, Any]:
    return {(int(k[1:]) if k[:1] == _INT_KEY else k): v for k, v in pairs}


def _bare_key(m: re.Match[str]) -> str:
    key = m.group(2)
    marked = _INT_KEY + key if key[0] in "-0123456789" else key
    return f'{m.group(1)}"{marked}"{m.group(3)}'


def _parse_fast(text: str) -> Any:
    if _INT_KEY in text or "\\ufdd0" in text.lower():
        return _NO_FAST_PATH
    out = []
    consumed = 0
    for m in _CHUNKS.finditer(text):
        if m.start() != consumed:
            return _NO_FAST_PATH
        chunk = m.group(0)
        if chunk[0] != '"':
            if "'" in chunk:
                return _NO_FAST_PATH
            chunk = _BARE_KEY.sub(_bare_key, chunk)
        out.append(chunk)
        consumed = m.end()
    if consumed != len(text):
        return _NO_FAST_PATH
    try:
        return _DECODER.decode("".join(out))
    except ValueError:
        return _NO_FAST_PATH


def _join_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16") if _has_surrogate(value) else value
    if isinstance(value, dict):
        return {_join_surrogates(k): _join_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_join_surrogates(v) for v in value]
    return value


def _has_surrogate(s: str) -> bool:
    return any("\ud800" <= c <= "\udfff" for c in s)


def _dump_string(s: str) -> str:
    out = ['"']
    for ch in s:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ord(ch) < 0x20:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def dump_fastjson(value: Any, indent: int = 0) -> str:
    """Write ``value`` as fastjson's pretty format does: tabs, integer keys unquoted."""
    pad = "\t" * indent
    if isinstance(value, Mapping):
        if not value:
            return "{}"
        items = []
        for k, v in value.items():
            key = str(k) if isinstance(k, int) and not isinstance(k, bool) else _dump_string(str(k))
            items.append(f"{pad}\t{key}:{dump_fastjson(v, indent + 1)}")
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return _dump_string(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(dump_fastjson(v, indent + 1) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} to a config file")


# -- files ------------------------------------------------------------------------------------


def write_atomically(path: Path, text: str) -> None:
    """``MixAll.string2File`` made crash-safe: tmp + fsync, previous renamed to ``.bak``, tmp renamed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    bak = path.with_name(path.name + ".bak")
    log = effects.active()
    rel = None if log is None else log.rel(path)
    if log is not None and rel is not None:
        log.mark("config_write", file=rel, text=text)
    write_fsync(tmp, text.encode("utf-8"))
    if path.exists():
        os.replace(path, bak)
        if log is not None and rel is not None:
            log.add(effects.Rename(rel, rel + ".bak"))
    os.replace(tmp, path)
    if log is not None and rel is not None:
        log.add(effects.Rename(rel + ".tmp", rel))
    fsync_dir(path.parent)
    if log is not None and rel is not None:
        log.mark("config_done", file=rel)


def write_fsync(path: Path, data: bytes) -> None:
    """Write ``data`` as the whole content of ``path`` (``O_TRUNC``) and fsync it."""
    tap = effects.tap_for(path)
    if tap is not None:
        existed = path.exists()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        if tap is not None:
            if existed:
                tap.resize(0)
            else:
                tap.create()
            if data:
                tap.resize(len(data))
                tap.write(0, data)
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        os.fsync(fd)
        if tap is not None:
            tap.sync(0, len(data), meta=True)
    finally:
        os.close(fd)


@attrs.frozen
class Loaded(Generic[T]):
    """A loaded table, the file it came from (None: neither existed), why the main one was skipped."""

    table: T
    source: Path | None
    main_error: ConfigFileError | None = None


def load_with_backup(path: Path, decode: Callable[[Any], T], empty: Callable[[], T]) -> Loaded[T]:
    """``ConfigManager.load``: the file, else ``{file}.bak``, else an empty table."""
    main_error: ConfigFileError | None = None
    try:
        text = _read_text(path)
        if text:
            return Loaded(_decode_file(path, text, decode), path)
        if text is not None:
            main_error = ConfigFileError(path, 0, "file is empty")
    except ConfigFileError as exc:
        main_error = exc
    bak = path.with_name(path.name + ".bak")
    text = _read_text(bak)
    if not text:
        return Loaded(empty(), None, main_error)
    return Loaded(_decode_file(bak, text, decode), bak, main_error)


def _read_text(path: Path) -> str | None:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigFileError(path, 0, f"cannot read: {exc.strerror}") from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigFileError(path, exc.start, "not UTF-8") from exc


def _decode_file(path: Path, text: str, decode: Callable[[Any], T]) -> T:
    try:
        return decode(parse_fastjson(text))
    except ConfigFileError as exc:
        raise ConfigFileError(path, exc.offset, exc.reason) from exc


def _offset_table(doc: Any, what: str) -> Mapping[Any, Any]:
    if not isinstance(doc, dict):
        raise ConfigFileError(None, 0, f"{what}: top level is not an object")
    table = doc.get("offsetTable", {})
    if not isinstance(table, dict):
        raise ConfigFileError(None, 0, f"{what}: offsetTable is not an object")
    return table


def _int_key(key: Any, what: str) -> int:
    if isinstance(key, int) and not isinstance(key, bool):
        return key
    if isinstance(key, str) and re.fullmatch(r"-?[0-9]+", key.strip()):
        return int(key)
    raise ConfigFileError(None, 0, f"{what}: key {key!r} is not an integer")


def _int_value(value: Any, what: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise ConfigFileError(None, 0, f"{what}: value {value!r} is not an integer")


# -- consumerOffset.json ------------------------------------------------------------------------


def decode_consumer_offsets(doc: Any) -> dict[str, dict[int, int]]:
    """``{"offsetTable":{"topic@group":{queue:offset}}}`` → {"topic@group": {queue: offset}}."""
    table = _offset_table(doc, CONSUMER_OFFSET_FILE)
    result: dict[str, dict[int, int]] = {}
    for key, queues in table.items():
        if not isinstance(key, str) or TOPIC_GROUP_SEPARATOR not in key:
            raise ConfigFileError(None, 0, f"offsetTable key {key!r} is not 'topic@group'")
        if not isinstance(queues, dict):
            raise ConfigFileError(None, 0, f"offsetTable[{key!r}] is not an object")
        result[key] = {
            _int_key(q, f"offsetTable[{key!r}]"): _int_value(o, f"offsetTable[{key!r}][{q!r}]")
            for q, o in queues.items()
        }
    return result


def encode_consumer_offsets(table: Mapping[str, Mapping[int, int]]) -> str:
    inner = {k: {int(q): int(o) for q, o in sorted(v.items())} for k, v in table.items()}
    return dump_fastjson({"offsetTable": inner})


def split_topic_group(key: str) -> tuple[str, str]:
    """``"topic@group"`` → (topic, group) (RocketMQ splits at the separator)."""
    topic, _, group = key.partition(TOPIC_GROUP_SEPARATOR)
    return topic, group


def load_consumer_offsets(path: Path) -> Loaded[dict[str, dict[int, int]]]:
    return load_with_backup(path, decode_consumer_offsets, dict)


def save_consumer_offsets(path: Path, table: Mapping[str, Mapping[int, int]]) -> None:
    write_atomically(path, encode_consumer_offsets(table))


# -- delayOffset.json -----------------------------------------------------------------------------


def decode_delay_offsets(doc: Any) -> dict[int, int]:
    """``{"offsetTable":{level:offset}}`` → {level: offset}."""
    table = _offset_table(doc, DELAY_OFFSET_FILE)
    return {_int_key(k, "offsetTable"): _int_value(v, f"offsetTable[{k!r}]") for k, v in table.items()}


def encode_delay_offsets(table: Mapping[int, int]) -> str:
    return dump_fastjson({"offsetTable": {int(k): int(v) for k, v in sorted(table.items())}})


def load_delay_offsets(path: Path) -> Loaded[dict[int, int]]:
    return load_with_backup(path, decode_delay_offsets, dict)


def save_delay_offsets(path: Path, table: Mapping[int, int]) -> None:
    write_atomically(path, encode_delay_offsets(table))
