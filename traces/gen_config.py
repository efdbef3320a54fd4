"""The trace generator's knobs and result (``traces/generator.py``; traces/README.md)."""

from __future__ import annotations

from typing import Any

import attrs

from rmqspec.model.config import DEFAULT_DELAY_LEVELS, parse_delay_levels

# 2024-03-01T00:00:00Z: UNIQ_KEYs carry ms since the start of the month.
DEFAULT_START_MS = 1_709_251_200_000


def _fraction(_i: object, a: attrs.Attribute, v: float) -> None:
    if not 0.0 <= v <= 1.0:
        raise ValueError(f"{a.name} must be within [0, 1], got {v}")


def _positive(_i: object, a: attrs.Attribute, v: int) -> None:
    if v <= 0:
        raise ValueError(f"{a.name} must be positive, got {v}")


@attrs.frozen
class GenConfig:
    """The generator's knobs (see traces/README.md). Defaults are RocketMQ's where they exist."""

    events: int = attrs.field(default=1_000_000, validator=_positive)
    seed: int = 0
    producers: int = attrs.field(default=8, validator=_positive)
    topics: int = attrs.field(default=6, validator=_positive)  # concurrent topics
    orderly_topics: int = attrs.field(default=2, validator=_positive)
    queues: int = attrs.field(default=4, validator=_positive)
    groups: int = attrs.field(default=4, validator=_positive)  # concurrent groups
    orderly_groups: int = attrs.field(default=2, validator=_positive)
    clients: int = attrs.field(default=3, validator=_positive)  # per group
    send_gap_ms: int = attrs.field(default=2, validator=_positive)  # mean gap between sends
    batch: int = attrs.field(default=8, validator=_positive)  # consumeMessageBatchMaxSize-like
    p_orderly: float = attrs.field(default=0.15, validator=_fraction)
    p_delayed: float = attrs.field(default=0.05, validator=_fraction)
    p_txn: float = attrs.field(default=0.08, validator=_fraction)
    p_fail: float = attrs.field(default=0.04, validator=_fraction)
    p_poison: float = attrs.field(default=0.001, validator=_fraction)
    p_dlq_direct: float = attrs.field(default=0.01, validator=_fraction)
    p_orderly_fail: float = attrs.field(default=0.02, validator=_fraction)
    p_owner_dies: float = attrs.field(default=0.01, validator=_fraction)
    p_rebalance: float = attrs.field(default=0.01, validator=_fraction)
    p_txn_unknown: float = attrs.field(default=0.25, validator=_fraction)
    p_txn_stuck: float = attrs.field(default=0.02, validator=_fraction)
    p_dup_commit: float = attrs.field(default=0.005, validator=_fraction)
    p_timer: float = attrs.field(default=0.0, validator=_fraction)  # 5.x timer messages (gen_timer.py)
    crashes: int = 0
    inject: tuple[str, ...] = ()
    inject_count: int = attrs.field(default=1, validator=_positive)
    start_ms: int = DEFAULT_START_MS
    delay_levels: str = DEFAULT_DELAY_LEVELS
    retry_max: int = 16
    transaction_timeout_ms: int = 6000
    transaction_check_max: int = 15
    transaction_check_interval_ms: int = 60_000
    broker_lock_ms: int = 60_000
    client_lock_ms: int = 30_000
    lock_interval_ms: int = 20_000
    crash_downtime_ms: int = 2000

    @property
    def delays_ms(self) -> tuple[int, ...]:
        return parse_delay_levels(self.delay_levels)


@attrs.frozen
class GenResult:
    events: int
    parts: tuple[str, ...]
    truth: tuple[dict[str, Any], ...]
    truth_path: str | None
    sim_ms: int
