"""5.x timer copies whose records retention deleted (fidelity TW-6): skipped at the enqueue and at a restart's
rebuild of the wheel, released when due — nothing re-put, and the mmap broker recovers."""

from __future__ import annotations

from rmqspec.properties.adapters import load_factory
from rmqspec.properties.program import Op, replay

# found by tests/model/test_versions.py's default run under rocketmq-5.1: with 4 KiB files retention takes the
# file of timer-queue entries the wheel still held, and the second power loss's recovery read a deleted record
PROGRAM = [
    Op.of("init", files=(4096, 200), flush="SYNC", orderly_max=0, queues=1, retry_max=16, swarm=0),
    Op.of("power_ladder", level=1, n=1),
    Op.of("dlq_ladder", family="timer", group=0, level=19, max_choice="client"),
    Op.of("dlq_ladder", family="oneway", group=0, level=19, max_choice=-1),
    Op.of("dlq_ladder", family="batch", group=0, level=17, max_choice="none"),
    Op.of("power_ladder", level=1, n=1),
]


def test_the_mmap_broker_recovers_past_deleted_timer_records_in_lockstep() -> None:
    machine = replay(PROGRAM, load_factory("rmqspec.impl:factory"), profile="rocketmq-5.1")
    assert machine.coverage["retention:observed:commitlog"] > 0  # the commitlog min moved
    assert machine.coverage["crash_recover:power"] >= 2
