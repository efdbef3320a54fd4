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
  k + 1 right after attempt k, consecutive ``n``, on one row: a send's attempts ride on the row that
  acknowledges it) goes to another broker than attempt k's whenever the route has one —
  ``TopicPublishInfo.selectOneMessageQueue(lastBrokerName)`` tries every queue of the list before it gives
  up. With the strategy on, 4.9.8 ignores lastBrokerName (only the fault table steers the retry).
- ``check_fault_window`` (``FaultWindowProperty``): with the strategy on, no attempt goes to a broker inside
  its not-available window while another broker of the route is available — the first loop of
  ``MQFaultStrategy.selectOneMessageQueue`` returns a queue of an available broker whenever there is one. The
  windows are replayed from the producer's attempts: after each, the broker is unavailable until its end +
  ``computeNotAvailableDuration(error ? 30000 : latency)``. Judged from a producer's first attempt (``n`` 1)
  up to its first gap (a missing attempt, one lacking a field, a row whose tables are unreadable); the tables
  are 4.9.8's defaults unless the row states both ``detail.latency_max`` and ``detail.not_available_duration``
  (one without the other: a gap).

One definition (issue 43): the rules are pure functions over (seq, actor, detail) rows in seq order
(``retry_offences``, ``window_offences``, giving ``Offence`` values); the invariants hand them a ``History``'s
``send`` events, the reference checker (``traces/checks_route.py``) and through it the Spark audit
(``spark/rules_route.py``) a trace's ``send`` rows. An attempt is read only when it states every field
(``error`` present, null when answered: an attempt without it could be a failure read as an answer).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from itertools import pairwise
from typing import Any

import attrs

from rmqspec.model.fault_strategy import ISOLATION_LATENCY, LATENCY_MAX, NOT_AVAILABLE_DURATION, not_available_duration
from rmqspec.properties.history import History
from rmqspec.properties.inv_base import Invariant, Violation, _v

PRODUCER_RETRY_SAME_BROKER = "PRODUCER_RETRY_SAME_BROKER"
PRODUCER_FAULT_WINDOW = "PRODUCER_FAULT_WINDOW"
ROUTE_CODES = (PRODUCER_RETRY_SAME_BROKER, PRODUCER_FAULT_WINDOW)

_FIELDS = {"n": int, "attempt": int, "broker": str, "start": int, "latency": int, "brokers": list}

# One row the rules read: (its seq, its actor, its ``detail``) — a History's event or an audited trace row.
Row = tuple[int, Any, Mapping[str, Any] | None]


@attrs.frozen
class Offence:
    """One attempt a rule rejects: its code, the ``send`` row carrying it, the producer, why."""

    code: str
    seq: int
    actor: str
    reason: str
    expected: str
    actual: str


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _well_formed(t: Any) -> bool:
    """An attempt stating every field as JSON gives it; ``error`` present (null: answered): an attempt without
    it could be a failure read as an answer, a shorter window (not judged, never a finding)."""
    if not (isinstance(t, Mapping) and "error" in t and (t["error"] is None or isinstance(t["error"], str))):
        return False
    return all(_is_int(t.get(k)) if typ is int else isinstance(t.get(k), typ) for k, typ in _FIELDS.items()) and all(
        isinstance(b, str) for b in t["brokers"])


def tries_of(detail: Mapping[str, Any] | None) -> list[Any] | None:
    """A row's ``detail.tries`` when it is a list (the rows the rules read), else None."""
    tries = (detail or {}).get("tries") if isinstance(detail, Mapping) else None
    return tries if isinstance(tries, list) else None


def _tries(rows: Iterable[Row]) -> Iterator[tuple[str, int, Mapping[str, Any], bool | None, list[dict[str, Any]]]]:
    """(producer, seq, detail, fault flag, its well-formed attempts) for each row that carries attempts."""
    for seq, actor, detail in rows:
        tries = tries_of(detail)
        if tries is None or not isinstance(actor, str):
            continue
        assert detail is not None
        fault = detail.get("fault")
        yield actor, seq, detail, fault if isinstance(fault, bool) else None, [t for t in tries if _well_formed(t)]


def retry_offences(rows: Iterable[Row]) -> list[Offence]:
    """PRODUCER_RETRY_SAME_BROKER over ``rows`` in seq order: a row's own judgement (one send's attempts ride
    on one row: the row acknowledging it)."""
    out: list[Offence] = []
    for actor, seq, _, fault, tries in _tries(rows):
        if fault is not False:
            continue
        for p, t in pairwise(tries):
            if t["n"] != p["n"] + 1 or t["attempt"] != p["attempt"] + 1:
                continue
            others = sorted(b for b in t["brokers"] if b != p["broker"])
            if t["broker"] == p["broker"] and others:
                out.append(Offence(
                    PRODUCER_RETRY_SAME_BROKER, seq, actor,
                    f"{actor}'s retry (attempt {t['attempt']}, n {t['n']}) went to {t['broker']} again after "
                    f"its attempt there failed ({p['error']}), the route having {', '.join(others)}",
                    f"a broker other than {p['broker']}", t["broker"]))
    return out


def _tables(detail: Mapping[str, Any]) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """The row's fault tables: 4.9.8's when it states neither, its own when it states both (lists of JSON
    integers of one length), else None (not judged)."""
    has_max, has_dur = "latency_max" in detail, "not_available_duration" in detail
    if not has_max and not has_dur:
        return LATENCY_MAX, NOT_AVAILABLE_DURATION
    lm, nd = detail.get("latency_max"), detail.get("not_available_duration")
    if not (isinstance(lm, list | tuple) and isinstance(nd, list | tuple) and len(lm) == len(nd) and lm
            and all(map(_is_int, (*lm, *nd)))):
        return None
    return tuple(lm), tuple(nd)


def window_offences(rows: Iterable[Row]) -> list[Offence]:
    """PRODUCER_FAULT_WINDOW over ``rows`` in seq order: each producer's attempts replayed from its first
    (``n`` 1) up to its first gap (a missing attempt, a row whose tables are unreadable)."""
    out: list[Offence] = []
    until: dict[str, dict[str, int]] = {}  # producer → broker → available again from
    next_n: dict[str, int | None] = {}  # producer → the n expected next (None: a gap, stop judging)
    for actor, seq, detail, fault, tries in _tries(rows):
        if fault is not True or next_n.get(actor, 1) is None:
            continue
        tables = _tables(detail)
        if tables is None:
            next_n[actor] = None
            continue
        table = until.setdefault(actor, {})
        for t in tries:
            if next_n.setdefault(actor, 1) != t["n"]:
                next_n[actor] = None
                break
            next_n[actor] = t["n"] + 1
            now, broker = t["start"], t["broker"]
            available = sorted(b for b in t["brokers"] if b != broker and table.get(b, now) <= now)
            if table.get(broker, now) > now and available:
                out.append(Offence(
                    PRODUCER_FAULT_WINDOW, seq, actor,
                    f"{actor}'s attempt n {t['n']} went to {broker} at {now}, not available until "
                    f"{table[broker]}, while {', '.join(available)} was available",
                    f"one of {', '.join(available)}", broker))
            end = now + t["latency"]
            table[broker] = end + not_available_duration(
                ISOLATION_LATENCY if t["error"] is not None else t["latency"], *tables)
    return out


def _rows(h: History) -> Iterator[Row]:
    for ev in h.of("send"):
        yield ev.seq, ev.actor, ev.detail


def _violations(h: History, found: list[Offence]) -> list[Violation]:
    by_seq = {ev.seq: ev for ev in h.of("send")}
    return [_v(h, o.code, by_seq[o.seq], o.reason, o.expected, o.actual) for o in found]


def check_retry_other_broker(h: History) -> list[Violation]:
    """With sendLatencyFaultEnable off, a retry goes to another broker than the failed attempt's when the
    route has one: a retry to the same broker is PRODUCER_RETRY_SAME_BROKER."""
    return _violations(h, retry_offences(_rows(h)))


def check_fault_window(h: History) -> list[Violation]:
    """With sendLatencyFaultEnable on, an attempt to a broker inside its not-available window while
    another broker of the route is available is PRODUCER_FAULT_WINDOW."""
    return _violations(h, window_offences(_rows(h)))


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
