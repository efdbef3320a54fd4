"""The client differential of the push consumer's rebalance table and pull loop (B4, E2, E10 in part).

Like ``test_client_differential.py`` (whose ``Oracle`` this module shares), Hypothesis draws an input, the
4.9.8 client's own classes answer it in one JVM (``interop/java/v4/PushOracle.java``, asked through
``ClientOracle``: its header says how each class is driven, by reflection, on an unstarted client instance
whose pull service and scheduled executor only record), rmqspec's reference consumer answers it too, and the
answers must agree:

- ``rebalance`` (B4, seed 001:25-33, 002:1261-1270): drawn rebalances of one topic's four queues, each with
  the queues assigned, the ProcessQueues whose consume lock is busy, those whose pull expired (120 s idle), the
  locks the broker refuses and the start offset each queue computes (or an exception), run through
  ``RebalanceImpl.updateProcessQueueTableInRebalance`` and the reference consumer's ``_rebalance_by_topic``
  (``model/consumer.py``), orderly or concurrent, clustering or broadcasting. Compared after each rebalance:
  the processQueueTable (queue, dropped, locked, tryUnlockTimes), the pull requests dispatched (queue, next
  offset), the unlocks made at once and the delays of those scheduled. A ProcessQueue whose consume lock is
  busy stays in the table, dropped and locked, and (still assigned) gets no new pull request, until a
  rebalance finds the lock free or its pull expired;
- ``pullCallback`` (E2, seed 002:1305-1342, 1614-1630; E10, 002:1428-1446): drawn pull outcomes (FOUND with
  drawn messages and tags under a drawn subscription, NO_NEW_MSG, NO_MATCHED_MSG, OFFSET_ILLEGAL, an exception
  thrown by the pull or handed to the callback) and a drawn pullInterval / pullBatchSize, run through
  ``DefaultMQPushConsumerImpl.pullMessage`` and its PullCallback and the reference ``pull_message`` /
  ``_on_pull_result``. Compared after each pull: the delay the request is re-armed with (none after
  OFFSET_ILLEGAL, which arms the 10 s fix instead, run at once), the request's next offset, the messages handed
  to the consume service and dispatchToConsume, the offset in memory, dropped, and the pull's offset, maxNums
  and piggybacked commitOffset (the offset in memory when > 0, clustering only).

Where the model stands in for what it does not run, the comparison says so: the model re-pulls NO_NEW_MSG
``long_polling_recheck_ms`` later, where 4.9.8 re-pulls at once and the broker holds the request (fidelity
CL20). A refused lock is drawn in broadcasting too: 4.9.8 and the model ask the broker for the lock of a new
queue of an orderly consumer in both message models (fidelity CL19).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import event, example, given
from hypothesis import strategies as st

from rmqspec.model.clock import ManualClock
from rmqspec.model.consumer import ConsumerConfig, MessageModel, PullRequest, PushConsumer
from rmqspec.model.consumer_concurrent import ConcurrentConsumer
from rmqspec.model.consumer_orderly import OrderlyConsumer
from rmqspec.model.directory import Directory
from rmqspec.model.message import MessageQueue, StoredMessage
from rmqspec.model.process_queue import ProcessQueue
from rmqspec.model.results import PullResult, PullStatus
from tests.interop.realrmq import RealRocketMQ
from tests.interop.test_client_differential import CLIENT, Oracle

QUEUES = range(4)
NOW = 10**9  # the reference consumer's clock; an expired pull is 0, as the JVM's


@pytest.fixture(scope="module")
def oracle(realrmq: RealRocketMQ) -> Iterator[Oracle]:
    o = Oracle(RealRocketMQ(CLIENT).java("ClientOracle"))
    yield o
    o.close()
    print(f"ClientOracle answered {o.asked} push requests")


def _config(broadcasting: bool, **kwargs: Any) -> ConsumerConfig:
    return ConsumerConfig(message_model=MessageModel.BROADCASTING if broadcasting else MessageModel.CLUSTERING,
                          **kwargs)


# -- B4: the process-queue table through rebalances ------------------------------------------------------------

class _Rebalancing:
    """The reference consumer's rebalance with the JVM's inputs: the queues assigned, the locks the broker grants,
    the start offsets; its unlocks and dispatched pull requests noted (the JVM's are recorded, not sent)."""

    def prepare(self, starts: dict[int, int | str]) -> None:
        self.starts = starts
        self.now_assigned: set[int] = set()
        self.refused: set[int] = set()
        self.unlocked = 0
        self.dispatched: list[tuple[int, int, int]] = []

    def assigned(self, topic: str) -> list[MessageQueue]:
        return [MessageQueue(topic, q, "b") for q in sorted(self.now_assigned)]

    def lock(self, mq: MessageQueue) -> bool:
        return mq.queue_id not in self.refused

    def unlock(self, mq: MessageQueue) -> None:
        self.unlocked += 1

    def compute_pull_from_where(self, mq: MessageQueue) -> int:
        start = self.starts[mq.queue_id]
        return start if isinstance(start, int) else -1  # 4.9.8 skips the queue on the exception, as on -1

    def _pull_later(self, req: PullRequest, delay: int) -> None:
        self.dispatched.append((req.mq.queue_id, req.next_offset, delay))


class _RebalancingOrderly(_Rebalancing, OrderlyConsumer):
    pass


class _RebalancingConcurrent(_Rebalancing, ConcurrentConsumer):
    pass


class _RemovesBusyQueues(_RebalancingOrderly):
    """Broken: removes a ProcessQueue whose consume lock is busy (a listener still runs on it)."""

    def remove_unnecessary_message_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        pq.consume_lock_held = False
        return super().remove_unnecessary_message_queue(mq, pq)


IDS = st.sets(st.sampled_from(list(QUEUES)))
FEW = st.sets(st.sampled_from(list(QUEUES)), max_size=1)  # rarer: an expired pull, a refused lock
STEP = st.fixed_dictionaries({"assigned": IDS, "busy": IDS, "expired": FEW, "refused": FEW})
STARTS = st.fixed_dictionaries({q: st.one_of(st.integers(0, 9), st.integers(0, 9), st.just(-1), st.just("throw"))
                                for q in QUEUES})


def _rebalance_answers(cls: type[PushConsumer], broadcasting: bool, starts: dict[int, int | str],
                       steps: list[dict[str, set[int]]]) -> list[dict[str, Any]]:
    clock = ManualClock(NOW)
    directory = Directory("b")
    directory.add_route("T", len(QUEUES))
    consumer = cls(None, clock, directory, "G1", "127.0.0.1@1", lambda msgs, ctx: None,
                   config=_config(broadcasting))
    assert isinstance(consumer, _Rebalancing)
    consumer.prepare(starts)
    answers = []
    for step in steps:
        for mq, pq in consumer.process_queues.items():
            pq.consume_lock_held = mq.queue_id in step["busy"]
            pq.last_pull_timestamp = 0 if mq.queue_id in step["expired"] else clock.now()
        consumer.now_assigned = set(step["assigned"])
        consumer.refused = set(step["refused"])
        consumer.unlocked = 0
        consumer.dispatched = []
        consumer._rebalance_by_topic("T")
        assert {d for _, _, d in consumer.dispatched} <= {0}, consumer.dispatched  # dispatchPullRequest: at once
        later = [t for t in consumer.timers.pending() if t.kind == "unlock_delay"]
        for t in later:  # the JVM's scheduled unlocks are recorded, never run
            consumer.timers.cancel(t)
        answers.append({
            "table": [[mq.queue_id, pq.dropped, pq.locked, pq.try_unlock_times]
                      for mq, pq in sorted(consumer.process_queues.items(), key=lambda e: e[0].queue_id)],
            "pulls": sorted([q, offset] for q, offset, _ in consumer.dispatched),
            "unlocksNow": consumer.unlocked,
            "unlocksLater": [t.due - clock.now() for t in later],
        })
    return answers


def _ask_rebalance(oracle: Oracle, orderly: bool, broadcasting: bool, starts: dict[int, int | str],
                   steps: list[dict[str, set[int]]]) -> list[dict[str, Any]]:
    return oracle.ask("rebalance", orderly=orderly, broadcasting=broadcasting,
                      starts={str(q): v for q, v in starts.items()},
                      steps=[{k: sorted(v) for k, v in s.items()} for s in steps])["ok"]


BUSY_STUCK = [{"assigned": {0, 1}, "busy": set(), "expired": set(), "refused": set()},
              {"assigned": {1}, "busy": {0}, "expired": set(), "refused": set()},  # 0 stays, dropped and locked
              {"assigned": {0, 1}, "busy": {0}, "expired": set(), "refused": set()},  # back: still the dead one
              {"assigned": {1}, "busy": set(), "expired": set(), "refused": set()}]  # free: removed, unlocked


@given(orderly=st.sampled_from([True, True, False]), broadcasting=st.sampled_from([False, False, True]), starts=STARTS,
       steps=st.lists(STEP, min_size=2, max_size=5))
@example(orderly=True, broadcasting=False, starts=dict.fromkeys(QUEUES, 3), steps=BUSY_STUCK)
@example(orderly=True, broadcasting=False, starts={0: 0, 1: "throw", 2: -1, 3: 7},
         steps=[{"assigned": set(QUEUES), "busy": set(), "expired": set(), "refused": {3}}])
@example(orderly=True, broadcasting=True, starts=dict.fromkeys(QUEUES, 0),
         steps=[{"assigned": set(QUEUES), "busy": set(), "expired": set(), "refused": {1}},
                {"assigned": set(QUEUES), "busy": set(), "expired": set(), "refused": set()}])
@example(orderly=False, broadcasting=False, starts=dict.fromkeys(QUEUES, 0),
         steps=[{"assigned": {0}, "busy": set(), "expired": set(), "refused": set()},
                {"assigned": {0}, "busy": set(), "expired": {0}, "refused": set()},
                {"assigned": {0}, "busy": set(), "expired": set(), "refused": set()}])
def test_rebalance_process_queue_table(oracle: Oracle, orderly: bool, broadcasting: bool,
                                       starts: dict[int, int | str], steps: list[dict[str, set[int]]]) -> None:
    """B4. 4.9.8 (client jar, ``javap -c``): ``updateProcessQueueTableInRebalance`` walks the table: a queue of the
    topic no longer assigned, or (a push consumer: CONSUME_PASSIVELY) whose pull expired, is set dropped and
    removed only when ``removeUnnecessaryMessageQueue`` answers true (orderly clustering with its consume lock
    busy: false, ``incTryUnlockTimes``); then each assigned queue not in the table: orderly → ``lock(mq)`` or
    skip; ``removeDirtyOffset``; a new ProcessQueue ``setLocked(true)``; ``computePullFromWhereWithException``
    (an exception or a negative offset skips the queue); ``putIfAbsent`` and a PullRequest at that offset;
    finally ``dispatchPullRequest`` (``executePullRequestImmediately`` each). A queue still in the table, even
    dropped, gets no new ProcessQueue. A client that removes a queue whose listener still runs, re-creates a
    stuck one, or keeps one whose pull expired, fails here."""
    real = _ask_rebalance(oracle, orderly, broadcasting, starts, steps)
    ours = _rebalance_answers(_RebalancingOrderly if orderly else _RebalancingConcurrent, broadcasting, starts, steps)
    assert ours == real, (orderly, broadcasting, starts, steps)
    for after in real:
        event("a busy queue kept, dropped and locked" if any(r[1] for r in after["table"]) else "no queue kept")


def test_a_client_removing_busy_queues_is_caught(oracle: Oracle) -> None:
    """The comparison catches a client that removes an orderly queue whose listener still runs."""
    starts: dict[int, int | str] = dict.fromkeys(QUEUES, 3)
    real = _ask_rebalance(oracle, True, False, starts, BUSY_STUCK)
    assert real[1]["table"] == [[0, True, True, 1], [1, False, True, 0]]  # stuck: dropped, locked, one try
    assert _rebalance_answers(_RebalancingOrderly, False, starts, BUSY_STUCK) == real
    assert _rebalance_answers(_RemovesBusyQueues, False, starts, BUSY_STUCK) != real


# -- E2: pullMessage and its PullCallback ----------------------------------------------------------------------

def _message(offset: int, tags: str | None) -> StoredMessage:
    return StoredMessage(msg_id=f"{offset:032X}", uniq_key=f"{offset + 1:032X}", topic="T", queue_id=0,
                         queue_offset=offset, commitlog_offset=offset * 100, body=b"x", tags=tags, keys=(),
                         properties={} if tags is None else {"TAGS": tags}, reconsume_times=0, born_ts=0,
                         store_ts=0, sys_flag=0, prepared_txn_offset=0)


Outcome = tuple[str, int, int, list[str | None]]


class _Answers:
    """The broker the reference consumer pulls from answers the drawn outcomes, one per pull, as the JVM's
    PullAPIWrapper answers the real PullCallback; it notes each pull's offset and maxNums and the commitOffset
    piggybacked (the offset the client sent before the pull)."""

    def __init__(self, outcomes: list[Outcome]) -> None:
        self.outcomes = outcomes
        self.turn = 0
        self.asked: list[int] | None = None
        self.committed = -1
        self.piggyback_on = False

    def update_offset(self, group: str, mq: MessageQueue, offset: int) -> None:
        self.committed = offset

    def pull(self, group: str, mq: MessageQueue, offset: int, max_nums: int, expression: str) -> PullResult:
        self.asked = [offset, max_nums, self.committed if self.piggyback_on else -1]
        status, count, delta, tags = self.outcomes[self.turn]
        if status in ("THROW", "EXCEPTION"):
            raise ConnectionError("pull failed")
        msgs = tuple(_message(offset + i, tags[i]) for i in range(count))
        return PullResult(PullStatus[status], msgs, offset + delta, 0, offset + delta)


class _Submitting:
    """The consume service notes what the pull loop hands it (the JVM's records it), runs nothing."""

    submitted: dict[str, Any] | None = None

    def _submit_consume_request(self, msgs: Any, pq: ProcessQueue, mq: MessageQueue, dispatch: bool) -> None:
        self.submitted = {"offsets": [m.queue_offset for m in msgs], "dispatch": dispatch}


class _SubmittingOrderly(_Submitting, OrderlyConsumer):
    pass


class _SubmittingConcurrent(_Submitting, ConcurrentConsumer):
    pass


class _IgnoresPullInterval(_SubmittingConcurrent):
    """Broken: re-pulls at once after FOUND, whatever pullInterval says."""

    def _pull_later(self, req: PullRequest, delay: int) -> None:
        super()._pull_later(req, 0 if delay == self.config.pull_interval_ms else delay)


def _pull_answers(cls: type[PushConsumer], case: dict[str, Any]) -> list[dict[str, Any]]:
    clock = ManualClock(NOW)
    cfg = _config(case["broadcasting"], pull_interval_ms=case["pullInterval"], pull_batch_size=case["pullBatchSize"])
    answers = _Answers(case["outcomes"])
    consumer = cls(answers, clock, Directory("b"), "G1", "127.0.0.1@1", lambda msgs, ctx: None, config=cfg)
    assert isinstance(consumer, _Submitting)
    if case["subscribe"] is not None:
        consumer.subscribe("T", case["subscribe"])
    consumer.running = True  # started, as far as pullMessage looks (the JVM's service state is RUNNING)
    mq = MessageQueue("T", 0, "b")
    if case["memory"] is not None:
        consumer.offset_store.update_offset(mq, case["memory"], False)
    pq = ProcessQueue(created_at=clock.now())
    pq.put_messages([_message(o, None) for o in case["held"]])
    pq.locked = case["locked"]
    req = PullRequest(mq, pq, case["start"], previously_locked=True)
    out = []
    for turn, (status, *_) in enumerate(case["outcomes"]):
        answers.turn, answers.asked, consumer.submitted = turn, None, None
        answers.piggyback_on = consumer.clustering and consumer.offset_store.read_memory(mq) > 0
        consumer.pull_message(req)
        pending = consumer.timers.pending()
        pulls = [t for t in pending if t.kind == "pull"]
        tasks = [t for t in pending if t.kind == "offset_illegal"]
        assert len(pulls) + len(tasks) == len(pending), pending
        for t in pending:
            consumer.timers.pop(t)
        delay = pulls[-1].due - clock.now() if pulls else None
        if status == "NO_NEW_MSG" and answers.asked is not None and delay == cfg.long_polling_recheck_ms:
            delay = 0  # fidelity CL20: 4.9.8 re-pulls at once and the broker holds the pull
        for t in tasks:
            t.action()
        out.append({"delay": delay, "rearms": len(pulls), "task": tasks[0].due - clock.now() if tasks else None,
                    "next": req.next_offset, "submitted": consumer.submitted,
                    "memory": consumer.offset_store.read_memory(mq), "dropped": pq.dropped, "asked": answers.asked})
    return out


def _ask_pulls(oracle: Oracle, orderly: bool, case: dict[str, Any]) -> list[dict[str, Any]]:
    real = oracle.ask("pullCallback", orderly=orderly, **case)["ok"]
    for step in real:
        asked = step["asked"]
        if asked is not None:  # brokerSuspendMaxTimeMillis, timeoutMillis, mode: the model's pull has none (E10)
            assert asked[3:] == [15000, 30000, "ASYNC"], asked
            step["asked"] = asked[:3]
    return real


TAGS = st.sampled_from([None, "A", "B"])
OUTCOME = st.one_of(
    st.tuples(st.just("FOUND"), st.integers(0, 3), st.integers(0, 5), st.lists(TAGS, min_size=3, max_size=3)),
    st.tuples(st.sampled_from(["NO_NEW_MSG", "NO_MATCHED_MSG", "OFFSET_ILLEGAL"]), st.just(0), st.integers(-3, 5),
              st.just([])),
    st.tuples(st.sampled_from(["THROW", "EXCEPTION"]), st.just(0), st.just(0), st.just([])),
)
CASE = st.fixed_dictionaries({
    "broadcasting": st.booleans(),
    "pullInterval": st.one_of(st.just(0), st.integers(1, 65535)),
    "pullBatchSize": st.sampled_from([1, 32, 1024]),
    "subscribe": st.sampled_from(["*", "*", "A", "A || B", None]),
    "start": st.integers(0, 5),
    "memory": st.one_of(st.none(), st.integers(-1, 6)),
    "held": st.lists(st.integers(0, 5), max_size=3, unique=True),
    "locked": st.sampled_from([True, True, True, False]),  # orderly: an unlocked queue is not pulled
    "outcomes": st.lists(OUTCOME, min_size=1, max_size=6),
})
FOUND_AFTER_INTERVAL = {"broadcasting": False, "pullInterval": 2000, "pullBatchSize": 32, "subscribe": "A",
                        "start": 3, "memory": 2, "held": [], "locked": True,
                        "outcomes": [("FOUND", 3, 3, ["A", None, "B"]), ("NO_NEW_MSG", 0, 0, []),
                                     ("FOUND", 2, 2, ["B", None]), ("EXCEPTION", 0, 0, []), ("THROW", 0, 0, []),
                                     ("NO_MATCHED_MSG", 0, 4, []), ("OFFSET_ILLEGAL", 0, -5, []),
                                     ("FOUND", 1, 1, [None])]}


@given(orderly=st.booleans(), case=CASE)
@example(orderly=False, case=FOUND_AFTER_INTERVAL)
@example(orderly=True, case={**FOUND_AFTER_INTERVAL, "held": [1], "pullInterval": 0, "subscribe": "*"})
@example(orderly=False, case={**FOUND_AFTER_INTERVAL, "subscribe": None})
@example(orderly=True, case={**FOUND_AFTER_INTERVAL, "locked": False})
def test_pull_callback(oracle: Oracle, orderly: bool, case: dict[str, Any]) -> None:
    """E2, E10. 4.9.8 (client jar, ``javap -c``): ``pullMessage`` (dropped → nothing; the guards of E9; orderly and the
    ProcessQueue not locked, or no subscription of the topic → re-arm after ``pullTimeDelayMillsWhenException``,
    which the consumer copies from ``ClientConfig``: 1000 ms) pulls ``pullKernelImpl(…, nextOffset, pullBatchSize,
    sysFlag, commitOffset, 15000, 30000, ASYNC, PullCallback)`` with the commitOffset flag when clustering and the
    offset in memory is > 0; a throw re-arms after pullTimeDelayMillsWhenException. The PullCallback:
    ``processPullResult`` (decode, the tag filter); FOUND → nextOffset = nextBeginOffset, an empty list re-pulls at
    once, else ``putMessage``, ``submitConsumeRequest(list, pq, mq, dispatchToConsume)`` and a re-pull
    ``pullInterval`` later (at once when 0); NO_NEW_MSG / NO_MATCHED_MSG → nextOffset, ``correctTagsOffset`` (an
    increase-only update when msgCount is 0), at once; OFFSET_ILLEGAL → nextOffset, dropped, and 10000 ms later the
    fix (updateOffset, persist, removeProcessQueue), no re-pull; ``onException`` → pullTimeDelayMillsWhenException.
    A client that ignores pullInterval, re-pulls a dropped queue, or corrects the offset while messages are cached,
    fails here."""
    real = _ask_pulls(oracle, orderly, case)
    ours = _pull_answers(_SubmittingOrderly if orderly else _SubmittingConcurrent, case)
    assert ours == real, (orderly, case)
    for (status, *_), after in zip(case["outcomes"], real, strict=True):
        delay = "pullInterval" if after["delay"] == case["pullInterval"] != 0 else after["delay"]
        event(f"{status}: re-armed after {delay}" if after["asked"] else "no pull")


def test_a_client_ignoring_pull_interval_is_caught(oracle: Oracle) -> None:
    """The comparison catches a client that re-pulls at once after FOUND although pullInterval is 2000 ms."""
    real = _ask_pulls(oracle, False, FOUND_AFTER_INTERVAL)
    assert real[0]["delay"] == 2000
    assert _pull_answers(_SubmittingConcurrent, FOUND_AFTER_INTERVAL) == real
    assert _pull_answers(_IgnoresPullInterval, FOUND_AFTER_INTERVAL) != real
