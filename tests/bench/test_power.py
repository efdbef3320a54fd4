"""The mutation-score harness (bench/power): its splices, its isolation proof, and a fixed sample of
real conform runs — the pristine candidate passes both modes, five mutants of different kinds are
killed, an endless loop is killed by the timeout.

The conform runs (one module-scoped fixture, about 60 s of CPU) share the ``power`` xdist group.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from bench.power import candidate, selection, worker
from bench.power.harness import ModeResult, MutantResult, baseline, interpret, run_mutants
from bench.power.mutants import Mutant, find_mutants, verify
from bench.power.report import Report
from bench.power.worker import MODES, kill_reason

pytestmark = pytest.mark.xdist_group("power")


def _one(pool: selection.Pool, module: str, function: str, kind: str, context: str, replacement: str) -> Mutant:
    found = [m for m in pool.mutants if m.module == module and m.function == function and m.kind == kind
             and context in m.context and m.replacement == replacement]
    assert len(found) == 1, f"{module} {function} {kind} {context!r} -> {replacement!r}: {len(found)} mutants"
    return found[0]


@contextmanager
def _loaded_with(pool: selection.Pool, m: Mutant) -> Iterator[None]:
    """The candidate copy with ``m`` applied, loaded and proved isolated; unloaded afterwards."""
    text = m.apply(pool.texts[m.module])
    files = candidate.candidate_files()
    with tempfile.TemporaryDirectory() as tmp:
        site = candidate.build(Path(tmp), files, (m.module, text))
        try:
            candidate.load(site)
            assert candidate.isolation_problems(site, files, (m.module, text)) == []
            yield
        finally:
            candidate.unload(site)


@pytest.fixture(scope="module")
def pool() -> selection.Pool:
    return selection.build_pool()


# ---------------------------------------------------------------------------
# the mutator


def test_every_site_of_the_rule_modules_splices_exactly_its_mutation(pool: selection.Pool) -> None:
    chosen = [m for m in pool.mutants if m.module in ("model/lifecycle.py", "impl/locks.py",
                                                      "impl/schedule_service.py")]
    assert len(chosen) > 100
    bad = [m.id for m in chosen if not verify(m, pool.texts[m.module])]
    assert bad == []


def test_a_bad_splice_is_refused() -> None:
    text = "def f(a, b):\n    return a < b\n"
    m = next(m for m in find_mutants("x.py", text) if m.kind == "boundary")
    assert verify(m, text)
    wrong = Mutant(m.module, m.function, m.kind, m.line, m.end_line, m.start - 2, m.end, text[m.start - 2:m.end],
                   "<=", m.stmt_lines, m.context)  # eats the operand's last character
    assert not verify(wrong, text)


def test_kinds_on_a_small_function() -> None:
    text = ("def g(now, last_update, max_live_ms, holder):\n"
            "    if holder is None and now - last_update > max_live_ms:\n"
            "        self.count += 1\n"
            "        store.put(1000)\n"
            "    return True\n")
    got = {(m.kind, m.original, m.replacement) for m in find_mutants("x.py", text)}
    assert ("boundary", ">", ">=") in got
    assert ("negate", "is", "is not") in got
    assert ("logic", "holder is None and now - last_update > max_live_ms",
            "holder is None or now - last_update > max_live_ms") in got
    assert ("drop_cond", "holder is None and now - last_update > max_live_ms", "True") in got
    assert ("timing", "now", "(now + 1)") in got
    assert ("timing", "max_live_ms", "(max_live_ms // 2)") in got
    assert ("unit", "1000", "1") in got
    assert ("arith", "-", "+") in got
    assert ("skip_assign", "self.count += 1", "pass") in got
    assert ("skip_call", "store.put(1000)", "pass") in got
    assert ("bool_flip", "True", "False") in got


def test_ids_survive_edits_elsewhere_in_the_file(pool: selection.Pool) -> None:
    text = pool.texts["impl/locks.py"]
    before = {m.id for m in find_mutants("impl/locks.py", text)}
    edited = text.replace("class LockManager:", "# a comment\n\n\nclass LockManager:")
    assert {m.id for m in find_mutants("impl/locks.py", edited)} == before


def test_the_selection_is_deterministic_and_spread_over_kinds(pool: selection.Pool) -> None:
    a = selection.select(pool, 40, seed=5)
    assert a == selection.select(pool, 40, seed=5)
    assert a != selection.select(pool, 40, seed=6)
    assert len(a) == 40 and len({m.kind for m in a}) >= 10


def test_shared_value_types_are_never_mutated() -> None:
    with pytest.raises(selection.SelectionError, match="shared"):
        selection.build_pool(["model/message.py"])


def test_model_modules_are_mutated_where_the_candidate_uses_them(pool: selection.Pool) -> None:
    functions = {m.function for m in pool.mutants if m.module == "model/lifecycle.py"}
    assert "route_send_back" in functions and "lock_decision" in functions
    assert not any(f.startswith(("Lifecycle", "_g_", "_e_")) for f in functions)  # the model's own tables


def test_recorder_only_statements_are_out_of_scope(pool: selection.Pool) -> None:
    assert not any(m.context.startswith("self.events.") for m in pool.mutants)
    assert not any("tap" in m.context.split() or "self._effects" in m.context for m in pool.mutants)
    text = pool.texts["impl/broker.py"]
    every = find_mutants("impl/broker.py", text)
    dropped = [m for m in every if selection.out_of_scope(m)]
    assert dropped and all(re.search(r"trace|conform", selection.out_of_scope(m) or "") for m in dropped)


def test_inspection_and_record_counting_are_out_of_scope(pool: selection.Pool) -> None:
    broker = {m.function for m in pool.mutants if m.module == "impl/broker.py"}
    lifecycle = {m.function for m in pool.mutants if m.module == "impl/broker_lifecycle.py"}
    assert "MmapBroker.send" in broker and "Lifecycle.crash" in lifecycle
    assert not broker & {"MmapBroker._written", "MmapBroker._note_written", "MmapBroker.group_locked"}
    assert "Lifecycle.recovery_choices" not in lifecycle
    # the read-only views (commitlog_record_count, retry_queue_choices, group_config, queue_units, ...)
    assert not any(m.module == "impl/broker_views.py" for m in pool.mutants)
    assert not any(re.search(r"self\._(records|flushed|unflushed)\b", m.context) for m in pool.mutants)
    assert not any(m.context.startswith(("self._written(", "self.hooks.on_store(")) for m in pool.mutants)
    # the write _written wraps stays: its time is the record's store time
    assert any(m.function == "MmapBroker._append" and m.kind == "timing" for m in pool.mutants)


def test_the_fallback_config_parser_is_out_of_scope(pool: selection.Pool) -> None:
    config = {m.function for m in pool.mutants if m.module == "impl/configfiles.py"}
    assert "_parse_fast" in config and "parse_fastjson" in config and "load_with_backup" in config
    assert not any(f.startswith(("_Parser.", "_join_surrogates", "_has_surrogate")) for f in config)


def test_the_store_crash_simulation_is_fault_injection_not_behaviour(pool: selection.Pool) -> None:
    store = {m.function for m in pool.mutants if m.module == "impl/store.py"}
    assert "MessageStore.put" in store and "MessageStore.flush" in store
    assert not store & {"MessageStore.crash", "MessageStore.torn_tail"}
    lifecycle = {m.function for m in pool.mutants if m.module == "impl/broker_lifecycle.py"}
    assert "Lifecycle.crash" in lifecycle and "Lifecycle.recover" in lifecycle  # the broker's side stays


def test_every_equivalent_mutant_is_a_site_of_the_pool(pool: selection.Pool) -> None:
    ids = {m.id for m in pool.mutants}
    equivalents = selection.load_equivalents()
    assert len(equivalents) >= 20 and sorted(set(equivalents) - ids) == []


# ---------------------------------------------------------------------------
# the isolation proof


def test_the_candidate_copy_shares_no_mutated_code_with_the_reference(pool: selection.Pool) -> None:
    import rmqspec.model.broker
    from rmqspec.model import lifecycle

    m = _one(pool, "model/lifecycle.py", "route_send_back", "boundary",
             "reconsume_times >= max_reconsume_times", ">")
    with _loaded_with(pool, m):
        mutated = sys.modules["rmqspec_candidate.model.lifecycle"]
        # the candidate routes a message at its limit to a retry; the reference still to the DLQ
        assert mutated.route_send_back(16, 16, 0, 18)[0] == "RETRY"
        assert lifecycle.route_send_back(16, 16, 0, 18)[0] == "DLQ"
        assert rmqspec.model.broker.route_send_back is lifecycle.route_send_back
        assert Path(lifecycle.route_send_back.__code__.co_filename).resolve() == \
            (candidate.PROJECT / "model" / "lifecycle.py").resolve()
        assert sys.modules["rmqspec_candidate.impl.locks"].lock_decision is mutated.lock_decision


def test_the_store_probe_reads_the_candidates_store_with_the_pristine_impl(pool: selection.Pool) -> None:
    import rmqspec.impl.checkpoint as pristine
    from rmqspec.properties import store_probe

    m = next(m for m in pool.mutants if m.module == "impl/checkpoint.py" and m.function == "Checkpoint.encode")
    with _loaded_with(pool, m):
        copy = sys.modules["rmqspec_candidate.impl.checkpoint"]
        # the candidate writes with the mutated module, the probe reads with the pristine one
        assert copy.read_checkpoint is not pristine.read_checkpoint
        assert store_probe.read_checkpoint is pristine.read_checkpoint
        assert Path(store_probe.verify_store.__code__.co_filename).resolve() == \
            (candidate.PROJECT / "impl" / "verify.py").resolve()


def test_the_proof_fails_when_the_candidate_would_use_the_references_rules() -> None:
    files = candidate.candidate_files()
    partial = {p: t for p, t in files.items() if p != "model/lifecycle.py"}  # not copied: imported pristine
    with tempfile.TemporaryDirectory() as tmp:
        site = candidate.build(Path(tmp), partial)
        try:
            candidate.load(site)
            problems = candidate.isolation_problems(site, partial)
        finally:
            candidate.unload(site)
    assert any("imports rmqspec.model.lifecycle of the reference" in p for p in problems)
    assert any("uses rmqspec.model.lifecycle" in p for p in problems)


# ---------------------------------------------------------------------------
# results as data


def test_worker_rows_become_mode_results() -> None:
    rows = [{"stage": "isolation", "problems": []},
            {"stage": "mode", "mode": "invariants", "passed": True, "via": "run", "seconds": 5.0,
             "failure": None, "reason": None}]
    got = interpret(rows, MODES, -9, "timeout", "")
    assert got["invariants"].status == "survived"
    assert got["lockstep"] == ModeResult("timeout", "timeout", "run")
    # lockstep runs first (worker._run_modes): killed inside it, it is the mode that timed out, and the
    # invariants' run it never reached is inferred
    got = interpret([{"stage": "isolation", "problems": []}, {"stage": "start", "mode": "lockstep"}],
                    MODES, -9, "timeout", "")
    assert got["lockstep"] == ModeResult("timeout", "timeout", "run")
    assert got["invariants"] == ModeResult("timeout", "timeout", "inferred")
    crashed = interpret([{"stage": "crash", "where": "import", "error": "SyntaxError"}], MODES, 0, None, "")
    assert {r.status for r in crashed.values()} == {"crash"}
    assert kill_reason("invariant LockExclusiveProperty violated: …") == "invariant"
    assert kill_reason("lockstep mismatch in pull(…)") == "lockstep"


def test_lockstep_runs_first_and_a_pass_stands_for_the_invariants(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The order and the shortcuts of ``worker._run_modes`` (what each mode's run would return is given)."""
    calls: list[tuple[str, object]] = []

    def orchestrate(lockstep_program: object, replay: bool = True) -> list[dict]:
        calls.clear()

        def run_mode(factory: object, mode: str, shortcut: object, out: worker._Out,
                     profile: str = worker.DEFAULT_PROFILE, examples: int | None = None) -> tuple[bool, object]:
            calls.append((mode, shortcut))
            program = lockstep_program if mode == "lockstep" else None
            return program is None, program

        monkeypatch.setattr(worker, "_run_mode", run_mode)
        path = tmp_path / f"rows-{len(list(tmp_path.iterdir()))}.jsonl"
        worker._run_modes(None, list(MODES), replay, worker._Out(path))
        return [json.loads(line) for line in path.read_text().splitlines()]

    rows = orchestrate(None)  # lockstep passed: one run, the invariants' survival inferred
    assert calls == [("lockstep", None)]
    assert rows == [{"stage": "mode", "mode": "invariants", "profile": worker.DEFAULT_PROFILE, "passed": True,
                     "via": "inferred", "examples": 0, "seconds": 0.0, "failure": None, "reason": None}]
    program = ("init", "send")
    orchestrate(program)  # lockstep failed: its program goes to the invariants' run as the shortcut
    assert calls == [("lockstep", None), ("invariants", program)]
    orchestrate(program, replay=False)  # --no-replay: each mode in full, in the usual order
    assert calls == [("invariants", None), ("lockstep", None)]


def test_a_mode_runs_under_the_next_profile_until_it_is_killed(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """``worker._run_modes`` with two profiles: what survived the first runs under the second, what the
    first killed does not; ``interpret`` keeps the first kill and names its profile."""
    calls: list[tuple[str, str]] = []
    verdicts = {("lockstep", "p1"): (False, ("init",)), ("invariants", "p1"): (True, None),
                ("invariants", "p2"): (False, ("init",))}

    def run_mode(factory: object, mode: str, shortcut: object, out: worker._Out,
                 profile: str = worker.DEFAULT_PROFILE, examples: int | None = None) -> tuple[bool, object]:
        calls.append((mode, profile))
        passed, program = verdicts[(mode, profile)]
        out.write(stage="start", mode=mode, profile=profile)
        out.write(stage="mode", mode=mode, profile=profile, passed=passed, via="run", examples=1, seconds=1.0,
                  failure=None if passed else "lockstep mismatch", reason=None if passed else "lockstep")
        return passed, program

    monkeypatch.setattr(worker, "_run_mode", run_mode)
    path = tmp_path / "rows.jsonl"
    worker._run_modes(None, list(MODES), True, worker._Out(path), ["p1", "p2"])
    assert calls == [("lockstep", "p1"), ("invariants", "p1"), ("invariants", "p2")]
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    got = interpret(rows, MODES, 0, None, "")
    assert (got["lockstep"].status, got["lockstep"].profile) == ("killed", "p1")
    assert (got["invariants"].status, got["invariants"].profile) == ("killed", "p2")
    # both survived p1; the worker hung in p2's lockstep: that mode timed out there, the invariants'
    # run under p2 it never reached is inferred
    hung = [{"stage": "mode", "mode": m, "profile": "p1", "passed": True, "via": "run", "seconds": 1.0,
             "failure": None, "reason": None} for m in ("lockstep", "invariants")]
    hung.append({"stage": "start", "mode": "lockstep", "profile": "p2"})
    got = interpret(hung, MODES, -9, "timeout", "")
    assert got["lockstep"] == ModeResult("timeout", "timeout", "run", profile="p2")
    assert got["invariants"] == ModeResult("timeout", "timeout", "inferred", profile="p2")


def test_the_report_lists_survivors_with_their_diff(pool: selection.Pool) -> None:
    a, b = selection.select(pool, 2, seed=1)
    results = (MutantResult(a, {"invariants": ModeResult("survived"), "lockstep": ModeResult("killed", "lockstep")}),
               MutantResult(b, {"invariants": ModeResult("survived"), "lockstep": ModeResult("survived")}))
    report = Report(results, MODES, pool.texts, {"selection": "2 mutants"})
    text = report.render()
    assert "1/2  50.0%" in text and "0/2   0.0%" in text
    assert b.id in text and f"+{b.apply(pool.texts[b.module]).splitlines()[b.line - 1]}" in text
    assert report.below({"lockstep": 90.0}) == ["lockstep score 50.0% < 90%"]
    assert json.loads(json.dumps(report.as_dict()))["scores"]["lockstep"]["killed"] == 1


# ---------------------------------------------------------------------------
# real conform runs: the fixed sample


SAMPLE = [  # killed in both modes at the default budget, one kind each
    ("impl/offsets.py", "ConsumerOffsetTable.persist", "skip_call", "save_consumer_offsets", "pass"),
    ("model/lifecycle.py", "route_send_back", "boundary", "reconsume_times >= max_reconsume_times", ">"),
    ("impl/schedule_service.py", "ScheduleService._deliver_level", "skip_assign", "self.offsets[level]", "pass"),
    ("impl/mappedfile.py", "MappedFileQueue.find", "negate", "offset < self.files[0].start", ">="),
    ("impl/store.py", "StoreConfig.__attrs_post_init__", "invert_cond", "delay_levels_ms",
     "not (not self.delay_levels_ms or any(d < 0 for d in self.delay_levels_ms))"),
]
ENDLESS = ("impl/schedule_service.py", "ScheduleService._deliver_level", "skip_assign", "offset += 1", "pass")


@pytest.fixture(scope="module")
def sample(pool: selection.Pool) -> tuple[list[MutantResult], dict[str, float]]:
    # the pristine candidate's plumbing at a few examples: its pass at the default budget is
    # tests/test_conformance.py's (the timeouts here are fixed, not the baseline's)
    base = baseline(modes=MODES, jobs=2, reach=False, examples=4)
    chosen = [_one(pool, *s) for s in [*SAMPLE, ENDLESS]]
    results = run_mutants(chosen, pool.texts, modes=MODES, jobs=2, timeout=15.0, replay=True, reach=None,
                          equivalents={})
    return results, base.seconds


def test_the_pristine_candidate_passes_both_modes(sample: tuple[list[MutantResult], dict[str, float]]) -> None:
    _, seconds = sample
    assert set(seconds) == set(MODES)


def test_the_sample_mutants_are_killed_in_both_modes(sample: tuple[list[MutantResult], dict[str, float]]) -> None:
    results, _ = sample
    for r in results[:len(SAMPLE)]:
        assert all(mode.killed for mode in r.modes.values()), (r.mutant.id, r.modes)
    by_kind = {r.mutant.kind: r for r in results}
    assert by_kind["invert_cond"].modes["invariants"] == ModeResult("crash", "construct", "run", 0.0,
                                                                    by_kind["invert_cond"].modes["invariants"].failure)
    assert by_kind["skip_call"].modes["invariants"].reason == "invariant"
    # lockstep runs first; its counterexample, replayed without the model, fails the invariants too
    assert by_kind["skip_call"].modes["lockstep"].via == "run"
    assert by_kind["skip_call"].modes["invariants"].via == "replay"


def test_an_endless_loop_is_killed_by_the_timeout(sample: tuple[list[MutantResult], dict[str, float]]) -> None:
    results, _ = sample
    endless = results[-1]
    assert endless.modes["invariants"].status == "timeout"
    assert endless.modes["lockstep"].status == "timeout"


def test_the_command_lists_and_refuses_usage_errors() -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "bench", "power", "--", *args], capture_output=True,
                              text=True, cwd=candidate.PROJECT, timeout=120)

    listed = run("--list", "--sample", "5", "--modules", "locks,lifecycle")
    assert listed.returncode == 0, listed.stderr
    assert "5 of " in listed.stdout and "model/lifecycle" in listed.stdout
    bad = run("--list", "--modules", "nosuch")
    assert bad.returncode == 2 and "not part of the candidate" in bad.stderr and "Traceback" not in bad.stderr
    kinds = run("--list", "--kinds", "flip")
    assert kinds.returncode == 2 and "unknown kind" in kinds.stderr
