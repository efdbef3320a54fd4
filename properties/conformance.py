"""The conformance state machine (SPEC §7): any ``Broker`` against the invariants.

Theory of operation
-------------------
``conformance_machine(broker_factory)`` returns a Hypothesis
``RuleBasedStateMachine`` class. Each example builds a fresh ``ManualClock``
(start 2023-11-14, so UNIQ_KEYs look real), the default ``BrokerConfig``
(delays are never shortened; large clock jumps make them reachable) and an
empty temporary ``workdir``, and calls ``broker_factory(clock, config,
workdir)``. In lockstep mode a ``ModelBroker`` on the same clock and config
runs beside it (``properties/lockstep.py``): every broker call goes to both and
every observable result is compared.

Who acts: the machine plays producers (``P0``, transactional ``PG``), the
reference concurrent consumer (groups ``G0``…, one ``ProcessQueue`` per
queue, RocketMQ's commit rule), the orderly consumer (group ``OG``, clients
``c1``–``c3`` with client-side lock lifetimes) and a private observer group
that *reveals* every known queue after each step so that where copies land,
and when they become visible, are observations (``properties/history.py``).

Rules (SPEC §7): create topics/groups; send plain/keyed/delayed/batch; pull
(incl. beyond the end: OFFSET_ILLEGAL) and consume with SUCCESS,
RECONSUME_LATER, exception or a partial ackIndex; send-back failures; the
observer's tag-filtered probe pull; orderly lock/renew/unlock/rebalance,
begin/finish (SUCCESS or SUSPEND, DLQ at the limit); half send, commit,
rollback, UNKNOWN, lost end-transaction, duplicate commit (not in ``strict``),
check replies; clock advance (small, large, and to a deadline ± 1 ms / 1 s)
+ tick; flush; crash (kill/power) + recover when the broker has
``Capability.CRASH`` (not in ``strict``); drain. The deep rules of
``composite.py`` (a mixin: clean shutdown + reopen, the lifecycle ladders, the
``beat`` heartbeat, swarm families, depth targets, lifecycle coverage) add to
them. ``always`` invariants run after every step (``@invariant``),
``eventually`` ones after a drain; the teardown drains.

Deviations from a real deployment: clients and broker share one clock (no
drift); an orderly window never outlives the client's broker lock (the
machine clamps clock jumps while a window is open, which is the SPEC §4.5
premise "client lifetime + latency < broker lifetime"); a broker crash
restarts the clients too (process queues and client locks are dropped).
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import attrs
import hypothesis
import hypothesis.errors
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from rmqspec.model.clock import ManualClock
from rmqspec.model.config import BrokerConfig
from rmqspec.model.ids import UniqKeyFactory
from rmqspec.model.javahash import java_string_hash
from rmqspec.model.message import Message, MessageQueue, StoredMessage
from rmqspec.model.process_queue import ProcessQueue
from rmqspec.model.protocol import Capability
from rmqspec.model.queues import HALF_TOPIC, OP_TOPIC
from rmqspec.model.results import (
    CheckRequest,
    PullResult,
    PullStatus,
    ResponseCode,
    TxnAction,
)
from rmqspec.model.transactions import CID_RMQ_SYS_TRANS
from rmqspec.properties import invariants as inv
from rmqspec.properties.composite import PRELUDE, SWARM, DeepRules
from rmqspec.properties.filters import FILTER_ACTIONS, FilterRules
from rmqspec.properties.history import (
    CLIENT_LOCK_MS,
    DISCARD_TOPIC,
    SCHEDULE_TOPIC,
    History,
    audit_params,
    dlq_topic,
    group_of,
    retry_topic,
)
from rmqspec.properties.lockstep import Lockstep, Outcome
from rmqspec.properties.program import Op, render
from rmqspec.properties.session import SessionView
from rmqspec.properties.shrink import signature_of
from rmqspec.properties.wallclock import (
    WallLateness,
    WallOptions,
    in_window,
    mask_times,
    round_points,
    sleep_until,
    wall_ms,
)

START_MS = 1_700_000_000_000
OBSERVER = "rmqspec_observer"
PRODUCER = "P0"
TXN_GROUP = "PG"
ORDERLY_GROUP = "OG"
CLIENTS = ("c1", "c2", "c3")
TAGS = (None, "TagA", "TagB", "TagC")
MAX_TOPICS = 3
ROUND_QUIET_MS = 300  # wall: a round's checks are complete when none came for this long
MAX_GROUPS = 3
DRAIN_ROUNDS = 160
CONSUME_TIMEOUT_ROUNDS = 64

PICK = st.integers(0, 255)
SMALL_MS = st.integers(1, 10_000)
LARGE_MS = st.integers(60_000, 6 * 3_600_000)


@attrs.frozen
class Profile:
    """``rocketmq-4.9``: faithful; ``strict``: observations are violations (no crash, no re-commit)."""

    name: str
    strict: bool


PROFILES = {"rocketmq-4.9": Profile("rocketmq-4.9", False), "strict": Profile("strict", True)}


@attrs.define
class GroupState:
    retry_max: int
    retry_queue_nums: int
    orderly: bool = False


@attrs.define
class Txn:
    key: str
    topic: str
    queue_id: int
    commitlog_offset: int
    half_offset: int
    plan: str  # COMMIT / ROLLBACK / UNKNOWN (never decides: discarded) / LOST
    decided: str | None = None
    ended: bool = False
    discarded: bool = False
    # The half was acknowledged but unflushed when power failed (ASYNC): it may be gone and
    # its commitlog offset reused by a later half, so an END_TRANSACTION carrying the old
    # offsets could resolve someone else's half (RocketMQ 4.9 checks only offsets and
    # PGROUP). The producer of this machine then leaves the outcome to the check service.
    maybe_lost: bool = False


@attrs.define
class Window:
    client: str
    mq: MessageQueue
    batch: list[StoredMessage]
    lock_ts: int


class MachineFailure(AssertionError):
    """A violated invariant or a lockstep mismatch, with the replayable program."""


def _pick(seq: list | tuple, i: int) -> Any:
    return seq[i % len(seq)]


def _origin(m: StoredMessage) -> str | None:
    """The copy a retry descends from (ORIGIN_MESSAGE_ID); a first-generation copy is its own."""
    return m.origin_message_id or (m.msg_id if m.reconsume_times == 0 else None)


def _enabled(cond: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A precondition that depends on what the broker did and when. On the wall clock that is not
    reproducible, and Hypothesis needs the choice of rules to be: there the rule is always drawn and
    idles when ``cond`` does not hold (the rule body checks it again)."""
    return precondition(lambda self: type(self).wall is not None or bool(cond(self)))


class ConformanceBase(DeepRules, FilterRules, RuleBasedStateMachine):
    """Rules and state; ``conformance_machine`` binds the factory, mode and profile."""

    broker_factory: Callable[..., Any]
    model_factory: Callable[..., Any] | None = None
    lockstep_mode: bool = True
    profile: Profile = PROFILES["rocketmq-4.9"]
    recorder_factory: Callable[[], Any] | None = None
    coverage: Counter
    observations: Counter
    examples: list[int]
    last_program: list[Op]
    last_failure: list[str]
    failed_program: list[Op]
    first_failure: list[str]
    last_change: list[int]  # [ms]: see changed_at
    check_lag: list[int]  # [ms]: see _learn_check_lag
    # every distinct failure of the run: signature -> (message, program when it happened)
    failures: dict[str, tuple[str, list[Op]]]
    lifecycle: Counter  # lifecycle rows taken (properties/coverage.py), across examples
    rules_run: Counter  # rules executed (the programs' ops), across examples
    drain_on_teardown = True
    # wall-clock mode (properties/wallclock.py): None = the manual clock
    wall: WallOptions | None = None
    base_config: BrokerConfig | None = None
    lateness: WallLateness | None = None

    def __init__(self) -> None:
        super().__init__()
        wall = type(self).wall
        self.clock = ManualClock(wall_ms() if wall else START_MS)
        self.config = type(self).base_config or BrokerConfig()
        # names: fresh per example on a broker that outlives the example (wall-clock mode)
        self.ns = f"_{wall.run_tag}{len(type(self).examples):03d}" if wall else ""
        self.og, self.pg, self.obs, self.t0 = ORDERLY_GROUP + self.ns, TXN_GROUP + self.ns, OBSERVER + self.ns, \
            "T0" + self.ns
        self.client_lock_ms = CLIENT_LOCK_MS
        if wall:  # the client never trusts a lock the broker may already have freed
            self.client_lock_ms = min(CLIENT_LOCK_MS, self.config.broker_lock_max_live_ms
                                      - wall.tolerance_ms - 2 * wall.guard_ms)
        self.model_time = self.clock.now()  # wall: the model's background work is done up to here
        self.check_phase: int | None = None  # wall: when the broker was last seen to run a check round
        # wall: a check round ran without checks since the last one: no re-put copy of a resolved half
        # is left to be checked (a broker that outlives the example must be idle when it ends)
        self.txn_settled = True
        self.buffered_checks: list[tuple[int, CheckRequest]] = []
        self.seen_rounds: list[int] = []  # wall: the rounds the broker was seen to run, by arrival
        self.workdir = tempfile.mkdtemp(prefix="rmqspec-conform-")
        recorder = type(self).recorder_factory() if type(self).recorder_factory else None
        self.history = History.for_config(self.config, recorder)
        self.recorder = recorder
        self.program: list[Op] = []
        type(self).last_program = self.program
        type(self).last_failure[:] = []
        type(self).examples.append(1)
        self.failed = False
        self.ls: Lockstep | None = None
        self.can_crash = False
        self.uniq = UniqKeyFactory(client_ip="10.0.0.7", pid=4242)
        self.topics: dict[str, int] = {}
        self.groups: dict[str, GroupState] = {}
        self.pqs: dict[tuple[str, MessageQueue], ProcessQueue] = {}
        self.next_pull: dict[tuple[str, MessageQueue], int] = {}
        self.client_committed: dict[tuple[str, MessageQueue], int] = {}
        self.committed_keys: set[tuple[str, MessageQueue]] = set()  # ever committed (clean restart check)
        self.local_failures: Counter = Counter()
        self.client_lock: dict[tuple[str, MessageQueue], int] = {}
        self.opqs: dict[tuple[str, MessageQueue], ProcessQueue] = {}
        self.windows: dict[tuple[str, MessageQueue], Window] = {}
        self.orderly_failures: Counter = Counter()
        self.broker_grants: dict[MessageQueue, tuple[str, int]] = {}
        self.txns: dict[str, Txn] = {}
        self.pending_checks: list[CheckRequest] = []
        self.frontier: dict[MessageQueue, int] = {}
        self.unrevealable: set[str] = set()
        self.expect_fire: dict[tuple[str, str, int, str | None, int], int] = {}
        self.expect_seq = 0
        self.crashes = 0  # crashes so far (a copy fired before one may fire again)
        self.fired_in_epoch: dict[tuple, int] = {}
        self.sched_levels: set[int] = set()
        self.pull_seq = 0
        self.body_seq = 0
        self.last_flush_seq = 0

    # ------------------------------------------------------------------
    # plumbing

    def _record(self, rule_name: str, **args: Any) -> None:
        if type(self).wall is not None and self.ls is not None:
            self._wall_before(rule_name)
        self.program.append(Op.of(rule_name, **args))
        self.history.step = len(self.program)
        self.coverage[rule_name] += 1
        # outside Hypothesis (program.replay) there is no test to attach an event to
        with contextlib.suppress(hypothesis.errors.InvalidArgument):
            hypothesis.event(f"rule {rule_name}")

    def _holds(self, cond: Callable[[], Any]) -> bool:
        """``cond`` after the wall-clock sync point (the broker may have moved on its own)."""
        if type(self).wall is not None and self.ls is not None:
            self._wall_before("")
        return bool(cond())

    def _idle(self, rule_name: str) -> None:
        self._sometimes(f"idle:{rule_name}")

    def _sometimes(self, what: str) -> None:
        self.coverage[what] += 1

    def _fail(self, message: str) -> None:
        self.failed = True
        text = (
            f"{message}\n\nreplayable program ({len(self.program)} ops; "
            "rmqspec.properties.program.replay(PROGRAM, factory)):\n" + render(self.program)
        )
        type(self).last_failure[:] = [message, render(self.program)]
        if not type(self).failed_program:  # the first failure of a run is the finding
            type(self).failed_program[:] = list(self.program)
            type(self).first_failure[:] = [message]
        type(self).failures.setdefault(signature_of(message), (message, list(self.program)))
        raise MachineFailure(text)

    def _call(self, op: str, fn: Callable[[Any], Any], candidate_fn: Callable[[Any], Any] | None = None) -> Outcome:
        try:
            return self.ls.call(op, fn, candidate_fn)
        except MachineFailure:
            raise
        except AssertionError as exc:
            self._fail(str(exc))
            raise  # unreachable
        except Exception as exc:  # the candidate (or a model fork) raised: a finding with its program
            message = f"candidate raised {type(exc).__name__} in {op}: {exc!r}"
            type(self).failures.setdefault(signature_of(message), (message, list(self.program)))
            raise

    def _now(self) -> int:
        return self.clock.now()

    def _emit(self, event: str, **fields: Any) -> None:
        self.history.emit(event, self._now(), **fields)

    def _message(self, topic: str, tags: str | None = None, keys: tuple[str, ...] = (),
                 props: dict[str, str] | None = None, delay: int = 0) -> Message:
        self.body_seq += 1
        return Message(topic=topic, body=b"body-%d" % self.body_seq, tags=tags, keys=keys,
                       properties=props or {}, delay_level=delay,
                       uniq_key=self.uniq.next(self._now()))

    # ------------------------------------------------------------------
    # set-up

    def _create_topic(self, topic: str, queue_nums: int) -> None:
        self._call(f"create_topic({topic!r}, {queue_nums})", lambda b: b.create_topic(topic, queue_nums))
        self.topics[topic] = queue_nums
        for q in range(queue_nums):
            self.frontier.setdefault(MessageQueue(topic, q), 0)
        for g, state in self.groups.items():
            if not state.orderly:
                self.history.subscriptions[g].add(topic)

    def _create_group(self, group: str, retry_max: int, retry_queue_nums: int, orderly: bool) -> None:
        self._call(f"create_group({group!r}, {retry_max}, {retry_queue_nums})",
                   lambda b: b.create_group(group, retry_max, retry_queue_nums))
        self.groups[group] = GroupState(retry_max, retry_queue_nums, orderly)
        self.history.set_group_max(group, retry_max)
        if orderly:
            self.history.subscriptions[group] = {self.t0}
            self.history.orderly_groups.add(group)
        else:
            self.history.subscriptions[group] = set(self.topics)
            for q in range(retry_queue_nums):
                self.frontier.setdefault(MessageQueue(retry_topic(group), q), 0)
        self.frontier.setdefault(MessageQueue(dlq_topic(group), 0), 0)

    @initialize(
        queues=st.integers(1, 4),
        retry_max=st.sampled_from([0, 1, 2, 3, 16]),
        orderly_max=st.sampled_from([0, 1, 2, 16]),
        flush=st.sampled_from(["ASYNC", "SYNC"]),
        swarm=SWARM,
        prelude=PRELUDE,
    )
    def init(self, queues: int, retry_max: int, orderly_max: int, flush: str = "SYNC", swarm: int = 0,
             prelude: tuple | None = None) -> None:
        wall = type(self).wall
        if wall is not None:  # the remote broker's flush mode is its own (--config); ladders stay short
            flush, retry_max, orderly_max = self.config.flush, min(retry_max, wall.max_retry), \
                min(orderly_max, wall.max_retry)
        self._record("init", queues=queues, retry_max=retry_max, orderly_max=orderly_max,
                     flush=flush, swarm=swarm)
        # the wall clock's budget is a dozen examples: every family stays on (the draw is kept so the
        # draw structure does not depend on the mode)
        self._set_swarm(0 if wall is not None else swarm)
        self.config = attrs.evolve(self.config, flush=flush)
        if wall is None:  # SQL92 pulls (properties/filters.py); a remote broker keeps its own setting
            self.config = attrs.evolve(self.config, enable_property_filter=True)
        self.history.params = audit_params(self.config)
        candidate = type(self).broker_factory(self.clock, self.config, self.workdir)
        if wall is not None:
            address = getattr(candidate, "broker_addr", None)
            if isinstance(address, str) and ":" in address:  # offset msgIds name the broker's own address
                host, _, port = address.rpartition(":")
                self.config = attrs.evolve(self.config, store_host=host, store_port=int(port))
            candidate = SessionView(candidate, self.config.max_delay_level)
        model = None
        if type(self).lockstep_mode:
            make = type(self).model_factory or _default_model_factory()
            model = make(self.clock, self.config)
            if wall is not None:
                model.external_check_rounds = True
        self.ls = Lockstep(candidate, model, self.clock, normalize=mask_times if wall else None)
        self.can_crash = Capability.CRASH in getattr(candidate, "capabilities", frozenset())
        self._call(f"create_group({self.obs!r})", lambda b: b.create_group(self.obs, 16, 1))
        if wall is not None:
            candidate.open(self.obs, self.clock, settle_ms=self.config.transaction_timeout_ms
                           + self.config.transaction_check_interval_ms + wall.tolerance_ms)
            for topic in sorted(candidate.existing):  # earlier examples made them: the model has them too
                self.ls.on_forks(lambda b, topic=topic: b.store.ensure_topic(
                    topic, self.config.max_delay_level if topic == SCHEDULE_TOPIC else 1))
        self._create_topic(self.t0, queues)
        self._create_group("G0" + self.ns, retry_max, 1, False)
        self._create_group(self.og, orderly_max, 1, True)
        self.frontier.setdefault(MessageQueue(DISCARD_TOPIC, 0), 0)
        self._after()
        self._prelude(prelude)  # records itself as the next op (``init`` does not record it)

    @precondition(lambda self: self._on("admin"))
    @precondition(lambda self: len(self.topics) < MAX_TOPICS)
    @rule(queues=st.integers(1, 4))
    def create_topic(self, queues: int) -> None:
        self._record("create_topic", queues=queues)
        self._create_topic(f"T{len(self.topics)}{self.ns}", queues)
        self._after()

    @precondition(lambda self: self._on("admin"))
    @precondition(lambda self: len([g for g in self.groups if g.startswith("G")]) < MAX_GROUPS)
    @rule(retry_max=st.sampled_from([0, 1, 2, 3, 16]), retry_queue_nums=st.sampled_from([1, 1, 2]))
    def create_group(self, retry_max: int, retry_queue_nums: int) -> None:
        if type(self).wall is not None:
            retry_max = min(retry_max, type(self).wall.max_retry)
        self._record("create_group", retry_max=retry_max, retry_queue_nums=retry_queue_nums)
        n = len([g for g in self.groups if g.startswith("G")])
        self._create_group(f"G{n}{self.ns}", retry_max, retry_queue_nums, False)
        self._after()

    # ------------------------------------------------------------------
    # producers

    def _send(self, msg: Message, queue_id: int, sharding_key: str | None = None) -> None:
        out = self._call(f"send({msg.topic}/{queue_id}, {msg.uniq_key}, delay={msg.delay_level})",
                         lambda b: b.send(msg, queue_id))
        if out.error is not None:
            self.history.emit("send", self._now(), trace=False, topic=msg.topic, queue_id=queue_id,
                              msg_key=msg.uniq_key, status="FAILED", detail={"error": out.error[1]})
            self._sometimes("send_refused")
            return
        res = out.value
        self._emit("send", actor=PRODUCER, group=PRODUCER, topic=msg.topic, queue_id=queue_id,
                   queue_offset=res.queue_offset, commitlog_offset=res.commitlog_offset,
                   msg_key=msg.uniq_key, msg_id=res.msg_id, delay_level=msg.delay_level or None,
                   status=res.status.value, sharding_key=sharding_key)
        if msg.delay_level > 0:
            level = min(msg.delay_level, self.config.max_delay_level)
            self.sched_levels.add(level)
            self._expect_fire(msg.topic, msg.uniq_key, 0, None, self._now() + self.config.delay_ms(level))

    def send_plain(self, topic: int, queue: int, tags: str | None, keys: tuple, props: bool) -> None:
        self._record("send_plain", topic=topic, queue=queue, tags=tags, keys=keys, props=props)
        name = _pick(sorted(self.topics), topic)
        msg = self._message(name, tags, keys, {"color": "blue"} if props else None)
        self._send(msg, queue % self.topics[name])
        self._after()

    def send_keyed(self, topic: int, key: str) -> None:
        self._record("send_keyed", topic=topic, key=key)
        name = _pick(sorted(self.topics), topic)
        queue = abs(java_string_hash(key)) % self.topics[name]
        self._send(self._message(name, "TagA", (key,)), queue, sharding_key=key)
        self._after()

    def send_delayed(self, topic: int, queue: int, level: int) -> None:
        if type(self).wall is not None:
            level = min(level, type(self).wall.max_level)
        self._record("send_delayed", topic=topic, queue=queue, level=level)
        name = _pick(sorted(self.topics), topic)
        self._send(self._message(name, "TagB", delay=level), queue % self.topics[name])
        self._after()

    def send_batch(self, topic: int, queue: int, n: int) -> None:
        self._record("send_batch", topic=topic, queue=queue, n=n)
        name = _pick(sorted(self.topics), topic)
        for i in range(n):
            self._send(self._message(name, TAGS[i % len(TAGS)]), queue % self.topics[name])
        self._after()

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
        out = self._call(f"query_offset({group!r}, {mq.topic}/{mq.queue_id})",
                         lambda b: b.query_offset(group, mq))
        value = out.value if out.error is None else -1
        return max(value, 0)

    def _pull(self, group: str, mq: MessageQueue, offset: int, max_nums: int, client: str,
              sub: str = "*", deliver: bool = True) -> PullResult | None:
        out = self._call(f"pull({group!r}, {mq.topic}/{mq.queue_id}, offset={offset}, "
                         f"max={max_nums}, sub={sub!r})",
                         lambda b: b.pull(group, mq, offset, max_nums, sub))
        if out.error is not None:
            self._sometimes(f"pull_error:{out.error[1]}")
            return None
        res: PullResult = out.value
        self._sometimes(f"pull:{res.status.value}")
        self.pull_seq += 1
        pull_seq = self.pull_seq
        self._emit_delivers(res, group, client, deliver,
                            lambda m: {"pull": pull_seq, "from": offset, "tags": m.tags,
                                       "subscription": sub, "client": deliver, "origin": m.origin_message_id})
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
        stored = self._call(f"query_offset({group!r}, {mq.topic}/{mq.queue_id})",
                            lambda b: b.query_offset(group, mq))
        self._emit("commit_offset", actor=client, group=group, client_id=client, topic=mq.topic,
                   queue_id=mq.queue_id, queue_offset=stored.value if stored.error is None else None,
                   detail={"requested": offset})

    def _send_back(self, group: str, m: StoredMessage, level: int, max_times: int | None,
                   client: str) -> ResponseCode:
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
        out = self._call(
            f"send_back({group!r}, {m.commitlog_offset}, level={level}, max={max_times})",
            lambda b: b.send_back(group, m.commitlog_offset, level, m.uniq_key, max_times))
        code = out.value if out.error is None else ResponseCode.SYSTEM_ERROR
        deliver_ts = None if routed_dlq else self._now() + self.config.delay_ms(new_level)
        self.history.emit(
            "send_back", self._now(), trace=code == ResponseCode.SUCCESS, actor=client, group=group,
            client_id=client, topic=m.topic, queue_id=m.queue_id, queue_offset=m.queue_offset,
            commitlog_offset=m.commitlog_offset, msg_key=m.uniq_key, msg_id=m.msg_id,
            reconsume_times=m.reconsume_times + 1, delay_level=new_level, deliver_ts=deliver_ts,
            status="DLQ" if routed_dlq else "RETRY",
            detail={"code": ResponseCode(code).name, "requested_level": level, "max": effective,
                    "origin": _origin(m)},
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
        return ResponseCode(code)

    def _consume(self, group: str, mq: MessageQueue, n: int, result: str, ack_index: int,
                 level: int, max_choice: str) -> None:
        pq = self.pqs[(group, mq)]
        batch = [pq.get(o) for o in pq.offsets()[:n]]
        client = "consumer-" + group
        if result == "SUCCESS":
            acked = len(batch) if ack_index < 0 else min(ack_index, len(batch) - 1) + 1
        else:
            acked = 0
        state = self.groups[group]
        max_times = {"none": None, "group": state.retry_max,
                     "client": -1 if state.retry_max == 16 else None}[max_choice]
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
            code = self._send_back(group, m, level, max_times, client)
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
                max_choice: str) -> None:
        self._record("consume", which=which, n=n, result=result, ack_index=ack_index, level=level,
                     max_choice=max_choice)
        group, mq = _pick(self._pq_keys(), which)
        if result == "SUCCESS" and 0 <= ack_index < n - 1:
            self._sometimes("consume:partial_ack")
        self._consume(group, mq, n, result, ack_index, level, max_choice)
        self._after()

    def _ready(self) -> list[tuple[str, MessageQueue]]:
        return [(g, q) for g in self._consumer_groups() for q in self._group_mqs(g)
                if self.frontier.get(q, 0) > self.next_pull.get((g, q), 0)
                or ((g, q) in self.pqs and self.pqs[(g, q)].has_temp_message())]

    def pull_consume(self, which: int, n: int, result: str, ack_index: int, level: int,
                     max_choice: str) -> None:
        """The usual cycle: pull a queue with messages, hand a batch to the listener."""
        self._record("pull_consume", which=which, n=n, result=result, ack_index=ack_index,
                     level=level, max_choice=max_choice)
        group, mq = _pick(self._ready(), which)
        self._pull_into_pq(group, mq, 8)
        if self.pqs[(group, mq)].has_temp_message():
            if result == "SUCCESS" and 0 <= ack_index < n - 1:
                self._sometimes("consume:partial_ack")
            self._consume(group, mq, n, result, ack_index, level, max_choice)
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
        if pq is None:
            pq = self.opqs[key] = ProcessQueue(self._now())
            pq.next_offset = self._start_offset(self.og, mq)  # type: ignore[attr-defined]
        if not pq.has_temp_message():
            res = self._pull(self.og, mq, pq.next_offset, 8, client)  # type: ignore[attr-defined]
            if res is not None and res.status is PullStatus.FOUND:
                pq.put_messages(res.messages)
                pq.next_offset = res.next_begin_offset  # type: ignore[attr-defined]
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
            over = [m for m in w.batch if self.orderly_failures[(m.commitlog_offset,)] >= limit]
            if over:  # limit reached: send back (the broker routes it to the DLQ), then commit
                for m in w.batch:
                    self._emit("consume", actor=w.client, group=group, client_id=w.client,
                               topic=m.topic, queue_id=m.queue_id, queue_offset=m.queue_offset,
                               msg_key=m.uniq_key, msg_id=m.msg_id,
                               reconsume_times=m.reconsume_times, status="RECONSUME_LATER")
                    self._send_back(group, m, -1, None, w.client)
                self._sometimes("orderly_dlq")
                status = "DLQ"
            else:
                for m in w.batch:
                    self._emit("consume", actor=w.client, group=group, client_id=w.client,
                               topic=m.topic, queue_id=m.queue_id, queue_offset=m.queue_offset,
                               msg_key=m.uniq_key, msg_id=m.msg_id,
                               reconsume_times=m.reconsume_times, status="RECONSUME_LATER")
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

    # ------------------------------------------------------------------
    # transactions

    @precondition(lambda self: self._on("txn"))
    @rule(topic=PICK, queue=PICK, plan=st.sampled_from(["COMMIT", "ROLLBACK", "UNKNOWN", "LOST"]))
    def txn_send_half(self, topic: int, queue: int, plan: str) -> None:
        self._record("txn_send_half", topic=topic, queue=queue, plan=plan)
        self._send_half(topic, queue, plan)
        self._after()

    def txn_half_before_check(self, topic: int, queue: int) -> None:
        """CHECK: a half sent half a timeout before a check run must not be checked in that run."""
        self._record("txn_half_before_check", topic=topic, queue=queue)
        interval = self.config.transaction_check_interval_ms
        boundary = START_MS + ((self._now() - START_MS) // interval + 1) * interval
        probe = boundary - self.config.transaction_timeout_ms // 2
        if probe > self._now():
            self._advance(probe - self._now())
        self._send_half(topic, queue, "LOST")
        self._sometimes("txn_half_before_check")
        self._advance(max(0, boundary - self._now()))
        self._after()

    def _send_half(self, topic: int, queue: int, plan: str) -> None:
        name = _pick(sorted(self.topics), topic)
        qid = queue % self.topics[name]
        msg = self._message(name, "TagA")
        out = self._call(f"send_half({name}/{qid}, {msg.uniq_key})",
                         lambda b: b.send_half(msg, qid, self.pg))
        if out.error is None:
            res = out.value
            self.txns[msg.uniq_key] = Txn(msg.uniq_key, name, qid, res.commitlog_offset,
                                          res.queue_offset, plan)
            self._emit("txn_half", actor=self.pg, group=self.pg, topic=name, queue_id=qid,
                       queue_offset=res.queue_offset, commitlog_offset=res.commitlog_offset,
                       msg_key=msg.uniq_key, msg_id=res.msg_id, txn_id=msg.uniq_key,
                       status=res.status.value)

    def _end(self, txn: Txn, action: TxnAction, commitlog_offset: int, tsto: int, from_check: bool) -> None:
        if type(self).wall is not None and self.ls is not None:
            # drain answers checks after its reveals, which may take seconds: by then the broker's next
            # round may be re-putting the same half (4.9.8 checks a half every round until its op
            # exists), so the answer, like every request, leaves outside a round's quiet window and
            # after the model replayed the rounds before it (docs/fidelity.md O2)
            self._wall_before("")
        out = self._call(
            f"end_transaction({self.pg!r}, {commitlog_offset}, {tsto}, {action.value}, {from_check})",
            lambda b: b.end_transaction(self.pg, commitlog_offset, tsto, action, from_check))
        code = out.value if out.error is None else ResponseCode.SYSTEM_ERROR
        if type(self).wall is not None and self.ls.enabled and code == ResponseCode.SUCCESS:
            self.ls.candidate.op_landed(self.ls.model.store.records[-1].commitlog_offset)
        self._sometimes(f"txn_end:{action.value}:{ResponseCode(code).name}")
        if code == ResponseCode.SUCCESS:
            self._emit("txn_end", actor=self.pg, group=self.pg, topic=txn.topic,
                       queue_id=txn.queue_id, msg_key=txn.key, txn_id=txn.key, status=action.value,
                       commitlog_offset=commitlog_offset, queue_offset=tsto,
                       detail={"from_check": from_check})
            if action is not TxnAction.UNKNOWN:
                txn.decided = action.value

    def _open_txns(self) -> list[Txn]:
        return [t for k, t in sorted(self.txns.items()) if not t.ended and not t.discarded]

    @precondition(lambda self: self._on("txn"))
    @_enabled(lambda self: self._open_txns())
    @rule(which=PICK)
    def txn_end(self, which: int) -> None:
        """The producer's local transaction finished: it sends its plan (or loses the request)."""
        if not self._holds(lambda: self._open_txns()):
            return self._idle('txn_end')
        self._record("txn_end", which=which)
        txn = _pick(self._open_txns(), which)
        txn.ended = True
        if txn.plan == "LOST":
            self._sometimes("txn_end_lost")
        elif txn.maybe_lost:
            self._sometimes("txn_end_withheld_after_power_loss")
        elif txn.decided is None:
            self._end(txn, TxnAction(txn.plan), txn.commitlog_offset, txn.half_offset, False)
        self._after()

    def _committed(self) -> list[Txn]:
        return [t for k, t in sorted(self.txns.items()) if t.decided == "COMMIT" and not t.maybe_lost]

    @precondition(lambda self: self._on("txn"))
    @_enabled(lambda self: not self.profile.strict and self._committed())
    @rule(which=PICK)
    def txn_recommit(self, which: int) -> None:
        """A duplicate END_TRANSACTION COMMIT (4.9 writes a second message: an observation)."""
        if not self._holds(lambda: not self.profile.strict and self._committed()):
            return self._idle('txn_recommit')
        self._record("txn_recommit", which=which)
        txn = _pick(self._committed(), which)
        self._end(txn, TxnAction.COMMIT, txn.commitlog_offset, txn.half_offset, False)
        self._after()

    def _check_answer(self, req: CheckRequest, answer: str | None) -> None:
        key = req.message.uniq_key
        txn = self.txns.get(key)
        if txn is None or txn.discarded:
            return
        if txn.decided is not None and self.profile.strict:
            return  # strict: a producer never resolves a decided transaction twice
        if txn.decided is not None:
            action = TxnAction(txn.decided)
        elif txn.plan == "UNKNOWN":
            action = TxnAction.UNKNOWN
        else:
            action = TxnAction(answer or ("ROLLBACK" if txn.plan == "ROLLBACK" else "COMMIT"))
        self._sometimes("check_answered")
        self._end(txn, action, req.commitlog_offset, req.tran_state_table_offset, True)

    @precondition(lambda self: self._on("txn"))
    @_enabled(lambda self: self.pending_checks)
    @rule(which=PICK, answer=st.sampled_from(["COMMIT", "ROLLBACK", "UNKNOWN"]), lose=st.booleans())
    def answer_check(self, which: int, answer: str, lose: bool) -> None:
        if not self._holds(lambda: self.pending_checks):
            return self._idle('answer_check')
        self._record("answer_check", which=which, answer=answer, lose=lose)
        req = self.pending_checks.pop(which % len(self.pending_checks))
        if lose:
            self._sometimes("check_reply_lost")
        else:
            self._check_answer(req, answer)
        self._after()

    # ------------------------------------------------------------------
    # time

    def _tick(self) -> None:
        if type(self).wall is not None:
            self._wall_tick()
            return
        out = self._call(f"tick() at {self._now()}", lambda b: b.tick())
        self._checks_received(out.value or [] if out.error is None else [])

    def _checks_received(self, requests: list[CheckRequest]) -> None:
        for req in requests:
            self.pending_checks.append(req)
            m = req.message
            self._sometimes("txn_check")
            self._emit("txn_check", actor="broker", group=req.producer_group, topic=m.topic,
                       queue_id=m.queue_id, commitlog_offset=req.commitlog_offset,
                       queue_offset=req.tran_state_table_offset, msg_key=m.uniq_key,
                       txn_id=req.transaction_id or m.uniq_key,
                       detail={"check_times": m.properties.get("TRANSACTION_CHECK_TIMES")})

    def _window_limit(self) -> int | None:
        if not self.windows:
            return None
        return min(w.lock_ts for w in self.windows.values()) + self.config.broker_lock_max_live_ms

    def _advance(self, ms: int) -> None:
        limit = self._window_limit()
        wall = type(self).wall
        if wall is not None:  # a bounded sleep that never ends inside a quiet window
            ms = min(ms, wall.small_ms if ms <= 10_000 else wall.large_ms)
            limit = None if limit is None else limit - wall.tolerance_ms - 2 * wall.guard_ms
        target = self._now() + ms
        if limit is not None:
            target = min(target, limit)
        if wall is not None:
            self._wall_sleep(target)
            return
        if target > self._now():
            self.clock.set(target)
        self._tick()

    # ------------------------------------------------------------------
    # wall-clock mode (properties/wallclock.py: quiet windows, the model replays background work)

    def _sync(self) -> int:
        """The machine's clock follows the wall (never backwards)."""
        self.clock.set(max(self.clock.now(), wall_ms()))
        return self.clock.now()

    def _open_txn_pending(self) -> bool:
        return any(not t.decided and not t.discarded for t in self.txns.values())

    def _rounds_between(self, start: int, end: int) -> list[int]:
        """Predicted check rounds in ``(start, end]`` from the last one seen."""
        if self.check_phase is None or (self.txn_settled and not self._open_txn_pending()):
            return []
        interval = self.config.transaction_check_interval_ms
        first = self.check_phase + max(1, (start - self.check_phase) // interval + 1) * interval
        return list(range(first, end + 1, interval))

    def _quiet_deadlines(self, lock_op: bool) -> list[int]:
        now = self._now()
        out = [d for d in self.expect_fire.values()]
        wall = type(self).wall
        horizon = now + wall.guard_ms + wall.tolerance_ms
        out += self._round_points(now - wall.tolerance_ms - wall.guard_ms, horizon)
        if lock_op:
            out += [ts + self.config.broker_lock_max_live_ms for _, ts in self.broker_grants.values()]
        return out

    def _round_points(self, start: int, end: int) -> list[int]:
        """Deadlines for the predicted rounds in ``(start, end]``: a round's broker-side start may
        precede its checks' arrival (the phase) by up to the check lag, so each round's quiet window
        reaches that far earlier."""
        wall = type(self).wall
        lag = type(self).check_lag[0]
        return round_points(self._rounds_between(start, end + lag), lag, wall.guard_ms + wall.tolerance_ms)

    def _learn_check_lag(self, timed: list[tuple[int, CheckRequest]]) -> None:
        """A check of a copy some round re-put (TRANSACTION_CHECK_TIMES ≥ 2) carries that copy's store
        time (4.9.8 sends the half as read): when that round really ran. The model placed it at its
        checks' arrival; the difference is the lag the quiet windows must allow for."""
        limit = self.config.transaction_check_interval_ms // 2
        for _, req in timed:
            times = req.message.properties.get("TRANSACTION_CHECK_TIMES", "")
            if not times.isdigit() or int(times) < 2:
                continue
            reput = req.message.store_ts
            lags = [r - reput for r in self.seen_rounds if 0 <= r - reput <= limit]
            if lags and min(lags) > type(self).check_lag[0]:
                type(self).check_lag[0] = min(lags)
                self._sometimes("wall_check_lag_learnt")

    def _wall_before(self, rule_name: str, lock_op: bool = False) -> None:
        """Before a request: out of every quiet window, the model caught up with the broker."""
        self._wall_quiet(lock_op)
        self._await_first_round()
        self._renew_window_locks()
        self._wall_tick()

    def _wall_quiet(self, lock_op: bool) -> bool:
        """Sleep out of every quiet window; True if it slept."""
        wall = type(self).wall
        slept = False
        for _ in range(64):
            now = self._sync()
            inside = [d for d in self._quiet_deadlines(lock_op) if in_window(now, d, wall.guard_ms, wall.tolerance_ms)]
            if not inside:
                break
            self._sometimes("wall_quiet_wait")
            sleep_until(max(inside) + wall.tolerance_ms + 1)
            slept = True
        return slept

    def changed_at(self, ms: int) -> None:
        """A consumer offset committed, a delayed copy fired or a check round moved the check
        service's progress (CID_RMQ_SYS_TRANS offsets) at ``ms``: state the broker persists only every
        few seconds. Kept across examples: they share the broker."""
        type(self).last_change[0] = max(type(self).last_change[0], ms)

    def _wall_persisted(self) -> None:
        """Before a kill: wait until the broker has surely persisted its consumer offsets (every
        flushConsumerOffsetInterval) and delay progress (flushDelayOffsetInterval), as the model has,
        so what survives the kill is one state, not a race between the two clocks."""
        wall = type(self).wall
        quiet = max(self.config.flush_consumer_offset_interval_ms, self.config.flush_delay_offset_interval_ms)
        for _ in range(16):
            pending = [d for d in self.expect_fire.values()]
            target = max([*pending, type(self).last_change[0]]) + quiet + wall.tolerance_ms
            if target <= self._sync():
                return
            self._sometimes("wall_wait_persisted")
            self._wall_sleep(target)
            self._after()

    def _await_first_round(self) -> None:
        """A half is due for its first check but the broker's round phase is unknown: wait for it."""
        if self.check_phase is not None:
            return
        now = self._now()
        due = [h.ts + self.config.transaction_timeout_ms for h in self.history.events
               if h.event == "txn_half" and (t := self.txns.get(h.msg_key)) is not None
               and not t.decided and not t.discarded]
        if not due or min(due) > now:
            return
        wall = type(self).wall
        give_up = min(due) + self.config.transaction_check_interval_ms + wall.tolerance_ms
        while not self.buffered_checks and wall_ms() < give_up:
            time.sleep(0.05)
            self.buffered_checks += self.ls.candidate.tick_timed(wall_ms())
        self._sometimes("wall_first_round_seen" if self.buffered_checks else "wall_first_round_missing")
        self._sync()

    def _renew_window_locks(self) -> None:
        """An open orderly batch renews its broker lock before the broker could free it (as the
        Java client's lockAll does every lockInterval)."""
        wall = type(self).wall
        margin = wall.tolerance_ms + 4 * wall.guard_ms
        for (client, mq), w in sorted(self.windows.items(), key=lambda kv: (kv[0][0], kv[0][1].queue_id)):
            if self._now() - w.lock_ts > self.config.broker_lock_max_live_ms - margin - 2000 \
                    and mq in self._lock(client, [mq]):
                w.lock_ts = self.client_lock[(client, mq)]
                self._sometimes("wall_window_lock_renewed")

    def _wall_sleep(self, target: int) -> None:
        wall = type(self).wall
        for d in sorted(self._quiet_deadlines(False) + self._round_points(self._now(), target)):
            if in_window(target, d, wall.guard_ms, wall.tolerance_ms):
                target = d + wall.tolerance_ms + 1
        sleep_until(target)
        self._sync()
        self._wall_tick()

    def _wall_tick(self) -> None:
        """The model replays, in time order, what the broker did on its own since the last tick:
        copies fired at their due times, check rounds where the broker was seen to run them."""
        now = self._sync()
        timed = self._complete_rounds(self.buffered_checks + self.ls.candidate.tick_timed(now))
        self.buffered_checks = []
        now = self._sync()
        wall = type(self).wall
        fires = sorted({d for d in self.expect_fire.values() if self.model_time < d <= now})
        # the checks one round sends arrive close together (4.9.8 hands each to a thread pool, so
        # on a busy machine one may come hundreds of ms after the others); rounds are at least
        # transactionCheckInterval apart (the service waits that long after each): arrivals within
        # half an interval of a round's first belong to it
        together = max(wall.tolerance_ms, self.config.transaction_check_interval_ms // 2)
        seen: dict[int, list[CheckRequest]] = {}
        for at, req in sorted(timed, key=lambda p: p[0]):
            start = next((r for r in seen if at - r <= together), None)
            seen.setdefault(at if start is None else start, []).append(req)
        seen = {max(r, self.model_time + 1): reqs for r, reqs in seen.items()}
        if seen:
            self.check_phase = max(seen)
            self.seen_rounds += sorted(seen)
        self._learn_check_lag(timed)
        rounds = [r for r in self._rounds_between(self.model_time, now - wall.tolerance_ms)
                  if all(abs(r - s) > wall.tolerance_ms for s in seen)]
        steps = sorted([(d, 0) for d in fires] + [(r, 1) for r in [*rounds, *seen]])
        for at, kind in steps:
            self.clock.set(max(at, self.model_time))
            if kind == 0:
                self.ls.on_forks(lambda b: b.tick())
            else:
                self._model_round(at, seen.get(at, []))
                self.txn_settled = not seen.get(at)
        self.clock.set(now)
        self.ls.on_forks(lambda b: b.tick())
        self.model_time = now
        self._checks_received([req for _, req in sorted(timed, key=lambda p: p[0])])

    def _complete_rounds(self, timed: list[tuple[int, CheckRequest]]) -> list[tuple[int, CheckRequest]]:
        """A round's checks leave the broker one by one (a thread pool): once one has arrived,
        keep draining until none has come for ``ROUND_QUIET_MS`` (at most half an interval after
        the first), so a round is never judged on part of its checks."""
        if not timed:
            return timed
        first = min(at for at, _ in timed)
        limit = first + max(type(self).wall.tolerance_ms, self.config.transaction_check_interval_ms // 2)
        last_new = wall_ms()
        while wall_ms() - last_new < ROUND_QUIET_MS and wall_ms() < limit:
            time.sleep(0.05)
            more = self.ls.candidate.tick_timed(wall_ms())
            if more:
                timed = timed + more
                last_new = wall_ms()
                self._sometimes("wall_round_straggler")
        return timed

    def _model_round(self, at: int, observed: list[CheckRequest]) -> None:
        """One check round of every fork at ``at``, judged against what the broker sent in it.
        Two things may fall either side, so the forks split and the broker's observations prune
        them: a half first due within the tolerance of ``at`` (checked in this round or the next);
        a copy this round re-puts with TRANSACTION_CHECK_TIMES = transactionCheckMax (discarded in
        this round if 4.9.8's reput service dispatched it before the scan got there, else in the
        next: ``ModelBroker.check_round(reput_visible=...)``)."""
        wall = type(self).wall
        timeout = self.config.transaction_timeout_ms
        borderline = any(abs(h.ts + timeout - at) <= wall.tolerance_ms for h in self.history.events
                         if h.event == "txn_half" and h.msg_key in self.txns)
        at_max = str(self.config.transaction_check_max)
        lagging = any(r.message.properties.get("TRANSACTION_CHECK_TIMES") == at_max for r in observed)
        whens = [at - wall.tolerance_ms, at + wall.tolerance_ms] if borderline else [at]
        choices = [(when, visible) for when in whens for visible in ([True, False] if lagging else [True])]
        if len(choices) > 1 and self.ls.enabled:
            self.ls.split(lambda f: choices, lambda f, choice: setattr(f, "_wall_round", choice))
            self._sometimes("wall_round_forked")
        clock = self.clock
        moved: list[int] = []  # when a fork's round moved the check service's progress

        def model_round(b: Any) -> list[CheckRequest]:
            when, visible = getattr(b, "_wall_round", (at, True))
            if hasattr(b, "_wall_round"):
                del b._wall_round
            saved = clock.now()
            clock.set(when)
            try:
                before = _txn_progress(b)
                checks = b.check_round(reput_visible=visible)
                if _txn_progress(b) != before:
                    moved.append(when)
                return checks
            finally:
                clock.set(saved)

        # one round's checks leave in the scan's order but from a thread pool, so they may arrive in
        # another: judged in the scan's order (the re-put copies' half-queue offsets)
        observed = sorted(observed, key=lambda r: r.tran_state_table_offset)
        out = self._call(f"check round at {at}", model_round, candidate_fn=lambda b: observed)
        if out.error is None and observed:
            self._sometimes("wall_round_matched")
        if moved:
            # the round moved CID_RMQ_SYS_TRANS's offsets: consumer offsets the broker persists only
            # every flushConsumerOffsetInterval, so a kill waits for them too (docs/fidelity.md O1)
            self.changed_at(max(moved))
            self._sometimes("wall_round_moved_progress")

    def advance_small(self, ms: int) -> None:
        self._record("advance_small", ms=ms)
        self._advance(ms)
        self._after()

    def advance_large(self, ms: int) -> None:
        self._record("advance_large", ms=ms)
        self._advance(ms)
        self._after()

    def _deadlines(self) -> list[int]:
        now = self._now()
        out = list(self.expect_fire.values())
        for t in self.txns.values():
            half = next((e for e in self.history.events if e.event == "txn_half" and e.msg_key == t.key), None)
            if half is not None and not t.discarded:
                out.append(half.ts + self.config.transaction_timeout_ms)
        for _mq, (_, ts) in self.broker_grants.items():
            out.append(ts + self.config.broker_lock_max_live_ms)
        for (_, _), ts in self.client_lock.items():
            out.append(ts + self.client_lock_ms)
        if self.txns and type(self).wall is not None:  # the broker's rounds, from the phase seen
            out += self._rounds_between(now, now + self.config.transaction_check_interval_ms)
        elif self.txns:  # the check service runs every interval since the broker started
            interval = self.config.transaction_check_interval_ms
            boundary = START_MS + ((now - START_MS) // interval + 1) * interval
            out += [boundary, boundary - self.config.transaction_timeout_ms // 2]
        return sorted({d for d in out if d > now - 1000})

    def advance_to_deadline(self, which: int, delta: int) -> None:
        """Jump to a known deadline (due time, check timeout, lock expiry) ± a hair and tick."""
        self._record("advance_to_deadline", which=which, delta=delta)
        target = _pick(self._deadlines(), which) + delta
        wall = type(self).wall
        if wall is not None:  # the window's edges: the last instant before it, the first after it
            deadline = target - delta
            target = deadline - wall.guard_ms - 1 if delta < 0 else deadline + wall.tolerance_ms + 1
            self._wall_sleep(min(target, self._now() + wall.large_ms))
            self._after()
            return
        self._advance(max(0, target - self._now()))
        self._after()

    @precondition(lambda self: self._on("flush") and self.config.flush == "ASYNC")  # SYNC: nothing to flush
    @rule()
    def flush(self) -> None:
        self._record("flush")
        self._call("flush()", lambda b: b.flush())
        self.last_flush_seq = len(self.history.events)
        self._after()

    # ------------------------------------------------------------------
    # the rules Hypothesis draws (few, so that each is drawn often; each dispatches to a
    # named action above, and the program records that action)

    @rule(kind=st.sampled_from(["plain", "keyed", "delayed", "batch"]), topic=PICK, queue=PICK,
          tags=st.sampled_from(TAGS), level=st.integers(1, 20), n=st.integers(2, 4),
          key=st.sampled_from(["order-1", "order-2", "order-3", "user-42"]))
    def produce(self, kind: str, topic: int, queue: int, tags: str | None, level: int, n: int,
                key: str) -> None:
        if kind == "plain":
            self.send_plain(topic, queue, tags, ("k1",) if n > 2 else (), n == 4)
        elif kind == "keyed":
            self.send_keyed(topic, key)
        elif kind == "delayed":
            self.send_delayed(topic, queue, level)
        else:
            self.send_batch(topic, queue, n)

    @rule(kind=st.sampled_from(["pull_consume", "pull_consume", "pull", "consume"]),
          which=PICK, n=st.integers(1, 4), max_nums=st.integers(1, 8),
          beyond=st.sampled_from([False] * 7 + [True]),
          result=st.sampled_from(["SUCCESS", "SUCCESS", "RECONSUME_LATER", "EXCEPTION", "NULL"]),
          ack_index=st.integers(-1, 2), level=st.sampled_from([0, 0, 1, 2, 5, 18, 25, -1]),
          max_choice=st.sampled_from(["none", "group", "client"]))
    def consumer(self, kind: str, which: int, n: int, max_nums: int, beyond: bool, result: str,
                 ack_index: int, level: int, max_choice: str) -> None:
        if type(self).wall is not None and level > 0:
            level = min(level, type(self).wall.max_level)
        if kind == "consume" and self._pq_keys():
            self.consume(which, n, result, ack_index, level, max_choice)
        elif kind == "pull_consume" and self._ready():
            self.pull_consume(which, n, result, ack_index, level, max_choice)
        else:
            self.pull(which, which // 7, max_nums, beyond)

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

    @rule(kind=st.sampled_from(["small", "small", "large", "deadline", "deadline", "check_probe"]),
          small=SMALL_MS, large=LARGE_MS, which=PICK,
          delta=st.sampled_from([-1000, -1, 0, 1, 1000]))
    def advance(self, kind: str, small: int, large: int, which: int, delta: int) -> None:
        if kind == "check_probe" and self.topics and type(self).wall is None:
            self.txn_half_before_check(which, delta)
        elif kind == "deadline" and self._deadlines():
            self.advance_to_deadline(which, delta)
        elif kind == "large":
            self.advance_large(large)
        else:
            self.advance_small(small)

    # ------------------------------------------------------------------
    # crash and recovery

    @precondition(lambda self: self._on("crash"))
    @_enabled(lambda self: self.can_crash and not self.profile.strict and not self.windows)
    @rule(kind=st.sampled_from(["kill", "power"]))
    def crash_recover(self, kind: str) -> None:
        if not self._holds(lambda: self.can_crash and not self.profile.strict and not self.windows):
            return self._idle('crash_recover')
        if type(self).wall is not None:
            if self._open_txn_pending() or not self.txn_settled:
                return self._idle('crash_recover')  # the check service's progress moves every round
            kind = kind if kind in getattr(self.ls.candidate, "crash_kinds", ("kill", "power")) else "kill"
            self._wall_persisted()
        self._record("crash_recover", kind=kind)
        self._crash_and_recover(kind)

    def _crash_and_recover(self, kind: str) -> None:
        """The broker crashes (``kill`` / ``power``) and recovers; the clients restart with it."""
        self.crashes += 1
        at_risk: list[str] = []
        if kind == "power" and self.config.flush == "ASYNC":
            at_risk = sorted({e.msg_key for e in self.history.events[self.last_flush_seq:]
                              if e.msg_key and e.event in ("send", "store", "txn_half", "txn_end",
                                                           "send_back", "schedule_fire",
                                                           # a check re-put the half: the copy
                                                           # the check service would see next
                                                           "txn_check")})
        self._emit("crash", actor="broker", status=kind, detail={"at_risk": at_risk})
        for key in at_risk:
            if key in self.txns:
                self.txns[key].maybe_lost = True
        try:
            self.ls.candidate.crash(kind)
            self.ls.candidate.recover()
        except Exception as exc:
            self._fail(f"candidate failed to crash({kind!r})/recover(): {exc!r}")
        if self.ls.enabled:
            self.ls.on_forks(lambda fork: fork.crash(kind))
            n = self.ls.split(_recovery_choices, _recover)
            if n > 1:
                self._sometimes("recovery_forked")
        self._emit("recover", actor="broker", status=kind)
        self._sometimes(f"crash_recover:{kind}")
        if type(self).wall is not None:  # a restarted broker: new service phases
            self.check_phase = None
            self.model_time = self._sync()
        # the clients restart with the broker: process queues, locks and pending checks go
        self.pqs.clear()
        self.next_pull.clear()
        self.client_committed.clear()
        self.opqs.clear()
        self.client_lock.clear()
        self.broker_grants.clear()
        self.pending_checks.clear()
        self._after(after_crash=True)

    # ------------------------------------------------------------------
    # revealing what the broker stored (the observer)

    def _expect_fire(self, topic: str, key: str, r: int, origin: str | None, due: int) -> None:
        """A delayed or retry copy will appear in ``topic``; one entry per copy, never merged
        with another copy sharing the key (a duplicate commit, a re-consumption after a crash)."""
        self.expect_seq += 1
        self.expect_fire[(topic, key, r, origin, self.expect_seq)] = due

    def _fired_due(self, m: StoredMessage) -> int | None:
        """The due time of the expected copy ``m`` is: the earliest-due entry of its copy
        (topic, key, reconsume_times, origin) — the first of them cannot come before it. A copy
        of an identity that already fired before a crash, appearing before any entry is due, is
        that copy fired again (at-least-once after a crash), not the next one: None."""
        origin = m.origin_message_id if m.topic.startswith("%RETRY%") else None
        ident = (m.topic, m.uniq_key, m.reconsume_times, origin)
        mine = [t for t in self.expect_fire if t[:4] == ident]
        if not mine:
            return None
        first = min(mine, key=lambda t: (self.expect_fire[t], t[4]))
        if m.store_ts < self.expect_fire[first] and self.fired_in_epoch.get(ident, self.crashes) < self.crashes:
            return None
        self.fired_in_epoch[ident] = self.crashes
        return self.expect_fire.pop(first)

    def _reveal_mqs(self) -> list[MessageQueue]:
        """Schedule queues first: a scheduled copy is seen before anything fired from it."""
        mqs = [MessageQueue(SCHEDULE_TOPIC, level - 1) for level in sorted(self.sched_levels)
               if SCHEDULE_TOPIC not in self.unrevealable]
        mqs += [mq for mq in self.frontier if mq.topic not in self.unrevealable and mq.topic != SCHEDULE_TOPIC]
        return mqs

    def _after(self, after_crash: bool = False) -> None:
        for mq in self._reveal_mqs():
            self._reveal(mq, after_crash)

    def _reveal(self, mq: MessageQueue, after_crash: bool = False) -> None:
        """Pull ``mq`` with the observer from its frontier to its end."""
        if mq.topic in self.unrevealable:
            return
        self.frontier.setdefault(mq, 0)
        for _ in range(64):
            start = self.frontier[mq]
            out = self._call(f"pull({self.obs!r}, {mq.topic}/{mq.queue_id}, offset={start}) [reveal]",
                             lambda b, mq=mq, start=start: b.pull(self.obs, mq, start, 32, "*"))
            if out.error is not None:
                if out.error[1] != ResponseCode.TOPIC_NOT_EXIST.name and \
                        mq.topic in (SCHEDULE_TOPIC, DISCARD_TOPIC):
                    self.unrevealable.add(mq.topic)  # the broker does not expose it
                break
            res: PullResult = out.value
            if after_crash and res.max_offset < start:
                self.frontier[mq] = res.max_offset  # power loss truncated the tail
                continue
            if res.status is not PullStatus.FOUND:
                break
            for m in res.messages:
                self._revealed(m)
            self.frontier[mq] = max(start + 1, res.next_begin_offset)
            if len(res.messages) < 32:
                break

    def _revealed(self, m: StoredMessage) -> None:
        deliver_ts = None
        if m.topic == SCHEDULE_TOPIC:
            deliver_ts = m.store_ts + self.config.delay_ms(m.queue_id + 1)
        self._emit("store", actor="broker", group=group_of(m.topic), topic=m.topic,
                   queue_id=m.queue_id, queue_offset=m.queue_offset,
                   commitlog_offset=m.commitlog_offset, msg_key=m.uniq_key, msg_id=m.msg_id,
                   reconsume_times=m.reconsume_times,
                   delay_level=m.queue_id + 1 if m.topic == SCHEDULE_TOPIC else None,
                   deliver_ts=deliver_ts, detail={"store_ts": m.store_ts, "origin": m.origin_message_id})
        fire = self._fired_due(m)
        if fire is not None:
            self.changed_at(m.store_ts)
            self._sometimes("retry_fired" if m.topic.startswith("%RETRY%") else "delay_fired")
            if type(self).wall is not None:
                self._judge_lateness("retry" if m.topic.startswith("%RETRY%") else "delay", fire, m)
        if fire is not None or (m.delay_level > 0 and not m.topic.startswith("%DLQ%")
                                and m.topic not in (SCHEDULE_TOPIC, DISCARD_TOPIC)):
            # every copy that came through the schedule topic (it keeps DELAY): one fire each
            if fire is None:
                self._sometimes("schedule_refired")
            self._emit("schedule_fire", actor="broker", topic=m.topic, queue_id=m.queue_id,
                       queue_offset=m.queue_offset, msg_key=m.uniq_key, msg_id=m.msg_id,
                       reconsume_times=m.reconsume_times, deliver_ts=fire)
        if m.topic.startswith("%DLQ%"):
            self._sometimes("dlq_landed")
        if m.topic == DISCARD_TOPIC:
            txn = self.txns.get(m.uniq_key)
            if txn is not None and not txn.discarded:
                txn.discarded = True
                self._sometimes("txn_discard")
                self._emit("txn_discard", actor="broker", group=self.pg, topic=txn.topic,
                           msg_key=m.uniq_key, txn_id=m.uniq_key,
                           commitlog_offset=m.commitlog_offset)

    def _judge_lateness(self, kind: str, due: int, m: StoredMessage) -> None:
        """Wall clock: a fired copy is stored never before its due time (the broker's due time is
        no earlier than the machine's, which read the clock before the request) and within the
        tolerance after it."""
        late = m.store_ts - due
        tolerance = type(self).wall.tolerance_ms
        if late < 0:
            code = "RETRY_EARLY" if kind == "retry" else "DELAY_EARLY"
            self._fail(f"invariant {inv.name_of(code)} violated: {code} {kind} copy {m.msg_id} of {m.uniq_key} "
                       f"stored at {m.store_ts}, {-late} ms before it was due ({due})")
        if late > tolerance:
            self._fail(f"wall-clock window violated: {kind} copy {m.msg_id} of {m.uniq_key} stored {late} ms "
                       f"after it was due ({due}); tolerance {tolerance} ms")
        type(self).lateness.note(kind, late)

    # ------------------------------------------------------------------
    # invariants

    def _judge(self, kinds: tuple[str, ...]) -> None:
        violations = inv.evaluate(self.history, kinds)
        if self.profile.strict:
            violations += inv.evaluate(self.history, ("observation",))
        if violations:
            first = violations[0]
            name = inv.name_of(first.code)
            rest = Counter(v.code for v in violations[1:])
            listed = ", ".join(f"{code}×{n}" if n > 1 else str(code) for code, n in sorted(rest.items()))
            more = f" (+{len(violations) - 1} more: {listed})" if rest else ""
            self._fail(f"invariant {name} violated: {first.render()}{more}")

    @invariant()
    def check_always(self) -> None:
        if not self.failed and self.ls is not None:
            self._judge(("always",))

    def _quiescent(self) -> bool:
        if self.expect_fire or self.pending_checks or self.windows:
            return False
        if any(not t.decided and not t.discarded for t in self.txns.values()):
            return False
        if type(self).wall is not None and not self.txn_settled:
            return False  # a re-put copy may still be checked (see _wall_tick): the broker is not done
        return not self._pq_keys()

    def _consume_all(self) -> bool:
        """Every group pulls and consumes every queue to its end successfully."""
        moved = False
        for group in self._consumer_groups():
            for mq in self._group_mqs(group):
                for _ in range(CONSUME_TIMEOUT_ROUNDS):
                    res = self._pull_into_pq(group, mq, 32)
                    pq = self.pqs[(group, mq)]
                    if pq.has_temp_message():
                        moved = True
                        self._consume(group, mq, len(pq.offsets()), "SUCCESS", -1, 0, "none")
                    if res is None or res.status is not PullStatus.FOUND:
                        break
        for mq in self._orderly_mqs():
            for _ in range(CONSUME_TIMEOUT_ROUNDS):
                holder = next((c for c in CLIENTS if self._client_holds(c, mq)), None)
                if holder is None:
                    for c in CLIENTS:
                        if mq in self._lock(c, [mq]):
                            holder = c
                            break
                if holder is None or not self._begin(holder, mq, 32):
                    break
                moved = True
                self._finish((holder, mq), "SUCCESS")
        return moved

    def drain(self) -> None:
        """Quiesce: answer checks, consume everything, advance to the next due time, repeat."""
        for key in sorted(self.windows, key=lambda k: (k[0], k[1].queue_id)):
            self._finish(key, "SUCCESS")
        for _ in range(DRAIN_ROUNDS):
            self._tick()
            self._after()
            while self.pending_checks:
                self._check_answer(self.pending_checks.pop(0), None)
            for txn in self.txns.values():
                if not txn.ended and not txn.discarded and txn.decided is None \
                        and txn.plan in ("COMMIT", "ROLLBACK"):
                    txn.ended = True
                    if not txn.maybe_lost:  # else the check service resolves it (see Txn)
                        self._end(txn, TxnAction(txn.plan), txn.commitlog_offset, txn.half_offset, False)
            self._after()
            moved = self._consume_all()
            self._after()
            if self._quiescent() and not moved:
                break
            due = [d for d in self.expect_fire.values() if d > self._now()]
            step = self.config.transaction_check_interval_ms
            target = min(due) if due else self._now() + step
            if type(self).wall is not None:
                self._wall_sleep(max(target + type(self).wall.tolerance_ms, self._now() + 200))
            else:
                self.clock.set(max(target, self._now() + 1000))
        self._emit("drain", actor="machine")
        self._sometimes("drained")

    @precondition(lambda self: self._on("drain"))
    @_enabled(lambda self: len(self.program) > 8 and not self.history.drained())
    @rule()
    def drain_now(self) -> None:
        if not self._holds(lambda: len(self.program) > 8 and not self.history.drained()):
            if type(self).wall is not None:
                # always drawn on the wall clock, and Hypothesis draws a rule without arguments far
                # more often than the others: where it cannot drain it runs the workload's beat
                self._sometimes("wall_drain_beat")
                return self.beat(1 + len(self.program) % 8)
            return self._idle('drain_now')
        self._record("drain_now")
        self.drain()
        self._judge(("always", "eventually"))

    def teardown(self) -> None:
        try:
            if not self.failed and self.drain_on_teardown and self.ls is not None:
                try:
                    self.drain()
                    self._judge(("always", "eventually"))
                finally:
                    self._account()
            else:
                self._account()
            for name, found in ((i.name, len(i.check(self.history)))
                                for i in inv.of_kind("observation")):
                self.observations[name] += found
        finally:
            try:
                if self.ls is not None:
                    self.ls.candidate.close()
            except Exception:
                pass
            shutil.rmtree(self.workdir, ignore_errors=True)


def _txn_progress(fork: Any) -> tuple[int, int]:
    """The check service's progress (TransactionalMessageBridge.fetchConsumeOffset): group
    CID_RMQ_SYS_TRANS's offsets on the half queue and the op queue, kept with the consumer offsets."""
    return (fork.query_offset(CID_RMQ_SYS_TRANS, MessageQueue(HALF_TOPIC, 0)),
            fork.query_offset(CID_RMQ_SYS_TRANS, MessageQueue(OP_TOPIC, 0)))


def _fix_retry_queue(fork: Any, queue: int) -> None:
    """Pin the retry queue of this fork's *next* send-back only (a later send-back, of
    another group perhaps, chooses again)."""
    fork.force_retry_queue(queue)


def _recovery_choices(fork: Any) -> list[Any]:
    choices = getattr(fork, "recovery_choices", None)
    return list(choices()) if choices is not None else [None]


def _recover(fork: Any, choice: Any) -> None:
    if choice is None:
        fork.recover()
    else:
        fork.recover(survivors=choice)


def _default_model_factory() -> Callable[..., Any]:
    from rmqspec.model.broker import ModelBroker

    return lambda clock, config: ModelBroker(clock, config)


def conformance_machine(
    broker_factory: Callable[..., Any],
    *,
    lockstep: bool = True,
    profile: str = "rocketmq-4.9",
    recorder_factory: Callable[[], Any] | None = None,
    model_factory: Callable[..., Any] | None = None,
    config: BrokerConfig | None = None,
    wall: WallOptions | None = None,
) -> type[ConformanceBase]:
    """A ``RuleBasedStateMachine`` class driving ``broker_factory(clock, config, workdir)``.

    ``lockstep``: compare every result with a ``ModelBroker`` on the same clock.
    ``profile``: ``rocketmq-4.9`` (faithful) or ``strict`` (observations fail).
    ``recorder_factory``: called once per example; receives the SPEC §8 trace.
    ``config``: the broker configuration the model follows (default RocketMQ 4.9's).
    ``wall``: run on the wall clock against a broker with its own clock (``wallclock.py``).
    The class carries ``coverage`` (rule and outcome counts across examples),
    ``observations``, ``last_program`` and ``last_failure``.
    """
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; choose one of {sorted(PROFILES)}")
    attrs_: dict[str, Any] = {
        "broker_factory": staticmethod(broker_factory),
        "model_factory": staticmethod(model_factory) if model_factory else None,
        "lockstep_mode": lockstep,
        "profile": PROFILES[profile],
        "recorder_factory": staticmethod(recorder_factory) if recorder_factory else None,
        "coverage": Counter(),
        "observations": Counter(),
        "examples": [],
        "last_program": [],
        "last_failure": [],
        "failed_program": [],
        "first_failure": [],
        "last_change": [0],
        "check_lag": [wall.check_lag_ms if wall else 0],
        "failures": {},
        "lifecycle": Counter(),
        "rules_run": Counter(),
        "base_config": config,
        "wall": wall,
        "lateness": WallLateness(wall.tolerance_ms) if wall else None,
    }
    return type("ConformanceMachine", (ConformanceBase,), attrs_)
