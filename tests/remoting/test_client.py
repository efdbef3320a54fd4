"""RemotingClient over real loopback sockets against a tiny peer that answers with captured Java frames."""

from __future__ import annotations

import collections
import struct
import threading
import time

import attrs
import pytest

from rmqspec.remoting.client import (
    ConnectFailed,
    ConnectionLost,
    PeerProtocolError,
    RemotingClient,
    RequestNotEncodable,
    RequestTimeout,
    parse_address,
)
from rmqspec.remoting.codes import RequestCode
from rmqspec.remoting.command import SerializeType, request
from rmqspec.remoting.frame import MAX_FRAME, encode_frame
from tests.remoting.capture_pairs import Exchange, broker_requests, exchanges
from tests.remoting.peer import Peer, PeerConn, closed_port

ANSWERED = [e for e in exchanges() if e.response is not None]


def _fingerprint(cmd) -> tuple:
    return (cmd.code, cmd.serialize_type, tuple(sorted(cmd.ext_fields.items())), cmd.body, cmd.flag)


class ReplayPeer(Peer):
    """Answers each request with the response the real broker/name server gave to the same captured request."""

    def __init__(self, pairs: list[Exchange]) -> None:
        self.answers: dict[tuple, collections.deque] = collections.defaultdict(collections.deque)
        for e in pairs:
            self.answers[_fingerprint(e.request)].append(e.response)
        self.unmatched: list = []
        super().__init__(self._answer)

    def _answer(self, conn: PeerConn, cmd) -> None:
        queue = self.answers.get(_fingerprint(attrs.evolve(cmd, opaque=0)))
        if not queue:
            self.unmatched.append(cmd)
            return
        conn.send(attrs.evolve(queue.popleft(), opaque=cmd.opaque))


def _as_sent(cmd):
    """What the peer sees of a captured request: fingerprinted without its opaque."""
    return attrs.evolve(cmd, opaque=0)


def test_every_captured_exchange_replays_through_the_client() -> None:
    """All 644 captured request/response pairs (JSON and ROCKETMQ headers, name server and broker)."""
    pairs = [attrs.evolve(e, request=_as_sent(e.request)) for e in ANSWERED]
    assert len(pairs) == 644
    assert {e.request.serialize_type for e in pairs} == {SerializeType.JSON, SerializeType.ROCKETMQ}
    with ReplayPeer(pairs) as peer, RemotingClient.connect(peer.address) as client:
        for e in pairs:
            resp = client.invoke(e.request)
            assert resp.is_response
            assert resp == attrs.evolve(e.response, opaque=resp.opaque), e.request.describe()
            assert resp.serialize_type == e.request.serialize_type
        sent = peer.conns[0].received
    assert not peer.unmatched
    assert [c.opaque for c in sent] == list(range(len(pairs)))  # our own counter, from 0
    assert client.late_responses == 0


def test_responses_out_of_order_are_matched_by_opaque() -> None:
    held: list = []

    def answer_in_reverse(conn: PeerConn, cmd) -> None:
        held.append(cmd)
        if len(held) == 3:
            for req in reversed(held):
                conn.send(attrs.evolve(req, flag=1, remark=f"answer to {req.ext_fields['topic']}"))

    with Peer(answer_in_reverse) as peer, RemotingClient.connect(peer.address) as client:
        slots = [client.send(request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": f"T{i}"})) for i in range(3)]
        for i, slot in enumerate(slots):
            assert slot.wait(3000).remark == f"answer to T{i}"


def test_broker_requests_are_queued_for_the_owner() -> None:
    """The broker's CHECK_TRANSACTION_STATE / NOTIFY_CONSUMER_IDS_CHANGED frames, as captured, reach the owner."""
    pushed = list(broker_requests())
    assert sorted({c.code for c in pushed}) == [39, 40] and all(c.is_oneway for c in pushed)
    heartbeat = next(e for e in ANSWERED if e.request.code == RequestCode.HEART_BEAT)

    def push_then_answer(conn: PeerConn, cmd) -> None:
        for srv in pushed:
            conn.send(srv)
        conn.send(attrs.evolve(heartbeat.response, opaque=cmd.opaque))

    with Peer(push_then_answer) as peer, RemotingClient.connect(peer.address) as client:
        client.invoke(heartbeat.request)  # frames are read in order: every push arrived before this answer
        got = client.drain_server_requests()
        assert got == pushed
        assert client.drain_server_requests() == []
        assert len(peer.conns[0].received) == 1  # oneway requests are not answered


def test_wait_server_request_takes_a_matching_one() -> None:
    checks = [c for c in broker_requests() if c.code == RequestCode.CHECK_TRANSACTION_STATE]
    notify = next(c for c in broker_requests() if c.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED)
    with Peer(lambda conn, cmd: None, on_connect=lambda conn: (conn.send(notify), conn.send(checks[0]))) as peer, \
            RemotingClient.connect(peer.address) as client:
        got = client.wait_server_request(3000, lambda c: c.code == RequestCode.CHECK_TRANSACTION_STATE)
        assert got == checks[0]
        assert client.wait_server_request(50, lambda c: c.code == RequestCode.CHECK_TRANSACTION_STATE) is None
        assert client.drain_server_requests() == [notify]


def test_a_non_oneway_request_from_the_peer_is_answered_unsupported() -> None:
    srv = attrs.evolve(broker_requests()[0], flag=0, opaque=4242)
    answered = threading.Event()

    def record(conn: PeerConn, cmd) -> None:
        answered.set()

    with Peer(record, on_connect=lambda conn: conn.send(srv)) as peer, RemotingClient.connect(peer.address) as client:
        assert answered.wait(3)
        (resp,) = peer.conns[0].received
        assert (resp.is_response, resp.opaque, resp.code) == (True, 4242, 3)
        assert resp.remark == f" request type {srv.code} not supported"
        assert client.drain_server_requests() == [srv]


def test_timeout_names_address_code_and_opaque_and_a_late_answer_is_dropped() -> None:
    late: list = []

    def slow(conn: PeerConn, cmd) -> None:
        if cmd.ext_fields.get("topic") == "slow":
            late.append((conn, cmd))
        else:
            for c, req in late:  # answer the timed-out request first, then this one
                c.send(attrs.evolve(req, flag=1))
            conn.send(attrs.evolve(cmd, flag=1, remark="fast"))

    with Peer(slow) as peer, RemotingClient.connect(peer.address) as client:
        with pytest.raises(RequestTimeout) as err:
            client.invoke(request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "slow"}), timeout_ms=200)
        assert err.value.address == peer.address and err.value.code == 105 and err.value.opaque == 0
        assert f"{peer.address}: request code=105 opaque=0 no response in time: no response within 200 ms" \
            == str(err.value)
        resp = client.invoke(request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "fast"}))
        assert (resp.remark, resp.opaque) == ("fast", 1)
        assert client.late_responses == 1 and not client.closed


def test_peer_closing_mid_frame_is_connection_lost() -> None:
    frame = encode_frame(attrs.evolve(ANSWERED[0].response, opaque=0))

    def half_then_close(conn: PeerConn, cmd) -> None:
        conn.send_raw(frame[:len(frame) // 2])
        time.sleep(0.05)
        conn.close()

    with Peer(half_then_close) as peer, RemotingClient.connect(peer.address) as client:
        with pytest.raises(ConnectionLost, match="mid-frame") as err:
            client.invoke(ANSWERED[0].request)
        assert err.value.code == ANSWERED[0].request.code and err.value.opaque == 0
        assert f"{len(frame) // 2} bytes of an incomplete frame at stream byte 0" in str(err.value)
        assert client.closed
        with pytest.raises(ConnectionLost) as again:  # every later request fails the same way, at once
            client.invoke(ANSWERED[0].request)
        assert again.value.opaque == 1 and "mid-frame" in again.value.reason


def test_peer_closing_between_frames() -> None:
    with Peer(lambda conn, cmd: conn.close()) as peer, RemotingClient.connect(peer.address) as client, \
            pytest.raises(ConnectionLost, match=r"the peer closed the connection$"):
        client.invoke(request(RequestCode.GET_BROKER_CLUSTER_INFO))


def test_an_oversized_frame_from_the_peer_is_a_protocol_error() -> None:
    def huge(conn: PeerConn, cmd) -> None:
        conn.send_raw(struct.pack(">i", MAX_FRAME) + b"\0" * 16)

    with Peer(huge) as peer, RemotingClient.connect(peer.address) as client:
        with pytest.raises(PeerProtocolError, match="exceeds the 16777216-byte limit") as err:
            client.invoke(request(RequestCode.GET_BROKER_CLUSTER_INFO))
        assert "byte 0: total" in err.value.reason


def test_a_bad_header_from_the_peer_is_a_protocol_error_naming_the_stream_offset() -> None:
    first = ANSWERED[0]
    good = encode_frame(attrs.evolve(first.response, opaque=0))

    def good_then_garbage(conn: PeerConn, cmd) -> None:
        conn.send_raw(good if cmd.opaque == 0 else struct.pack(">ii", 9, 5) + b'{"co}')

    with Peer(good_then_garbage) as peer, RemotingClient.connect(peer.address) as client:
        assert client.invoke(first.request) == attrs.evolve(first.response, opaque=0)
        with pytest.raises(PeerProtocolError, match="bad JSON header") as err:
            client.invoke(request(RequestCode.GET_BROKER_CLUSTER_INFO))
        assert err.value.opaque == 1
        offset = int(err.value.reason.split()[1].rstrip(":"))
        assert len(good) + 8 <= offset < len(good) + 13  # inside the second frame's header


def test_an_oversized_or_unencodable_request_is_refused_before_sending() -> None:
    with Peer(lambda conn, cmd: conn.send(attrs.evolve(cmd, flag=1))) as peer, \
            RemotingClient.connect(peer.address) as client:
        with pytest.raises(RequestNotEncodable, match="exceeds the 16777216-byte limit"):
            client.invoke(request(RequestCode.SEND_MESSAGE_V2, body=b"x" * MAX_FRAME))
        assert client.invoke(request(RequestCode.GET_BROKER_CLUSTER_INFO)).is_response  # still usable
        # Java's RocketMQSerializable casts the code to short; we refuse a code the int16 cannot hold
        with pytest.raises(RequestNotEncodable,
                           match=r"opaque=2 request not sent: 99999 does not fit the ROCKETMQ header's int16"):
            client.invoke(request(99999, serialize_type=SerializeType.ROCKETMQ))
        assert client.invoke(request(99999)).is_response  # JSON headers carry any int


def test_oneway_requests_carry_flag_2_and_get_no_answer() -> None:
    oneway = next(e.request for e in exchanges() if e.request.is_oneway)
    got = threading.Event()
    with Peer(lambda conn, cmd: got.set()) as peer, RemotingClient.connect(peer.address) as client:
        opaque = client.invoke_oneway(attrs.evolve(oneway, flag=0))
        assert got.wait(3)
        (seen,) = peer.conns[0].received
        assert seen == attrs.evolve(oneway, opaque=opaque) and seen.flag == 2


def test_close_fails_what_still_waits_and_stops_the_reader() -> None:
    with Peer(lambda conn, cmd: None) as peer:
        client = RemotingClient.connect(peer.address)
        slot = client.send(request(RequestCode.GET_BROKER_CLUSTER_INFO))
        client.close()
        with pytest.raises(ConnectionLost, match="closed by the client"):
            slot.wait(1000)
        assert not client._reader.is_alive()
        client.close()  # idempotent


def test_connect_errors_name_the_address() -> None:
    port = closed_port()
    with pytest.raises(ConnectFailed, match=rf"127\.0\.0\.1:{port}: cannot connect: Connection refused"):
        RemotingClient.connect(f"127.0.0.1:{port}")
    with pytest.raises(ConnectFailed, match="is not HOST:PORT"):
        RemotingClient.connect("localhost")
    with pytest.raises(ValueError, match="port 'x' is not a number"):
        parse_address("127.0.0.1:x")
    assert parse_address("[::1]:9876") == ("::1", 9876)
