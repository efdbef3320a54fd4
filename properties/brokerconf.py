"""Read a broker/client configuration file (``broker.conf``) as RocketMQ does.

Theory of operation
-------------------
``broker.conf`` is a ``java.util.Properties`` file: RocketMQ 4.9.8's
``BrokerStartup.createBrokerController`` reads it with ``Properties.load(InputStream)``
and hands the values to ``MixAll.properties2Object``. ``parse_properties`` lets the
``javaproperties`` library do the lexing exactly as ``Properties.load`` does (the file
is ISO-8859-1; ``\\n``, ``\\r`` or ``\\r\\n`` line ends; ``#``/``!`` comments;
continuation lines; ``\\uXXXX`` escapes, surrogate pairs combined; the key ends at
the first unescaped ``=``, ``:`` or blank) and adds what the library leaves out: the
number of the line each property starts on, and the reason a line is wrong.
Values are kept as Java sees them, trailing blanks included; the last occurrence of
a key wins, as in Java.

Stricter than Java, to catch editing mistakes: a line whose key is not a property
name (``[A-Za-z_][A-Za-z0-9_.:/-]*``, e.g. ``[broker]``) or that is a bare word
without a separator or value is reported as "not a property"; a malformed
``\\uXXXX`` escape is an error (Java's ``load`` throws, the broker does not start).

Values RocketMQ would silently drop are errors here: ``properties2Object`` calls
``Integer/Long.parseInt`` and ``FlushDiskType.valueOf`` and swallows the exception, so
``transactionCheckMax=5 `` (a trailing blank) leaves the real broker at its default
while the file seems to say 5.

``load_broker_conf`` turns the keys configuration verification uses into a typed
``BrokerConf`` (defaults are RocketMQ 4.9's, plus rmqspec's assumptions for clock
drift and request latency) and lists the other keys as ignored;
``broker_config_from_file`` turns a file into the ``BrokerConfig`` a broker runs
with (``rmqspec serve``, wall-clock conformance). Every problem raises
``ConfigError`` naming the file, the line and the reason.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Mapping
from pathlib import Path

import attrs
import javaproperties

from rmqspec.model.config import DEFAULT_DELAY_LEVELS, BrokerConfig, parse_delay_levels
from rmqspec.model.process_queue import LOCK_INTERVAL_MS, LOCK_MAX_LIVE_MS
from rmqspec.model.retention import parse_delete_when
from rmqspec.model.versions import DEFAULT_VERSION, version_named


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


_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:/\-]*$")
_LINE_END = re.compile(r"\r\n|\r|\n")
_SEPARATOR = re.compile(r"^(?:[^\\=:\s]|\\.)*\s*[=:]", re.DOTALL)


def _lines_in(source: str) -> int:
    return len(_LINE_END.findall(source))


def parse_properties(text: str, path: str = "<string>") -> tuple[Property, ...]:
    """Parse Java properties text into ``Property`` rows in file order (see the module doc)."""
    props: list[Property] = []
    line = 1
    elements = javaproperties.parse(text)
    while True:
        try:
            element = next(elements)
        except StopIteration:
            break
        except javaproperties.InvalidUEscapeError as exc:
            raise ConfigError(path, line, f"malformed \\uxxxx escape {exc.escape!r}") from None
        start, line = line, line + _lines_in(element.source)
        if not isinstance(element, javaproperties.KeyValue):
            continue  # a comment or a blank line
        shown = element.source.strip()
        if not element.key:
            raise ConfigError(path, start, f"not a property: {shown!r} has no key")
        if not _NAME.match(element.key):
            raise ConfigError(path, start, f"not a property: {shown!r} (key {element.key!r} is not a property name)")
        if not element.value and not _SEPARATOR.match(element.source.lstrip()):
            raise ConfigError(path, start, f"not a property: {shown!r} has no '=' and no value")
        props.append(Property(element.key, element.value, start))
    return tuple(props)


# ---------------------------------------------------------------------------
# The keys rmqspec uses

DEFAULT_CLOCK_DRIFT_PPM = 100  # assumption: a free-running quartz clock
DEFAULT_MAX_REQUEST_LATENCY_MS = 1000  # RebalanceImpl.lock: lockBatchMQ(..., timeoutMillis = 1000)
DEFAULT_RETRY_MAX_TIMES = 16  # SubscriptionGroupConfig.retryMaxTimes

_INT32 = 2**31 - 1
_INT64 = 2**63 - 1
_INTEGER = re.compile(r"^[+-]?[0-9]+$")


def _blanks(text: str) -> None:
    if text != text.strip():
        raise ValueError(
            f"{text!r} has leading or trailing blanks: RocketMQ's parser refuses it and "
            "MixAll.properties2Object silently keeps the default"
        )


def _integer(limit: int, low: int, what: str) -> Callable[[str], int]:
    def parse(text: str) -> int:
        _blanks(text)
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


def _cq_units(text: str) -> int:
    """MessageStoreConfig.getMappedFileSizeConsumeQueue: rounded up to whole 20-byte units."""
    value = _integer(_INT32, 1, "> 0 bytes")(text)
    units = -(-value // 20)
    if units * 20 > _INT32:
        raise ValueError(f"{value} rounds up to {units * 20} bytes (whole 20-byte units), past a Java int")
    return units * 20


def _delays(text: str) -> tuple[int, ...]:
    return parse_delay_levels(text)


def _host(text: str) -> str:
    _blanks(text)
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        raise ValueError(f"{text!r} is not an IP address (rmqspec puts it in every msgId)") from None


def _flush(text: str) -> str:
    if text not in _FLUSH_TYPES:
        raise ValueError(
            f"{text!r} is not SYNC_FLUSH or ASYNC_FLUSH (FlushDiskType.valueOf would throw "
            "and the broker silently keeps ASYNC_FLUSH)"
        )
    return _FLUSH_TYPES[text]


def _name(text: str) -> str:
    if not text:
        raise ValueError("is empty")
    return text


_FLUSH_TYPES = {"SYNC_FLUSH": "SYNC", "ASYNC_FLUSH": "ASYNC"}


def _boolean(text: str) -> bool:
    """Boolean.parseBoolean, minus its silence: anything but true/false (any case) is an error."""
    if text.lower() not in ("true", "false"):
        raise ValueError(f"{text!r} is not true or false (Boolean.parseBoolean would silently read false)")
    return text.lower() == "true"


_ANY_INT32 = -(2**31)


def _delete_when(text: str) -> str:
    """deleteWhen: hours of the day separated by ';' (UtilAll.isItTimeToDo would throw on anything else
    every 10 s, and never delete by time)."""
    _blanks(text)
    parse_delete_when(text)
    return text

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
    "maxOrderlyListenerMs": ("max_orderly_listener_ms", _integer(_INT64, 0, "≥ 0 ms")),
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
    # how long an orderly listener (with the pauses it suffers) may run; 0: a batch is an instant
    max_orderly_listener_ms: int = 0
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


# ---------------------------------------------------------------------------
# The BrokerConfig a broker runs with

# key -> (BrokerConfig field, parser) for keys BrokerConf does not type.
BROKER_KEYS: Mapping[str, tuple[str, Callable[[str], object]]] = {
    "brokerClusterName": ("broker_cluster_name", _name),
    "brokerName": ("broker_name", _name),
    "brokerIP1": ("store_host", _host),
    "listenPort": ("store_port", _integer(_INT32, 1, "a TCP port (1..65535)")),
    "flushDiskType": ("flush", _flush),
    "mappedFileSizeCommitLog": ("commitlog_file_size", _integer(_INT32, 1, "> 0 bytes")),
    "mappedFileSizeConsumeQueue": ("consume_queue_file_size", _cq_units),
    "enablePropertyFilter": ("enable_property_filter", _boolean),
    # retention (model/retention.py)
    "fileReservedTime": ("file_reserved_hours", _integer(_INT32, 1, "> 0 hours")),
    "deleteWhen": ("delete_when", _delete_when),
    "diskMaxUsedSpaceRatio": ("disk_max_used_space_ratio", _integer(_INT32, _ANY_INT32, "an int (clamped to 10..95)")),
    "cleanFileForciblyEnable": ("clean_file_forcibly_enable", _boolean),
    # ASYNC flush (model/flushing.py): any int, as 4.9.8 takes it (<= 0 pages: whatever is written;
    # an interval <= 0: every pass thorough)
    "flushCommitLogLeastPages": ("flush_commitlog_least_pages", _integer(_INT32, _ANY_INT32, "an int")),
    "flushCommitLogThoroughInterval": ("flush_commitlog_thorough_interval_ms",
                                       _integer(_INT32, _ANY_INT32, "an int")),
    "flushIntervalCommitLog": ("flush_interval_commitlog_ms", _integer(_INT32, _ANY_INT32, "an int")),
    # TransientStorePool (model/committing.py): refused unless flushDiskType is ASYNC_FLUSH
    "transientStorePoolEnable": ("transient_store_pool", _boolean),
    "commitCommitLogLeastPages": ("commit_commitlog_least_pages", _integer(_INT32, _ANY_INT32, "an int")),
    "commitCommitLogThoroughInterval": ("commit_commitlog_thorough_interval_ms",
                                        _integer(_INT32, _ANY_INT32, "an int")),
    "commitIntervalCommitLog": ("commit_interval_commitlog_ms", _integer(_INT32, _ANY_INT32, "an int")),
    # OS_PAGECACHE_BUSY (model/putlock.py): a long, any value as 4.9.8 takes it
    "osPageCacheBusyTimeOutMills": ("os_page_cache_busy_timeout_ms", _integer(_INT64, -_INT64 - 1, "a long")),
    "regionId": ("region_id", _name),
    "transactionOpBatchInterval": ("transaction_op_batch_interval_ms", _integer(_INT64, 1, "> 0 ms")),
    "traceOn": ("trace_on", _boolean),
    # 5.x timer messages (model/timer.py); timerPrecisionMs is normalized like MessageStoreConfig's setter
    "timerWheelEnable": ("timer_wheel_enable", _boolean),
    "timerPrecisionMs": ("timer_precision_ms", _integer(_INT32, 1, "> 0 ms")),
    "timerMaxDelaySec": ("timer_max_delay_sec", _integer(_INT32, 1, "> 0 s")),
    "timerFlushIntervalMs": ("timer_flush_interval_ms", _integer(_INT32, 1, "> 0 ms")),
    # 5.x pop (model/pop.py): reviveQueueNum is a modulus; the probability is compared with nextInt(100)
    "reviveQueueNum": ("revive_queue_num", _integer(_INT32, 1, "> 0 queues")),
    "popFromRetryProbability": ("pop_from_retry_probability", _integer(_INT32, _ANY_INT32, "an int (a percent)")),
    "enableRetryTopicV2": ("enable_retry_topic_v2", _boolean),
    "retrieveMessageFromPopRetryTopicV1": ("retrieve_message_from_pop_retry_topic_v1", _boolean),
}

# BrokerConf field -> (key, BrokerConfig field)
_FROM_CONF = {
    "transaction_timeout_ms": ("transactionTimeOut", "transaction_timeout_ms"),
    "transaction_check_max": ("transactionCheckMax", "transaction_check_max"),
    "transaction_check_interval_ms": ("transactionCheckInterval", "transaction_check_interval_ms"),
    "broker_lock_ms": ("rocketmq.broker.rebalance.lockMaxLiveTime", "broker_lock_max_live_ms"),
}
_UNITS = (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000))


def delay_levels_text(delays_ms: tuple[int, ...]) -> str:
    """``messageDelayLevel`` text for delays in ms (each in its largest exact unit)."""
    tokens = []
    for ms in delays_ms:
        unit, size = next((u, n) for u, n in _UNITS if ms % n == 0)
        tokens.append(f"{ms // size}{unit}")
    return " ".join(tokens)


def for_version(conf: BrokerConf, version: str) -> BrokerConf:
    """``conf`` as a broker of ``version`` reads it: that version's default for a key the file leaves
    out, where it differs from 4.9.8's (``transactionCheckInterval``: 30 s from 5.1.1)."""
    if "transactionCheckInterval" in conf.sources:
        return conf
    return attrs.evolve(conf, transaction_check_interval_ms=version_named(version).default_check_interval_ms)


def broker_config_from_conf(conf: BrokerConf, version: str = DEFAULT_VERSION) -> BrokerConfig:
    """The ``BrokerConfig`` of a parsed file (``ConfigError`` for a value the broker cannot run with).

    Keys absent from the file take RocketMQ 4.9.8's defaults (``flushDiskType``
    ASYNC_FLUSH, ``brokerClusterName`` DefaultCluster, ``listenPort`` 10911,
    ``mappedFileSizeCommitLog`` 1 GiB, the transaction and lock timings), except
    ``brokerName`` and ``brokerIP1``, whose RocketMQ defaults are the machine's host
    name and address: rmqspec's ``broker-a`` and ``127.0.0.1``.
    ``rocketmq.broker.rebalance.lockMaxLiveTime`` is a JVM system property for
    RocketMQ (``-D``); rmqspec reads it as a key of the file. ``version`` is the
    RocketMQ version profile (``model/versions.py``): its defaults replace 4.9.8's
    where they differ (``transactionCheckInterval`` 30 s from 5.1.1).
    """
    conf = for_version(conf, version)
    values: dict[str, object] = {"flush": "ASYNC", "version": version}
    if "messageDelayLevel" in conf.sources:
        values["message_delay_level"] = delay_levels_text(conf.delay_levels_ms)
    for conf_field, (key, field) in _FROM_CONF.items():
        value = getattr(conf, conf_field)
        if value <= 0:
            raise ConfigError(
                conf.path, conf.sources.get(key), f"{key}: {value} must be > 0 for a broker to run with it"
            )
        values[field] = value
    for prop in conf.ignored:
        if prop.key not in BROKER_KEYS:
            continue
        field, parse = BROKER_KEYS[prop.key]
        try:
            values[field] = parse(prop.value)
        except ValueError as exc:
            raise ConfigError(conf.path, prop.line, f"{prop.key}: {exc}") from None
    port = values.get("store_port", 0)
    if isinstance(port, int) and port > 65535:
        line = next(p.line for p in conf.ignored if p.key == "listenPort")
        raise ConfigError(conf.path, line, f"listenPort: {port} is not a TCP port (1..65535)")
    if values.get("transient_store_pool") and values["flush"] != "ASYNC":
        line = next(p.line for p in conf.ignored if p.key == "transientStorePoolEnable")
        raise ConfigError(conf.path, line, "transientStorePoolEnable: true needs flushDiskType=ASYNC_FLUSH "
                          "(RocketMQ ignores it under SYNC_FLUSH; rmqspec refuses it)")
    return BrokerConfig(**values)  # type: ignore[arg-type]


def broker_config_from_file(path: str | Path, version: str = DEFAULT_VERSION) -> BrokerConfig:
    """Read ``path`` (a ``broker.conf``) into the ``BrokerConfig`` a broker of ``version`` runs with."""
    return broker_config_from_conf(load_broker_conf(path), version)
