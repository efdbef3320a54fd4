"""A clean restart under 5.1.0+'s op batching loses the ops still pending: no TXN_CHECK_AFTER_RESOLVED.

Found by ``rmqspec conform --broker rmqspec.model:factory --profile rocketmq-5.2 --examples 100 --steps 40
--seed 4`` (example ~362): a COMMIT answering the first check of a half, then ``close_reopen`` at once. The
op batch service (TransactionalOpBatchService, 5.1.0+) had not written the COMMIT's op yet; the shutdown's
last batch pass writes only the ops pending for a full transactionOpBatchInterval
(TransactionalMessageServiceImpl.close → ServiceThread.shutdown wakes the thread for one more
``batchSendOpMessage``, which skips a queue whose last write is younger than the interval: 5.3.3), so the
op is lost and the half is checked again 30 s after the reopen. The ghost invariant
(``properties/inv_txn.py``) allowed that only after a crash, or a restart whose row came within 3 periods of
the END; a clean shutdown is no row, and the REOPEN came 9.4 s later. Now a ``recover`` that is the first
restart row after an END (no crash between) loses its op, in the invariant, the reference checker
(``traces/checks_lifecycle.py``) and the Spark audit (``spark/rules_txn.py``) alike.
"""

from __future__ import annotations

import attrs
import pytest

from rmqspec.impl import factory as impl_factory
from rmqspec.model.events import ListRecorder
from rmqspec.model.model_factory import factory as model_factory
from rmqspec.properties.program import Op, replay
from rmqspec.traces.checker import check

FACTORIES = {"model": model_factory, "mmap": impl_factory}
PROFILE = "rocketmq-5.2"
COMMIT_THEN_CLEAN_RESTART = [
    Op.of("init", flush="SYNC", orderly_max=0, queues=1, retry_max=0, swarm=0),
    Op.of("dlq_ladder", family="txn_checked", group=0, level=0, max_choice=0),
    Op.of("close_reopen", down_ms=9375, tick=False),
]


def _recorded(broker: str) -> tuple[list[dict], object]:
    recorder = ListRecorder()
    machine = replay(COMMIT_THEN_CLEAN_RESTART, FACTORIES[broker], profile=PROFILE, recorder=recorder)
    return [e.as_row() for e in recorder.events], machine.history.params


@pytest.mark.parametrize("broker", sorted(FACTORIES))
def test_a_commit_lost_by_a_clean_restart_is_checked_again_without_a_violation(broker: str) -> None:
    """The program passes (lockstep and every invariant); its trace, audited under the profile's
    parameters (op_batch_ms 3000), has no violation, though a half position a COMMIT named is checked
    again after the REOPEN."""
    rows, params = _recorded(broker)
    assert params.op_batch_ms > 0
    ends = [r for r in rows if r["event"] == "txn_end" and r["status"] == "COMMIT"]
    reopen = next(r for r in rows if r["event"] == "recover" and r["status"] == "REOPEN")
    checks = [r for r in rows if r["event"] == "txn_check"]
    assert ends[0]["seq"] < reopen["seq"] < checks[1]["seq"]
    assert reopen["ts"] > ends[0]["ts"] + params.op_written_within_ms  # outside the crash window
    assert checks[1]["detail"]["check_times"] in (2, "2")
    assert check(rows, params).violations == ()


def test_the_trace_shows_the_check_after_the_commit() -> None:
    """The teeth: ops written at the END (4.9's reading) make the second check a violation, and so does a
    crash row where the REOPEN is (its time is known: past the window, the op was written)."""
    rows, params = _recorded("model")
    at_end = check(rows, attrs.evolve(params, op_batch_ms=0)).violations
    assert [f.code for f in at_end] == ["TXN_CHECK_AFTER_RESOLVED"]
    crashed = []
    for r in rows:
        if r["event"] == "recover" and r["status"] == "REOPEN":
            crashed.append({**r, "event": "crash", "status": "kill", "detail": None})
            crashed.append({**r, "seq": r["seq"] + 0.5, "status": "kill", "detail": None})
        else:
            crashed.append(r)
    crashed = [{**r, "seq": i} for i, r in enumerate(crashed)]
    assert [f.code for f in check(crashed, params).violations] == ["TXN_CHECK_AFTER_RESOLVED"]
