"""Read a broker/client configuration file (``broker.conf``) for verification.

Theory of operation
-------------------
``parse_properties`` follows ``java.util.Properties.load`` as far as a
``broker.conf`` needs: the file is read as ISO-8859-1 (``load(InputStream)``);
lines end in ``\\n``, ``\\r`` or ``\\r\\n``; leading blanks are skipped; a line
whose first non-blank character is ``#`` or ``!`` is a comment; blank lines
are skipped; a line ending in an odd number of backslashes continues on the
next (whose leading blanks are dropped); the key ends at the first unescaped
``=``, ``:`` or blank, then blanks and one ``=``/``:`` and blanks are skipped;
escapes ``\\t \\n \\r \\f \\uXXXX`` and ``\\x`` → ``x`` are decoded. Values
are trimmed (RocketMQ's ``MixAll.properties2Object`` feeds them to
``Integer/Long.parseLong``, which rejects blanks). The last occurrence of a key
wins, as in Java.

Stricter than Java, to catch editing mistakes: a line whose key is not a
property name (``[A-Za-z_][A-Za-z0-9_.:/-]*``, e.g. ``[broker]``) or that is
a bare word without a separator or value is reported as "not a property".

``load_broker_conf`` turns the keys rmqspec uses into a typed ``BrokerConf``
(defaults are RocketMQ 4.9's, plus rmqspec's assumptions for clock drift and
request latency) and lists the other keys as ignored. Every problem raises
``ConfigError`` naming the file, the line and the reason.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path

import attrs

from rmqspec.model.config import DEFAULT_DELAY_LEVELS, BrokerConfig, parse_delay_levels
from rmqspec.model.process_queue import LOCK_INTERVAL_MS, LOCK_MAX_LIVE_MS


class ConfigError(Exception):
    """A configuration file cannot be read or has a malformed line or value."""

    def __init__(self, path: str, line: int | None, reason: str) -> None:
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {reason}")
        self.path = path
        self.line = line
        self.reason = reason


@attrs.frozen
class Property:
    key: str
    value: str
    line: int  # 1-based number of the line where the logical line starts


_BLANK = " \t\f"
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:/\-]*$")
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str, path: str, line: int) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "\\" or i + 1 >= len(text):
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u":
            digits = text[i + 2 : i + 6]
            if len(digits) != 4 or not all(c in "0123456789abcdefABCDEF" for c in digits):
                raise ConfigError(path, line, f"malformed \\uxxxx escape {text[i : i + 6]!r}")
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """Join continuation lines; drop comments and blank lines. Returns (first line no, text)."""
    physical = re.split(r"\r\n|\r|\n", text)
    result: list[tuple[int, str]] = []
    i = 0
    while i < len(physical):
        start = i
        line = physical[i].lstrip(_BLANK)
        i += 1
        if not line or line[0] in "#!":
            continue
        parts = []
        while True:
            trailing = len(line) - len(line.rstrip("\\"))
            if trailing % 2 == 1:
                parts.append(line[:-1])
                if i >= len(physical):
                    break
                line = physical[i].lstrip(_BLANK)
                i += 1
                continue
            parts.append(line)
            break
        result.append((start + 1, "".join(parts)))
    return result


def parse_properties(text: str, path: str = "<string>") -> tuple[Property, ...]:
    """Parse Java properties text into ``Property`` rows in file order."""
    props: list[Property] = []
    for lineno, line in _logical_lines(text):
        k = 0
        while k < len(line):
            ch = line[k]
            if ch == "\\":
                k += 2
                continue
            if ch in "=:" or ch in _BLANK:
                break
            k += 1
        raw_key = line[:k]
        rest = line[k:].lstrip(_BLANK)
        has_separator = bool(rest) and rest[0] in "=:"
        if has_separator:
            rest = rest[1:].lstrip(_BLANK)
        key = _unescape(raw_key, path, lineno)
        value = _unescape(rest, path, lineno).strip()
        if not key:
            raise ConfigError(path, lineno, f"not a property: {line.strip()!r} has no key")
        if not _NAME.match(key):
            raise ConfigError(
                path,
                lineno,
                f"not a property: {line.strip()!r} (key {key!r} is not a property name)",
            )
        if not has_separator and not value:
            raise ConfigError(
                path, lineno, f"not a property: {line.strip()!r} has no '=' and no value"
            )
        props.append(Property(key, value, lineno))
    return tuple(props)


# ---------------------------------------------------------------------------
# The keys rmqspec uses

DEFAULT_CLOCK_DRIFT_PPM = 100  # assumption: a free-running quartz clock
DEFAULT_MAX_REQUEST_LATENCY_MS = 1000  # RebalanceImpl.lock: lockBatchMQ(..., timeoutMillis = 1000)
DEFAULT_RETRY_MAX_TIMES = 16  # SubscriptionGroupConfig.retryMaxTimes

_INT32 = 2**31 - 1
_INT64 = 2**63 - 1
_INTEGER = re.compile(r"^[+-]?[0-9]+$")


def _integer(limit: int, low: int, what: str) -> Callable[[str], int]:
    def parse(text: str) -> int:
        if not _INTEGER.match(text):
            raise ValueError(f"{text!r} is not an integer")
        value = int(text)
        if value > limit or value < -limit - 1:
            raise ValueError(
                f"{text!r} is out of range for a Java {'int' if limit == _INT32 else 'long'}"
            )
        if value < low:
            raise ValueError(f"{value} must be {what}")
        return value

    return parse


def _drift(text: str) -> int:
    value = _integer(_INT32, 0, "≥ 0")(text)
    if value >= 1_000_000:
        raise ValueError(f"{value} ppm must be below 1000000 (a clock that runs)")
    return value


def _delays(text: str) -> tuple[int, ...]:
    return parse_delay_levels(text)


_ANY_INT32 = -(2**31)

# key -> (BrokerConf field, parser)
KEYS: Mapping[str, tuple[str, Callable[[str], object]]] = {
    "messageDelayLevel": ("delay_levels_ms", _delays),
    "transactionTimeOut": ("transaction_timeout_ms", _integer(_INT64, 0, "≥ 0 ms")),
    "transactionCheckMax": ("transaction_check_max", _integer(_INT32, _ANY_INT32, "an int")),
    "transactionCheckInterval": ("transaction_check_interval_ms", _integer(_INT64, 1, "> 0 ms")),
    "retryMaxTimes": ("retry_max_times", _integer(_INT32, 0, "≥ 0")),
    "rocketmq.broker.rebalance.lockMaxLiveTime": ("broker_lock_ms", _integer(_INT64, 1, "> 0 ms")),
    "rocketmq.client.rebalance.lockMaxLiveTime": ("client_lock_ms", _integer(_INT64, 1, "> 0 ms")),
    "rocketmq.client.rebalance.lockInterval": ("lock_interval_ms", _integer(_INT64, 1, "> 0 ms")),
    "clockDriftPpm": ("clock_drift_ppm", _drift),
    "maxRequestLatencyMs": ("max_request_latency_ms", _integer(_INT64, 0, "≥ 0 ms")),
}

_BROKER = BrokerConfig()


@attrs.frozen
class BrokerConf:
    """The values configuration verification uses; defaults are RocketMQ 4.9's."""

    delay_levels_ms: tuple[int, ...] = parse_delay_levels(DEFAULT_DELAY_LEVELS)
    transaction_timeout_ms: int = _BROKER.transaction_timeout_ms
    transaction_check_max: int = _BROKER.transaction_check_max
    transaction_check_interval_ms: int = _BROKER.transaction_check_interval_ms
    retry_max_times: int = DEFAULT_RETRY_MAX_TIMES
    broker_lock_ms: int = _BROKER.broker_lock_max_live_ms
    client_lock_ms: int = LOCK_MAX_LIVE_MS
    lock_interval_ms: int = LOCK_INTERVAL_MS
    clock_drift_ppm: int = DEFAULT_CLOCK_DRIFT_PPM
    max_request_latency_ms: int = DEFAULT_MAX_REQUEST_LATENCY_MS
    path: str = "<defaults>"
    sources: Mapping[str, int] = attrs.field(factory=dict)  # used key -> line
    ignored: tuple[Property, ...] = ()

    def source_of(self, key: str) -> str:
        line = self.sources.get(key)
        return f"line {line}" if line is not None else "default"


def broker_conf_from_text(text: str, path: str = "<string>") -> BrokerConf:
    values: dict[str, object] = {}
    sources: dict[str, int] = {}
    ignored: dict[str, Property] = {}
    for prop in parse_properties(text, path):
        if prop.key not in KEYS:
            ignored[prop.key] = prop  # last occurrence wins, as in Java
            continue
        field, parse = KEYS[prop.key]
        if not prop.value:
            raise ConfigError(path, prop.line, f"{prop.key} has an empty value")
        try:
            values[field] = parse(prop.value)
        except ValueError as exc:
            raise ConfigError(path, prop.line, f"{prop.key}: {exc}") from None
        sources[prop.key] = prop.line
    return BrokerConf(
        **values,  # type: ignore[arg-type]
        path=path,
        sources=sources,
        ignored=tuple(sorted(ignored.values(), key=lambda p: p.line)),
    )


def load_broker_conf(path: str | Path) -> BrokerConf:
    """Read and check a properties file; ``ConfigError`` if it is missing or malformed."""
    name = str(path)
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise ConfigError(name, None, "no such file") from None
    except IsADirectoryError:
        raise ConfigError(name, None, "is a directory, not a properties file") from None
    except OSError as exc:
        raise ConfigError(name, None, f"cannot read: {exc.strerror or exc}") from None
    return broker_conf_from_text(data.decode("iso-8859-1"), name)
