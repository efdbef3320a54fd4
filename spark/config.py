"""The audit's configuration file (JSON) → ``AuditParams`` + subscriptions.

Format (every key optional; names follow RocketMQ's configuration keys)::

    {
      "messageDelayLevel": "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h",
      "maxReconsumeTimes": 16,
      "groupMaxReconsumeTimes": {"GID_ORDERS": 3},
      "brokerLockMaxLiveTime": 60000,
      "clientLockMaxLiveTime": 30000,
      "transactionTimeOut": 6000,
      "transactionCheckMax": 15,
      "fileReservedTimeMs": 259200000,
      "transactionOpBatchInterval": 3000,
      "subscriptions": {"GID_ORDERS": ["TopicOrders"]}
    }

``subscriptions`` adds (group → topics) to the groups seen consuming a
topic (LOST). ``fileReservedTimeMs``, when given, also judges retention's deletions (an ``expire`` of
cause ``reserved`` that took a copy younger than it: ``traces/checks_retention.py``); by default they
are not judged. An unknown key or a wrong type is a ``ConfigError`` naming the
key.

The version profile (``model/versions.py``; ``rmqspec audit --profile``) says what RocketMQ
wrote the traces. Under one with batched op messages (``Version.op_batch``, 5.1.0+)
``transactionOpBatchInterval`` (ms, > 0) is ``AuditParams.op_batch_ms``, by default the
broker's (3000); under the others ops are written at the END (``op_batch_ms`` 0) and the key
is a ``ConfigError``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from rmqspec.model.config import default_config, parse_delay_levels
from rmqspec.model.versions import DEFAULT_VERSION, VERSIONS, version_named
from rmqspec.properties.codes import AuditParams

_INTS = {
    "maxReconsumeTimes": "retry_max_times",
    "brokerLockMaxLiveTime": "broker_lock_ms",
    "clientLockMaxLiveTime": "client_lock_ms",
    "transactionTimeOut": "transaction_timeout_ms",
    "transactionCheckMax": "transaction_check_max",
    "fileReservedTimeMs": "file_reserved_ms",
}
OP_BATCH_KEY = "transactionOpBatchInterval"
KEYS = frozenset({*_INTS, "messageDelayLevel", "groupMaxReconsumeTimes", "subscriptions", OP_BATCH_KEY})


class ConfigError(ValueError):
    """The configuration file is unreadable or wrong: names the file and key."""


@attrs.frozen
class AuditConfig:
    params: AuditParams = attrs.field(factory=AuditParams)
    subscriptions: Mapping[str, Sequence[str]] = attrs.field(factory=dict)


def _int(path: object, key: str, value: Any) -> int:
    if type(value) is not int or value < 0:
        raise ConfigError(f"{path}: {key} must be a non-negative integer, got {value!r}")
    return value


def _op_batch_ms(path: object, data: Mapping[str, Any], profile: str, default_ms: int | None) -> int:
    """``AuditParams.op_batch_ms`` under the version ``profile``: 0 unless it batches op messages;
    then the file's, else ``default_ms``, else the broker's default."""
    try:
        version = version_named(profile)
    except ValueError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    if not version.op_batch:
        if OP_BATCH_KEY in data:
            raise ConfigError(
                f"{path}: {OP_BATCH_KEY} applies to a profile that batches op messages "
                f"({', '.join(sorted(n for n, v in VERSIONS.items() if v.op_batch))}); {profile} writes "
                "them at the END")
        return 0
    if OP_BATCH_KEY not in data:
        return default_config(profile).transaction_op_batch_interval_ms if default_ms is None else default_ms
    value = data[OP_BATCH_KEY]
    if type(value) is not int or value <= 0:
        raise ConfigError(f"{path}: {OP_BATCH_KEY} must be a positive integer (ms), got {value!r}")
    return value


def parse_config(
    data: Any, path: object = "<config>", profile: str = DEFAULT_VERSION, *, op_batch_default_ms: int | None = None
) -> AuditConfig:
    """The configuration ``data`` (a parsed JSON object) of traces written by RocketMQ ``profile``;
    ``op_batch_default_ms``: the op batch period when ``data`` has none (a broker.conf's)."""
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a JSON object")
    unknown = sorted(set(data) - KEYS)
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(KEYS))}")
    fields: dict[str, Any] = {"op_batch_ms": _op_batch_ms(path, data, profile, op_batch_default_ms)}
    for key, name in _INTS.items():
        if key in data:
            fields[name] = _int(path, key, data[key])
    if "file_reserved_ms" in fields:  # given, so an expire's deletions are judged by it
        fields["expire_reserved_ms"] = fields["file_reserved_ms"]
    if "messageDelayLevel" in data:
        try:
            fields["delay_levels_ms"] = parse_delay_levels(str(data["messageDelayLevel"]))
        except ValueError as exc:
            raise ConfigError(f"{path}: {exc}") from None
    groups = data.get("groupMaxReconsumeTimes", {})
    if not isinstance(groups, dict):
        raise ConfigError(f"{path}: groupMaxReconsumeTimes must map group -> integer")
    fields["group_retry_max"] = tuple(
        (str(g), _int(path, f"groupMaxReconsumeTimes.{g}", v)) for g, v in sorted(groups.items())
    )
    subs = data.get("subscriptions", {})
    if not isinstance(subs, dict) or not all(
        isinstance(t, list) and all(isinstance(x, str) for x in t) for t in subs.values()
    ):
        raise ConfigError(f"{path}: subscriptions must map group -> list of topics")
    return AuditConfig(AuditParams(**fields), {str(g): tuple(t) for g, t in subs.items()})


def load_config(
    path: str | Path | None, profile: str = DEFAULT_VERSION, *, op_batch_default_ms: int | None = None
) -> AuditConfig:
    """The configuration in ``path`` (defaults when None) for traces of RocketMQ ``profile``
    (``parse_config``)."""
    if path is None:
        return parse_config({}, "<defaults>", profile, op_batch_default_ms=op_batch_default_ms)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not JSON: {exc.msg} at line {exc.lineno}") from None
    return parse_config(data, path, profile, op_batch_default_ms=op_batch_default_ms)
