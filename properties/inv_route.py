"""The producer across several brokers (issue 43): a retry avoids the failed broker; the fault table is obeyed.

Theory of operation
-------------------
Both rules judge the client, not a broker: what RocketMQ 4.9.8's ``DefaultMQProducerImpl.sendDefaultImpl``
permits (``model/routing.py``, ``model/fault_strategy.py`` state the facts). They read the attempts a
producer's acknowledged ``send`` rows carry (``detail.tries``: ``n`` numbers a producer's attempts,
``attempt`` counts within a send, ``broker``, ``start``, ``latency``, ``error``, ``brokers`` the route's
brokers; ``detail.fault`` the producer's ``sendLatencyFaultEnable``). A row without them is not judged, and
neither is anything a missing attempt could explain (unknown is an answer: dropping rows never adds a finding).

- ``check_retry_other_broker`` (``RetryOtherBrokerProperty``): with the fault strategy off, a retry (attempt
  k + 1 right after attempt k, consecutive ``n``) goes to another broker than attempt k's whenever the route
  has one — ``TopicPublishInfo.selectOneMessageQueue(lastBrokerName)`` tries every queue of the list before
  it gives up. With the strategy on, 4.9.8 ignores lastBrokerName (only the fault table steers the retry).
- ``check_fault_window`` (``FaultWindowProperty``): with the strategy on, no attempt goes to a broker inside
  its not-available window while another broker of the route is available — the first loop of
  ``MQFaultStrategy.selectOneMessageQueue`` returns a queue of an available broker whenever there is one. The
  windows are replayed from the producer's attempts: after each, the broker is unavailable until its end +
  ``computeNotAvailableDuration(error ? 30000 : latency)``. Judged from a producer's first attempt (``n`` 1)
  up to its first gap; the tables are 4.9.8's defaults unless the row states ``detail.latency_max`` and
  ``detail.not_available_duration``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from rmqspec.model.events import TraceEvent
from rmqspec.model.fault_strategy import ISOLATION_LATENCY, LATENCY_MAX, NOT_AVAILABLE_DURATION, not_available_duration
from rmqspec.properties.history import History
from rmqspec.properties.inv_base import Invariant, Violation, _detail, _v

PRODUCER_RETRY_SAME_BROKER = "PRODUCER_RETRY_SAME_BROKER"
PRODUCER_FAULT_WINDOW = "PRODUCER_FAULT_WINDOW"
ROUTE_CODES = (PRODUCER_RETRY_SAME_BROKER, PRODUCER_FAULT_WINDOW)

_FIELDS = {"n": int, "attempt": int, "broker": str, "start": int, "latency": int, "brokers": list}


def _well_formed(t: Any) -> bool:
    return isinstance(t, dict) and all(isinstance(t.get(k), typ) for k, typ in _FIELDS.items()) and (
        t.get("error") is None or isinstance(t.get("error"), str))


def _tries(h: History) -> Iterator[tuple[str, TraceEvent, bool | None, list[dict[str, Any]]]]:
    """(producer, row, fault flag, its well-formed attempts) for each row that carries attempts."""
    for ev in h.of("send"):
        tries = _detail(ev, "tries")
        if not isinstance(tries, list) or ev.actor is None:
            continue
        fault = _detail(ev, "fault")
        yield ev.actor, ev, fault if isinstance(fault, bool) else None, [t for t in tries if _well_formed(t)]


def check_retry_other_broker(h: History) -> list[Violation]:
    """With sendLatencyFaultEnable off, a retry goes to another broker than the failed attempt's when the
    route has one: a retry to the same broker is PRODUCER_RETRY_SAME_BROKER."""
    out: list[Violation] = []
    prev: dict[str, dict[str, Any]] = {}
    for actor, ev, fault, tries in _tries(h):
        for t in tries:
            p = prev.get(actor)
            prev[actor] = t
            if fault is not False or p is None or t["n"] != p["n"] + 1 or t["attempt"] != p["attempt"] + 1:
                continue
            others = sorted(b for b in t["brokers"] if b != p["broker"])
            if t["broker"] == p["broker"] and others:
                out.append(_v(h, PRODUCER_RETRY_SAME_BROKER, ev,
                              f"{actor}'s retry (attempt {t['attempt']}, n {t['n']}) went to {t['broker']} again after "
                              f"its attempt there failed ({p['error']}), the route having {', '.join(others)}",
                              f"a broker other than {p['broker']}", t["broker"]))
    return out


def check_fault_window(h: History) -> list[Violation]:
    """With sendLatencyFaultEnable on, an attempt to a broker inside its not-available window while
    another broker of the route is available is PRODUCER_FAULT_WINDOW."""
    out: list[Violation] = []
    until: dict[str, dict[str, int]] = {}  # producer → broker → available again from
    next_n: dict[str, int | None] = {}  # producer → the n expected next (None: a gap, stop judging)
    for actor, ev, fault, tries in _tries(h):
        if fault is not True:
            continue
        latency_max = _detail(ev, "latency_max", LATENCY_MAX)
        durations = _detail(ev, "not_available_duration", NOT_AVAILABLE_DURATION)
        if not (isinstance(latency_max, list | tuple) and isinstance(durations, list | tuple)):
            continue
        table = until.setdefault(actor, {})
        for t in tries:
            if next_n.setdefault(actor, 1) != t["n"]:
                next_n[actor] = None
            if next_n[actor] is None:
                break
            next_n[actor] = t["n"] + 1
            now, broker = t["start"], t["broker"]
            available = sorted(b for b in t["brokers"] if b != broker and table.get(b, now) <= now)
            if table.get(broker, now) > now and available:
                out.append(_v(h, PRODUCER_FAULT_WINDOW, ev,
                              f"{actor}'s attempt n {t['n']} went to {broker} at {now}, not available until "
                              f"{table[broker]}, while {', '.join(available)} was available",
                              f"one of {', '.join(available)}", broker))
            end = now + t["latency"]
            table[broker] = end + not_available_duration(
                ISOLATION_LATENCY if t["error"] is not None else t["latency"], latency_max, durations)
    return out


ROUTE_INVARIANTS: tuple[Invariant, ...] = (
    Invariant("RetryOtherBrokerProperty", PRODUCER_RETRY_SAME_BROKER, "always",
              "Without the fault strategy, a producer's retry goes to another broker when the route has one.",
              "TopicPublishInfo.selectOneMessageQueue(lastBrokerName) in DefaultMQProducerImpl.sendDefaultImpl",
              check_retry_other_broker),
    Invariant("FaultWindowProperty", PRODUCER_FAULT_WINDOW, "always",
              "With sendLatencyFaultEnable, no attempt goes to a broker in its not-available window while "
              "another broker of the route is available.",
              "MQFaultStrategy.selectOneMessageQueue + LatencyFaultToleranceImpl (updateFaultItem per attempt)",
              check_fault_window),
)
