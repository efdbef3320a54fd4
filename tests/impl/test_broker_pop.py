"""5.x pop on the mmap broker (``impl/broker_pop.py``, ``impl/pop_service.py``), in lockstep with the model.

Every scenario drives ``MmapBroker`` and ``ModelBroker`` identically on one clock: the answers (messages, handles,
codes, refusals) and the SPEC §8 events must be equal after every step. The rules (``model/pop.py``): pop,
ack, batch ack, change of invisible time, revive, orderly block and attempt id; restarts: a clean close and
reopen, a kill, a power loss (checkpoints and acks survive both; the revive progress and the order infos fall back
to their last persist); the files: the journal's frames and consumerOrderInfo.json in 5.3.3's shape; a corrupt
journal or order-info file is a ``StoreError`` naming file, offset and field; a 4.9 broker answers
REQUEST_CODE_NOT_SUPPORTED and writes no pop file.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest

from rmqspec.impl.broker import MmapBroker
from rmqspec.impl.configfiles import parse_fastjson
from rmqspec.impl.mappedfile import StoreError
from rmqspec.impl.pop_service import (
    JOURNAL_FILE,
    ORDER_INFO_FILE,
    decode_order_infos,
    encode_order_infos,
    frame,
    read_journal,
)
from rmqspec.model import ManualClock, Message
from rmqspec.model.broker import ModelBroker
from rmqspec.model.config import default_config
from rmqspec.model.events import ListRecorder
from rmqspec.model.pop import OrderInfo, PopHandle
from rmqspec.model.protocol import Capability
from rmqspec.model.results import BrokerError, ResponseCode

START = 1_700_000_000_000
PROFILE = "rocketmq-5.2"
RETRY_FIRST, TOPIC_FIRST = 0, 50


class Pair:
    """The model and the mmap broker on one clock; every call goes to both and must answer alike."""

    def __init__(self, root: Path, profile: str = PROFILE, **overrides: Any) -> None:
        self.root = root
        self.clock = ManualClock(START)
        self.config = attrs.evolve(default_config(profile), **overrides)
        self.rm, self.ri = ListRecorder(), ListRecorder()
        self.model = ModelBroker(self.clock, self.config, self.rm)
        self.impl = MmapBroker.open(root, self.clock, self.config, self.ri)

    def both(self, fn: Callable[[Any], Any]) -> Any:
        out = []
        for b in (self.model, self.impl):
            try:
                out.append(("ok", fn(b)))
            except BrokerError as e:
                out.append(("refused", e.code, str(e)))
        assert out[0] == out[1], f"model {out[0]!r} != mmap {out[1]!r}"
        assert self.rm.events == self.ri.events
        if out[0][0] == "refused":
            raise BrokerError(out[0][1], out[0][2])
        return out[0][1]

    def setup(self, queues: int = 2, n: int = 3, queue_id: int = 0) -> None:
        self.both(lambda b: b.create_topic("T", queues))
        self.both(lambda b: b.create_group("G"))
        self.send(n, queue_id)

    def send(self, n: int, queue_id: int = 0) -> None:
        for i in range(n):
            self.both(lambda b, i=i: b.send(Message("T", b"body-%d" % i, tags="TagA"), queue_id))
        self.advance(1)

    def pop(self, queue_id: int = -1, n: int = 3, invisible: int = 2_000, random_q: int = TOPIC_FIRST,
            **kw: Any) -> Any:
        def go(b: Any) -> Any:
            b.force_pop_random(random_q)
            return b.pop("G", "T", queue_id, n, invisible, order=kw.get("order", False),
                         attempt_id=kw.get("attempt_id"))
        return self.both(go)

    def advance(self, ms: int) -> None:
        self.clock.advance(ms)

    def tick_for(self, ms: int) -> None:
        end = self.clock.now() + ms
        while self.clock.now() < end:
            self.advance(min(1_000, end - self.clock.now()))
            self.both(lambda b: b.tick())

    def events(self, kind: str) -> list[Any]:
        return [e for e in self.ri.events if e.event == kind]

    def restart(self, how: str) -> None:
        """close+reopen, or crash(kind)+recover, on both."""
        if how == "close":
            self.both(lambda b: b.close())
            self.both(lambda b: b.reopen())
        else:
            self.both(lambda b: b.crash(how))
            self.both(lambda b: b.recover())


def test_the_mmap_broker_declares_pop_only_where_the_profile_pops(tmp_path: Path) -> None:
    five = MmapBroker.open(tmp_path / "a", ManualClock(START), default_config(PROFILE))
    four = MmapBroker.open(tmp_path / "b", ManualClock(START), default_config("rocketmq-4.9"))
    assert Capability.POP in five.capabilities and Capability.POP not in four.capabilities


def test_a_4_9_broker_answers_request_code_not_supported_and_writes_no_pop_file(tmp_path: Path) -> None:
    pair = Pair(tmp_path, "rocketmq-4.9")
    pair.setup()
    handle = PopHandle(0, START, 1000, 0, "0", "broker-a", 0, 0)
    with pytest.raises(BrokerError) as refused:
        pair.pop()
    assert refused.value.code is ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert pair.both(lambda b: b.ack("G", "T", handle)) is ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert pair.both(lambda b: b.batch_ack("G", "T", [handle])) is ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    with pytest.raises(BrokerError):
        pair.both(lambda b: b.change_invisible_time("G", "T", handle, 1000))
    pair.tick_for(12_000)
    pair.both(lambda b: b.close())
    assert not (tmp_path / "config" / JOURNAL_FILE).exists()
    assert not (tmp_path / "config" / ORDER_INFO_FILE).exists()


def test_refusals_are_the_models(tmp_path: Path) -> None:
    pair = Pair(tmp_path)
    pair.setup()
    for fn in (lambda b: b.pop("G", "T", 0, 33, 1000), lambda b: b.pop("G", "NOPE", 0, 1, 1000),
               lambda b: b.pop("G", "T", 5, 1, 1000), lambda b: b.pop("NOGROUP", "T", 0, 1, 1000),
               lambda b: b.pop("G", "T", 0, 1, 1000, expression="a ||| (", expression_type="SQL92")):
        with pytest.raises(BrokerError):
            pair.both(fn)
    bad = PopHandle(0, START, 1000, 0, "0", "broker-a", 7, 0)
    assert pair.both(lambda b: b.ack("G", "T", bad)) is ResponseCode.MESSAGE_ILLEGAL
    assert pair.both(lambda b: b.ack("G", "NOPE", bad)) is ResponseCode.TOPIC_NOT_EXIST
    far = PopHandle(0, START, 1000, 0, "0", "broker-a", 0, 99)
    assert pair.both(lambda b: b.ack("G", "T", far)) is ResponseCode.NO_MESSAGE
    assert pair.both(lambda b: b.batch_ack("G", "T", [])) is ResponseCode.NO_MESSAGE
    with pytest.raises(BrokerError):
        pair.both(lambda b: b.change_invisible_time("G", "T", far, 1000))
    with pytest.raises(ValueError):
        pair.impl.force_pop_random(100)


def test_pop_ack_change_revive_agree_with_the_model(tmp_path: Path) -> None:
    pair = Pair(tmp_path)
    pair.setup()
    first = pair.pop(0)
    assert len(first.messages) == 3
    assert pair.pop().messages == ()  # invisible
    h = [p.handle for p in first.messages]
    assert pair.both(lambda b: b.ack("G", "T", h[0])) is ResponseCode.SUCCESS
    assert pair.both(lambda b: b.ack("G", "T", h[0])) is ResponseCode.SUCCESS  # again: matches nothing new
    new = pair.both(lambda b: b.change_invisible_time("G", "T", h[1], 5_000))
    assert new.pop_time == pair.clock.now() and new.invisible_time == 5_000
    pair.tick_for(1_999)
    assert pair.pop(random_q=RETRY_FIRST).messages == ()  # nothing revived before the end
    pair.tick_for(3_000)
    revived = [e for e in pair.events("revive")]
    assert [e.queue_offset for e in revived] == [2]  # the third: neither acked nor changed
    again = pair.pop(n=4, random_q=RETRY_FIRST)
    assert [p.message.reconsume_times for p in again.messages] == [1]
    assert again.messages[0].handle.retry == "1" and "POP_CK" in again.messages[0].message.properties
    assert pair.both(lambda b: b.batch_ack("G", "T", [p.handle for p in again.messages])) is ResponseCode.SUCCESS
    pair.tick_for(4_000)  # the changed one revives now
    assert [e.queue_offset for e in pair.events("revive")] == [2, 1]
    assert pair.both(lambda b: b.ack("G", "T", new)) is ResponseCode.SUCCESS  # late: LATE
    assert pair.events("ack")[-1].status == "LATE"
    pair.tick_for(20_000)
    assert len(pair.events("revive")) == 2  # an acked message is never revived


def test_orderly_pop_blocks_and_honours_the_attempt_id(tmp_path: Path) -> None:
    pair = Pair(tmp_path)
    pair.setup(n=2)
    first = pair.pop(0, 2, order=True, attempt_id="A1")
    assert len(first.messages) == 2
    assert pair.pop(0, 2, order=True, attempt_id="A2").messages == ()  # blocked
    pair.advance(1)
    assert len(pair.pop(0, 2, order=True, attempt_id="A1").messages) == 2  # the same attempt passes
    pair.advance(1)
    latest = pair.pop(0, 2, order=True, attempt_id="A1")
    h = [p.handle for p in latest.messages]
    stale = first.messages[0].handle
    assert pair.both(lambda b: b.ack("G", "T", stale)) is ResponseCode.SUCCESS  # another pop's time: STALE
    assert pair.both(lambda b: b.ack("G", "T", h[0])) is ResponseCode.SUCCESS
    changed = pair.both(lambda b: b.change_invisible_time("G", "T", h[1], 10_000))
    assert changed.pop_time == h[1].pop_time
    pair.tick_for(3_000)
    assert pair.pop(0, 2, order=True, attempt_id="A3").messages == ()  # changed: still invisible
    pair.tick_for(8_000)
    rest = pair.pop(0, 2, order=True, attempt_id="A3")
    assert [(p.handle.queue_offset, p.order_count) for p in rest.messages] == [(1, 1)]  # popped again: counted once
    illegal = PopHandle(rest.messages[0].handle.ck_queue_offset, rest.messages[0].handle.pop_time, 1000, 999, "0",
                        "broker-a", 0, 2)
    assert pair.both(lambda b: b.batch_ack("G", "T", [illegal])) is ResponseCode.MESSAGE_ILLEGAL
    assert pair.both(lambda b: b.ack("G", "T", rest.messages[0].handle)) is ResponseCode.SUCCESS
    assert pair.both(lambda b: b.change_invisible_time("G", "T", h[0], 1000)) == h[0]  # below the offset


@pytest.mark.parametrize("how", ["close", "kill", "power"])
def test_checkpoints_and_acks_survive_a_restart_as_in_the_model(tmp_path: Path, how: str) -> None:
    pair = Pair(tmp_path)
    pair.setup(n=4)
    popped = pair.pop(0, 4, invisible=3_000)  # revive time START+3001: revived at the tick of START+6001
    h = [p.handle for p in popped.messages]
    pair.both(lambda b: b.ack("G", "T", h[0]))
    pair.both(lambda b: b.batch_ack("G", "T", h[1:2]))
    pair.tick_for(6_000)  # offsets (and revive progress) persisted at START+5001, before the revive
    assert [e.queue_offset for e in pair.events("revive")] == [2, 3]
    pair.restart(how)
    pair.tick_for(6_000)  # a crash: revived again (the progress did not persist it); a close persisted it
    n = len(pair.events("revive"))
    assert n == (2 if how == "close" else 4)
    pair.restart(how)
    pair.tick_for(3_000)
    assert len(pair.events("revive")) == n  # persisted since: nothing more, the acked ones never
    again = pair.pop(n=8, random_q=RETRY_FIRST)
    assert len(again.messages) == n and all(p.message.reconsume_times == 1 for p in again.messages)


@pytest.mark.parametrize("how", ["close", "kill", "power"])
def test_order_infos_persist_every_10_s_and_at_close(tmp_path: Path, how: str) -> None:
    pair = Pair(tmp_path)
    pair.setup(n=2)
    pair.pop(0, 2, invisible=60_000, order=True, attempt_id="A1")
    pair.tick_for(10_000)  # persisted: the queue blocked after any restart
    pair.restart(how)
    assert pair.pop(0, 2, order=True, attempt_id="A2").messages == ()
    text = (tmp_path / "config" / ORDER_INFO_FILE).read_text()
    doc = parse_fastjson(text)
    (info,) = doc["table"]["T@G"].values()
    assert info["a"] == "A1" and info["o"] == [0, 1] and info["cm"] == 0 and info["i"] == 60_000
    second = Pair(tmp_path / "b")
    second.setup(n=2)
    second.pop(0, 2, invisible=60_000, order=True, attempt_id="A1")
    second.restart(how)  # before any persist: a crash forgets the info, a close keeps it
    blocked = second.pop(0, 2, order=True, attempt_id="A2").messages == ()
    assert blocked == (how == "close")


def test_the_order_info_file_round_trips_in_5_3_3_shape() -> None:
    infos = {("T", "G", 1): OrderInfo("A", 100, 2000, (5, 7, 9), frozenset({7}), {9: 4000}, {5: 2})}
    text = encode_order_infos(infos)
    assert '"o":[5,2,4]' in text.replace(" ", "").replace("\n", "") and '"cm":2' in text.replace(" ", "")
    assert decode_order_infos(parse_fastjson(text)) == infos


def test_a_frame_in_flight_at_a_crash_is_cut_and_the_journal_goes_on(tmp_path: Path) -> None:
    pair = Pair(tmp_path)
    pair.setup()
    pair.pop(0)
    path = tmp_path / "config" / JOURNAL_FILE
    whole = path.stat().st_size
    pair.both(lambda b: b.crash("kill"))
    with path.open("ab") as f:
        f.write(frame({"ack": [0, 0]})[:9])  # torn: the rest never reached the disk
    pair.both(lambda b: b.recover())
    frames, end = read_journal(path)
    assert end == whole and len(frames) == 1
    pair.both(lambda b: b.ack("G", "T", PopHandle(0, START + 1, 2000, 0, "0", "broker-a", 0, 1)))
    assert read_journal(path)[1] == path.stat().st_size > whole


@pytest.mark.parametrize(("damage", "says"), [
    ("crc", "CRC"), ("json", "not JSON"), ("field", "field 'pop_time'"), ("ack", "field 'ack'"),
    ("kind", "field 'nope'"), ("revived", "field 'revived'"),
])
def test_a_corrupt_journal_is_a_store_error_naming_file_offset_and_field(tmp_path: Path, damage: str,
                                                                         says: str) -> None:
    pair = Pair(tmp_path)
    pair.setup()
    pair.pop(0)
    pair.both(lambda b: b.close())
    path = tmp_path / "config" / JOURNAL_FILE
    data = bytearray(path.read_bytes())
    good = frame({"revived": []})
    if damage == "crc":
        data[12] ^= 0xFF
        data += good
    elif damage == "json":
        payload = b"{not json"
        data += len(payload).to_bytes(4, "big") + zlib.crc32(payload).to_bytes(4, "big") + payload
    elif damage == "field":
        ck = {"seq": 9, "group": "G", "topic": "T", "queue_id": 0, "start_offset": 0, "pop_time": "x",
              "invisible_time": 1, "revive_qid": 0, "broker_name": "b", "offsets": [0], "suspend": False}
        data += frame({"ck": ck})
    elif damage == "ack":
        data += frame({"ack": [42, 0]})
    elif damage == "kind":
        data += frame({"nope": 1})
    else:
        data += frame({"revived": [42]})
    path.write_bytes(bytes(data))
    with pytest.raises(StoreError) as err:
        MmapBroker.open(tmp_path, pair.clock, pair.config)
    assert JOURNAL_FILE in str(err.value) and says in str(err.value) and "at byte" in str(err.value)


def test_a_corrupt_order_info_file_is_a_store_error(tmp_path: Path) -> None:
    pair = Pair(tmp_path)
    pair.setup(n=2)
    pair.pop(0, 2, order=True, attempt_id="A1")
    pair.both(lambda b: b.close())
    path = tmp_path / "config" / ORDER_INFO_FILE
    path.write_text('{"table":{"T@G":{0:{"o":["x"],"popTime":1}}}}')
    with pytest.raises(StoreError) as err:
        MmapBroker.open(tmp_path, pair.clock, pair.config)
    assert ORDER_INFO_FILE in str(err.value) and "'o'" in str(err.value)


def test_a_pop_relocates_a_wrong_offset_and_skips_what_the_filter_refuses(tmp_path: Path) -> None:
    pair = Pair(tmp_path)
    pair.setup()
    from rmqspec.model import MessageQueue

    pair.both(lambda b: b.update_offset("G", MessageQueue("T", 0), 100))  # past the queue: OFFSET_OVERFLOW_BADLY
    assert pair.pop(0).messages == ()
    pair.send(2)
    assert len(pair.pop(0).messages) == 2  # read from the relocated offset
    pair.send(1)
    assert pair.both(lambda b: b.pop("G", "T", 0, 3, 1000, expression="TagB")).messages == ()  # skipped, committed
    assert pair.pop(0).messages == ()


def test_an_orderly_ack_or_change_below_the_committed_offset_changes_nothing(tmp_path: Path) -> None:
    pair = Pair(tmp_path)
    pair.setup(n=1)
    (p,) = pair.pop(0, 1, order=True, attempt_id="A").messages
    assert pair.both(lambda b: b.ack("G", "T", p.handle)) is ResponseCode.SUCCESS
    assert pair.both(lambda b: b.ack("G", "T", p.handle)) is ResponseCode.SUCCESS  # STALE now
    assert pair.events("ack")[-1].status == "STALE"
    other = PopHandle(0, START + 5, 1000, 999, "0", "broker-a", 1, 0)
    pair.send(1, queue_id=1)
    pair.pop(1, 1, order=True, attempt_id="B")
    new = pair.both(lambda b: b.change_invisible_time("G", "T", other, 1000))  # another pop's time: no info change
    assert new.invisible_time == pair.clock.now() + 1000 - other.pop_time


def test_a_crashed_broker_refuses_an_ack_as_unavailable(tmp_path: Path) -> None:
    pair = Pair(tmp_path)
    pair.setup()
    pair.both(lambda b: b.crash("kill"))
    with pytest.raises(BrokerError) as refused:
        pair.both(lambda b: b.ack("G", "T", PopHandle(0, START, 1000, 0, "0", "broker-a", 0, 0)))
    assert refused.value.code is ResponseCode.SERVICE_NOT_AVAILABLE


def test_a_revive_whose_message_a_power_loss_took_revives_nothing(tmp_path: Path) -> None:
    pair = Pair(tmp_path, flush="ASYNC")
    pair.setup(n=2)
    pair.pop(0, 2)
    pair.both(lambda b: b.crash("power"))
    pair.impl.recover()
    pair.model.recover(survivors=pair.impl.commitlog_record_count())  # what the files kept (none: unflushed)
    pair.rm.events.clear()
    pair.ri.events.clear()
    pair.tick_for(6_000)
    assert pair.events("revive") == []  # "can not get biz msg"


def test_a_revive_put_refused_rewrites_the_checkpoint_ten_seconds_later(tmp_path: Path) -> None:
    pair = Pair(tmp_path)
    pair.setup(n=1)
    pair.pop(0, 1)  # revive time START+2001: due at a tick after START+4001
    pair.tick_for(3_000)
    pair.both(lambda b: b.hold_put_lock(60_000))
    pair.advance(1_500)
    pair.both(lambda b: b.tick())  # due, the put lock busy: the put refused, the checkpoint rewritten
    assert pair.events("revive") == []
    assert len(pair.impl.pop_state.pending) == 2
    pair.tick_for(62_000)  # the lock released at START+63001; the rewritten checkpoint was due since START+14001
    assert [e.queue_offset for e in pair.events("revive")] == [0]


def test_the_journal_writes_are_seen_by_crash_exploration(tmp_path: Path) -> None:
    from rmqspec.impl import effects

    pair = Pair(tmp_path)
    pair.setup()
    with effects.recording(tmp_path) as log:
        pair.pop(0)
    mine = [e for e in log.effects if JOURNAL_FILE in str(getattr(e, "path", ""))]
    kinds = [type(e).__name__ for e in mine]
    assert kinds[:1] == ["Create"] and "Write" in kinds and kinds[-1] == "Sync"


@pytest.mark.parametrize(("doc", "says"), [
    ([], "'table' is not an object"), ({"table": {"T@G": 1}}, "is not an object"),
    ({"table": {"T@G": {0: 1}}}, "is not an object"), ({"table": {"T@G": {0: {"a": 5, "o": [1]}}}}, "'a'"),
    ({"table": {"T@G": {0: {"o": [1], "ot": 3}}}}, "'ot'"),
    ({"table": {"T@G": {0: {"o": [1], "oc": {1: "x"}}}}}, "'oc'"),
])
def test_order_info_documents_that_are_not_5_3_3_s_are_refused(doc: Any, says: str) -> None:
    from rmqspec.impl.configfiles import ConfigFileError

    with pytest.raises(ConfigFileError) as err:
        decode_order_infos(doc)
    assert says in str(err.value)


@pytest.mark.parametrize(("tail", "says"), [
    (frame({"ck": 3}), "field 'ck'"), (frame({"ck": {"offsets": ["x"]}}), "field 'seq'"),
    (frame({"a": 1, "b": 2}), "is not one of"),
])
def test_journal_frames_that_do_not_decode_name_the_field(tmp_path: Path, tail: bytes, says: str) -> None:
    path = tmp_path / JOURNAL_FILE
    path.write_bytes(tail + frame({"revived": []}))
    from rmqspec.impl.pop_service import DiskPopState

    with pytest.raises(StoreError) as err:
        DiskPopState.load(tmp_path, None, 0)
    assert says in str(err.value) and "at byte 0" in str(err.value)


def test_a_cut_header_and_a_torn_last_frame_are_writes_in_flight(tmp_path: Path) -> None:
    path = tmp_path / JOURNAL_FILE
    good = frame({"revived": []})
    path.write_bytes(good + b"\x00\x00\x00")
    assert read_journal(path)[1] == len(good)
    torn = bytearray(frame({"revived": [1]}))
    torn[-1] ^= 0xFF
    path.write_bytes(good + bytes(torn))
    assert read_journal(path)[1] == len(good)
    path.write_bytes(good + bytes(torn) + good)
    with pytest.raises(StoreError):
        read_journal(path)


def test_store_verify_judges_the_pop_files(tmp_path: Path) -> None:
    from rmqspec.impl.verify import verify_store

    pair = Pair(tmp_path)
    pair.setup(n=2)
    pair.pop(0, 1)
    pair.send(1, queue_id=1)
    pair.pop(1, 1, order=True, attempt_id="A")
    pair.both(lambda b: b.close())
    codes = lambda: {(f.code, f.file) for f in verify_store(tmp_path).findings}  # noqa: E731
    assert codes() == set()
    (tmp_path / "config" / ORDER_INFO_FILE).write_text('{"table":[]}')
    with (tmp_path / "config" / JOURNAL_FILE).open("ab") as f:
        f.write(frame({"nope": 1}) + frame({"revived": []}))
    assert {("BAD_JOURNAL", f"config/{JOURNAL_FILE}"), ("BAD_JSON", f"config/{ORDER_INFO_FILE}")} <= codes()


def test_every_crash_state_of_a_popping_broker_recovers_with_every_answered_frame(tmp_path: Path) -> None:
    """Crash exploration (impl/crashfs.py) over a recorded pop workload: at every crash point a seeded sample of
    the disks a power cut can leave (write-back subsets, metadata prefixes, a torn page) opens, and the journal
    holds at least the frames of every request answered before the point (each is fsynced before its answer)."""
    import random

    from rmqspec.impl import crashfs, effects
    from rmqspec.impl.crashselect import select_states
    from rmqspec.impl.crashwork import workload_config

    config = workload_config("SYNC", version=PROFILE)
    root = tmp_path / "store"
    clock = ManualClock(START)
    promised: list[tuple[int, int]] = []  # (the last effect before the answer, frames in the journal)
    journal = root / "config" / JOURNAL_FILE
    with effects.recording(root) as log:
        broker = MmapBroker.open(root, clock, config)

        def answered() -> None:
            promised.append((len(log.effects) - 1, len(read_journal(journal)[0])))

        broker.create_topic("T", 2)
        broker.create_group("G")
        for round_ in range(3):
            for i in range(4):
                broker.send(Message("T", b"m%d" % i, tags="TagA"), i % 2)
            clock.advance(10)
            broker.force_pop_random((RETRY_FIRST, TOPIC_FIRST)[round_ % 2])
            popped = broker.pop("G", "T", -1, 4, 2_000).messages
            answered()
            if popped:
                broker.ack("G", "T", popped[0].handle)
                answered()
            if len(popped) > 1:
                broker.change_invisible_time("G", "T", popped[1].handle, 3_000)
                answered()
            for _ in range(6):
                clock.advance(1_000)
                broker.tick()
            if round_ == 1:
                broker.crash("kill")
                broker.recover()
        broker.close()
    assert promised[-1][1] > 6
    points, _model = crashfs.replay(log.effects)
    states, _ = select_states(points, 400, random.Random(40))
    assert states
    torn_journal = judged = 0
    for n, state in enumerate(states):
        torn_journal += state.torn is not None and state.point.paths.get(state.torn[0].ino, "").endswith(JOURNAL_FILE)
        where = tmp_path / f"s{n}"
        crashfs.materialize(state, where)
        need = max((frames for index, frames in promised if index <= state.point.index), default=0)
        judged += need > 0
        reopened = MmapBroker.open(where, ManualClock(START + 100_000), config)  # never a StoreError
        assert len(read_journal(where / "config" / JOURNAL_FILE)[0]) >= need, crashfs.describe(state)
        reopened.close()
    assert torn_journal > 0 and judged > 100, "journal pages torn mid-write, and promised frames, were judged"
