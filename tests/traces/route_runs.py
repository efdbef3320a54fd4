"""Drawn traces of routed producers (issue 43) that the route tests share: Hypothesis ``composite``s.

Each trace: acknowledged ``send`` rows of producers P1, P2 (a few without an actor), each stating
``detail.fault`` (a few not), ``detail.tries`` (one send's attempts: 1-3, numbered ``n`` per producer with
now and then a gap), over brokers a, b, c (routes of one to three), failed attempts (RequestLost) and
answers of a latency from 5 ms to 20 s (windows of 0 to 600 s), starts a few ms to 10 minutes apart; a few
rows state fault tables (both, one, or unreadable) and a few attempts lack a field: what the rules must
leave unjudged. ``detail`` is JSON text or a dict.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

_FIELDS = ("n", "attempt", "broker", "queue_id", "start", "latency", "error", "brokers")
_TABLES = (None, None, None, None, "default", "one", "odd", "bad")


@st.composite
def route_trace(draw: Any) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    n = {"P1": 0, "P2": 0}
    now = 0
    for seq in range(draw(st.integers(1, 14))):
        actor = draw(st.sampled_from(("P1", "P1", "P2", "P2", None)))
        producer = actor or "P1"
        fault = draw(st.sampled_from((True, True, True, False, False, None)))
        route = draw(st.sampled_from((["a", "b"], ["a", "b"], ["a"], ["a", "b", "c"])))
        tries = []
        for attempt in range(1, draw(st.integers(1, 3)) + 1):
            n[producer] += 1 + (draw(st.integers(0, 30)) == 0)  # now and then a gap
            now += draw(st.sampled_from((1, 5, 5, 1000, 30_000, 600_010)))
            failed = draw(st.booleans())
            latency = draw(st.sampled_from((5, 5, 600, 1500, 20_000)))
            t = {"n": n[producer], "attempt": attempt, "broker": draw(st.sampled_from(route)), "queue_id": 0,
                 "start": now, "latency": latency, "error": "RequestLost" if failed else None, "brokers": route}
            if draw(st.integers(0, 30)) == 0:
                del t[draw(st.sampled_from(_FIELDS))]
            tries.append(t)
            now += latency
        detail: dict[str, Any] = {"broker": tries[-1].get("broker"), "tries": tries}
        if fault is not None:
            detail["fault"] = fault
        tables = draw(st.sampled_from(_TABLES))
        if tables == "default":
            detail["latency_max"] = [50, 100, 550, 1000, 2000, 3000, 15000]
            detail["not_available_duration"] = [0, 0, 30000, 60000, 120000, 180000, 600000]
        elif tables == "odd":
            detail["latency_max"], detail["not_available_duration"] = [0, 1000], [0, 1_000_000]
        elif tables == "one":
            detail["latency_max"] = [50]
        elif tables == "bad":
            detail["latency_max"], detail["not_available_duration"] = [0, "x"], [0, 1]
        row = {"seq": seq, "ts": now, "event": "send", "group": "PG", "topic": "T", "queue_id": 0,
               "msg_key": f"K{seq}", "status": "SEND_OK",
               "detail": json.dumps(detail) if draw(st.booleans()) else detail}
        if actor is not None:
            row["actor"] = actor
        rows.append(row)
    return rows
