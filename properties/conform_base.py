"""The conformance machine's state, bookkeeping, plumbing and set-up.

Theory of operation
-------------------
``MachineCore`` is the root of the conformance machine (``conformance.ConformanceBase`` adds the
rule mixins). It holds:

- the class attributes ``conformance_machine`` binds (factory, lockstep mode, profile, recorder,
  configuration, wall-clock options) and the counters kept across examples (coverage,
  observations, failures, the last program);
- per example: the clock, the ghost ``History``, the ``Lockstep`` pair and the machine's own
  small indices — topics, groups (``GroupState``), process queues and next pull offsets, the
  offsets the client committed, the orderly client's locks and open windows (``Window``), the
  broker grants it saw, the transactions (``Txn``) and pending checks, the observer's frontier
  per queue, and the copies it expects to fire;
- the plumbing every rule uses: ``_record`` (an op of the replayable program), ``_call`` (one
  broker operation through the lockstep pair; a mismatch or an exception is a failure with the
  program), ``_fail``, ``_emit`` (a ghost event), ``_message`` (a fresh message with a UNIQ_KEY);
- set-up: ``init`` (the ``@initialize`` rule: flush mode, swarm mask, prelude; the broker and
  the model are built here), ``create_topic``, ``create_group``.

Constants bound the search: ``MAX_TOPICS`` (3), ``MAX_GROUPS`` (3 concurrent groups),
``DRAIN_ROUNDS`` (160 rounds of the drain), ``CONSUME_TIMEOUT_ROUNDS`` (64 pulls per queue and
round); ``START_MS`` is 2023-11-14 (the manual clock's start).
"""

from __future__ import annotations

import contextlib
import inspect
from collections import Counter
from collections.abc import Callable
from typing import Any

import attrs
import hypothesis
import hypothesis.errors
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from rmqspec.impl.scratch import scratch_dir
from rmqspec.model.clock import ManualClock
from rmqspec.model.config import BrokerConfig, default_config
from rmqspec.model.ids import UniqKeyFactory
from rmqspec.model.message import Message, MessageQueue, StoredMessage
from rmqspec.model.process_queue import ProcessQueue
from rmqspec.model.protocol import Capability
from rmqspec.model.queues import Record
from rmqspec.model.results import CheckRequest
from rmqspec.model.selectors import Selector, by_hash
from rmqspec.model.timer import TIMER_TOPIC
from rmqspec.model.versions import DEFAULT_VERSION, VERSIONS
from rmqspec.properties.composite import PRELUDE, SWARM, keep_crashes_under_sync, split_swarm, swarm_store_host
from rmqspec.properties.conform_timeout import clean_timeout_ms
from rmqspec.properties.domains import RETRY_MAX, TOPIC_QUEUES
from rmqspec.properties.history import (
    CLIENT_LOCK_MS,
    DISCARD_TOPIC,
    SCHEDULE_TOPIC,
    History,
    audit_params,
    dlq_topic,
    retry_topic,
)
from rmqspec.properties.lockstep import EventTap, Lockstep, Outcome, tap_of
from rmqspec.properties.program import Op, render
from rmqspec.properties.session import SessionView
from rmqspec.properties.shrink import signature_of
from rmqspec.properties.wallclock import WallLateness, WallOptions, mask_times, wall_ms

START_MS = 1_700_000_000_000
OBSERVER = "rmqspec_observer"
# In-process, the observer's group name goes beyond ASCII, to a noncharacter: the broker stores any
# group name (only the Java client's checkGroup restricts it), in subscriptionGroup.json and in the
# OFFSET_MOVED_EVENT body of each of the observer's edge pulls (UTF-8 both, not \u escapes), and
# reads the file back at every restart. A remote broker's observer keeps ASCII.
OBSERVER_LOCAL = OBSERVER + "_观察\ufdd0"
# and the orderly group's: the noncharacter and a digit, a name a parser of fastjson's bare integer keys
# must not take for one (subscriptionGroup.json holds it as a key; its retry max decides its DLQ)
ORDERLY_GROUP_LOCAL = "\ufdd01"
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
    """A RocketMQ version to hold the broker to (``model/versions.py``), faithfully; ``strict``:
    4.9's, with observations as violations (no crash, no re-commit)."""

    name: str
    strict: bool
    version: str = DEFAULT_VERSION


PROFILES = {
    **{name: Profile(name, False, name) for name in VERSIONS},
    "strict": Profile("strict", True),
}


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
    born: int = 0  # when the broker acknowledged the half


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


def _default_model_factory() -> Callable[..., Any]:
    from rmqspec.model.broker import ModelBroker

    return lambda clock, config: ModelBroker(clock, config)



def _takes_recorder(factory: Callable[..., Any]) -> bool:
    """Whether ``factory`` has a ``recorder`` parameter (the registries' signature, SPEC §3)."""
    try:
        return "recorder" in inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return False


_DEFAULT_FILES = (BrokerConfig().commitlog_file_size, BrokerConfig().consume_queue_file_size)


def _default_files(config: BrokerConfig) -> bool:
    return (config.commitlog_file_size, config.consume_queue_file_size) == _DEFAULT_FILES


class MachineCore(RuleBasedStateMachine):
    """State, plumbing and set-up of the conformance machine (``ConformanceBase`` adds the rules)."""


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
    pop_applies: list[bool]  # [whether an example popped: every broker declares POP] (coverage)
    rules_run: Counter  # rules executed (the programs' ops), across examples
    drain_on_teardown = True
    # wall-clock mode (properties/wallclock.py): None = the manual clock
    wall: WallOptions | None = None
    base_config: BrokerConfig | None = None
    lateness: WallLateness | None = None
    # makes the ordered sends' MessageQueueSelector per example (``conformance_machine(key_selector=)``)
    key_selector_factory: Callable[[], Selector] = staticmethod(lambda: by_hash)
    # the concurrent client's clean task: consumeTimeout's minutes → its period and threshold in ms
    # (``conformance_machine(clean_timeout=)``; 4.9.8's by default, ``conform_timeout.py``)
    clean_timeout_ms: Callable[[int], int] = staticmethod(clean_timeout_ms)
    # examples past this many are rejected at ``init``, before they touch the broker. Wall clock: an
    # example Hypothesis does not count as valid (a draw past its buffer) still costs real time. Manual
    # clock (``runner.RUN_CAP_FACTOR``): with fewer than 1000 max_examples Hypothesis's targeting
    # pass hill-climbs until its 1000-call limit, twenty minutes on a run that passes.
    run_cap: int | None = None

    @classmethod
    def profile_has_timer(cls) -> bool:
        """The broker runs the 5.x timer wheel (a 5.x profile, timerWheelEnable): the TIMER table
        applies (coverage)."""
        return (cls.base_config or default_config(cls.profile.version)).timer_running

    def __init__(self) -> None:
        super().__init__()
        wall = type(self).wall
        self.clock = ManualClock(wall_ms() if wall else START_MS)
        self.config = type(self).base_config or default_config(type(self).profile.version)
        # names: fresh per example on a broker that outlives the example (wall-clock mode)
        self.ns = f"_{wall.run_tag}{len(type(self).examples):03d}" if wall else ""
        self.og, self.pg, self.obs, self.t0 = ORDERLY_GROUP + self.ns if wall else ORDERLY_GROUP_LOCAL, \
            TXN_GROUP + self.ns, OBSERVER + self.ns if wall else OBSERVER_LOCAL, "T0" + self.ns
        self.client_lock_ms = CLIENT_LOCK_MS
        # the ordered sends' MessageQueueSelector, fresh per example (a seeded one replays)
        self.key_selector = type(self).key_selector_factory()
        if wall:  # the client never trusts a lock the broker may already have freed
            self.client_lock_ms = min(CLIENT_LOCK_MS, self.config.broker_lock_max_live_ms
                                      - wall.tolerance_ms - 2 * wall.guard_ms)
        self.model_time = self.clock.now()  # wall: the model's background work is done up to here
        self.check_phase: int | None = None  # wall: when the broker was last seen to run a check round
        # wall: a check round ran without checks since the last one: no re-put copy of a resolved half
        # is left to be checked (a broker that outlives the example must be idle when it ends)
        self.txn_settled = True
        self.op_counted: Record | None = None  # wall: the last op record SessionView.op_landed was told of
        self.buffered_checks: list[tuple[int, CheckRequest]] = []
        self.seen_rounds: list[int] = []  # wall: the rounds the broker was seen to run, by arrival
        self.op_writes: list[int] = []  # wall, 5.1.0+: when the broker was seen to write its pending ops
        self.workdir = ""  # made by init (memory when there is some: impl/scratch.py), removed by teardown
        recorder = type(self).recorder_factory() if type(self).recorder_factory else None
        self.history = History.for_config(self.config, recorder)
        self.recorder = recorder
        self.program: list[Op] = []
        type(self).last_program = self.program
        type(self).last_failure[:] = []
        type(self).examples.append(1)
        self.failed = False
        self.ls: Lockstep | None = None
        self.started = False  # ``init`` ran to its end: the example's topics and groups exist
        self.can_crash = False
        self.takes_oneway = False
        self.takes_batch = False
        self.limit_edges = 0  # size-limit messages send_edge made: their kinds rotate (edges._at_limit)
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
        # timer messages (conform_timer.py): key -> (queue offset, commitlog offset) of each copy revealed in
        # rmq_sys_wheel_timer; key -> the due time of each copy the machine expects the wheel to fire
        self.timer_copies: dict[str, list[tuple[int, int]]] = {}
        self.timer_due: dict[str, list[int]] = {}
        self.pull_seq = 0
        self.body_seq = 0
        self.last_flush_seq = 0
        self.last_flush_ts = 0  # when the flush that ``last_flush_seq`` marks was made (ASYNC)
        self.last_commit_seq = 0  # SYNC: the history's length at the last group commit (a tick, a waited send)
        self.stall_until = 0  # Capability.DISK_STALL: no group commit completes before it (conform_time.py)
        # ASYNC: the flush service's last thorough pass (its start's) and its last passes (conform_time.py)
        self.async_thorough_at = 0
        # (history length, time) at the last two passes, the older first
        self.async_passes: tuple[tuple[int, int], tuple[int, int]] = ((0, 0), (0, 0))
        # the retention rule filled the disk: until then the store may refuse every put (its flag clears
        # at a clean pass that finds the disk at or under 0.85), since ``disk_full_from``
        self.disk_full_until = 0
        self.commitlog_low = 0  # the commitlog's min offset the broker last reported (conform_retention.py)
        self.disk_full_from = 0
        self._oracle_init()
        self._broadcast_init()
        self._pop_init()

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
            self._raised(op, exc)
            raise

    def _raised(self, where: str, exc: Exception) -> None:
        """Note that the candidate raised ``exc`` in ``where``: a finding with the program so far."""
        message = f"candidate raised {type(exc).__name__} in {where}: {exc!r}"
        type(self).failures.setdefault(signature_of(message), (message, list(self.program)))

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
        # RocketMQ's defaults (16 retries, 1 retry queue) are left to the broker: the protocol's
        # defaults are part of what a candidate must honour
        args = () if (retry_max, retry_queue_nums) == (16, 1) else (retry_max, retry_queue_nums)
        self._call(f"create_group({', '.join(map(repr, (group, *args)))})",
                   lambda b: b.create_group(group, *args))
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
        retry_max=RETRY_MAX,
        orderly_max=st.sampled_from([0, 1, 2, 16]),
        flush=st.sampled_from(["ASYNC", "SYNC"]),
        swarm=SWARM,
        prelude=PRELUDE,
    )
    def init(self, queues: int, retry_max: int, orderly_max: int, flush: str = "SYNC", swarm: int = 0,
             prelude: tuple | None = None, files: tuple[int, int] | None = None, host: str | None = None) -> None:
        """``swarm``: the families switched off, and (drawn, bits above the mask) the store's file
        geometry and store host, which a program records as ``files`` (commitlog, consume-queue bytes;
        None: RocketMQ's defaults) and ``host`` (None: the configuration's). A remote broker keeps its
        own files, host and flush mode."""
        wall = type(self).wall
        cap = type(self).run_cap
        if cap is not None and len(type(self).examples) > cap:
            self._sometimes("wall_run_cap" if wall is not None else "run_cap")
            hypothesis.reject()
        if wall is not None:  # the remote broker's flush mode is its own (--config); ladders stay short
            flush, retry_max, orderly_max = self.config.flush, min(retry_max, wall.max_retry), \
                min(orderly_max, wall.max_retry)
        if self.config.transient_store_pool:  # the pool needs ASYNC (model/committing.py): the draw is kept
            flush = "ASYNC"
        # the geometry is a function of the draw alone: state outside the example (a run's example
        # count, tried before) makes Hypothesis's re-runs of a prefix draw differently
        # (FlakyStrategyDefinition at 300 × 80, seed 2)
        drawn_host = swarm_store_host(swarm)
        swarm, drawn_files = split_swarm(swarm)
        swarm = keep_crashes_under_sync(swarm, flush)
        if files is None and not _default_files(self.config):
            drawn_files = None  # the sizes the user's --config chose stand
        files = None if wall is not None else files if files is not None else drawn_files
        if self.config.store_host != BrokerConfig().store_host:
            drawn_host = None  # the host the user's --config chose stands
        host = None if wall is not None else host if host is not None else drawn_host
        self._record("init", queues=queues, retry_max=retry_max, orderly_max=orderly_max,
                     flush=flush, swarm=swarm, **({"files": tuple(files)} if files is not None else {}),
                     **({"host": host} if host is not None else {}))
        # the wall clock's budget is a dozen examples: every family stays on (the draw is kept so the
        # draw structure does not depend on the mode)
        self._set_swarm(0 if wall is not None else swarm)
        self.config = attrs.evolve(self.config, flush=flush)
        if host is not None:
            self.config = attrs.evolve(self.config, store_host=host)
            self._sometimes(f"store_host:{host}")
        if files is not None:
            self.config = attrs.evolve(self.config, commitlog_file_size=files[0], consume_queue_file_size=files[1])
            if tuple(files) != _DEFAULT_FILES:
                self._sometimes(f"files:{files[0]}+{files[1]}")
        if wall is None:  # SQL92 pulls (properties/filters.py); a remote broker keeps its own setting
            self.config = attrs.evolve(self.config, enable_property_filter=True)
        self.history.params = audit_params(self.config)
        self.workdir = str(scratch_dir("rmqspec-conform-"))
        # the brokers' own trace events are compared in lockstep when both can record (``EventTap``)
        taps = wall is None and type(self).lockstep_mode and _takes_recorder(type(self).broker_factory)
        candidate = type(self).broker_factory(self.clock, self.config, self.workdir,
                                              **({"recorder": EventTap()} if taps else {}))
        if wall is not None:
            address = getattr(candidate, "broker_addr", None)
            if isinstance(address, str) and ":" in address:  # offset msgIds name the broker's own address
                host, _, port = address.rpartition(":")
                self.config = attrs.evolve(self.config, store_host=host, store_port=int(port))
            candidate = SessionView(candidate, self.config.max_delay_level, self.config)
        model = None
        if type(self).lockstep_mode:
            make = type(self).model_factory or _default_model_factory()
            model = make(self.clock, self.config)
            if taps and tap_of(candidate) is not None and hasattr(model, "recorder"):
                model.recorder = EventTap()
            if wall is not None:
                model.external_check_rounds = True
                model.external_op_batches = True
        self.ls = Lockstep(candidate, model, self.clock, normalize=mask_times if wall else None)
        self.async_thorough_at = self.last_flush_ts = self._now()  # the broker's flush service started
        self.async_passes = ((0, self._now()), (0, self._now()))
        self.can_crash = Capability.CRASH in getattr(candidate, "capabilities", frozenset())
        self.takes_oneway = callable(getattr(candidate, "send_oneway", None))  # ``OnewayBroker``
        self.takes_batch = callable(getattr(candidate, "send_batch", None))  # ``BatchBroker``
        self._call(f"create_group({self.obs!r})", lambda b: b.create_group(self.obs))
        if wall is not None:
            settle = self.config.transaction_timeout_ms + self.config.transaction_check_interval_ms \
                + wall.tolerance_ms
            try:
                candidate.open(self.obs, self.clock, settle_ms=settle)
            except Exception as exc:  # not an operation of the example: a finding without a lockstep
                self._raised("open() [session start]", exc)
                raise
            for topic in sorted(candidate.existing):  # earlier examples made them: the model has them too
                self.ls.on_forks(lambda b, topic=topic: b.store.ensure_topic(
                    topic, self.config.max_delay_level if topic == SCHEDULE_TOPIC else 1))
        self._create_topic(self.t0, queues)
        self._create_group("G0" + self.ns, retry_max, 1, False)
        self._create_group(self.og, orderly_max, 1, True)
        self.frontier.setdefault(MessageQueue(DISCARD_TOPIC, 0), 0)
        if self.config.timer_running and wall is None:  # 5.x: the wheel's queue (conform_timer.py)
            self.frontier.setdefault(MessageQueue(TIMER_TOPIC, 0), 0)
        self._probe_hold("after the first start", running=True)
        self.started = True
        self._after()
        self._prelude(prelude)  # records itself as the next op (``init`` does not record it)

    @precondition(lambda self: self._on("admin"))
    @precondition(lambda self: len(self.topics) < MAX_TOPICS)
    @rule(queues=TOPIC_QUEUES)
    def create_topic(self, queues: int) -> None:
        """A new topic, and a probe of its empty last queue: QUERY_CONSUMER_OFFSET for a group that
        never committed there answers 0 while the queue's min offset is 0 (4.9), -1 on 5.x until a
        message is stored (``offset_zero_needs_message``) — an answer no consumer asks for otherwise."""
        self._record("create_topic", queues=queues)
        name = f"T{len(self.topics)}{self.ns}"
        self._create_topic(name, queues)
        mq = MessageQueue(name, queues - 1)
        self._call(f"query_offset({'G0' + self.ns!r}, {name}/{queues - 1}) [empty]",
                   lambda b: b.query_offset("G0" + self.ns, mq))
        self._after()

    @precondition(lambda self: self._on("admin"))
    @precondition(lambda self: len([g for g in self.groups if g.startswith("G")]) < MAX_GROUPS)
    @rule(retry_max=RETRY_MAX, retry_queue_nums=st.sampled_from([1, 1, 2]))
    def create_group(self, retry_max: int, retry_queue_nums: int) -> None:
        if type(self).wall is not None:
            retry_max = min(retry_max, type(self).wall.max_retry)
        self._record("create_group", retry_max=retry_max, retry_queue_nums=retry_queue_nums)
        n = len([g for g in self.groups if g.startswith("G")])
        self._create_group(f"G{n}{self.ns}", retry_max, retry_queue_nums, False)
        self._after()

