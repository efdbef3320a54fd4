"""The store's file geometry of an in-process conformance example (properties/composite.py
``FILE_GEOMETRIES``): drawn from the swarm integer's other bits, recorded as ``init``'s ``files``, and
what small files make the mmap broker do — records rolled to the next file, queues across files, a
recovery that scans several — in lockstep with the model."""

from __future__ import annotations

from pathlib import Path

from rmqspec.impl import factory as impl_factory
from rmqspec.model.config import BrokerConfig
from rmqspec.properties.composite import FILE_GEOMETRIES, _swarm_mask, _swarm_value, split_swarm
from rmqspec.properties.conformance import conformance_machine
from rmqspec.properties.program import Op

SMALL = (4096, 200)


def test_the_geometry_rides_on_the_swarm_draw_without_changing_the_mask() -> None:
    seen = set()
    for seed in range(0, 2**32, 2**32 // 997):
        mask, files = split_swarm(_swarm_value(seed))
        assert mask == _swarm_mask(seed)
        seen.add(files)
    assert seen == set(FILE_GEOMETRIES)
    assert split_swarm(86) == (86, None), "a recorded mask (below 256) means RocketMQ's default files"


def _store_files(machine: object, name: str) -> list[Path]:
    root = Path(machine.ls.candidate.store.root) / name
    return sorted(p for p in root.rglob("*") if p.is_file())


def test_small_files_roll_records_and_queues_over_and_recover_in_lockstep() -> None:
    """50 sends of about 190 bytes fill several 4 KiB commitlog files (a blank ends each) and queue 0's
    10-unit consume-queue files; a power loss and a clean restart recover across them; the model
    agrees on every offset (lockstep) and the recorded program names the files."""
    program = [Op.of("init", flush="SYNC", orderly_max=0, queues=1, retry_max=0, swarm=0, files=SMALL)]
    program += [Op.of("send_plain", topic=0, queue=0, tags="TagA", keys=(), props=True)] * 50
    program += [Op.of("consume_next", n=8)] * 4
    program += [Op.of("power_ladder", level=1, n=2), Op.of("restart_ladder", level=1, down_ms=0)]
    program += [Op.of("consume_next", n=8)] * 3
    m = conformance_machine(impl_factory)()
    try:
        for op in program:
            getattr(m, op.rule)(**op.kwargs())
            m.check_always()
        assert m.program[0].kwargs()["files"] == SMALL
        assert m.config.commitlog_file_size == 4096 and m.config.consume_queue_file_size == 200
        assert len(_store_files(m, "commitlog")) >= 3
        queue0 = [p for p in _store_files(m, "consumequeue") if p.parent.parent.name == "T0" + m.ns]
        assert len([p for p in queue0 if p.parent.name == "0"]) >= 2
        assert m.coverage["power_ladder:crashed"] >= 1 and m.coverage["restart_ladder"] >= 1
    finally:
        m.teardown()


def test_a_users_file_sizes_stand() -> None:
    """--config's mappedFileSizeCommitLog is the user's choice: no drawn geometry replaces it."""
    config = BrokerConfig(commitlog_file_size=1 << 26)
    machine = conformance_machine(impl_factory, config=config)()
    try:
        machine.init(queues=1, retry_max=0, orderly_max=0, swarm=_swarm_value(_seed_for(SMALL)))
        assert machine.config.commitlog_file_size == 1 << 26
        assert "files" not in machine.program[0].kwargs()
    finally:
        machine.teardown()


def _seed_for(files: tuple[int, int]) -> int:
    return next(s for s in range(10_000) if split_swarm(_swarm_value(s))[1] == files)


def test_the_geometry_depends_on_the_draw_alone_not_on_the_examples_run_before() -> None:
    """Hypothesis re-runs a prefix of choices and requires the same draws: a geometry that turned
    with the run's example count made it raise FlakyStrategyDefinition (300 × 80, seed 2)."""
    cls = conformance_machine(impl_factory)
    swarm = _swarm_value(_seed_for(SMALL))
    seen = []
    for earlier in (0, 1, 2, 3):
        cls.examples[:] = [1] * earlier
        machine = cls()
        try:
            machine.init(queues=1, retry_max=0, orderly_max=0, swarm=swarm)
            seen.append((machine.config.commitlog_file_size, machine.config.consume_queue_file_size))
        finally:
            machine.teardown()
    assert seen == [SMALL] * 4
