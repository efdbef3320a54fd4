"""The client's per-queue snapshot of pulled, not yet acknowledged messages.

Theory of operation
-------------------
Follows RocketMQ 4.9 ``C/impl/consumer/ProcessQueue``. A ProcessQueue is a
sorted map ``queue offset → message`` of messages pulled from one
MessageQueue and not yet acknowledged, plus (orderly consumption only) the
``consuming`` sub-map of the batch currently handed to the listener.

The commit rule is ``remove_messages`` (``removeMessage``): it returns −1
when the map was empty on entry; otherwise, after removing the acknowledged
offsets, the smallest offset still in the map, or ``queue_offset_max + 1``
when the map became empty. The consumer commits that value increase-only
(``OffsetStore.updateOffset(mq, offset, true)``). Because every
unacknowledged message stays in the map until it is acknowledged (success,
sent back, or dropped in broadcasting mode), the returned offset never passes
one: ``committable_bound()`` is the property the tests check.

``queue_offset_max`` is the offset of the last message *newly* put
(``putMessage`` only updates it for offsets not already present) and is not
lowered by removals — exactly RocketMQ's behaviour.

``expired_head`` is the test of ``cleanExpiredMsg`` (concurrent consumption only): the first
message of the map, when its ``CONSUME_START_TIME`` property (set by the consume request that
handed it to the listener) is more than ``consumeTimeout`` old. The consumer sends it back with
delay level 3 and, when the send-back succeeded and it is still the first, removes it without
committing (``model/consumer_concurrent.py``).

``consume_lock_held`` is ``consumeLock`` (orderly only): set while the listener
runs, tried by ``removeUnnecessaryMessageQueue``; ``try_unlock_times`` counts the
tries that found it held.

``msg_size`` is ``msgSize``, the cached bytes the pull loop's size guard reads (in whole MiB,
``msg_size // MIB``): RocketMQ 4.9.8 counts the body only (``getBody().length``, the body as the
client's decoder handed it on: uncompressed), added by ``putMessage`` for an offset not already in the
map and taken off by ``removeMessage`` for each offset it removed; when the count then reaches 0 the
size is set to 0; ``commit`` (orderly) sets it to 0 when no message is left, else takes off the
consuming batch's bodies; ``clear`` sets it to 0. ``takeMessages``, ``rollback`` and
``makeMessageToConsumeAgain`` leave it alone (the batch is still cached). ``removeMessage`` subtracts
the body of the message it was given; the model takes the removed entry's, the same body.

Simplifications: no other locks (the model client is single-threaded). The lock
and pull timestamps take ``now`` explicitly instead of reading the system
clock.
"""

from __future__ import annotations

from collections.abc import Iterable

from rmqspec.model.message import PROPERTY_CONSUME_START_TIMESTAMP, StoredMessage

LOCK_MAX_LIVE_MS = 30_000  # rocketmq.client.rebalance.lockMaxLiveTime
LOCK_INTERVAL_MS = 20_000  # rocketmq.client.rebalance.lockInterval
PULL_MAX_IDLE_MS = 120_000  # rocketmq.client.pull.pullMaxIdleTime
MIB = 1024 * 1024  # pullMessage reads msgSize / (1024 * 1024), a whole number of MiB


class ProcessQueue:
    """Pulled-but-unacknowledged messages of one queue (see module docstring)."""

    def __init__(self, created_at: int = 0) -> None:
        self._msgs: dict[int, StoredMessage] = {}
        self._consuming: dict[int, StoredMessage] = {}
        self.queue_offset_max = 0
        self.dropped = False
        self.locked = False
        self.consuming = False
        self.last_lock_timestamp = created_at
        self.last_pull_timestamp = created_at
        self.last_consume_timestamp = created_at
        self.try_unlock_times = 0
        self.consume_lock_held = False  # consumeLock: held while an orderly listener runs
        self.msg_size = 0  # msgSize: cached body bytes (module docstring)

    # -- reading -------------------------------------------------------
    @property
    def msg_count(self) -> int:
        """Messages held, the consuming batch included (RocketMQ's msgCount)."""
        return len(self._msgs) + len(self._consuming)

    @property
    def msg_size_mib(self) -> int:
        """``msgSize / (1024 * 1024)``: what pullMessage compares with pullThresholdSizeForQueue."""
        return self.msg_size // MIB

    def offsets(self) -> list[int]:
        """Offsets waiting in the map (not the consuming batch), ascending."""
        return sorted(self._msgs)

    def consuming_offsets(self) -> list[int]:
        return sorted(self._consuming)

    def get(self, offset: int) -> StoredMessage | None:
        return self._msgs.get(offset, self._consuming.get(offset))

    def contains(self, offset: int) -> bool:
        return offset in self._msgs

    def has_temp_message(self) -> bool:
        return bool(self._msgs)

    def max_span(self) -> int:
        if not self._msgs:
            return 0
        return max(self._msgs) - min(self._msgs)

    def lowest_unacknowledged(self) -> int | None:
        """The smallest offset held (map or consuming batch), or None."""
        held = list(self._msgs) + list(self._consuming)
        return min(held) if held else None

    def head(self) -> StoredMessage | None:
        """The first message of the map (``msgTreeMap.firstEntry()``), or None."""
        return self._msgs[min(self._msgs)] if self._msgs else None

    def expired_head(self, now: int, timeout_ms: int) -> StoredMessage | None:
        """``cleanExpiredMsg``'s test: the first message, when a listener got it more than
        ``timeout_ms`` ago (``now − CONSUME_START_TIME > consumeTimeout``); else None."""
        head = self.head()
        start = head.get_property(PROPERTY_CONSUME_START_TIMESTAMP) if head is not None else None
        if not start or now - int(start) <= timeout_ms:
            return None
        return head

    def is_lock_expired(self, now: int, max_live_ms: int = LOCK_MAX_LIVE_MS) -> bool:
        """``now − lastLockTimestamp > lockMaxLiveTime`` (client side, 30 s)."""
        return now - self.last_lock_timestamp > max_live_ms

    def is_pull_expired(self, now: int, max_idle_ms: int = PULL_MAX_IDLE_MS) -> bool:
        return now - self.last_pull_timestamp > max_idle_ms

    # -- writing -------------------------------------------------------
    def put_messages(self, msgs: Iterable[StoredMessage]) -> bool:
        """``putMessage``: add; True when the caller must dispatch a consume request.

        Dispatch is requested when the map is non-empty and no consume request
        is running (orderly consumption uses it; concurrent ignores it).
        """
        for msg in msgs:
            if msg.queue_offset not in self._msgs:
                self.queue_offset_max = msg.queue_offset
                self.msg_size += len(msg.body)
            self._msgs[msg.queue_offset] = msg
        if self._msgs and not self.consuming:
            self.consuming = True
            return True
        return False

    def remove_messages(self, offsets: Iterable[int], now: int | None = None) -> int:
        """``removeMessage``: the offset to commit (see module docstring)."""
        if now is not None:
            self.last_consume_timestamp = now
        if not self._msgs:
            return -1
        for offset in offsets:
            removed = self._msgs.pop(offset, None)
            if removed is not None:
                self.msg_size -= len(removed.body)
        if self.msg_count == 0:
            self.msg_size = 0
        if self._msgs:
            return min(self._msgs)
        return self.queue_offset_max + 1

    def replace(self, msg: StoredMessage) -> None:
        """Swap in an updated copy (e.g. in-memory reconsume_times + 1) at its offset."""
        if msg.queue_offset in self._msgs:
            self._msgs[msg.queue_offset] = msg
        elif msg.queue_offset in self._consuming:
            self._consuming[msg.queue_offset] = msg

    # -- orderly -------------------------------------------------------
    def take_messages(self, batch_size: int, now: int | None = None) -> list[StoredMessage]:
        """``takeMessages``: move the first ``batch_size`` entries to the consuming batch.

        An empty result clears ``consuming`` so the next put dispatches again.
        """
        if now is not None:
            self.last_consume_timestamp = now
        taken: list[StoredMessage] = []
        for offset in sorted(self._msgs)[:batch_size]:
            msg = self._msgs.pop(offset)
            self._consuming[offset] = msg
            taken.append(msg)
        if not taken:
            self.consuming = False
        return taken

    def commit(self) -> int:
        """``commit``: forget the consuming batch; its last offset + 1, or −1 if empty."""
        if not self._consuming:
            return -1
        last = max(self._consuming)
        if self.msg_count == len(self._consuming):
            self.msg_size = 0
        else:
            self.msg_size -= sum(len(m.body) for m in self._consuming.values())
        self._consuming.clear()
        return last + 1

    def rollback(self) -> None:
        """Put the consuming batch back into the map."""
        self._msgs.update(self._consuming)
        self._consuming.clear()

    def make_messages_to_consume_again(self, msgs: Iterable[StoredMessage]) -> None:
        """``makeMessageToConsumeAgain``: these messages (updated copies) go back to the map."""
        for msg in msgs:
            self._consuming.pop(msg.queue_offset, None)
            self._msgs[msg.queue_offset] = msg

    def clear(self) -> None:
        self._msgs.clear()
        self._consuming.clear()
        self.queue_offset_max = 0
        self.msg_size = 0

    def __repr__(self) -> str:
        return (
            f"ProcessQueue(msgs={self.offsets()}, consuming={self.consuming_offsets()}, "
            f"max={self.queue_offset_max}, size={self.msg_size}, dropped={self.dropped}, locked={self.locked})"
        )
