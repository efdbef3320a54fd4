"""Two false alarms on honest brokers, each held by the drawn program that raised it (both built-in brokers
failed it before the fix, in lockstep and by the invariants alone).

- A delayed copy fired at the tick before a power loss fires again after it (the delay progress,
  delayOffset.json, is persisted apart every 10 s): a refire after a crash, which SCHEDULE_DUPLICATED allows.
  The machine had not revealed the first fire before the crash, so the trace put both fires after it.
- An orderly client that kept a queue another client took while its batch ran (the rebalance's consume lock:
  ``rebalance_kept_in_batch``) has marked that process queue dropped (4.9.8's updateProcessQueueTableInRebalance
  sets it before removeUnnecessaryMessageQueue): when the queue comes back to it later, it pulls from the
  broker's offset into a new process queue. The machine reused the stale one, consumed a message the group had
  already consumed, suspended it, and the other client's commit past it was judged OFFSET_OVERRUN.
"""

from __future__ import annotations

import pytest

from rmqspec.impl import factory as impl_factory
from rmqspec.model.model_factory import factory as model_factory
from rmqspec.properties.program import Op, replay

FACTORIES = {"model": model_factory, "mmap": impl_factory}

# found by a 150 × 60 run of the mmap broker (ASYNC config, seed 5)
FIRED_AT_THE_TICK_BEFORE_A_POWER_LOSS = [
    Op.of("init", flush="SYNC", orderly_max=0, queues=1, retry_max=0, swarm=0),
    Op.of("send_delayed", level=1, queue=0, topic=0),
    Op.of("disk_stall", ms=1250, n=1, then="recovered_power"),
]

# found by tests/test_broken_brokers.py's default-budget runs (the honest brokers fail it alike)
STALE_PROCESS_QUEUE_REUSED = [
    Op.of("init", flush="ASYNC", host="::1", orderly_max=1, queues=1, retry_max=0, swarm=155),
    Op.of("orderly_ladder", client=0, family="props", queue=0),
    Op.of("send_plain", keys=(), props=False, queue=0, tags="TagA", topic=0),
    Op.of("orderly_begin", n=1, which=0),
    Op.of("orderly_finish", result="SUCCESS", which=0),
    Op.of("consume_timeout", group=0, queue=0),
    Op.of("orderly_takeover", mq=0, to=0),
    Op.of("orderly_begin", n=1, which=0),
    Op.of("orderly_finish", result="SUSPEND", which=0),
    Op.of("deadline_walk", which=1),
]


@pytest.mark.parametrize("lockstep", [True, False], ids=["lockstep", "invariants-only"])
@pytest.mark.parametrize("broker", sorted(FACTORIES))
def test_a_copy_fired_at_the_tick_before_a_power_loss_fires_again(broker: str, lockstep: bool) -> None:
    machine = replay(FIRED_AT_THE_TICK_BEFORE_A_POWER_LOSS, FACTORIES[broker], lockstep=lockstep)
    assert machine.coverage["crash_recover:power"] == 1
    fires = [e for e in machine.history.events if e.event == "schedule_fire"]
    crash = next(e.seq for e in machine.history.events if e.event == "crash")
    assert len(fires) == 2 and fires[0].seq < crash < fires[1].seq


@pytest.mark.parametrize("lockstep", [True, False], ids=["lockstep", "invariants-only"])
@pytest.mark.parametrize("broker", sorted(FACTORIES))
def test_a_queue_kept_during_a_batch_comes_back_with_a_new_process_queue(broker: str, lockstep: bool) -> None:
    machine = replay(STALE_PROCESS_QUEUE_REUSED, FACTORIES[broker], lockstep=lockstep)
    assert machine.coverage["rebalance_kept_in_batch"] >= 1
