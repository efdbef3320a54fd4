"""rmqspec serve: the name server (105, 106), admin and lookup codes (17, 200, 21, 26, 30, 31, 33, 321), code 3."""

from __future__ import annotations

import pytest

from rmqspec.impl.codec import decode_record
from rmqspec.remoting import bodies
from rmqspec.remoting.bodies import decode_messages
from rmqspec.remoting.command import SerializeType, request
from rmqspec.remoting.context import NOT_SET
from rmqspec.remoting.frame import decode_frame, encode_frame
from tests.remoting.conftest import SHORT_DELAYS, create_topic_ext, props, send_ext, uniq_key
from tests.remoting.wire_client import WireClient

FAQ = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."


def test_route_of_an_unknown_topic_is_17_with_the_name_server_remark(serve) -> None:
    s = serve()
    r = s.namesrv().call(105, {"topic": "Nope"})
    assert (r.code, r.remark) == (17, f"No topic route info in name server for the topic: Nope{FAQ}")
    assert r.is_response and r.body == b""


@pytest.mark.parametrize(("version", "standard", "quoted"), [(400, None, False), (0, None, False), (401, None, True),
                                                              (409, None, True), (0, "true", True)])
def test_route_quotes_broker_ids_from_v4_9_4_or_on_request(serve, version, standard, quoted) -> None:
    s = serve()
    ns = s.namesrv()
    ext = {"topic": "TBW102"} if standard is None else {"topic": "TBW102", "acceptStandardJsonOnly": standard}
    r = ns.call(105, ext, version=version)
    assert r.code == 0 and r.remark is None
    assert (b'{"0":' in r.body) is quoted and (b"{0:" in r.body) is not quoted
    route = bodies.loads_object(r.body, "route")
    assert route["brokerDatas"] == [{"brokerAddrs": {"0": s.server.broker_addr}, "brokerName": "broker-a",
                                     "cluster": "DefaultCluster"}]
    assert route["queueDatas"] == [{"brokerName": "broker-a", "perm": 7, "readQueueNums": 8, "topicSysFlag": 0,
                                    "writeQueueNums": 8}]


def test_cluster_info_always_has_bare_integer_keys(serve) -> None:
    s = serve(broker_name="broker-x", cluster="C1")
    r = s.namesrv().call(106)
    assert r.code == 0
    assert r.body == (b'{"brokerAddrTable":{"broker-x":{"brokerAddrs":{0:"' + s.server.broker_addr.encode()
                      + b'"},"brokerName":"broker-x","cluster":"C1"}},"clusterAddrTable":{"C1":["broker-x"]}}')


def test_unknown_codes_get_3_on_both_ports_in_the_request_serialize_type(serve) -> None:
    s = serve()
    for client in (s.namesrv(), s.client()):
        r = client.call(99999 % 32768, {})
        assert (r.code, r.remark) == (3, f" request type {99999 % 32768} not supported")
        r = client.call(12345, serialize_type=SerializeType.ROCKETMQ)
        assert r.serialize_type is SerializeType.ROCKETMQ and r.code == 3
    r = s.client().call(105, {"topic": "T"})  # a name-server code on the broker port
    assert r.code == 3


def test_binary_header_request_gets_a_binary_response(serve) -> None:
    s = serve()
    r = s.namesrv().call(105, {"topic": "TBW102"}, serialize_type=SerializeType.ROCKETMQ)
    assert r.serialize_type is SerializeType.ROCKETMQ and r.code == 0


def test_create_topic_answers_not_set_and_routes_at_once(serve) -> None:
    s = serve()
    b, ns = s.client(), s.namesrv()
    r = b.call(17, create_topic_ext("T1", 3))
    assert (r.code, r.remark) == (0, NOT_SET)
    route = bodies.loads_object(ns.call(105, {"topic": "T1"}).body, "route")
    assert route["queueDatas"][0]["readQueueNums"] == 3 and route["queueDatas"][0]["perm"] == 6
    r = b.call(17, {**create_topic_ext("T1", 2), "readQueueNums": "5"})  # one count: max(read, write)
    assert bodies.loads_object(ns.call(105, {"topic": "T1"}).body, "r")["queueDatas"][0]["writeQueueNums"] == 5


@pytest.mark.parametrize(("topic", "remark"), [
    ("SCHEDULE_TOPIC_XXXX", "The topic[SCHEDULE_TOPIC_XXXX] is conflict with system topic."),
    ("rmq_sys_x", "The topic[rmq_sys_x] is conflict with system topic."),
    ("bad topic", "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"),
    ("x" * 128, "The specified topic is longer than topic max length."),
])
def test_create_topic_refusals(serve, topic, remark) -> None:
    r = serve().client().call(17, create_topic_ext(topic, 1))
    assert (r.code, r.remark) == (1, remark)


def test_create_group_and_all_topic_config(serve) -> None:
    s = serve()
    b = s.client()
    body = b'{"brokerId":0,"consumeBroadcastEnable":true,"groupName":"G7","retryMaxTimes":2,"retryQueueNums":3}'
    r = b.call(200, body=body)
    assert (r.code, r.remark) == (0, None)
    assert s.on_loop(lambda: s.broker.group_config("G7")) == (2, 3)
    b.call(17, create_topic_ext("TA", 2))
    doc = bodies.loads_object(b.call(21).body, "topics")
    table = doc["topicConfigTable"]
    assert table["TA"] == {"order": False, "perm": 6, "readQueueNums": 2, "topicFilterType": "SINGLE_TAG",
                           "topicName": "TA", "topicSysFlag": 0, "writeQueueNums": 2}
    assert table["TBW102"]["perm"] == 7 and "SCHEDULE_TOPIC_XXXX" in table
    assert set(doc["dataVersion"]) == {"counter", "timestamp"}
    assert b.call(200, body=b'{"retryMaxTimes":2}').code == 1


def test_broker_config_is_properties_text_with_the_timing(serve) -> None:
    s = serve()
    r = s.client().call(26)
    assert r.code == 0 and "counter" in r.ext_fields["version"]
    lines = dict(line.split("=", 1) for line in r.body.decode().splitlines())
    assert lines["messageDelayLevel"] == SHORT_DELAYS
    assert lines["transactionTimeOut"] == "6000" and lines["brokerName"] == "broker-a"
    assert lines["listenPort"] == str(s.server.settings.port) and lines["flushDiskType"] == "SYNC_FLUSH"


def test_max_min_offset_view_message_and_consume_queue(serve) -> None:
    s = serve()
    b = s.client()
    b.call(17, create_topic_ext("TV", 1))
    sent = [b.call(310, send_ext("TV", properties=props(UNIQ_KEY=uniq_key(), TAGS=f"t{i}")), b"body%d" % i)
            for i in range(3)]
    assert [r.code for r in sent] == [0, 0, 0]
    assert b.call(30, {"topic": "TV", "queueId": "0"}).ext_fields == {"offset": "3"}
    assert b.call(31, {"topic": "TV", "queueId": "0"}).ext_fields == {"offset": "0"}
    assert b.call(30, {"topic": "Nope", "queueId": "0"}).ext_fields == {"offset": "0"}
    # VIEW_MESSAGE_BY_ID: the record as stored, byte for byte
    offset = int(sent[1].ext_fields["msgId"][16:], 16)
    view = b.call(33, {"offset": str(offset)})
    assert view.code == 0
    on_disk = (s.root / "commitlog" / f"{0:020d}").read_bytes()[offset:offset + len(view.body)]
    assert view.body == on_disk
    rec = decode_record(view.body, base_offset=offset)
    assert rec.body == b"body1" and rec.properties["CLUSTER"] == "DefaultCluster" and "WAIT" not in rec.properties
    r = b.call(33, {"offset": "5"})
    assert (r.code, r.remark) == (1, "can not find message by the offset, 5")
    # QUERY_CONSUME_QUEUE
    q = b.call(321, {"topic": "TV", "queueId": "0", "index": "1", "count": "5"})
    assert (q.code, q.remark) == (0, NOT_SET)
    doc = bodies.loads_object(q.body, "cq")
    assert (doc["minQueueIndex"], doc["maxQueueIndex"]) == (0, 3)
    assert [u["physicOffset"] for u in doc["queueData"]] == [offset, int(sent[2].ext_fields["msgId"][16:], 16)]
    q = b.call(321, {"topic": "TV", "queueId": "0", "index": "9", "count": "1"})
    assert (q.code, q.remark, q.body) == (0, "Index 9 of 0@TV is not exist!", b"")
    q = b.call(321, {"topic": "TV", "queueId": "7", "index": "0", "count": "1"})
    assert (q.code, q.remark) == (1, "7@TV is not exist!")


def test_a_delayed_send_is_stored_in_the_schedule_topic(serve) -> None:
    s = serve()
    b = s.client()
    b.call(17, create_topic_ext("TD", 1))
    r = b.call(310, send_ext("TD", properties=props(UNIQ_KEY=uniq_key(), DELAY="2", WAIT="true")), b"later")
    assert r.code == 0 and r.ext_fields["queueId"] == "0" and r.ext_fields["queueOffset"] == "0"
    stored = decode_messages(b.call(33, {"offset": str(int(r.ext_fields["msgId"][16:], 16))}).body)[0]
    assert (stored.topic, stored.queue_id) == ("SCHEDULE_TOPIC_XXXX", 1)
    assert stored.properties["REAL_TOPIC"] == "TD" and stored.properties["DELAY"] == "2"


def test_frames_from_the_server_decode_as_java_would_see_them(serve) -> None:
    """A raw response frame: fastjson-style header, opaque echoed, flag 1, language JAVA, version 409."""
    s = serve()
    with WireClient(s.server.namesrv_addr) as c:
        c.send_raw(encode_frame(request(106, opaque=77)))
        data = b""
        while len(data) < 8 or len(data) < 4 + int.from_bytes(data[:4], "big"):
            data += c.sock.recv(65536)
    cmd = decode_frame(data[4:])
    assert (cmd.opaque, cmd.flag, cmd.language.name, cmd.version) == (77, 1, "JAVA", 409)
    header = data[8:8 + (int.from_bytes(data[4:8], "big") & 0xFFFFFF)]
    assert header.startswith(b'{"code":0,"flag":1,"language":"JAVA","opaque":77,')


def test_no_server_side_offset_reset(serve) -> None:
    """INVOKE_BROKER_TO_RESET_OFFSET (222) is not served: no offset is ever reset server-side, so 5.x's
    ignored UPDATE_CONSUMER_OFFSET after a reset cannot arise (docs/fidelity.md P5-17)."""
    s = serve()
    r = s.client().call(222, {"topic": "T", "group": "G", "timestamp": "0", "isForce": "true"})
    assert (r.code, r.remark) == (3, " request type 222 not supported")
