"""Hypothesis fuzz of frames against a running ``rmqspec serve`` subprocess (127.0.0.1, ephemeral ports).

Each example opens a connection, writes bytes derived from real request frames (mutated, cut, chunked,
or arbitrary), half-closes, and reads until the server closes. Meanwhile one well-behaved client sends
a message with a fresh key after every example. Afterwards: the server still answers, every good key is
stored exactly once, and its stderr holds no traceback.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmqspec.remoting.bodies import decode_messages
from rmqspec.remoting.command import SerializeType, request
from rmqspec.remoting.frame import encode_frame
from tests.remoting.conftest import create_topic_ext, heartbeat, props, pull_ext, send_ext
from tests.remoting.serve_process import ServeProcess
from tests.remoting.wire_client import WireClient, split

TEMPLATES = [
    request(310, send_ext("Fz"), b"fuzz body"),
    request(10, {"producerGroup": "PG", "topic": "Fz", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
                 "queueId": "0", "sysFlag": "0", "bornTimestamp": "0", "flag": "0"}, b"v1"),
    request(11, pull_ext("GF", "Fz", sys_flag=3, suspend_ms=200)),
    request(34, body=heartbeat("127.0.0.1@fz", {"GF": ["Fz"]}, producers=("PG",))),
    request(17, create_topic_ext("FzT", 2)),
    request(36, {"offset": "0", "group": "GF", "delayLevel": "0"}),
    request(37, {"producerGroup": "PG", "tranStateTableOffset": "0", "commitLogOffset": "0",
                 "commitOrRollback": "8", "msgId": "X"}),
    request(41, body=b'{"clientId":"c","consumerGroup":"g","mqSet":[{"brokerName":"broker-a","queueId":0,'
                     b'"topic":"Fz"}]}'),
    request(320, send_ext("Fz", m="true"), b"\x00\x00\x00\x14\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"),
    request(321, {"topic": "Fz", "queueId": "0", "index": "0", "count": "3"}),
    request(99, {"x": "y"}),
]
FRAMES = [encode_frame(t) for t in TEMPLATES] + [
    encode_frame(request(310, send_ext("Fz"), b"binary header", serialize_type=SerializeType.ROCKETMQ))]


@st.composite
def streams(draw: st.DrawFn) -> list[bytes]:
    """A byte stream cut into writes: frames, mutated frames, truncations, junk."""
    parts = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["frame", "flip", "cut", "junk", "length"]))
        frame = bytearray(draw(st.sampled_from(FRAMES)))
        if kind == "flip":
            for _ in range(draw(st.integers(1, 6))):
                i = draw(st.integers(0, len(frame) - 1))
                frame[i] = draw(st.integers(0, 255))
        elif kind == "cut":
            frame = frame[:draw(st.integers(0, len(frame) - 1))]
        elif kind == "junk":
            frame = bytearray(draw(st.binary(max_size=64)))
        elif kind == "length":
            frame[0:4] = draw(st.integers(-(1 << 31), (1 << 31) - 1)).to_bytes(4, "big", signed=True)
        parts.append(bytes(frame))
    data = b"".join(parts)
    cuts = sorted(draw(st.lists(st.integers(0, max(len(data), 1)), max_size=3)))
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True) if b > a]


@pytest.fixture(scope="module")
def fuzz_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    root = tmp_path_factory.mktemp("fuzz")
    proc = ServeProcess(root / "store").start()
    try:
        yield proc
    finally:
        proc.kill()


def _blast(addr: str, writes: list[bytes]) -> None:
    sock = socket.create_connection(split(addr), timeout=5)
    try:
        for chunk in writes:
            try:
                sock.sendall(chunk)
            except OSError:
                return  # the server already closed it
        sock.shutdown(socket.SHUT_WR)
        while sock.recv(65536):
            pass
    except OSError:  # reset or already closed by the server: fine, the server chose to close
        pass
    finally:
        sock.close()


def test_fuzzed_frames_never_break_the_server(fuzz_server: ServeProcess, tmp_path: Path) -> None:
    good = WireClient(fuzz_server.broker)
    good.call(34, body=heartbeat("127.0.0.1@good", {"GOOD": ["Good"]}))
    good.call(17, create_topic_ext("Good", 1))
    sent: list[str] = []

    @settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture], deadline=None)
    @given(streams(), st.booleans())
    def check(writes: list[bytes], to_namesrv: bool) -> None:
        _blast(fuzz_server.namesrv if to_namesrv else fuzz_server.broker, writes)
        key = f"{len(sent):032X}"
        r = good.call(310, send_ext("Good", properties=props(UNIQ_KEY=key)), b"good")
        assert r.code == 0, r.remark
        sent.append(key)

    check()
    with WireClient(fuzz_server.namesrv) as ns:
        assert ns.call(106).code == 0
    stored: list[str] = []
    offset = 0
    while True:
        r = good.call(11, pull_ext("GOOD", "Good", offset=offset))
        if r.code != 0:
            break
        msgs = decode_messages(r.body)
        stored += [m.uniq_key for m in msgs]
        offset = int(r.ext_fields["nextBeginOffset"])
    assert stored == sent  # each acknowledged good send stored once, in order, none lost
    good.close()
    assert "Traceback" not in fuzz_server.stderr()
