"""False alarms on honest brokers (issue 14), each held by the exact program that raised it.

Every program here made both built-in factories fail before the fix; each must now pass on the
model and on the mmap broker, in lockstep and (where the failure was an invariant's) by the
invariants alone — and the invariant must still catch the real violation next to it.
"""

from __future__ import annotations

import pytest

from rmqspec.impl import factory as impl_factory
from rmqspec.model.broker import ModelBroker
from rmqspec.model.events import TraceEvent
from rmqspec.model.model_factory import factory as model_factory
from rmqspec.properties import invariants as inv
from rmqspec.properties.codes import AuditParams
from rmqspec.properties.history import History
from rmqspec.properties.program import Op, replay

FACTORIES = {"model": model_factory, "mmap": impl_factory}

# RETRY_EARLY paired a retry with the *latest* send-back of its UNIQ_KEY: a duplicate COMMIT makes
# two copies of one key; the level-1 retry of the first was judged against the level-2 due time of
# the second ("4000 ms early"), and the machine's expected fires were keyed the same way.
RETRY_SHARED_KEY = [
    Op.of("init", queues=1, retry_max=1, orderly_max=1, flush="SYNC"),
    Op.of("txn_send_half", topic=0, queue=0, plan="COMMIT"),
    Op.of("txn_end", which=0),
    Op.of("txn_recommit", which=0),
    Op.of("pull_consume", which=0, n=1, result="RECONSUME_LATER", ack_index=-1, level=1, max_choice="none"),
    Op.of("consume", which=0, n=2, result="RECONSUME_LATER", ack_index=-1, level=2, max_choice="none"),
    Op.of("advance_small", ms=1000),
]

# MAX_FORKS kept the 32 forks with the fewest survivors and dropped "all 33 records survive".
FORKS_BEYOND_THE_CAP = [
    Op.of("init", queues=1, retry_max=1, orderly_max=1, flush="ASYNC"),
    *[Op.of("send_batch", topic=0, queue=0, n=4)] * 8,
    Op.of("crash_recover", kind="power"),
]

# The saved check progress pointed past the half queue an ASYNC power loss truncated: the halves
# sent afterwards at the reused positions are never checked (real 4.9.8 does the same:
# docs/fidelity.md T1), and TXN_UNRESOLVED fired after the drain.
TXN_PROGRESS_AFTER_POWER_LOSS = [
    Op.of("init", queues=1, retry_max=1, orderly_max=1, flush="ASYNC"),
    *[Op.of("txn_send_half", topic=0, queue=0, plan="LOST")] * 3,
    Op.of("advance_large", ms=70_000),
    Op.of("crash_recover", kind="power"),
    *[Op.of("txn_send_half", topic=0, queue=0, plan="LOST")] * 4,
]

# Found by the 20-seed sweep (seed 2, MmapBroker): the op-queue progress is saved apart from the
# commitlog as well. The power loss truncates the op queue to nothing while the saved progress
# stays 1; the COMMIT of a half sent afterwards writes its op at position 0, which the check
# service never pulls (an empty queue and an offset equal to its end are NO_NEW_MSG: no
# correction), so the committed copy is checked again: TXN_CHECK_AFTER_RESOLVED fired
# (docs/fidelity.md T3).
OP_PROGRESS_AFTER_POWER_LOSS = [
    Op.of("init", flush="ASYNC", orderly_max=0, queues=1, retry_max=4, swarm=0),
    Op.of("txn_half_before_check", queue=0, topic=0),
    Op.of("power_ladder", level=1, n=1),
    Op.of("txn_send_half", plan="COMMIT", queue=0, topic=0),
    Op.of("txn_end", which=1),
    Op.of("dlq_ladder", group=0, level=0, max_choice="none"),
    Op.of("crash_recover", kind="power"),
    Op.of("dlq_ladder", group=0, level=0, max_choice="none"),
    Op.of("dlq_ladder", group=0, level=0, max_choice="group"),
    Op.of("txn_send_half", plan="LOST", queue=0, topic=0),
]

# Found while fixing the one above: consumer offsets are saved apart from the commitlog too. A group
# that consumed and committed unflushed messages resumes, after the power loss, from its saved
# offset past the truncated queue and skips the new messages at the reused positions
# (apache/rocketmq#8239; docs/fidelity.md T2): LOST fired after the drain.
OFFSETS_PAST_A_TRUNCATED_QUEUE = [
    Op.of("init", queues=1, retry_max=1, orderly_max=1, flush="ASYNC"),
    Op.of("send_batch", topic=0, queue=0, n=4),
    Op.of("pull_consume", which=0, n=4, result="SUCCESS", ack_index=-1, level=0, max_choice="none"),
    Op.of("advance_small", ms=6000),
    Op.of("crash_recover", kind="power"),
    Op.of("send_batch", topic=0, queue=0, n=4),
    Op.of("send_batch", topic=0, queue=0, n=4),
]

# Found with the ladders (long clock jumps leave checks unanswered): the producer answers an old
# check COMMIT, which names an older copy of the half, so the newest re-put copy is checked on and
# discarded (RocketMQ 4.9 does this); a duplicate COMMIT afterwards was called "resolved after
# discard" (TXN_DOUBLE_RESOLVED). A transaction committed before a discard stays committed.
COMMIT_BEFORE_DISCARD_THEN_RECOMMIT = [
    Op.of("init", flush="SYNC", orderly_max=0, queues=1, retry_max=16, swarm=0),
    Op.of("txn_half_before_check", queue=-1000, topic=0),
    Op.of("dlq_ladder", group=0, level=0, max_choice="group"),
    Op.of("orderly_rebalance", mq=0, to=0),
    Op.of("answer_check", answer="COMMIT", lose=False, which=0),
    Op.of("orderly_takeover", mq=0, to=0),
    Op.of("txn_recommit", which=0),
]

# Found by the 300 × 80 honest runs: a copy re-consumed after a kill is sent back again; the first
# retry fires, then a power loss makes it fire again (at-least-once). The machine paired that
# re-fire with the second send-back's expected fire (due later) and reported DELAY_EARLY.
REFIRE_AFTER_CRASH = [
    Op.of("init", flush="SYNC", orderly_max=0, queues=1, retry_max=1),
    Op.of("send_batch", n=1, queue=0, topic=0),
    Op.of("pull_consume", ack_index=0, level=0, max_choice="group", n=1, result="EXCEPTION", which=0),
    Op.of("advance_small", ms=1418),
    Op.of("crash_recover", kind="kill"),
    Op.of("advance_small", ms=8738),
    Op.of("pull_consume", ack_index=0, level=0, max_choice="none", n=1, result="NULL", which=0),
    Op.of("crash_recover", kind="power"),
]

# Found with an honest broker that loses everything unflushed (as the mmap store does): the half
# survives, the re-put copies the checks wrote do not, and the saved check progress is already
# past the half: it is never checked again. The half was not "at risk" because a check's re-put
# was not counted as a write that a power loss may take.
REPUT_LOST_WITH_THE_POWER = [
    Op.of("init", flush="ASYNC", orderly_max=0, queues=1, retry_max=0, swarm=0),
    Op.of("txn_send_half", plan="LOST", queue=0, topic=0),
    Op.of("power_ladder", level=1, n=1),
    Op.of("orderly_ladder", client=0, queue=0),
    Op.of("crash_recover", kind="power"),
]


# Found by the 20-seed sweep (seed 13, MmapBroker): the delay progress (delayOffset.json) is saved
# apart from the commitlog too. The power losses truncate the level-1 schedule queue; correctDelayOffset
# clamps the saved progress in memory only, so the kill that follows reads the old progress again and
# the delayed message sent in between, at the reused position 0, never fires (real 4.9.8 does the
# same, docs/fidelity.md T4): LOST fired after the drain.
DELAY_PROGRESS_READ_AGAIN_AFTER_A_KILL = [
    Op.of("init", flush="ASYNC", orderly_max=0, queues=1, retry_max=0, swarm=0),
    Op.of("power_ladder", level=1, n=1),
    Op.of("crash_recover", kind="power"),
    Op.of("send_delayed", level=1, queue=0, topic=0),
    Op.of("crash_recover", kind="kill"),
]

class MinimalSurvivor(ModelBroker):
    """An honest broker whose power loss keeps only the flushed prefix (the other extreme)."""

    def recover(self, survivors: int | None = None) -> None:
        super().recover(self.recovery_choices()[0] if survivors is None else survivors)


@pytest.mark.parametrize("broker", sorted(FACTORIES))
def test_retries_of_two_copies_sharing_a_key(broker: str) -> None:
    machine = replay(RETRY_SHARED_KEY, FACTORIES[broker])
    assert machine.coverage["retry_fired"] >= 2 and machine.coverage["txn_end:COMMIT:SUCCESS"] >= 2
    replay(RETRY_SHARED_KEY, FACTORIES[broker], lockstep=False)


def _ev(h: History, event: str, ts: int, **fields) -> None:
    h.emit(event, ts, **fields)


def test_retry_early_still_caught_by_copy() -> None:
    """The two copies' retries are told apart by ORIGIN_MESSAGE_ID: the level-2 copy's retry
    visible at the level-1 due time is early although the other copy's retry is due then."""
    h = History(params=AuditParams())
    back = {"code": "SUCCESS"}
    _ev(h, "send_back", 0, group="G", msg_key="K", reconsume_times=1, delay_level=1, deliver_ts=1000,
        status="RETRY", detail={**back, "origin": "A"})
    _ev(h, "send_back", 0, group="G", msg_key="K", reconsume_times=1, delay_level=2, deliver_ts=5000,
        status="RETRY", detail={**back, "origin": "B"})
    _ev(h, "store", 1000, topic="%RETRY%G", queue_id=0, queue_offset=0, msg_key="K", reconsume_times=1,
        detail={"origin": "A"})
    assert inv.check_retry_early(h) == []
    _ev(h, "store", 1000, topic="%RETRY%G", queue_id=0, queue_offset=1, msg_key="K", reconsume_times=1,
        detail={"origin": "B"})
    [v] = inv.check_retry_early(h)
    assert v.code == "RETRY_EARLY" and "4000 ms early" in v.reason


@pytest.mark.parametrize("broker", sorted(FACTORIES))
def test_every_survivor_count_stays_allowed_beyond_the_fork_cap(broker: str) -> None:
    machine = replay(FORKS_BEYOND_THE_CAP, FACTORIES[broker])
    assert machine.coverage["recovery_forked"] == 1


class MiddleSurvivor(ModelBroker):
    """An honest broker whose power loss keeps a prefix in the middle of the allowed range: the
    lockstep's live forks hold the extremes, so only a reserved choice can match it."""

    def recover(self, survivors: int | None = None) -> None:
        choices = self.recovery_choices()
        super().recover(survivors=choices[len(choices) // 2] if survivors is None else survivors)


def test_a_reserved_choice_is_materialized_when_the_live_forks_are_refuted() -> None:
    machine = replay(FORKS_BEYOND_THE_CAP, lambda clock, config, workdir: MiddleSurvivor(clock, config))
    assert machine.ls.truncated > 0, "more allowed survivor counts than live forks"
    assert len(machine.ls.forks) >= 1


@pytest.mark.parametrize("lockstep", [True, False], ids=["lockstep", "invariants-only"])
@pytest.mark.parametrize("broker", sorted(FACTORIES))
def test_txn_check_progress_after_async_power_loss(broker: str, lockstep: bool) -> None:
    machine = replay(TXN_PROGRESS_AFTER_POWER_LOSS, FACTORIES[broker], lockstep=lockstep)
    assert machine.coverage["crash_recover:power"] == 1


def test_skipped_halves_are_only_reused_positions_after_a_power_loss() -> None:
    def half(seq: int, key: str, pos: int) -> TraceEvent:
        return TraceEvent(seq=seq, ts=seq, event="txn_half", msg_key=key, queue_offset=pos)

    events = [half(0, "A", 0), half(1, "B", 1),
              TraceEvent(seq=2, ts=2, event="txn_check", msg_key="A", queue_offset=2),
              TraceEvent(seq=3, ts=3, event="crash", status="kill"), half(4, "C", 3),
              TraceEvent(seq=5, ts=5, event="crash", status="power"),
              half(6, "D", 0), half(7, "E", 3), half(8, "F", 4)]
    assert inv.skipped_by_saved_progress(events) == {"D", "E"}


@pytest.mark.parametrize("lockstep", [True, False], ids=["lockstep", "invariants-only"])
@pytest.mark.parametrize("broker", sorted(FACTORIES))
def test_op_progress_saved_past_a_truncated_op_queue(broker: str, lockstep: bool) -> None:
    machine = replay(OP_PROGRESS_AFTER_POWER_LOSS, FACTORIES[broker], lockstep=lockstep)
    assert machine.coverage["crash_recover:power"] >= 1


def test_unseen_ops_are_the_next_ops_after_a_power_loss_that_lost_ops() -> None:
    def end(seq: int, key: str) -> TraceEvent:
        return TraceEvent(seq=seq, ts=seq, event="txn_end", status="COMMIT", msg_key=key, queue_offset=seq)

    events = [end(0, "A"), end(1, "B"),
              TraceEvent(seq=2, ts=2, event="crash", status="kill", detail={"at_risk": ["A", "B"]}),
              end(3, "C"),
              TraceEvent(seq=4, ts=4, event="crash", status="power", detail={"at_risk": ["B", "C", "Z"]}),
              end(5, "D"), end(6, "E"), end(7, "F"),
              TraceEvent(seq=8, ts=8, event="crash", status="power", detail={"at_risk": ["Q"]}),
              end(9, "G")]
    assert inv.unseen_ops(events) == {5, 6}  # two ops (B, C) may be lost: the next two are unseen


@pytest.mark.parametrize("lockstep", [True, False], ids=["lockstep", "invariants-only"])
@pytest.mark.parametrize("broker", sorted(FACTORIES))
def test_consumer_offsets_saved_past_a_truncated_queue(broker: str, lockstep: bool) -> None:
    machine = replay(OFFSETS_PAST_A_TRUNCATED_QUEUE, FACTORIES[broker], lockstep=lockstep)
    assert machine.coverage["crash_recover:power"] == 1


def test_skipped_sends_are_only_reused_positions_below_a_commit() -> None:
    events = [TraceEvent(seq=0, ts=0, event="commit_offset", group="G", topic="T", queue_id=0, queue_offset=2),
              TraceEvent(seq=1, ts=1, event="send", topic="T", queue_id=0, queue_offset=1, msg_key="A"),
              TraceEvent(seq=2, ts=2, event="crash", status="power"),
              TraceEvent(seq=3, ts=3, event="send", topic="T", queue_id=0, queue_offset=1, msg_key="B"),
              TraceEvent(seq=4, ts=4, event="send", topic="T", queue_id=0, queue_offset=2, msg_key="C"),
              TraceEvent(seq=5, ts=5, event="send", topic="T", queue_id=1, queue_offset=0, msg_key="D")]
    assert inv.skipped_by_saved_offsets(events) == {("G", "B")}


@pytest.mark.parametrize("broker", sorted(FACTORIES))
def test_a_duplicate_commit_after_the_newest_copy_was_discarded(broker: str) -> None:
    machine = replay(COMMIT_BEFORE_DISCARD_THEN_RECOMMIT, FACTORIES[broker])
    assert machine.coverage["txn_discard"] >= 1
    assert machine.observations["DuplicateCommitObservation"] >= 1
    replay(COMMIT_BEFORE_DISCARD_THEN_RECOMMIT, FACTORIES[broker], lockstep=False)


@pytest.mark.parametrize("lockstep", [True, False], ids=["lockstep", "invariants-only"])
def test_a_retry_fired_again_after_a_crash_is_not_the_next_one(lockstep: bool) -> None:
    machine = replay(REFIRE_AFTER_CRASH, model_factory, lockstep=lockstep)
    assert machine.coverage["crash_recover:power"] == 1


@pytest.mark.parametrize("lockstep", [True, False], ids=["lockstep", "invariants-only"])
@pytest.mark.parametrize("broker", ["minimal-survivor", "mmap"])
def test_a_half_whose_reput_copies_were_lost(broker: str, lockstep: bool) -> None:
    factory = impl_factory if broker == "mmap" else (lambda clock, config, workdir: MinimalSurvivor(clock, config))
    machine = replay(REPUT_LOST_WITH_THE_POWER, factory, lockstep=lockstep)
    assert machine.coverage["txn_check"] >= 1 and machine.coverage["crash_recover:power"] == 2


@pytest.mark.parametrize("lockstep", [True, False], ids=["lockstep", "invariants-only"])
@pytest.mark.parametrize("broker", sorted(FACTORIES))
def test_delay_progress_read_again_after_a_kill(broker: str, lockstep: bool) -> None:
    machine = replay(DELAY_PROGRESS_READ_AGAIN_AFTER_A_KILL, FACTORIES[broker], lockstep=lockstep)
    assert machine.coverage["crash_recover:kill"] == 1


def test_skipped_delayed_copies_are_reused_positions_a_crash_found_unfired() -> None:
    def store(seq: int, key: str, q: int, pos: int) -> TraceEvent:
        return TraceEvent(seq=seq, ts=seq, event="store", topic="SCHEDULE_TOPIC_XXXX", queue_id=q,
                          queue_offset=pos, msg_key=key)

    def fire(seq: int, key: str) -> TraceEvent:
        return TraceEvent(seq=seq, ts=seq, event="schedule_fire", topic="T", queue_id=0, msg_key=key)

    events = [store(0, "A", 0, 0), store(1, "B", 0, 1), fire(2, "A"), fire(3, "B"),
              TraceEvent(seq=4, ts=4, event="crash", status="kill"), store(5, "C", 0, 2),
              TraceEvent(seq=6, ts=6, event="crash", status="power"),
              store(7, "D", 0, 0), store(8, "E", 0, 1), fire(9, "E"), store(10, "F", 0, 3), store(11, "G", 1, 0),
              TraceEvent(seq=12, ts=12, event="crash", status="kill"),
              store(13, "H", 0, 2)]
    # D and E reuse positions (below 3); E fired before the kill; H is stored after it, no crash follows
    assert inv.skipped_by_saved_delay_progress(events) == {"D"}


# Issue 41: an admin rewind of a group's offset (``offset_reset``) re-delivers what the group had
# consumed — an observation (DuplicatedObservation), which the strict profile counts as a
# violation: test_strict_profile_passes_for_the_model_without_lockstep failed with DUPLICATED on
# the model. The machine was wrong (a broker must re-deliver after a rewind): it rewinds only
# outside ``strict`` now.
REWIND_IN_STRICT = [
    Op.of("init", flush="ASYNC", orderly_max=0, queues=1, retry_max=0, swarm=0),
    Op.of("send_plain", keys=(), props=False, queue=0, tags="TagA", topic=0),
    Op.of("dlq_ladder", group=0, level=0, max_choice="none"),
    Op.of("offset_reset", pick=0, which=0),
]


@pytest.mark.parametrize("broker", sorted(FACTORIES))
def test_no_admin_rewind_in_the_strict_profile(broker: str) -> None:
    machine = replay(REWIND_IN_STRICT, FACTORIES[broker], profile="strict", lockstep=False)
    assert machine.coverage["offset_reset:rewound"] == 0


def test_an_admin_rewind_re_delivers_as_an_observation() -> None:
    machine = replay(REWIND_IN_STRICT, model_factory)
    assert machine.coverage["offset_reset:rewound"] == 1
    assert machine.observations["DuplicatedObservation"] >= 1


# Found by `python -m bench seeds` (rmqspec conform at 300 × 80, seeds 1, 6, 7 on the mmap broker).
# Seed 1: 31 halves in 200-byte consume-queue files, none flushed, then a power loss — the mmap
# broker read only the last three files (RocketMQ's ConsumeQueue.recover) and kept offsets 0–9.
CQ_FIRST_FILES_LOST = [
    Op.of("init", files=(4096, 200), flush="ASYNC", orderly_max=0, queues=1, retry_max=0, swarm=0),
    Op.of("txn_ladder", queue=0, topic=0),
    Op.of("crash_recover", kind="power"),
    Op.of("txn_ladder", queue=0, topic=0),
]
# Seed 6: an orderly batch at its retry limit whose DLQ send-back the broker refuses (a properties
# string at 32767 chars grows past it): the reference client committed past the message anyway.
ORDERLY_DLQ_REFUSED = [
    Op.of("init", flush="SYNC", orderly_max=0, queues=1, retry_max=0, swarm=0),
    Op.of("send_edge", pick=0, which=0),
    Op.of("orderly_lock", client=0, mask=1),
    Op.of("orderly_begin", n=1, which=0),
    Op.of("orderly_finish", result="SUSPEND", which=0),
]
# Seed 7: a retry copy fired unobserved into the unflushed CommitLog, the delay progress persisted
# past it, then a power loss: LOST, though the copy was never durable (ASYNC).
FIRE_LOST_PROGRESS_KEPT = [
    Op.of("init", files=(4096, 200), flush="ASYNC", orderly_max=0, queues=2, retry_max=0, swarm=0),
    Op.of("dlq_ladder", family="batch", group=0, level=0, max_choice=8),
    Op.of("timer_ladder", v=0),
    Op.of("send_batch", n=3, queue=1, topic=0),
    Op.of("pull_consume", ack_index=0, level=0, max_choice=-1, n=4, result="SUCCESS", which=0),
    Op.of("power_ladder", level=1, n=1),
]


@pytest.mark.parametrize("lockstep", [True, False], ids=["lockstep", "invariants-only"])
@pytest.mark.parametrize("broker", sorted(FACTORIES))
@pytest.mark.parametrize("program", ["cq_first_files", "orderly_dlq_refused", "fire_lost"])
def test_what_the_honest_brokers_did_at_300_by_80(program: str, broker: str, lockstep: bool) -> None:
    ops = {"cq_first_files": CQ_FIRST_FILES_LOST, "orderly_dlq_refused": ORDERLY_DLQ_REFUSED,
           "fire_lost": FIRE_LOST_PROGRESS_KEPT}[program]
    machine = replay(ops, FACTORIES[broker], lockstep=lockstep)
    label = {"cq_first_files": "crash_recover:power", "orderly_dlq_refused": "orderly_dlq_refused",
             "fire_lost": "power_ladder:crashed"}[program]
    assert machine.coverage[label] >= 1
