"""pop_ops: the pop requests' ext fields and bodies, the answers parsed, the extra-info format of 5.3.3
(ExtraInfoUtil), and malformed answers refused naming the field. The examples are the strings real 5.3.3
wrote in interop/pop_probe.py runs (docs/pop-facts.md)."""

from __future__ import annotations

import base64
import json

import pytest

from rmqspec.impl.codec import MessageRecord, encode_record
from rmqspec.model.results import BrokerError
from rmqspec.remoting import pop_ops as po
from rmqspec.remoting.client_ops import ResponseMalformed
from rmqspec.remoting.command import RemotingCommand

# seen on real 5.3.3: a normal message's handle (built by the client), a revived one's (broker-made POP_CK)
NORMAL = "0 1796574442101 3000 0 0 broker-a 0 1"
REVIVED = "0 1796574449930 3000 7 1 broker-a 0 0"


def test_request_codes_are_5_3_3s() -> None:
    assert (po.POP_MESSAGE, po.ACK_MESSAGE, po.CHANGE_MESSAGE_INVISIBLETIME, po.BATCH_ACK_MESSAGE) == (
        200050, 200051, 200053, 200151)


def test_extra_info_split_and_join_round_trip() -> None:
    h = po.ExtraInfo.split(NORMAL)
    assert h == po.ExtraInfo(0, 1796574442101, 3000, 0, po.TopicType.NORMAL, "broker-a", 0, 1)
    assert h.join() == NORMAL and h.offset == 1 and not h.orderly
    r = po.ExtraInfo.split(REVIVED)
    assert r.topic_type is po.TopicType.RETRY_V1 and r.revive_qid == 7 and r.join() == REVIVED
    seven = po.ExtraInfo.split("5 100 3000 999 2 b 3")  # the 7-field form: the ck offset is the offset
    assert seven.queue_offset is None and seven.offset == 5 and seven.orderly and seven.join() == "5 100 3000 999 2 b 3"
    assert po.ExtraInfo.split(NORMAL + " ") == h  # String.split drops trailing empty strings
    # Long.valueOf takes a sign and any Unicode decimal digit (Character.digit)
    assert po.ExtraInfo.split("+0 1 2 3 0 b 0 \u0661\uff12").queue_offset == 12


@pytest.mark.parametrize(("text", "field"), [
    ("0 1 2 3 0 b", "extraInfo"), ("0 1 2 3 0 b 0 1 9", "extraInfo"), ("x 1 2 3 0 b 0 1", "ck_queue_offset"),
    ("0 1 2 3 4 b 0 1", "topic_type"), ("0 1 2 3 0  0 1", "broker_name"), ("0 1 2 3 0 b q 1", "queue_id"),
    ("0 1 2 3 0 b 0 1_0", "queue_offset"), ("0 1 2 3 0 b 0 +", "queue_offset"),
])
def test_extra_info_malformed_names_the_field(text: str, field: str) -> None:
    with pytest.raises(po.ExtraInfoError) as err:
        po.ExtraInfo.split(text)
    assert err.value.field == field


def test_retry_topic_names_and_types() -> None:
    assert po.retry_topic_v1("T", "G") == "%RETRY%G_T" and po.retry_topic_v2("T", "G") == "%RETRY%G+T"
    assert [po.topic_type(t) for t in ("T", "%RETRY%G_T", "%RETRY%G+T", "%RETRY%G")] == [
        po.TopicType.NORMAL, po.TopicType.RETRY_V1, po.TopicType.RETRY_V2, po.TopicType.RETRY_V1]
    assert po.real_topic(po.TopicType.RETRY_V2, "T", "G") == "%RETRY%G+T"


def test_offset_infos_as_5_3_3_writes_them() -> None:
    assert po.parse_start_offset_info("0 0 0;1 0 4") == {"0@0": 0, "1@0": 4}
    assert po.parse_msg_offset_info("0 0 0,1") == {"0@0": [0, 1]}
    assert po.parse_order_count_info("0 qo0%1 1;0 0 1") == {"0@qo0%1": 1, "0@0": 1}
    assert po.parse_start_offset_info("") == {} and po.parse_msg_offset_info(None) == {}
    assert po.join_offset_info([(po.TopicType.NORMAL, 0, [0, 1]), (po.TopicType.RETRY_V1, 0, 4)]) == "0 0 0,1;1 0 4"
    for bad in ("0 0", "0 0 1;0 0 2", "0 0 x"):
        with pytest.raises(po.ExtraInfoError):
            po.parse_start_offset_info(bad)


def test_pop_request_fields() -> None:
    cmd = po.pop_request("G", "T", queue_id=-1, max_nums=2, invisible_ms=3000, poll_ms=500, born_ms=7, order=True,
                         attempt_id="a1")
    assert cmd.code == 200050
    assert dict(cmd.ext_fields) == {"consumerGroup": "G", "topic": "T", "queueId": "-1", "maxMsgNums": "2",
                                    "invisibleTime": "3000", "pollTime": "500", "bornTime": "7", "initMode": "0",
                                    "expType": "TAG", "exp": "*", "order": "true", "attemptId": "a1"}
    assert "attemptId" not in po.pop_request("G", "T").ext_fields


def test_ack_and_change_requests_use_the_real_topic() -> None:
    h = po.ExtraInfo.split(REVIVED)
    ack = po.ack_request("G", "T", h)
    assert ack.code == 200051 and dict(ack.ext_fields) == {
        "consumerGroup": "G", "topic": "%RETRY%G_T", "queueId": "0", "extraInfo": REVIVED, "offset": "0"}
    ch = po.change_invisible_request("G", "T", po.ExtraInfo.split(NORMAL), 9000)
    assert ch.code == 200053 and ch.ext("topic") == "T" and ch.ext("offset") == "1"
    assert ch.ext("invisibleTime") == "9000"


def test_bitset_as_java_writes_it() -> None:
    assert po.bitset_bytes([0]) == b"\x01" and po.bitset_bytes([9]) == b"\x00\x02" and po.bitset_bytes([]) == b""
    assert po.bitset_bits(b"\x05\x80") == [0, 2, 15]
    assert po.bitset_bits(po.bitset_bytes([3, 64, 1])) == [1, 3, 64]


def test_batch_ack_body_round_trip() -> None:
    handles = [po.ExtraInfo(4, 100, 3000, 2, po.TopicType.NORMAL, "broker-a", 1, o) for o in (4, 6)]
    handles.append(po.ExtraInfo(0, 100, 3000, 2, po.TopicType.RETRY_V1, "broker-a", 0, 0))
    cmd = po.batch_ack_request("G", "T", handles)
    assert cmd.code == 200151 and not cmd.ext_fields
    raw = json.loads(cmd.body)
    assert raw["brokerName"] == "broker-a" and raw["acks"][0]["b"] == base64.b64encode(b"\x05").decode()
    broker, acks = po.parse_batch_ack_body(cmd.body)
    assert broker == "broker-a"
    assert [(a.retry, a.queue_id, a.start_offset, a.offsets) for a in acks] == [("0", 1, 4, (4, 6)), ("1", 0, 0, (0,))]
    long_names = json.dumps({"acks": [{"consumerGroup": "G", "topic": "T", "retry": "0", "startOffset": 2,
                                       "queueId": 0, "reviveQueueId": 1, "popTime": 5, "invisibleTime": 9,
                                       "bitSet": "Aw=="}]}).encode()
    assert po.parse_batch_ack_body(long_names)[1][0].offsets == (2, 3)
    with pytest.raises(po.ExtraInfoError) as err:
        po.parse_batch_ack_body(b'{"acks":[{"c":"G"}]}')
    assert err.value.field.startswith("acks[0].")


def _record(offset: int, physical: int, props: dict[str, str], topic: str = "T") -> bytes:
    rec = MessageRecord(topic=topic, queue_id=0, body=b"m%d" % offset, born_ts=1, store_ts=2,
                        born_host=("127.0.0.1", 5555), properties=props)
    return encode_record(rec, queue_offset=offset, physical_offset=physical)


def _answer(code: int, body: bytes = b"", **ext: str) -> RemotingCommand:
    base = {"popTime": "100", "invisibleTime": "3000", "reviveQid": "2", "restNum": "0"}
    return RemotingCommand(code=code, flag=1, remark="FOUND" if code == 0 else "NO_MESSAGE_IN_QUEUE",
                           ext_fields={**base, **ext}, body=body)


def test_parse_pop_found_builds_each_handle() -> None:
    first = _record(3, 0, {"UNIQ_KEY": "U3"})
    second = _record(4, len(first), {"UNIQ_KEY": "U4"})
    revived = _record(0, 0, {"UNIQ_KEY": "U5", "POP_CK": REVIVED, "1ST_POP_TIME": "90"})
    a = po.parse_pop(_answer(0, first + second, startOffsetInfo="0 0 3", msgOffsetInfo="0 0 3,4"), "broker-a")
    assert a.status is po.PopStatus.FOUND and a.revive_qid == 2 and len(a.messages) == 2
    assert [p.handle.join() for p in a.popped] == ["3 100 3000 2 0 broker-a 0 3", "3 100 3000 2 0 broker-a 0 4"]
    assert not any(p.broker_made_ck for p in a.popped)
    r = po.parse_pop(_answer(0, revived, startOffsetInfo="1 0 0", msgOffsetInfo="1 0 0"), "broker-a")
    assert r.popped[0].broker_made_ck and r.popped[0].handle.join() == REVIVED


def test_parse_pop_orderly_count_sets_reconsume_times() -> None:
    rec = _record(1, 0, {"UNIQ_KEY": "U1"})
    a = po.parse_pop(_answer(0, rec, reviveQid="999", startOffsetInfo="0 0 1", msgOffsetInfo="0 0 1",
                             orderCountInfo="0 qo0%1 2;0 0 2"), "b")
    assert a.popped[0].message.reconsume_times == 2 and a.popped[0].handle.orderly


@pytest.mark.parametrize(("code", "status"), [
    (210, po.PopStatus.POLLING_NOT_FOUND), (19, po.PopStatus.POLLING_NOT_FOUND), (209, po.PopStatus.POLLING_FULL)])
def test_parse_pop_not_found(code: int, status: po.PopStatus) -> None:
    a = po.parse_pop(_answer(code, startOffsetInfo="", msgOffsetInfo=""), "b")
    assert a.status is status and a.popped == () and a.remark == "NO_MESSAGE_IN_QUEUE"


def test_parse_pop_refusal_and_malformed() -> None:
    with pytest.raises(BrokerError):
        po.parse_pop(RemotingCommand(code=17, flag=1, remark="topic[X] not exist"), "b")
    with pytest.raises(ResponseMalformed) as err:
        po.parse_pop(RemotingCommand(code=210, flag=1, ext_fields={"popTime": "1", "invisibleTime": "2",
                                                                   "reviveQid": "0"}), "b")
    assert err.value.field == "restNum"
    with pytest.raises(ResponseMalformed) as err:
        po.parse_pop(_answer(210, popTime="soon"), "b")
    assert err.value.field == "popTime"
    with pytest.raises(ResponseMalformed) as err:  # a message of a queue the header gives no start offset for
        po.parse_pop(_answer(0, _record(0, 0, {}), startOffsetInfo="0 1 0", msgOffsetInfo="0 1 0"), "b")
    assert err.value.field == "startOffsetInfo"
    with pytest.raises(ResponseMalformed) as err:
        po.parse_pop(_answer(0, _record(0, 0, {"POP_CK": "1 2"}), startOffsetInfo="0 0 0"), "b")
    assert err.value.field == "POP_CK.extraInfo"
    with pytest.raises(ResponseMalformed) as err:
        po.parse_pop(_answer(0, b"\x00\x01", startOffsetInfo="0 0 0"), "b")
    assert err.value.field == "body"


def test_parse_change_invisible_new_handle() -> None:
    old = po.ExtraInfo.split("0 1796574539815 3000 1 0 broker-a 0 0")
    resp = RemotingCommand(code=0, flag=1, remark="not set any response code",
                           ext_fields={"invisibleTime": "9000", "popTime": "1796574539824", "reviveQid": "1"})
    new = po.parse_change_invisible(resp, old)
    assert new.handle is not None and new.handle.join() == "0 1796574539824 9000 1 0 broker-a 0 0"
    assert po.parse_change_invisible(RemotingCommand(code=208, flag=1), old).handle is None
    with pytest.raises(ResponseMalformed):
        po.parse_change_invisible(RemotingCommand(code=0, flag=1, ext_fields={"popTime": "1"}), old)
