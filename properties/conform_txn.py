"""The transactional producer of the conformance machine: halves, ends, checks.

Theory of operation
-------------------
``TxnRules`` (a mixin of ``ConformanceBase``) plays producer group ``PG``. A half is sent with a
*plan* (``Txn.plan``): COMMIT, ROLLBACK, UNKNOWN (answers every check UNKNOWN until the discard)
or LOST (its END_TRANSACTION never arrives; checks decide). ``txn_end`` sends the plan;
``txn_recommit`` repeats a COMMIT (4.9.8 writes a second message: an observation, not in
``strict``); ``answer_check`` answers a pending ``CheckRequest`` (or loses the answer);
``txn_half_before_check`` sends a half on an edge of the check service's next round (too young
by half a timeout or by 1 ms, aged exactly the timeout, or 1 ms older). A half acknowledged but
unflushed when the power failed is ``maybe_lost``: its producer no longer ends it (its offsets
may name another half), the check service does. ``txn_end`` events are recorded only for a
SUCCESS answer.
"""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from rmqspec.model.results import CheckRequest, ResponseCode, TxnAction
from rmqspec.properties.conform_base import PICK, Txn, _enabled, _pick


class TxnRules:
    """Mixin: the transactional producer and its check replies."""

    # ------------------------------------------------------------------
    # transactions

    @precondition(lambda self: self._on("txn"))
    @rule(topic=PICK, queue=PICK, plan=st.sampled_from(["COMMIT", "ROLLBACK", "UNKNOWN", "LOST"]))
    def txn_send_half(self, topic: int, queue: int, plan: str) -> None:
        self._record("txn_send_half", topic=topic, queue=queue, plan=plan)
        self._send_half(topic, queue, plan)
        self._after()

    def txn_half_before_check(self, topic: int, queue: int, edge: int | None = None) -> None:
        """CHECK: a half the next check round finds too young — sent half a timeout before it, or
        (``edge`` = +1) transactionTimeOut − 1 ms before it — must not be checked in that round; one
        aged exactly the timeout (``edge`` 0) or 1 ms more (−1) must be. The round is the check
        service's next as the machine mirrors its timer (``edges.py``)."""
        self._record("txn_half_before_check", topic=topic, queue=queue, **({} if edge is None else {"edge": edge}))
        timeout = self.config.transaction_timeout_ms
        lead = timeout // 2 if edge is None else timeout - edge
        if self._next_round() - self._now() < lead:  # too close: that round runs first
            self._advance(max(0, self._next_round() - self._now()))
        boundary = self._next_round()
        probe = boundary - lead
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
            self.sent_at(msg.uniq_key)
            self.txns[msg.uniq_key] = Txn(msg.uniq_key, name, qid, res.commitlog_offset,
                                          res.queue_offset, plan, born=self._now())
            self._emit("txn_half", actor=self.pg, group=self.pg, topic=name, queue_id=qid,
                       queue_offset=res.queue_offset, commitlog_offset=res.commitlog_offset,
                       msg_key=msg.uniq_key, msg_id=res.msg_id, txn_id=msg.uniq_key,
                       status=res.status.value)

    def _end(self, txn: Txn, action: TxnAction, commitlog_offset: int, tsto: int, from_check: bool) -> None:
        batched = (type(self).wall is not None and self.config.behaviour.op_batch
                   and action is not TxnAction.UNKNOWN)
        if type(self).wall is not None and self.ls is not None:
            # drain answers checks after its reveals, which may take seconds: by then the broker's next
            # round may be re-putting the same half (4.9.8 checks a half every round until its op
            # exists), so the answer, like every request, leaves outside a round's quiet window and
            # after the model replayed the rounds before it (docs/fidelity.md O2); 5.1.0+: its op message
            # is written a batch pass later, and no fire may fall in between (the two would race for
            # the CommitLog)
            self._wall_before("", horizon_ms=self._op_batch_within() if batched else 0)
        op_end = self.ls.candidate.op_queue_end(self.obs) if batched else 0
        out = self._call(
            f"end_transaction({self.pg!r}, {commitlog_offset}, {tsto}, {action.value}, {from_check})",
            lambda b: b.end_transaction(self.pg, commitlog_offset, tsto, action, from_check))
        code = out.value if out.error is None else ResponseCode.SYSTEM_ERROR
        if batched and code == ResponseCode.SUCCESS:
            self._await_op_batch(op_end)
        elif type(self).wall is not None and self.ls.enabled and code == ResponseCode.SUCCESS \
                and action is not TxnAction.UNKNOWN:  # UNKNOWN writes no op
            self._op_landed()
        self._sometimes(f"txn_end:{action.value}:{ResponseCode(code).name}")
        if code == ResponseCode.SUCCESS:
            self._emit("txn_end", actor=self.pg, group=self.pg, topic=txn.topic,
                       queue_id=txn.queue_id, msg_key=txn.key, txn_id=txn.key, status=action.value,
                       commitlog_offset=commitlog_offset, queue_offset=tsto,
                       detail={"from_check": from_check})
            if action is not TxnAction.UNKNOWN:
                txn.decided = action.value
                self._noted_end(txn)

    def _op_batch_within(self) -> int:
        """5.1.0+ (wall clock): how long after an END its op message is surely written."""
        return 3 * self.config.transaction_op_batch_interval_ms + type(self).wall.tolerance_ms

    def _await_op_batch(self, op_end: int) -> None:
        """5.1.0+ (wall clock): the broker writes the END's op message at a later pass of its op batch
        service. Wait until it is seen in the op queue; the model writes its pending ops at that
        moment, after replaying what the broker did before it (``_wall_tick``)."""
        within = self._op_batch_within()
        if self.ls.candidate.await_op(self.obs, op_end, within):
            self.op_writes.append(self._sync())
            self._sometimes("wall_op_batch_seen")
            self._wall_catch_up()
        else:
            self._fail(f"the op message of an END_TRANSACTION was not written within {within} ms "
                       "(transactionOpBatchInterval × 3 + tolerance)")

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
