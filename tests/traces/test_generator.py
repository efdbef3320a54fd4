"""The streaming generator: determinism, structural facts, injected ground truth."""

from __future__ import annotations

import json
from collections import defaultdict
from itertools import pairwise

import pyarrow.compute as pc
import pytest
from structural import BROKER_LOCK, CHECK_MAX, DELAYS, RETRY_MAX, TXN_TIMEOUT, audit

from rmqspec.properties.codes import VIOLATION_CODES as SPEC_CODES
from rmqspec.traces.generator import GenConfig, generate, generate_rows
from rmqspec.traces.io import open_trace, read_table
from rmqspec.traces.scenarios import VIOLATION_CODES, parse_codes
from tests.untraced import budget_run


@pytest.fixture(scope="module")
def clean() -> list[dict]:
    cfg = GenConfig(events=80_000, seed=7, crashes=3, send_gap_ms=20, p_owner_dies=0.1,
                    p_rebalance=0.1)
    rows, truth = generate_rows(cfg)
    assert truth == []
    return rows


def test_codes_are_the_spec_codes():
    assert VIOLATION_CODES == SPEC_CODES
    assert parse_codes("all") == VIOLATION_CODES
    with pytest.raises(ValueError, match="NOPE"):
        parse_codes("LOST,NOPE")


def test_deterministic_per_seed():
    a, _ = generate_rows(GenConfig(events=5000, seed=3, crashes=1))
    b, _ = generate_rows(GenConfig(events=5000, seed=3, crashes=1))
    c, _ = generate_rows(GenConfig(events=5000, seed=4, crashes=1))
    assert a == b and a != c


def test_clean_trace_breaks_no_rule(clean):
    assert audit(clean) == []
    assert clean[-1]["event"] == "drain"
    kinds = {r["event"] for r in clean}
    assert kinds >= {"send", "store", "deliver", "consume", "send_back", "schedule_fire",
                     "commit_offset", "lock", "unlock", "orderly_start", "orderly_end",
                     "txn_half", "txn_end", "txn_check", "txn_discard", "crash", "recover"}


def test_clean_trace_structure(clean):
    assert [r["seq"] for r in clean] == list(range(len(clean)))
    assert all(a["ts"] <= b["ts"] for a, b in pairwise(clean))
    # dense queue offsets from 0 per (topic, queue)
    nxt: dict = defaultdict(int)
    for r in clean:
        if r["event"] == "store":
            q = (r["topic"], r["queue_id"])
            assert r["queue_offset"] == nxt[q]
            nxt[q] += 1
    backs = [r for r in clean if r["event"] == "send_back"]
    assert {r["status"] for r in backs} == {"RETRY", "DLQ"}
    for r in backs:
        if r["status"] == "RETRY":
            assert r["reconsume_times"] <= RETRY_MAX
            assert r["delay_level"] == min(3 + r["reconsume_times"] - 1, len(DELAYS))
            assert r["deliver_ts"] == r["ts"] + DELAYS[r["delay_level"] - 1]
        else:
            assert r["reconsume_times"] == RETRY_MAX + 1 or r["delay_level"] == -1
    assert any(r["reconsume_times"] == RETRY_MAX + 1 for r in backs)  # poison → DLQ
    assert all(r["reconsume_times"] <= RETRY_MAX for r in clean if r["event"] == "deliver")
    # every SCHEDULE copy fires at or after its deliver_ts, on the 100 ms tick
    sched = {r["msg_id"]: r for r in clean if r["event"] == "store"
             and r["topic"] == "SCHEDULE_TOPIC_XXXX"}
    fires = [r for r in clean if r["event"] == "schedule_fire"]
    assert fires and all(sched[f["msg_id"]]["deliver_ts"] <= f["ts"] for f in fires)
    # transactions: checks after the timeout, at most check-max, every half resolved
    halves = {r["txn_id"]: r for r in clean if r["event"] == "txn_half"}
    checks: dict = defaultdict(list)
    ends: dict = defaultdict(set)
    for r in clean:
        if r["event"] == "txn_check":
            checks[r["txn_id"]].append(r)
        elif r["event"] in ("txn_end", "txn_discard"):
            ends[r["txn_id"]].add(r.get("status") or "DISCARD")
    assert max(len(c) for c in checks.values()) == CHECK_MAX
    for txn, cs in checks.items():
        assert all(c["ts"] >= halves[txn]["ts"] + TXN_TIMEOUT for c in cs)
        assert [c["detail"]["check_times"] for c in cs] == list(range(1, len(cs) + 1))
    for txn in halves:
        assert ends[txn] & {"COMMIT", "ROLLBACK", "DISCARD"}
        assert not {"COMMIT", "ROLLBACK"} <= ends[txn]
    # lock takeovers only after the broker lifetime, or after a restart (it empties the lock table)
    grants: dict = {}
    for r in clean:
        if r["event"] in ("crash", "recover"):
            grants.clear()
        elif r["event"] == "lock" and r["status"] == "GRANTED":
            k = (r["group"], r["topic"], r["queue_id"])
            prev = grants.get(k)
            if prev and prev[0] != r["client_id"] and prev[2] is False:
                assert r["ts"] - prev[1] > BROKER_LOCK
            grants[k] = (r["client_id"], r["ts"], False)
        elif r["event"] == "unlock":
            k = (r["group"], r["topic"], r["queue_id"])
            grants[k] = (*grants[k][:2], True)
    assert any(r["event"] == "lock" and r["status"] == "DENIED" for r in clean)


def test_crash_duplicates_are_observations(clean):
    success = defaultdict(int)
    for r in clean:
        if r["event"] == "consume" and r["status"] == "SUCCESS":
            success[(r["group"], r["msg_key"])] += 1
    assert max(success.values()) >= 2  # duplicates exist, and audit() found no violation
    sent = {r["msg_key"] for r in clean if r["event"] == "send"}
    unacked = [r for r in clean if r["event"] == "store" and r["msg_key"] not in sent
               and r["topic"].startswith("Topic")]
    assert unacked  # stored during a crash, never acknowledged (RECOVERED when delivered)


@pytest.mark.parametrize("code", VIOLATION_CODES)
def test_each_injected_code_produces_its_ground_truth(code):
    rows, truth = generate_rows(GenConfig(events=6000, seed=11, inject=(code,)))
    assert [t["code"] for t in truth] == [code]
    assert audit(rows) == [(code, tuple(truth[0]["seqs"]))]
    seqs = truth[0]["seqs"]
    assert seqs == sorted(seqs) and rows[seqs[-1]]["seq"] == seqs[-1]


def test_all_codes_twice_with_crashes_match_exactly():
    rows, truth = generate_rows(
        GenConfig(events=60_000, seed=5, crashes=2, inject=VIOLATION_CODES, inject_count=2)
    )
    assert len(truth) == 2 * len(VIOLATION_CODES)
    assert audit(rows) == [(t["code"], tuple(t["seqs"])) for t in truth]
    # both cases of RETRY_EARLY: [send_back, deliver] and [send_back]
    assert sorted(len(t["seqs"]) for t in truth if t["code"] == "RETRY_EARLY") == [1, 2]


def test_generate_writes_parts_and_truth(tmp_path):
    progress = []
    result = generate(
        tmp_path / "out",
        GenConfig(events=30_000, seed=2, inject=("LOST", "LOCK_OVERLAP")),
        part_rows=10_000,
        on_progress=lambda done, total: progress.append(done),
    )
    assert len(result.parts) == -(-result.events // 10_000) and progress[-1] == result.events
    truth = json.loads((tmp_path / "out" / "_truth.json").read_text())
    assert truth == list(result.truth) and {t["code"] for t in truth} == {"LOST", "LOCK_OVERLAP"}
    table, rejected = read_table(tmp_path / "out")
    assert rejected == [] and table.num_rows == result.events
    jsonl = generate(tmp_path / "t.jsonl", GenConfig(events=3000, seed=2))
    assert list(open_trace(tmp_path / "t.jsonl").iter_rows())[-1]["seq"] == jsonl.events - 1


@budget_run
def test_one_million_events_stream_to_parts(tmp_path):
    result = generate(tmp_path / "big", GenConfig(events=1_000_000, seed=1, crashes=1),
                      part_rows=500_000)
    assert 1_000_000 <= result.events < 1_100_000
    assert len(result.parts) == 3
    seqs = 0
    for batch in open_trace(tmp_path / "big").iter_batches(batch_rows_n=262_144):
        assert pc.min(batch.column("seq")).as_py() == seqs
        seqs += batch.num_rows
    assert seqs == result.events


def test_injected_subscription_inconsistent_is_found_as_an_observation():
    """Issue 15: ``--inject SUBSCRIPTION_INCONSISTENT`` (an observation) is reported by the checker."""
    from rmqspec.traces.checker import check

    rows, truth = generate_rows(GenConfig(events=3000, seed=3, inject=parse_codes("SUBSCRIPTION_INCONSISTENT")))
    report = check(rows)
    assert [t["code"] for t in truth] == ["SUBSCRIPTION_INCONSISTENT"]
    assert [(f.code, f.seqs) for f in report.observations if f.code == "SUBSCRIPTION_INCONSISTENT"] == [
        ("SUBSCRIPTION_INCONSISTENT", tuple(truth[0]["seqs"]))]
    assert report.violations == ()
