"""rmqspec serve: PULL_MESSAGE 11 and long polling, offsets 14/15, HEART_BEAT 34 and NOTIFY 40,
UNREGISTER_CLIENT 35, GET_CONSUMER_LIST_BY_GROUP 38, LOCK/UNLOCK_BATCH_MQ 41/42."""

from __future__ import annotations

import threading
import time

import attrs
import pytest

from rmqspec.remoting import bodies
from rmqspec.remoting.bodies import decode_messages
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

FAQ = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."
SUSPEND, SUBSCRIPTION, COMMIT = 2, 4, 1


def _setup(s, topic: str = "T", group: str = "G", queues: int = 1, messages: int = 0, tags: str = "tagA"):
    b = s.client()
    b.call(17, create_topic_ext(topic, queues))
    b.call(34, body=heartbeat("127.0.0.1@c1", {group: [topic]}))
    for i in range(messages):
        assert b.call(310, send_ext(topic, properties=props(UNIQ_KEY=uniq_key(), TAGS=tags)), b"m%d" % i).code == 0
    return b


def test_pull_found_body_is_the_stored_bytes(serve) -> None:
    s = serve()
    b = _setup(s, messages=3)
    r = b.call(11, pull_ext("G", "T"))
    assert (r.code, r.remark) == (0, "FOUND")
    assert r.ext_fields == {"suggestWhichBrokerId": "0", "nextBeginOffset": "3", "minOffset": "0", "maxOffset": "3"}
    disk = (s.root / "commitlog" / f"{0:020d}").read_bytes()
    assert r.body == disk[:len(r.body)]
    assert [m.body for m in decode_messages(r.body)] == [b"m0", b"m1", b"m2"]


@pytest.mark.parametrize(("messages", "offset", "code", "remark"), [
    (2, 2, 19, "OFFSET_OVERFLOW_ONE"),
    (0, 0, 19, "NO_MESSAGE_IN_QUEUE"),
    (0, 3, 21, "NO_MESSAGE_IN_QUEUE"),
    (2, 9, 21, "OFFSET_OVERFLOW_BADLY"),
])
def test_pull_not_found_and_offset_moved(serve, messages, offset, code, remark) -> None:
    s = serve()
    b = _setup(s, messages=messages)
    r = b.call(11, pull_ext("G", "T", offset=offset))
    assert (r.code, r.remark) == (code, remark)
    assert set(r.ext_fields) == {"suggestWhichBrokerId", "nextBeginOffset", "minOffset", "maxOffset"}


def test_pull_with_the_request_subscription_filters_by_tag(serve) -> None:
    s = serve()
    b = _setup(s, messages=2, tags="tagA")
    r = b.call(11, pull_ext("G", "T", sys_flag=SUBSCRIPTION, subscription="tagB || tagC"))
    assert (r.code, r.remark) == (20, "NO_MATCHED_MESSAGE") and r.ext_fields["nextBeginOffset"] == "2"
    r = b.call(11, pull_ext("G", "T", sys_flag=SUBSCRIPTION, subscription="tagA"))
    assert r.code == 0 and len(decode_messages(r.body)) == 2


def test_pull_refusals(serve) -> None:
    s = serve()
    b = _setup(s, messages=1)
    other = s.client()
    r = other.call(11, pull_ext("Nobody", "T"))
    assert (r.code, r.remark) == (24, f"the consumer's group info not exist{FAQ}")
    r = b.call(11, pull_ext("G", "T", sub_version=2))
    assert (r.code, r.remark) == (25, "the consumer's subscription not latest")
    r = b.call(11, pull_ext("G", "Nope"))
    assert (r.code, r.remark) == (17, f"topic[Nope] not exist, apply first please!{FAQ}")
    r = b.call(11, pull_ext("G", "T", queue_id=4))
    assert r.code == 1 and r.remark.startswith("queueId[4] is illegal, topic:[T] topicConfig.readQueueNums:[1]")
    r = b.call(11, pull_ext("G", "T", sys_flag=SUBSCRIPTION, subscription="a > 1", expressionType="SQL92"))
    assert (r.code, r.remark) == (1, "The broker does not support consumer to filter message by SQL92")
    b.call(17, create_topic_ext("T2", 1))
    r = b.call(11, pull_ext("G", "T2"))
    assert (r.code, r.remark) == (24, f"the consumer's subscription not exist{FAQ}")


def test_pull_commit_flag_stores_the_offset(serve) -> None:
    s = serve()
    b = _setup(s, messages=3)
    b.call(11, pull_ext("G", "T", offset=3, sys_flag=COMMIT, commit_offset=3))
    assert b.call(14, {"consumerGroup": "G", "topic": "T", "queueId": "0"}).ext_fields == {"offset": "3"}


def test_query_offset_of_a_queue_never_committed_is_0_and_update_works_oneway(serve) -> None:
    s = serve()
    b = _setup(s, messages=1)
    q = {"consumerGroup": "G", "topic": "T", "queueId": "0"}
    r = b.call(14, q)
    assert (r.code, r.remark, r.ext_fields) == (0, None, {"offset": "0"})
    r = b.call(15, {**q, "commitOffset": "1"})
    assert (r.code, r.remark) == (0, None)
    assert b.request(15, {**q, "commitOffset": "7"}, oneway=True) is None
    assert b.call(14, q).ext_fields == {"offset": "7"}


def test_a_suspended_pull_is_answered_when_a_message_arrives(serve) -> None:
    s = serve()
    b = _setup(s, messages=1)
    producer = s.client()

    def send_later() -> None:
        time.sleep(0.4)
        producer.call(310, send_ext("T"), b"late")

    t = threading.Thread(target=send_later)
    started = time.monotonic()
    t.start()
    r = b.call(11, pull_ext("G", "T", offset=1, sys_flag=SUSPEND, suspend_ms=10_000), timeout=15)
    waited = time.monotonic() - started
    t.join()
    assert (r.code, r.remark) == (0, "FOUND") and [m.body for m in decode_messages(r.body)] == [b"late"]
    assert 0.3 < waited < 5


def test_a_suspended_pull_times_out_with_pull_not_found(serve) -> None:
    s = serve()
    b = _setup(s, messages=1)
    started = time.monotonic()
    r = b.call(11, pull_ext("G", "T", offset=1, sys_flag=SUSPEND, suspend_ms=500), timeout=10)
    waited = time.monotonic() - started
    assert (r.code, r.remark) == (19, "OFFSET_OVERFLOW_ONE")
    assert 0.45 < waited < 3


def test_a_suspended_pull_is_not_woken_by_a_message_its_filter_rejects(serve) -> None:
    s = serve()
    b = _setup(s)
    producer = s.client()
    opaque = next(b.opaque)
    from rmqspec.remoting.command import request
    from rmqspec.remoting.frame import encode_frame

    b.send_raw(encode_frame(request(11, pull_ext("G", "T", sys_flag=SUSPEND | SUBSCRIPTION, suspend_ms=8000,
                                                 subscription="wanted"), opaque=opaque)))
    time.sleep(0.2)
    producer.call(310, send_ext("T", properties=props(UNIQ_KEY=uniq_key(), TAGS="other")), b"no")
    with pytest.raises(TimeoutError):
        b.wait_response(opaque, timeout=0.5)
    producer.call(310, send_ext("T", properties=props(UNIQ_KEY=uniq_key(), TAGS="wanted")), b"yes")
    r = b.wait_response(opaque, timeout=5)
    assert r.code == 0 and [m.body for m in decode_messages(r.body)] == [b"yes"]


def test_heartbeat_creates_group_and_retry_topic_and_notifies_members(serve) -> None:
    s = serve()
    a, c = s.client(), s.client()
    ns = s.namesrv()
    r = a.call(34, body=heartbeat("127.0.0.1@a", {"GH": ["T"]}, producers=("PG",)))
    assert (r.code, r.remark) == (0, None)
    assert a.wait_pushed(40).ext_fields == {"consumerGroup": "GH"}
    assert ns.call(105, {"topic": "%RETRY%GH"}).code == 0
    assert s.on_loop(lambda: s.broker.group_config("GH")) == (16, 1)
    a.call(34, body=heartbeat("127.0.0.1@a", {"GH": ["T"]}))  # nothing changed: no notification
    c.call(34, body=heartbeat("127.0.0.1@c", {"GH": ["T"]}))
    notified = c.wait_pushed(40)
    assert notified.is_oneway and notified.flag == 2
    assert a.wait_pushed(40).ext_fields == {"consumerGroup": "GH"}
    assert [x.code for x in a.pushed] == []
    ids = bodies.loads_object(a.call(38, {"consumerGroup": "GH"}).body, "list")["consumerIdList"]
    assert ids == ["127.0.0.1@a", "127.0.0.1@c"]
    r = c.call(35, {"clientID": "127.0.0.1@c", "consumerGroup": "GH"})  # unregisters the asking connection
    assert (r.code, r.remark) == (0, None)
    assert a.wait_pushed(40).ext_fields == {"consumerGroup": "GH"}
    assert bodies.loads_object(a.call(38, {"consumerGroup": "GH"}).body, "l")["consumerIdList"] == ["127.0.0.1@a"]
    c.call(34, body=heartbeat("127.0.0.1@c", {"GH": ["T"]}))
    assert a.wait_pushed(40).ext_fields == {"consumerGroup": "GH"}
    c.close()  # a closed connection leaves its groups: the others are told
    assert a.wait_pushed(40, timeout=5).ext_fields == {"consumerGroup": "GH"}
    r = a.call(38, {"consumerGroup": "Empty"})
    assert (r.code, r.remark) == (1, "no consumer for this group, Empty")


def test_heartbeat_body_errors_name_the_field(serve) -> None:
    b = serve().client()
    r = b.call(34, body=b'{"clientID":"x","consumerDataSet":[{"groupName":5}]}')
    assert r.code == 1 and "consumerDataSet[0].groupName" in r.remark
    r = b.call(34, body=b'{"clientID":')
    assert r.code == 1 and r.remark.startswith("request body: body byte")


def test_locks_are_exclusive_and_only_the_holder_unlocks(serve) -> None:
    s = serve()
    b = s.client()
    mq = {"brokerName": "broker-a", "queueId": 0, "topic": "TL"}
    r = b.call(41, body=lock_body("127.0.0.1@A"))
    assert (r.code, r.remark) == (0, None) and bodies.loads_object(r.body, "r") == {"lockOKMQSet": [mq]}
    assert bodies.loads_object(b.call(41, body=lock_body("127.0.0.1@B")).body, "r") == {"lockOKMQSet": []}
    assert b.call(42, body=lock_body("127.0.0.1@B")).code == 0
    assert bodies.loads_object(b.call(41, body=lock_body("127.0.0.1@B")).body, "r") == {"lockOKMQSet": []}
    assert bodies.loads_object(b.call(41, body=lock_body("127.0.0.1@B", "GL2")).body, "r")["lockOKMQSet"] == [mq]
    r = b.call(42, body=lock_body("127.0.0.1@A"))
    assert (r.code, r.remark, r.body) == (0, None, b"")
    assert bodies.loads_object(b.call(41, body=lock_body("127.0.0.1@B")).body, "r") == {"lockOKMQSet": [mq]}
    assert b.call(41, body=b'{"clientId":"x","consumerGroup":"g","mqSet":[{"topic":"T"}]}').code == 1


def test_sql92_pull_and_check_client_config(serve) -> None:
    """enablePropertyFilter=true: a SQL92 pull filters on the stored properties; CHECK_CLIENT_CONFIG compiles."""
    import attrs

    from tests.remoting.conftest import TEST_CONFIG

    s = serve(attrs.evolve(TEST_CONFIG, enable_property_filter=True))
    b = _setup(s)
    for region in ("HZ", "BJ", "SH"):
        ext = send_ext("T", properties=props(UNIQ_KEY=uniq_key(), TAGS="logistics", region=region))
        assert b.call(310, ext, b"m").code == 0
    seed = "TAGS = 'logistics' AND region IN ('HZ','SH')"
    r = b.call(11, pull_ext("G", "T", sys_flag=SUBSCRIPTION, subscription=seed, expressionType="SQL92"))
    assert r.code == 0 and [m.properties["region"] for m in decode_messages(r.body)] == ["HZ", "SH"]

    def check(expr: str, kind: str = "SQL92"):
        body = bodies.dumps({"clientId": "c", "group": "G", "subscriptionData": {
            "topic": "T", "subString": expr, "expressionType": kind, "classFilterMode": False,
            "tagsSet": [], "codeSet": [], "subVersion": 0}})
        return b.call(46, {}, body)

    assert check(seed).code == 0
    assert check("a >").code == 23
    assert check("not || a tag", "TAG").code == 0
    off = serve()
    r = off.client().call(46, {}, bodies.dumps({"subscriptionData": {"subString": "a > 1", "expressionType": "SQL92"}}))
    assert (r.code, r.remark) == (1, "The broker does not support consumer to filter message by SQL92")


@pytest.mark.parametrize(("profile", "url"), [
    ("rocketmq-4.9", "http://rocketmq.apache.org/docs/faq/"),
    ("rocketmq-5.2", "https://rocketmq.apache.org/docs/bestPractice/06FAQ"),
    ("rocketmq-5.5", "https://rocketmq.apache.org/docs/faq/"),
])
def test_each_release_suggests_its_own_faq(serve, profile: str, url: str) -> None:
    """FAQUrl.suggestTodo names the served release's URL (its common jar's FAQUrl constants, javap) in every
    remark that suggests it: the name server's route, a send's and a pull's unknown topic, a pull's unknown
    group."""
    s = serve(attrs.evolve(TEST_CONFIG, version=profile))
    faq = f"\nSee {url} for further details."
    b = _setup(s)
    route = s.namesrv().call(105, {"topic": "Nope"})
    assert route.remark == f"No topic route info in name server for the topic: Nope{faq}"
    sent = b.call(310, send_ext("Nope2", c="OtherDefault", properties=props(UNIQ_KEY=uniq_key())))
    assert (sent.code, sent.remark) == (17, f"topic[Nope2] not exist, apply first please!{faq}")
    assert b.call(11, pull_ext("G", "Nope")).remark == f"topic[Nope] not exist, apply first please!{faq}"
    assert s.client().call(11, pull_ext("Nobody", "T")).remark == f"the consumer's group info not exist{faq}"
