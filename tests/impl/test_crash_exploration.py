"""Crash-state exploration (``impl/crashtest.py``): no loss in 10,000+ states, known-bad stores caught.

Budget by ``HYPOTHESIS_PROFILE`` (``tests/conftest.py``): ``ci`` 10,000 states
(``make test``), ``thorough`` 1,000,000, ``dev`` 1,000; ``RMQSPEC_CRASH_STATES``
overrides it.
"""

from __future__ import annotations

import importlib
import os
import random
import sys
import tempfile
from pathlib import Path

import pytest

from rmqspec.impl import crashtest, crashwork, effects
from rmqspec.impl.crashtest import StateIdError
from rmqspec.impl.crashwork import Driver, Workload, workload_config
from tests.untraced import budget_run

sys.path.insert(0, str(Path(__file__).resolve().parent))
VARIANTS = importlib.import_module("crash_variants").VARIANTS  # a helper module beside this test

BUDGETS = {"ci": 10_000, "thorough": 1_000_000, "dev": 1_000}


def _budget() -> int:
    override = os.environ.get("RMQSPEC_CRASH_STATES")
    if override:
        return int(override)
    return BUDGETS.get(os.environ.get("HYPOTHESIS_PROFILE", "ci"), BUDGETS["ci"])


def _workloads(budget: int) -> list[Workload]:
    """The named workloads and a random one; big budgets add random workloads (the named ones saturate:
    every reachable state of ``async-sends`` is 3,161)."""
    extra = [crashwork.random_workload(300, seed) for seed in range(11, 11 + budget // 150_000)]
    return [*crashwork.WORKLOADS.values(), crashwork.random_workload(120, 7), *extra]


@budget_run
@pytest.mark.slow
def test_every_crash_state_recovers_without_loss() -> None:
    budget = _budget()
    workloads = _workloads(budget)
    report = crashtest.explore(workloads, states=budget, seed=0)
    print("\n" + "\n".join(report.lines()))
    assert report.ok, "\n".join(report.lines())
    assert report.states >= budget
    assert report.torn_states >= budget // 10
    assert all(w.states > 0 for w in report.workloads)


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_a_known_bad_store_is_caught(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    variant = VARIANTS[name]
    variant.install(monkeypatch)
    report = crashtest.explore(crashtest.workloads_named(variant.workloads), states=300, seed=0)
    assert not report.ok
    assert variant.property in report.failure_counts, report.failure_counts
    assert report.minimal is not None and report.minimal.persisted[0].startswith("power cut after effect #")
    assert any(line.startswith(f"FAIL {variant.property}") for line in report.lines())


def _lose_an_ack(d: Driver) -> None:
    d.setup()
    for _ in range(3):
        d.send("TopicA", 0)
    d.restart("power")


def test_a_promise_broken_by_the_recorded_run_itself_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    VARIANTS["sync-acknowledged-before-flush"].install(monkeypatch)
    workload = Workload("lose-an-ack", workload_config("SYNC"), _lose_an_ack)
    report = crashtest.explore([workload], states=20, seed=0)
    assert report.minimal is not None and report.minimal.state_id == "lose-an-ack/recording"
    assert "recovery in the recorded run" in report.minimal.violations[0].reason


def _tiny(d: Driver) -> None:
    d.broker.create_topic("TopicA", 1)
    d.send("TopicA", 0)


def test_a_small_workload_is_enumerated_completely_and_repeatably() -> None:
    workload = Workload("tiny", workload_config("ASYNC"), _tiny)
    first = crashtest.explore([workload], states=100_000, seed=1)
    again = crashtest.explore([workload], states=100_000, seed=2)
    assert first.ok and first.workloads[0].exhaustive
    assert first.states == again.states > 50
    with tempfile.TemporaryDirectory() as tmp:
        prepared = crashtest.prepare(workload, Path(tmp))
    bound = sum(crashtest.state_bound(p) for p in prepared.points)
    total = sum(1 for p in prepared.points for _ in crashtest.all_states(p))
    assert first.states <= total <= bound


def test_sampling_is_seeded_and_ids_replay() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        prepared = crashtest.prepare(crashwork.WORKLOADS["restarts"], Path(tmp))
    pick = [crashtest.select_states(prepared.points, 200, random.Random(s)) for s in (5, 5, 6)]
    ids = [[crashtest.state_id("restarts", s) for s in states] for states, _exhaustive in pick]
    assert ids[0] == ids[1] != ids[2] and not pick[0][1] and len(ids[0]) == 200
    for state in pick[0][0]:
        text = crashtest.state_id("restarts", state)
        assert crashtest.state_id("restarts", crashtest.state_by_id(prepared.points, text)) == text
    for bad in ("x", "restarts/99999/0/0/-", "restarts/a/0/0/-", "restarts/-1/5/0/-", "restarts/-1/0/ff/-"):
        with pytest.raises(StateIdError):
            crashtest.state_by_id(prepared.points, bad)


def test_materialize_state_rebuilds_a_replayable_state(tmp_path: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        prepared = crashtest.prepare(crashwork.WORKLOADS["sync-sends"], Path(tmp))
    state = next(s for p in prepared.points[40:] for s in crashtest.all_states(p) if s.torn is not None)
    text = crashtest.state_id("sync-sends", state)
    _state, lines = crashtest.materialize_state(text, tmp_path / "s")
    assert lines[0].startswith("power cut after effect #") and any(" torn " in f" {line}" for line in lines)
    assert (tmp_path / "s" / "commitlog" / "00000000000000000000").stat().st_size == 8192
    with pytest.raises(KeyError, match="unknown workload"):
        crashtest.materialize_state("nope/1/0/0/-", tmp_path / "t")


def test_a_completely_enumerated_workload_leaves_its_share_to_the_others() -> None:
    tiny = Workload("tiny", workload_config("ASYNC"), _tiny)
    report = crashtest.explore([tiny, crashwork.WORKLOADS["restarts"]], states=600, seed=0)
    small, big = report.workloads
    assert small.exhaustive and not big.exhaustive
    assert small.states < 300 and report.states == 600


def test_a_recorder_that_misses_an_effect_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from rmqspec.impl import effects
    from rmqspec.impl.crashfs import ModelError

    real_add = effects.EffectLog.add

    def lossy(self: effects.EffectLog, effect: effects.Effect) -> None:
        if not (isinstance(effect, effects.Write) and effect.path.startswith("consumequeue/")):
            real_add(self, effect)

    monkeypatch.setattr(effects.EffectLog, "add", lossy)
    with tempfile.TemporaryDirectory() as tmp, pytest.raises(ModelError, match=r"do not rebuild.*consumequeue"):
        crashtest.prepare(crashwork.WORKLOADS["offsets"], Path(tmp))


def test_the_retention_workload_deletes_files_and_its_crash_states_keep_what_it_kept(tmp_path: Path) -> None:
    """Issue 42's retention item in crash exploration: the clean passes unlink commitlog and consume-queue files
    between restarts of every kind; every state recovers with the records a pass took gone, the kept ones whole
    and indexed from the first consume-queue file left, at correctMinOffset's min offset."""
    workload = crashwork.WORKLOADS["retention"]
    recording = crashwork.record(workload, tmp_path / "rec")
    unlinked = {e.path.split("/", 1)[0] for e in recording.effects if isinstance(e, effects.Unlink)}
    assert {"commitlog", "consumequeue"} <= unlinked, unlinked
    report = crashtest.explore([workload], states=600, seed=0)
    assert report.ok, "\n".join(report.lines())
    assert report.states >= 600 and report.torn_states > 0
