"""The injected scenarios of a producer across several brokers (issue 43): PRODUCER_RETRY_SAME_BROKER and
PRODUCER_FAULT_WINDOW.

Theory of operation
-------------------
Each scenario is a routed producer of its own (``ctx.producer``, ``Inj…`` topic and keys, as every scenario
of ``traces/scenarios.py``, which registers them) over a route of two brokers, ``broker-a`` and
``broker-b``. It writes what ``model/producer.py`` writes on an acknowledged SYNC ``send``
(``docs/trace-schema.md``, "Several brokers"): the message's ``store`` and its ``send`` whose ``detail``
states the broker, ``fault`` (sendLatencyFaultEnable) and ``tries``, the attempts since the producer's
previous such row (``n`` from 1, every attempt of a send on the row acknowledging it; a failed attempt's
``error`` is RequestLost, its latency the 5 ms it ran). One lawful send, then the offending one, recorded
as the ground truth (seqs = [the offending send]). No consumer group reads the topic (LOST is not judged).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rmqspec.traces.scenarios import _Ctx

BROKERS = ("broker-a", "broker-b")
_LATENCY = 5

Steps = Generator[int, None, None]


class _Attempts:
    """A producer's attempt counter (``n``) and the tries since its last acknowledged row."""

    def __init__(self) -> None:
        self.n = 0

    def tries(self, start: int, *brokers: str) -> list[dict[str, Any]]:
        """One send's attempts from ``start``, one per broker named, each ``_LATENCY`` ms, all but the last
        failed."""
        out = []
        for i, broker in enumerate(brokers):
            self.n += 1
            out.append({"n": self.n, "attempt": i + 1, "broker": broker, "queue_id": 0,
                        "start": start + i * _LATENCY, "latency": _LATENCY,
                        "error": "RequestLost" if i < len(brokers) - 1 else None, "brokers": list(BROKERS)})
        return out


def _routed_send(ctx: _Ctx, fault: bool, tries: list[dict[str, Any]]) -> int:
    """The store of a fresh message and its acknowledged send carrying ``tries``; its seq."""
    key = ctx.sim.inj_key()
    _, copy = ctx.store(ctx.topic, 0, key, 0, ctx.pgroup)
    return ctx.sim.emit(
        "send", actor=ctx.producer, group=ctx.pgroup, topic=ctx.topic, queue_id=0, queue_offset=copy[3],
        commitlog_offset=copy[4], msg_key=key, msg_id=copy[5], status="SEND_OK",
        detail={"broker": tries[-1]["broker"], "fault": fault, "tries": tries},
    )


def retry_same_broker(ctx: _Ctx) -> Steps:
    """Fault strategy off: a send retried on broker-b after broker-a lost its request (lawful), then one
    retried on broker-a again (TopicPublishInfo.selectOneMessageQueue(lastBrokerName) ignored)."""
    attempts = _Attempts()
    _routed_send(ctx, False, attempts.tries(ctx.sim.now - 2 * _LATENCY, *BROKERS))
    yield 10
    seq = _routed_send(ctx, False, attempts.tries(ctx.sim.now - 2 * _LATENCY, "broker-a", "broker-a"))
    ctx.truth([seq], f"{ctx.producer}'s retry went to broker-a again after its attempt there failed")


def fault_window(ctx: _Ctx) -> Steps:
    """Fault strategy on: broker-a loses a request (isolated 600 s) and the retry goes to broker-b; a
    second later a send goes to broker-a, inside its window, broker-b being available."""
    attempts = _Attempts()
    _routed_send(ctx, True, attempts.tries(ctx.sim.now - 2 * _LATENCY, *BROKERS))
    yield 1000
    seq = _routed_send(ctx, True, attempts.tries(ctx.sim.now - _LATENCY, "broker-a"))
    ctx.truth([seq], f"{ctx.producer}'s attempt went to broker-a inside its not-available window")
