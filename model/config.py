"""Broker configuration: the parameters the semantics depend on.

Names follow RocketMQ's ``BrokerConfig`` / ``MessageStoreConfig`` keys
(``messageDelayLevel``, ``transactionTimeOut``, …) in snake case. Defaults are
RocketMQ 4.9's.
"""

from __future__ import annotations

import re

import attrs

from rmqspec.model.pop import PopSettings
from rmqspec.model.retention import Policy, parse_delete_when
from rmqspec.model.timer import TimerSettings, normalize_precision
from rmqspec.model.versions import DEFAULT_VERSION, VERSIONS, Version

DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"

_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_LEVEL = re.compile(r"^(\d+)([smhd])$")


def parse_delay_levels(text: str) -> tuple[int, ...]:
    """Parse ``messageDelayLevel`` into delays in ms; level ``i`` is index ``i-1``.

    Tokens are separated by single spaces, as RocketMQ's
    ``ScheduleMessageService.parseDelayLevel`` (``split(" ")``) reads them. Raises
    ``ValueError`` naming the offending token where RocketMQ's parse fails (an
    unknown unit, a tab, a doubled or leading blank); RocketMQ then refuses to start.
    """
    tokens = text.split(" ")
    while tokens and not tokens[-1]:
        tokens.pop()  # Java's String.split drops trailing empty strings
    if not tokens:
        raise ValueError("messageDelayLevel is empty")
    delays = []
    for index, token in enumerate(tokens, start=1):
        if not token:
            raise ValueError(
                f"messageDelayLevel token {index} is empty (a leading or doubled blank: "
                "RocketMQ splits on single spaces and its parseDelayLevel fails)"
            )
        m = _LEVEL.match(token)
        if not m:
            raise ValueError(
                f"messageDelayLevel token {index} {token!r} is not <number><s|m|h|d>"
            )
        delays.append(int(m.group(1)) * _UNIT_MS[m.group(2)])
    return tuple(delays)


def _whole_units(inst: object, attr: attrs.Attribute, value: int) -> None:
    _positive(inst, attr, value)
    if value % 20:
        raise ValueError(f"{attr.name} must be whole consume-queue units of 20 bytes, got {value}")


def _check_delay_levels(_inst: object, _attr: object, value: str) -> None:
    parse_delay_levels(value)


def _check_delete_when(_inst: object, _attr: attrs.Attribute, value: str) -> None:
    parse_delete_when(value)


def _check_transient_store_pool(inst: BrokerConfig, _attr: attrs.Attribute, value: bool) -> None:
    if value and inst.flush != "ASYNC":
        raise ValueError(
            "transient_store_pool (transientStorePoolEnable) needs flush ASYNC (ASYNC_FLUSH): RocketMQ "
            f"ignores it under {inst.flush}_FLUSH (MessageStoreConfig.isTransientStorePoolEnable), rmqspec refuses it"
        )


def _positive(_inst: object, attr: attrs.Attribute, value: int) -> None:
    if value <= 0:
        raise ValueError(f"{attr.name} must be positive, got {value}")


@attrs.frozen
class BrokerConfig:
    """The knobs of one broker. Frozen; use ``attrs.evolve`` to vary."""

    message_delay_level: str = attrs.field(
        default=DEFAULT_DELAY_LEVELS, validator=_check_delay_levels
    )
    transaction_timeout_ms: int = attrs.field(default=6000, validator=_positive)
    transaction_check_max: int = attrs.field(default=15, validator=_positive)
    transaction_check_interval_ms: int = attrs.field(default=60_000, validator=_positive)
    # 5.1.0+ (model/versions.py ``op_batch``): the op batch service's period (transactionOpBatchInterval)
    transaction_op_batch_interval_ms: int = attrs.field(default=3000, validator=_positive)
    broker_lock_max_live_ms: int = attrs.field(default=60_000, validator=_positive)
    file_reserved_hours: int = attrs.field(default=72, validator=_positive)
    # retention (model/retention.py): deleteWhen (hours, ';'-separated), diskMaxUsedSpaceRatio (%),
    # cleanFileForciblyEnable
    delete_when: str = attrs.field(default="04", validator=_check_delete_when)
    disk_max_used_space_ratio: int = 75  # any int: the getter clamps it to [10, 95]
    clean_file_forcibly_enable: bool = True
    flush: str = attrs.field(
        default="SYNC", validator=attrs.validators.in_(("SYNC", "ASYNC"))
    )
    # ASYNC: the FlushRealTimeService's flushCommitLogLeastPages (OS pages; <= 0: whatever is written)
    # and flushCommitLogThoroughInterval (<= 0: every pass thorough); model/flushing.py
    flush_commitlog_least_pages: int = 4
    flush_commitlog_thorough_interval_ms: int = 10_000
    flush_interval_commitlog_ms: int = 500  # flushIntervalCommitLog: the service's wait
    # transientStorePoolEnable (ASYNC only): appends go to a write buffer the CommitRealTimeService commits
    # (commitCommitLogLeastPages, commitCommitLogThoroughInterval; model/committing.py)
    transient_store_pool: bool = attrs.field(default=False, validator=_check_transient_store_pool)
    commit_commitlog_least_pages: int = 4
    commit_commitlog_thorough_interval_ms: int = 200
    commit_interval_commitlog_ms: int = 200  # commitIntervalCommitLog: the service's wait
    # osPageCacheBusyTimeOutMills: a put lock held longer (strictly) makes the store busy (model/putlock.py)
    os_page_cache_busy_timeout_ms: int = 1_000
    # Schedule-service progress is persisted this often (ScheduleMessageService
    # flushDelayOffsetInterval, 10 s) and on clean shutdown.
    flush_delay_offset_interval_ms: int = attrs.field(default=10_000, validator=_positive)
    # Consumer offsets are persisted by the broker every 5 s (flushConsumerOffsetInterval).
    flush_consumer_offset_interval_ms: int = attrs.field(default=5_000, validator=_positive)
    # The store's host as it appears in msgId (offset id) and storeHost.
    store_host: str = "127.0.0.1"
    store_port: int = 10911
    broker_name: str = "broker-a"
    # brokerClusterName: the send path stores it as property CLUSTER on client messages.
    broker_cluster_name: str = "DefaultCluster"
    # CommitLog mapped-file size (mappedFileSizeCommitLog, 1 GiB); a record that
    # does not fit (size + 8 > room left) rolls to the next multiple of this.
    commitlog_file_size: int = attrs.field(default=1 << 30, validator=_positive)
    # ConsumeQueue mapped-file size (mappedFileSizeConsumeQueue, 300,000 units of 20 bytes; RocketMQ
    # rounds a value up to whole units). Only the concrete store's files see it: queue offsets do not.
    consume_queue_file_size: int = attrs.field(default=300_000 * 20, validator=_whole_units)
    # enablePropertyFilter (default false): SQL92 pulls are refused with SYSTEM_ERROR unless true.
    enable_property_filter: bool = False
    # The RocketMQ release line the broker behaves as (``model/versions.py``: rocketmq-4.9,
    # rocketmq-5.0, rocketmq-5.1, rocketmq-5.2, rocketmq-5.5); not a broker.conf key: ``--profile`` chooses it.
    version: str = attrs.field(default=DEFAULT_VERSION, validator=attrs.validators.in_(tuple(VERSIONS)))
    # regionId / traceOn: what 5.x stores as MSG_REGION / TRACE_ON on every send.
    region_id: str = "DefaultRegion"
    trace_on: bool = True
    # 5.x timer messages (model/timer.py): timerWheelEnable, timerPrecisionMs (normalized to
    # 100/200/500/1000 like MessageStoreConfig's setter), timerMaxDelaySec, timerFlushIntervalMs
    timer_wheel_enable: bool = True
    timer_precision_ms: int = attrs.field(default=1000, converter=normalize_precision)
    timer_max_delay_sec: int = attrs.field(default=3 * 24 * 3600, validator=_positive)
    timer_flush_interval_ms: int = attrs.field(default=1000, validator=_positive)
    # pop (5.x profiles; model/pop.py): reviveQueueNum, popFromRetryProbability (percent),
    # enableRetryTopicV2, retrieveMessageFromPopRetryTopicV1 — 5.3.3's defaults
    revive_queue_num: int = attrs.field(default=8, validator=_positive)
    pop_from_retry_probability: int = 20
    enable_retry_topic_v2: bool = False
    retrieve_message_from_pop_retry_topic_v1: bool = True

    @property
    def retention(self) -> Policy:
        """The clean service's policy (model/retention.py)."""
        return Policy.of(self.file_reserved_hours, self.delete_when, self.disk_max_used_space_ratio,
                         self.clean_file_forcibly_enable)

    @property
    def behaviour(self) -> Version:
        """The version profile's behaviours (``model/versions.py``)."""
        return VERSIONS[self.version]

    @property
    def timer_running(self) -> bool:
        """The broker has a timer wheel: a 5.x profile with ``timerWheelEnable`` (else, like 4.9, no
        ``rmq_sys_wheel_timer`` topic and no checkpoint; 5.x then refuses timer messages)."""
        return self.behaviour.timer_wheel and self.timer_wheel_enable

    @property
    def timer(self) -> TimerSettings:
        """The timer wheel's settings (5.x profiles; ``model/timer.py``)."""
        return TimerSettings(self.timer_wheel_enable, self.timer_precision_ms, self.timer_max_delay_sec,
                             self.timer_flush_interval_ms)

    @property
    def pop(self) -> PopSettings:
        """Pop's settings (5.x profiles; ``model/pop.py``)."""
        return PopSettings(self.revive_queue_num, self.pop_from_retry_probability, self.enable_retry_topic_v2,
                           self.retrieve_message_from_pop_retry_topic_v1)

    @property
    def delay_levels_ms(self) -> tuple[int, ...]:
        """Delay of level ``i`` is ``delay_levels_ms[i - 1]``."""
        return parse_delay_levels(self.message_delay_level)

    @property
    def max_delay_level(self) -> int:
        return len(self.delay_levels_ms)

    def delay_ms(self, level: int) -> int:
        """Delay for ``level`` after clamping to ``[1, max]`` (RocketMQ clamps at store time)."""
        levels = self.delay_levels_ms
        if level <= 0:
            raise ValueError(f"delay level must be ≥ 1, got {level}")
        return levels[min(level, len(levels)) - 1]


def default_config(version: str = DEFAULT_VERSION) -> BrokerConfig:
    """The defaults of a broker of ``version`` (``model/versions.py``): 4.9.8's, with the
    version's own where they differ."""
    behaviour = VERSIONS[version]
    return BrokerConfig(version=version, transaction_check_interval_ms=behaviour.default_check_interval_ms)
