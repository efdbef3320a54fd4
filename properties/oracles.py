"""Answers RocketMQ fixes without a model: what ``--no-lockstep`` judges beyond the trace invariants.

Theory of operation
-------------------
Lockstep compares every answer with the reference model's; without it (``--no-lockstep``, and
whatever a trace audit has) a wrong answer is only seen when a trace invariant breaks, and many
wrong answers break none: a refused send loses nothing, a retry copy without its
ORIGIN_MESSAGE_ID is still delivered. ``OracleRules`` (a mixin of ``ConformanceBase``) judges the
answers whose right value follows from a RocketMQ rule and what the machine itself saw, with no
model run — each a finding only when the rule leaves no other answer:

- **edge answers** (``expect_answer``): a send to the queue past the topic's last and a pull of it
  are refused (SendMessageProcessor.msgCheck, PullMessageProcessor: SYSTEM_ERROR); a message
  exactly at a size limit is stored and one past the body or properties limit refused
  (``model/limits.py``; a record past a small file's room is not judged: real 4.9.8 answers PUT_OK
  there and writes nothing, ``docs/fidelity.md``); a delay level past the table's end or at a Java
  int's ends is stored; a topic of 127 chars is sent to;
- **send-backs** (``judge_send_back``): one refused although the group exists, the copy is
  there and the new copy is far from every size limit (consumerSendMsgBack has no other reason);
- **pulls at the end** (``judge_pull``): a pull at the max offset the answer itself states is
  answered NO_NEW_MSG;
- **born timestamps** (in ``judge_copy``): every copy of a key the observer reveals, in any topic,
  has the born timestamp of the first one (each copy is built from the one before with its
  bornTimestamp; not judged for a key sent twice, ``resent``); on the manual clock that is the
  instant the machine sent it (``sent_at``: the in-process broker stamps a send with its clock);
- **identity** (``judge_identity``, manual clock: the machine built the broker with its config): a
  copy's msgId is the offset msgId of its store host and commitlog offset, and its sysFlag has
  STOREHOST_V6 exactly when the store host is IPv6 (MessageDecoder / CommitLog's encoder);
- **committed messages** (``judge_committed``, on every copy in a user topic whose sysFlag says
  COMMIT): EndTransactionProcessor writes the half's properties, so TRAN_MSG is "true" and PGROUP is
  set; REAL_TOPIC / REAL_QID name the copy's own queue (5.5.0+ clears both: ``commit_drops_real_queue``)
  and ``__transactionId__`` is the UNIQ_KEY exactly on 5.x (``half_transaction_id``);
- **check rounds** (``judge_check_round``, manual clock): check requests come only from a tick at
  which the check service's round was due as the machine mirrors its timer (``edges.py``: the last
  round, or the start, an interval or more before); a broker that runs its rounds late (or early)
  sends them at a tick the mirror says has none;
- **send answers** (``owe_answer`` / ``judge_answers``, manual clock): a plain send's SEND_OK names where
  the message went — the response header's queueOffset and the msgId of its commitlog offset, of the
  message the request carried to the queue it named — so the observer reveals, before the next
  crash, a copy of that key at that queue offset and commitlog offset; and the retry of a send whose
  answer was lost (``judge_stored_again``) is stored again, at another commitlog offset — RocketMQ
  keeps no table of UNIQ_KEYs (a broker answering a retry with an earlier copy's result, having
  stored nothing, fails both);
- **batches** (``owe_batch`` / ``judge_batch_item``, manual clock, the batch's own copies): a batch is one
  append (CommitLog.putMessages, fidelity B18), so every item lies in the commitlog file of the first,
  and each keeps the properties string the client encoded — WAIT as sent — with the batch's CLUSTER
  after it (a broker storing the items as plain sends drops WAIT);
- **oneway sends** (``judge_oneway``, manual clock): a plain message sent oneway to a queue of a running
  broker's topic is stored — SendMessageProcessor handles a oneway request as any other and only
  never writes its answer — so the observer reveals its copy in the step that sent it;
- **a group gone** (``judge_stale_pull``, manual clock; asked by ``filters.group_leave``): after group
  GF's last member unregistered, its pull without the subscription flag is refused;
- **copies of a send-back** (``judge_copy``, on every copy the observer reveals in a retry or DLQ
  topic): RETRY_TOPIC is set, ORIGIN_MESSAGE_ID is the msgId of a copy of the same key the
  observer saw in a topic that is not a retry, DLQ or system one (SendMessageProcessor
  .consumerSendMsgBack: the existing value or the msgId of the message sent back, which is such a
  copy or a retry copy carrying one), and a DLQ copy is not delayed (``setDelayTimeLevel(0)``);
- **consumer offsets across a kill** (``judge_offsets_read_back``): the offsets the broker
  answered when it last persisted them (the machine mirrors the 5 s persist, and a clean shutdown
  persists all) are read back after a kill at least as high (manual clock);
- **fires at the tick** (manual clock): ``tick()`` runs the broker's services at ``clock.now()``
  (SPEC §3), so after a tick at T every copy the observer revealed in SCHEDULE_TOPIC_XXXX due by T
  (store time + its level's delay), and every copy before it in its level (a FIFO), has been fired
  to its REAL_TOPIC by the time the observer next reveals. A copy bound for the half topic is
  discarded, not fired; a level is judged only up to its first copy whose fate the machine cannot
  know (bound for a queue the observer does not reveal, or near a size limit: its rebuilt record's
  put may fail, which stops the level). Judged only before the example's first crash (a restart may
  rewind or skip the delay progress).
"""

from __future__ import annotations

import ipaddress

import attrs

from rmqspec.model.ids import offset_msg_id
from rmqspec.model.limits import END_FILE_MIN_BLANK_LENGTH, MAX_PROPERTIES_LENGTH
from rmqspec.model.message import (
    MAX_BODY_BYTES,
    STOREHOST_V6_FLAG,
    TRANSACTION_COMMIT_TYPE,
    MessageQueue,
    StoredMessage,
    transaction_type,
)
from rmqspec.model.results import CheckRequest, PullResult, PullStatus, ResponseCode
from rmqspec.properties.history import HALF_TOPIC, SYSTEM_TOPICS
from rmqspec.properties.lockstep import Outcome

PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QID = "REAL_QID"
PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"
PROPERTY_DELAY = "DELAY"
PROPERTY_TRAN_MSG = "TRAN_MSG"
PROPERTY_PGROUP = "PGROUP"
PROPERTY_TRANSACTION_ID = "__transactionId__"
ORACLE_PREFIX = "answer judged without the model: "
LIMIT_SLACK = 1024  # what a copy (send-back, fire) may add to a record: properties, a longer topic


@attrs.define
class ScheduledCopy:
    key: str | None
    r: int
    due: int
    state: str  # owed, half, unknown, fired
    offset: int | None = None  # the copy's commitlog offset: retention may take it (never fired then)


def _internal(topic: str) -> bool:
    return topic.startswith(("%RETRY%", "%DLQ%")) or topic in SYSTEM_TOPICS or topic.startswith("rmq_sys_")


class OracleRules:
    """Mixin: the answers judged from RocketMQ's rules alone (module docstring)."""

    def _oracle_init(self) -> None:
        # schedule queue id -> the copies revealed in it, in queue order
        self.sched_queue: dict[int, list[ScheduledCopy]] = {}
        # (key, reconsume_times) -> store times of copies outside it no schedule copy revealed explains
        self.fires_unmatched: dict[tuple[str, int], list[int]] = {}
        self.ticked_at: int | None = None  # the last manual tick that answered, before any crash
        self.origin_ids: dict[str, set[str]] = {}  # key -> msgIds of its copies in user topics
        self.born: dict[str, int] = {}  # key -> the born timestamp of the first copy revealed
        self.resent: set[str] = set()  # keys the producer sent again after a lost answer
        self.batch_items: dict[str, tuple[str, int, str | None]] = {}  # key -> (topic, first's offset, WAIT sent)
        # the consumer offsets the broker answered last, and those it held at its last persist
        self.offsets_answered: dict[tuple[str, MessageQueue], int] = {}
        self.offsets_on_disk: dict[tuple[str, MessageQueue], int] = {}
        self.rounds_mirrored = True  # False from a tick that failed until the next restart
        # plain sends acknowledged whose copy the observer has yet to reveal:
        # (key, topic, queue, queue offset, commitlog offset, history index of the send)
        self.answers_owed: list[tuple[str, str, int, int, int, int]] = []

    def sent_at(self, key: str | None) -> None:
        """The machine sent ``key`` now: on the manual clock its born timestamp is now."""
        if key is not None and type(self).wall is None:
            self.born.setdefault(key, self._now())

    def owe_answer(self, key: str | None, topic: str, queue_id: int, queue_offset: int, commitlog_offset: int) -> None:
        """A plain send answered SEND_OK at these offsets (module docstring); judged at the next reveal."""
        if key is not None and type(self).wall is None:
            self.answers_owed.append((key, topic, queue_id, queue_offset, commitlog_offset, len(self.history.events)))

    def judge_answers(self, after_crash: bool) -> None:
        """Each owed answer's copy was revealed where the answer said; after a crash they are not judged
        (the copy may be gone with the unflushed tail). With a TransientStorePool a copy not yet committed is
        not readable (model/committing.py): an answer past the queue's revealed end stays owed, and is dropped
        when retention took its copy first."""
        owed, self.answers_owed = self.answers_owed, []
        if after_crash:
            return
        pooled = self._pooled()
        for item in owed:
            key, topic, queue_id, queue_offset, commitlog_offset, since = item
            if not any(e.event == "store" and e.msg_key == key and e.topic == topic and e.queue_id == queue_id
                       and e.queue_offset == queue_offset and e.commitlog_offset == commitlog_offset
                       for e in self.history.events[since:]):
                if pooled and commitlog_offset < self.commitlog_low:
                    continue
                if pooled and self.frontier.get(MessageQueue(topic, queue_id), 0) <= queue_offset:
                    self.answers_owed.append(item)
                    continue
                self._oracle_fail(
                    f"the send of {key} to {topic}/{queue_id} was answered SEND_OK at queue offset "
                    f"{queue_offset}, commitlog offset {commitlog_offset}, and no copy of it is there "
                    "(SendMessageProcessor answers the offsets of the message it stored)")

    def judge_stored_again(self, key: str | None, first: int, retry: int) -> None:
        """The retry of ``key``, whose first answer (commitlog offset ``first``) the producer never got,
        was answered at commitlog offset ``retry``: a new copy, so another offset."""
        if retry == first:
            self._oracle_fail(f"the retry of {key}, whose first answer was lost, was answered with the first "
                              f"copy's commitlog offset {first}: RocketMQ stores every send again (no "
                              "deduplication by UNIQ_KEY; SendMessageProcessor, CommitLog.putMessage)")

    def judge_oneway(self, key: str, since: int) -> bool:
        """Whether the observer revealed a copy of ``key``, sent oneway, since history index ``since``; on
        the manual clock a finding when it did not (module docstring) — unless the broker has a TransientStorePool,
        whose copy is readable only once committed (model/committing.py): then not judged."""
        stored = any(e.event == "store" and e.msg_key == key for e in self.history.events[since:])
        if not stored and type(self).wall is None and not self._pooled():
            self._oracle_fail(f"the oneway send of {key} (a plain message, a queue of its topic, the broker "
                              "running) was never stored: a oneway request is handled as any send, only "
                              "its answer is never written (SendMessageProcessor)")
        return stored

    def _oracle_fail(self, message: str) -> None:
        """A finding of this module: ``ORACLE_PREFIX`` tells it from an invariant's (``bench power``)."""
        self._fail(ORACLE_PREFIX + message)

    # -- edge answers ------------------------------------------------------------------------

    def expect_answer(self, what: str, accepted: bool, stored: bool) -> None:
        """``what`` must be accepted (``stored``) or refused; ``accepted`` is what it was. On the wall
        clock a refusal is not judged: a real broker over the wire may fail a request for reasons of its
        own (a timeout on a 4 MiB body)."""
        if accepted != stored and not (stored and type(self).wall is not None):
            self._oracle_fail(f"the broker {'accepted' if accepted else 'refused'} {what}: RocketMQ "
                              f"{'accepts' if stored else 'refuses'} it (no model consulted)")

    def judge_send_back(self, group: str, m: StoredMessage, code: ResponseCode) -> None:
        """A send-back refused where consumerSendMsgBack has no reason to: the group exists (the
        machine created it), the copy is there (no crash since the observer saw it), and the new
        copy is far from every size limit (its properties grow by RETRY_TOPIC, ORIGIN_MESSAGE_ID and
        DELAY). Manual clock only (a real broker may also be busy). Not judged once retention took files
        (the copy may be gone)."""
        if code == ResponseCode.SUCCESS or type(self).wall is not None or self.crashes or group not in self.groups:
            return
        if getattr(self, "queue_low", None):
            return
        if not self._far_from_limits(m):
            return
        self._oracle_fail(f"the broker refused ({code.name}) the send-back of {m.topic}/{m.queue_id}@{m.queue_offset} "
                          f"(key {m.uniq_key}, commitlog offset {m.commitlog_offset}) by group {group}, which exists: "
                          "consumerSendMsgBack refuses only an unknown group, a copy it cannot find or a copy it "
                          "cannot store (no model consulted)")

    # -- consumer offsets across a kill ------------------------------------------------------

    def query_offset(self, group: str, mq: MessageQueue, label: str = "") -> Outcome:
        """QUERY_CONSUMER_OFFSET; the answer is what the broker holds (``offsets_answered``)."""
        out = self._call(f"query_offset({group!r}, {mq.topic}/{mq.queue_id}){label}",
                         lambda b: b.query_offset(group, mq))
        if out.error is None and isinstance(out.value, int):
            self.offsets_answered[(group, mq)] = out.value
        return out

    def offsets_persisted(self) -> None:
        """The broker persisted its offset table (a periodic persist, a clean shutdown)."""
        self.offsets_on_disk = dict(self.offsets_answered)

    def judge_offsets_read_back(self, kind: str) -> None:
        """After a kill the broker holds what it last persisted: an offset read back below the one it
        held then was lost (ConsumerOffsetManager.persist every flushConsumerOffsetInterval; a kill
        keeps the file). Manual clock only; after a power loss nothing is judged (the file may be
        gone) until the next persist."""
        on_disk, self.offsets_answered = self.offsets_on_disk, {}
        if kind != "kill" or type(self).wall is not None:
            self.offsets_on_disk = {}
            return
        for (group, mq), held in sorted(on_disk.items(), key=lambda kv: (kv[0][0], kv[0][1].topic, kv[0][1].queue_id)):
            out = self.query_offset(group, mq, " [after kill]")
            if out.error is None and isinstance(out.value, int) and out.value < held \
                    and not (held == 0 and out.value == -1 and self._expired_queue(mq)):
                self._oracle_fail(f"after a kill the broker answers offset {out.value} for {group} on "
                                  f"{mq.topic}/{mq.queue_id}, below the {held} it held at its last persist (every "
                                  f"{self.config.flush_consumer_offset_interval_ms} ms, and at a clean shutdown)")
        self.offsets_on_disk = dict(self.offsets_answered)

    def _expired_queue(self, mq: MessageQueue) -> bool:
        """Retention moved the queue's min offset: a group without an offset there is answered
        QUERY_NOT_FOUND (-1), no longer 0 (ConsumerManageProcessor: 0 only while the min is 0)."""
        return any(e.event == "expire" and (e.topic is None or (e.topic, e.queue_id) == (mq.topic, mq.queue_id))
                   for e in self.history.events)

    # -- copies of a send-back ---------------------------------------------------------------

    def judge_pull(self, offset: int, res: PullResult) -> None:
        """A pull at the queue's max offset finds nothing there: NO_NEW_MSG (DefaultMessageStore
        .getMessage: OFFSET_OVERFLOW_ONE, or NO_MESSAGE_IN_QUEUE when it is empty; both
        PULL_NOT_FOUND)."""
        if offset == res.max_offset and res.status is not PullStatus.NO_NEW_MSG:
            self._oracle_fail(f"a pull at offset {offset}, the queue's max offset, was answered {res.status.value}: "
                              "RocketMQ answers NO_NEW_MSG there (OFFSET_OVERFLOW_ONE; no model consulted)")

    def owe_batch(self, keys: list[str], topic: str, first_offset: int, wait: str | None) -> None:
        """The items of a batch answered SEND_OK, the first at ``first_offset``; judged as revealed."""
        if type(self).wall is None:
            self.batch_items.update({key: (topic, first_offset, wait) for key in keys})

    def judge_batch_item(self, m: StoredMessage) -> None:
        topic, first, wait = self.batch_items.pop(m.uniq_key or "", (None, 0, None))
        if topic != m.topic:
            return
        size = self.config.commitlog_file_size
        if m.commitlog_offset // size != first // size:
            self._oracle_fail(f"batch item {m.uniq_key} at commitlog offset {m.commitlog_offset} is not in the file "
                              f"of its batch's first item ({first}): a batch is one append (CommitLog.putMessages)")
        props = m.properties
        if props.get("WAIT") != wait or props.get("CLUSTER") is None:
            self._oracle_fail(f"batch item {m.uniq_key} stored WAIT={props.get('WAIT')!r}, CLUSTER="
                              f"{props.get('CLUSTER')!r}: a batch item keeps the properties the client encoded "
                              f"(WAIT {wait!r}) and gets the batch's CLUSTER (fidelity B18)")

    def judge_copy(self, m: StoredMessage) -> None:
        self.judge_identity(m)
        if m.uniq_key is None:
            return
        if m.uniq_key in self.batch_items:
            self.judge_batch_item(m)
        born = self.born.setdefault(m.uniq_key, m.born_ts)
        # every copy is built from the one before with its bornTimestamp; a key the producer sent again
        # (its answer lost) has copies of two sends (the Java client's sync retry stamps a new one)
        if m.born_ts != born and m.uniq_key not in self.resent:
            self._oracle_fail(f"the copy {m.topic}/{m.queue_id}@{m.queue_offset} of {m.uniq_key} has born timestamp "
                              f"{m.born_ts}, another copy of it {born}: every copy the broker makes keeps the "
                              "producer's (send-back, schedule fire, commit, check re-put, discard, timer fire)")
        if not _internal(m.topic):
            self.origin_ids.setdefault(m.uniq_key, set()).add(m.msg_id)
            self.judge_committed(m)
            return
        dlq = m.topic.startswith("%DLQ%")
        if not (dlq or m.topic.startswith("%RETRY%")):
            return
        where = f"{m.topic}/{m.queue_id}@{m.queue_offset} (key {m.uniq_key}, reconsume_times {m.reconsume_times})"
        if not m.get_property(PROPERTY_RETRY_TOPIC):
            self._oracle_fail(f"the copy a send-back stored in {where} has no RETRY_TOPIC "
                              "(consumerSendMsgBack sets it to the original topic when absent)")
        origin = m.origin_message_id
        seen = self.origin_ids.get(m.uniq_key)
        if seen and origin not in seen:  # the original's copies were all revealed: one is the origin
            self._oracle_fail(f"the copy a send-back stored in {where} carries ORIGIN_MESSAGE_ID {origin!r}, not the "
                              f"msgId of a copy of its key the observer saw ({', '.join(sorted(seen))})")
        if dlq and m.get_property(PROPERTY_DELAY) not in (None, "0"):
            self._oracle_fail(f"the DLQ copy {where} carries DELAY {m.get_property(PROPERTY_DELAY)} "
                              "(consumerSendMsgBack sets the level to 0 on the way to the DLQ)")

    def judge_identity(self, m: StoredMessage) -> None:
        """Manual clock: the msgId and the STOREHOST_V6 bit follow from the store host the machine
        configured the broker with."""
        if type(self).wall is not None:
            return
        cfg, where = self.config, f"{m.topic}/{m.queue_id}@{m.queue_offset}"
        expected = offset_msg_id(cfg.store_host, cfg.store_port, m.commitlog_offset)
        if m.msg_id != expected:
            self._oracle_fail(f"the copy {where} has msgId {m.msg_id}: the offset msgId of commitlog offset "
                              f"{m.commitlog_offset} on {cfg.store_host}:{cfg.store_port} is {expected}")
        v6 = ipaddress.ip_address(cfg.store_host).version == 6
        if bool(m.sys_flag & STOREHOST_V6_FLAG) != v6:
            self._oracle_fail(f"the copy {where} has sysFlag {m.sys_flag:#x}: STOREHOST_V6 must be "
                              f"{'set' if v6 else 'clear'} for the store host {cfg.store_host}")

    def judge_committed(self, m: StoredMessage) -> None:
        """A committed copy in a user topic carries the half's transactional properties (module
        docstring); the version profile says which."""
        if transaction_type(m.sys_flag) != TRANSACTION_COMMIT_TYPE:
            return
        b = self.config.behaviour
        expected: dict[str, str | None] = {PROPERTY_TRAN_MSG: "true"}
        if b.commit_drops_real_queue:
            expected.update({PROPERTY_REAL_TOPIC: None, PROPERTY_REAL_QID: None})
        else:
            expected.update({PROPERTY_REAL_TOPIC: m.topic, PROPERTY_REAL_QID: str(m.queue_id)})
        expected[PROPERTY_TRANSACTION_ID] = m.uniq_key if b.half_transaction_id else None
        wrong = [f"{k}={m.get_property(k)!r} (expected {v!r})" for k, v in expected.items()
                 if m.get_property(k) != v]
        if not m.get_property(PROPERTY_PGROUP):
            wrong.append("PGROUP missing")
        if wrong:
            self._oracle_fail(f"the committed copy {m.topic}/{m.queue_id}@{m.queue_offset} (key {m.uniq_key}) "
                              f"has {'; '.join(wrong)}: EndTransactionProcessor stores the half's properties "
                              f"({self.config.version})")

    def judge_stale_pull(self, group: str, res: PullResult | None) -> None:
        """Manual clock: once a group's last member unregistered, its pull without the subscription flag
        is refused (the group's info left with its last client: ConsumerManager.unregisterConsumer)."""
        if res is not None and type(self).wall is None:
            self._oracle_fail(f"after the last member of {group} unregistered, its pull without the subscription "
                              f"flag was served ({res.status.value}): the group's info left with its last client "
                              "(ConsumerManager.unregisterConsumer), so PullMessageProcessor finds no "
                              "subscription (SUBSCRIPTION_NOT_EXIST)")

    def judge_check_round(self, round_due: bool, requests: list[CheckRequest]) -> None:
        """Manual clock: a tick that sent check requests ran a round, so one was due."""
        if requests and not round_due and self.rounds_mirrored and type(self).wall is None:
            self._oracle_fail(f"the broker sent {len(requests)} check request(s) at the tick at {self._now()}, "
                              f"when no check round was due (the last at {self._timer('round')}, every "
                              f"{self.config.transaction_check_interval_ms} ms: transactionCheckInterval)")

    # -- fires at the tick -------------------------------------------------------------------

    def _fire_state(self, m: StoredMessage, deliver_ts: int) -> str:
        """``owed`` (the tick must fire it), ``half`` (discarded, never fired: the service moves past
        it) or ``unknown`` (whether it can fire is not known here: its queue is not revealed, or its
        rebuilt record may meet a size limit and the put fail, which stops its level)."""
        real = m.get_property(PROPERTY_REAL_TOPIC)
        if real == HALF_TOPIC:
            return "half"
        if m.uniq_key is None or real is None or real in self.unrevealable or deliver_ts <= m.store_ts:
            return "unknown"
        try:
            qid = int(m.get_property(PROPERTY_REAL_QID) or "")
        except ValueError:
            return "unknown"
        if MessageQueue(real, qid) not in self.frontier or not self._far_from_limits(m):
            return "unknown"
        return "owed"

    def _far_from_limits(self, m: StoredMessage) -> bool:
        props = sum(len(k) + len(v) + 2 for k, v in m.properties.items())
        room = min(self.config.commitlog_file_size - END_FILE_MIN_BLANK_LENGTH, MAX_BODY_BYTES)
        return props + LIMIT_SLACK <= MAX_PROPERTIES_LENGTH and len(m.body) + props + LIMIT_SLACK <= room

    def schedule_copy_seen(self, m: StoredMessage, deliver_ts: int) -> None:
        if self.crashes:
            return
        copy = ScheduledCopy(m.uniq_key, m.reconsume_times, deliver_ts, self._fire_state(m, deliver_ts),
                             m.commitlog_offset)
        unmatched = self.fires_unmatched.get((m.uniq_key or "", m.reconsume_times), [])
        early = [ts for ts in unmatched if ts >= deliver_ts]
        if early and copy.state != "half":  # its fire was revealed first (a level nobody asked for)
            unmatched.remove(min(early))
            copy.state = "fired"
        self.sched_queue.setdefault(m.queue_id, []).append(copy)  # revealed in queue order: a FIFO

    def fire_seen(self, m: StoredMessage) -> None:
        """A copy of (key, reconsume_times) outside the schedule topic: the schedule copy it was fired
        from is the earliest-due one of that identity that was due when it was stored (another of the
        same identity, sent back again later or at another level, may still wait)."""
        mine = [c for copies in self.sched_queue.values() for c in copies
                if c.key == m.uniq_key and c.r == m.reconsume_times and c.state in ("owed", "unknown")]
        if mine:
            due = [c for c in mine if c.due <= m.store_ts]
            min(due or mine, key=lambda c: c.due).state = "fired"
        elif m.uniq_key is not None:
            self.fires_unmatched.setdefault((m.uniq_key, m.reconsume_times), []).append(m.store_ts)

    def ticked(self, now: int) -> None:
        if self.crashes == 0:
            self.ticked_at = now

    def crashed_oracles(self) -> None:
        self.sched_queue.clear()
        self.fires_unmatched.clear()
        self.ticked_at = None

    def judge_fires(self) -> None:
        """After a reveal: in each level, the copies before the first one not yet due (or whose fate
        is unknown) have all been fired (or discarded) by the last tick. Not with a TransientStorePool: a copy
        fired at a tick is readable only once the CommitRealTimeService commits it, up to 200 ms later, which
        may be after the next tick (model/committing.py); lockstep judges those fires."""
        if type(self).wall is not None or self.ticked_at is None or self.crashes \
                or self._pooled():
            return
        if self.ticked_at <= self.disk_full_until:  # a full disk refused the fire's put at that tick: retried once
            return  # there is room
        for level, copies in sorted(self.sched_queue.items()):
            for c in copies:
                if c.state in ("fired", "half"):
                    continue
                if c.state == "unknown" or c.due > self.ticked_at or (
                        c.offset is not None and c.offset < self.commitlog_low):  # retention took it
                    break
                self._oracle_fail(f"the broker ticked at {self.ticked_at} and did not fire the scheduled copy of "
                                  f"{c.key} (reconsume_times {c.r}, level {level + 1}) due at {c.due}, every copy "
                                  "before it in its level fired: tick() runs the services due by now (SPEC §3)")
