"""Crash-state exploration: record workloads, enumerate or sample their crash states, check each one.

Theory of operation
-------------------
``explore(workloads, states=N, seed=S)``

1. records each workload (``crashwork.record``) in a scratch directory,
   replays its effects through the file-system model (``crashfs.replay``) and
   checks the model against the real files the run left (a recorder that
   missed an effect would make every later state a fiction);
2. selects crash states (``select_states``): when a workload has at most its
   share of the budget, **every** state, in a fixed order (deterministic
   enumeration; what it leaves of its share goes to the other workloads);
   otherwise a seeded sample that visits every crash point in
   turn and mixes write-order prefixes, single pages, all-but-one, uniformly
   random subsets and torn pages (seeded sampling). States that leave
   the same disk within a window are one state, checked with the latest
   crash point's promises (the strictest);
3. checks each state with the oracle (``crashoracle.check``: materialize,
   recover with ``MmapBroker``, properties) and keeps the violations;
4. shrinks the smallest failing state (fewest persisted pages, earliest
   point): drops persisted pages, the torn page and committed metadata while
   the same property still fails. The result names the writes that
   persisted.

A state has a replayable id ``WORKLOAD/POINT/PREFIX/MASK/TORN``
(``crashselect``): ``state_by_id`` rebuilds one from a recording;
``materialize_state`` writes it to a directory (e.g. for the real RocketMQ
store).

Budgets: ``make test`` explores 10,000+ states (``tests/impl/test_crash_exploration.py``),
the Hypothesis/env profile ``thorough`` 1,000,000.
"""

from __future__ import annotations

import random
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs

from rmqspec.impl import crashfs, crashoracle, crashwork
from rmqspec.impl.broker import store_config
from rmqspec.impl.commitlog import ScanStop
from rmqspec.impl.crashfs import CrashPoint, CrashState
from rmqspec.impl.crashoracle import Promises, Violation
from rmqspec.impl.crashselect import (
    StateIdError,
    all_states,
    select_states,
    state_bound,
    state_by_id,
    state_id,
)
from rmqspec.impl.crashwork import Recording, Workload
from rmqspec.impl.scratch import scratch_base, scratch_dir
from rmqspec.impl.store import MessageStore

ProgressFn = Callable[[int, int], None]
MAX_EXAMPLES = 20  # failing states kept in a report
SHRINK_CHECKS = 60


@attrs.frozen
class FailedState:
    """A crash state whose recovery breaks a property; ``persisted`` says which writes survived."""

    state_id: str
    violations: tuple[Violation, ...]
    persisted: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "state": self.state_id,
            "violations": [{"property": v.code, "reason": v.reason} for v in self.violations],
            "persisted": list(self.persisted),
        }


@attrs.frozen
class WorkloadStats:
    name: str
    effects: int
    crash_points: int
    states: int
    torn_states: int
    exhaustive: bool
    failed_states: int


@attrs.frozen
class ExplorationReport:
    workloads: tuple[WorkloadStats, ...]
    seconds: float
    failure_counts: dict[str, int]
    examples: tuple[FailedState, ...]
    minimal: FailedState | None

    @property
    def states(self) -> int:
        return sum(w.states for w in self.workloads)

    @property
    def torn_states(self) -> int:
        return sum(w.torn_states for w in self.workloads)

    @property
    def crash_points(self) -> int:
        return sum(w.crash_points for w in self.workloads)

    @property
    def failed_states(self) -> int:
        return sum(w.failed_states for w in self.workloads)

    @property
    def ok(self) -> bool:
        return self.failed_states == 0

    @property
    def rate(self) -> float:
        return self.states / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "states": self.states,
            "torn_states": self.torn_states,
            "crash_points": self.crash_points,
            "failed_states": self.failed_states,
            "seconds": round(self.seconds, 3),
            "states_per_second": round(self.rate, 1),
            "workloads": [attrs.asdict(w) for w in self.workloads],
            "failures": dict(self.failure_counts),
            "minimal": None if self.minimal is None else self.minimal.to_dict(),
            "examples": [e.to_dict() for e in self.examples],
        }

    def lines(self) -> list[str]:
        out = [
            f"crashtest: {len(self.workloads)} workload(s), {self.crash_points:,} crash points, "
            f"{self.states:,} states ({self.torn_states:,} with a torn page) in {self.seconds:.1f} s "
            f"({self.rate:,.0f} states/s)"
        ]
        for w in self.workloads:
            how = "all states" if w.exhaustive else "sampled"
            out.append(
                f"  {w.name:<16} {w.effects:>5} effects {w.crash_points:>5} points {w.states:>7,} states "
                f"({how}, {w.torn_states:,} torn) {w.failed_states} failing"
            )
        if self.ok:
            out.append("no failures: every state recovered and kept every promise")
            return out
        for code, n in sorted(self.failure_counts.items()):
            out.append(f"FAIL {code} in {n} state(s): {crashoracle.PROPERTIES.get(code, '')}")
        if self.minimal is not None:
            out.append(f"minimal failing state {self.minimal.state_id}:")
            out += [f"  {line}" for line in self.minimal.persisted]
            out += [f"  -> {v.line()}" for v in self.minimal.violations]
        return out


# -- exploration -------------------------------------------------------------------------------------


@attrs.frozen
class Prepared:
    """A recorded workload, replayed: crash points and their promises."""

    recording: Recording
    points: tuple[CrashPoint, ...]
    promises: tuple[Promises, ...]


def prepare(workload: Workload, directory: Path) -> Prepared:
    """Record ``workload`` in ``directory`` and replay it; raises ``crashfs.ModelError`` on a recorder gap."""
    store = directory / "store"
    recording = crashwork.record(workload, store)
    points, model = crashfs.replay(recording.effects)
    real = crashfs.read_tree(store)
    modelled = model.volatile_files()
    if real != modelled:
        differ = sorted(p for p in real.keys() | modelled.keys() if real.get(p) != modelled.get(p))
        raise crashfs.ModelError(f"{workload.name}: the replayed effects do not rebuild {differ[:5]}")
    shutil.rmtree(store)
    return Prepared(recording, tuple(points), tuple(crashoracle.promises(recording, points)))


def scratch_root() -> Path:
    """A fresh directory for one exploration under ``scratch_base()`` (states are written and read once)."""
    return scratch_dir("rmqspec-crash-")


def explore(
    workloads: Sequence[Workload],
    *,
    states: int,
    seed: int = 0,
    workdir: Path | None = None,
    on_progress: ProgressFn | None = None,
    shrink: bool = True,
) -> ExplorationReport:
    """Explore ``states`` crash states spread over ``workloads``; the report holds every violation found."""
    if states <= 0:
        raise ValueError(f"states must be positive, got {states}")
    own = workdir is None
    root = scratch_root() if workdir is None else Path(workdir)
    t0 = time.perf_counter()
    try:
        plans = _plan(workloads, states, seed, root)
        total = sum(len(p[2]) for p in plans)
        done = 0
        stats: list[WorkloadStats] = []
        counts: Counter[str] = Counter()
        failing: list[tuple[Prepared, str, CrashState, list[Violation]]] = []
        in_recording: list[FailedState] = []
        scratch = root / "state"
        for workload, prepared, selected, exhaustive in plans:
            index = {id(p): i for i, p in enumerate(prepared.points)}
            failed = 0
            lost = prepared.promises[-1].lost_in_workload
            if lost is not None:  # the recorded run itself broke a promise (its own restarts)
                failed += 1
                counts["PromisedRecordsSurvive"] += 1
                violation = Violation("PromisedRecordsSurvive", lost)
                in_recording.append(FailedState(f"{workload.name}/recording", (violation,), ("the recorded run",)))
            for state in selected:
                promised = prepared.promises[index[id(state.point)]]
                violations = crashoracle.check(state, promised, prepared.recording, scratch)
                if violations:
                    failed += 1
                    for code in {v.code for v in violations}:
                        counts[code] += 1
                    failing.append((prepared, workload.name, state, violations))
                done += 1
                if on_progress is not None:
                    on_progress(done, total)
            torn = sum(1 for s in selected if s.torn is not None)
            stats.append(
                WorkloadStats(
                    workload.name,
                    len(prepared.recording.effects),
                    len(prepared.points),
                    len(selected),
                    torn,
                    exhaustive,
                    failed,
                )
            )
        examples = tuple(in_recording + [_failed(name, s, v) for _p, name, s, v in failing])[:MAX_EXAMPLES]
        minimal = in_recording[0] if in_recording else None  # the simplest: no crash state needed
        if failing and minimal is None:
            prepared, name, state, violations = min(failing, key=lambda f: (_size(f[2]), f[2].point.index))
            if shrink:
                state, violations = _shrink(prepared, state, violations, scratch)
            minimal = _failed(name, state, violations)
        return ExplorationReport(tuple(stats), time.perf_counter() - t0, dict(counts), examples, minimal)
    finally:
        if own:
            shutil.rmtree(root, ignore_errors=True)


def _plan(
    workloads: Sequence[Workload], states: int, seed: int, root: Path
) -> list[tuple[Workload, Prepared, list[CrashState], bool]]:
    """Equal shares of the budget; what a completely enumerated workload leaves goes to the sampled ones."""
    prepared = [prepare(w, root / f"w{i}") for i, w in enumerate(workloads)]
    shares = [states // len(workloads) + (1 if i < states % len(workloads) else 0) for i in range(len(workloads))]
    chosen: dict[int, tuple[list[CrashState], bool]] = {}
    while True:
        for i in range(len(workloads)):
            if i not in chosen or not chosen[i][1]:
                rng = random.Random(f"{seed}/{workloads[i].name}")
                chosen[i] = select_states(prepared[i].points, shares[i], rng)
        left = states - sum(len(c[0]) for c in chosen.values())
        open_ = [i for i, (picked, exhaustive) in chosen.items() if not exhaustive and len(picked) >= shares[i]]
        if left <= 0 or not open_:
            break
        for n, i in enumerate(open_):
            shares[i] += left // len(open_) + (1 if n < left % len(open_) else 0)
    return [(w, prepared[i], chosen[i][0], chosen[i][1]) for i, w in enumerate(workloads)]


def _failed(name: str, state: CrashState, violations: Sequence[Violation]) -> FailedState:
    return FailedState(state_id(name, state), tuple(violations), tuple(crashfs.describe(state)))


def _size(state: CrashState) -> int:
    return len(state.persisted) + (state.torn is not None) + state.prefix


def _shrink(
    prepared: Prepared, state: CrashState, violations: list[Violation], scratch: Path
) -> tuple[CrashState, list[Violation]]:
    """Drop persisted pages, the torn page and committed metadata while the same property fails."""
    codes = {v.code for v in violations}
    index = {id(p): i for i, p in enumerate(prepared.points)}
    promised = prepared.promises[index[id(state.point)]]
    checks = 0
    improved = True
    while improved and checks < SHRINK_CHECKS:
        improved = False
        for candidate in _smaller(state):
            checks += 1
            found = crashoracle.check(candidate, promised, prepared.recording, scratch)
            if codes & {v.code for v in found}:
                state, violations, improved = candidate, found, True
                break
            if checks >= SHRINK_CHECKS:
                break
    return state, violations


def _smaller(state: CrashState) -> Iterator[CrashState]:
    if state.torn is not None:
        yield attrs.evolve(state, torn=None)
    for i in range(len(state.persisted)):
        yield attrs.evolve(state, persisted=state.persisted[:i] + state.persisted[i + 1 :])
    if state.prefix > 0:
        smaller = state.prefix - 1
        live = {(d.ino, d.page) for d in state.point.dirty_for(smaller)}
        if all((d.ino, d.page) in live for d in state.persisted) and (
            state.torn is None or (state.torn[0].ino, state.torn[0].page) in live
        ):
            yield attrs.evolve(state, prefix=smaller)


def workloads_named(names: Sequence[str]) -> list[Workload]:
    """The named workloads (``crashwork.WORKLOADS``); raises ``KeyError`` naming an unknown one."""
    out = []
    for name in names:
        if name not in crashwork.WORKLOADS:
            raise KeyError(f"unknown workload {name!r}; known: {', '.join(crashwork.WORKLOADS)}")
        out.append(crashwork.WORKLOADS[name])
    return out


def workload_by_name(name: str) -> Workload:
    """A named workload or ``random-OPS-SEED``."""
    if name.startswith("random-"):
        try:
            _r, ops, seed = name.split("-")
            return crashwork.random_workload(int(ops), int(seed))
        except ValueError:
            raise KeyError(f"workload {name!r}: expected random-OPS-SEED") from None
    return workloads_named([name])[0]


def materialize_state(text: str, directory: Path, *, recover: bool = False) -> tuple[CrashState, list[str]]:
    """Rebuild the state ``text`` names (re-recording its workload) into ``directory``; its description.

    With ``recover``, the store in ``directory`` is then recovered in place (``MessageStore.open`` with
    the workload's store settings) and the description ends with what recovery kept.
    """
    name = text.rsplit("/", 4)[0]
    workload = workload_by_name(name)
    with tempfile.TemporaryDirectory(dir=scratch_base(), prefix="rmqspec-replay-") as tmp:
        prepared = prepare(workload, Path(tmp))
    state = state_by_id(prepared.points, text)
    crashfs.materialize(state, directory)
    lines = crashfs.describe(state)
    if recover:
        lines += recovered_summary(directory, workload)
    return state, lines


def recovered_summary(directory: Path, workload: Workload) -> list[str]:
    """Recover the store in ``directory`` in place; one line for the CommitLog, one per consume queue."""
    config = store_config(workload.config)
    store = MessageStore.open(directory, config=config)
    try:
        report = store.recovery
        assert report is not None
        records = sum(
            1
            for item in store.commitlog.scan(store.commitlog_min_offset, limit=store.commitlog_max_offset)
            if not isinstance(item, ScanStop)
        )
        lines = [
            f"recovered ({report.kind}): commitlog [{store.commitlog_min_offset}, {store.commitlog_max_offset}), "
            f"{records} records" + (f"; stopped at {report.corrupt}" if report.corrupt is not None else "")
        ]
        for key in store.queues():
            units = store.queue_units(*key, 0, 1 << 30)
            last = f", last {(units[-1].commitlog_offset, units[-1].size, units[-1].tags_code)}" if units else ""
            lines.append(f"  {key[0]}/{key[1]}: {len(units)} units{last}")
    finally:
        store.close()
    return lines


__all__ = [
    "ExplorationReport",
    "FailedState",
    "Prepared",
    "StateIdError",
    "WorkloadStats",
    "all_states",
    "explore",
    "materialize_state",
    "prepare",
    "recovered_summary",
    "scratch_base",
    "scratch_root",
    "select_states",
    "state_bound",
    "state_by_id",
    "state_id",
    "workload_by_name",
    "workloads_named",
]
