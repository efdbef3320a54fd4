"""consumeTimeout and cleanExpiredMsg in the conformance machine (issue 42, ``properties/conform_timeout.py``).

Every example's prelude runs a concurrent listener that outlives consumeTimeout (15 min): the client's clean
sends the running message back (level 3; the ``send_back`` states ``detail.clean_expired``, the consume start
and consumeTimeout), removes it from the process queue, the listener answers SUCCESS (TIME_OUT) and the retry
copy is consumed again: a DUPLICATED observation whose audit reason names the consumeTimeout cause, no
violation. A broken client of our own — a clean that reads consumeTimeout's minutes as seconds
(``check_conformance(clean_timeout=)``) — sends back a message 15 s into its listener: only
CleanAfterTimeoutProperty (RETRY_EARLY) and ``traces/checks_retry.detect_clean_early`` see it, the broker
being right throughout.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rmqspec.model.events import ListRecorder
from rmqspec.model.model_factory import factory as model_factory
from rmqspec.properties.conform_base import MachineFailure
from rmqspec.properties.conform_timeout import CONSUME_TIMEOUT_MIN
from rmqspec.properties.conformance import conformance_machine
from rmqspec.properties.inv_timeout import check_clean_early
from rmqspec.properties.invariants import evaluate_named
from rmqspec.properties.program import Op, replay
from rmqspec.properties.runner import budget_settings, check_conformance
from rmqspec.traces.checker import check
from rmqspec.traces.checks_delivery import TIMED_OUT_CAUSE
from rmqspec.traces.io import read_events
from tests.untraced import budget_run

TIMEOUT_MS = CONSUME_TIMEOUT_MIN * 60_000
PROGRAM = [Op.of("init", flush="SYNC", orderly_max=1, queues=2, retry_max=1, swarm=0),
           Op.of("consume_timeout", group=0, queue=1)]


def seconds(minutes: int) -> int:
    """The broken client's clean: consumeTimeout's minutes read as seconds."""
    return minutes * 1000


def _g0(m: Any, event: str) -> list[Any]:
    return [e for e in m.history.of(event) if e.group == "G0"]


def test_the_clean_sends_back_the_running_message_past_consume_timeout_and_the_trace_audits_clean() -> None:
    recorder = ListRecorder()
    m = replay(PROGRAM, model_factory, recorder=recorder)
    (back,) = [e for e in _g0(m, "send_back") if e.detail.get("clean_expired")]
    start = back.detail["consume_start"]
    # the clean runs every consumeTimeout from the clients' start (here the listener's): the first tick is
    # not past it (exactly consumeTimeout), the second is
    assert back.ts - start == 2 * TIMEOUT_MS and back.detail["consume_timeout_min"] == CONSUME_TIMEOUT_MIN
    assert (back.delay_level, back.status, back.reconsume_times, back.detail["max"]) == (3, "RETRY", 1, 16)
    late, retried = [e for e in _g0(m, "consume") if e.msg_key == back.msg_key]
    assert (late.status, late.detail["return_type"], late.detail["consume_start"]) == ("SUCCESS", "TIME_OUT", start)
    assert late.seq > back.seq and late.topic == back.topic
    assert retried.status == "SUCCESS" and retried.reconsume_times == 1 and retried.topic == "%RETRY%G0"
    cov = type(m).coverage
    for what in ("started", "clean_sent_back", "time_out", "retry_consumed"):
        assert cov[f"consume_timeout:{what}"] == 1, what
    assert check_clean_early(m.history) == []
    report = check([e.as_row() for e in recorder.events])
    assert report.violations == ()
    (dup,) = [f for f in report.observations if f.code == "DUPLICATED"]
    assert dup.keys["msg_key"] == back.msg_key and dup.reason.endswith(TIMED_OUT_CAUSE)


@pytest.mark.parametrize("lockstep", [True, False], ids=["lockstep", "no-lockstep"])
def test_a_clean_reading_minutes_as_seconds_is_caught_by_its_rule_alone(lockstep: bool) -> None:
    """The broker is right throughout (lockstep sees no mismatch): of every invariant and every audit rule,
    only the clean's (CleanAfterTimeoutProperty, RETRY_EARLY's clean case) finds the broken client."""
    recorder = ListRecorder()
    cls = conformance_machine(model_factory, lockstep=lockstep, clean_timeout=seconds,
                              recorder_factory=lambda: recorder)
    m = cls()
    m.init(queues=2, retry_max=1, orderly_max=1, flush="SYNC", swarm=0)
    m.consume_timeout(0, 1)
    with pytest.raises(MachineFailure) as caught:
        m.check_always()  # as after every step of a run
    assert "CleanAfterTimeoutProperty" in str(caught.value) and "RETRY_EARLY" in str(caught.value)
    (back,) = [e for e in _g0(m, "send_back") if e.detail.get("clean_expired")]
    assert 15_000 < back.ts - back.detail["consume_start"] <= 30_000
    named = evaluate_named(m.history, ["always", "observation"])
    assert {(inv.name, v.seq) for inv, v in named if inv.kind == "always"} == {("CleanAfterTimeoutProperty", back.seq)}
    assert "client fault" in check_clean_early(m.history)[0].reason
    report = check([e.as_row() for e in recorder.events])
    assert [(f.code, f.seqs) for f in report.violations] == [("RETRY_EARLY", (back.seq,))]
    assert "cleanExpiredMsg" in report.violations[0].reason
    m.teardown()


def _rows(*backs: tuple[int, dict[str, Any] | None]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = [{"seq": 0, "ts": 0, "event": "send", "topic": "T", "queue_id": 0,
                                   "queue_offset": 0, "msg_key": "K", "status": "SEND_OK"}]
    for i, (ts, detail) in enumerate(backs, 1):
        rows.append({"seq": i, "ts": ts, "event": "send_back", "group": "G", "topic": "T", "queue_id": 0,
                     "queue_offset": 0, "msg_key": "K", "reconsume_times": 1, "delay_level": 3,
                     "deliver_ts": ts + 10_000, "status": "RETRY", "detail": detail})
    return rows


def test_the_audit_judges_a_clean_send_back_by_its_own_start_and_timeout() -> None:
    clean = {"clean_expired": True, "consume_start": 1000, "consume_timeout_min": 15}
    rows = _rows(
        (1000 + TIMEOUT_MS, clean),  # exactly consumeTimeout: not yet expired (now − start > timeout)
        (1001 + TIMEOUT_MS, clean),  # past it: the clean's
        (1000 + 16_000, clean),  # 16 s in: the broken clean's
        (1000 + 16_000, {"clean_expired": True, "consume_timeout_min": 15}),  # no start: not judged
        (1000 + 16_000, {"clean_expired": True, "consume_start": 1000}),  # no timeout: not judged
        (1000 + 16_000, {"consume_start": 1000, "consume_timeout_min": 15}),  # not the clean's: not judged
        (1000 + 16_000, None),
    )
    found = [(f.code, f.seqs) for f in check(rows).violations]
    assert found == [("RETRY_EARLY", (1,)), ("RETRY_EARLY", (3,))]
    (first,) = [f for f in check(rows).violations if f.seqs == (3,)]
    assert "cleanExpiredMsg" in first.reason and "client fault" in first.reason


@budget_run
def test_the_default_budget_reaches_the_clean_passes_and_its_recorded_traces_audit_clean(tmp_path: Path) -> None:
    """``rmqspec conform``'s default budget (the model in lockstep): every example's prelude runs it, and every
    example's recorded trace audits with no violation and a DUPLICATED observation naming the cause."""
    result = check_conformance(model_factory, settings=budget_settings(None, None, shrink=False), trace_dir=tmp_path)
    assert result.passed, (result.failure or "")[:2000]
    for what in ("consume_timeout", "consume_timeout:started", "consume_timeout:clean_sent_back",
                 "consume_timeout:time_out", "consume_timeout:retry_consumed"):
        assert result.coverage.get(what, 0) >= result.examples // 2, (what, result.coverage.get(what))
    timed_out = 0
    for path in sorted(tmp_path.glob("example-*.jsonl")):
        events, rejected = read_events(path)
        rows = [e.as_row() for e in events]
        if not rejected and any((r["detail"] or {}).get("clean_expired") for r in rows if r["event"] == "send_back"):
            report = check(rows)
            assert report.violations == (), (path.name, report.violations[:3])
            timed_out += any(f.code == "DUPLICATED" and f.reason.endswith(TIMED_OUT_CAUSE) for f in report.observations)
    assert timed_out >= result.examples // 2, timed_out


@budget_run
@pytest.mark.parametrize("lockstep", [True, False], ids=["lockstep", "no-lockstep"])
def test_the_broken_client_is_caught_at_the_default_budget(lockstep: bool) -> None:
    result = check_conformance(model_factory, lockstep=lockstep, settings=budget_settings(None, None, shrink=False),
                               clean_timeout=seconds)
    assert not result.passed, "a clean reading consumeTimeout as seconds passed"
    failure = result.failure or ""
    assert "RETRY_EARLY" in failure and "CleanAfterTimeoutProperty" in failure, failure[:2000]
