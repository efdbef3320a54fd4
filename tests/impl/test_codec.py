"""CommitLog record codec: round trip, RocketMQ's limits, tagsCode, corrupt-record detection."""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rmqspec.impl.codec import (
    BLANK_MAGIC,
    MESSAGE_MAGIC,
    SCHEDULE_TOPIC,
    Blank,
    CorruptRecord,
    DecodedRecord,
    End,
    MessageRecord,
    PutError,
    decode_at,
    decode_record,
    encode_blank,
    encode_record,
    prepare,
    tags_code,
    to_stored_message,
)
from rmqspec.model.ids import offset_msg_id
from rmqspec.model.javahash import java_string_hash
from rmqspec.model.message import (
    BORNHOST_V6_FLAG,
    MAX_BODY_BYTES,
    STOREHOST_V6_FLAG,
    encode_properties,
    record_size,
)
from rmqspec.model.results import ResponseCode

TOPIC_CHARS = "abcXYZ019_-%|"
legal_topics = st.text(TOPIC_CHARS, min_size=1, max_size=127)
# property text: anything but the two separators (unicode welcome, surrogates are not UTF-8)
prop_text = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), max_size=40)
prop_names = prop_text.filter(bool)
hosts = st.one_of(st.ip_addresses(v=4).map(str), st.ip_addresses(v=6).map(str)).flatmap(
    lambda h: st.tuples(st.just(h), st.integers(0, 65535))
)
i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
bodies = st.one_of(st.binary(max_size=300), st.just(b""), st.binary(min_size=5000, max_size=9000))


@st.composite
def records(draw: st.DrawFn) -> MessageRecord:
    props = draw(st.dictionaries(prop_names, prop_text, max_size=5))
    if draw(st.booleans()):
        props["TAGS"] = draw(prop_text)
    if draw(st.booleans()):
        props["KEYS"] = " ".join(draw(st.lists(prop_text.filter(lambda s: " " not in s and s))))
    return MessageRecord(
        topic=draw(legal_topics),
        queue_id=draw(st.integers(0, 2**31 - 1)),
        body=draw(bodies),
        properties=props,
        sys_flag=draw(i32),
        born_ts=draw(i64),
        store_ts=draw(i64),
        born_host=draw(hosts),
        reconsume_times=draw(i32),
        prepared_txn_offset=draw(i64),
        flag=draw(i32),
    )


@given(record=records(), store_host=hosts, queue_offset=i64, phys=st.integers(0, 2**62))
@settings(max_examples=80)
def test_round_trip_and_size_agree_with_record_size(
    record: MessageRecord, store_host: tuple[str, int], queue_offset: int, phys: int
) -> None:
    # encoded properties may not end in NUL (tests/impl/test_crash_regressions.py)
    assume(not encode_properties(record.properties).endswith("\0"))
    data = encode_record(record, queue_offset=queue_offset, physical_offset=phys, store_host=store_host)
    decoded = decode_record(data, base_offset=phys)
    assert len(data) == decoded.size == record_size(len(record.body), record.topic, record.properties, decoded.sys_flag)
    assert decoded.body == record.body
    assert decoded.topic == record.topic
    # MessageDecoder.string2messageProperties drops a pair whose value is empty
    assert dict(decoded.properties) == {k: v for k, v in record.properties.items() if v}
    assert decoded.properties_text == "\x02".join(f"{k}\x01{v}" for k, v in record.properties.items())
    assert list(decoded.properties) == [k for k, v in record.properties.items() if v]  # order kept
    assert decoded.queue_offset == queue_offset
    assert decoded.physical_offset == phys == decoded.commitlog_offset
    assert (decoded.born_ts, decoded.store_ts) == (record.born_ts, record.store_ts)
    assert decoded.reconsume_times == record.reconsume_times
    assert decoded.prepared_txn_offset == record.prepared_txn_offset
    assert decoded.flag == record.flag and decoded.queue_id == record.queue_id
    assert decoded.body_crc == zlib.crc32(record.body) & 0x7FFFFFFF
    # host bits follow the address family; every other sysFlag bit is kept
    v6 = (BORNHOST_V6_FLAG if ":" in record.born_host[0] else 0) | (STOREHOST_V6_FLAG if ":" in store_host[0] else 0)
    assert decoded.sys_flag == (record.sys_flag & ~0x30) | v6
    assert decoded.born_host[1] == record.born_host[1]
    assert decoded.store_host[1] == store_host[1]
    assert decoded.msg_id == offset_msg_id(store_host[0], store_host[1], phys)


def test_layout_by_hand() -> None:
    rec = MessageRecord(
        "T",
        3,
        b"hi",
        {"TAGS": "a"},
        sys_flag=0,
        born_ts=7,
        store_ts=9,
        born_host=("1.2.3.4", 5),
        reconsume_times=2,
        prepared_txn_offset=11,
        flag=4,
    )
    data = encode_record(rec, queue_offset=6, physical_offset=100, store_host=("10.0.0.1", 10911))
    total, magic, crc, qid, flag, qoff, phys, sysflag, born = struct.unpack_from(">iiiiiqqiq", data)
    assert (total, magic, qid, flag, qoff, phys, sysflag, born) == (
        len(data),
        MESSAGE_MAGIC,
        3,
        4,
        6,
        100,
        0,
        7,
    )
    assert magic & 0xFFFFFFFF == 0xDAA320A7
    assert crc == zlib.crc32(b"hi") & 0x7FFFFFFF
    assert data[48:56] == bytes([1, 2, 3, 4]) + (5).to_bytes(4, "big")
    assert struct.unpack_from(">q", data, 56)[0] == 9
    assert data[64:72] == bytes([10, 0, 0, 1]) + (10911).to_bytes(4, "big")
    assert struct.unpack_from(">iqi", data, 72) == (2, 11, 2)
    assert data[88:90] == b"hi" and data[90] == 1 and data[91:92] == b"T"
    assert struct.unpack_from(">h", data, 92)[0] == len("TAGS\x01a")
    assert data[94:] == b"TAGS\x01a"


def test_blank_record() -> None:
    blank = encode_blank(40)
    assert blank == struct.pack(">ii", 40, BLANK_MAGIC)
    assert blank[4:8] == bytes.fromhex("CBD43194")
    buf = bytearray(100)
    buf[60:68] = blank
    assert decode_at(bytes(buf), 60) == Blank(60, 40)
    assert decode_at(bytes(100), 0) == End(0)


@pytest.mark.parametrize(
    ("record", "code", "field"),
    [
        (MessageRecord("T", 0, b"x" * (MAX_BODY_BYTES + 1)), ResponseCode.MESSAGE_ILLEGAL, "body"),
        (MessageRecord("t" * 128, 0, b""), ResponseCode.MESSAGE_ILLEGAL, "topic"),
        # 100 chars but 200 UTF-8 bytes: real 4.9.8 writes (byte) 200 and cannot read it back
        (MessageRecord("é" * 100, 0, b""), ResponseCode.MESSAGE_ILLEGAL, "topic"),
        (MessageRecord("", 0, b""), ResponseCode.MESSAGE_ILLEGAL, "topic"),
        # 32769 Java chars: DefaultMessageStore.checkMessage, before any byte count
        (MessageRecord("T", 0, b"", {"k": "v" * 32767}), ResponseCode.MESSAGE_ILLEGAL, "properties"),
        # 20002 chars but 40002 UTF-8 bytes: MessageExtEncoder.encode
        (MessageRecord("T", 0, b"", {"P": "é" * 20000}), ResponseCode.PROPERTIES_SIZE_EXCEEDED, "properties"),
        (MessageRecord("T", 0, b"", {"k\x01": "v"}), ResponseCode.MESSAGE_ILLEGAL, "property name"),
        (MessageRecord("T", -1, b""), ResponseCode.MESSAGE_ILLEGAL, "queue_id"),
        (MessageRecord("T", 0, b"", born_host=("nohost", 1)), ResponseCode.MESSAGE_ILLEGAL, "host"),
        (
            MessageRecord(SCHEDULE_TOPIC, 0, b"", {"DELAY": "x"}),
            ResponseCode.MESSAGE_ILLEGAL,
            "DELAY",
        ),
    ],
)
def test_limits_raise_typed_errors(record: MessageRecord, code: ResponseCode, field: str) -> None:
    with pytest.raises(PutError) as info:
        prepare(record, ("127.0.0.1", 10911))
    assert info.value.code == code
    assert info.value.field == field
    assert field in str(info.value)


def test_limits_accept_the_boundaries() -> None:
    props = {"k": "v" * (32767 - 2)}
    p = prepare(MessageRecord("t" * 127, 0, b"x" * MAX_BODY_BYTES, props), ("127.0.0.1", 1))
    # the 4 MiB limit is on the body: the record itself may be larger (oracle.sh write: PUT_OK)
    assert p.size == record_size(MAX_BODY_BYTES, "t" * 127, props, 0) > MAX_BODY_BYTES
    # 16383 four-byte characters = 32766 Java chars and 65532 UTF-8 bytes would be too many bytes;
    # 8191 of them: 16382 chars, 32764 bytes + "k\x01" = 32766 bytes: accepted
    prepare(MessageRecord("T", 0, b"", {"k": "\U0001f600" * 8191}), ("127.0.0.1", 1))


@pytest.mark.parametrize("topic", ["bad topic", "主题", "tö", "%DLQ%g|x"])
def test_the_store_takes_any_topic(topic: str) -> None:
    """Topic characters are the broker's send path (TopicValidator), not the store's."""
    data = encode_record(MessageRecord(topic, 0, b"b"), queue_offset=0, physical_offset=0)
    assert decode_record(data).topic == topic


def test_tags_code() -> None:
    assert tags_code("T", {}, 5) == 0
    assert tags_code("T", {"TAGS": ""}, 5) == 0
    assert tags_code("T", {"TAGS": "TagA"}, 5) == java_string_hash("TagA")
    assert tags_code("T", {"TAGS": "标签😀"}, 5) == java_string_hash("标签😀")
    # the schedule topic: deliver timestamp = storeTs + delay(level), level clamped to the table
    assert tags_code(SCHEDULE_TOPIC, {"TAGS": "a", "DELAY": "3"}, 1000) == 1000 + 10_000
    assert tags_code(SCHEDULE_TOPIC, {"DELAY": "99"}, 1000) == 1000 + 7_200_000
    assert tags_code(SCHEDULE_TOPIC, {"DELAY": "2"}, 1000, (100, 200)) == 1200
    assert tags_code(SCHEDULE_TOPIC, {"TAGS": "a", "DELAY": "0"}, 1000) == java_string_hash("a")
    assert tags_code("OTHER", {"DELAY": "3"}, 1000) == 0


def _valid(body: bytes = b"hello") -> bytes:
    return encode_record(MessageRecord("T", 0, body, {"TAGS": "a"}), queue_offset=0, physical_offset=0)


def test_decode_detects_corruption() -> None:
    data = bytearray(_valid())
    # bit flip in the body → CRC mismatch
    bad = bytearray(data)
    bad[88] ^= 0x01
    with pytest.raises(CorruptRecord) as info:
        decode_record(bytes(bad))
    assert info.value.code == "BAD_CRC" and info.value.offset == 0
    # unknown magic
    bad = bytearray(data)
    bad[4] ^= 0xFF
    with pytest.raises(CorruptRecord) as info:
        decode_record(bytes(bad))
    assert info.value.code == "BAD_MAGIC"
    # size mismatch: totalSize one too large (with room in the buffer)
    bad = bytearray(data) + b"\0"
    struct.pack_into(">i", bad, 0, len(data) + 1)
    with pytest.raises(CorruptRecord) as info:
        decode_record(bytes(bad))
    assert info.value.code == "BAD_SIZE"
    # truncated
    with pytest.raises(CorruptRecord) as info:
        decode_record(bytes(data[:-3]))
    assert info.value.code == "TRUNCATED"
    # physical offset does not match where the record sits
    with pytest.raises(CorruptRecord) as info:
        decode_record(bytes(data), base_offset=64)
    assert info.value.code == "BAD_PHYSICAL_OFFSET" and info.value.offset == 64
    # CRC check can be skipped (RocketMQ checkCRCOnRecover=false)
    bad = bytearray(data)
    bad[88] ^= 0x01
    assert isinstance(decode_record(bytes(bad), check_crc=False), DecodedRecord)
    # a torn tail: the properties end in zeros (the body CRC and every length still agree)
    torn = bytes(data[:-1]) + b"\0"
    with pytest.raises(CorruptRecord) as info:
        decode_record(torn)
    assert info.value.code == "TRUNCATED" and "tail" in info.value.reason
    assert isinstance(decode_at(torn, 0, check_tail=False), DecodedRecord)  # RocketMQ's view
    no_props = bytearray(encode_record(MessageRecord("Tp", 0, b"x"), queue_offset=0, physical_offset=0))
    assert isinstance(decode_record(bytes(no_props)), DecodedRecord)  # ends in propsLen 0: fine
    no_props[-3] = 0  # the topic's last character
    with pytest.raises(CorruptRecord, match="tail"):
        decode_record(bytes(no_props))


@given(data=st.binary(max_size=200), pos=st.integers(0, 50))
def test_decode_never_crashes_on_garbage(data: bytes, pos: int) -> None:
    try:
        result = decode_at(data, pos)
    except CorruptRecord as exc:
        assert exc.code in {"BAD_MAGIC", "BAD_SIZE", "TRUNCATED", "BAD_CRC", "BAD_PHYSICAL_OFFSET"}
    else:
        assert isinstance(result, (DecodedRecord, Blank, End))


def test_to_stored_message() -> None:
    rec = MessageRecord(
        "T",
        1,
        b"b",
        {"TAGS": "t", "KEYS": "k1 k2", "UNIQ_KEY": "A" * 32},
        store_ts=5,
        born_ts=4,
        reconsume_times=2,
        prepared_txn_offset=9,
        flag=3,
    )
    data = encode_record(rec, queue_offset=7, physical_offset=0, store_host=("10.1.2.3", 9876))
    stored = to_stored_message(decode_record(data), "10.1.2.3", 9876)
    assert stored.msg_id == offset_msg_id("10.1.2.3", 9876, 0)
    assert (stored.tags, stored.keys, stored.uniq_key) == ("t", ("k1", "k2"), "A" * 32)
    assert (stored.topic, stored.queue_id, stored.queue_offset) == ("T", 1, 7)
    assert (stored.reconsume_times, stored.prepared_txn_offset, stored.flag) == (2, 9, 3)
    assert to_stored_message(decode_record(data)).msg_id == stored.msg_id
