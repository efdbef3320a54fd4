"""rmqspec serve and bad input on the wire (issue 10, item 5): clear answers or a closed connection,
the other connections keep being served, nothing stored twice or lost, never a traceback."""

from __future__ import annotations

import socket
import struct
import threading
import time
from typing import Any

from rmqspec.model.broker import ModelBroker
from rmqspec.remoting.command import request, response_to
from rmqspec.remoting.frame import MAX_FRAME, encode_frame
from tests.remoting.conftest import create_topic_ext, heartbeat, pull_ext, send_ext
from tests.remoting.wire_client import WireClient, split


def _max(b: WireClient, topic: str = "T") -> int:
    return int(b.call(30, {"topic": topic, "queueId": "0"}).ext_fields["offset"])


def test_missing_and_malformed_ext_fields_are_system_error_naming_the_field(serve) -> None:
    b = serve().client()
    ext = send_ext("T")
    del ext["b"]
    r = b.call(310, ext, b"x")
    assert (r.code, r.remark) == (1, "RemotingCommandException: the custom field <b> is null")
    r = b.call(310, send_ext("T", e="abc"), b"x")
    assert (r.code, r.remark) == (1, "RemotingCommandException: the custom field <queueId>: not an integer: 'abc'")
    r = b.call(11, pull_ext("G", "T", queueOffset="1e3"))
    assert r.code == 1 and "<queueOffset>" in r.remark
    r = b.call(14, {"consumerGroup": "G", "topic": "T", "queueId": "99999999999"})
    assert r.code == 1 and "<queueId>: 99999999999 is out of range for a Java int" in r.remark
    r = b.call(36, {"offset": "0", "group": "G"})
    assert (r.code, r.remark) == (1, "RemotingCommandException: the custom field <delayLevel> is null")
    assert b.request(15, {"consumerGroup": "G"}, oneway=True) is None  # oneway: no answer, still serving
    assert b.call(30, {"topic": "T", "queueId": "0"}).code == 0


def test_undecodable_frames_close_only_their_connection(serve) -> None:
    s = serve()
    good = s.client()
    good.call(17, create_topic_ext("T", 1))
    header = b'{"code":310,"opa'
    cases = [
        struct.pack(">i", MAX_FRAME) + b"\0" * 64,  # beyond 16 MiB
        struct.pack(">i", 2) + b"\0" * 8,  # shorter than its own mark
        struct.pack(">ii", 4 + len(header), len(header)) + header,  # bad JSON header
        struct.pack(">ii", 8, 7 << 24) + b"\0" * 4,  # unknown serialize type
        struct.pack(">ii", 12, 1 << 24 | 8) + b"\0" * 8,  # a ROCKETMQ header too short
    ]
    for data in cases:
        with WireClient(s.server.broker_addr) as bad:
            bad.send_raw(data)
            assert bad.closed_by_server(5), data[:16]
        assert good.call(310, send_ext("T"), b"ok").code == 0
    assert _max(good) == len(cases)


def test_frames_before_a_bad_one_are_answered_then_the_connection_closes(serve) -> None:
    s = serve()
    good = s.client()
    good.call(17, create_topic_ext("T", 1))
    with WireClient(s.server.broker_addr) as c:
        c.send_raw(encode_frame(request(310, send_ext("T"), b"first", opaque=5)) + struct.pack(">i", 1))
        assert c.wait_response(5).code == 0
        assert c.closed_by_server(5)
    assert _max(good) == 1


def test_a_client_gone_mid_frame_stores_nothing_of_that_frame(serve) -> None:
    s = serve()
    good = s.client()
    good.call(17, create_topic_ext("T", 1))
    whole = encode_frame(request(310, send_ext("T"), b"complete", opaque=1))
    cut = encode_frame(request(310, send_ext("T"), b"cut short", opaque=2))
    sock = socket.create_connection(split(s.server.broker_addr))
    sock.sendall(whole + cut[:len(cut) // 2])
    sock.close()
    deadline = time.monotonic() + 10
    while _max(good) < 1 and time.monotonic() < deadline:  # the other connection is read when the loop gets to it
        time.sleep(0.01)
    time.sleep(0.2)
    assert good.call(310, send_ext("T"), b"after").code == 0
    assert _max(good) == 2
    good.call(34, body=heartbeat("c@1", {"G": ["T"]}))
    from rmqspec.remoting.bodies import decode_messages

    bodies = [m.body for m in decode_messages(good.call(11, pull_ext("G", "T")).body)]
    assert bodies == [b"complete", b"after"]


def test_responses_sent_by_a_client_are_ignored(serve) -> None:
    b = serve().client()
    b.send_raw(encode_frame(response_to(request(310, opaque=99), 0, "stray")))
    assert b.call(30, {"topic": "T", "queueId": "0"}).code == 0


def test_several_frames_in_one_write_and_one_frame_in_many(serve) -> None:
    s = serve()
    b = s.client()
    frames = b"".join(encode_frame(request(30, {"topic": "T", "queueId": str(i)}, opaque=100 + i))
                      for i in range(5))
    for i in range(0, len(frames), 7):
        b.send_raw(frames[i:i + 7])
    assert [b.wait_response(100 + i).code for i in range(5)] == [0] * 5


class _Exploding(ModelBroker):
    """A broker with a bug: LOCK_BATCH_MQ raises."""

    def lock_batch(self, group: str, client_id: str, mqs: Any) -> frozenset:
        raise RuntimeError("lock table on fire")


def _exploding(clock, config=None, workdir=None) -> _Exploding:
    return _Exploding(clock, config)


def test_a_broker_bug_is_answered_system_error_and_serving_goes_on(serve) -> None:
    s = serve(factory=_exploding)
    b = s.client()
    body = b'{"clientId":"c","consumerGroup":"g","mqSet":[{"brokerName":"broker-a","queueId":0,"topic":"T"}]}'
    r = b.call(41, body=body)
    assert (r.code, r.remark) == (1, "RuntimeError: lock table on fire")
    assert b.call(310, send_ext("T"), b"x").code == 0
    assert b.call(30, {"topic": "T", "queueId": "0"}).ext_fields == {"offset": "1"}  # probe pull of a generic broker
    r = b.call(33, {"offset": "0"})
    assert r.code == 1 and "cannot look messages up" in r.remark


def test_a_client_that_does_not_read_is_paused_not_buffered_forever(serve) -> None:
    s = serve()
    slow = s.client()
    n = 20000  # ~22 MB of responses: more than the kernel's loopback buffers hold
    frames = b"".join(encode_frame(request(26, opaque=i)) for i in range(1, n + 1))
    writer = threading.Thread(target=slow.send_raw, args=(frames,))
    writer.start()
    time.sleep(1.5)

    def buffers() -> list[tuple[int, bool]]:
        return [(c.transport.get_write_buffer_size(), c.transport.is_reading()) for c in s.server.conns]

    held = s.on_loop(buffers)
    assert any(not reading for _, reading in held)  # the server stopped reading the slow client
    assert max(size for size, _ in held) < 1 << 20  # and does not buffer its responses without bound
    other = s.client()
    assert other.call(30, {"topic": "T", "queueId": "0"}).code == 0  # everyone else is served
    assert all(slow.wait_response(i).code == 0 for i in range(1, n + 1))  # and nothing was dropped
    writer.join(30)
