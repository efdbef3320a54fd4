"""Frame codec: every captured Java frame decodes and re-encodes; round trips; bad input → FrameError."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rmqspec.remoting import bodies
from rmqspec.remoting.command import LanguageCode, RemotingCommand, SerializeType, request, response_to
from rmqspec.remoting.frame import MAX_FRAME, FrameDecoder, FrameError, decode_frame, encode_frame
from tests.remoting.wire_fixtures import captured, complete, frame_bytes

ROWS = captured()


def test_capture_is_the_whole_java_session() -> None:
    assert len(ROWS) == 1334
    assert {r["serialize_type"] for r in ROWS} == {0, 1}


def test_every_captured_frame_decodes_in_one_stream() -> None:
    """All 1,334 frames fed as one stream, in chunks of odd sizes, decode to commands."""
    stream = b"".join(frame_bytes(r) for r in ROWS)
    dec = FrameDecoder()
    out = []
    for i in range(0, len(stream), 997):
        out += dec.feed(stream[i:i + 997])
    assert dec.pending == 0
    assert len(out) == len(ROWS)
    for row, cmd in zip(ROWS, out, strict=True):
        if row["code"] is not None:
            assert cmd.code == row["code"] and cmd.opaque == row["opaque"] and cmd.flag == row["flag"]
        assert cmd.serialize_type == row["serialize_type"]
        if complete(row):
            assert len(cmd.body) == row["body_len"]
        # the Java client and broker say JAVA; the stdlib probe of the capture says PYTHON
        assert cmd.language is (LanguageCode.JAVA if cmd.is_response else cmd.language)
        assert cmd.language in (LanguageCode.JAVA, LanguageCode.PYTHON)


def test_binary_header_frames_of_the_capture() -> None:
    binary = [decode_frame(frame_bytes(r)[4:]) for r in ROWS if r["serialize_type"] == 1]
    req, resp = binary
    assert (req.code, req.version, req.flag, req.ext_fields["topic"]) == (105, 409, 0, "ProbeTopic_44999339")
    assert resp.is_response and resp.opaque == req.opaque and resp.code == 0
    route = bodies.loads_object(resp.body, "route")
    assert route["brokerDatas"][0]["brokerAddrs"] == {"0": "127.0.0.1:10911"}


@pytest.mark.parametrize("index", range(0, len(ROWS), 1))
def test_reencoding_a_captured_frame_decodes_to_the_same_command(index: int) -> None:
    cmd = decode_frame(frame_bytes(ROWS[index])[4:])
    again = decode_frame(encode_frame(cmd)[4:])
    assert again == cmd


def test_json_headers_are_written_as_fastjson_writes_them() -> None:
    """A Java request header with ext fields re-encodes byte for byte (keys sorted, compact)."""
    row = next(r for r in ROWS if r["dir"] == "req" and r["code"] == 106)
    cmd = decode_frame(frame_bytes(row)[4:])
    assert encode_frame(cmd) == frame_bytes(row)


def test_bare_integer_keys_of_fastjson_bodies() -> None:
    row = next(r for r in ROWS if r["dir"] == "resp" and '"brokerAddrTable"' in r["body"])
    table = bodies.loads_object(frame_bytes(row)[-row["body_len"]:], "cluster info")
    assert table["brokerAddrTable"]["broker-a"]["brokerAddrs"] == {"0": "127.0.0.1:10911"}
    assert bodies.dumps({"brokerAddrs": {0: "a:1"}}, bare_int_keys=True) == b'{"brokerAddrs":{0:"a:1"}}'
    assert bodies.loads(b'{"s":"{0:x}","m":{0:"a",12:"b"}}') == {"s": "{0:x}", "m": {"0": "a", "12": "b"}}


def test_pull_bodies_start_with_commitlog_records() -> None:
    """The capture keeps 160 bytes of a pull body: enough for the first record's fixed header."""
    found = [r for r in ROWS if r["dir"] == "resp" and '"remark":"FOUND"' in r["header"]]
    assert len(found) >= 20
    for row in found:
        cmd = decode_frame(frame_bytes(row)[4:])
        size, magic, _crc, _qid, _flag, queue_offset = struct.unpack_from(">iiiiiq", cmd.body)
        assert magic == 0xDAA320A7 - (1 << 32) and size <= row["body_len"]
        assert queue_offset < int(cmd.ext_fields["nextBeginOffset"])


commands = st.builds(
    RemotingCommand,
    code=st.integers(-(1 << 15), (1 << 15) - 1),
    opaque=st.integers(-(1 << 31), (1 << 31) - 1),
    flag=st.sampled_from([0, 1, 2, 3]),
    language=st.sampled_from(list(LanguageCode)),
    version=st.integers(0, (1 << 15) - 1),
    remark=st.none() | st.text(max_size=40).filter(bool),
    ext_fields=st.dictionaries(st.text(min_size=1, max_size=12), st.text(max_size=30), max_size=6),
    body=st.binary(max_size=200),
    serialize_type=st.sampled_from(list(SerializeType)),
)


@given(commands)
def test_round_trip_of_any_command(cmd: RemotingCommand) -> None:
    data = encode_frame(cmd)
    (total,) = struct.unpack_from(">i", data)
    assert total == len(data) - 4
    assert FrameDecoder().feed(data) == [cmd]


@given(st.binary(max_size=300))
def test_arbitrary_bytes_give_frames_or_frame_errors(data: bytes) -> None:
    dec = FrameDecoder()
    try:
        for cmd in dec.feed(data):
            assert isinstance(cmd, RemotingCommand)
    except FrameError as exc:
        assert 0 <= exc.offset <= len(data) + 4
        assert exc.field and exc.reason


@given(st.binary(min_size=1, max_size=200), st.integers(0, 1))
def test_corrupt_headers_are_frame_errors(header: bytes, stype: int) -> None:
    data = struct.pack(">ii", 4 + len(header), (stype << 24) | len(header)) + header
    try:
        decode_frame(data[4:])
    except FrameError as exc:
        assert exc.field.startswith(("header", "mark"))


def test_limits_and_truncation() -> None:
    with pytest.raises(FrameError, match="exceeds the 16777216-byte limit") as err:
        FrameDecoder().feed(struct.pack(">i", MAX_FRAME) + b"\0" * 8)
    assert err.value.offset == 0
    with pytest.raises(FrameError, match="smaller than the 4-byte mark"):
        FrameDecoder().feed(struct.pack(">i", 2) + b"\0" * 8)
    dec = FrameDecoder()
    frame = encode_frame(request(105, {"topic": "T"}))
    assert dec.feed(frame[:-3]) == [] and dec.pending == len(frame) - 3
    with pytest.raises(FrameError, match="bad JSON header") as err:
        FrameDecoder().feed(struct.pack(">ii", 4 + 5, 5) + b'{"co}')
    assert err.value.offset >= 8
    with pytest.raises(FrameError, match="unknown serialize type 7"):
        decode_frame(struct.pack(">i", 7 << 24))
    header = b'{"code":1,"language":"COBOL"}'
    with pytest.raises(FrameError, match=r"header\.language"):
        decode_frame(struct.pack(">i", len(header)) + header)


def test_response_answers_in_the_request_serialize_type() -> None:
    req = request(105, {"topic": "T"}, opaque=7, serialize_type=SerializeType.ROCKETMQ)
    resp = response_to(req, 17, "No topic route info")
    assert resp.serialize_type is SerializeType.ROCKETMQ and resp.opaque == 7 and resp.is_response
    assert decode_frame(encode_frame(resp)[4:]) == resp


def test_values_the_binary_header_cannot_carry_are_frame_errors() -> None:
    """RocketMQSerializable writes code and version as int16: 99999 (the unknown-code probe) fits JSON only."""
    big = request(99999, serialize_type=SerializeType.ROCKETMQ)
    with pytest.raises(FrameError, match=r"header\.code: 99999 does not fit"):
        encode_frame(big)
    assert decode_frame(encode_frame(request(99999))[4:]).code == 99999


def test_a_rust_peer_s_header_decodes() -> None:
    """rocketmq-rust answers with ``"language":"RUST"``, the 13th LanguageCode of 4.9.8's and 5.x's enum."""
    header = b'{"code":0,"language":"RUST","version":474,"opaque":1,"flag":1,"serializeTypeCurrentRPC":"JSON"}'
    cmd = decode_frame(struct.pack(">i", len(header)) + header)
    assert (cmd.language, int(cmd.language), cmd.opaque, cmd.is_response) == (LanguageCode.RUST, 12, 1, True)
