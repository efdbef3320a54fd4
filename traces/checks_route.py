"""The producer across several brokers (issue 43): PRODUCER_RETRY_SAME_BROKER and PRODUCER_FAULT_WINDOW.

Theory of operation
-------------------
The rules are ``properties/inv_route.py``'s, one definition (``retry_offences``, ``window_offences``): these
detectors hand them the trace's ``send`` rows as (seq, actor, ``detail``) and turn each offence into a
``Finding`` (seqs = [the ``send`` row carrying the offending attempt], keys group, topic and msg_key of that
row). A row without an ``actor`` or a ``detail.tries`` list is not read; an attempt missing a field, a row
without ``detail.fault`` (a JSON boolean) or with one fault table but not the other is not judged, and the
window replay stops at a producer's first gap (a missing attempt number): dropping any of it only removes
findings. Absent both tables a row ran 4.9.8's defaults (``docs/trace-schema.md``, "Several brokers").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from rmqspec.properties.inv_route import Offence, Row, retry_offences, window_offences
from rmqspec.traces.checks_common import Finding, Trace, detail_of, keys_of

__all__ = ["detect_fault_window", "detect_retry_same_broker", "route_findings"]

ROUTE_KEYS = ("group", "topic", "msg_key")


def route_findings(
    rows: Sequence[Mapping[str, Any]], rule: Callable[[Iterable[Row]], list[Offence]]
) -> Iterator[Finding]:
    """``rule``'s offences over ``rows`` (one trace's, in seq order) as findings."""
    sends = [r for r in rows if r["event"] == "send"]
    by_seq = {r["seq"]: r for r in sends}
    for o in rule((r["seq"], r.get("actor"), detail_of(r)) for r in sends):
        row = by_seq[o.seq]
        yield Finding(code=o.code, seqs=(int(o.seq),), keys=keys_of(row, *ROUTE_KEYS), reason=o.reason)


def detect_retry_same_broker(trace: Trace) -> Iterator[Finding]:
    """PRODUCER_RETRY_SAME_BROKER: a producer's retry went to the broker its failed attempt went to, the
    route having another (issue 43; SPEC §8.1 extension).

    4.9.8 ``DefaultMQProducerImpl.sendDefaultImpl`` with ``sendLatencyFaultEnable`` off (``detail.fault``
    false): a retry selects ``TopicPublishInfo.selectOneMessageQueue(lastBrokerName)``, which tries every
    queue of the list for one on another broker before it takes any. Read from one acknowledged ``send``
    row's ``detail.tries`` (one send's attempts ride on one row): attempt k + 1 right after attempt k
    (consecutive ``n`` and ``attempt``) to the same broker while ``brokers`` names another.
    seqs = [the send row].
    """
    return route_findings(trace.rows, retry_offences)


def detect_fault_window(trace: Trace) -> Iterator[Finding]:
    """PRODUCER_FAULT_WINDOW: with the fault strategy on, an attempt went to a broker inside its
    not-available window while another broker of the route was available (issue 43; SPEC §8.1 extension).

    4.9.8 ``MQFaultStrategy.selectOneMessageQueue`` returns a queue of an available broker whenever there
    is one; ``updateFaultItem`` after each attempt makes its broker unavailable until its end +
    ``computeNotAvailableDuration(error ? 30000 : latency)``. The windows are replayed per producer (the
    ``actor``) from its first attempt (``n`` 1) up to its first gap, over the ``send`` rows whose
    ``detail.fault`` is true. seqs = [the send row carrying the attempt].
    """
    return route_findings(trace.rows, window_offences)
