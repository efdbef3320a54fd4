"""Lock 2, the local MessageQueueLock: one consume request of a client per queue at a time.

4.9.8 ``ConsumeMessageOrderlyService.ConsumeRequest.run`` holds ``messageQueueLock.fetchLockObject(mq)``
over its whole loop, so a second ConsumeRequest of the same queue (one is submitted per pull that
dispatches, and suspends resubmit) waits for the first. A broken client of our own — the reference
client with the guard removed (``uses_message_queue_lock = False``) — starts a second batch while its
first listener runs; only ORDERLY_CONCURRENT's same-client case sees it, in the invariant
(``check_orderly_concurrent``) and in the audit (``traces.checker.check``).
"""

from __future__ import annotations

from rmqspec.model.config import default_config
from rmqspec.model.consumer_orderly import ConsumeOrderlyStatus, OrderlyConsumer
from rmqspec.properties.history import History
from rmqspec.properties.inv_locks import check_orderly_concurrent
from rmqspec.traces.checker import check
from tests.model.test_client_unit import MQ, World, stored


class NoQueueLockConsumer(OrderlyConsumer):
    """Broken on purpose: no MessageQueueLock (two consume requests of one queue run at once)."""

    uses_message_queue_lock = False


def _run(cls: type[OrderlyConsumer]) -> tuple[History, list[tuple[str, int]]]:
    """Two messages, batches of one; the first listener call submits a second request of the queue
    (another consume thread) before it returns."""
    w = World()
    w.recorder = History.for_config(default_config())
    w.broker.add(stored(0), stored(1))
    log: list[tuple[str, int]] = []
    c = None

    def listener(msgs, ctx):
        off = msgs[0].queue_offset
        log.append(("begin", off))
        if off == 0:
            c.consume_request(c.process_queues[MQ], MQ)  # a second ConsumeRequest while this one runs
        log.append(("end", off))
        return ConsumeOrderlyStatus.SUCCESS

    c = w.consumer(cls, listener=listener)
    c.start()
    c.run_until(1000)
    assert c.committed_offset(MQ) == 2
    return w.recorder, log


def test_the_reference_client_runs_one_batch_per_queue_at_a_time():
    history, log = _run(OrderlyConsumer)
    assert log == [("begin", 0), ("end", 0), ("begin", 1), ("end", 1)]
    assert check_orderly_concurrent(history) == []
    report = check([e.as_row() for e in history.events])
    assert "ORDERLY_CONCURRENT" not in {f.code for f in report.violations}


def test_a_client_without_the_queue_lock_is_caught_by_orderly_concurrent():
    history, log = _run(NoQueueLockConsumer)
    assert log == [("begin", 0), ("begin", 1), ("end", 1), ("end", 0)]
    found = check_orderly_concurrent(history)
    assert [v.code for v in found] == ["ORDERLY_CONCURRENT"]
    assert "second batch" in found[0].reason
    report = check([e.as_row() for e in history.events])
    concurrent = [f for f in report.violations if f.code == "ORDERLY_CONCURRENT"]
    assert len(concurrent) == 1 and "second batch" in concurrent[0].reason
    assert concurrent[0].seqs[-1] == found[0].seq
