"""The conformance machine's ghost history: what it *observed*, as SPEC §8 events.

Theory of operation
-------------------
The conformance machine never reads a broker's internals. Everything the
invariants judge is an observation the machine made through the ``Broker``
protocol, written down here as one ``TraceEvent`` per observation:

- ``send`` / ``txn_half``: an acknowledged ``SendResult`` (what was acked);
- ``store``: a stored copy the machine *revealed* by pulling a queue with its
  private observer group, in queue order (user topics, ``%RETRY%``/``%DLQ%``
  topics, ``SCHEDULE_TOPIC_XXXX``, ``TRANS_CHECK_MAX_TIME_TOPIC``); ``ts`` is
  the clock when it became visible;
- ``schedule_fire``: a delayed or retry copy that became visible in its
  destination topic;
- ``deliver`` / ``consume`` / ``send_back`` / ``commit_offset``: the reference
  consumer's pulls, listener results, CONSUMER_SEND_MSG_BACK requests (with
  the routing the client expects; where the copy really landed is the later
  ``store``) and the offset the broker reports after UPDATE_CONSUMER_OFFSET;
- ``lock`` / ``unlock`` / ``orderly_start`` / ``orderly_end``;
- ``txn_end`` (only when the broker answered SUCCESS), ``txn_check`` (a
  CheckRequest returned by ``tick``), ``txn_discard`` (a copy revealed in
  ``TRANS_CHECK_MAX_TIME_TOPIC``);
- ``crash`` / ``recover`` / ``drain``.

Events with ``trace=False`` are kept for the invariants but not forwarded to
the external recorder (the observer's filtered probe pulls): the forwarded
stream is exactly a SPEC §8 trace a correct broker's run satisfies §8.1 on.

The history is fenced off (STYLE lesson 6): broker logic never reads it, and
the machine's own decisions read only its small indices (``pending_*``).
"""

from __future__ import annotations

from typing import Any

import attrs

from rmqspec.model.config import BrokerConfig
from rmqspec.model.events import NullRecorder, Recorder, TraceEvent
from rmqspec.properties.codes import AuditParams

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
OP_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
DISCARD_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"
SYSTEM_TOPICS = frozenset({SCHEDULE_TOPIC, HALF_TOPIC, OP_TOPIC, DISCARD_TOPIC})

# The reference client's lock lifetime (rocketmq.client.rebalance.lockMaxLiveTime).
CLIENT_LOCK_MS = 30_000


def retry_topic(group: str) -> str:
    return RETRY_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_PREFIX + group


def group_of(topic: str | None) -> str | None:
    """The consumer group a ``%RETRY%``/``%DLQ%`` topic belongs to, else None."""
    if topic is None:
        return None
    for prefix in (RETRY_PREFIX, DLQ_PREFIX):
        if topic.startswith(prefix):
            return topic[len(prefix):]
    return None


def is_visible_topic(topic: str | None) -> bool:
    """Topics a consumer can see a message in (user topics and retry topics)."""
    return topic is not None and topic not in SYSTEM_TOPICS and not topic.startswith(DLQ_PREFIX)


def audit_params(config: BrokerConfig) -> AuditParams:
    return AuditParams(
        delay_levels_ms=config.delay_levels_ms,
        broker_lock_ms=config.broker_lock_max_live_ms,
        client_lock_ms=CLIENT_LOCK_MS,
        transaction_timeout_ms=config.transaction_timeout_ms,
        transaction_check_max=config.transaction_check_max,
        file_reserved_ms=config.file_reserved_hours * 3_600_000,
        expire_reserved_ms=config.file_reserved_hours * 3_600_000,
        op_batch_ms=_op_lag_ms(config),
    )


def _op_lag_ms(config: BrokerConfig) -> int:
    """``AuditParams.op_batch_ms``: 5.1.0+'s op batch period; with a TransientStorePool (model/committing.py) an
    END's op is readable to the check service only once committed, at the latest at the first tick
    ``CommitRealTime.catch_up_ms`` (400 ms) after the END: the rules take it as surely written
    3 × commitCommitLogThoroughInterval (600 ms) after it (fidelity TS1)."""
    batch = config.transaction_op_batch_interval_ms if config.behaviour.op_batch else 0
    if config.transient_store_pool:
        return max(batch, config.commit_commitlog_thorough_interval_ms)
    return batch


@attrs.define
class History:
    """Observations in order; ``step_of[seq]`` is the machine step that made each one."""

    params: AuditParams
    recorder: Recorder = attrs.field(factory=NullRecorder)
    events: list[TraceEvent] = attrs.field(factory=list)
    traced: list[bool] = attrs.field(factory=list)
    step_of: list[int] = attrs.field(factory=list)
    step: int = 0
    # group -> topics it consumes (concurrently or orderly); LOST is judged per pair.
    subscriptions: dict[str, set[str]] = attrs.field(factory=dict)
    # groups that consume orderly (their locks and windows are judged)
    orderly_groups: set[str] = attrs.field(factory=set)
    # (from, to) instants the conformance machine held the store's disk full (conform_retention.py): the
    # broker's own writes then fail unseen (a discard's copy is lost, the half with it); ``forcible``:
    # those it held it over 0.85 (a pass then deletes every commitlog file but the last at once)
    disk_full: list[tuple[int, int]] = attrs.field(factory=list)
    forcible: list[tuple[int, int]] = attrs.field(factory=list)

    @classmethod
    def for_config(cls, config: BrokerConfig, recorder: Recorder | None = None) -> History:
        return cls(params=audit_params(config), recorder=recorder or NullRecorder())

    def set_group_max(self, group: str, retry_max: int) -> None:
        rest = tuple((g, m) for g, m in self.params.group_retry_max if g != group)
        self.params = attrs.evolve(self.params, group_retry_max=(*rest, (group, retry_max)))

    def emit(self, event: str, ts: int, *, trace: bool = True, **fields: Any) -> TraceEvent:
        ev = TraceEvent(seq=len(self.events), ts=ts, event=event, **fields)
        self.events.append(ev)
        self.traced.append(trace)
        self.step_of.append(self.step)
        if trace:
            self.recorder.emit(event, ts, **fields)
        return ev

    def of(self, *names: str) -> list[TraceEvent]:
        return [e for e in self.events if e.event in names]

    def drained(self) -> bool:
        return any(e.event == "drain" for e in self.events)
