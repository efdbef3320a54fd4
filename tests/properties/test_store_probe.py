"""The store probe (``properties/store_probe.py``): the pristine reader judges a candidate's store.

A store the honest mmap broker left after a clean shutdown passes; each kind of damage a broken
writer could leave (a torn record byte, a stale checkpoint, a left-over abort file, a consumer offset
or a topic never persisted) is a named violation; a directory without a store is not judged.
"""

from __future__ import annotations

import struct
from pathlib import Path

from rmqspec.impl.broker import MmapBroker
from rmqspec.impl.checkpoint import Checkpoint, read_checkpoint, write_checkpoint
from rmqspec.model import ManualClock, Message, MessageQueue
from rmqspec.model.protocol import Capability
from rmqspec.properties.store_probe import StoreExpectation, probe_store

START = 1_700_000_000_000
T0 = MessageQueue("T", 0)


def _store(root: Path) -> dict[tuple[str, str, int], int]:
    """A closed store: three messages on T, an offset committed; the answers before the shutdown."""
    clock = ManualClock(START)
    b = MmapBroker.open(root, clock)
    b.create_topic("T", 2)
    for i in range(3):
        clock.advance(5)
        b.send(Message("T", b"body-%d" % i, tags="A"), i % 2)
    b.update_offset("g", T0, 2)
    answered = {("g", "T", 0): b.query_offset("g", T0)}
    b.close()
    return answered


def _codes(root: Path, **kw: object) -> list[str]:
    found = probe_store(root, StoreExpectation(**kw))  # type: ignore[arg-type]
    assert found is not None
    return [v.code for v in found]


def test_honest_store_passes(tmp_path: Path) -> None:
    answered = _store(tmp_path)
    assert _codes(tmp_path, closed=True, topics={"T": 2}, offsets=answered) == []
    assert _codes(tmp_path) == []


def test_not_a_store_is_not_judged(tmp_path: Path) -> None:
    assert probe_store(tmp_path, StoreExpectation(closed=True)) is None


def test_stale_checkpoint(tmp_path: Path) -> None:
    _store(tmp_path)
    cp = read_checkpoint(tmp_path / "checkpoint")
    write_checkpoint(tmp_path / "checkpoint", Checkpoint(cp.physic_msg_timestamp - 1, cp.logics_msg_timestamp, 0))
    assert _codes(tmp_path, closed=True) == ["STORE_CHECKPOINT"]
    write_checkpoint(tmp_path / "checkpoint", Checkpoint(cp.physic_msg_timestamp, cp.logics_msg_timestamp - 6, 0))
    assert _codes(tmp_path, closed=True) == ["STORE_CHECKPOINT"]
    write_checkpoint(tmp_path / "checkpoint", Checkpoint(cp.physic_msg_timestamp, cp.logics_msg_timestamp, 1))
    assert _codes(tmp_path, closed=True) == ["STORE_CHECKPOINT"]
    assert _codes(tmp_path) == []  # a running broker's checkpoint is not judged


def test_a_store_without_its_checkpoint(tmp_path: Path) -> None:
    """A broker that opened the store has a checkpoint file (StoreCheckpoint creates it at start),
    running or closed; one written only at the first flush leaves a store without it."""
    _store(tmp_path)
    (tmp_path / "checkpoint").unlink()
    assert _codes(tmp_path) == ["STORE_CHECKPOINT"]
    assert "STORE_CHECKPOINT" in _codes(tmp_path, closed=True)
    clock = ManualClock(START)
    running = tmp_path / "running"
    b = MmapBroker.open(running, clock)  # nothing sent, nothing flushed
    try:
        assert _codes(running) == []
    finally:
        b.close()


def test_abort_left_after_clean_shutdown(tmp_path: Path) -> None:
    _store(tmp_path)
    (tmp_path / "abort").touch()
    assert "STORE_ABORT_LEFT" in _codes(tmp_path, closed=True)


def test_offsets_and_topics_persisted(tmp_path: Path) -> None:
    answered = _store(tmp_path)
    assert _codes(tmp_path, closed=True, offsets={("g", "T", 0): answered[("g", "T", 0)] + 1}) == ["STORE_OFFSETS"]
    assert _codes(tmp_path, closed=True, offsets={("h", "T", 1): 4}) == ["STORE_OFFSETS"]
    assert _codes(tmp_path, closed=True, offsets={("h", "T", 1): 0}) == []  # never committed: need not be there
    assert _codes(tmp_path, closed=True, topics={"T": 4}) == ["STORE_TOPICS"]
    assert _codes(tmp_path, closed=True, topics={"U": 1}) == ["STORE_TOPICS"]


def test_delay_progress_persisted(tmp_path: Path) -> None:
    _store(tmp_path)
    (tmp_path / "config" / "delayOffset.json").write_text('{"offsetTable":{3:2}}')
    assert _codes(tmp_path, closed=True, delay_progress=({3: 2},)) == []
    assert _codes(tmp_path, closed=True, delay_progress=({3: 1}, {3: 2, 1: 0})) == []  # one fork agrees
    assert _codes(tmp_path, closed=True, delay_progress=({3: 1},)) == ["STORE_DELAY_OFFSETS"]
    assert _codes(tmp_path, closed=True) == []  # invariants only: no reference, not judged


def test_damaged_record_is_a_format_violation(tmp_path: Path) -> None:
    _store(tmp_path)
    log = sorted((tmp_path / "commitlog").iterdir())[0]
    with open(log, "r+b") as f:
        f.seek(4)
        f.write(struct.pack(">i", 0x12345678))  # the first record's magic code
    assert "STORE_FORMAT" in _codes(tmp_path)


class _StaleCheckpointBroker(MmapBroker):
    """An mmap broker whose clean shutdown leaves the checkpoint one millisecond behind."""

    def close(self) -> None:
        root = self.root
        super().close()
        cp = read_checkpoint(root / "checkpoint")
        if cp.physic_msg_timestamp:
            write_checkpoint(root / "checkpoint", Checkpoint(cp.physic_msg_timestamp - 1,
                                                             cp.logics_msg_timestamp, 0))


def _stale_factory(clock: ManualClock, config: object = None, workdir: object = None,
                   recorder: object = None) -> MmapBroker:
    return _StaleCheckpointBroker.open(workdir, clock, config, recorder)  # type: ignore[arg-type]


def test_conform_judges_the_store_and_skips_brokers_without_one() -> None:
    from rmqspec.model import factory as model_factory
    from rmqspec.properties.runner import budget_settings, check_conformance

    broken = check_conformance(_stale_factory, lockstep=False, settings=budget_settings(8, 12, shrink=False),
                               shrink_budget=0)
    assert not broken.passed and broken.failure is not None and "STORE_CHECKPOINT" in broken.failure
    honest = check_conformance(model_factory, lockstep=False, settings=budget_settings(4, 8, shrink=False))
    assert honest.passed and honest.coverage.get("store_probe:not_judged", 0) > 0
    assert honest.coverage.get("store_probe:judged", 0) == 0



class _UndeclaredStaleCheckpointBroker(_StaleCheckpointBroker):
    """The same files, but the broker does not declare them a RocketMQ store: they are its own business."""

    capabilities = MmapBroker.capabilities - {Capability.ROCKETMQ_STORE}


def test_a_broker_that_declares_no_rocketmq_store_is_not_judged_by_its_files() -> None:
    from rmqspec.properties.runner import budget_settings, check_conformance

    def factory(clock: ManualClock, config: object = None, workdir: object = None,
                recorder: object = None) -> MmapBroker:
        return _UndeclaredStaleCheckpointBroker.open(workdir, clock, config, recorder)  # type: ignore[arg-type]

    run = check_conformance(factory, lockstep=False, settings=budget_settings(8, 12, shrink=False), shrink_budget=0)
    assert run.passed, run.failure
    assert run.coverage.get("store_probe:not_judged", 0) > 0 and run.coverage.get("store_probe:judged", 0) == 0
