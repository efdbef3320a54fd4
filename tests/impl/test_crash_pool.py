"""Crash-state exploration with a TransientStorePool (``crashwork`` workload ``pool``; fidelity TS1, TS2).

With the pool a record reaches the page cache only when the CommitRealTimeService commits it: the recorder
sees its bytes in the ``append`` mark and no ``Write`` until the commit, so a power cut keeps at most the
committed prefix and a kill in the recorded run takes the acknowledged records still in the write buffer —
lawfully, since an ASYNC send promises nothing until a ``flush()`` (which commits first).

Budget: a tenth of ``test_crash_exploration``'s (``HYPOTHESIS_PROFILE`` ``ci`` 1,000 states, ``thorough``
100,000, ``dev`` 1,000; ``RMQSPEC_CRASH_STATES`` / 10 overrides it), at least 1,000.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from rmqspec.impl import crashfs, crashtest, crashwork
from rmqspec.impl.crashwork import Driver, Recording, Workload, workload_config
from rmqspec.impl.effects import Mark, Write
from tests.untraced import budget_run

BUDGETS = {"ci": 10_000, "thorough": 1_000_000, "dev": 1_000}
POOL = crashwork.WORKLOADS["pool"]


def _budget() -> int:
    override = os.environ.get("RMQSPEC_CRASH_STATES")
    total = int(override) if override else BUDGETS.get(os.environ.get("HYPOTHESIS_PROFILE", "ci"), BUDGETS["ci"])
    return max(1_000, total // 10)


def _kills(recording: Recording) -> list[tuple[int, list[tuple[int, int]]]]:
    """Per recovery after the first: its end and the acknowledged records (offset, end) written in a write
    buffer since the previous recovery that it did not keep."""
    out: list[tuple[int, list[tuple[int, int]]]] = []
    buffered: list[tuple[int, int]] = []
    seen = False
    for e in recording.effects:
        if not isinstance(e, Mark):
            continue
        if e.kind == "append" and e.get("data") is not None:
            buffered.append((e.get("offset"), e.get("offset") + e.get("size")))
        elif e.kind == "recovered":
            end = e.get("end")
            if seen:
                out.append((end, [b for b in buffered if b[1] > end]))
            seen, buffered = True, []
    return out


def test_the_recorder_sees_pooled_bytes_only_when_committed(tmp_path: Path) -> None:
    recording = crashwork.record(POOL, tmp_path / "s")
    _points, model = crashfs.replay(recording.effects)
    assert model.volatile_files() == crashfs.read_tree(tmp_path / "s")
    marks = [e for e in recording.effects if isinstance(e, Mark) and e.kind == "append"]
    pooled = [m for m in marks if m.get("data") is not None]
    assert pooled and len(pooled) < len(marks)  # files loaded at a restart have no buffer (TS2)
    writes = [e for e in recording.effects if isinstance(e, Write) and e.path.startswith("commitlog/")]
    for m in pooled:  # no write of the record's own bytes right before its mark: they wait for a commit
        i = recording.effects.index(m)
        before = recording.effects[i - 1]
        assert not (isinstance(before, Write) and before.path.startswith("commitlog/") and before.data == m.get("data"))
    # a commit writes several buffered records at once
    assert any(len(w.data) > max(len(m.get("data")) for m in pooled) for w in writes)


def test_a_kill_takes_the_acknowledged_uncommitted_records(tmp_path: Path) -> None:
    recording = crashwork.record(POOL, tmp_path / "s")
    kills = _kills(recording)
    assert len(kills) == 5  # kill, power, kill, clean, kill
    lost = [k for k in kills if k[1]]
    assert len(lost) >= 3, kills  # the three kills each took acknowledged records from the write buffer
    for end, records in lost:
        assert all(start >= end for start, _stop in records)  # recovery keeps whole records only


@budget_run
@pytest.mark.slow
def test_every_pooled_crash_state_recovers_without_violation() -> None:
    budget = _budget()
    report = crashtest.explore([POOL], states=budget, seed=0)
    print("\n" + "\n".join(report.lines()))
    assert report.ok, "\n".join(report.lines())
    assert report.states >= min(budget, report.workloads[0].states) > 0
    assert report.torn_states > 0


def _promise_the_write_buffer(d: Driver) -> None:
    d.setup()
    d.tick(500)  # the first thorough pass: later puts wait for the next
    for _ in range(3):
        d.send("TopicA", 0)
    d.log.mark("ack")  # wrong: an ASYNC put with a pool is answered before its bytes reach the page cache
    d.restart("kill")


def test_promising_an_uncommitted_record_is_caught_by_the_recorded_kill() -> None:
    """The oracle judges the recorded run itself: a driver that promised the write buffer's records (as a
    SYNC ack would) is told the kill took them — the reason the pool workload's driver promises none."""
    workload = Workload(
        "promise-buffer", workload_config("ASYNC", transient_store_pool=True), _promise_the_write_buffer
    )
    report = crashtest.explore([workload], states=20, seed=0)
    assert report.minimal is not None and report.minimal.state_id == "promise-buffer/recording"
    assert "recovery in the recorded run" in report.minimal.violations[0].reason


def test_a_flush_commits_first_so_its_promise_holds() -> None:
    def flush_then_kill(d: Driver) -> None:
        d.setup()
        d.tick(500)
        for _ in range(3):
            d.send("TopicA", 0)
        d.flush()  # commits the write buffer, then flushes: the three records are promised
        d.send("TopicA", 0)  # not promised: taken by the kill
        d.restart("kill")
        d.send("TopicA", 1)

    workload = Workload("flush-kill", workload_config("ASYNC", transient_store_pool=True), flush_then_kill)
    with tempfile.TemporaryDirectory() as tmp:
        recording = crashwork.record(workload, Path(tmp) / "s")
    (end, lost), = _kills(recording)
    assert len(lost) == 1 and lost[0][0] == end
    report = crashtest.explore([workload], states=2_000, seed=0)
    assert report.ok and report.workloads[0].exhaustive, "\n".join(report.lines())
