"""Violation and observation codes (SPEC §8) and the audit's parameters (§8.1).

One name per guarantee: the Python invariant, the z3 theorem, the reference
trace checker and the Spark audit all report these codes.
"""

from __future__ import annotations

import enum

import attrs

from rmqspec.model.config import DEFAULT_DELAY_LEVELS, parse_delay_levels


class Code(enum.StrEnum):
    ORDER_QUEUE_GAP = "ORDER_QUEUE_GAP"
    ORDER_KEY_REORDERED = "ORDER_KEY_REORDERED"
    LOST = "LOST"
    UNEXPECTED = "UNEXPECTED"
    RETRY_EARLY = "RETRY_EARLY"
    DLQ_EARLY = "DLQ_EARLY"
    DLQ_MISSED = "DLQ_MISSED"
    DELAY_EARLY = "DELAY_EARLY"
    LOCK_OVERLAP = "LOCK_OVERLAP"
    ORDERLY_WITHOUT_LOCK = "ORDERLY_WITHOUT_LOCK"
    ORDERLY_CONCURRENT = "ORDERLY_CONCURRENT"
    OFFSET_OVERRUN = "OFFSET_OVERRUN"
    TXN_VISIBLE_BEFORE_COMMIT = "TXN_VISIBLE_BEFORE_COMMIT"
    TXN_ROLLBACK_VISIBLE = "TXN_ROLLBACK_VISIBLE"
    TXN_DOUBLE_RESOLVED = "TXN_DOUBLE_RESOLVED"
    TXN_CHECK_EARLY = "TXN_CHECK_EARLY"
    TXN_CHECK_EXCEEDED = "TXN_CHECK_EXCEEDED"
    TXN_UNRESOLVED = "TXN_UNRESOLVED"
    # issue 14: the deep lifecycle guarantees
    TXN_CHECK_AFTER_RESOLVED = "TXN_CHECK_AFTER_RESOLVED"
    TXN_DISCARD_EARLY = "TXN_DISCARD_EARLY"
    DLQ_DELAYED = "DLQ_DELAYED"
    SCHEDULE_DUPLICATED = "SCHEDULE_DUPLICATED"
    OFFSET_LOST = "OFFSET_LOST"
    # issue 15: message filtering
    FILTER_MISMATCH = "FILTER_MISMATCH"
    FILTER_SKIPPED = "FILTER_SKIPPED"
    # issue 41: model/lifecycle.py's tables replayed on the observations (properties/inv_tables.py)
    MESSAGE_LIFECYCLE = "MESSAGE_LIFECYCLE"
    LOCK_LIFECYCLE = "LOCK_LIFECYCLE"
    TXN_LIFECYCLE = "TXN_LIFECYCLE"
    # 5.x timer messages
    TIMER_EARLY = "TIMER_EARLY"
    TIMER_DUPLICATED = "TIMER_DUPLICATED"
    TIMER_UNFIRED = "TIMER_UNFIRED"
    # issue 42: per-key order (the producer's MessageQueueSelector)
    ORDER_KEY_SPLIT = "ORDER_KEY_SPLIT"
    # issue 42 (seed 001, B10): an orderly batch taken after its consume request's loop ran past
    # MAX_TIME_CONSUME_CONTINUOUSLY (the client's own ``orderly_start`` says how long it had run)
    ORDERLY_LOOP_OVERRUN = "ORDERLY_LOOP_OVERRUN"
    # issue 43: the producer across several brokers (properties/inv_route.py, the client's sendDefaultImpl):
    # a retry to the broker that just failed, an attempt into a broker's not-available window
    PRODUCER_RETRY_SAME_BROKER = "PRODUCER_RETRY_SAME_BROKER"
    PRODUCER_FAULT_WINDOW = "PRODUCER_FAULT_WINDOW"
    # issue 43: master/slave replication (properties/inv_replay_ha.py judges a pair's rows)
    HA_SYNC_ACK_UNREPLICATED = "HA_SYNC_ACK_UNREPLICATED"
    HA_SYNC_ACK_LOST = "HA_SYNC_ACK_LOST"
    HA_SLAVE_SERVED_UNSTORED = "HA_SLAVE_SERVED_UNSTORED"
    HA_SLAVE_BEYOND_REPLICATED = "HA_SLAVE_BEYOND_REPLICATED"
    HA_SLAVE_NOT_PREFIX = "HA_SLAVE_NOT_PREFIX"
    HA_SLAVE_WROTE = "HA_SLAVE_WROTE"


class ObservationCode(enum.StrEnum):
    DUPLICATED = "DUPLICATED"
    DUPLICATE_COMMIT = "DUPLICATE_COMMIT"
    RECOVERED = "RECOVERED"
    SUBSCRIPTION_INCONSISTENT = "SUBSCRIPTION_INCONSISTENT"
    # issue 42: two clients' orderly windows overlap because the earlier listener outlived its broker lock
    # and the broker then granted the queue to the later client (4.9 checks the lock only before a batch)
    ORDERLY_LOCK_OUTLIVED = "ORDERLY_LOCK_OUTLIVED"
    # issue 43: master/slave replication: an ASYNC_MASTER's disk loss took its unreplicated tail
    HA_ASYNC_TAIL_LOST = "HA_ASYNC_TAIL_LOST"


VIOLATION_CODES: tuple[str, ...] = tuple(c.value for c in Code)
OBSERVATION_CODES: tuple[str, ...] = tuple(c.value for c in ObservationCode)

# Codes that need a `drain` event to be judged (SPEC §8.1).
NEEDS_DRAIN: frozenset[str] = frozenset({Code.LOST, Code.TXN_UNRESOLVED, Code.TIMER_UNFIRED})


@attrs.frozen
class AuditParams:
    """Thresholds of the §8.1 rules; defaults are RocketMQ 4.9's."""

    delay_levels_ms: tuple[int, ...] = parse_delay_levels(DEFAULT_DELAY_LEVELS)
    retry_max_times: int = 16
    broker_lock_ms: int = 60_000
    client_lock_ms: int = 30_000
    transaction_timeout_ms: int = 6000
    transaction_check_max: int = 15
    file_reserved_ms: int = 72 * 3_600_000  # fileReservedTime: a half older than this is discarded unchecked
    # fileReservedTime the audited broker's retention deleted by, when the input gives it (the configuration's
    # fileReservedTimeMs, the conformance machine's broker): an ``expire`` of cause ``reserved`` that took a
    # copy stored less than this before it is judged (``traces/checks_retention.py``); None: not judged
    expire_reserved_ms: int | None = None
    # Per-group overrides of retry_max_times (group -> max).
    group_retry_max: tuple[tuple[str, int], ...] = ()
    # 5.1.0+ (model/versions.py ``op_batch``): COMMIT / ROLLBACK op messages are written by a batch
    # service of this period (transactionOpBatchInterval), not at the END; 0: at the END (4.9)
    op_batch_ms: int = 0

    @property
    def op_written_within_ms(self) -> int:
        """How long after an END its op message is surely written, barring a crash: at a batch pass
        at most two periods later, one more for a pass skipped because it started within a period
        of the last write (batchSendOpMessage); 0 without batching."""
        return 3 * self.op_batch_ms

    def retry_max(self, group: str | None) -> int:
        for name, value in self.group_retry_max:
            if name == group:
                return value
        return self.retry_max_times

    @property
    def shortest_delay_ms(self) -> int:
        """The shortest delay a scheduled copy waits (a DLQ copy is never scheduled)."""
        return min(self.delay_levels_ms)

    def delay_ms(self, level: int) -> int:
        """Delay of ``level`` clamped to the table (level ≥ 1)."""
        return self.delay_levels_ms[min(max(level, 1), len(self.delay_levels_ms)) - 1]
