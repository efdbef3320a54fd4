"""The broadcasting consumer of the conformance machine (issue 42).

Theory of operation
-------------------
``BroadcastRules`` (a mixin of ``ConformanceBase``) plays group ``GB`` in RocketMQ 4.9.8's broadcasting
mode (``MessageModel.BROADCASTING``) with up to two clients, ``b1`` and ``b2``, subscribed to every user
topic with ``*``. To the broker a broadcasting client is only a puller of its group that pulls from its
own offsets, so the two clients pull the same queues independently and each must get every message:

- **join** (``_bc_join``): the group is created at the first action, a client heartbeats when it joins
  and again after every broker restart (the consumer table is in memory); every queue it has no offset
  for starts at the broker's max offset — no offsets file: CONSUME_FROM_LAST_OFFSET
  (``RebalancePushImpl.computePullFromWhere``) — asked as the reference client asks (a pull far past
  the end, ``model/consumer.py`` ``max_offset``) and written as a ``commit_offset`` with
  ``detail.from_where`` (where the client's run starts);
- **pull** (``_bc_pull``): from the client's next offset, with ``*``; FOUND fills its process queue;
  NO_NEW_MSG / NO_MATCHED_MSG with an empty process queue moves its offset to the answer's next begin;
  OFFSET_ILLEGAL (a power loss truncated the queue below the client's offset) sets it there and drops
  the process queue (``PullAPIWrapper`` / ``DefaultMQPushConsumerImpl``'s offset fix);
- **consume** (``_bc_consume``): a batch with SUCCESS or RECONSUME_LATER — both remove the messages
  (``ConsumeMessageConcurrentlyService.processConsumeResult``: a broadcasting client logs a failed
  message and drops it, no send-back) — then the lowest unconsumed offset is written to the client's
  offsets file (``LocalFileOffsetStore``): a ``commit_offset`` row, never an UPDATE_CONSUMER_OFFSET.

Every row (``deliver``, ``consume``, ``commit_offset``) names the client and carries
``detail.message_model: BROADCASTING``, as the reference client's do; the invariants judge them per
client (``inv_broadcast.py``: NoLossPerClientProperty; OFFSET_OVERRUN and DUPLICATED per client). As the
machine's other clients, a broadcasting client restarts with the broker (its process queues go; its
offsets file stays, so it resumes where it committed).

Where it runs: ``broadcast`` is an action (it records itself) the prelude runs in every example (a client
joins, a message is sent, the other joins after it, another message, each consumes it: the second of
them pulls an offset the group already got), every tenth beat runs after its consume, and the drain
consumes both clients' queues to their ends. Manual clock only (on the wall clock it idles).
Coverage: ``broadcast:joined``, ``broadcast:late_join`` (a client that owes nothing sent before it
joined), ``broadcast:<pull status>``, ``broadcast:dropped`` (a failed message), ``broadcast:both_consumed``
(a message both clients consumed).
"""

from __future__ import annotations

from typing import Any

import attrs

from rmqspec.model.message import MessageQueue, StoredMessage
from rmqspec.model.process_queue import ProcessQueue
from rmqspec.model.results import PullResult, PullStatus
from rmqspec.properties.conform_base import CONSUME_TIMEOUT_ROUNDS, _pick
from rmqspec.properties.inv_broadcast import BROADCASTING

BROADCAST_GROUP = "GB"
BROADCAST_CLIENTS = ("b1", "b2")
# the listener's results a broadcasting client may get (both drop the message)
BROADCAST_RESULTS = ("SUCCESS", "SUCCESS", "RECONSUME_LATER")
# far beyond any queue: the broker answers OFFSET_ILLEGAL with its max offset (the reference client's probe)
PROBE_OFFSET = 2**62
FROM_WHERE = "CONSUME_FROM_LAST_OFFSET"


@attrs.define
class BroadcastClient:
    """One client of the broadcasting group: its offsets file (``local``, kept across restarts), its
    process queues and next pull offsets (dropped when it restarts), what it heartbeated since the broker
    last started (``member``: the topics, None before a heartbeat) and the keys it consumed."""

    name: str
    local: dict[MessageQueue, int] = attrs.field(factory=dict)
    pqs: dict[MessageQueue, ProcessQueue] = attrs.field(factory=dict)
    next_pull: dict[MessageQueue, int] = attrs.field(factory=dict)
    member: tuple[str, ...] | None = None
    consumed: set[str] = attrs.field(factory=set)

    def offset(self, mq: MessageQueue) -> int:
        return self.next_pull.get(mq, self.local[mq])


class BroadcastRules:
    """Mixin: the broadcasting group's clients (see the module docstring)."""

    bc_clients: dict[str, BroadcastClient]

    def _broadcast_init(self) -> None:
        self.bc_group = BROADCAST_GROUP + self.ns
        self.bc_created = False
        self.bc_clients = {}

    def _broadcast_restarted(self) -> None:
        """The broker restarted: it forgot the heartbeats; the clients restart with it (process queues
        dropped, offsets files kept)."""
        for c in self.bc_clients.values():
            c.member = None
            c.pqs.clear()
            c.next_pull.clear()

    def _bc_mqs(self) -> list[MessageQueue]:
        return [MessageQueue(t, q) for t in sorted(self.topics) for q in range(self.topics[t])]

    def _bc_emit(self, event: str, c: BroadcastClient, mq: MessageQueue, detail: dict[str, Any],
                 **fields: Any) -> None:
        self._emit(event, actor=c.name, group=self.bc_group, client_id=c.name, topic=mq.topic,
                   queue_id=mq.queue_id, detail={**detail, "message_model": BROADCASTING}, **fields)

    def _bc_join(self, name: str) -> BroadcastClient:
        """The client joins (or rejoins after a broker restart) and starts the queues it has no offset for."""
        group = self.bc_group
        if not self.bc_created:
            self._call(f"create_group({group!r})", lambda b: b.create_group(group))
            self.bc_created = True
        c = self.bc_clients.get(name)
        if c is None:
            c = self.bc_clients[name] = BroadcastClient(name)
            self._sometimes("broadcast:joined")
        topics = tuple(sorted(self.topics))
        if c.member != topics:  # RocketMQ heartbeats every 30 s; here when it joins or has a new topic
            subs = {t: ("*", "TAG", 0) for t in topics}
            self._call(f"heartbeat({group!r}, {name!r}, {sorted(subs)})",
                       lambda b: b.heartbeat(group, name, subs))
            c.member = topics
        for mq in self._bc_mqs():
            if mq not in c.local:
                self._bc_start(c, mq)
        return c

    def _bc_start(self, c: BroadcastClient, mq: MessageQueue) -> None:
        """No offset for ``mq``: the client starts at the broker's max offset (CONSUME_FROM_LAST_OFFSET)."""
        group = self.bc_group
        out = self._call(f"pull({group!r}, {mq.topic}/{mq.queue_id}, offset={PROBE_OFFSET}, max=1) "
                         f"[{c.name}: max offset]", lambda b: b.pull(group, mq, PROBE_OFFSET, 1, "*"))
        if out.error is not None:  # asked again at its next action, as the reference client does
            self._sometimes(f"broadcast:start_refused:{out.error[1]}")
            return
        start: int = out.value.max_offset
        c.local[mq] = start
        if start > 0 and any(self.frontier.get(mq, 0) > 0 and o.local.get(mq, start) < start
                             for o in self.bc_clients.values() if o is not c):
            self._sometimes("broadcast:late_join")  # past messages the other client owes
        self._bc_emit("commit_offset", c, mq, {"from_where": FROM_WHERE, "store": "local"}, queue_offset=start)

    def _bc_commit(self, c: BroadcastClient, mq: MessageQueue, offset: int, fix: bool = False) -> None:
        """Write ``offset`` to the client's offsets file (increase only, unless the broker's answer fixes it)."""
        if offset < 0 or offset == c.local[mq] or (offset < c.local[mq] and not fix):
            return
        c.local[mq] = offset
        self.changed_at(self._now())
        self._bc_emit("commit_offset", c, mq, {"store": "local", **({"fixed": True} if fix else {})},
                      queue_offset=offset)

    def _bc_pull(self, c: BroadcastClient, mq: MessageQueue, max_nums: int) -> PullResult | None:
        res = self._pull(self.bc_group, mq, c.offset(mq), max_nums, c.name, label="broadcast",
                         extra=lambda m: {"message_model": BROADCASTING})
        if res is None:
            return None
        pq = c.pqs.setdefault(mq, ProcessQueue(self._now()))
        c.next_pull[mq] = res.next_begin_offset
        if res.status is PullStatus.FOUND:
            pq.put_messages(res.messages)
        elif res.status is PullStatus.OFFSET_ILLEGAL:
            del c.pqs[mq]
            self._bc_commit(c, mq, res.next_begin_offset, fix=True)
        elif not pq.has_temp_message():
            self._bc_commit(c, mq, res.next_begin_offset)
        return res

    def _bc_consume(self, c: BroadcastClient, mq: MessageQueue, n: int, result: str) -> bool:
        """The listener gets up to ``n`` messages; whatever it answers, they leave the process queue."""
        pq = c.pqs.get(mq)
        if pq is None or not pq.has_temp_message():
            return False
        batch: list[StoredMessage] = [pq.get(o) for o in pq.offsets()[:n]]
        for m in batch:
            self._bc_emit("consume", c, mq, {"listener": result, **({"dropped": True} if result != "SUCCESS" else {})},
                          queue_offset=m.queue_offset, commitlog_offset=m.commitlog_offset, msg_key=m.uniq_key,
                          msg_id=m.msg_id, reconsume_times=m.reconsume_times, status=result)
            if m.uniq_key and any(m.uniq_key in o.consumed for o in self.bc_clients.values() if o is not c):
                self._sometimes("broadcast:both_consumed")
            if m.uniq_key:
                c.consumed.add(m.uniq_key)
        if result != "SUCCESS":
            self._sometimes("broadcast:dropped")
        self._bc_commit(c, mq, pq.remove_messages([m.queue_offset for m in batch], self._now()))
        return True

    def _bc_ready(self, c: BroadcastClient) -> list[MessageQueue]:
        return [mq for mq in self._bc_mqs() if mq in c.local
                and (self.frontier.get(mq, 0) > c.offset(mq) or (mq in c.pqs and c.pqs[mq].has_temp_message()))]

    def broadcast(self, client: int, which: int, n: int, result: str) -> None:
        """Client ``client`` of the broadcasting group joins if it has not, pulls one queue (``which`` of
        those with messages past its offset, else of all) and consumes up to ``n`` messages with
        ``result`` (SUCCESS or RECONSUME_LATER: dropped either way), committing in its offsets file."""
        if type(self).wall is not None or not self.topics:
            return self._idle("broadcast")
        self._record("broadcast", client=client, which=which, n=n, result=result)
        c = self._bc_join(_pick(BROADCAST_CLIENTS, client))
        mqs = self._bc_ready(c) or [mq for mq in self._bc_mqs() if mq in c.local]
        if mqs:
            mq = _pick(mqs, which)
            self._bc_pull(c, mq, 8)
            self._bc_consume(c, mq, n, result)
        self._after()

    def broadcast_prelude(self, v: int, f: int) -> None:
        """An example's opening broadcast actions: a client joins, a message is sent, the other client joins
        after it (it owes it nothing), a second message is sent and each client consumes it — the second
        of them pulls an offset its group already got; one of them drops it (RECONSUME_LATER), the other
        consumes it with the drawn result."""
        first = v % 2
        self.broadcast(first, f, 1 + f % 4, "SUCCESS")
        self.send_plain(v, f, "TagA", (), False)
        self.broadcast(1 - first, f, 1 + f % 4, "SUCCESS")
        self.send_plain(v, f, "TagB", (), False)
        drawn = _pick(BROADCAST_RESULTS, f)
        self.broadcast(first, f, 8, drawn)
        self.broadcast(1 - first, f, 8, "RECONSUME_LATER" if drawn == "SUCCESS" else "SUCCESS")

    def _broadcast_all(self) -> bool:
        """The drain: every client pulls and consumes its queues to their ends (SUCCESS)."""
        moved = False
        for name in sorted(self.bc_clients):
            c = self._bc_join(name)
            for mq in [mq for mq in self._bc_mqs() if mq in c.local]:
                for _ in range(CONSUME_TIMEOUT_ROUNDS):
                    res = self._bc_pull(c, mq, 32)
                    pq = c.pqs.get(mq)
                    moved = self._bc_consume(c, mq, pq.msg_count if pq is not None else 0, "SUCCESS") or moved
                    if res is None or res.status is not PullStatus.FOUND:
                        break
        return moved
