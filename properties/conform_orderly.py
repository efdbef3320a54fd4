"""The orderly consumer of the conformance machine: locks, batches, SUSPEND, DLQ.

Theory of operation
-------------------
``OrderlyRules`` (a mixin of ``ConformanceBase``) plays group ``OG``'s clients ``c1``–``c3``
on topic T0's queues. ``_lock`` / ``_unlock`` call LOCK_BATCH_MQ / UNLOCK_BATCH_MQ and keep two
views: the broker grants the machine saw (``broker_grants``: holder and last grant or renewal)
and each client's own lock time (``client_lock``: the client trusts a lock for
``CLIENT_LOCK_MS``, 30 s). A batch (``_begin``) starts only under the client's own unexpired
lock and opens a ``Window``; ``_finish`` ends it with SUCCESS (commit) or SUSPEND (the batch is
consumed again; at the group's limit it is sent back with level −1, to the DLQ, and committed).
An unlock's reply carries nothing: ``orderly_unlock`` probes the lock table afterwards
(``edges._probe_lock``). ``orderly_takeover`` lets a grant expire on the broker and another
client take the queue; the ``orderly`` rule draws lock, unlock, rebalance, takeover or a batch.

A window outlives the broker lock only in ``_outlive`` (manual clock; the orderly ladder's long
listener, ``composite.py``): the clock passes the grant's lifetime and another client takes the
queue and starts inside the window, as 4.9.8 permits (seed 001, B12). Otherwise clock jumps are
clamped while a window is open (``conform_time._advance``): the SPEC §4.5 premise.

``orderly_client`` (an ``OrderlyClient``, ``conformance_machine(orderly_client=)``) is the client the
machine plays: 4.9.8's by default; a test's broken client of our own changes what happens at one point
and draws nothing more (issue 42).
"""

from __future__ import annotations

import attrs
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from rmqspec.model.message import MessageQueue
from rmqspec.model.process_queue import ProcessQueue
from rmqspec.model.results import PullStatus, ResponseCode
from rmqspec.properties.conform_base import CLIENTS, PICK, Window, _enabled, _pick


@attrs.frozen
class OrderlyClient:
    """The orderly consumer the machine plays; the default is RocketMQ 4.9.8's.

    ``local_queue_lock``: a consume request holds the client's MessageQueueLock (lock 2,
    ``ConsumeMessageOrderlyService``) for its queue, so one thread of a consumer consumes a queue at a
    time: the machine opens one window per (client, queue) (``_can_begin``). False is a broken client of
    our own without it: while the long listener's batch runs (``_outlive``) another consume request of
    the same client takes the queue's next message and its batch starts and ends inside the window
    (ORDERLY_CONCURRENT; issue 42's orderly bullet, tests/properties/test_orderly_client_broken.py)."""

    local_queue_lock: bool = True


CLIENT_4_9_8 = OrderlyClient()  # the default of conformance_machine and check_conformance


class OrderlyRules:
    """Mixin: the orderly consumer and the broker's lock table."""

    orderly_client: OrderlyClient = CLIENT_4_9_8  # conformance_machine(orderly_client=)

    # ------------------------------------------------------------------
    # orderly consumer

    def _orderly_mqs(self) -> list[MessageQueue]:
        return [MessageQueue(self.t0, q) for q in range(self.topics[self.t0])]

    def _lock(self, client: str, mqs: list[MessageQueue]) -> frozenset[MessageQueue]:
        if type(self).wall is not None and self._wall_quiet(lock_op=True):
            self._wall_tick()
        out = self._call(f"lock_batch({self.og!r}, {client!r}, {[m.queue_id for m in mqs]})",
                         lambda b: b.lock_batch(self.og, client, mqs))
        granted = out.value if out.error is None else frozenset()
        now = self._now()
        for mq in sorted(set(mqs)):
            ok = mq in granted
            prev = self.broker_grants.get(mq)
            if ok and prev and prev[0] != client:
                self._sometimes("lock_takeover_after_expiry")
            self._sometimes("lock:GRANTED" if ok else "lock:DENIED")
            self._emit("lock", actor="broker", group=self.og, client_id=client, topic=mq.topic,
                       queue_id=mq.queue_id, status="GRANTED" if ok else "DENIED")
            if ok:
                if prev and prev[0] == client:
                    self._sometimes("lock_renewed")
                self.broker_grants[mq] = (client, now)
                self.client_lock[(client, mq)] = now
                for other in CLIENTS:
                    if other != client and (other, mq) in self.client_lock and \
                            (other, mq) not in self.windows:
                        # the other client lost the queue in a rebalance: drop its process queue
                        self.opqs.pop((other, mq), None)
                    elif other != client and (other, mq) in self.windows:
                        # its batch holds the consume lock: the rebalance keeps the queue (tryLock fails), but
                        # has marked its process queue dropped (updateProcessQueueTableInRebalance sets it before
                        # removeUnnecessaryMessageQueue): no batch runs from it again (``_begin``)
                        self._sometimes("rebalance_kept_in_batch")
                        pq = self.opqs.get((other, mq))
                        if pq is not None:
                            pq.dropped = True
        return granted

    def _unlock(self, client: str, mqs: list[MessageQueue]) -> None:
        self._call(f"unlock_batch({self.og!r}, {client!r}, {[m.queue_id for m in mqs]})",
                   lambda b: b.unlock_batch(self.og, client, mqs))
        for mq in sorted(set(mqs)):
            self._emit("unlock", actor=client, group=self.og, client_id=client,
                       topic=mq.topic, queue_id=mq.queue_id)
            self.client_lock.pop((client, mq), None)
            self.opqs.pop((client, mq), None)
            if self.broker_grants.get(mq, (None,))[0] == client:
                del self.broker_grants[mq]

    def _mask(self, mask: int) -> list[MessageQueue]:
        mqs = self._orderly_mqs()
        chosen = [mq for i, mq in enumerate(mqs) if mask >> i & 1]
        return chosen or mqs[:1]

    def orderly_lock(self, client: int, mask: int) -> None:
        self._record("orderly_lock", client=client, mask=mask)
        self._lock(_pick(CLIENTS, client), self._mask(mask))
        self._after()

    def orderly_unlock(self, client: int, mask: int) -> None:
        self._record("orderly_unlock", client=client, mask=mask)
        c = _pick(CLIENTS, client)
        mqs = [mq for mq in self._mask(mask) if (c, mq) not in self.windows]
        if mqs:
            self._unlock(c, mqs)
            for mq in mqs:  # the reply carries nothing: what the unlock did, the lock table shows
                self._probe_lock(mq)
        self._after()

    def orderly_rebalance(self, mq: int, to: int) -> None:
        """The queue moves to another client: the holder unlocks, the new owner locks."""
        self._record("orderly_rebalance", mq=mq, to=to)
        q = _pick(self._orderly_mqs(), mq)
        target = _pick(CLIENTS, to)
        holder = self.broker_grants.get(q, (None,))[0]
        if holder and holder != target and (holder, q) not in self.windows:
            self._unlock(holder, [q])
            self._sometimes("rebalance_moved")
        self._lock(target, [q])
        self._after()

    def _client_holds(self, client: str, mq: MessageQueue) -> bool:
        ts = self.client_lock.get((client, mq))
        return ts is not None and self._now() - ts <= self.client_lock_ms

    def _can_begin(self) -> list[tuple[str, MessageQueue]]:
        open_mqs = {mq for (_, mq) in self.windows}
        return [(c, mq) for c in CLIENTS for mq in self._orderly_mqs()
                if mq not in open_mqs and self._client_holds(c, mq)]

    def _begin(self, client: str, mq: MessageQueue, n: int) -> bool:
        key = (client, mq)
        pq = self.opqs.get(key)
        if pq is None or pq.dropped:  # a queue that comes back gets a new process queue, from the broker's offset
            pq = self.opqs[key] = ProcessQueue(self._now())
            pq.next_offset = self._start_offset(self.og, mq)  # type: ignore[attr-defined]
        for _ in range(2):  # a pull below what retention kept answers where to go: pull again from there
            if pq.has_temp_message():
                break
            res = self._pull(self.og, mq, pq.next_offset, 8, client)  # type: ignore[attr-defined]
            if res is not None and res.status is PullStatus.FOUND:
                pq.put_messages(res.messages)
                pq.next_offset = res.next_begin_offset  # type: ignore[attr-defined]
            elif res is not None and res.next_begin_offset > pq.next_offset:  # type: ignore[attr-defined]
                pq.next_offset = res.next_begin_offset  # type: ignore[attr-defined]  # past what retention took
            else:
                break
        batch = pq.take_messages(n, self._now())
        if not batch:
            return False
        self._emit("orderly_start", actor=client, group=self.og, client_id=client,
                   topic=mq.topic, queue_id=mq.queue_id, queue_offset=batch[0].queue_offset,
                   detail={"offsets": [m.queue_offset for m in batch]})
        self.windows[key] = Window(client, mq, batch, self.client_lock[key])
        return True

    @precondition(lambda self: self._on("orderly"))
    @_enabled(lambda self: self._can_begin())
    @rule(which=PICK, n=st.integers(1, 3))
    def orderly_begin(self, which: int, n: int) -> None:
        if not self._holds(lambda: self._can_begin()):
            return self._idle('orderly_begin')
        self._record("orderly_begin", which=which, n=n)
        client, mq = _pick(self._can_begin(), which)
        self._begin(client, mq, n)
        self._after()

    def _finish(self, key: tuple[str, MessageQueue], result: str) -> None:
        w = self.windows.pop(key)
        pq = self.opqs.get(key)
        group = self.og
        limit = self.groups[group].retry_max
        status = "SUCCESS"
        if result == "SUSPEND":
            over = any(self.orderly_failures[(m.commitlog_offset,)] >= limit for m in w.batch)
            for m in w.batch:
                self._emit("consume", actor=w.client, group=group, client_id=w.client,
                           topic=m.topic, queue_id=m.queue_id, queue_offset=m.queue_offset,
                           msg_key=m.uniq_key, msg_id=m.msg_id,
                           reconsume_times=m.reconsume_times, status="RECONSUME_LATER")
            # limit reached: send back (the broker routes it to the DLQ), then commit; a send-back the
            # broker refuses suspends the batch instead (checkReconsumeTimes: sendMessageBack false)
            dead = over and all([self._send_back(group, m, -1, None, w.client) == ResponseCode.SUCCESS
                                 for m in w.batch])  # a list: every message is sent back, as 4.9.8 does
            if dead:
                self._sometimes("orderly_dlq")
                status = "DLQ"
            else:
                if over:
                    self._sometimes("orderly_dlq_refused")
                for m in w.batch:
                    self.orderly_failures[(m.commitlog_offset,)] += 1
                if pq is not None:
                    pq.make_messages_to_consume_again(w.batch)
                self._sometimes("orderly_suspend")
                self._emit("orderly_end", actor=w.client, group=group, client_id=w.client,
                           topic=w.mq.topic, queue_id=w.mq.queue_id, status="SUSPEND")
                return
        else:
            for m in w.batch:
                self._emit("consume", actor=w.client, group=group, client_id=w.client,
                           topic=m.topic, queue_id=m.queue_id, queue_offset=m.queue_offset,
                           msg_key=m.uniq_key, msg_id=m.msg_id, reconsume_times=m.reconsume_times,
                           status="SUCCESS")
        offset = pq.commit() if pq is not None else w.batch[-1].queue_offset + 1
        self._emit("orderly_end", actor=w.client, group=group, client_id=w.client,
                   topic=w.mq.topic, queue_id=w.mq.queue_id, status=status)
        self._commit(group, w.mq, offset, w.client)

    @precondition(lambda self: self._on("orderly"))
    @_enabled(lambda self: self.windows)
    @rule(which=PICK, result=st.sampled_from(["SUCCESS", "SUCCESS", "SUSPEND"]))
    def orderly_finish(self, which: int, result: str) -> None:
        if not self._holds(lambda: self.windows):
            return self._idle('orderly_finish')
        self._record("orderly_finish", which=which, result=result)
        key = _pick(sorted(self.windows, key=lambda k: (k[0], k[1].queue_id)), which)
        self._finish(key, result)
        self._after()

    def orderly_takeover(self, mq: int, to: int) -> None:
        """Let a held lock expire on the broker (60 s + 1 ms), then another client locks it."""
        self._record("orderly_takeover", mq=mq, to=to)
        held = sorted((q for q in self.broker_grants if not any(k[1] == q for k in self.windows)),
                      key=lambda q: q.queue_id)
        if held:
            q = _pick(held, mq)
            holder, ts = self.broker_grants[q]
            target = ts + self.config.broker_lock_max_live_ms + 1
            if type(self).wall is not None:
                self._wall_sleep(target + type(self).wall.tolerance_ms)
            elif target > self._now():
                self._advance(target - self._now())
            others = [c for c in CLIENTS if c != holder]
            self._lock(_pick(others, to), [q])
        self._after()

    def _outlive(self, key: tuple[str, MessageQueue], other: str) -> bool:
        """The batch of window ``key``: its listener (or a GC pause) outlives the broker lock (seed 001,
        B12). 4.9.8 checks the lock only before a batch, so the batch runs on while the broker's grant
        lapses; ``other`` is lawfully granted the queue and starts a batch inside the window (the audit's
        observation ORDERLY_LOCK_OUTLIVED). Manual clock only: the clock passes the grant's lifetime
        unclamped. True when ``other`` started."""
        if not self.orderly_client.local_queue_lock:
            self._second_batch(key)
        w = self.windows[key]
        granted_at = self.broker_grants.get(w.mq, (w.client, w.lock_ts))[1]
        target = granted_at + self.config.broker_lock_max_live_ms + 1
        if target > self._now():
            self._advance(target - self._now(), clamp=False)
        started = w.mq in self._lock(other, [w.mq]) and (other, w.mq) not in self.windows \
            and self._begin(other, w.mq, 1)
        if started:
            self._sometimes("orderly_lock_outlived")
        return started

    def _second_batch(self, key: tuple[str, MessageQueue]) -> None:
        """The broken client without a MessageQueueLock (``OrderlyClient.local_queue_lock`` False):
        while window ``key``'s listener runs, another consume request of the same client takes the
        queue's next message (a fresh one) and its batch starts and ends inside the window."""
        first = self.windows.pop(key)
        if self._fresh("plain", key[1].topic, key[1].queue_id) is not None and self._begin(*key, 1):
            self._sometimes("orderly_second_batch")
            self._finish(key, "SUCCESS")
        self.windows[key] = first

    @precondition(lambda self: self._on("orderly"))
    @rule(kind=st.sampled_from(["lock", "lock", "unlock", "rebalance", "takeover", "finish"]), client=PICK,
          mask=st.integers(1, 15))
    def orderly(self, kind: str, client: int, mask: int) -> None:
        if kind == "finish" and self.windows:
            self.orderly_finish(client, "SUSPEND" if mask % 3 == 0 else "SUCCESS")
        elif kind == "finish":  # no batch in flight: the consume service locks if it must, then starts one
            if not self._can_begin():
                self.orderly_lock(client, mask)
            if self._can_begin():
                self.orderly_begin(client, 1 + mask % 3)
        elif kind == "lock":
            self.orderly_lock(client, mask)
        elif kind == "unlock":
            self.orderly_unlock(client, mask)
        elif kind == "takeover":
            self.orderly_takeover(mask, client)
        else:
            self.orderly_rebalance(mask, client)
