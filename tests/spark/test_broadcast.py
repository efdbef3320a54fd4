"""Broadcasting consumers (issue 42) in the Spark audit, against the reference checker.

Hypothesis draws small traces of one broadcasting group's clients (its rows say ``detail.message_model``
BROADCASTING; some commits say ``from_where``, where a client's run began) beside a clustering group, over
two queues, eight keys and two clients, with rows lacking fields: the audit of all of them in one input
must give exactly the checker's findings — code, seqs, keys and reason: LOST per client
(``spark/rules_broadcast.py``), DUPLICATED per client (some consumes timed out: its reason says so),
OFFSET_OVERRUN per client, the orderly rules without a broadcasting client's rows, the group-wide LOST
without its group — and its ``not_judged`` counts. The same traces, each cut in two days, audited
incrementally (carried whole: a trace with a broadcasting client's row), give the findings of the whole
history.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from rmqspec.spark.config import AuditConfig
from rmqspec.spark.incremental import run as run_incremental
from rmqspec.spark.job import run_audit
from rmqspec.traces.checker import check
from rmqspec.traces.checker_cases import PARAMS
from rmqspec.traces.io import rows_to_table
from tests.untraced import budget_run

pytestmark = pytest.mark.spark

TRACES = 160
_ACTIONS = ("send",) * 5 + ("deliver",) * 3 + ("consume",) * 5 + ("commit",) * 3 + (
    "start", "store", "send_back", "orderly_start", "orderly_end", "lock")
_MSG_KEYS = tuple(f"K{i}" for i in range(1, 9))
_OPTIONAL = ("group", "topic", "queue_id", "queue_offset", "msg_key", "client_id", "status")
_KEYS = ("group", "topic", "queue_id", "msg_key", "client_id", "txn_id")


@st.composite
def _trace(draw: Any) -> list[dict[str, Any]]:
    """Sends placed in two queues of T; clients C1, C2 of the broadcasting group B (and of the clustering group
    G) get, consume and commit offsets of them, some commits where a client (re)started (``from_where``); a few
    delayed or timer messages, send-backs, orderly windows, locks and crashes; a drain at the end mostly; one
    row in 25 lacks a field, one client row in ten says the other model."""
    rows: list[dict[str, Any]] = []
    placed: dict[int, list[str]] = {0: [], 1: []}  # queue -> the key at each offset
    ts = 0
    for _ in range(draw(st.integers(1, 40))):
        action = draw(st.sampled_from(_ACTIONS))
        ts += draw(st.sampled_from((0, 1, 1000)))
        queue = draw(st.sampled_from((0, 0, 1)))
        if not placed[queue] and action in ("deliver", "consume", "send_back"):
            action = "send"
        group, client = draw(st.sampled_from(("B", "B", "G"))), draw(st.sampled_from(("C1", "C1", "C2")))
        at = draw(st.integers(0, max(len(placed[queue]) - 1, 0))) if action != "send" else len(placed[queue])
        key = placed[queue][at] if at < len(placed[queue]) else draw(st.sampled_from(_MSG_KEYS))
        row: dict[str, Any] = {"event": action, "group": group, "topic": "T", "queue_id": queue,
                               "queue_offset": at, "msg_key": key, "client_id": client}
        if action == "send":
            key = draw(st.sampled_from(_MSG_KEYS))
            placed[queue].append(key)
            row.update(group=None, client_id=None, msg_key=key,
                       status=draw(st.sampled_from(("SEND_OK", "SEND_OK", None, "FAILED"))),
                       delay_level=draw(st.sampled_from((None,) * 8 + (0, 1))),
                       deliver_ts=draw(st.sampled_from((None,) * 8 + (ts + 5,))))
        elif action == "store":
            row.update(group=None, client_id=None, topic=draw(st.sampled_from(("SCHEDULE_TOPIC_XXXX",
                                                                               "rmq_sys_wheel_timer"))),
                       deliver_ts=ts + draw(st.sampled_from((0, 5000))))
        elif action == "consume":
            row["status"] = draw(st.sampled_from(("SUCCESS", "SUCCESS", "RECONSUME_LATER")))
        elif action in ("commit", "start"):
            top = len(placed[queue])
            row.update(event="commit_offset", msg_key=None,
                       queue_offset=top if action == "start" else draw(st.integers(0, top)))
        elif action == "send_back":
            row.update(status=draw(st.sampled_from(("RETRY", "DLQ"))), reconsume_times=1)
        elif action == "lock":
            row.update(status="GRANTED", queue_offset=None, msg_key=None)
        elif action.startswith("orderly"):
            row["msg_key"] = None
        if action in ("deliver", "consume", "commit", "start", "send_back", "orderly_start", "orderly_end"):
            detail: dict[str, Any] = {}
            if (group == "B") != (draw(st.integers(0, 9)) == 0):
                detail["message_model"] = "BROADCASTING"
            if action == "start" or (action == "commit" and draw(st.integers(0, 9)) == 0):
                detail["from_where"] = "CONSUME_FROM_LAST_OFFSET"
            if action == "consume" and draw(st.integers(0, 5)) == 0:
                detail["return_type"] = "TIME_OUT"  # DUPLICATED's reason names it
            row["detail"] = detail or None
        if draw(st.integers(0, 24)) == 0:
            row[draw(st.sampled_from(_OPTIONAL))] = None
        rows.append({"seq": len(rows), "ts": ts, **row})
    if draw(st.integers(0, 29)) == 0:
        rows.append({"seq": len(rows), "ts": ts, "event": "crash", "status": "kill",
                     "detail": {"at_risk": ["K1"]}})
    if draw(st.integers(0, 5)):
        rows.append({"seq": len(rows), "ts": ts + 1, "event": "drain"})
    return rows


def _traces(n: int) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}

    @settings(max_examples=n, derandomize=True, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(_trace())
    def collect(rows: list[dict[str, Any]]) -> None:
        out[f"b{len(out):03d}"] = rows

    collect()
    return out


def _write(rows: dict[str, list[dict[str, Any]]], path: Path) -> None:
    path.mkdir(parents=True)
    flat = [{**r, "trace_id": tid} for tid, trace in rows.items() for r in trace]
    pq.write_table(rows_to_table(flat), path / "part-00000.parquet")


def _found(out: Path) -> list[tuple[Any, ...]]:
    return sorted((r["trace_id"], r["code"], tuple(r["seqs"]), *(r[k] for k in _KEYS), r["reason"])
                  for name in ("violations", "observations") for r in pq.read_table(out / name).to_pylist())


def _checked(rows: dict[str, list[dict[str, Any]]]) -> tuple[list[tuple[Any, ...]], Any]:
    report = check([{**r, "trace_id": tid} for tid, trace in rows.items() for r in trace], PARAMS)
    found = sorted((f.trace_id, f.code, tuple(f.seqs), *(f.keys.get(k) for k in _KEYS), f.reason)
                   for f in (*report.violations, *report.observations))
    return found, report


@pytest.fixture(scope="module")
def drawn() -> dict[str, list[dict[str, Any]]]:
    return _traces(TRACES)


@budget_run
def test_broadcasting_traces_audit_as_the_checker_audits_them(spark, tmp_path, drawn):
    want, report = _checked(drawn)
    per_client = [f for f in want if f[1] == "LOST" and f[7] is not None]
    assert len(per_client) >= 10, "the draws reach LOST per client too rarely"
    assert any(f[1] == "DUPLICATED" and f[7] is not None and "TIME_OUT" in f[-1] for f in want)
    assert any(f[1] == "OFFSET_OVERRUN" for f in want)
    assert any(f[1] == "LOST" and f[7] is None for f in want)
    _write(drawn, tmp_path / "in")
    for plan in ("small", "scale"):
        summary = run_audit(spark, [str(tmp_path / "in")], str(tmp_path / plan), plan=plan)
        assert _found(tmp_path / plan) == want, plan
        assert dict(summary.not_judged) == dict(report.not_judged), plan
    assert {"LOST", "OFFSET_OVERRUN"} <= set(report.not_judged)


@budget_run
def test_broadcasting_traces_cut_in_two_days_give_the_findings_of_the_whole(spark, tmp_path, drawn):
    """Each trace cut in two at its middle row: day 2 with day 1's state gives the whole history's findings
    (findings of codes stored for good keep their keys and reasons too)."""
    subset = dict(list(drawn.items())[: TRACES // 2])
    days: list[dict[str, list[dict[str, Any]]]] = [{}, {}]
    for tid, rows in subset.items():
        cut = len(rows) // 2
        days[0][tid], days[1][tid] = rows[:cut], rows[cut:]
    for i, day in enumerate(days):
        _write({tid: rows for tid, rows in day.items() if rows}, tmp_path / f"day{i}")
    run_audit(spark, [str(tmp_path / "day0"), str(tmp_path / "day1")], str(tmp_path / "full"), plan="small")
    want = _found(tmp_path / "full")
    assert want == _checked(subset)[0] and any(f[1] == "LOST" and f[7] is not None for f in want)
    for plan in ("small", "reference"):
        state = None
        for i in range(2):
            state_out = str(tmp_path / f"{plan}-state{i}")
            run_incremental(spark, [str(tmp_path / f"day{i}")], str(tmp_path / f"{plan}{i}"), AuditConfig(), state,
                            state_out, on_stage=lambda _s: None, plan=plan)
            state = state_out
        assert _found(tmp_path / f"{plan}1") == want, plan
        carried = json.loads((Path(state) / "state.json").read_text())["rows"]
        whole = sum(len(rows) for rows in subset.values() if any("BROADCASTING" in json.dumps(r.get("detail"))
                                                                  for r in rows))
        assert carried >= whole > 0, plan  # a trace with a broadcasting client's row is carried whole
