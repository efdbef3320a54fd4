"""The lock family's judge (``spark/rules_lock.py``), in-process, against the checker.

Hypothesis draws small traces of locks, unlocks, orderly windows and consumes
over two queues and three clients, with crashes between them; the judge must
give exactly the checker's findings of its four codes (code, seqs, keys,
reason).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from rmqspec.spark.arrow_judge import FINDINGS_ARROW, judge
from rmqspec.spark.rules_lock import _COLUMNS, _Judge
from rmqspec.traces.checker import check_trace, validate
from rmqspec.traces.checker_cases import PARAMS

CODES = {"ORDER_KEY_REORDERED", "LOCK_OVERLAP", "ORDERLY_WITHOUT_LOCK", "ORDERLY_CONCURRENT"}
_EVENTS = ("lock", "lock", "unlock", "orderly_start", "orderly_end", "consume", "consume", "consume", "crash")
_STATUS = {"lock": ("GRANTED", "GRANTED", "DENIED"), "consume": ("SUCCESS", "SUCCESS", "RECONSUME_LATER")}
_STRINGS = {"trace", "event", "group", "topic", "client_id", "status"}


@st.composite
def _trace(draw: Any) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    ts = 0
    for seq in range(draw(st.integers(1, 40))):
        event = draw(st.sampled_from(_EVENTS))
        ts += draw(st.sampled_from((0, 1, 10_000, 30_000, 30_001, 60_000, 60_001)))
        rows.append(
            {
                "seq": seq,
                "ts": ts,
                "event": event,
                "group": draw(st.sampled_from(("G", "G", None))),
                "topic": "T",
                "queue_id": draw(st.sampled_from((0, 1))),
                "client_id": draw(st.sampled_from(("C1", "C2", "C3"))),
                "status": draw(st.sampled_from(_STATUS.get(event, (None,)))),
                "queue_offset": draw(st.sampled_from((0, 1, 2, 3, None))),
            }
        )
    return rows


def _judged(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    epoch, family = 0, []
    for r in rows:
        if r["event"] == "crash":
            epoch += 1
        elif r["group"] is not None:
            family.append({**{c: r.get(c) for c in _COLUMNS}, "trace": "", "epoch": epoch})
    schema = pa.schema([(c, pa.string() if c in _STRINGS else pa.int64()) for c in _COLUMNS])
    batch = pa.RecordBatch.from_pylist(family, schema=schema)
    out = list(judge(_Judge(PARAMS))(iter([batch])))
    assert all(b.schema == FINDINGS_ARROW for b in out)
    return sorted(
        (f["code"], tuple(f["seqs"]), f["group"], f["topic"], f["queue_id"], f["client_id"], f["reason"])
        for b in out
        for f in b.to_pylist()
    )


def _checked(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    good, rejected = validate(rows)
    assert not rejected
    _, findings = check_trace(good, PARAMS)
    out = []
    for f in findings:
        if f.code in CODES:
            k = dict(f.keys)
            out.append(
                (f.code, tuple(f.seqs), k.get("group"), k.get("topic"), k.get("queue_id"), k.get("client_id"), f.reason)
            )
    return sorted(out)


@given(_trace())
def test_the_judge_finds_what_the_checker_finds(rows):
    assert _judged(rows) == _checked(rows)


def test_a_trace_of_every_lock_code():
    """C1 owns queue 0 and consumes out of order; C2 is granted it while C1's lock is fresh;
    C3 starts without a lock while C1's orderly window is open."""
    raw = [
        ("lock", 0, "C1", "GRANTED", None),
        ("orderly_start", 0, "C1", None, None),
        ("consume", 1, "C1", "SUCCESS", 5),
        ("consume", 2, "C1", "SUCCESS", 4),
        ("lock", 3, "C2", "GRANTED", None),
        ("orderly_start", 4, "C3", None, None),
    ]
    rows = [
        {"seq": i, "ts": ts, "event": ev, "group": "G", "topic": "T", "queue_id": 0, "client_id": c,
         "status": status, "queue_offset": offset}
        for i, (ev, ts, c, status, offset) in enumerate(raw)
    ]  # fmt: skip
    judged = _judged(rows)
    assert {f[0] for f in judged} == CODES
    assert judged == _checked(rows)


def test_an_empty_partition_gives_nothing():
    assert list(judge(_Judge(PARAMS))(iter([]))) == []
