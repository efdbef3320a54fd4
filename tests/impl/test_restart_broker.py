"""Restarts of the MmapBroker at every point of a scenario, against the model (SPEC §4.3, §5).

One scenario (plain and delayed sends, a flush, a fired delay, a send-back,
a committed and a pending transaction, an offset commit) is interrupted after
each of its steps by ``close()``+``reopen()``, ``crash("kill")``+``recover()``
or ``crash("power")``+``recover()``, under SYNC and ASYNC flushing; then the
rest of the scenario and a drain (every delay and check due) run. The same
restart is applied to a ``ModelBroker``: after a power loss the model keeps
the survivor count the mmap store observed, which must be one the model
allows. Every later observation and trace event must agree, and what
survives must match SPEC: a clean restart never re-delivers a scheduled copy
and loses nothing; a crash may re-deliver one (a duplicate, never a loss); a
SYNC-acknowledged send always survives (a power loss may take only what was
answered before the group commit: a send-back's copy, a commit and its op, when
no tick passed); under ASYNC, what was flushed survives.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from rmqspec.impl.broker import MmapBroker
from rmqspec.impl.verify import verify_store
from rmqspec.model import BrokerConfig, ListRecorder, ManualClock, Message, MessageQueue, ModelBroker
from rmqspec.model.results import BrokerError, PullResult, TxnAction

START_MS = 1_700_000_000_000
T0 = MessageQueue("T", 0)
RETRY = MessageQueue("%RETRY%g", 0)


def _observe(fn: Any) -> Any:
    try:
        return fn()
    except BrokerError as e:
        return ("refused", e.code)


class Run:
    """The scenario on a model and a mmap broker sharing one clock."""

    def __init__(self, root: Path, flush: str) -> None:
        config = BrokerConfig(flush=flush, commitlog_file_size=1024)
        self.clock = ManualClock(START_MS)
        self.model = ModelBroker(self.clock, config, ListRecorder())
        self.mmap = MmapBroker.open(root, self.clock, config, ListRecorder())
        self.acked: dict[str, int] = {}  # uniq key → index of the step that acknowledged it
        self.delayed: list[str] = []
        self.flushed_step = -1
        self.committed: list[str] = []

    def both(self, fn: Any) -> Any:
        actual = _observe(lambda: fn(self.mmap))
        assert actual == _observe(lambda: fn(self.model))
        assert self.mmap.recorder.events == self.model.recorder.events
        return actual

    def send(self, step: int, body: bytes, delay: int = 0) -> None:
        r = self.both(lambda b: b.send(Message("T", body, delay_level=delay), 0))
        self.acked[r.uniq_key] = step
        if delay:
            self.delayed.append(r.uniq_key)

    def tick(self, ms: int) -> None:
        self.clock.advance(ms)
        for r in self.both(lambda b: b.tick()):
            self.both(lambda b, r=r: b.end_transaction(
                r.producer_group, r.commitlog_offset, r.tran_state_table_offset, TxnAction.COMMIT, True))
            self.committed.append(r.transaction_id)

    def consume_and_fail_first(self) -> None:
        got = self.both(lambda b: b.pull("g", T0, 0))
        if isinstance(got, PullResult) and got.messages:
            m = got.messages[0]
            self.both(lambda b: b.send_back("g", m.commitlog_offset, 0, m.msg_id, None))

    def half(self, step: int, commit: bool) -> None:
        h = self.both(lambda b: b.send_half(Message("T", b"tx"), 0, "pg"))
        self.acked[h.uniq_key] = step
        if commit:
            self.both(lambda b: b.end_transaction(
                "pg", h.commitlog_offset, h.queue_offset, TxnAction.COMMIT, False))
            self.committed.append(h.uniq_key)

    def flush(self, step: int) -> None:
        self.both(lambda b: b.flush())
        self.flushed_step = step

    def steps(self) -> list[Any]:
        return [
            lambda i: (self.both(lambda b: b.create_topic("T", 1)),
                       self.both(lambda b: b.create_group("g"))),
            lambda i: self.send(i, b"m0"),
            lambda i: self.send(i, b"d0", delay=1),
            lambda i: self.flush(i),
            lambda i: self.send(i, b"m1"),
            lambda i: self.tick(1_000),  # d0 fires
            lambda i: self.consume_and_fail_first(),
            lambda i: self.send(i, b"d1", delay=1),
            lambda i: self.tick(1_000),  # d1 fires; delay progress not persisted yet
            lambda i: self.half(i, commit=True),
            lambda i: self.half(i, commit=False),
            lambda i: self.send(i, b"m2"),
            lambda i: self.both(lambda b: b.update_offset("g", T0, 1)),
        ]

    def restart(self, kind: str) -> int:
        """Restart both brokers; returns how many commitlog records were lost."""
        before = self.mmap.commitlog_record_count()
        if kind == "close":
            self.both(lambda b: b.close())
            self.both(lambda b: b.reopen())
            return 0
        self.both(lambda b: b.crash(kind))
        self.mmap.recover()
        survivors = self.mmap.commitlog_record_count()
        assert survivors in self.model.recovery_choices()
        self.model.recover(survivors=survivors)
        assert self.mmap.recorder.events == self.model.recorder.events
        return before - survivors

    def drain(self) -> list[Any]:
        for _ in range(3):
            self.tick(3_600_000)
        copies = self.both(lambda b: b.pull("observer", T0, 0))
        self.both(lambda b: b.pull("observer", RETRY, 0))
        return list(copies.messages) if isinstance(copies, PullResult) else []


# After step k (1-based): every send kind, before / after the flush, the fire, the
# send-back, both halves and the offset commit.
CUTS = (2, 3, 5, 7, 8, 9, 11, 13)


@pytest.mark.parametrize("flush", ["SYNC", "ASYNC"])
@pytest.mark.parametrize("kind", ["close", "kill", "power"])
def test_restart_after_every_step_keeps_what_spec_promises(tmp_path, kind, flush):
    lost_somewhere = unwaited_lost = False
    duplicated_somewhere = False
    for cut in CUTS:
        run = Run(tmp_path / f"cut{cut}", flush)
        steps = run.steps()
        for i, step in enumerate(steps[:cut]):
            step(i)
        flushed_at_cut = run.flushed_step
        unwaited = run.model.durability.unwaited  # SYNC: put since the last group commit without waiting
        lost = run.restart(kind)
        for i, step in enumerate(steps[cut:], start=cut):
            step(i)
        copies = run.drain()
        seen = Counter(m.uniq_key for m in copies)
        if kind != "power":
            assert lost == 0
        if flush == "SYNC":  # a send-back's copy, a commit and its op are answered before the flush
            assert lost <= unwaited
            unwaited_lost |= lost > 0
        lost_somewhere |= lost > 0
        for key, step in run.acked.items():
            # every half is committed (directly, or by the drain's check answers)
            durable = flush == "SYNC" or kind != "power" or step <= flushed_at_cut or step >= cut
            if durable:
                assert seen[key] >= 1, f"cut {cut}: acknowledged {key} (step {step}) lost"
        for key in run.delayed:
            if kind == "close":
                assert seen[key] == 1, f"cut {cut}: a clean restart re-delivered {key}"
            duplicated_somewhere |= seen[key] > 1
        assert all(seen[k] <= 1 for k in seen if k not in run.delayed and k not in run.committed)
        report = verify_store(run.mmap.root)
        assert report.ok, [f.line() for f in report.findings]
        run.mmap.close()
    if kind == "kill":
        assert duplicated_somewhere  # d1 fired after the last persist of delayOffset.json
    if kind == "close":
        assert not duplicated_somewhere
    if kind == "power" and flush == "ASYNC":
        assert lost_somewhere  # unflushed records really went
    if flush == "SYNC":  # only what did not wait, and a power loss right after it does take it
        assert unwaited_lost == (kind == "power")



@pytest.mark.parametrize("saved", [7, -3])
def test_delay_progress_beyond_its_queue_is_clamped_at_load(tmp_path: Path, saved: int) -> None:
    """Fidelity F7: ScheduleMessageService.correctDelayOffset clamps each level's saved progress into
    [min, max] of its queue when it loads delayOffset.json. A progress past the end would otherwise skip
    the next delayed message of that level forever."""
    clock = ManualClock(START_MS)
    broker = MmapBroker.open(tmp_path / "s", clock, BrokerConfig(message_delay_level="1s 2s"))
    broker.create_topic("T", 1)
    broker.send(Message("T", b"first", delay_level=1, uniq_key="A" * 32), 0)
    clock.advance(1000)
    broker.tick()
    broker.close()
    (tmp_path / "s" / "config" / "delayOffset.json").write_text(f'{{"offsetTable":{{1:{saved}}}}}')
    broker = MmapBroker.open(tmp_path / "s", clock, BrokerConfig(message_delay_level="1s 2s"))
    broker.send(Message("T", b"second", delay_level=1, uniq_key="B" * 32), 0)
    clock.advance(1000)
    broker.tick()
    bodies = [m.body for m in broker.pull("g", T0, 0).messages]
    broker.close()
    # clamped to 1 (the end): only the new copy fires; clamped to 0 (the start): the first fires again too
    assert bodies == ([b"first", b"second"] if saved > 0 else [b"first", b"first", b"second"])
