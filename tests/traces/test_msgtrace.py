"""RocketMQ 4.9 message-trace import (traces/msgtrace.py).

The fixture builder encodes records exactly as RocketMQ 4.9.8's
``TraceDataEncoder.encoderFromContextBean`` does (field order and separators
from the source, see the module docstring of ``msgtrace``).
"""

from __future__ import annotations

import json

import pytest

from rmqspec.traces.errors import TraceReadError
from rmqspec.traces.msgtrace import (
    CONTENT_SPLITOR as C,
)
from rmqspec.traces.msgtrace import (
    FIELD_SPLITOR as F,
)
from rmqspec.traces.msgtrace import (
    convert_bodies,
    read_msgtrace,
    split_records,
)


def pub(ts, group, topic, msg_id, offset_id, *, cost=3, msg_type=0, success=True, keys="k1 k2",
        tags="TagA", region="DefaultRegion", body_len=11, store="127.0.0.1:10911"):
    return C.join(["Pub", str(ts), region, group, topic, msg_id, str(tags), str(keys), store,
                   str(body_len), str(cost), str(msg_type), str(offset_id),
                   str(success).lower()]) + F


def sub_before(ts, group, request_id, msg_id, retry, keys="k1"):
    return C.join(["SubBefore", str(ts), "DefaultRegion", group, request_id, msg_id, str(retry),
                   str(keys)]) + F


def sub_after(request_id, msg_id, cost, success, ts=None, group=None, keys="k1", code=0):
    fields = ["SubAfter", request_id, msg_id, str(cost), str(success).lower(), keys, str(code)]
    if ts is None:  # AccessChannel.CLOUD: no timestamp/group, ends with CONTENT_SPLITOR
        return C.join(fields) + C
    return C.join([*fields, str(ts), group]) + F


def end_txn(ts, group, topic, msg_id, txn_id, state, from_check):
    return C.join(["EndTransaction", str(ts), "DefaultRegion", group, topic, msg_id, "null",
                   "null", "127.0.0.1:10911", "2", txn_id, state, str(from_check).lower()]) + F


K1, K2, K3 = "0A0000010001000000000000000A0001", "0A0000010001000000000000000A0002", "0A00000100010000000000000000000F"


def bodies() -> list[str]:
    return [
        pub(1000, "PG", "TopicA", K1, "7F00000100002A9F0000000000000000"),
        pub(1010, "PG", "TopicA", K2, "7F00000100002A9F0000000000000100", msg_type=3)
        + pub(1020, "PG", "TopicA", "DEAD", "null", success=False),
        sub_before(1100, "CG", "req-1", K1, 0) + sub_before(1100, "CG", "req-1", K2, 0),
        sub_after("req-1", K1, 7, False, ts=1114, group="CG")
        + sub_after("req-1", K2, 7, True)  # CLOUD: the next record is glued on
        + sub_before(12000, "CG", "req-2", K1, 1),
        sub_after("req-2", K1, 4, True, ts=12008, group="CG"),
        pub(2000, "TPG", "TopicB", K3, "7F00000100002A9F0000000000000200", msg_type=1)
        + end_txn(2100, "TPG", "TopicB", K3, K3, "COMMIT_MESSAGE", True),
    ]


def test_split_records_follows_java_split_and_undoes_cloud_glue():
    recs = split_records(sub_after("r", K1, 1, True) + sub_before(5, "G", "r2", K2, 0))
    assert [r[0] for r in recs] == ["SubAfter", "SubBefore"] and len(recs[0]) == 7
    assert split_records("") == []


def test_records_convert_to_events():
    rows = convert_bodies(bodies())
    got = [(r["seq"], r["event"], r["ts"], r.get("group"), r.get("msg_key"), r.get("status"))
           for r in rows]
    assert got == [
        (0, "send", 1003, "PG", K1, "SEND_OK"),
        (1, "send", 1013, "PG", K2, "SEND_OK"),
        (2, "deliver", 1100, "CG", K1, None),
        (3, "deliver", 1100, "CG", K2, None),
        (4, "consume", 1107, "CG", K2, "SUCCESS"),  # CLOUD: SubBefore ts + costTime
        (5, "consume", 1114, "CG", K1, "RECONSUME_LATER"),
        (6, "txn_half", 2003, "TPG", K3, "SEND_OK"),
        (7, "txn_end", 2100, "TPG", K3, "COMMIT"),
        (8, "deliver", 12000, "CG", K1, None),
        (9, "consume", 12008, "CG", K1, "SUCCESS"),
    ]
    assert rows[0]["msg_id"] == "7F00000100002A9F0000000000000000"
    assert rows[0]["detail"]["keys"] == "k1 k2" and rows[1]["detail"]["msg_type"] == "Delay_Msg"
    assert rows[2]["topic"] == "TopicA" and rows[8]["reconsume_times"] == 1
    assert rows[6]["txn_id"] == K3 and rows[7]["txn_id"] == K3
    assert rows[7]["detail"]["from_check"] is True and "tags" not in rows[7]["detail"]
    assert all(r.get("queue_id") is None and r.get("queue_offset") is None for r in rows)


def test_import_file_of_raw_and_json_bodies(tmp_path):
    src = tmp_path / "trace.txt"
    lines = [b if i % 2 else json.dumps({"body": b}) for i, b in enumerate(bodies())]
    src.write_text("\n".join([*lines, "", "Pub" + C + "oops" + F, "{not json"]) + "\n")
    result = read_msgtrace(src)
    assert result.bodies == 7 and len(result.rows) == 10
    assert len(result.skipped) == 1 and "isSuccess=false" in result.skipped[0].reason
    assert [r.position.split(":")[1].split()[0] for r in result.rejected] == ["8", "9"]
    assert result.rows == convert_bodies(bodies())


def test_old_pub_without_offset_msg_id_and_new_pub_with_client_host():
    old = C.join(["Pub", "5", "R", "PG", "T", K1, "null", "null", "h", "1", "2", "0", "true"]) + F
    new = pub(7, "PG", "T", K2, "OFF").rstrip(F) + C + "10.0.0.9@1234" + F
    rows = convert_bodies([old, new])
    assert rows[0]["msg_id"] is None and rows[0]["actor"] == "PG" and "tags" not in rows[0]["detail"]
    assert rows[1]["msg_id"] == "OFF" and rows[1]["actor"] == "10.0.0.9@1234"


def test_unreadable_msgtrace_inputs(tmp_path):
    with pytest.raises(TraceReadError, match="no such file"):
        read_msgtrace(tmp_path / "nope.txt")
    (tmp_path / "junk.txt").write_text("hello world\nmore\n")
    with pytest.raises(TraceReadError, match="not a RocketMQ message-trace"):
        read_msgtrace(tmp_path / "junk.txt")
    with pytest.raises(ValueError, match="msgType 9"):
        convert_bodies([pub(1, "PG", "T", K1, "X", msg_type=9)])


def test_keys_consumed_but_never_published_leave_unexpected_unjudged():
    """A oneway send (or one no answer came for) has no Pub: RocketMQ's trace hook needs a SendResult.
    The converted trace begins with a send row standing for such sends, and UNEXPECTED, which it
    cannot prove, is not judged, with the reason in the report; a trace of published keys is unchanged."""
    from rmqspec.traces.checker import check
    from rmqspec.traces.checks_common import NOT_JUDGED_WHY, UNRECORDED

    k4 = "7F0000010001000000000000000000FF"  # a oneway send's UNIQ_KEY: no Pub
    oneway = [sub_before(1100, "CG", "req-9", k4, 0), sub_after("req-9", k4, 3, True, ts=1103, group="CG")]
    rows = convert_bodies([*bodies(), *oneway])
    [at] = [i for i, r in enumerate(rows) if r.get("detail", {}).get("unrecorded")]
    first = rows[at]
    assert (first["event"], first["status"], first.get("msg_key"), first["ts"]) == ("send", "NO_RESPONSE", None, 1100)
    assert rows[at + 1]["event"] == "deliver" and rows[at + 1]["ts"] == 1100  # just before the first delivery
    assert [r["seq"] for r in rows] == list(range(len(rows)))
    assert [r["ts"] for r in rows] == sorted(r["ts"] for r in rows)
    assert first["detail"]["keys_consumed_unpublished"] == 1
    report = check(rows)
    assert "UNEXPECTED" not in {f.code for f in report.violations}
    assert NOT_JUDGED_WHY[UNRECORDED] in report.not_judged["UNEXPECTED"]
    # without the row the same deliveries are UNEXPECTED: the row is what keeps the audit honest
    bare = check([{**r, "seq": i} for i, r in enumerate(rows[:at] + rows[at + 1:])])
    assert {f.code for f in bare.violations} >= {"UNEXPECTED"}
    assert not [r for r in convert_bodies(bodies()) if "unrecorded" in r.get("detail", {})]  # all published
