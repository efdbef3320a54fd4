"""consumeTimeout and cleanExpiredMsg in the conformance machine (issue 42).

Theory of operation
-------------------
``TimeoutRules`` (a mixin of ``ConformanceBase``) drives the concurrent consumer's clean task as RocketMQ
4.9.8's client runs it (``model/consumer_concurrent.py``: ``clean_expired``, ``CLEAN_EXPIRED_MAX``,
``CLEAN_EXPIRED_LEVEL``; ``ProcessQueue.expired_head``), for one listener that outlives consumeTimeout.
The ``consume_timeout`` action (it records itself; manual clock only, not under the strict profile, whose
duplicates fail):

1. a fresh message is sent to the picked concurrent group's first topic and pulled into the group's process
   queue; what is before it there is consumed (SUCCESS), so it is the first of the map;
2. its listener starts: CONSUME_START_TIME is set on it in the process queue (``start``);
3. the clock moves to the first clean past the timeout: the clean runs every consumeTimeout from the
   clients' last start (the example's start, or the latest ``recover``: the clients restart with the
   broker), and takes the first message of a queue when ``now − CONSUME_START_TIME > consumeTimeout``;
4. the clean (up to min(size, 16) turns) sends it back with delay level 3 and the client's max (16) — a
   ``send_back`` whose ``detail.clean_expired`` is true, with ``detail.consume_start`` and
   ``detail.consume_timeout_min`` — and removes it from the process queue without committing when the
   send-back succeeded and it is still the first; a message behind it that no listener has taken (no start
   time) stops the turn;
5. the listener then answers SUCCESS: a ``consume`` with ``detail.consume_start`` and ``detail.return_type``
   (TIME_OUT: it ran consumeTimeout or longer), and the usual commit;
6. the retry copy is due one level-3 delay after the clean: the clock moves there and the group consumes it
   (SUCCESS): a DUPLICATED observation whose audit reason names the consumeTimeout cause.

The clean's send-back is judged by ``inv_timeout.CleanAfterTimeoutProperty`` (RETRY_EARLY: never at or
before consumeTimeout after its consume start) and by ``traces/checks_retry.detect_clean_early``.

A broken client: ``conformance_machine(clean_timeout=…)`` (``runner.check_conformance`` passes it on) gives
the clean's period and threshold in ms from consumeTimeout's minutes; the default is 4.9.8's
(``minutes × 60 000``), a test's broken client reads the minutes as seconds. The rows state the configured
consumeTimeout (minutes), never the broken reading.

Where it runs: every example's prelude, after the broadcasting clients (``composite._prelude``).
Coverage: ``consume_timeout:started``, ``:clean_sent_back``, ``:clean_send_back_failed``, ``:time_out``,
``:retry_consumed``, ``:not_found``.
"""

from __future__ import annotations

from typing import Any

import attrs

from rmqspec.model.consumer import ConsumerConfig
from rmqspec.model.consumer_concurrent import (
    CLEAN_EXPIRED_LEVEL,
    CLEAN_EXPIRED_MAX,
    ConsumeConcurrentlyStatus,
    return_type,
)
from rmqspec.model.message import PROPERTY_CONSUME_START_TIMESTAMP, MessageQueue
from rmqspec.model.results import PullStatus, ResponseCode
from rmqspec.properties.history import retry_topic

CONSUME_TIMEOUT_MIN = ConsumerConfig().consume_timeout_min  # consumeTimeout, 15 (minutes)
CLEAN_MAX_RECONSUME = 16  # sendMessageBack(msg, 3) sends getMaxReconsumeTimes(): −1 → 16
ANSWER_MS = 1_000  # the listener answers this long after the clean


def clean_timeout_ms(minutes: int) -> int:
    """RocketMQ 4.9.8: ``scheduleAtFixedRate(cleanExpireMsg, consumeTimeout, consumeTimeout, MINUTES)`` and
    ``now − CONSUME_START_TIME > consumeTimeout * 60 * 1000``: the minutes in ms."""
    return minutes * 60_000


class TimeoutRules:
    """Mixin: a listener that outlives consumeTimeout (see the module docstring)."""

    def _timeout_ok(self) -> bool:
        return self._ladder_ok() and not self.profile.strict and bool(self._consumer_groups())

    def _clean_origin(self) -> int:
        """When the clients last started (their clean timer with them): the latest ``recover``, else the
        example's first event."""
        for ev in reversed(self.history.events):
            if ev.event == "recover":
                return ev.ts
        return self.history.events[0].ts if self.history.events else self._now()

    def _head_key(self, group: str, key: str, retry: bool) -> tuple[MessageQueue, Any] | None:
        """Pull ``group``'s queues until a copy of ``key`` (a retry copy with ``retry``) is in a process
        queue, consume what is before it (SUCCESS): (its queue, the copy), None if not found."""
        for mq in self._group_mqs(group):
            if retry != mq.topic.startswith("%RETRY%"):
                continue
            for _ in range(8):
                pq = self.pqs.get((group, mq))
                offsets = pq.offsets() if pq is not None else []
                index = next((i for i, o in enumerate(offsets) if pq.get(o).uniq_key == key), None)
                if index is not None:
                    if index > 0:
                        self._consume(group, mq, index, "SUCCESS", -1, 0, "none")
                    head = self.pqs[(group, mq)].head()
                    return (mq, head) if head is not None and head.uniq_key == key else None
                res = self._pull_into_pq(group, mq, 32)
                if res is None or res.status is not PullStatus.FOUND:
                    break
        return None

    def consume_timeout(self, group: int, queue: int) -> None:
        """A listener outlives consumeTimeout: the clean sends its message back, the listener answers
        SUCCESS (TIME_OUT), the retry copy is consumed again (see the module docstring)."""
        if not self._holds(self._timeout_ok):
            return self._idle("consume_timeout")
        self._record("consume_timeout", group=group, queue=queue)
        groups = self._consumer_groups()
        g = groups[group % len(groups)]
        topic = sorted(self.history.subscriptions[g])[0]
        msg = self._message(topic, "TagA")
        if self._send(msg, queue % self.topics[topic]) is None:
            return self._after()
        self._after()
        found = self._head_key(g, msg.uniq_key, retry=False)
        if found is None:
            self._sometimes("consume_timeout:not_found")
            return self._after()
        mq, m = found
        pq, client = self.pqs[(g, mq)], "consumer-" + g
        start = self._now()  # ConsumeRequest.run: CONSUME_START_TIME, then the listener
        m = attrs.evolve(m, properties={**m.properties, PROPERTY_CONSUME_START_TIMESTAMP: str(start)})
        pq.replace(m)
        self._sometimes("consume_timeout:started")
        timeout = type(self).clean_timeout_ms(CONSUME_TIMEOUT_MIN)
        origin = self._clean_origin()
        tick = origin + ((start - origin + timeout) // timeout + 1) * timeout  # the first clean past it
        self._advance(tick - self._now())
        self._after()
        self._clean(g, mq, timeout, client)
        self._advance(ANSWER_MS)
        kind = return_type(ConsumeConcurrentlyStatus.CONSUME_SUCCESS, None, self._now() - start, timeout)
        self._sometimes(f"consume_timeout:{kind.value.lower()}")
        self._emit("consume", actor=client, group=g, client_id=client, topic=m.topic, queue_id=m.queue_id,
                   queue_offset=m.queue_offset, msg_key=m.uniq_key, msg_id=m.msg_id,
                   reconsume_times=m.reconsume_times, status="SUCCESS",
                   detail={"listener": "SUCCESS", "consume_start": start, "return_type": kind.value})
        self._commit(g, mq, pq.remove_messages([m.queue_offset], self._now()), client)
        self._after()
        due = [d for t, d in self.expect_fire.items() if t[0] == retry_topic(g) and t[1] == msg.uniq_key]
        if due:
            self._advance(max(0, min(due) - self._now()))
            self._after()
            again = self._head_key(g, msg.uniq_key, retry=True)
            if again is not None:
                self._consume(g, again[0], 1, "SUCCESS", -1, 0, "none")
                self._sometimes("consume_timeout:retry_consumed")
        self._after()

    def _clean(self, group: str, mq: MessageQueue, timeout: int, client: str) -> None:
        """ProcessQueue.cleanExpiredMsg for one queue: up to min(size, 16) turns, while the first message has
        been in a listener for more than ``timeout``."""
        pq = self.pqs[(group, mq)]
        for _ in range(min(len(pq.offsets()), CLEAN_EXPIRED_MAX)):
            head = pq.expired_head(self._now(), timeout)
            if head is None:
                break
            code = self._send_back(group, head, CLEAN_EXPIRED_LEVEL, CLEAN_MAX_RECONSUME, client,
                                   extra={"clean_expired": True,
                                          "consume_start": int(head.get_property(PROPERTY_CONSUME_START_TIMESTAMP)),
                                          "consume_timeout_min": CONSUME_TIMEOUT_MIN})
            if code != ResponseCode.SUCCESS:
                self._sometimes("consume_timeout:clean_send_back_failed")
                continue
            self._sometimes("consume_timeout:clean_sent_back")
            first = pq.head()
            if first is not None and first.queue_offset == head.queue_offset:
                pq.remove_messages([head.queue_offset], self._now())
        self._after()
