"""A day that touches what an earlier day closed: the incremental tests' shared case (``traces/carry.py``'s
tombstones pulled back, by the reference checker and by the Spark audit)."""

from __future__ import annotations

from typing import Any


def touching_day(day1: list[dict[str, Any]], consume: dict[str, Any]) -> list[dict[str, Any]]:
    """Three rows after ``day1`` (rows in seq order): a deliver to a new consumer group CG_NEW of a topic
    ``day1`` sent to other than ``consume``'s (LOST for every closed message of it), ``consume`` again
    (a duplicate SUCCESS: DUPLICATED) and a second drain (LOST judged again)."""
    topic = next(r["topic"] for r in day1 if r["event"] == "send" and r["topic"] != consume["topic"])
    seq, ts = day1[-1]["seq"] + 1, day1[-1]["ts"] + 1000
    blank = dict.fromkeys(day1[0])
    return [
        {**blank, "seq": seq, "ts": ts, "event": "deliver", "group": "CG_NEW", "topic": topic, "queue_id": 0,
         "queue_offset": 0, "msg_key": "NEW", "client_id": "c-new", "reconsume_times": 0},
        {**consume, "seq": seq + 1, "ts": ts + 1},
        {**blank, "seq": seq + 2, "ts": ts + 2, "event": "drain"},
    ]  # fmt: skip
