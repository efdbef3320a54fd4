"""Retention against real RocketMQ 4.9.8 (issue 42, D21; 4.9.8 only: no ``ALSO_ON_5X``): expired
commitlog files deleted, the consume queues after them, the min offsets moved — and rmqspec's rules
(``model/retention.py``) predicting it.

The broker runs with 4 KiB commitlog files, 10-unit consume-queue files, ``fileReservedTime=1`` (hour) and
``deleteWhen`` the current UTC hour and the next (the JVM runs in UTC). After the sends this process sets
the mtime of every commitlog file but the last two back two hours (``os.utime``: 4.9.8 ages a file by its
mtime — rmqspec by the put that rolled it, fidelity R1); the first clean pass (60 s after the start) must
delete exactly the files ``commitlog_pass`` says, and the queues' min offsets must be what
``corrected_min`` says of the units the sends reported (fidelity R4); the raw pull answers carry the response
code and GetMessageStatus remark rmqspec gives (OFFSET_TOO_SMALL, MESSAGE_WAS_REMOVING, OFFSET_FOUND_NULL:
seed E14, fidelity R6).
"""

from __future__ import annotations

import datetime
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rmqspec.model.retention import Policy, commitlog_pass, corrected_min
from rmqspec.traces.checker import check
from tests.interop.realrmq import RealRocketMQ
from tests.interop.test_remote_adapter_real import Fixture

FILE = 4096
CQ_UNITS = 10


@pytest.fixture(scope="module")
def rmq(realrmq: RealRocketMQ, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fixture]:
    hour = datetime.datetime.now(datetime.UTC).hour
    storedir = tmp_path_factory.mktemp("rmq-retention")
    conf = [f"mappedFileSizeCommitLog={FILE}", f"mappedFileSizeConsumeQueue={CQ_UNITS * 20}",
            "fileReservedTime=1", f"deleteWhen={hour:02d};{(hour + 1) % 24:02d}", "flushDiskType=SYNC_FLUSH",
            "-Duser.timezone=UTC"]
    try:
        yield Fixture(realrmq, realrmq.start(storedir, *conf))
    finally:
        realrmq.stop(storedir)


@pytest.fixture(scope="module")
def expired(rmq: Fixture) -> dict[str, Any]:
    """The sends, the commitlog files aged two hours back but the last two, the broker's first clean pass."""
    sent_ts = int(time.time() * 1000)
    sent = rmq.scenario("retention_fill", n=60)["sent"]
    commitlog = Path(rmq.storedir) / "store" / "commitlog"
    names = sorted(os.listdir(commitlog))
    assert len(names) >= 5, names
    aged = time.time() - 2 * 3600
    for name in names[:-2]:
        os.utime(commitlog / name, (aged, aged))
    mtimes = [int(os.stat(commitlog / name).st_mtime * 1000) for name in names]
    obs = rmq.scenario("retention_observe", timeout_s=150)
    return {"sent": sent, "sent_ts": sent_ts, "names": names, "mtimes": mtimes, "obs": obs,
            "left": sorted(os.listdir(commitlog)), "seen_ts": int(time.time() * 1000)}


def test_expired_files_go_and_the_min_offsets_move_as_rmqspec_predicts(rmq: Fixture, expired: dict[str, Any]) -> None:
    sent, names, mtimes, obs = expired["sent"], expired["names"], expired["mtimes"], expired["obs"]
    commitlog = Path(rmq.storedir) / "store" / "commitlog"
    # rmqspec's pass over the files as the broker saw them (ages by mtime here: the real broker's measure)
    now = int(time.time() * 1000)
    expected = commitlog_pass(Policy.of(1, f"{datetime.datetime.now(datetime.UTC).hour:02d}", 75), now, 0.0,
                              [*mtimes[:-1], None]).delete
    assert expected == min(len(names) - 2, 10)
    left = sorted(os.listdir(commitlog))
    assert left == names[expected:], (names, left)
    commitlog_min = int(left[0])
    units = [s["commitlog_offset"] for s in sent["RT_RET"]]
    cq_files = sorted(os.listdir(Path(rmq.storedir) / "store" / "consumequeue" / "RT_RET" / "0"))
    first = int(cq_files[0]) // 20
    low = corrected_min(units[first:first + CQ_UNITS], first, commitlog_min, 0)
    # the consume-queue files whose last unit points below the min are gone (never the last)
    for k in range(first // CQ_UNITS):
        assert units[(k + 1) * CQ_UNITS - 1] < commitlog_min
    assert units[first + CQ_UNITS - 1] >= commitlog_min or first + CQ_UNITS >= len(units)
    below = obs["below"]
    assert (below["status"], below["min_offset"], below["next_begin_offset"]) == ("OFFSET_ILLEGAL", low, low), obs
    assert [m["queue_offset"] for m in obs["at_min"]["messages"]] == [low]
    # RT_U's 3 units all point below the min in its only (last) consume-queue file: the min stays 0 and
    # a pull at 1 passes the gone units (MESSAGE_WAS_REMOVING: PULL_RETRY_IMMEDIATELY), as rmqspec answers
    assert all(s["commitlog_offset"] < commitlog_min for s in sent["RT_U"])
    u = obs["u_at_1"]
    assert (u["status"], u["min_offset"], u["next_begin_offset"], u["messages"]) == ("NO_MATCHED_MSG", 0, 3, []), obs
    # A RocketMQ 4.9.8 defect (fidelity R5): the unit at commitlog offset 0 reads the FIRST REMAINING file
    # (CommitLog.getMessage: findMappedFileByOffset(offset, returnFirstOnNotFound = offset == 0)), and
    # answers FOUND with the unit's size of another record's bytes — a body no client can decode.
    # rmqspec answers MESSAGE_WAS_REMOVING there, as for any other unit whose file is gone.
    assert sent["RT_U"][0]["commitlog_offset"] == 0
    bad = obs["u_at_0"]
    assert bad.get("error") == "ResponseMalformed" and "runs past the body" in bad["message"], obs
    assert obs["query_fresh"] == -1, obs  # no offset and the min above 0: QUERY_NOT_FOUND
    # the raw answers: the response code PullMessageProcessor gives each GetMessageStatus (tests/wire_programs.py
    # CODE_OF) and the status's name as the remark (seed E14, fidelity R6), as rmqspec's store predicts
    assert obs["raw_below"] == {"code": 21, "remark": "OFFSET_TOO_SMALL", "next": low, "min": low}, obs
    assert obs["raw_u_at_1"] == {"code": 20, "remark": "MESSAGE_WAS_REMOVING", "next": 3, "min": 0}, obs
    # RT_N's 12 units all lie below the min: its first consume-queue file (units 0-9) went, its last stayed and
    # correctMinOffset found no unit there at or above the min, so its min stays 0; offset 0's file is gone
    assert all(s["commitlog_offset"] < commitlog_min for s in sent["RT_N"])
    assert obs["raw_n_at_0"] == {"code": 19, "remark": "OFFSET_FOUND_NULL", "next": CQ_UNITS, "min": 0}, obs
    assert obs["raw_n_at_10"] == {"code": 20, "remark": "MESSAGE_WAS_REMOVING", "next": 12, "min": 0}, obs


def _retention_trace(expired: dict[str, Any], drained: dict[str, Any]) -> list[dict[str, Any]]:
    """The run as a client-side trace: every send acknowledged, the clean pass as an ``expire`` row (the
    commitlog's new min offset, the files it took), what a fresh group then consumed of RT_RET, a drain."""
    rows: list[dict[str, Any]] = []
    for topic, sends in expired["sent"].items():
        for s in sends:
            rows.append({"ts": expired["sent_ts"], "event": "send", "topic": topic, "queue_id": 0,
                         "queue_offset": s["queue_offset"], "commitlog_offset": s["commitlog_offset"],
                         "msg_key": s["uniq_key"], "status": "SEND_OK"})
    files = len(expired["names"]) - len(expired["left"])
    rows.append({"ts": expired["seen_ts"], "event": "expire", "commitlog_offset": int(expired["left"][0]),
                 "detail": json.dumps({"cause": "reserved", "files": files})})
    for m in drained["messages"]:
        where = {"group": "RG_DRAIN", "topic": "RT_RET", "queue_id": 0, "queue_offset": m["queue_offset"],
                 "msg_key": m["uniq_key"], "client_id": "drain", "reconsume_times": 0}
        rows.append({"ts": m["recv_ts"], "event": "deliver", **where})
        rows.append({"ts": m["recv_ts"], "event": "consume", "status": "SUCCESS", **where})
    rows.append({"ts": rows[-1]["ts"] + 1, "event": "drain"})
    return [{"seq": seq, **r} for seq, r in enumerate(rows)]


def test_a_trace_of_the_retention_audits_clean(rmq: Fixture, expired: dict[str, Any]) -> None:
    """Issue 42's real trace: the messages the clean pass took are no loss (the ``expire`` row proves they
    were below the commitlog's min), the ones it kept are judged — consumed, so clean. Without the
    ``expire`` row the same trace loses exactly the taken ones of the consumed topic; a kept message nobody
    consumed is LOST."""
    drained = rmq.scenario("retention_drain")
    commitlog_min = int(expired["left"][0])
    kept = [s["uniq_key"] for s in expired["sent"]["RT_RET"] if s["commitlog_offset"] >= commitlog_min]
    # RT_RET's taken messages (RT_U's and RT_N's were all taken too, and no group of the trace consumes them)
    taken = sorted(s["uniq_key"] for s in expired["sent"]["RT_RET"] if s["commitlog_offset"] < commitlog_min)
    assert [m["uniq_key"] for m in drained["messages"]] == kept and kept and taken
    rows = _retention_trace(expired, drained)
    report = check(rows)
    assert (report.violations, report.observations, report.rows_rejected) == ((), (), 0)
    unexpired = [dict(r, seq=seq) for seq, r in enumerate(r for r in rows if r["event"] != "expire")]
    assert sorted(f.keys.get("msg_key") for f in check(unexpired).violations if f.code == "LOST") == taken
    unconsumed = [dict(r, seq=seq) for seq, r in enumerate(
        r for r in rows if not (r["event"] == "consume" and r["msg_key"] == kept[-1]))]
    assert [(f.code, f.keys.get("msg_key")) for f in check(unconsumed).violations] == [("LOST", kept[-1])]


BROADCAST = json.dumps({"message_model": "BROADCASTING"})


def _modes_trace(mix: dict[str, Any]) -> list[dict[str, Any]]:
    """Step 4 as client-side rows: the oneway, async, answer-lost and retried sends, two broadcasting readers
    (each its own deliveries, consumes and offsets) and a clustering one."""
    topic = mix["topic"]
    rows: list[dict[str, Any]] = [
        {"ts": mix["oneway"]["ts"], "event": "send", "topic": topic, "queue_id": 0, "msg_key": mix["oneway"]["key"],
         "status": "ONEWAY", "detail": json.dumps({"send_mode": "ONEWAY"})},
        {"ts": mix["async"]["answered_ts"], "event": "send", "topic": topic, "queue_id": 0,
         "queue_offset": mix["async"]["queue_offset"], "commitlog_offset": mix["async"]["commitlog_offset"],
         "msg_key": mix["async"]["uniq_key"], "status": "SEND_OK", "detail": json.dumps({"send_mode": "ASYNC"})},
        {"ts": mix["lost"]["ts"], "event": "send", "topic": topic, "queue_id": 0, "msg_key": mix["lost"]["key"],
         "status": "NO_RESPONSE", "detail": json.dumps({"send_mode": "SYNC"})},
        {"ts": mix["retry"]["ts"], "event": "send", "topic": topic, "queue_id": 1,
         "queue_offset": mix["retry"]["queue_offset"], "commitlog_offset": mix["retry"]["commitlog_offset"],
         "msg_key": mix["retry"]["uniq_key"], "status": "SEND_OK", "detail": json.dumps({"send_mode": "SYNC"})},
    ]
    for reader, group in (("bc1", "RG_BC"), ("bc2", "RG_BC"), ("mix", "RG_MIX")):
        mine = {"group": group, "client_id": reader, **({"detail": BROADCAST} if group == "RG_BC" else {})}
        for m in mix[reader]:
            where = {**mine, "topic": topic, "queue_id": m["queue_id"], "queue_offset": m["queue_offset"],
                     "msg_key": m["uniq_key"], "reconsume_times": 0}
            rows.append({"ts": m["recv_ts"], "event": "deliver", **where})
            rows.append({"ts": m["recv_ts"], "event": "consume", "status": "SUCCESS", **where})
        for q in range(2):
            ends = [m["queue_offset"] + 1 for m in mix[reader] if m["queue_id"] == q]
            if ends:
                rows.append({"ts": mix[reader][-1]["recv_ts"], "event": "commit_offset", **mine, "topic": topic,
                             "queue_id": q, "queue_offset": max(ends)})
    return rows


def test_one_trace_of_oneway_async_lost_answers_broadcasting_and_retention_audits_clean(
        rmq: Fixture, expired: dict[str, Any]) -> None:
    """Issue 42's combined real trace, one 4.9.8 broker run: retention's clean pass (the `expire` row), a oneway
    and an async send, a send whose answer was lost and its retry, two broadcasting readers and a clustering one.
    No violation; the only observations are the duplicates the lost answer made, once per reader."""
    drained = rmq.scenario("retention_drain")
    mix = rmq.scenario("retention_modes")
    keys = {name: mix[name]["key"] for name in ("oneway", "lost")} | {"async": mix["async"]["uniq_key"]}
    assert mix["lost"]["stored"] and mix["retry"]["uniq_key"] == keys["lost"]
    assert (mix["async"]["status"], mix["retry"]["status"]) == ("SEND_OK", "SEND_OK")
    for reader in ("bc1", "bc2", "mix"):  # every reader got all four copies: the lost answer's message twice
        assert sorted(m["uniq_key"] for m in mix[reader]) == sorted([*keys.values(), keys["lost"]]), mix[reader]
    base = _retention_trace(expired, drained)[:-1]  # without its drain
    rows = sorted([{k: v for k, v in r.items() if k != "seq"} for r in base] + _modes_trace(mix),
                  key=lambda r: r["ts"])
    rows.append({"ts": rows[-1]["ts"] + 1, "event": "drain"})
    rows = [{"seq": seq, **r} for seq, r in enumerate(rows)]
    report = check(rows)
    assert (report.violations, report.rows_rejected) == ((), 0), report.violations
    # DUPLICATED per broadcasting client, per group in clustering (traces/checks_delivery.py)
    assert sorted((f.code, f.keys.get("msg_key"), f.keys.get("group"), f.keys.get("client_id", ""))
                  for f in report.observations) == [("DUPLICATED", keys["lost"], "RG_BC", "bc1"),
                                                    ("DUPLICATED", keys["lost"], "RG_BC", "bc2"),
                                                    ("DUPLICATED", keys["lost"], "RG_MIX", "")]
    # the trace judges what it says: the clustering reader's consume of the async message taken out is LOST;
    # the oneway message's taken out is not (never acknowledged)
    for key, lost in ((keys["async"], ["LOST"]), (keys["oneway"], [])):
        cut = [dict(r, seq=seq) for seq, r in enumerate(
            r for r in rows if not (r["event"] == "consume" and r["msg_key"] == key and r.get("client_id") == "mix"))]
        assert [f.code for f in check(cut).violations if f.keys.get("msg_key") == key] == lost
