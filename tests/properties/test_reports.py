"""Exact reports (issue 14): every distinct failure with its own shrunk, replayable program;
``--seed`` reproducible across processes; shrinking bounded by a replay budget and timed apart."""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import attrs

from rmqspec.model.broker import ModelBroker
from rmqspec.properties.program import Op
from rmqspec.properties.runner import _shrink_all, budget_settings, check_conformance, replay_outcome
from rmqspec.properties.shrink import shrink, signature_of

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))
BROKEN = importlib.import_module("broken_brokers").BROKEN


class TwoBugs(ModelBroker):
    """Reports every third send (a batch: every batch holding a third item) one queue offset too far, and
    refuses to flush with a TypeError."""

    sends = 0

    def send(self, msg, queue_id):
        res = super().send(msg, queue_id)
        self.sends += 1
        return attrs.evolve(res, queue_offset=res.queue_offset + 1) if self.sends % 3 == 0 else res

    def send_batch(self, msgs, queue_id):  # a batch counts as its items' sends
        res = super().send_batch(msgs, queue_id)
        before, self.sends = self.sends, self.sends + len(msgs)
        return attrs.evolve(res, queue_offset=res.queue_offset + 1) if self.sends // 3 > before // 3 else res

    def flush(self):
        raise TypeError("flush is broken")


def two_bugs(clock, config, workdir):
    return TwoBugs(clock, config)


def test_signatures_name_what_broke() -> None:
    assert signature_of("invariant RetryNotEarlyProperty violated: RETRY_EARLY at step 3") == "invariant:RETRY_EARLY"
    assert signature_of("lockstep mismatch in pull('G0', T0/0, offset=0): status") == "lockstep:pull"
    assert signature_of("lockstep mismatch in check round at 17: x") == "lockstep:check round"
    assert signature_of("candidate raised TypeError in flush(): TypeError('x')") == "raised:TypeError"


def test_each_distinct_failure_is_shrunk_to_its_own_program() -> None:
    found = {
        "lockstep:send_batch": ("lockstep mismatch in send_batch(...)", [
            Op.of("init", queues=2, retry_max=1, orderly_max=1, flush="SYNC"),
            Op.of("advance_small", ms=500),
            Op.of("send_batch", topic=0, queue=1, n=4),
            Op.of("pull", group=0, mq=0, max_nums=3, beyond=False)]),
        "raised:TypeError": ("candidate raised TypeError in flush()", [
            Op.of("init", queues=2, retry_max=1, orderly_max=1, flush="SYNC"),
            Op.of("send_plain", topic=0, queue=0, tags=None, keys=(), props=False),
            Op.of("flush")]),
    }
    reports = _shrink_all(found, two_bugs, {}, budget=80)
    assert [r.signature for r in reports][:2] == ["lockstep:send_batch", "raised:TypeError"]
    for r in reports:
        assert r.shrunk and r.replays <= 80
        assert replay_outcome(r.program, two_bugs).signature == r.signature
    send, flush = reports[0], reports[1]
    assert [op.rule for op in send.program] == ["init", "send_batch"]
    assert [op.rule for op in flush.program] == ["init", "flush"]


def test_shrinking_is_deterministic_and_within_budget() -> None:
    program = [Op.of("init", queues=3, retry_max=2, orderly_max=1, flush="SYNC"),
               Op.of("send_plain", topic=5, queue=7, tags="TagA", keys=(), props=True),
               Op.of("advance_large", ms=3_600_000),
               Op.of("send_batch", topic=1, queue=2, n=4)]

    def run(p):
        return replay_outcome(p, two_bugs)

    first = shrink(program, run, "lockstep:send", budget=25)
    again = shrink(program, run, "lockstep:send", budget=25)
    assert first.program == again.program and first.replays == again.replays <= 25


def test_a_run_reports_generation_and_shrinking_apart() -> None:
    result = check_conformance(BROKEN["queue_offset_skips"], settings=budget_settings(40, 20), shrink_budget=40)
    assert not result.passed and result.failures
    assert result.generate_seconds > 0 and result.shrink_seconds > 0
    assert result.seconds >= result.generate_seconds
    for f in result.failures:
        assert f.replays <= 40
        assert replay_outcome(f.program, BROKEN["queue_offset_skips"]).signature == f.signature
    text = result.render()
    assert "generation" in text and "shrinking" in text and "PROGRAM = [" in text


def _conform(seed: int, hashseed: str) -> str:
    env = dict(os.environ, PYTHONHASHSEED=hashseed, HYPOTHESIS_PROFILE="ci")
    proc = subprocess.run(
        [sys.executable, "-m", "rmqspec.cli.main", "conform", "--broker", "broken_brokers:DlqWrongReconsumeTimes",
         "--seed", str(seed), "--examples", "30", "--steps", "25"],
        cwd=TESTS, capture_output=True, text=True, env=env, timeout=600,
    )
    assert proc.returncode in (0, 1), proc.stderr
    return re.sub(r"\d+\.\d+ s", "T s", proc.stdout)


def test_the_same_seed_gives_the_same_result_in_another_process() -> None:
    assert _conform(11, "1") == _conform(11, "2")
