"""client_ops: our requests next to the Java 4.9.8 client's captured ones; the broker's captured answers parsed."""

from __future__ import annotations

import struct

import attrs
import pytest

from rmqspec.impl.codec import MessageRecord, encode_record
from rmqspec.model.message import Message, MessageQueue, decode_properties
from rmqspec.model.results import (
    BrokerError,
    PullStatus,
    ResponseCode,
    SendStatus,
    TxnAction,
)
from rmqspec.remoting import bodies
from rmqspec.remoting import client_ops as ops
from rmqspec.remoting.codes import REQUESTS, RequestCode
from rmqspec.remoting.command import RemotingCommand, response_to
from tests.remoting.capture_pairs import Exchange, broker_requests, check_body, exchanges

# The Java client adds the broker name to broker requests, its pull consumer ReqT; the broker ignores both.
JAVA_ONLY = {"bname", "ReqT"}


def captured(code: RequestCode, where=lambda e: True) -> Exchange:
    return next(e for e in exchanges() if e.request.code == code and where(e))


def ext_of(cmd: RemotingCommand) -> dict[str, str]:
    return {k: v for k, v in cmd.ext_fields.items() if k not in JAVA_ONLY}


def test_send_ext_is_the_java_producers() -> None:
    java = captured(RequestCode.SEND_MESSAGE_V2).request
    props = decode_properties(java.ext_fields["i"])
    msg = Message(java.ext_fields["b"], java.body, tags=props["TAGS"], keys=props["KEYS"],
                  properties={"scn": props["scn"]}, uniq_key=props["UNIQ_KEY"])
    ours = ops.send_request(java.ext_fields["a"], msg, 0, msg.wire_properties(), int(java.ext_fields["g"]),
                            "broker-a")
    assert ours.code == 310 and ours.body == java.body and not REQUESTS[RequestCode.SEND_MESSAGE_V2].missing(
        dict(ours.ext_fields))
    assert {k: v for k, v in ours.ext_fields.items() if k != "i"} == \
        {k: v for k, v in java.ext_fields.items() if k != "i"}
    # WAIT=true included, as the Java Message constructor adds it (fidelity B1)
    assert decode_properties(ours.ext_fields["i"]) == props


def test_half_properties_are_the_transactional_producers() -> None:
    props = ops.half_properties({"DELAY": "3", "UNIQ_KEY": "U"}, "PG")
    assert props == {"UNIQ_KEY": "U", "TRAN_MSG": "true", "PGROUP": "PG"}
    assert ops.HALF_SYS_FLAG == 4


@pytest.mark.parametrize(("code", "build"), [
    (RequestCode.UPDATE_AND_CREATE_TOPIC,
     lambda j: ops.create_topic_request(j.ext_fields["topic"], int(j.ext_fields["readQueueNums"]))),
    (RequestCode.QUERY_CONSUMER_OFFSET,
     lambda j: ops.query_offset_request(j.ext_fields["consumerGroup"],
                                        MessageQueue(j.ext_fields["topic"], int(j.ext_fields["queueId"])))),
    (RequestCode.UPDATE_CONSUMER_OFFSET,
     lambda j: ops.update_offset_request(j.ext_fields["consumerGroup"],
                                         MessageQueue(j.ext_fields["topic"], int(j.ext_fields["queueId"])),
                                         int(j.ext_fields["commitOffset"]))),
    (RequestCode.END_TRANSACTION,
     lambda j: ops.end_transaction_request(j.ext_fields["producerGroup"], int(j.ext_fields["commitLogOffset"]),
                                           int(j.ext_fields["tranStateTableOffset"]), TxnAction.UNKNOWN, False,
                                           j.ext_fields["msgId"], None)),
    (RequestCode.UNREGISTER_CLIENT,
     lambda j: ops.unregister_request(j.ext_fields["clientID"], consumer_group=j.ext_fields["consumerGroup"])),
])
def test_request_ext_fields_are_the_java_clients(code: RequestCode, build) -> None:
    java = captured(code).request
    ours = build(java)
    assert ours.code == code and ext_of(ours) == ext_of(java)
    assert REQUESTS[code].missing(dict(ours.ext_fields)) == []


def test_send_back_ext_is_the_java_consumers_without_origin_topic() -> None:
    java = captured(RequestCode.CONSUMER_SEND_MSG_BACK).request
    j = java.ext_fields
    ours = ops.send_back_request(j["group"], int(j["offset"]), int(j["delayLevel"]), j["originMsgId"],
                                 int(j["maxReconsumeTimes"]))
    assert ext_of(ours) == {k: v for k, v in ext_of(java).items() if k != "originTopic"}
    assert "maxReconsumeTimes" not in ops.send_back_request("G", 1, 0, None, None).ext_fields


def test_pull_ext_is_non_suspended_with_the_subscription() -> None:
    java = captured(RequestCode.PULL_MESSAGE).request
    ours = ops.pull_request("G", MessageQueue("T", 2), 7, 32, "tagA || tagB")
    assert set(ours.ext_fields) == set(ext_of(java)) | {"subscription"}
    assert {k: ours.ext_fields[k] for k in ("sysFlag", "suspendTimeoutMillis", "queueOffset", "queueId",
                                             "subscription", "expressionType", "maxMsgNums")} == {
        "sysFlag": "4", "suspendTimeoutMillis": "0", "queueOffset": "7", "queueId": "2",
        "subscription": "tagA || tagB", "expressionType": "TAG", "maxMsgNums": "32"}


@pytest.mark.parametrize("code", [RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, RequestCode.LOCK_BATCH_MQ,
                                  RequestCode.UNLOCK_BATCH_MQ])
def test_json_bodies_are_byte_for_byte_the_java_clients(code: RequestCode) -> None:
    java = captured(code).request
    body = bodies.loads_object(java.body, code.name)
    if code is RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP:
        ours = ops.create_group_request(body["groupName"], body["retryMaxTimes"], body["retryQueueNums"])
    else:
        mqs = [MessageQueue(m["topic"], m["queueId"]) for m in body["mqSet"]]
        make = ops.lock_request if code is RequestCode.LOCK_BATCH_MQ else ops.unlock_request
        ours = make(body["consumerGroup"], body["clientId"], mqs, "broker-a")
    assert ours.body == java.body and ours.ext_fields == {}


def test_heartbeat_names_producer_and_consumer_groups() -> None:
    cmd = ops.heartbeat_request("127.0.0.1@x", {"PG2", "PG1"}, {"G": {"T2", "T1"}})
    body = bodies.loads_object(cmd.body, "heartbeat")
    java = bodies.loads_object(captured(RequestCode.HEART_BEAT).request.body, "heartbeat")
    assert set(body) == set(java)
    assert body["producerDataSet"] == [{"groupName": "PG1"}, {"groupName": "PG2"}]
    (consumer,) = body["consumerDataSet"]
    assert set(consumer) == set(java["consumerDataSet"][0])
    assert [s["topic"] for s in consumer["subscriptionDataSet"]] == ["T1", "T2"]
    assert consumer["consumeType"] == "CONSUME_ACTIVELY"


# ---------------------------------------------------------------------------------------------- answers


def test_send_answers() -> None:
    for e in (x for x in exchanges() if x.request.code == RequestCode.SEND_MESSAGE_V2 and x.response):
        res = ops.parse_send(e.response, "U")
        msg_id = e.response.ext_fields["msgId"]
        assert (res.status, res.msg_id, res.uniq_key) == (SendStatus.SEND_OK, msg_id, "U")
        assert res.queue_offset == int(e.response.ext_fields["queueOffset"])
        assert res.commitlog_offset == int(msg_id[16:], 16)
    req = captured(RequestCode.SEND_MESSAGE_V2).request
    timeout = response_to(req, 10, ext={"msgId": "7F00000100002A9F0000000000000010", "queueOffset": 3})
    assert ops.parse_send(timeout, "U").status is SendStatus.FLUSH_DISK_TIMEOUT
    with pytest.raises(BrokerError) as err:
        ops.parse_send(response_to(req, 17, "topic[X] not exist"), "U")
    assert (err.value.code, err.value.remark) == (ResponseCode.TOPIC_NOT_EXIST, "topic[X] not exist")
    with pytest.raises(ops.ResponseMalformed, match="SEND_MESSAGE_V2: msgId: missing ext field"):
        ops.parse_send(response_to(req, 0, ext={"queueOffset": 1}), "U")
    with pytest.raises(ops.ResponseMalformed, match="msgId: 3 bytes"):
        ops.parse_send(response_to(req, 0, ext={"queueOffset": 1, "msgId": "ABCDEF"}), "U")
    with pytest.raises(ops.ResponseMalformed, match="queueOffset: not an integer"):
        ops.parse_send(response_to(req, 0, ext={"queueOffset": "x", "msgId": "7F00000100002A9F0000000000000010"}), "U")


def test_unknown_response_codes_are_system_errors_naming_the_code() -> None:
    req = captured(RequestCode.SEND_MESSAGE_V2).request
    with pytest.raises(BrokerError, match="unknown response code 207 to SEND_MESSAGE_V2: no") as err:
        ops.parse_send(response_to(req, 207, "no"), "U")
    assert err.value.code is ResponseCode.SYSTEM_ERROR


def test_pull_answers_not_found_codes() -> None:
    statuses = {19: PullStatus.NO_NEW_MSG, 20: PullStatus.NO_MATCHED_MSG, 21: PullStatus.OFFSET_ILLEGAL}
    seen = set()
    for e in (x for x in exchanges() if x.request.code == RequestCode.PULL_MESSAGE and x.response):
        if e.response.code in statuses:
            res = ops.parse_pull(e.response)
            x = e.response.ext_fields
            assert (res.status, res.messages) == (statuses[e.response.code], ())
            assert (res.next_begin_offset, res.min_offset, res.max_offset) == (
                int(x["nextBeginOffset"]), int(x["minOffset"]), int(x["maxOffset"]))
            seen.add(e.response.code)
        elif e.response.code == 0 and not e.response_complete:
            with pytest.raises(ops.ResponseMalformed, match="PULL_MESSAGE: body: body byte 0: record size"):
                ops.parse_pull(e.response)  # the capture cut the body: the record runs past it
    assert seen == set(statuses)


def _record(topic: str, queue_id: int, queue_offset: int, physical: int, **kw) -> bytes:
    rec = MessageRecord(topic=topic, queue_id=queue_id, body=kw.pop("body", b"b"), born_ts=1, store_ts=2,
                        born_host=("127.0.0.1", 5555), **kw)
    return encode_record(rec, queue_offset=queue_offset, physical_offset=physical)


def test_pull_found_decodes_each_record() -> None:
    first = _record("T", 1, 0, 0, properties={"TAGS": "a", "UNIQ_KEY": "U0"})
    second = _record("T", 1, 1, len(first), properties={"KEYS": "k1 k2", "UNIQ_KEY": "U1"}, reconsume_times=2)
    req = ops.pull_request("G", MessageQueue("T", 1), 0, 32, "*")
    res = ops.parse_pull(response_to(req, 0, "FOUND", {"nextBeginOffset": 2, "minOffset": 0, "maxOffset": 2,
                                                       "suggestWhichBrokerId": 0}, first + second))
    assert res.status is PullStatus.FOUND and [m.queue_offset for m in res.messages] == [0, 1]
    m0, m1 = res.messages
    assert (m0.msg_id, m0.tags, m0.uniq_key, m0.commitlog_offset) == ("7F00000100002A9F0000000000000000", "a",
                                                                      "U0", 0)
    assert (m1.keys, m1.reconsume_times, m1.commitlog_offset) == (("k1", "k2"), 2, len(first))
    with pytest.raises(BrokerError) as err:
        ops.parse_pull(response_to(req, 26, "subscription group not exist"))
    assert err.value.code is ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST


def test_offsets_locks_codes() -> None:
    q = captured(RequestCode.QUERY_CONSUMER_OFFSET)
    assert ops.parse_query_offset(q.response) == int(q.response.ext_fields["offset"])
    assert ops.parse_query_offset(response_to(q.request, 22, "Not found, V3_0_6_SNAPSHOT maybe")) == -1
    lock = captured(RequestCode.LOCK_BATCH_MQ, lambda e: b"lockOKMQSet\":[{" in e.response.body)
    asked = [MessageQueue(m["topic"], m["queueId"]) for m in bodies.loads_object(lock.request.body, "l")["mqSet"]]
    assert ops.parse_lock(lock.response, asked) == frozenset(asked)
    denied = captured(RequestCode.LOCK_BATCH_MQ, lambda e: b'"lockOKMQSet":[]' in e.response.body)
    assert ops.parse_lock(denied.response, asked) == frozenset()
    with pytest.raises(ops.ResponseMalformed, match=r"granted .* that was not asked for"):
        ops.parse_lock(lock.response, [MessageQueue("other", 0)])
    back = captured(RequestCode.CONSUMER_SEND_MSG_BACK)
    assert ops.parse_code(back.response) is ResponseCode.SUCCESS
    assert ops.parse_code(response_to(back.request, 26)) is ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST


def test_name_server_answers() -> None:
    cluster = captured(RequestCode.GET_BROKER_CLUSTER_INFO)
    assert b"{0:" in cluster.response.body  # fastjson's bare integer key
    assert ops.parse_cluster_info(cluster.response) == {"broker-a": {0: "127.0.0.1:10911"}}
    route = captured(RequestCode.GET_ROUTEINFO_BY_TOPIC, lambda e: e.response and e.response.code == 0)
    assert ops.parse_route_queues(route.response, "broker-a") is not None
    assert ops.parse_route_queues(route.response, "broker-b") is None
    missing = captured(RequestCode.GET_ROUTEINFO_BY_TOPIC, lambda e: e.response and e.response.code == 17)
    assert ops.parse_route_queues(missing.response, "broker-a") is None
    binary = captured(RequestCode.GET_ROUTEINFO_BY_TOPIC, lambda e: e.request.serialize_type == 1)
    assert ops.parse_route_queues(binary.response, "broker-a") == (4, 4)


def test_check_requests_become_check_requests() -> None:
    java = next(c for c in broker_requests() if c.code == RequestCode.CHECK_TRANSACTION_STATE)
    body = check_body(dict(java.ext_fields))
    assert len(body) == 316
    assert struct.unpack_from(">i", java.body) == (316,)
    assert body[:160] == java.body  # every captured byte, fixed header, topic and the first properties
    check = ops.parse_check(attrs.evolve(java, body=body))
    assert (check.producer_group, check.transaction_id) == ("PG_TXN_931679", java.ext_fields["transactionId"])
    assert (check.commitlog_offset, check.tran_state_table_offset) == (8387, 3)
    assert check.message.msg_id == java.ext_fields["offsetMsgId"]
    assert check.message.topic == "RS_TXN_931679" and check.message.body == b"txn unknown"
    with pytest.raises(ops.ResponseMalformed, match="CHECK_TRANSACTION_STATE: body: body byte 0"):
        ops.parse_check(java)  # as captured: cut
    with pytest.raises(ops.ResponseMalformed, match="2 records, expected 1"):
        ops.parse_check(attrs.evolve(java, body=body + check_body({**java.ext_fields, "commitLogOffset": "8703"})))
    with pytest.raises(ops.ResponseMalformed, match="commitLogOffset: missing ext field"):
        ops.parse_check(attrs.evolve(java, body=body, ext_fields={"tranStateTableOffset": "3"}))


def test_the_lock_body_of_the_profile_s_client() -> None:
    """4.9.8's LockBatchRequestBody has no onlyThisBroker; 5.x's client sends it, false (Version.lock_only_this_broker:
    rocketmq-rust refuses a body without it, docs/conformance/rocketmq-rust.md RR-4)."""
    mq = MessageQueue("T", 3)
    old = bodies.loads_object(ops.lock_request("G", "c1", [mq], "broker-a").body, "l")
    new = bodies.loads_object(ops.unlock_request("G", "c1", [mq], "broker-a", only_this_broker=True).body, "l")
    assert "onlyThisBroker" not in old and new["onlyThisBroker"] is False
    assert {k: v for k, v in new.items() if k != "onlyThisBroker"} == old
    assert list(new) == sorted(new)  # fastjson's field order
