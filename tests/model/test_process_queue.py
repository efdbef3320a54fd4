"""ProcessQueue: RocketMQ 4.9's removeMessage / commit rules and the offset invariant."""

from __future__ import annotations

import attrs
from hypothesis import given
from hypothesis import strategies as st

from rmqspec.model.message import StoredMessage
from rmqspec.model.process_queue import ProcessQueue


def msg(offset: int, topic: str = "T", queue_id: int = 0) -> StoredMessage:
    return StoredMessage(
        msg_id=f"{offset:032X}", uniq_key=f"{offset + 1:032X}", topic=topic, queue_id=queue_id,
        queue_offset=offset, commitlog_offset=offset * 100, body=b"x", tags=None, keys=(),
        properties={}, reconsume_times=0, born_ts=0, store_ts=0, sys_flag=0,
        prepared_txn_offset=0,
    )


def test_remove_from_empty_map_returns_minus_one():
    pq = ProcessQueue()
    assert pq.remove_messages([3]) == -1


def test_remove_returns_smallest_remaining_offset():
    pq = ProcessQueue()
    pq.put_messages([msg(o) for o in (5, 6, 7, 8)])
    assert pq.remove_messages([6, 8]) == 5
    assert pq.remove_messages([5]) == 7


def test_remove_last_returns_queue_offset_max_plus_one():
    pq = ProcessQueue()
    pq.put_messages([msg(o) for o in (10, 11, 12)])
    assert pq.remove_messages([12]) == 10
    assert pq.remove_messages([10, 11]) == 13
    # the map is empty now: −1, and queue_offset_max is not lowered
    assert pq.remove_messages([11]) == -1
    assert pq.queue_offset_max == 12


def test_queue_offset_max_ignores_redelivered_offsets():
    pq = ProcessQueue()
    pq.put_messages([msg(1), msg(2)])
    pq.put_messages([msg(1)])  # already present: putMessage does not move queueOffsetMax
    assert pq.queue_offset_max == 2


def test_put_dispatches_once_until_take_finds_nothing():
    pq = ProcessQueue()
    assert pq.put_messages([msg(0)]) is True
    assert pq.put_messages([msg(1)]) is False
    assert [m.queue_offset for m in pq.take_messages(5)] == [0, 1]
    assert pq.take_messages(5) == []
    assert pq.consuming is False
    assert pq.put_messages([msg(2)]) is True


def test_orderly_commit_is_last_of_consuming_batch_plus_one():
    pq = ProcessQueue()
    pq.put_messages([msg(o) for o in (3, 4, 5, 6)])
    taken = pq.take_messages(2)
    assert [m.queue_offset for m in taken] == [3, 4]
    assert pq.lowest_unacknowledged() == 3
    assert pq.commit() == 5
    assert pq.commit() == -1
    assert pq.msg_count == 2


def test_consume_again_returns_updated_copies_to_the_map():
    pq = ProcessQueue()
    pq.put_messages([msg(0), msg(1)])
    taken = pq.take_messages(1)
    import attrs

    again = [attrs.evolve(taken[0], reconsume_times=1)]
    pq.make_messages_to_consume_again(again)
    assert pq.consuming_offsets() == []
    assert pq.get(0).reconsume_times == 1
    assert [m.queue_offset for m in pq.take_messages(2)] == [0, 1]
    pq.rollback()
    assert pq.offsets() == [0, 1]


def test_lock_expiry_is_strictly_older_than_max_live():
    pq = ProcessQueue(created_at=0)
    pq.last_lock_timestamp = 1000
    assert not pq.is_lock_expired(31_000)
    assert pq.is_lock_expired(31_001)


@st.composite
def pulls(draw):
    """Strictly increasing offsets with gaps (filtered messages), cut into pull batches."""
    gaps = draw(st.lists(st.integers(1, 3), min_size=1, max_size=40))
    offsets, o = [], draw(st.integers(0, 5))
    for g in gaps:
        offsets.append(o)
        o += g
    cuts = sorted(set(draw(st.lists(st.integers(1, len(offsets)), max_size=6))))
    batches, start = [], 0
    for c in [*cuts, len(offsets)]:
        if c > start:
            batches.append(offsets[start:c])
            start = c
    return batches


@given(pulls(), st.data())
def test_commit_offset_never_passes_an_unacknowledged_message(batches, data):
    """SPEC §4.2 invariant over random pull batches and random ack orders.

    Some messages are never acknowledged (a failed send-back keeps them in the
    ProcessQueue); the increase-only commit must stay at or below each of them.
    """
    pq = ProcessQueue()
    committed = -1
    pending_batches = list(batches)
    held: list[int] = []
    never_acked = set(data.draw(st.sets(st.sampled_from([o for b in batches for o in b]))))
    while pending_batches or any(o not in never_acked for o in held):
        ackable = [o for o in held if o not in never_acked]
        if pending_batches and (not ackable or data.draw(st.booleans())):
            batch = pending_batches.pop(0)
            pq.put_messages([msg(o) for o in batch])
            held.extend(batch)
            continue
        chosen = data.draw(st.lists(st.sampled_from(ackable), min_size=1, unique=True))
        result = pq.remove_messages(chosen)
        held = [o for o in held if o not in chosen]
        if result >= 0:
            committed = max(committed, result)  # increase-only
        if held:
            assert committed <= min(held), (committed, held)
    all_offsets = [o for b in batches for o in b]
    if not never_acked:
        assert committed == all_offsets[-1] + 1
    else:
        assert committed <= min(never_acked)


# ---------------------------------------------------------------------------
# msgSize (seed row E9): body bytes, as ProcessQueue counts them in 4.9.8 (javap -c)


def sized(offset: int, n: int) -> StoredMessage:
    return attrs.evolve(msg(offset), body=bytes(n))


def test_msg_size_counts_bodies_of_new_offsets_only():
    pq = ProcessQueue()
    pq.put_messages([sized(0, 10), sized(1, 20)])
    assert pq.msg_size == 30
    pq.put_messages([sized(1, 500), sized(2, 5)])  # offset 1 again: replaced, not counted (putMessage)
    assert pq.msg_size == 35 and pq.msg_count == 3


def test_msg_size_falls_with_removals_and_is_zero_when_the_count_is():
    pq = ProcessQueue()
    pq.put_messages([sized(0, 10), sized(1, 20), sized(2, 30)])
    pq.remove_messages([1, 7])  # 7 was not held: nothing taken off for it
    assert pq.msg_size == 40
    pq.remove_messages([0, 2])
    assert pq.msg_size == 0 and pq.msg_size_mib == 0
    assert pq.remove_messages([0]) == -1 and pq.msg_size == 0  # an empty map: untouched


def test_orderly_take_and_rollback_keep_the_size_commit_takes_it_off():
    pq = ProcessQueue()
    pq.put_messages([sized(0, 10), sized(1, 20), sized(2, 30)])
    pq.take_messages(2)
    assert pq.msg_size == 60  # the consuming batch is still cached
    pq.rollback()
    assert pq.msg_size == 60
    pq.take_messages(2)
    assert pq.commit() == 2 and pq.msg_size == 30
    pq.take_messages(1)
    assert pq.commit() == 3 and pq.msg_size == 0
    pq.put_messages([sized(5, 7)])
    pq.clear()
    assert pq.msg_size == 0


@given(st.lists(st.tuples(st.sampled_from(["put", "remove", "take", "commit", "rollback"]),
                          st.lists(st.integers(0, 6), max_size=4)), max_size=25))
def test_msg_size_is_the_cached_bodies_while_any_message_is_cached(ops):
    """Every path keeps msgSize equal to the bodies held (map and consuming batch). Puts skip offsets in the
    consuming batch: the pull loop never brings those back, and 4.9.8 would count such a one twice (its
    msgCount too, which the model derives from the maps)."""
    pq = ProcessQueue()
    for op, offsets in ops:
        if op == "put":
            pq.put_messages([sized(o, 3 + o) for o in offsets if o not in pq.consuming_offsets()])
        elif op == "remove":
            pq.remove_messages(offsets)
        elif op == "take":
            pq.take_messages(len(offsets))
        elif op == "commit" and pq.consuming_offsets():
            pq.commit()
        elif op == "rollback":
            pq.rollback()
        held = pq.offsets() + pq.consuming_offsets()
        assert pq.msg_size == sum(3 + o for o in held)
