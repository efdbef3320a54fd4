"""Producers and the concurrent consumer of the conformance machine.

Theory of operation
-------------------
``MessagingRules`` (a mixin of ``ConformanceBase``) plays producer ``P0`` and the reference
concurrent consumer of groups ``G0``…: ``_send`` (an acknowledged send is a ``send`` event; a
delayed one is expected to fire), ``_pull`` / ``_pull_into_pq`` (a ``ProcessQueue`` per group and
queue, started from the group's committed offset), ``_consume`` (the listener's result: SUCCESS
with an ackIndex, RECONSUME_LATER, an exception or null; failed messages are sent back, a failed
send-back keeps the message for a local retry), ``_send_back`` (the routing the client expects —
RETRY at level 3 + reconsume times or the requested one, DLQ past the max or for a negative
level — and the copy expected to fire), ``_commit`` (RocketMQ's commit rule: the lowest
unacknowledged offset, then the offset read back). The parameters are drawn from
``domains.py`` (send-back levels, the client's max reconsume times, the origin msgId).

Send modes (issue 42): ``send_oneway`` (a ``send`` of status ONEWAY, no offsets: never acknowledged),
``send_unanswered`` (the broker stores, the answer is lost: a ``send`` of status NO_RESPONSE, then the
producer's retry — the next queue for SYNC, the same request for ASYNC — stores it again).

The rules Hypothesis draws are few (``produce``, ``consumer``, ``send_back_failure``,
``probe_filtered``); each dispatches to a named action (``send_plain``, ``pull_consume``, …)
which records itself, so a program replays action by action.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from rmqspec.model.message import Message, MessageQueue, StoredMessage
from rmqspec.model.process_queue import ProcessQueue
from rmqspec.model.results import PullResult, PullStatus, ResponseCode, SendResult, SendStatus
from rmqspec.properties.conform_base import PICK, PRODUCER, TAGS, _origin, _pick
from rmqspec.properties.domains import MAX_CHOICES, ORIGINS, SEND_BACK_LEVELS, TIMER_DRAW
from rmqspec.properties.filters import FILTER_ACTIONS
from rmqspec.properties.history import dlq_topic, retry_topic


def _fix_retry_queue(fork: Any, queue: int) -> None:
    """Pin the retry queue of this fork's *next* send-back only (a later send-back, of
    another group perhaps, chooses again)."""
    fork.force_retry_queue(queue)



class MessagingRules:
    """Mixin: producers and the concurrent consumer."""

    # ------------------------------------------------------------------
    # producers

    def _send(self, msg: Message, queue_id: int, sharding_key: str | None = None,
              send_mode: str | None = None, route_queues: int | None = None) -> SendResult | None:
        """Send ``msg``; its result, or None when the broker refused it. ``send_mode``: the ``send``
        event's ``detail.send_mode`` (None: a plain SYNC send, not stated); ``route_queues``: an
        ordered send's route (the number of queues its selector chose among)."""
        timer = self._timer_plan(msg.properties, msg.delay_level)  # 5.x: the put hook reads this clock
        detail = {**({"timer": timer["detail"]} if timer is not None else {}),
                  **({"wait": False} if not msg.waits_for_flush else {}),
                  **({"send_mode": send_mode} if send_mode is not None else {}),
                  **({"route_queues": route_queues} if route_queues is not None else {})}
        extra = {"detail": detail} if detail else {}
        out = self._call(f"send({msg.topic}/{queue_id}, {msg.uniq_key}, delay={msg.delay_level})",
                         lambda b: b.send(msg, queue_id))
        if out.error is not None:
            self.history.emit("send", self._now(), trace=False, topic=msg.topic, queue_id=queue_id,
                              msg_key=msg.uniq_key, status="FAILED",
                              detail={"error": out.error[1], **extra.get("detail", {})})
            self._sometimes("send_refused")
            return None
        res = out.value
        self.sent_at(msg.uniq_key)
        due = timer.get("due") if timer is not None else None
        self._emit("send", actor=PRODUCER, group=PRODUCER, topic=msg.topic, queue_id=queue_id,
                   queue_offset=res.queue_offset, commitlog_offset=res.commitlog_offset,
                   msg_key=msg.uniq_key, msg_id=res.msg_id, delay_level=msg.delay_level or None,
                   deliver_ts=due, status=res.status.value, sharding_key=sharding_key, **extra)
        if msg.waits_for_flush and res.status is SendStatus.SEND_OK:
            # SYNC: its group commit flushed everything written before it too (not a FLUSH_DISK_TIMEOUT)
            self.last_commit_seq = len(self.history.events)
        if msg.delay_level <= 0 and timer is None:  # a delayed or timer send answers its schedule copy's
            self.owe_answer(msg.uniq_key, msg.topic, queue_id, res.queue_offset, res.commitlog_offset)
        if msg.delay_level > 0:
            level = min(msg.delay_level, self.config.max_delay_level)
            self.sched_levels.add(level)
            self._expect_fire(msg.topic, msg.uniq_key, 0, None, self._now() + self.config.delay_ms(level))
        elif due is not None:
            self._timer_expect(msg.topic, msg.uniq_key, due)
        return res

    def send_plain(self, topic: int, queue: int, tags: str | None, keys: tuple, props: bool) -> None:
        self._record("send_plain", topic=topic, queue=queue, tags=tags, keys=keys, props=props)
        name = _pick(sorted(self.topics), topic)
        msg = self._message(name, tags, keys, {"color": "blue"} if props else None)
        if keys and not props:  # setWaitStoreMsgOK(false): under SYNC_FLUSH answered before its flush
            msg = attrs.evolve(msg, wait="false")
            self._sometimes(f"send_unwaited:{self.config.flush}")
        self._send(msg, queue % self.topics[name])
        self._after()

    def send_keyed(self, topic: int, key: str, steps: int = 1) -> None:
        """An order's ``steps`` (created, paid, shipped, …: seed 001) as ordered sends, one after the
        other: the client's selector (``key_selector``: SelectMessageQueueByHash unless the run gives
        another, ``model/selectors.py``) picks each one's queue from the key and the route."""
        self._record("send_keyed", topic=topic, key=key, steps=steps)
        name = _pick(sorted(self.topics), topic)
        n = self.topics[name]
        for _ in range(steps):
            if self._send(self._message(name, "TagA", (key,)), self.key_selector(key, n), sharding_key=key,
                          route_queues=n) is None:
                break  # an ordered send is tried once; the order stops at a refusal
        self._after()

    def send_delayed(self, topic: int, queue: int, level: int) -> None:
        if type(self).wall is not None:
            level = min(level, type(self).wall.max_level)
        self._record("send_delayed", topic=topic, queue=queue, level=level)
        name = _pick(sorted(self.topics), topic)
        self._send(self._message(name, "TagB", delay=level), queue % self.topics[name])
        self._after()

    def send_oneway(self, topic: int, queue: int, tags: str | None) -> None:
        """A oneway send (``OnewayBroker``): stored as any send, nothing answered. Its ``send`` has status
        ONEWAY and no offsets (the machine, as a producer, learns none); the observer reveals the copy."""
        self._record("send_oneway", topic=topic, queue=queue, tags=tags)
        name = _pick(sorted(self.topics), topic)
        self._send_oneway(self._message(name, tags), queue % self.topics[name])

    def _send_oneway(self, msg: Message, q: int) -> bool:
        """Send ``msg`` oneway and reveal; whether it was stored (``judge_oneway``)."""
        since = len(self.history.events)
        self._call(f"send_oneway({msg.topic}/{q}, {msg.uniq_key})", lambda b: b.send_oneway(msg, q))
        self.sent_at(msg.uniq_key)
        self._emit("send", actor=PRODUCER, group=PRODUCER, topic=msg.topic, queue_id=q, msg_key=msg.uniq_key,
                   status="ONEWAY", detail={"send_mode": "ONEWAY"})
        self._after()
        return self.judge_oneway(msg.uniq_key, since)

    def send_unanswered(self, topic: int, queue: int, tags: str | None, mode: str) -> None:
        """A send the broker stores whose answer the producer never gets (a RemotingTimeoutException),
        and the producer's retry, which stores it again under the same UNIQ_KEY: a SYNC send retries on
        the next queue (sendDefaultImpl), an ASYNC one re-sends the same request, to the same queue
        (MQClientAPIImpl.onExceptionImpl). The first attempt is a ``send`` of status NO_RESPONSE."""
        self._record("send_unanswered", topic=topic, queue=queue, tags=tags, mode=mode)
        name = _pick(sorted(self.topics), topic)
        msg, q = self._message(name, tags), queue % self.topics[name]
        out = self._call(f"send({name}/{q}, {msg.uniq_key}) [answer lost]", lambda b: b.send(msg, q))
        if out.error is None:  # the machine keeps the answer for the oracles; the trace says none came
            self.sent_at(msg.uniq_key)
            self.owe_answer(msg.uniq_key, name, q, out.value.queue_offset, out.value.commitlog_offset)
            self._emit("send", actor=PRODUCER, group=PRODUCER, topic=name, queue_id=q, msg_key=msg.uniq_key,
                       status="NO_RESPONSE", detail={"send_mode": mode})
            self._sometimes(f"send_unanswered:{mode}")
        retry = q if mode == "ASYNC" else (q + 1) % self.topics[name]
        self.resent.add(msg.uniq_key)
        res = self._send(msg, retry, send_mode=mode)
        if out.error is None and res is not None:
            self.judge_stored_again(msg.uniq_key, out.value.commitlog_offset, res.commitlog_offset)
        self._after()

    def send_batch(self, topic: int, queue: int, n: int) -> None:
        """``n`` messages as one SEND_BATCH_MESSAGE (``BatchBroker``; the wall clock and a broker without
        batches: one send each). Each item is a ``send`` event with ``detail.batch_index``."""
        self._record("send_batch", topic=topic, queue=queue, n=n)
        name = _pick(sorted(self.topics), topic)
        self._send_batch([self._message(name, TAGS[i % len(TAGS)]) for i in range(n)], queue % self.topics[name])
        self._after()

    def _send_batch(self, msgs: list[Message], q: int) -> None:
        name, n = msgs[0].topic, len(msgs)
        if type(self).wall is not None or not self.takes_batch:
            for msg in msgs:
                self._send(msg, q)
            return
        out = self._call(f"send_batch({name}/{q}, {[m.uniq_key for m in msgs]})", lambda b: b.send_batch(msgs, q))
        if out.error is not None:
            self._sometimes("send_batch_refused")
        else:
            res: SendResult = out.value
            self.owe_batch([m.uniq_key for m in msgs], name, res.commitlog_offset, msgs[0].wait)
            for i, (msg, msg_id) in enumerate(zip(msgs, res.msg_id.split(","), strict=True)):
                self.sent_at(msg.uniq_key)
                offset = int(msg_id[-16:], 16)
                self.owe_answer(msg.uniq_key, name, q, res.queue_offset + i, offset)
                self._emit("send", actor=PRODUCER, group=PRODUCER, topic=name, queue_id=q,
                           queue_offset=res.queue_offset + i, commitlog_offset=offset, msg_key=msg.uniq_key,
                           msg_id=msg_id, status=res.status.value, detail={"batch_index": i, "batch_size": n})
            self._sometimes("send_batch:atomic")

    # ------------------------------------------------------------------
    # concurrent consumer

    def _consumer_groups(self) -> list[str]:
        return [g for g, s in sorted(self.groups.items()) if not s.orderly]

    def _group_mqs(self, group: str) -> list[MessageQueue]:
        mqs = [MessageQueue(t, q) for t in sorted(self.history.subscriptions[group])
               for q in range(self.topics[t])]
        state = self.groups[group]
        mqs += [MessageQueue(retry_topic(group), q) for q in range(state.retry_queue_nums)]
        return mqs

    def _start_offset(self, group: str, mq: MessageQueue) -> int:
        out = self.query_offset(group, mq)
        value = out.value if out.error is None else -1
        return max(value, 0)

    def _pull(self, group: str, mq: MessageQueue, offset: int, max_nums: int, client: str,
              sub: str = "*", deliver: bool = True, label: str = "pull",
              extra: Callable[[StoredMessage], dict[str, Any]] | None = None) -> PullResult | None:
        """One pull, judged (``judge_pull``) and its deliveries emitted. ``label`` names the coverage
        counts (``pull:FOUND``; another label, e.g. ``broadcast``, gives ``broadcast:FOUND`` and
        ``broadcast:pull_error:…``); ``extra`` gives each deliver row's own detail (default: the
        copy's ORIGIN_MESSAGE_ID)."""
        tag = "" if label == "pull" else f" [{client}]"
        out = self._call(f"pull({group!r}, {mq.topic}/{mq.queue_id}, offset={offset}, "
                         f"max={max_nums}, sub={sub!r}){tag}",
                         lambda b: b.pull(group, mq, offset, max_nums, sub))
        if out.error is not None:
            self._sometimes(f"{'' if label == 'pull' else label + ':'}pull_error:{out.error[1]}")
            return None
        res: PullResult = out.value
        self._sometimes(f"{label}:{res.status.value}")
        self.judge_pull(offset, res)
        self._note_queue(mq, offset, res, sub)
        self.pull_seq += 1
        pull_seq = self.pull_seq
        more = extra or (lambda m: {"origin": m.origin_message_id})
        self._emit_delivers(res, group, client, deliver,
                            lambda m: {"pull": pull_seq, "from": offset, "tags": m.tags,
                                       "subscription": sub, "client": deliver, **more(m)})
        return res

    def _pull_into_pq(self, group: str, mq: MessageQueue, max_nums: int, beyond: bool = False) -> PullResult | None:
        key = (group, mq)
        if key not in self.pqs:
            self.pqs[key] = ProcessQueue(self._now())
            self.next_pull[key] = self._start_offset(group, mq)
        offset = self.next_pull[key] + (1000 if beyond else 0)
        res = self._pull(group, mq, offset, max_nums, "consumer-" + group)
        if res is None:
            return None
        if res.status is PullStatus.FOUND:
            self.pqs[key].put_messages(res.messages)
            self.next_pull[key] = res.next_begin_offset
        elif not beyond:  # OFFSET_ILLEGAL / NO_NEW_MSG / NO_MATCHED_MSG: move to the answer
            self.next_pull[key] = res.next_begin_offset
        return res

    def pull(self, group: int, mq: int, max_nums: int, beyond: bool) -> None:
        self._record("pull", group=group, mq=mq, max_nums=max_nums, beyond=beyond)
        g = _pick(self._consumer_groups(), group)
        mqs = self._group_mqs(g)
        ready = [q for q in mqs if self.frontier.get(q, 0) > self.next_pull.get((g, q), 0)]
        self._pull_into_pq(g, _pick(ready or mqs, mq), max_nums, beyond)
        self._after()

    def _commit(self, group: str, mq: MessageQueue, offset: int, client: str) -> None:
        key = (group, mq)
        if offset < 0 or offset <= self.client_committed.get(key, -1):
            return
        self.client_committed[key] = offset
        self.changed_at(self._now())
        self.committed_keys.add(key)
        self._call(f"update_offset({group!r}, {mq.topic}/{mq.queue_id}, {offset})",
                   lambda b: b.update_offset(group, mq, offset))
        stored = self.query_offset(group, mq)
        self._emit("commit_offset", actor=client, group=group, client_id=client, topic=mq.topic,
                   queue_id=mq.queue_id, queue_offset=stored.value if stored.error is None else None,
                   detail={"requested": offset})

    def _send_back(self, group: str, m: StoredMessage, level: int, max_times: int | None,
                   client: str, origin: str = "uniq", extra: dict[str, Any] | None = None) -> ResponseCode:
        """CONSUMER_SEND_MSG_BACK of ``m``, its ``send_back`` event (``extra``: more of its detail, e.g. the
        clean's, ``conform_timeout.py``) and the retry copy expected to fire."""
        state = self.groups[group]
        effective = (16 if max_times == -1 else max_times) if max_times is not None else state.retry_max
        routed_dlq = m.reconsume_times >= effective or level < 0
        new_level = -1 if level < 0 else (
            0 if routed_dlq else min(3 + m.reconsume_times if level == 0 else level,
                                     self.config.max_delay_level))
        if self.ls.enabled and state.retry_queue_nums > 1 and not routed_dlq:
            # the retry queue is RocketMQ's random choice: one fork per allowed queue; the
            # revealed schedule copy (REAL_QID) prunes the forks the candidate disagrees with
            self.ls.split(lambda f: range(state.retry_queue_nums), _fix_retry_queue)
            self._sometimes("retry_queue_forked")
        origin_id = {"uniq": m.uniq_key, "none": None, "msg_id": m.msg_id}[origin]
        out = self._call(
            f"send_back({group!r}, {m.commitlog_offset}, level={level}, max={max_times}"
            + (f", origin={origin_id!r})" if origin != "uniq" else ")"),
            lambda b: b.send_back(group, m.commitlog_offset, level, origin_id, max_times))
        code = out.value if out.error is None else ResponseCode.SYSTEM_ERROR
        deliver_ts = None if routed_dlq else self._now() + self.config.delay_ms(new_level)
        self.history.emit(
            "send_back", self._now(), trace=code == ResponseCode.SUCCESS, actor=client, group=group,
            client_id=client, topic=m.topic, queue_id=m.queue_id, queue_offset=m.queue_offset,
            commitlog_offset=m.commitlog_offset, msg_key=m.uniq_key, msg_id=m.msg_id,
            reconsume_times=m.reconsume_times + 1, delay_level=new_level, deliver_ts=deliver_ts,
            status="DLQ" if routed_dlq else "RETRY",
            detail={"code": ResponseCode(code).name, "requested_level": level, "max": effective,
                    "origin": _origin(m), **(extra or {})},
        )
        if code == ResponseCode.SUCCESS:
            self._sometimes("send_back:DLQ" if routed_dlq else "send_back:RETRY")
            if routed_dlq:  # the send-back itself writes the DLQ copy: it is there now
                self._reveal(MessageQueue(dlq_topic(group), 0))
            if not routed_dlq:
                self.sched_levels.add(new_level)
                self._expect_fire(retry_topic(group), m.uniq_key, m.reconsume_times + 1, _origin(m), deliver_ts)
        else:
            self._sometimes("send_back_failed")
            self.judge_send_back(group, m, ResponseCode(code))
        return ResponseCode(code)

    def _consume(self, group: str, mq: MessageQueue, n: int, result: str, ack_index: int,
                 level: int, max_choice: str | int, origin: str = "uniq") -> None:
        pq = self.pqs[(group, mq)]
        batch = [pq.get(o) for o in pq.offsets()[:n]]
        client = "consumer-" + group
        if result == "SUCCESS":
            acked = len(batch) if ack_index < 0 else min(ack_index, len(batch) - 1) + 1
        else:
            acked = 0
        state = self.groups[group]
        max_times = max_choice if isinstance(max_choice, int) else {
            "none": None, "group": state.retry_max, "client": -1 if state.retry_max == 16 else None}[max_choice]
        done = []
        for i, m in enumerate(batch):
            ok = i < acked
            self._emit("consume", actor=client, group=group, client_id=client, topic=m.topic,
                       queue_id=m.queue_id, queue_offset=m.queue_offset, msg_key=m.uniq_key,
                       msg_id=m.msg_id, reconsume_times=m.reconsume_times,
                       status="SUCCESS" if ok else "RECONSUME_LATER",
                       detail={"listener": result})
            if ok:
                done.append(m.queue_offset)
                continue
            code = self._send_back(group, m, level, max_times, client, origin)
            if code == ResponseCode.SUCCESS:
                done.append(m.queue_offset)
            else:  # consumed again locally after 5 s; stays in the process queue
                self.local_failures[(group, m.commitlog_offset)] += 1
        offset = pq.remove_messages(done, self._now())
        self._commit(group, mq, offset, client)

    def _pq_keys(self) -> list[tuple[str, MessageQueue]]:
        return sorted((k for k, pq in self.pqs.items() if pq.has_temp_message()),
                      key=lambda k: (k[0], k[1].topic, k[1].queue_id))

    def consume(self, which: int, n: int, result: str, ack_index: int, level: int,
                max_choice: str | int, origin: str = "uniq") -> None:
        self._record("consume", which=which, n=n, result=result, ack_index=ack_index, level=level,
                     max_choice=max_choice, **({} if origin == "uniq" else {"origin": origin}))
        group, mq = _pick(self._pq_keys(), which)
        if result == "SUCCESS" and 0 <= ack_index < n - 1:
            self._sometimes("consume:partial_ack")
        self._consume(group, mq, n, result, ack_index, level, max_choice, origin)
        self._after()

    def _ready(self) -> list[tuple[str, MessageQueue]]:
        return [(g, q) for g in self._consumer_groups() for q in self._group_mqs(g)
                if self.frontier.get(q, 0) > self.next_pull.get((g, q), 0)
                or ((g, q) in self.pqs and self.pqs[(g, q)].has_temp_message())]

    def pull_consume(self, which: int, n: int, result: str, ack_index: int, level: int,
                     max_choice: str | int, origin: str = "uniq") -> None:
        """The usual cycle: pull a queue with messages, hand a batch to the listener."""
        self._record("pull_consume", which=which, n=n, result=result, ack_index=ack_index,
                     level=level, max_choice=max_choice, **({} if origin == "uniq" else {"origin": origin}))
        group, mq = _pick(self._ready(), which)
        self._pull_into_pq(group, mq, 8)
        if self.pqs[(group, mq)].has_temp_message():
            if result == "SUCCESS" and 0 <= ack_index < n - 1:
                self._sometimes("consume:partial_ack")
            self._consume(group, mq, n, result, ack_index, level, max_choice, origin)
        self._after()

    @precondition(lambda self: self._on("probe"))
    @precondition(lambda self: self.groups)
    @rule(kind=st.sampled_from(["unknown_offset", "unknown_group"]))
    def send_back_failure(self, kind: str) -> None:
        if type(self).wall is not None and kind == "unknown_group":
            # a running 4.9 broker creates the group (stock autoCreateSubscriptionGroup=true), the model
            # does not (docs/fidelity.md, wire row 3): nothing to compare on the wall clock
            return self._idle("send_back_failure")
        self._record("send_back_failure", kind=kind)
        group = "G0" + self.ns if kind == "unknown_offset" else "NoSuchGroup"
        offset = 987_654_321 if kind == "unknown_offset" else 0
        out = self._call(f"send_back({group!r}, {offset}, 0)",
                         lambda b: b.send_back(group, offset, 0, None, None))
        self._sometimes(f"send_back_failure:{out.render()}")
        self._after()

    @precondition(lambda self: self._on("probe"))
    @rule(topic=PICK, queue=PICK, sub=st.sampled_from(["TagA", "TagA||TagB", "TagC"]), extra=FILTER_ACTIONS)
    def probe_filtered(self, topic: int, queue: int, sub: str, extra: tuple | None = None) -> None:
        """The observer pulls with a tag subscription: only matching tags may come back (``extra``:
        a SQL92 / properties / inconsistent-group action of ``properties/filters.py`` instead)."""
        if extra is not None:
            return self.filters(extra[0], topic, queue, *extra[1:])
        self._record("probe_filtered", topic=topic, queue=queue, sub=sub)
        name = _pick(sorted(self.topics), topic)
        self._pull(self.obs, MessageQueue(name, queue % self.topics[name]), 0, 32, self.obs,
                   sub=sub, deliver=False)
        self._after()

    # ------------------------------------------------------------------
    # the rules Hypothesis draws for them (each dispatches to a named action above)

    @rule(kind=st.sampled_from(["plain", "keyed", "delayed", "batch", "timer", "oneway", "unanswered"]),
          topic=PICK, queue=PICK, tags=st.sampled_from(TAGS), level=st.integers(1, 20), n=st.integers(2, 4),
          key=st.sampled_from(["order-1", "order-2", "order-3", "user-42"]), timer=TIMER_DRAW)
    def produce(self, kind: str, topic: int, queue: int, tags: str | None, level: int, n: int,
                key: str, timer: tuple = ("TIMER_DELAY_MS", "plus1", 1, 0)) -> None:
        if kind == "oneway" and not self.takes_oneway:
            kind = "plain"  # a broker without oneway sends
        if kind == "unanswered" and self.profile.strict:
            kind = "plain"  # its retry's copy is a DUPLICATED consumption: an observation strict fails
        if kind == "oneway":
            self.send_oneway(topic, queue, tags)
        elif kind == "unanswered":
            self.send_unanswered(topic, queue, tags, "ASYNC" if n % 2 else "SYNC")
        elif kind == "timer":
            self.send_timer(topic, queue, *timer)
        elif kind == "plain":
            self.send_plain(topic, queue, tags, ("k1",) if n > 2 else (), n == 4)
        elif kind == "keyed":
            self.send_keyed(topic, key, n)
        elif kind == "delayed":
            self.send_delayed(topic, queue, level)
        else:
            self.send_batch(topic, queue, n)

    @rule(kind=st.sampled_from(["pull_consume", "pull_consume", "pull", "consume"]),
          which=PICK, n=st.integers(1, 4), max_nums=st.integers(1, 8),
          beyond=st.sampled_from([False] * 7 + [True]),
          result=st.sampled_from(["SUCCESS", "SUCCESS", "RECONSUME_LATER", "EXCEPTION", "NULL"]),
          ack_index=st.integers(-1, 2), level=SEND_BACK_LEVELS, max_choice=MAX_CHOICES, origin=ORIGINS)
    def consumer(self, kind: str, which: int, n: int, max_nums: int, beyond: bool, result: str,
                 ack_index: int, level: int, max_choice: str | int, origin: str = "uniq") -> None:
        wall = type(self).wall
        if wall is not None and level > 0:
            level = min(level, wall.max_level)
        if wall is not None and isinstance(max_choice, int):
            max_choice = min(max_choice, wall.max_retry)
        if kind == "consume" and self._pq_keys():
            self.consume(which, n, result, ack_index, level, max_choice, origin)
        elif kind == "pull_consume" and self._ready():
            self.pull_consume(which, n, result, ack_index, level, max_choice, origin)
        else:
            self.pull(which, which // 7, max_nums, beyond)
