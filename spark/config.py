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
      "subscriptions": {"GID_ORDERS": ["TopicOrders"]}
    }

``subscriptions`` adds (group → topics) to the groups seen consuming a
topic (LOST). An unknown key or a wrong type is a ``ConfigError`` naming the
key.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from rmqspec.model.config import parse_delay_levels
from rmqspec.properties.codes import AuditParams

_INTS = {
    "maxReconsumeTimes": "retry_max_times",
    "brokerLockMaxLiveTime": "broker_lock_ms",
    "clientLockMaxLiveTime": "client_lock_ms",
    "transactionTimeOut": "transaction_timeout_ms",
    "transactionCheckMax": "transaction_check_max",
    "fileReservedTimeMs": "file_reserved_ms",
}
KEYS = frozenset({*_INTS, "messageDelayLevel", "groupMaxReconsumeTimes", "subscriptions"})


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


def parse_config(data: Any, path: object = "<config>") -> AuditConfig:
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a JSON object")
    unknown = sorted(set(data) - KEYS)
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(KEYS))}")
    fields: dict[str, Any] = {}
    for key, name in _INTS.items():
        if key in data:
            fields[name] = _int(path, key, data[key])
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


def load_config(path: str | Path | None) -> AuditConfig:
    """The configuration in ``path`` (defaults when None)."""
    if path is None:
        return AuditConfig()
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not JSON: {exc.msg} at line {exc.lineno}") from None
    return parse_config(data, path)
