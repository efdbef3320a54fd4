"""Retention (issue 42, D21): the clean service's decisions and both brokers applying them alike."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest

from rmqspec.impl.broker import MmapBroker
from rmqspec.model.broker import ModelBroker
from rmqspec.model.clock import ManualClock
from rmqspec.model.config import BrokerConfig
from rmqspec.model.events import ListRecorder
from rmqspec.model.message import Message, MessageQueue
from rmqspec.model.queues import GetStatus, tag_filter
from rmqspec.model.results import BrokerError, PullStatus, ResponseCode, TxnAction
from rmqspec.model.retention import (
    DELETE_FILES_BATCH_MAX,
    Policy,
    check_disk_ratio,
    commitlog_pass,
    consume_queue_files_to_delete,
    corrected_min,
    parse_delete_when,
    pass_due,
)

HOUR = 3_600_000
RESERVED = 72 * HOUR
# 2026-01-01 03:00 UTC: an hour before deleteWhen's default "04"
T0 = int(datetime.datetime(2026, 1, 1, 3, 0, tzinfo=datetime.UTC).timestamp() * 1000)
FOUR = T0 + HOUR  # 04:00
POLICY = Policy.of(72, "04", 75)
SMALL = BrokerConfig(commitlog_file_size=4096, consume_queue_file_size=200)  # 10 units a consume-queue file
MQ = MessageQueue("T", 0)


# -- the decisions ---------------------------------------------------------------------------------


def test_passes_start_a_minute_after_the_start_then_every_ten_seconds() -> None:
    assert pass_due(T0 + 59_999, T0, None) is None
    assert pass_due(T0 + 60_000, T0, None) == T0 + 60_000
    assert pass_due(T0 + 69_999, T0, T0 + 60_000) is None
    assert pass_due(T0 + 95_000, T0, T0 + 60_000) == T0 + 90_000  # a jump runs one pass, the latest


def test_a_pass_deletes_expired_files_only_in_a_delete_hour() -> None:
    rolled = [T0 - RESERVED, T0 - RESERVED + 1, None]
    assert commitlog_pass(POLICY, FOUR, 0.0, rolled).delete == 2
    assert commitlog_pass(POLICY, FOUR - 1, 0.0, rolled).delete == 0  # 03:59:59.999
    assert commitlog_pass(POLICY, FOUR + 1 * HOUR, 0.0, rolled).delete == 0  # 05:00


def test_the_first_young_file_ends_the_pass_and_the_last_file_stays() -> None:
    assert commitlog_pass(POLICY, FOUR, 0.0, [FOUR - RESERVED, FOUR, FOUR - RESERVED, None]).delete == 1
    assert commitlog_pass(POLICY, FOUR, 0.0, [FOUR - RESERVED]).delete == 0  # the only file is the last
    assert commitlog_pass(POLICY, FOUR, 0.0, [None, FOUR - RESERVED, None]).delete == 0  # not aged


def test_at_most_ten_files_a_pass() -> None:
    rolled = [0] * 25 + [None]
    assert commitlog_pass(POLICY, FOUR, 0.0, rolled).delete == DELETE_FILES_BATCH_MAX


@pytest.mark.parametrize(("ratio", "deleted", "full", "cause"), [
    (0.75, 0, False, "reserved"),  # at the max: nothing outside the delete hour
    (0.80, 1, False, "reserved"),  # over it: the expired file only
    (0.86, 3, None, "forcibly"),  # over 0.85: every file but the last; the disk-full flag as it was
    (0.91, 3, True, "forcibly"),  # over 0.90: the store refuses puts
])
def test_disk_usage(ratio: float, deleted: int, full: bool | None, cause: str) -> None:
    noon = FOUR + 8 * HOUR
    out = commitlog_pass(POLICY, noon, ratio, [noon - RESERVED, noon, noon, None])
    assert (out.delete, out.disk_full) == (deleted, full)
    if deleted:
        assert out.cause == cause


def test_forcibly_off_waits_for_expiry() -> None:
    policy = Policy.of(72, "04", 75, clean_file_forcibly_enable=False)
    noon = FOUR + 8 * HOUR
    assert commitlog_pass(policy, noon, 0.95, [noon - RESERVED, noon, None]).delete == 1


def test_policy_clamps_the_ratio_and_parses_delete_when() -> None:
    assert Policy.of(72, "04", 5).max_used_ratio == 0.10
    assert Policy.of(72, "04", 99).max_used_ratio == 0.95
    assert parse_delete_when("04;16") == (4, 16)
    with pytest.raises(ValueError, match="'x' is not an hour"):
        parse_delete_when("04;x")
    with pytest.raises(ValueError, match="24 is not an hour"):
        parse_delete_when("24")
    with pytest.raises(ValueError, match="deleteWhen"):
        BrokerConfig(delete_when="4am")
    with pytest.raises(ValueError, match="fraction"):
        check_disk_ratio(1.5)


def test_consume_queue_files_and_the_min_offset() -> None:
    assert consume_queue_files_to_delete([100, 200, 300], 250) == 2  # the last file stays
    assert consume_queue_files_to_delete([100, None, 300], 250) == 1
    assert consume_queue_files_to_delete([300, 100], 250) == 0
    assert corrected_min([100, 200, 300], 20, 250, 7) == 22
    assert corrected_min([100, 200], 20, 250, 7) == 7  # none in the first file: unchanged


# -- both brokers ----------------------------------------------------------------------------------


def _brokers(tmp_path: Path, config: BrokerConfig = SMALL) -> tuple[ManualClock, list[Any], list[ListRecorder]]:
    clock = ManualClock(T0)
    recorders = [ListRecorder(), ListRecorder()]
    brokers = [ModelBroker(clock, config, recorders[0]),
               MmapBroker.open(tmp_path / "store", clock, config, recorders[1])]
    for b in brokers:
        b.create_topic("T", 1)
    return clock, brokers, recorders


def _send(clock: ManualClock, brokers: list[Any], n: int, size: int = 200) -> None:
    for i in range(n):
        for b in brokers:
            b.send(Message(topic="T", body=b"x" * size, uniq_key=f"K{clock.now()}-{i}"), 0)
        clock.advance(1000)


def _same(brokers: list[Any], fn: Any) -> Any:
    answers = []
    for b in brokers:
        try:
            answers.append(fn(b))
        except BrokerError as e:
            answers.append(("error", e.code, str(e)))
    assert answers[0] == answers[1]
    return answers[0]


def _first_kept(model: ModelBroker, commitlog_min: int) -> int:
    """The queue offset of T/0's first record at or above ``commitlog_min`` (correctMinOffset's answer)."""
    return next(r.queue_offset for r in model.store.records if r.topic == "T" and r.commitlog_offset >= commitlog_min)


def _expired_queue_u(tmp_path: Path, config: BrokerConfig, units: int, after: int) -> tuple[list[Any], MessageQueue]:
    """Queue U gets ``units`` small messages, T ``after`` larger ones; three days later, in the delete
    hour, a pass deletes the files U's messages are in."""
    clock, brokers, _ = _brokers(tmp_path, config)
    for b in brokers:
        b.create_topic("U", 1)
    for i in range(units):
        for b in brokers:
            b.send(Message(topic="U", body=b"u", uniq_key=f"U{i}"), 0)
    _send(clock, brokers, after)
    clock.set(T0 + RESERVED + HOUR + 30_000)
    for b in brokers:
        b.tick()
    assert _same(brokers, lambda b: b.commitlog_min_offset()) > 0
    return brokers, MessageQueue("U", 0)


def _at_disk(clock: ManualClock, brokers: list[Any], ratio: float, after_ms: int) -> None:
    """Both brokers' disk usage set, the clock moved, both ticked."""
    for b in brokers:
        b.set_disk_usage(ratio)
    clock.advance(after_ms)
    for b in brokers:
        b.tick()


def _expires(recorder: ListRecorder) -> list[tuple[Any, ...]]:
    return [(e.topic, e.queue_id, e.queue_offset, e.commitlog_offset, e.detail) for e in recorder.events
            if e.event == "expire"]


def test_files_past_the_reserve_go_in_the_delete_hour_and_the_queue_moves(tmp_path: Path) -> None:
    clock, brokers, recorders = _brokers(tmp_path)
    _send(clock, brokers, 60)  # 6 files of 4096 bytes, 11 records each
    clock.set(FOUR - 10)
    for b in brokers:
        b.tick()
    assert _same(brokers, lambda b: b.commitlog_min_offset()) == 0  # 03:59: not the hour
    clock.set(T0 + RESERVED + HOUR + 30_000)  # three days later, 04:00:30
    for b in brokers:
        b.tick()
    assert _same(brokers, lambda b: b.commitlog_min_offset()) == 5 * 4096
    low = _first_kept(brokers[0], 5 * 4096)
    assert 0 < low < 60
    assert _expires(recorders[0]) == _expires(recorders[1]) == [
        (None, None, None, 5 * 4096, {"cause": "reserved", "files": 5}),
        ("T", 0, low, None, {"cause": "reserved", "files": 5}),
    ]
    below = _same(brokers, lambda b: b.pull("G", MQ, 3))
    assert (below.status, below.next_begin_offset, below.min_offset) == (PullStatus.OFFSET_ILLEGAL, low, low)
    found = _same(brokers, lambda b: b.pull("G", MQ, low))
    assert [m.queue_offset for m in found.messages] == list(range(low, 60))
    assert _same(brokers, lambda b: b.query_offset("G", MQ)) == -1  # no offset, min above 0: not found


def test_a_queue_in_one_consume_queue_file_is_corrected_within_it(tmp_path: Path) -> None:
    config = BrokerConfig(commitlog_file_size=4096, consume_queue_file_size=2000)  # 100 units a file
    clock, brokers, _ = _brokers(tmp_path, config)
    _send(clock, brokers, 30)
    clock.set(T0 + RESERVED + HOUR + 30_000)
    for b in brokers:
        b.tick()
    assert _same(brokers, lambda b: b.commitlog_min_offset()) == 2 * 4096
    # the queue's only consume-queue file points at or above the new min from its first kept record
    low = _first_kept(brokers[0], 2 * 4096)
    res = _same(brokers, lambda b: b.pull("G", MQ, 0))
    assert (res.status, res.next_begin_offset) == (PullStatus.OFFSET_ILLEGAL, low)
    for b in brokers:
        b.close()
        b.reopen()
    assert _same(brokers, lambda b: b.pull("G", MQ, low).messages[0].queue_offset) == low


def test_units_whose_records_are_gone_answer_removing(tmp_path: Path) -> None:
    """All of a queue's units point into deleted files and its consume-queue file is its last: the min
    stays (no unit in the first file qualifies) and a pull there answers MESSAGE_WAS_REMOVING."""
    brokers, u = _expired_queue_u(tmp_path, BrokerConfig(commitlog_file_size=4096, consume_queue_file_size=2000),
                                  units=3, after=30)
    res = _same(brokers, lambda b: b.pull("G", u, 0))
    assert (res.status, res.next_begin_offset, res.min_offset) == (PullStatus.NO_MATCHED_MSG, 3, 0)


def test_a_full_disk_refuses_puts_until_a_pass_finds_room(tmp_path: Path) -> None:
    clock, brokers, recorders = _brokers(tmp_path)
    _send(clock, brokers, 30)
    _at_disk(clock, brokers, 0.95, 60_000)
    refused = _same(brokers, lambda b: b.send(Message(topic="T", body=b"y", uniq_key="Y"), 0))
    assert refused[:2] == ("error", ResponseCode.SERVICE_NOT_AVAILABLE)
    assert _same(brokers, lambda b: b.commitlog_min_offset()) > 0  # every file but the last, at once
    assert _expires(recorders[0])[0][4]["cause"] == "forcibly"
    # a pull below the new min is still answered (PULL_OFFSET_MOVED): generateOffsetMovedEvent's put is
    # refused on the full disk and ignored
    moved = _same(brokers, lambda b: b.pull("G", MQ, 0))
    assert moved.status is PullStatus.OFFSET_ILLEGAL and moved.next_begin_offset > 0
    _at_disk(clock, brokers, 0.88, 10_000)  # between 0.85 and 0.90: the flag stays
    assert _same(brokers, lambda b: b.send(Message(topic="T", body=b"y", uniq_key="Y2"), 0))[0] == "error"
    _at_disk(clock, brokers, 0.5, 10_000)
    assert _same(brokers, lambda b: b.send(Message(topic="T", body=b"y", uniq_key="Y3"), 0).queue_offset) == 30


def test_a_delayed_copy_retention_took_is_skipped(tmp_path: Path) -> None:
    clock, brokers, recorders = _brokers(tmp_path)
    for b in brokers:
        b.send(Message(topic="T", body=b"d" * 200, uniq_key="D", delay_level=18), 0)  # 2 h
    _send(clock, brokers, 30)
    _at_disk(clock, brokers, 0.86, 60_000)
    _at_disk(clock, brokers, 0.0, 3 * HOUR)  # past its due time: it would have fired
    for rec in recorders:
        assert not [e for e in rec.events if e.event == "schedule_fire"]


def test_an_offset_whose_consume_queue_file_is_gone(tmp_path: Path) -> None:
    """Queue U's 12 units all point into deleted files: its first consume-queue file (10 units) goes, its
    last stays; no unit there reaches the commitlog's min, so the min stays 0 (also after a restart,
    which corrects from 0): offset 0 answers OFFSET_FOUND_NULL (PULL_NOT_FOUND, next = the next file's
    start), offset 10 MESSAGE_WAS_REMOVING (PULL_RETRY_IMMEDIATELY, next = past the gone units)."""
    brokers, u = _expired_queue_u(tmp_path, SMALL, units=12, after=40)
    for restart in (False, True):
        if restart:
            for b in brokers:
                b.close()
                b.reopen()
        gone = _same(brokers, lambda b: b.pull("G", u, 0))
        assert (gone.status, gone.next_begin_offset, gone.min_offset) == (PullStatus.NO_NEW_MSG, 10, 0)
        removing = _same(brokers, lambda b: b.pull("G", u, 10))
        assert (removing.status, removing.next_begin_offset) == (PullStatus.NO_MATCHED_MSG, 12)


def test_a_removed_unit_is_judged_after_the_tag_filter_and_skips_the_rest_of_its_file(tmp_path: Path) -> None:
    """DefaultMessageStore.getMessage's order (4.9.8 store jar): the tag filter first (NO_MATCHED_MESSAGE),
    then the commitlog read (MESSAGE_WAS_REMOVING, and the units after it in that commitlog file are skipped
    unjudged); without a message found the status is the last judged unit's reason (fidelity R6). Queue U:
    TagA and TagB in commitlog file 0, TagB in file 1, all deleted."""
    clock, brokers, _ = _brokers(tmp_path, BrokerConfig(commitlog_file_size=4096, consume_queue_file_size=2000))
    for b in brokers:
        b.create_topic("U", 1)

    def send_u(i: int, tag: str) -> None:
        for b in brokers:
            b.send(Message(topic="U", body=b"u", tags=tag, uniq_key=f"U{i}"), 0)

    send_u(0, "TagA")
    send_u(1, "TagB")
    _send(clock, brokers, 13)  # file 0 is full: U2 goes into file 1
    send_u(2, "TagB")
    _send(clock, brokers, 30)
    clock.set(T0 + RESERVED + HOUR + 30_000)
    for b in brokers:
        b.tick()
    model, mmap = brokers
    units = [r.commitlog_offset for r in model.store.records if r.topic == "U"]
    assert [u // 4096 for u in units] == [0, 0, 1] and model.commitlog_min_offset() > units[2]
    cases = [(0, "TagA", GetStatus.NO_MATCHED_MESSAGE),  # U0 removed (U1 skipped), U2 rejected by the tag
             (0, "TagB", GetStatus.MESSAGE_WAS_REMOVING),  # U0 rejected, U1 removed (U2: the next file, removed)
             (1, "TagA", GetStatus.NO_MATCHED_MESSAGE),  # both rejected before their records are read
             (0, "*", GetStatus.MESSAGE_WAS_REMOVING)]
    for offset, sub, status in cases:
        for get in (model.store.get_message, mmap.log.get_message):
            res = get("U", 0, offset, 32, tag_filter(sub), None)
            assert (res.status.name, res.next_begin_offset) == (status.name, 3), (offset, sub, get)


def test_a_commit_refused_by_the_full_disk_answers_service_not_available(tmp_path: Path) -> None:
    """EndTransactionProcessor.sendFinalMessage maps the store's SERVICE_NOT_AVAILABLE to SERVICE_NOT_AVAILABLE
    ("Service not available now.", 4.9.8's tableswitch read with javap; fidelity WR4), not MESSAGE_ILLEGAL; the
    half stays unresolved and commits once the disk has room."""
    clock, brokers, _ = _brokers(tmp_path)
    _send(clock, brokers, 30)
    halves = _same(brokers, lambda b: b.send_half(Message(topic="T", body=b"h", uniq_key="H"), 0, "PG"))
    _at_disk(clock, brokers, 0.95, 60_000)
    end = _same(brokers, lambda b: b.end_transaction("PG", halves.commitlog_offset, halves.queue_offset,
                                                     TxnAction.COMMIT, False))
    assert end is ResponseCode.SERVICE_NOT_AVAILABLE
    _at_disk(clock, brokers, 0.5, 10_000)
    assert _same(brokers, lambda b: b.end_transaction("PG", halves.commitlog_offset, halves.queue_offset,
                                                      TxnAction.COMMIT, False)) is ResponseCode.SUCCESS
