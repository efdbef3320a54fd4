"""rmqspec serve: SEND_MESSAGE(_V2) 10/310, SEND_BATCH_MESSAGE 320, CONSUMER_SEND_MSG_BACK 36."""

from __future__ import annotations

import zlib

import attrs
import pytest

from rmqspec.impl.codec import decode_record
from rmqspec.remoting import bodies
from rmqspec.remoting.bodies import decode_messages
from rmqspec.remoting.codes import SEND_V2_NAMES
from rmqspec.remoting.records import BatchItem, encode_batch
from rmqspec.traces.checker import check
from rmqspec.traces.io import read_table
from tests.remoting.conftest import (
    TEST_CONFIG,
    create_topic_ext,
    heartbeat,
    lock_body,
    props,
    pull_ext,
    send_ext,
    uniq_key,
)
from tests.uniq_keys import KEYS

ZLIB_COMPRESSED = 0x301  # COMPRESSED_FLAG | CompressionType.ZLIB.getCompressionFlag()
FAQ = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."


def _offset(resp) -> int:
    return int(resp.ext_fields["msgId"][16:], 16)


def test_send_v2_answers_like_the_broker_and_stores_the_wire_properties(serve) -> None:
    s = serve()
    b = s.client()
    b.call(17, create_topic_ext("T", 2))
    key = uniq_key()
    r = b.call(310, send_ext("T", 1, properties=props(KEYS="k1 k2", UNIQ_KEY=key, WAIT="true", TAGS="tagA",
                                                       scn="a")), b"hello")
    assert (r.code, r.remark) == (0, None)
    assert set(r.ext_fields) == {"msgId", "queueId", "queueOffset", "MSG_REGION", "TRACE_ON"}
    assert (r.ext_fields["queueId"], r.ext_fields["queueOffset"]) == ("1", "0")
    assert (r.ext_fields["MSG_REGION"], r.ext_fields["TRACE_ON"]) == ("DefaultRegion", "true")
    port = s.server.settings.port
    assert r.ext_fields["msgId"] == f"7F000001{port:08X}{0:016X}"
    rec = decode_record(b.call(33, {"offset": "0"}).body)
    assert rec.topic == "T" and rec.queue_id == 1 and rec.body == b"hello"
    assert dict(rec.properties) == {"scn": "a", "CLUSTER": "DefaultCluster", "TAGS": "tagA", "KEYS": "k1 k2",
                                    "UNIQ_KEY": key}


def test_a_oneway_send_is_stored_unanswered_and_traced_as_oneway(serve) -> None:
    s = serve(trace=True)
    b = s.client()
    b.call(17, create_topic_ext("T", 1))
    key = uniq_key()
    assert b.request(310, send_ext("T", properties=props(TAGS="a", UNIQ_KEY=key)), b"one", oneway=True) is None
    rec = decode_record(b.call(33, {"offset": "0"}).body)  # served after the oneway send, on the same connection
    assert (rec.topic, rec.body, dict(rec.properties)["UNIQ_KEY"]) == ("T", b"one", key)
    assert b.responses == {}  # nothing was written for the oneway send
    s.on_loop(s.server.trace.flush)
    table, rejected = read_table(s.server.trace.path)
    [send] = [row for row in table.to_pylist() if row["event"] == "send"]
    assert (send["status"], send["msg_key"], rejected) == ("ONEWAY", key, [])
    assert '"send_mode": "ONEWAY"' in send["detail"]


def test_offsets_equal_an_in_process_broker(serve, tmp_path) -> None:
    """The broker's send path adds CLUSTER itself (fidelity B2): served and in-process sends store the same."""
    from rmqspec.impl.broker import MmapBroker
    from rmqspec.model import ManualClock, Message

    s = serve()
    b = s.client()
    b.call(17, create_topic_ext("T", 1))
    keys = [uniq_key() for _ in range(3)]
    wire = [int(b.call(310, send_ext("T", properties=props(TAGS="a", UNIQ_KEY=k)), b"x" * i).ext_fields["msgId"][16:],
                16) for i, k in enumerate(keys)]
    local = MmapBroker.open(tmp_path / "local", ManualClock(0))
    local.create_topic("T", 1)
    assert wire == [local.send(Message("T", b"x" * i, tags="a", uniq_key=k), 0).commitlog_offset
                    for i, k in enumerate(keys)]
    local.close()


def test_send_v1_uses_the_long_header_names(serve) -> None:
    s = serve()
    b = s.client()
    ext = {SEND_V2_NAMES[k]: v for k, v in send_ext("T1").items()}
    r = b.call(10, ext, b"v1")
    assert r.code == 0 and r.ext_fields["queueOffset"] == "0"


def test_unknown_topic_is_created_from_tbw102_with_min_of_4_and_8_queues(serve) -> None:
    s = serve()
    b, ns = s.client(), s.namesrv()
    assert b.call(310, send_ext("Auto", 3), b"x").code == 0
    route = bodies.loads_object(ns.call(105, {"topic": "Auto"}).body, "route")
    assert route["queueDatas"][0]["readQueueNums"] == 4
    assert b.call(310, send_ext("Auto12", 0, d="12"), b"x").code == 0
    assert bodies.loads_object(ns.call(105, {"topic": "Auto12"}).body, "r")["queueDatas"][0]["writeQueueNums"] == 8


@pytest.mark.parametrize(("ext", "code", "remark"), [
    (send_ext("NoDefault", c="OtherDefault"), 17, f"topic[NoDefault] not exist, apply first please!{FAQ}"),
    (send_ext("RMQ_SYS_TRANS_HALF_TOPIC"), 16, "Sending message to topic[RMQ_SYS_TRANS_HALF_TOPIC] is forbidden."),
    (send_ext("SCHEDULE_TOPIC_XXXX"), 16, "Sending message to topic[SCHEDULE_TOPIC_XXXX] is forbidden."),
    (send_ext("bad:topic"), 1, "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"),
])
def test_send_refusals_carry_region_and_trace(serve, ext, code, remark) -> None:
    r = serve().client().call(310, ext, b"x")
    assert (r.code, r.remark) == (code, remark)
    assert r.ext_fields == {"MSG_REGION": "DefaultRegion", "TRACE_ON": "true"}


def test_queue_id_beyond_the_topic_is_refused_and_a_negative_one_picks_a_queue(serve) -> None:
    s = serve()
    b = s.client()
    b.call(17, create_topic_ext("Q2", 2))
    r = b.call(310, send_ext("Q2", 2), b"x")
    assert r.code == 1 and r.remark.startswith("request queueId[2] is illegal, TopicConfig [topicName=Q2")
    r = b.call(310, send_ext("Q2", -1), b"x")
    assert r.code == 0 and r.ext_fields["queueId"] in ("0", "1")


def test_invalid_messages_are_message_illegal(serve) -> None:
    b = serve().client()
    r = b.call(310, send_ext("T", properties=props(DELAY="x")), b"x")
    assert r.code == 1 and "<properties.DELAY>" in r.remark


def test_uniq_keys_of_every_client_format_are_stored_and_delivered_as_sent(serve) -> None:
    """docs/fidelity.md B14: 4.9.8 never parses UNIQ_KEY. The Java client on the IPv6 host fd00::2 sends a
    56-char key, which serve refused with MESSAGE_ILLEGAL (13) "must be 32 upper-case hex chars"."""
    s = serve(trace=True)
    b = s.client()
    b.call(17, create_topic_ext("TK", 1))
    for name, key in sorted(KEYS.items()):
        r = b.call(310, send_ext("TK", properties=props(UNIQ_KEY=key, WAIT="true", TAGS="k")), name.encode())
        assert (r.code, r.remark) == (0, None), name
        assert decode_messages(b.call(33, {"offset": str(_offset(r))}).body)[0].uniq_key == key
    b.call(34, body=heartbeat("127.0.0.1@k", {"GK": ["TK"]}))
    pulled = decode_messages(b.call(11, pull_ext("GK", "TK")).body)
    assert {m.body.decode(): m.uniq_key for m in pulled} == KEYS
    # the --trace-out trace names them as msg_key, passes trace validation and audits clean
    s.on_loop(s.server.trace.flush)
    table, rejected = read_table(s.server.trace.path)
    assert rejected == []
    rows = table.to_pylist()
    assert {r["msg_key"] for r in rows if r["event"] == "send"} == set(KEYS.values())
    assert {r["msg_key"] for r in rows if r["event"] == "deliver"} == set(KEYS.values())
    report = check(rows)
    assert report.violations == () and report.observations == () and report.rows_rejected == 0


def test_an_empty_uniq_key_is_no_key(serve) -> None:
    """string2messageProperties drops ``UNIQ_KEY\\x01`` (an empty value): the message has no key, and the
    broker assigns one as it does to a message sent without (model/README.md)."""
    b = serve().client()
    b.call(17, create_topic_ext("TE", 1))
    stored = []
    for properties in (props(UNIQ_KEY="", TAGS="e"), props(TAGS="e")):
        r = b.call(310, send_ext("TE", properties=properties), b"x")
        assert r.code == 0
        stored.append(decode_messages(b.call(33, {"offset": str(_offset(r))}).body)[0].properties["UNIQ_KEY"])
    assert all(len(k) == 32 for k in stored) and stored[0] != stored[1]


def test_batch_stores_every_item_with_consecutive_offsets(serve) -> None:
    s = serve()
    b = s.client()
    keys = [uniq_key() for _ in range(3)]
    body = encode_batch([BatchItem(0, b"m%d" % i, {"UNIQ_KEY": k, "TAGS": "b"}) for i, k in enumerate(keys)])
    r = b.call(320, send_ext("TB", 0, properties=props(WAIT="true"), m="true"), body)
    assert r.code == 0 and r.ext_fields["queueOffset"] == "0"
    ids = r.ext_fields["msgId"].split(",")
    assert len(ids) == 3
    stored = [decode_messages(b.call(33, {"offset": str(int(i[16:], 16))}).body)[0] for i in ids]
    assert [m.queue_offset for m in stored] == [0, 1, 2] and [m.uniq_key for m in stored] == keys
    assert all(m.properties["CLUSTER"] == "DefaultCluster" for m in stored)


def test_a_bad_batch_stores_nothing(serve) -> None:
    s = serve()
    b = s.client()
    good = BatchItem(0, b"ok", {"UNIQ_KEY": uniq_key()})
    delayed = BatchItem(0, b"later", {"UNIQ_KEY": uniq_key(), "DELAY": "2"})
    r = b.call(320, send_ext("TB2", 0, m="true"), encode_batch([good, delayed]))
    assert r.code == 13 and "batch item 1" in r.remark
    r = b.call(320, send_ext("TB2", 0, m="true"), encode_batch([good])[:-3])
    assert r.code == 1 and r.remark.startswith("request body: body byte")
    assert b.call(30, {"topic": "TB2", "queueId": "0"}).ext_fields["offset"] == "0"


def test_a_retry_send_past_the_max_goes_to_the_dlq(serve) -> None:
    """handleRetryAndDLQ: the Java consumer's own retry send once reconsumeTimes reached maxReconsumeTimes."""
    s = serve()
    b = s.client()
    b.call(34, body=heartbeat("c@1", {"GR": ["T"]}))
    r = b.call(310, send_ext("%RETRY%GR", 0, j="3", l="3", properties=props(UNIQ_KEY=uniq_key(), DELAY="5")),
               b"poison")
    assert r.code == 0
    stored = decode_messages(b.call(33, {"offset": str(_offset(r))}).body)[0]
    # 4.9.8 keeps the level the client asked for: the dead letter waits in the schedule topic (fidelity P5-10)
    assert (stored.topic, stored.queue_id) == ("SCHEDULE_TOPIC_XXXX", 4)
    assert (stored.properties["REAL_TOPIC"], stored.properties["DELAY"]) == ("%DLQ%GR", "5")
    r = b.call(310, send_ext("%RETRY%GR", 0, j="3", l="3", properties=props(UNIQ_KEY=uniq_key())), b"no level")
    stored = decode_messages(b.call(33, {"offset": str(_offset(r))}).body)[0]
    assert (stored.topic, stored.queue_id) == ("%DLQ%GR", 0) and "DELAY" not in stored.properties
    r = b.call(310, send_ext("%RETRY%GR", 0, j="2", l="3", properties=props(UNIQ_KEY=uniq_key(), DELAY="5")),
               b"again")
    assert decode_messages(b.call(33, {"offset": str(_offset(r))}).body)[0].topic == "SCHEDULE_TOPIC_XXXX"


@pytest.mark.parametrize("version", ["rocketmq-5.0", "rocketmq-5.5"])
def test_a_retry_send_dead_lettered_by_5x_is_stored_at_once_with_delay_minus_one(serve, version) -> None:
    """5.x's handleRetryAndDLQ writes DELAY=-1 into the request's properties: whatever level the client asked
    for, the dead letter is stored at once and keeps DELAY=-1 (measured on real 5.3.3; fidelity P5-10)."""
    s = serve(config=attrs.evolve(TEST_CONFIG, version=version))
    b = s.client()
    b.call(34, body=heartbeat("c@1", {"GR": ["T"]}))
    for level in ({"DELAY": "5"}, {}):
        r = b.call(310, send_ext("%RETRY%GR", 0, j="4", l="3", properties=props(UNIQ_KEY=uniq_key(), **level)),
                   b"poison")
        assert r.code == 0, r.remark
        stored = decode_messages(b.call(33, {"offset": str(_offset(r))}).body)[0]
        assert (stored.topic, stored.queue_id, stored.properties["DELAY"]) == ("%DLQ%GR", 0, "-1")


def test_a_negative_level_is_stored_as_sent_and_never_scheduled(serve) -> None:
    """CommitLog.asyncPutMessage schedules only getDelayTimeLevel() > 0: a negative level stays as sent."""
    s = serve()
    b = s.client()
    b.call(17, create_topic_ext("TL", 1))
    for level in ("-1", "-7"):
        r = b.call(310, send_ext("TL", 0, properties=props(UNIQ_KEY=uniq_key(), DELAY=level)), b"now")
        assert r.code == 0, r.remark
        stored = decode_messages(b.call(33, {"offset": str(_offset(r))}).body)[0]
        assert (stored.topic, stored.properties["DELAY"]) == ("TL", level)


def _consume_one(b, group: str, topic: str) -> int:
    b.call(34, body=heartbeat("c@1", {group: [topic]}))
    b.call(17, create_topic_ext(topic, 1))
    b.call(310, send_ext(topic), b"payload")
    msgs = decode_messages(b.call(11, pull_ext(group, topic)).body)
    return msgs[0].commitlog_offset


def test_send_back_level_0_waits_level_3_plus_reconsume_times(serve) -> None:
    s = serve()
    b = s.client()
    offset = _consume_one(b, "G", "TS")
    r = b.call(36, {"offset": str(offset), "group": "G", "delayLevel": "0", "originMsgId": "X",
                    "originTopic": "TS", "unitMode": "false", "maxReconsumeTimes": "16"})
    assert (r.code, r.remark) == (0, None)
    top = int(b.call(30, {"topic": "SCHEDULE_TOPIC_XXXX", "queueId": "2"}).ext_fields["offset"])
    assert top == 1  # level 3 -> queue 2


def test_send_back_at_the_request_max_goes_to_the_dlq_only_from_v3_4_9(serve) -> None:
    s = serve()
    b = s.client()
    offset = _consume_one(b, "G0", "TZ")
    ext = {"offset": str(offset), "group": "G0", "delayLevel": "0", "maxReconsumeTimes": "0"}
    assert b.call(36, ext, version=120).code == 0  # old client: the group's 16 applies -> retry
    assert b.call(30, {"topic": "%DLQ%G0", "queueId": "0"}).ext_fields["offset"] == "0"
    assert b.call(36, ext).code == 0  # 409: maxReconsumeTimes 0 -> DLQ
    assert b.call(30, {"topic": "%DLQ%G0", "queueId": "0"}).ext_fields["offset"] == "1"
    r = b.call(36, {**ext, "offset": "999999"})
    assert (r.code, r.remark) == (1, "look message by offset failed, 999999")


@pytest.mark.parametrize("version", ["rocketmq-4.9", "rocketmq-5.0", "rocketmq-5.2"])
def test_a_retry_send_is_dead_lettered_by_the_version_s_rule(serve, version) -> None:
    """handleRetryAndDLQ: 4.9.8 dead-letters at reconsumeTimes >= max, 5.0+ only past it (>), and 5.1.1+
    also while an orderly lock of the group is live (model/versions.py)."""
    s = serve(config=attrs.evolve(TEST_CONFIG, version=version))
    b = s.client()
    b.call(34, body=heartbeat("c@1", {"GR": ["T"]}))

    def topic_of(times: str) -> str:
        """Where the send goes: its topic, or the real topic of its schedule copy (4.9.8 schedules a dead
        letter at the level the client asked for: P5-10)."""
        r = b.call(310, send_ext("%RETRY%GR", 0, j=times, l="3", properties=props(UNIQ_KEY=uniq_key(), DELAY="5")),
                   b"poison")
        assert r.code == 0, r.remark
        stored = decode_messages(b.call(33, {"offset": str(_offset(r))}).body)[0]
        return stored.properties["REAL_TOPIC"] if stored.topic == "SCHEDULE_TOPIC_XXXX" else stored.topic

    at_max = "%RETRY%GR" if version != "rocketmq-4.9" else "%DLQ%GR"
    assert (topic_of("2"), topic_of("3"), topic_of("4")) == ("%RETRY%GR", at_max, "%DLQ%GR")
    assert b.call(41, body=lock_body("127.0.0.1@A", group="GR", topic="T")).code == 0
    assert topic_of("0") == ("%DLQ%GR" if version == "rocketmq-5.2" else "%RETRY%GR")


def test_a_pop_retry_topic_is_refused_before_its_group_is_parsed(serve) -> None:
    """'+' is not a topic character: a SEND naming a v2 pop retry topic never reaches handleRetryAndDLQ, whose
    5.2.0 KeyBuilder.parseGroup would take the group before the '+' (docs/fidelity.md P5-19)."""
    s = serve(config=attrs.evolve(TEST_CONFIG, version="rocketmq-5.2"))
    r = s.client().call(310, send_ext("%RETRY%GR+T", 0, j="4", l="3", properties=props(UNIQ_KEY=uniq_key())),
                        b"poison")
    assert (r.code, r.remark) == (
        1, "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$")


def test_serve_stores_the_sysflag_of_a_java_client_s_compressed_send(serve) -> None:
    """The 4.9.8 client's compressed send (sysFlag COMPRESSED | ZLIB, 0x301) is stored as sent (seed 004, G12)."""
    s = serve()
    b = s.client()
    b.call(17, create_topic_ext("T", 1))
    body = zlib.compress(b"order line; " * 500, 5)
    ext = send_ext("T", 0, properties=props(UNIQ_KEY=uniq_key(), WAIT="true"), sys_flag=ZLIB_COMPRESSED)
    r = b.call(310, ext, body)
    assert r.code == 0, r.remark
    rec = decode_record(b.call(33, {"offset": "0"}).body)
    assert (rec.sys_flag, rec.body) == (ZLIB_COMPRESSED, body)
